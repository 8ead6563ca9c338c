#!/usr/bin/env bash
# The official openai Python client (PyPI, pinned with its dependencies and
# jsonschema in openai-requirements.txt) in .tools/openai-venv, for the
# real-client test of `anechat serve` (make api-clients:
# cli/serve_clients_test.go). See pinned-venv.sh.
set -euo pipefail
source "$(dirname "$0")/pinned-venv.sh"
pinned_venv openai openai
