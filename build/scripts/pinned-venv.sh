#!/usr/bin/env bash
# pinned_venv NAME MODULE: the venv .tools/NAME-venv (git-ignored) holding
# exactly the set pinned in build/scripts/NAME-requirements.txt, installed
# with --no-deps (nothing is resolved at test time), checked by importing
# MODULE. Idempotent: does nothing when the venv holds the pinned set. Needs
# python3 with venv (Debian: python3-venv, which sysdeps.sh installs).
# Sourced by the deps-*.sh scripts of the real-client tests.
pinned_venv() {
	local name=$1 module=$2
	local root venv req stamp
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	venv=$root/.tools/$name-venv
	req=$root/build/scripts/$name-requirements.txt
	stamp=$venv/.requirements
	if [[ -x $venv/bin/python && -f $stamp ]] && cmp -s "$stamp" "$req"; then
		return 0
	fi
	command -v python3 >/dev/null || { echo "deps-$name: python3 is required (Debian: apt-get install python3 python3-venv)" >&2; return 1; }
	rm -rf "$venv"
	python3 -m venv "$venv" || { echo "deps-$name: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; return 1; }
	"$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --no-deps -r "$req"
	"$venv/bin/python" -c "import $module" # the pinned set imports
	cp "$req" "$stamp"
}
