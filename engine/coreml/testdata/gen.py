"""Test data of the Core ML backend's host side (engine/coreml), made by
build/scripts/deps-coremlhost.sh into build/testdeps/coreml (never
committed). Needs the converter's venv (build/scripts/deps-coreml.sh) and
the converter itself (engine/coreml/convert, on PYTHONPATH).

    python gen.py OUT

writes into OUT:

- gemma4-exact/: the Gemma 4 fixture (engine/cpu/testdata/gemma4/model)
  made into a checkpoint whose values a bundle holds exactly: every weight
  rounded to fp16, the output projection untied (the fp16 embedding), and
  embedding rows chosen so that the CPU backend's scaled rows
  (row * sqrt(hidden), in float32) are q * 2^k with int8 q: INT8 sidecars
  with fp16 scales store them without loss, and so do fp16 sidecars (the
  per-layer table alike, with its scale sqrt(ple_dim)). The CPU backend on
  this checkpoint and the Core ML backend on its bundle then start from the
  same numbers, and the reference runner (float32, the CPU kernels) must
  give the CPU backend's logits bit for bit.
- gemma4-exact.bundle/: its bundle, int8 sidecars, chunks 0-1, 2-3, 4-5
  (KV-shared layers read rows computed in an earlier chunk), K=8, N=16,
  context 128 (the window is 8, the sliding ring 24 slots).
- gemma4-fp16.bundle/: the same checkpoint, fp16 sidecars, one chunk.
- stories.bundle/: stories260K (../shared/models), int8 sidecars, K=8,
  N=16, context 128; stories-ref.gguf: the checkpoint that bundle holds,
  for the CPU backend (the converter's refmodel: fp16 weights, the
  sidecars' embedding values).
- golden.json + golden.bin: every input the Python host (anebundle.host)
  builds for a few calls of each bundle, with synthetic KV rows, as fp16
  bits: the Go host's inputs must equal them.
"""
import json
import math
import os
import shutil
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
GEMMA = os.path.join(ROOT, "engine", "cpu", "testdata", "gemma4", "model")
STORIES = os.path.join(ROOT, "..", "shared", "models", "stories260K.gguf")


def exact_rows(m0: np.ndarray) -> np.ndarray:
    """Rows q * 2^k (int8 q, one element at +-127 per row) near m0."""
    m0 = m0.astype(np.float64)
    out = np.zeros_like(m0)
    for r in range(m0.shape[0]):
        row = m0[r]
        amax = float(np.abs(row).max())
        if amax == 0:
            continue
        k = math.floor(math.log2(amax / 127))
        step = 2.0 ** k
        q = np.clip(np.rint(row / step), -127, 127)
        i = int(np.argmax(np.abs(row)))
        q[i] = 127 if row[i] > 0 else -127
        out[r] = q * step
    return out.astype(np.float32)


def preimage(m: np.ndarray, scale: np.float32) -> np.ndarray:
    """float32 e with float32(e * scale) == m for every element."""
    e = (m / scale).astype(np.float32)
    for _ in range(8):
        bad = (e * scale).astype(np.float32) != m
        if not bad.any():
            return e
        up = (e * scale) < m
        e = np.where(bad, np.where(up, np.nextafter(e, np.float32(np.inf)), np.nextafter(e, np.float32(-np.inf))), e)
    raise SystemExit("gen.py: no float32 preimage for some embedding values")


def f16(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32).astype(np.float16).astype(np.float32)


