#!/usr/bin/env bash
# Python packages of the Core ML converter and its tests (engine/coreml/convert),
# pinned, into a project-local venv (.tools/venv, git-ignored): coremltools 9.0
# (Linux wheels: MIL builder, save and read back .mlpackage files; no predictions),
# numpy, safetensors and gguf (checkpoint readers), kmeans1d (the optimal 1-D
# k-means coremltools uses for LUT palettes, --weights lut4), pytest. No torch.
# Idempotent: does nothing when the venv already holds exactly these versions.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.tools/venv
pins=(coremltools==9.0 numpy==2.4.6 safetensors==0.8.0 gguf==0.19.0 kmeans1d==0.5.0 pytest==9.2.0)
stamp="$venv/.anechat-pins"
want="${pins[*]}"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
if ! command -v python3 >/dev/null; then
	echo "deps-coreml: python3 (3.10 or newer) is required for the Core ML converter" >&2
	exit 1
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check "${pins[@]}"
"$venv/bin/python" -c "import coremltools, numpy, safetensors, gguf, kmeans1d, pytest" 2>/dev/null
echo "$want" >"$stamp"
