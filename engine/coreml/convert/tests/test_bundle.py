"""The bundle on disk: what the saved packages declare matches the
manifest, each chunk stores its weights once, and bad input fails before
anything is written."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from anebundle import bundle as bundle_mod
from anebundle import interp
from anebundle.checkpoint import CheckpointError
from conftest import CONVERT, GEMMA, STORIES

DTYPES = {65552: "fp16", 131104: "int32", 65568: "fp32"}  # Core ML ArrayFeatureType codes


# weight.bin / the chunk's weights at fp16, per weight option: about one
# copy (norm gammas are stored doubled for the [x, -x] trick, each linear
# has a zero bias, quantised weights carry scales; int4 leaves weights whose
# input width is not a multiple of its block of 32 in fp16). One copy per
# function would double these.
SIZE_RATIO = {"fp16": (0.9, 1.3), "int8": (0.45, 0.75), "lut4": (0.2, 0.6), "lut6": (0.3, 0.7)}


def check_manifest(root):
    """Every chunk package has exactly the manifest's functions, each with
    the manifest's inputs and outputs (names, shapes, dtypes) both in the
    model description and in the MIL program read back; returns the
    packages."""
    with open(os.path.join(root, "manifest.json")) as f:
        m = json.load(f)
    assert m["format"] == "anechat-coreml-bundle" and m["format_version"] == 2
    pkgs = []
    for c in m["chunks"]:
        pkg = interp.Package(os.path.join(root, c["package"]))
        pkgs.append(pkg)
        descs = {f.name: f for f in pkg.spec.description.functions}
        assert sorted(descs) == sorted(f["name"] for f in c["functions"])
        last = c["index"] == len(m["chunks"]) - 1
        assert [f["kind"] for f in c["functions"]] == (["generate", "sample", "prefill"] if last else ["generate", "prefill"])
        assert sorted(pkg.functions()) == sorted(descs)
        for f in c["functions"]:
            d = descs[f["name"]]
            for side, feats in (("inputs", d.input), ("outputs", d.output)):
                got = [{"name": x.name, "shape": list(x.type.multiArrayType.shape),
                        "dtype": DTYPES[x.type.multiArrayType.dataType]} for x in feats]
                assert got == f[side], f"{c['package']} {f['name']} {side}"
            fn = pkg.prog.functions[f["name"]]
            got = [{"name": k, "shape": [int(s) for s in v.shape], "dtype": interp._dtype_name(v.sym_type)}
                   for k, v in fn.inputs.items()]
            assert got == f["inputs"]
            got = [{"name": v.name, "shape": [int(s) for s in v.shape], "dtype": interp._dtype_name(v.sym_type)}
                   for v in fn.outputs]
            assert got == f["outputs"]
        wbin = os.path.join(root, c["package"], "Data", "com.apple.CoreML", "weights", "weight.bin")
        size = os.path.getsize(wbin)
        lo, hi = SIZE_RATIO[m["converter"]["weights"]]
        assert lo * c["weight_bytes"] <= size <= hi * c["weight_bytes"] + 8192, (size, c["weight_bytes"])
    from anebundle.checkpoint import sha256_file
    for name, sc in m["sidecars"].items():
        int8 = sc["data"]["dtype"] == "int8"
        assert int8 == (m["converter"]["sidecars"] == "int8") == ("scales" in sc)
        for part in ("data", "scales") if int8 else ("data",):
            assert sha256_file(os.path.join(root, sc[part]["file"])) == sc[part]["sha256"]
        assert os.path.getsize(os.path.join(root, sc["data"]["file"])) == sc["rows"] * sc["cols"] * (1 if int8 else 2)
        if int8:
            assert os.path.getsize(os.path.join(root, sc["scales"]["file"])) == 2 * sc["rows"]
    return m, pkgs


def test_manifest_matches_packages(model):
    m, pkgs = check_manifest(model.dir)
    assert [c["layers"] for c in m["chunks"]] == ([[0, 5]] if model.name == "stories" else [[0, 2], [2, 4], [4, 6]])
    ops = set()
    for p in pkgs:
        ops |= set(p.op_types())
    # Only ops the interpreter implements (and tests op by op); no tanh:
    # the softcap runs on the host.
    assert ops <= {"const", "linear", "matmul", "add", "mul", "concat", "layer_norm", "slice_by_index", "reshape",
                   "transpose", "softmax", "silu", "gelu", "identity", "reduce_argmax", "reduce_max"}, ops
    assert m["geometry"]["argmax_block"] == 64


def _last_tail(pkg, fname):
    """The ops after the final norm of a last-chunk function."""
    ops = list(pkg.prog.functions[fname].operations)
    i = max(k for k, op in enumerate(ops) if op.op_type == "slice_by_index")
    return [op.op_type for op in ops[i + 1:] if op.op_type != "const"]


def test_lean_generation_function(model):
    """The last chunk's generate function returns the blockwise argmax and
    no logits: after the final norm only the output projection (one matmul
    giving [1, nb, T, B], its input reshaped) and the two reductions over a
    block of 64 ids; sample returns the matmul's logits (no op after it);
    prefill both. No elementwise op or reduction touches the vocabulary
    axis."""
    m, pkgs = check_manifest(model.dir)
    last = m["chunks"][-1]
    fns = {f["kind"]: f for f in last["functions"]}
    outs = {k: {d["name"]: (d["shape"], d["dtype"]) for d in f["outputs"] if "_new_" not in d["name"]}
            for k, f in fns.items()}
    assert outs["generate"] == {"block_argmax": ([1, 8, 8], "int32"), "block_max": ([1, 8, 8], "fp16")}
    assert outs["sample"] == {"logits": ([1, 8, 8, 64], "fp16")}
    assert outs["prefill"] == {"block_argmax": ([1, 8, 1], "int32"), "block_max": ([1, 8, 1], "fp16"),
                               "logits": ([1, 8, 1, 64], "fp16")}
    assert _last_tail(pkgs[-1], fns["generate"]["name"]) == ["reshape", "matmul", "reduce_argmax", "reduce_max"]
    assert _last_tail(pkgs[-1], fns["sample"]["name"]) == ["reshape", "matmul"]
    assert _last_tail(pkgs[-1], fns["prefill"]["name"]) == ["reshape", "matmul", "reduce_argmax", "reduce_max"]
    for op in pkgs[-1].prog.functions[fns["generate"]["name"]].operations:
        if op.op_type.startswith("reduce_"):
            assert op.inputs["x"].shape[-1] == 64


def test_default_shapes(tmp_path):
    """The defaults: generation width 8, prefill 64, context 2048."""
    out = str(tmp_path / "b")
    bundle_mod.convert(STORIES, out, bundle_mod.Options())
    m, _ = check_manifest(out)
    names = [f["name"] for f in m["chunks"][0]["functions"]]
    assert names == ["generate_8", "sample_8", "prefill_64"]
    g = m["geometry"]
    assert (g["context"], g["generate_width"], g["prefill_width"], g["argmax_block"]) == (2048, 8, 64, 512)
    f = {f["name"]: f for f in m["chunks"][0]["functions"]}
    shapes = {d["name"]: d["shape"] for d in f["prefill_64"]["inputs"]}
    assert shapes["hidden_in"] == [1, 64, 64] and shapes["mask_full"] == [1, 1, 64, 2048]
    assert shapes["k_cache_0"] == [1, 4, 2048, 8] and shapes["last"] == [1, 1, 64]
    outs = {d["name"]: (d["shape"], d["dtype"]) for d in f["generate_8"]["outputs"]}
    assert outs["block_argmax"] == ([1, 1, 8], "int32") and outs["block_max"] == ([1, 1, 8], "fp16")
    assert "logits" not in outs
    outs = {d["name"]: (d["shape"], d["dtype"]) for d in f["sample_8"]["outputs"]}
    assert outs["logits"] == ([1, 1, 8, 512], "fp16")


def test_argmax_block():
    """The default block is the largest divisor of the vocabulary up to
    16384 (Gemma's 262144 ids: 16 blocks of 16384); a --argmax-block that
    does not divide the vocabulary, or is above 16384, fails before
    anything is written."""
    from anebundle.graph import argmax_block
    assert [argmax_block(v) for v in (262144, 512, 32000, 128256, 151936, 16411)] == [16384, 512, 16000, 16032, 9496, 1]


@pytest.mark.parametrize("block", [100, 0, 32768])
def test_bad_argmax_block_fails_before_writing(tmp_path, block):
    out = tmp_path / "out"
    with pytest.raises(CheckpointError, match="--argmax-block"):
        bundle_mod.convert(STORIES, str(out), bundle_mod.Options(prefill=16, context=64, argmax_block=block))
    assert list(tmp_path.iterdir()) == []


def _gemma_copy(tmp_path, edit_config=None, drop=None, reshape=None):
    from safetensors.numpy import load_file, save_file
    d = tmp_path / "ckpt"
    shutil.copytree(GEMMA, d)
    if edit_config:
        cfg = json.loads((d / "config.json").read_text())
        edit_config(cfg)
        (d / "config.json").write_text(json.dumps(cfg))
    if drop or reshape:
        t = load_file(str(d / "model.safetensors"))
        if drop:
            del t[drop]
        if reshape:
            t[reshape] = t[reshape][:-1]
        save_file(t, str(d / "model.safetensors"))
    return str(d)


@pytest.mark.parametrize("case,needle", [
    ("missing", "model.layers.3.mlp.up_proj.weight"),
    ("shape", "model.layers.1.self_attn.k_proj.weight"),
    ("config", "model.layers.0.mlp.gate_proj.weight"),  # intermediate_size disagrees with the tensor
    ("moe", "enable_moe_block"),
    ("layer_type", "chunked_attention"),
])
def test_bad_checkpoint_fails_before_writing(tmp_path, case, needle):
    def cfg_edit(c):
        if case == "config":
            c["intermediate_size"] = 100
        elif case == "moe":
            c["enable_moe_block"] = True
        elif case == "layer_type":
            c["layer_types"][2] = "chunked_attention"
    src = _gemma_copy(tmp_path, edit_config=cfg_edit if case in ("config", "moe", "layer_type") else None,
                      drop=needle if case == "missing" else None, reshape=needle if case == "shape" else None)
    out = tmp_path / "out"
    with pytest.raises(CheckpointError) as e:
        bundle_mod.convert(src, str(out), bundle_mod.Options(prefill=16, context=64))
    assert needle in str(e.value)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"], "something was written"


def test_cli_reports_bad_input(tmp_path):
    p = subprocess.run([sys.executable, "-m", "anebundle", str(tmp_path / "nope.gguf"), str(tmp_path / "out")],
                       cwd=CONVERT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "nope.gguf" in p.stderr and "no such file" in p.stderr
    assert not (tmp_path / "out").exists()


def test_interrupted_conversion_leaves_no_bundle(tmp_path, monkeypatch):
    """The bundle is built under a temporary name and renamed when
    complete: an interruption (here, after the chunk packages) leaves
    neither the bundle nor its temporary directory."""
    def boom(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(bundle_mod, "_write_tokenizer", boom)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        bundle_mod.convert(STORIES, str(out), bundle_mod.Options(prefill=16, context=64))
    assert list(tmp_path.iterdir()) == []


def test_existing_output_is_kept_without_force(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(CheckpointError, match="--force"):
        bundle_mod.convert(STORIES, str(out), bundle_mod.Options(prefill=16, context=64))
    assert (out / "keep").read_text() == "x"


@pytest.mark.parametrize("weights,op_type", [("int8", "constexpr_blockwise_shift_scale"),
                                            ("lut4", "constexpr_lut_to_dense")])
def test_compressed_weights(tmp_path, weights, op_type):
    """--weights int8 (per-channel linear) and lut4 (the default: a 16-entry
    palette per 16 rows) store the weights once and compressed; only the
    linear layers' weights and the output projection's are (the RoPE
    rotation stays exact); the interpreter's decompression of every
    constexpr op equals coremltools' own, bit for bit; LUT4 palettes have
    16 fp16 entries per 16 rows (ids, for the output projection); the
    bundle runs."""
    from anebundle.host import Bundle, generate
    out = str(tmp_path / weights)
    bundle_mod.convert(STORIES, out, bundle_mod.Options(prefill=16, context=64, weights=weights, argmax_block=64))
    m, pkgs = check_manifest(out)
    assert m["converter"]["weights"] == m["converter"]["head_weights"] == weights
    n = head = 0
    for p in pkgs:
        assert op_type in p.op_types()
        for fn in p.prog.functions.values():
            for op in fn.operations:
                if op.op_type.startswith("constexpr_"):
                    assert op.op_type == op_type
                    users = op.outputs[0].child_ops
                    assert all(u.op_type == "linear" or u.op_type == "matmul" and u.y is op.outputs[0]
                               and u.name.startswith(("lm_head", "logits")) for u in users), op.name
                    head += any(u.op_type == "matmul" for u in users)
                    mine = interp.run_op(op, {})[0]
                    ref = op.materialized_val_inference()
                    assert mine.dtype == ref.dtype and np.array_equal(mine, ref), op.name
                    if op_type == "constexpr_lut_to_dense":
                        lut, idx = op.inputs["lut"].val, op.inputs["indices"].val
                        # One palette per 16 rows: a linear's [rows, cols]
                        # has rows/16; the head's [1, nb, B, H] nb * B/16
                        # (16 ids of a block each).
                        axis = 2 if idx.ndim == 4 else 0
                        want = list(idx.shape[:axis]) + [idx.shape[axis] // 16] + [1] * (idx.ndim - axis - 1) + [16, 1]
                        assert list(lut.shape) == want and lut.dtype == np.float16, (op.name, lut.shape)
                    n += 1
    assert n > 0 and head == 3  # the head's weight, in each of the 3 functions
    ids = generate(Bundle(out), [1, 403, 407, 261, 378], 8)
    assert len(ids) == 8 and all(0 <= i < 512 for i in ids)


def test_palette_modes_and_workers(tmp_path):
    """--palette uniform spaces each group's 16 entries evenly between its
    minimum and maximum, kmeans does not; palettising with --workers 2
    stores exactly the bytes of --workers 1 (the palettes do not depend on
    the process that made them)."""
    wb = {}
    for palette, workers in (("uniform", 1), ("uniform", 2), ("kmeans", 1)):
        out = str(tmp_path / f"{palette}{workers}")
        bundle_mod.convert(STORIES, out, bundle_mod.Options(prefill=16, context=64, palette=palette, workers=workers))
        m, pkgs = check_manifest(out)
        assert m["converter"]["palette"] == palette
        wb[palette, workers] = open(os.path.join(out, "chunk_0.mlpackage", "Data", "com.apple.CoreML", "weights",
                                                 "weight.bin"), "rb").read()
        fn = next(iter(pkgs[0].prog.functions.values()))
        lut = next(op for op in fn.operations if op.op_type == "constexpr_lut_to_dense").inputs["lut"].val
        steps = np.diff(lut.reshape(-1, 16).astype(np.float64), axis=1)
        even = np.abs(steps - steps.mean(axis=1, keepdims=True)) <= 2e-3 * np.abs(lut).max()
        assert even.all() == (palette == "uniform")
    assert wb["uniform", 1] == wb["uniform", 2]
    assert wb["uniform", 1] != wb["kmeans", 1]


def test_palettised_weights_drop_their_fp16_copy():
    """Once a chunk's matrices are palettised (graph.Weights.prepare), the
    fp16 copy of each is gone (a chunk holds its weights once, compressed:
    the conversion's peak memory) and the palettes stay; the norms, which
    are not palettised, stay fp16."""
    from anebundle import checkpoint as ckpt
    from anebundle.graph import Chunk, Geometry, Weights
    ck = ckpt.load(GEMMA)
    w = Weights(ck, "lut4", "lut4")
    jobs = bundle_mod._matrices(ck, Chunk(0, 0, 6, True), Geometry(context=64, sliding_slots=24, argmax_block=64))
    w.prepare(jobs)
    palettised = {role for (role, _), p in w.luts.items() if p is not None}
    assert len(palettised) > 20 and "embed" in palettised
    assert not palettised & set(w.cache), sorted(palettised & set(w.cache))
    w.get("layers.0.in_norm")
    assert "layers.0.in_norm" in w.cache and w.fp16_bytes["layers.0.wq"] == 2 * 64 * 64


def test_int4_is_refused_with_what_to_use(tmp_path):
    """int4 in blocks (dropped: not what the Neural Engine guide
    recommends) fails before writing, naming lut4 and int8 instead."""
    out = tmp_path / "out"
    for kw in (dict(weights="int4"), dict(head_weights="int4")):
        with pytest.raises(CheckpointError, match="int4 .* dropped.* lut4 .* int8"):
            bundle_mod.convert(STORIES, str(out), bundle_mod.Options(prefill=16, context=64, **kw))
    with pytest.raises(CheckpointError, match="--palette 'median'"):
        bundle_mod.convert(STORIES, str(out), bundle_mod.Options(prefill=16, context=64, palette="median"))
    assert list(tmp_path.iterdir()) == []


def test_fp16_sidecars(tmp_path):
    """--sidecars fp16: plain fp16 embedding rows (no scales), equal to the
    checkpoint's rows times the value scale rounded to fp16."""
    from anebundle import checkpoint as ckpt
    from anebundle.host import Bundle
    out = str(tmp_path / "b")
    bundle_mod.convert(GEMMA, out, bundle_mod.Options(prefill=16, context=64, sidecars="fp16"))
    m, _ = check_manifest(out)
    ck = ckpt.load(GEMMA)
    b = Bundle(out)
    ids = [0, 5, 300, 511]
    assert np.array_equal(b.embed.rows_of(ids), (ck.weight("embed")[ids] * np.float32(8)).astype(np.float16))
    assert np.array_equal(b.ple.rows_of(ids), (ck.weight("ple_embed")[ids] * np.float32(4)).astype(np.float16))


@pytest.mark.parametrize("case,needle", [
    ("scaling", "llama.rope.scaling.type"),
    ("missing", "blk.2.ffn_up.weight"),
    ("shape", "blk.1.attn_k.weight"),
])
def test_bad_gguf_fails_before_writing(tmp_path, case, needle):
    import gguf
    r = gguf.GGUFReader(STORIES)
    src = str(tmp_path / "bad.gguf")
    w = gguf.GGUFWriter(src, "llama")
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vt = f.types[0]
        w.add_key_value(key, f.contents(), vt, f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None)
    if case == "scaling":
        w.add_string("llama.rope.scaling.type", "linear")
    for t in r.tensors:
        if case == "missing" and t.name == needle:
            continue
        a = np.asarray(t.data, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])
        if case == "shape" and t.name == needle:
            a = a[:-1]
        w.add_tensor(t.name, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = tmp_path / "out"
    with pytest.raises(CheckpointError) as e:
        bundle_mod.convert(src, str(out), bundle_mod.Options(prefill=16, context=64))
    assert needle in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.gguf"], "something was written"