def gemma4_exact(out: str) -> str:
    d = os.path.join(out, "gemma4-exact")
    os.makedirs(d)
    with open(os.path.join(GEMMA, "config.json")) as f:
        cfg = json.load(f)
    t = load_file(os.path.join(GEMMA, "model.safetensors"))
    H, P = cfg["hidden_size"], cfg["hidden_size_per_layer_input"]
    new = {}
    for name, w in t.items():
        new[name] = f16(w)
    emb = t["model.embed_tokens.weight"]
    s = np.float32(math.sqrt(H))
    new["model.embed_tokens.weight"] = preimage(exact_rows(emb * s), s)
    new["lm_head.weight"] = f16(emb)
    ple = t["model.embed_tokens_per_layer.weight"]
    sp = np.float32(math.sqrt(P))
    new["model.embed_tokens_per_layer.weight"] = preimage(exact_rows(ple * sp), sp)
    cfg["tie_word_embeddings"] = False
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_file({k: np.ascontiguousarray(v) for k, v in sorted(new.items())}, os.path.join(d, "model.safetensors"))
    for name in ("tokenizer.json", "generation_config.json"):
        shutil.copyfile(os.path.join(GEMMA, name), os.path.join(d, name))
    return d


def kv_row(s: int, q: int, kvh: int, hd: int, v: bool) -> np.ndarray:
    """A synthetic committed K (or V) row of owner s at position q,
    [kvh, hd], fp16-exact; golden_test.go computes the same."""
    h = np.arange(kvh)[:, None]
    d = np.arange(hd)[None, :]
    x = ((s * 7 + q * 3 + h * 5 + d + (11 if v else 0)) % 31 - 15) / 8.0
    return x.astype(np.float16)


def golden(out: str, cases):
    from anebundle.host import Bundle, KV
    index, blob, off = [], [], 0
    for bundle_dir, kind, tokens, start in cases:
        b = Bundle(os.path.join(out, bundle_dir))
        kv = KV(b.owners)
        for s in b.owners:
            l = b.layers[s]
            for q in range(start):
                kv.k[s][q] = kv_row(s, q, l["kv_heads"], l["head_dim"], False)
                kv.v[s][q] = kv_row(s, q, l["kv_heads"], l["head_dim"], True)
        kv.n = start
        width = b.geo["generate_width" if kind == "generate" else "prefill_width"]
        x = b.inputs_for(tokens, start, width, kv, kind == "prefill")
        entry = {"bundle": bundle_dir, "kind": kind, "tokens": tokens, "start": start, "inputs": {}}
        for name in sorted(x):
            a = np.ascontiguousarray(x[name], dtype=np.float16)
            entry["inputs"][name] = {"offset": off, "shape": list(a.shape)}
            blob.append(a.view(np.uint16).astype("<u2").tobytes())
            off += a.size
        index.append(entry)
    with open(os.path.join(out, "golden.bin"), "wb") as f:
        for b_ in blob:
            f.write(b_)
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump({"cases": index}, f, indent=1)


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: gen.py OUT")
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    from anebundle import bundle as bundle_mod
    from anebundle import refmodel
    src = gemma4_exact(out)
    base = dict(width=8, prefill=16, context=128)
    bundle_mod.convert(src, os.path.join(out, "gemma4-exact.bundle"), bundle_mod.Options(chunks="0-1,2-3,4-5", **base))
    bundle_mod.convert(src, os.path.join(out, "gemma4-fp16.bundle"), bundle_mod.Options(sidecars="fp16", **base))
    st = os.path.join(out, "stories.bundle")
    bundle_mod.convert(STORIES, st, bundle_mod.Options(**base))
    refmodel.write_llama_gguf(STORIES, st, os.path.join(out, "stories-ref.gguf"))
    golden(out, [
        ("gemma4-exact.bundle", "generate", [5], 0),
        ("gemma4-exact.bundle", "generate", [7, 9, 11], 13),
        ("gemma4-exact.bundle", "generate", [1, 2, 3, 4, 5, 6, 7, 8], 30),
        ("gemma4-exact.bundle", "prefill", list(range(3, 19)), 0),
        ("gemma4-exact.bundle", "prefill", [40, 41, 42, 43, 44], 57),
        ("gemma4-fp16.bundle", "generate", [100, 200], 21),
        ("stories.bundle", "generate", [50, 60], 5),
        ("stories.bundle", "prefill", list(range(20, 36)), 20),
        ("stories.bundle", "generate", [300], 127),
    ])


if __name__ == "__main__":
    main()
