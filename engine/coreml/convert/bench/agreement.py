#!/usr/bin/env python3
"""Agreement figures of a bundle against the CPU backend (for BENCHMARKS.md).

    python bench/agreement.py stories|gemma4|gemma4-peaked [--weights fp16|int8|lut4|lut6]
        [--head-weights W] [--palette kmeans|uniform] [--sidecars int8|fp16]

Builds the tests' bundle of the model, then over the tests' 12 prompts x 32
greedy ids: how many prompts give exactly the CPU backend's ids, and the
largest |logit| difference teacher-forced along the CPU's own sequence, both
against the checkpoint the bundle holds (refmodel: fp16 or the bundle's
palettised weights, the INT8 sidecars' embeddings: fp16 arithmetic alone;
not for int8 weights) and against the original
checkpoint (the whole error of the format).
"""
import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, ".."))

import conftest  # noqa: E402
from anebundle import bundle as bundle_mod  # noqa: E402
from anebundle import refmodel  # noqa: E402
from anebundle.host import Bundle, generate  # noqa: E402
from test_agreement import PROMPTS  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model", choices=sorted(conftest.SOURCES))
    p.add_argument("--weights", default="fp16")
    p.add_argument("--head-weights", default=None)
    p.add_argument("--palette", default="kmeans")
    p.add_argument("--sidecars", default="int8")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="agreement-")
    import subprocess
    binary = os.path.join(work, "cpuref")
    subprocess.run(["go", "build", "-o", binary, "./engine/coreml/convert/cpuref"], cwd=conftest.ROOT, check=True)
    cpu = conftest.CPURef(binary, work)
    src = conftest.SOURCES[a.model]
    out = os.path.join(work, "bundle")
    opts = dict(conftest.TEST_OPTS[a.model], weights=a.weights, head_weights=a.head_weights, palette=a.palette,
                sidecars=a.sidecars)
    bundle_mod.convert(src, out, bundle_mod.Options(**opts))
    if a.model == "stories":
        ref = refmodel.write_llama_gguf(src, out, os.path.join(work, "ref.gguf"))
    else:
        ref = refmodel.write_gemma4_dir(src, out, os.path.join(work, "ref"))
    b = Bundle(out)
    for label, model in (("bundle's own checkpoint", ref), ("original checkpoint", src)):
        resp, _ = cpu.run(model, {"encode": PROMPTS})
        prompts = resp["encoded"]
        g, _ = cpu.run(model, {"greedy": [{"name": str(i), "ids": q, "n": 32} for i, q in enumerate(prompts)]})
        equal, err, scale = 0, 0.0, 0.0
        for i, q in enumerate(prompts):
            w = g["greedy"][str(i)]
            equal += generate(b, q, 32) == w
            _, t = cpu.run(model, {"sequences": [{"name": "s", "steps": [{"tokens": q + w[:-1], "commit": 0}]}]})
            z = t["s.0.logits"][len(q) - 1:]
            kv = b.new_kv()
            b.prefill(q[:-1], kv) if len(q) > 1 else None
            rows = []
            for tok in [q[-1]] + w[:-1]:
                c = b.call([tok], kv.n, kv, "sample")
                b.commit(kv, c, 1)
                rows.append(c.logits[0].astype(np.float32))
            err = max(err, float(np.abs(np.array(rows) - z).max()))
            scale = max(scale, float(np.abs(z).max()))
        print(f"{a.model} {a.weights} weights (head {a.head_weights or a.weights}, palette {a.palette}), "
              f"{a.sidecars} sidecars, vs the CPU backend on the {label}: {equal}/{len(prompts)} prompts x 32 ids "
              f"equal; max |logit error| {err:.4f} (max |logit| {scale:.2f})")


if __name__ == "__main__":
    main()
