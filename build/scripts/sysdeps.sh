#!/usr/bin/env bash
# Installs the system packages that building and testing anechat need, only
# those that are missing. Debian/Ubuntu: apt-get (as root, or through sudo).
# macOS: checks for the Xcode command line tools and Node.js, installs nothing.
set -euo pipefail

case "$(uname -s)" in
Darwin)
	xcode-select -p >/dev/null 2>&1 || { echo "sysdeps: install the Xcode command line tools: xcode-select --install" >&2; exit 1; }
	command -v npm >/dev/null || { echo "sysdeps: install Node.js 20 or newer (e.g. brew install node)" >&2; exit 1; }
	exit 0
	;;
Linux) ;;
*) echo "sysdeps: unsupported OS $(uname -s)" >&2; exit 1 ;;
esac

# What the build links (GTK, WebKitGTK 4.1), what the tests run (Xvfb,
# Chromium for Playwright, ImageMagick's import for the screenshot, curl),
# python3-venv for the Core ML converter's venv (build/scripts/deps-coreml.sh)
# and the openai and ollama clients that test the HTTP API (deps-openai.sh,
# deps-ollama.sh), and
# qemu-user for the arm64 tests.
pkgs=(pkg-config build-essential libgtk-3-dev libwebkit2gtk-4.1-dev xvfb xauth chromium imagemagick curl python3-venv)
# qemu-user runs the engine's arm64 test binaries on x86-64 (build/scripts/test-arm64.sh).
if [[ "$(uname -m)" == x86_64 ]]; then
	pkgs+=(qemu-user-static)
fi
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v npm >/dev/null || missing+=(nodejs npm)
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
command -v apt-get >/dev/null || { echo "sysdeps: missing ${missing[*]} and no apt-get: install them by hand" >&2; exit 1; }
sudo=()
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null || { echo "sysdeps: need root to install ${missing[*]}" >&2; exit 1; }
	sudo=(sudo)
fi
echo "sysdeps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
