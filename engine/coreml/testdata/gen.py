"""Test data of the Core ML backend's host side (engine/coreml), made by
build/scripts/deps-coremlhost.sh into build/testdeps/coreml (never
committed). Needs the converter's venv (build/scripts/deps-coreml.sh) and
the converter itself (engine/coreml/convert, on PYTHONPATH).

    python gen.py OUT

writes into OUT:

Every bundle but gemma4-lut4 holds fp16 weights (--weights fp16).

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
  context 128 (the window is 8, the sliding ring 24 slots), the argmax in
  8 blocks of 64 ids.
- gemma4-fp16.bundle/: the same checkpoint, fp16 sidecars, one chunk, the
  argmax in 4 blocks of 128 ids.
- gemma4-lut4.bundle/: the same checkpoint converted with the defaults
  (LUT4 weights, the planner's chunks, the default argmax block) but K=8,
  N=16, context 128: `bundle audit` must find no violation in the default
  conversion.
- gemma4-ties/ and gemma4-ties.bundle/: the same checkpoint with its output
  projection's rows repeated (refmodel.write_planted_ties: every maximum an
  exact tie inside a block of 64 ids, a third of them across two blocks),
  one chunk: the two-level argmax must pick the lowest id as the CPU
  backend's flat argmax does.
- gemma4-wide/ and gemma4-wide.bundle/: the same checkpoint with its
  vocabulary widened to 32768 ids (refmodel.write_wide_vocab), one chunk,
  the default argmax block (16384: 2 blocks): `bundle audit` must find no
  op but the output projection's matmul with a last axis over 16384.
- stories.bundle/: stories260K (../shared/models), int8 sidecars, K=8,
  N=16, context 128, the default argmax block (the whole 512-token
  vocabulary); stories-ref.gguf: the checkpoint that bundle holds, for the
  CPU backend (the converter's refmodel: fp16 weights, the sidecars'
  embedding values).
- golden.json + golden.bin: every input the Python host (anebundle.host)
  builds for a few calls of each bundle, with synthetic KV rows, as fp16
  bits: the Go host's inputs must equal them.
- audit-violations.mlpackage: a tiny package that breaks each rule of
  `anechat bundle audit` (engine/coreml/mlprogram/audit.go) once, beside
  ops that must pass; its functions are described in audit_violations().
- audit-expected.json: for every package above, each function's op count
  (constants excluded; coremltools' milproto loader), constant count and
  weight bytes (its protobuf classes), for the Go reader to match.
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
        width = b.geo["prefill_width" if kind == "prefill" else "generate_width"]
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


def audit_violations(out: str) -> str:
    """audit-violations.mlpackage, one function per concern:
    rules: argmax_20000 (reduce_argmax over an axis of 20000, not the last:
    the reduction rule only), head_20000 (a linear with a last axis of
    20000: exempt) feeding tanh_20000 (the last-axis rule), int_add (an
    int32 input plus 1: the integer rule); flexible: an input with a range
    of shapes (dynamic-shape); enumerated: an input with enumerated shapes
    (passes); many_ops: 1801 adds (op-count, default limit 1800)."""
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import get_new_symbol, types
    W = 20000
    work = os.path.join(out, ".audit-work")
    os.makedirs(work)

    def save(prog, name, inputs=None):
        m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                       pass_pipeline=ct.PassPipeline.EMPTY, compute_units=ct.ComputeUnit.CPU_AND_NE,
                       skip_model_load=True, inputs=inputs)
        p = os.path.join(work, name + ".mlpackage")
        m.save(p)
        return p

    fp16, i32 = types.fp16, types.int32
    head = np.random.default_rng(26).standard_normal((W, 4)).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec((1, W, 4), dtype=fp16), mb.TensorSpec((1, 4), dtype=fp16),
                             mb.TensorSpec((1, 4), dtype=i32)], opset_version=ct.target.iOS18)
    def rules(wide, h, ids):
        am = mb.reduce_argmax(x=wide, axis=1, keep_dims=False, name="argmax_20000")
        t = mb.tanh(x=mb.linear(x=h, weight=head, name="head_20000"), name="tanh_20000")
        return am, t, mb.add(x=ids, y=np.int32(1), name="int_add")

    @mb.program(input_specs=[mb.TensorSpec((1, get_new_symbol()), dtype=fp16)], opset_version=ct.target.iOS18)
    def flexible(flex):
        return mb.mul(x=flex, y=np.float16(2), name="flex_mul")

    @mb.program(input_specs=[mb.TensorSpec((1, get_new_symbol()), dtype=fp16)], opset_version=ct.target.iOS18)
    def enumerated(e):
        return mb.mul(x=e, y=np.float16(2), name="enum_mul")

    @mb.program(input_specs=[mb.TensorSpec((1, 4), dtype=fp16)], opset_version=ct.target.iOS18)
    def many_ops(x):
        for i in range(1801):
            x = mb.add(x=x, y=np.float16(1), name=f"add_{i}")
        return x

    desc = ct.utils.MultiFunctionDescriptor()
    desc.add_function(save(rules, "rules"), "main", "rules")
    desc.add_function(save(flexible, "flexible", [ct.TensorType(name="flex", shape=(1, ct.RangeDim(1, 64, default=4)),
                                                                dtype=np.float16)]), "main", "flexible")
    desc.add_function(save(enumerated, "enumerated", [ct.TensorType(
        name="e", shape=ct.EnumeratedShapes(shapes=[(1, 4), (1, 8)], default=(1, 4)), dtype=np.float16)]),
        "main", "enumerated")
    desc.add_function(save(many_ops, "many_ops"), "main", "many_ops")
    desc.default_function_name = "rules"
    path = os.path.join(out, "audit-violations.mlpackage")
    ct.utils.save_multifunction(desc, path)
    shutil.rmtree(work)
    return path


# Bits per element of the MIL data types (MIL.proto, DataType).
_BITS = {10: 16, 11: 32, 12: 64, 13: 16, 21: 8, 22: 16, 23: 32, 24: 64, 25: 4, 31: 8, 32: 16, 33: 32, 34: 64,
         35: 4, 36: 2, 37: 1, 38: 6, 39: 3, 40: 8, 41: 8}


def audit_expected(out: str, packages):
    """audit-expected.json: per package (path relative to out) and
    function, the ops (const and constexpr_* excluded, nested blocks
    included) as coremltools' milproto loader reads the program; the
    constants (const and constexpr_* operations) as the protobuf stores
    them; and the bytes of the weight blobs it references, from the blob
    values' types (element count x bits), each (file, offset) counted
    once."""
    from anebundle.interp import load_package
    from coremltools.proto import Model_pb2

    def count(block):
        ops = 0
        for op in block.operations:
            ops += not (op.op_type == "const" or op.op_type.startswith("constexpr_"))
            for b in op.blocks:
                ops += count(b)
        return ops

    def proto_constants(block):
        # The const and constexpr_* operations the program stores. Counted
        # on the protobuf, not on the loader's program: the loader turns
        # every value bound inline (a constexpr op's indices and palette)
        # into a const op of its own, which the stored program does not
        # have.
        n = 0
        for op in block.operations:
            n += op.type == "const" or op.type.startswith("constexpr_")
            for b in op.blocks:
                n += proto_constants(b)
        return n

    def blobs(block, seen):
        for op in block.operations:
            values = list(op.attributes.values())
            for arg in op.inputs.values():
                values += [b.value for b in arg.arguments if b.HasField("value")]
            for v in values:
                if v.HasField("blobFileValue"):
                    t = v.type.tensorType
                    n = int(np.prod([d.constant.size for d in t.dimensions]))
                    seen[(v.blobFileValue.fileName, v.blobFileValue.offset)] = (n * _BITS[t.dataType] + 7) // 8
            for b in op.blocks:
                blobs(b, seen)
        return seen

    result = {}
    for pkg in packages:
        path = os.path.join(out, pkg)
        prog, _ = load_package(path)
        spec = Model_pb2.Model()
        with open(os.path.join(path, "Data", "com.apple.CoreML", "model.mlmodel"), "rb") as f:
            spec.ParseFromString(f.read())
        fns = {}
        for name, fn in prog.functions.items():
            ops = count(fn)
            pf = spec.mlProgram.functions[name]
            blk = pf.block_specializations[pf.opset]
            fns[name] = {"ops": ops, "constants": proto_constants(blk), "weight_bytes": sum(blobs(blk, {}).values())}
        result[pkg] = fns
    with open(os.path.join(out, "audit-expected.json"), "w") as f:
        json.dump({"packages": result}, f, indent=1, sort_keys=True)


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: gen.py OUT")
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    from anebundle import bundle as bundle_mod
    from anebundle import refmodel
    src = gemma4_exact(out)
    # fp16 weights: the bundles whose numbers the Go host checks bit for
    # bit against the CPU backend (gemma4-lut4 is the default conversion).
    base = dict(width=8, prefill=16, context=128, weights="fp16")
    bundle_mod.convert(src, os.path.join(out, "gemma4-exact.bundle"),
                       bundle_mod.Options(chunks="0-1,2-3,4-5", argmax_block=64, **base))
    bundle_mod.convert(src, os.path.join(out, "gemma4-fp16.bundle"),
                       bundle_mod.Options(sidecars="fp16", argmax_block=128, **base))
    bundle_mod.convert(src, os.path.join(out, "gemma4-lut4.bundle"), bundle_mod.Options(width=8, prefill=16, context=128))
    ties = refmodel.write_planted_ties(src, os.path.join(out, "gemma4-ties"), 64)
    bundle_mod.convert(ties, os.path.join(out, "gemma4-ties.bundle"), bundle_mod.Options(argmax_block=64, **base))
    wide = refmodel.write_wide_vocab(src, os.path.join(out, "gemma4-wide"), 32768)
    bundle_mod.convert(wide, os.path.join(out, "gemma4-wide.bundle"),
                       bundle_mod.Options(width=8, prefill=16, context=64, weights="fp16"))
    st = os.path.join(out, "stories.bundle")
    bundle_mod.convert(STORIES, st, bundle_mod.Options(**base))
    refmodel.write_llama_gguf(STORIES, st, os.path.join(out, "stories-ref.gguf"))
    golden(out, [
        ("gemma4-exact.bundle", "generate", [5], 0),
        ("gemma4-exact.bundle", "generate", [7, 9, 11], 13),
        ("gemma4-exact.bundle", "generate", [1, 2, 3, 4, 5, 6, 7, 8], 30),
        ("gemma4-exact.bundle", "sample", [7, 9, 11], 13),
        ("gemma4-exact.bundle", "prefill", list(range(3, 19)), 0),
        ("gemma4-exact.bundle", "prefill", [40, 41, 42, 43, 44], 57),
        ("gemma4-fp16.bundle", "generate", [100, 200], 21),
        ("stories.bundle", "generate", [50, 60], 5),
        ("stories.bundle", "prefill", list(range(20, 36)), 20),
        ("stories.bundle", "generate", [300], 127),
    ])
    audit_violations(out)
    audit_expected(out, sorted(
        os.path.relpath(os.path.join(root, d), out)
        for root, dirs, _ in os.walk(out) for d in dirs if d.endswith(".mlpackage")))


if __name__ == "__main__":
    main()
