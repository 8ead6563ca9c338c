#!/usr/bin/env python3
"""Reference dequantisations for engine/cpu's block formats (TestDequantReference).

Writes blocks.gguf beside this script: for every format the CPU backend reads
(F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) a
tensor of random blocks named after the format, and "<format>.ref", the F32
values the PyPI gguf package's reference dequantiser (gguf.quants.dequantize)
gives for it. Random bytes everywhere except the f16 scale fields, which get
finite halves of every kind (normal of both signs, subnormal, zero), so that
every bit of every field is exercised and the output has no NaN. The 32-value
formats use rows of 288 values (9 blocks: not a multiple of 256, a tail the
K formats forbid), the K formats rows of 512.

With --gemma3 PATH it instead writes gemma3_rows.json: for every quantised
tensor of that GGUF (the real Gemma 3 270M Q4_K_M file, see
build/scripts/deps-gemma3.sh) the sha256 of the float32 bits the gguf package
dequantises for a few rows (first, middle, last), which TestGemma3Tensors
compares with Matrix.Row.

Run with the pinned venv (gguf==0.19.0, numpy==2.2.6):
  python3 -m venv .tools/venv-gguf
  .tools/venv-gguf/bin/pip install gguf==0.19.0 numpy==2.2.6
  .tools/venv-gguf/bin/python engine/cpu/testdata/quants/make_fixtures.py
  .tools/venv-gguf/bin/python engine/cpu/testdata/quants/make_fixtures.py \
      --gemma3 build/testdeps/pypi/gemma-3-270m-q4_k_m.gguf
"""
import hashlib
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

HERE = os.path.dirname(os.path.abspath(__file__))

# Byte offsets of the f16 fields in one block of each format.
HALVES = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
ROWS = 2


def finite_halves(rng, n):
    """n float16 bit patterns: mostly normal values of moderate size, some
    subnormal, some zero, both signs."""
    kind = rng.integers(0, 10, n)
    mag = rng.uniform(-12, 3, n)
    vals = np.where(kind < 8, np.exp2(mag), 0.0).astype(np.float16).view(np.uint16)
    sub = rng.integers(1, 0x400, n, dtype=np.uint16)  # subnormal halves
    vals = np.where(kind == 8, sub, vals)
    sign = rng.integers(0, 2, n, dtype=np.uint16) << 15
    return (vals | sign).astype(np.uint16)


def blocks(rng, qtype, cols):
    bsize, tsize = gguf.GGML_QUANT_SIZES[qtype]
    nb = ROWS * cols // bsize
    raw = rng.integers(0, 256, (nb, tsize), dtype=np.uint8)
    for off in HALVES.get(qtype, []):
        h = finite_halves(rng, nb)
        raw[:, off] = (h & 0xff).astype(np.uint8)
        raw[:, off + 1] = (h >> 8).astype(np.uint8)
    return raw.reshape(ROWS, cols // bsize * tsize)


def make_blocks():
    rng = np.random.default_rng(20260301)
    w = gguf.GGUFWriter(os.path.join(HERE, "blocks.gguf"), "quant-fixtures")
    w.add_string("fixture.made_by", "engine/cpu/testdata/quants/make_fixtures.py, gguf %s, numpy %s" % (
        getattr(gguf, "__version__", "0.19.0"), np.__version__))
    for qtype in [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
                  T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]:
        bsize, _ = gguf.GGML_QUANT_SIZES[qtype]
        cols = 512 if bsize == 256 else 288
        if qtype in (T.F16, T.BF16):
            # Every finite half / bfloat16 would not fit a small fixture;
            # random finite values of all magnitudes instead.
            bits = rng.integers(0, 1 << 16, ROWS * cols, dtype=np.uint16)
            expmask = 0x7c00 if qtype == T.F16 else 0x7f80
            bits = np.where(bits & expmask == expmask, bits & ~np.uint16(0x4000), bits).astype(np.uint16)
            raw = bits.view(np.uint8).reshape(ROWS, 2 * cols)
        else:
            raw = blocks(rng, qtype, cols)
        ref = gguf.quants.dequantize(raw, qtype).astype(np.float32).reshape(ROWS, cols)
        assert np.all(np.isfinite(ref)), qtype.name
        w.add_tensor(qtype.name, raw, raw_shape=raw.shape, raw_dtype=qtype)
        w.add_tensor(qtype.name + ".ref", ref)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gemma3_rows(path):
    r = gguf.GGUFReader(path)
    out = {"file_sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
           "made_by": "engine/cpu/testdata/quants/make_fixtures.py --gemma3, gguf %s, numpy %s" % (
               getattr(gguf, "__version__", "0.19.0"), np.__version__),
           "tensors": {}}
    for t in r.tensors:
        if t.tensor_type in (T.F32,):
            continue
        cols = int(t.shape[0])
        rows = int(np.prod(t.shape[1:])) if len(t.shape) > 1 else 1
        data = np.asarray(t.data).reshape(rows, -1)
        picks = sorted({0, rows // 2, rows - 1})
        rows_out = {}
        for i in picks:
            vals = gguf.quants.dequantize(data[i:i + 1], t.tensor_type).astype(np.float32).reshape(-1)
            assert vals.size == cols
            rows_out[str(i)] = hashlib.sha256(vals.astype("<f4").tobytes()).hexdigest()
        out["tensors"][t.name] = {"type": t.tensor_type.name, "rows": rows, "cols": cols, "sha256": rows_out}
    with open(os.path.join(HERE, "gemma3_rows.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--gemma3":
        gemma3_rows(sys.argv[2])
    elif len(sys.argv) == 1:
        make_blocks()
    else:
        sys.exit(__doc__)
