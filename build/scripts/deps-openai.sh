#!/usr/bin/env bash
# The official openai Python client (PyPI, pinned with its dependencies in
# openai-requirements.txt) in a venv under .tools/openai-venv (git-ignored),
# for the real-client test of `anechat serve` (make api-clients:
# cli/serve_clients_test.go). Needs python3 with venv (Debian: python3-venv,
# which sysdeps.sh installs). Idempotent: does nothing when the venv holds
# exactly the pinned set.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=$root/.tools/openai-venv
req=$root/build/scripts/openai-requirements.txt
stamp=$venv/.requirements

if [[ -x $venv/bin/python && -f $stamp ]] && cmp -s "$stamp" "$req"; then
	exit 0
fi
command -v python3 >/dev/null || { echo "deps-openai: python3 is required (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
rm -rf "$venv"
python3 -m venv "$venv" || { echo "deps-openai: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --no-deps -r "$req"
"$venv/bin/python" -c 'import openai' # the pinned set imports
cp "$req" "$stamp"
