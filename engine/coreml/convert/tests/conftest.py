"""Shared fixtures: the CPU backend's reference numbers (the cpuref Go
command), and bundles of the tiny models built once per test session."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CONVERT = os.path.dirname(HERE)
ROOT = os.path.abspath(os.path.join(CONVERT, "..", "..", ".."))
sys.path.insert(0, CONVERT)
os.environ.setdefault("TQDM_DISABLE", "1")

STORIES = os.path.join(ROOT, "..", "shared", "models", "stories260K.gguf")
GEMMA = os.path.join(ROOT, "engine", "cpu", "testdata", "gemma4", "model")
# The peaked fixture (its gen.py: an induction-copy model whose top logit
# leads by several units at every step) and the CPU backend's ids for it,
# recorded by go test ./engine/cpu -run TestGemma4Peaked -update-peaked.
PEAKED = os.path.join(ROOT, "engine", "cpu", "testdata", "gemma4-peaked")
SOURCES = {"stories": STORIES, "gemma4": GEMMA, "gemma4-peaked": os.path.join(PEAKED, "model")}

from anebundle import bundle as bundle_mod  # noqa: E402
from anebundle import refmodel  # noqa: E402
from anebundle.host import Bundle  # noqa: E402

# Small shapes keep the interpreter fast (the longest test sequence is a
# 30-token prompt plus 32 ids); one test builds the defaults. The argmax
# runs in blocks of 64 ids, so the 512-token vocabularies have 8 blocks
# (the default block would be the whole vocabulary).
# The suite's bundles hold fp16 weights, so they isolate fp16 arithmetic
# (the default LUT4 has its own tests: test_bundle's test_compressed_weights,
# test_agreement's test_lut4_bundle_matches_cpu).
TEST_OPTS = {
    "stories": dict(width=8, prefill=16, context=64, argmax_block=64, weights="fp16"),
    "gemma4": dict(width=8, prefill=16, context=64, chunks="0-1,2-3,4-5", argmax_block=64, weights="fp16"),
}
TEST_OPTS["gemma4-peaked"] = TEST_OPTS["gemma4"]


class CPURef:
    """Runs the CPU backend through engine/coreml/convert/cpuref."""

    def __init__(self, binary, workdir):
        self.binary = binary
        self.workdir = workdir
        self.n = 0

    def run(self, model, request):
        from safetensors.numpy import load_file
        self.n += 1
        out = os.path.join(self.workdir, f"cpuref{self.n}.safetensors")
        p = subprocess.run([self.binary, "-model", model, "-out", out], input=json.dumps(request),
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"cpuref failed: {p.stderr}")
        return json.loads(p.stdout), load_file(out)


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("convert"))


@pytest.fixture(scope="session")
def cpuref(workdir):
    binary = os.path.join(workdir, "cpuref")
    subprocess.run(["go", "build", "-o", binary, "./engine/coreml/convert/cpuref"], cwd=ROOT, check=True,
                   timeout=600)
    return CPURef(binary, workdir)


class Model:
    """A tiny model, its test bundle and the CPU reference of that bundle."""

    def __init__(self, name, src, bundle_dir, reference):
        self.name, self.src, self.dir, self.reference = name, src, bundle_dir, reference
        self.bundle = Bundle(bundle_dir)
        self.plain = {}  # prompt ids -> 32 greedy ids without speculation
        self.sampled = {}  # (prompt ids, seed) -> 32 sampled ids without speculation
        # The Go-recorded CPU ids of the source checkpoint (reference.json
        # cases: text, prompt_ids, greedy_ids), where the fixture has them.
        self.recorded = None
        if name == "gemma4-peaked":
            with open(os.path.join(PEAKED, "reference.json")) as f:
                self.recorded = json.load(f)["cases"]


def _build(name, workdir):
    src = SOURCES[name]
    if not os.path.exists(src):
        pytest.fail(f"{src} is missing (../shared/models must sit beside the repository)")
    out = os.path.join(workdir, f"{name}.bundle")
    bundle_mod.convert(src, out, bundle_mod.Options(**TEST_OPTS[name]))
    if name == "stories":
        ref = refmodel.write_llama_gguf(src, out, os.path.join(workdir, "stories-ref.gguf"))
    else:
        ref = refmodel.write_gemma4_dir(src, out, os.path.join(workdir, f"{name}-ref"))
    return Model(name, src, out, ref)


_models = {}


@pytest.fixture(scope="session", params=["stories", "gemma4", "gemma4-peaked"])
def model(request, workdir):
    if request.param not in _models:
        _models[request.param] = _build(request.param, workdir)
    return _models[request.param]


def long_axes(pkg, limit=16384):
    """The values computed at run time (function inputs, op results) of a
    loaded package whose last axis is longer than limit, as "function: op
    value shape" strings."""
    out = []
    for fn in pkg.prog.functions.values():
        for op in fn.operations:
            if op.op_type == "const":
                continue
            vs = [v for v in op.inputs.values() if not isinstance(v, (list, tuple)) and v.val is None] + list(op.outputs)
            out += [f"{fn.name}: {op.op_type} {v.name} {v.shape}" for v in vs if v.shape and int(v.shape[-1]) > limit]
    return out


def fp16_u():
    """The unit roundoff of fp16 (half an ulp at 1)."""
    return 2.0 ** -11
