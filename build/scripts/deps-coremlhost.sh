#!/usr/bin/env bash
# Test data of the Core ML backend's host side (engine/coreml): bundles of the
# tiny models made by the converter (engine/coreml/convert) and the inputs its
# Python host builds for a few calls (engine/coreml/testdata/gen.py), into
# build/testdeps/coreml (git-ignored). Runs after deps-coreml.sh (the venv).
# Bounded: about two minutes on 2 shared cores; redone only when gen.py, the
# converter or the fixtures change.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=.tools/venv/bin/python
convert=${ANEBUNDLE_DIR:-engine/coreml/convert}
out=build/testdeps/coreml
if [ ! -x "$py" ]; then
	echo "deps-coremlhost: $py missing: run build/scripts/deps-coreml.sh first" >&2
	exit 1
fi
if [ ! -d "$convert/anebundle" ]; then
	echo "deps-coremlhost: the converter ($convert/anebundle) is not in this checkout" >&2
	exit 1
fi
stories=../shared/models/stories260K.gguf
inputs=(engine/coreml/testdata/gen.py "$convert"/anebundle/*.py engine/cpu/testdata/gemma4/model/* "$stories")
stamp=$(cat "${inputs[@]}" | sha256sum | cut -d' ' -f1)
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
	exit 0
fi
tmp=$(mktemp -d build/testdeps/.coreml-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
PYTHONPATH="$PWD/$convert" TQDM_DISABLE=1 OPENBLAS_NUM_THREADS=1 timeout 1200 \
	"$py" engine/coreml/testdata/gen.py "$tmp/coreml" >"$tmp/log" 2>&1 || {
	grep -v 'Failed to load\|WARNING' "$tmp/log" >&2 || true
	echo "deps-coremlhost: gen.py failed" >&2
	exit 1
}
echo "$stamp" >"$tmp/coreml/.stamp"
rm -rf "$out"
mv "$tmp/coreml" "$out"
