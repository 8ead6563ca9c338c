#!/usr/bin/env bash
# The official ollama Python client (PyPI, pinned with its dependencies in
# ollama-requirements.txt) in .tools/ollama-venv, for the real-client test
# of the Ollama routes of `anechat serve` (make api-clients:
# cli/serve_clients_test.go). Its own venv: it needs httpx, where the openai
# client's set has httpx2. See pinned-venv.sh.
set -euo pipefail
source "$(dirname "$0")/pinned-venv.sh"
pinned_venv ollama ollama
