#!/usr/bin/env bash
# The official ollama Python client (PyPI, pinned with its dependencies in
# ollama-requirements.txt) in a venv under .tools/ollama-venv (git-ignored),
# for the real-client test of the Ollama routes of `anechat serve` (make
# api-clients: cli/serve_clients_test.go). Needs python3 with venv (Debian: python3-venv,
# which sysdeps.sh installs). Idempotent: does nothing when the venv holds
# exactly the pinned set.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=$root/.tools/ollama-venv
req=$root/build/scripts/ollama-requirements.txt
stamp=$venv/.requirements

if [[ -x $venv/bin/python && -f $stamp ]] && cmp -s "$stamp" "$req"; then
	exit 0
fi
command -v python3 >/dev/null || { echo "deps-ollama: python3 is required (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
rm -rf "$venv"
python3 -m venv "$venv" || { echo "deps-ollama: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --no-deps -r "$req"
"$venv/bin/python" -c 'import ollama' # the pinned set imports
cp "$req" "$stamp"
