"""Writing a bundle: chunk packages (multifunction, weights stored once),
INT8 sidecars, the tokenizer and manifest.json, into a directory that
appears complete or not at all."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np

from . import checkpoint as ckpt
from . import plan as plan_mod
from .checkpoint import Arch, Checkpoint, CheckpointError
from .graph import (GENERATE, HEAD_WEIGHT, MAX_REDUCE, PALETTE_MODES, PREFILL, SAMPLE, WEIGHT_OPTIONS, Chunk, Geometry,
                    TensorDesc, Weights, argmax_block, build_function)

FORMAT = "anechat-coreml-bundle"
# Version 2: the generation function returns a blockwise argmax and no
# logits, a sample function on the last chunk returns them before the
# softcap (README "Bundle layout"). Version 1 bundles are refused.
FORMAT_VERSION = 2
MANIFEST = "manifest.json"

log = logging.getLogger("anebundle")


@dataclasses.dataclass
class Options:
    width: int = 8  # generation function width K
    prefill: int = 64  # prefill function width N
    context: int = 2048  # at most; never more than the checkpoint's
    chunk_mb: float = plan_mod.DEFAULT_CHUNK_MIB  # weight bytes per package, at most (plan.py)
    max_ops: int = plan_mod.DEFAULT_MAX_OPS  # ops per function, at most (plan.py)
    chunks: Optional[str] = None  # explicit "0-7,8-24,25-34"
    weights: str = "lut4"  # graph.WEIGHT_OPTIONS: fp16 | int8 | lut4 | lut6
    head_weights: Optional[str] = None  # the output projection's; None: as weights
    palette: str = "kmeans"  # how lutN palettes are made: kmeans | uniform
    workers: int = 1  # processes palettising a chunk's matrices
    sidecars: str = "int8"  # int8 (per-row fp16 scales) | fp16
    argmax_block: Optional[int] = None  # B; None: the largest divisor of the vocabulary <= MAX_REDUCE
    force: bool = False  # replace an existing output directory


def head_weights(opt: Options) -> str:
    """The output projection's weight option: --head-weights, else --weights."""
    return opt.head_weights or opt.weights


def check_options(opt: Options):
    """Fails on a weight option, palette mode or worker count the
    converter does not offer, saying what to use instead."""
    for flag, v in (("--weights", opt.weights), ("--head-weights", head_weights(opt))):
        if v == "int4":
            raise CheckpointError(
                f"{flag} int4 (linear int4 in blocks of 32 columns) was dropped: Apple's guide recommends "
                f"per-channel scales or palettisation for the Neural Engine, which is what both reference projects "
                f"ship; use {flag} lut4 (4-bit palettes per 16 rows, the default) or int8 (per channel)")
        if v not in WEIGHT_OPTIONS:
            raise CheckpointError(f"{flag} {v!r} is not one of {', '.join(WEIGHT_OPTIONS)}")
    if opt.palette not in PALETTE_MODES:
        raise CheckpointError(f"--palette {opt.palette!r} is not one of {', '.join(PALETTE_MODES)}")
    if opt.workers < 1:
        raise CheckpointError(f"--workers {opt.workers} must be at least 1")


def plan_chunks(ck: Checkpoint, opt: Options, read_scalars: bool = True) -> List[plan_mod.Planned]:
    """The chunks of the bundle (plan.py): opt.chunks checked against the
    limits, or the planner's default plan. Fails, naming the layer or
    chunk, before anything is converted."""
    planner = plan_mod.Planner(ck, opt.width, opt.prefill, opt.weights, head_weights(opt),
                               plan_mod.Limits(int(opt.chunk_mb * plan_mod.MIB), opt.max_ops), read_scalars)
    if opt.chunks:
        return planner.check(plan_mod.parse_ranges(opt.chunks, len(ck.arch.layers)))
    return planner.plan()


def plan_json(model: str, opt: Options) -> dict:
    """`--plan`: the chunk plan of model as JSON, from config.json (or a
    GGUF header) alone, reading no weight (plan.plan_json's shape)."""
    check_options(opt)
    ck = ckpt.load_spec(model)
    planned = plan_chunks(ck, opt, read_scalars=False)
    return plan_mod.plan_json(planned, opt.weights, head_weights(opt),
                              plan_mod.Limits(int(opt.chunk_mb * plan_mod.MIB), opt.max_ops))


def quantize_rows(m: np.ndarray):
    """Per-row symmetric INT8: scale = max|row|/127 rounded to fp16, q =
    round(row/scale) clipped to +-127; a row reads back as q*scale."""
    m = np.asarray(m, dtype=np.float32)
    amax = np.abs(m).max(axis=1)
    scale = (amax / np.float32(127)).astype(np.float16)
    if not np.all(np.isfinite(scale)):
        raise CheckpointError("an embedding row is too large for an fp16 scale")
    s32 = scale.astype(np.float32)
    safe = np.where(s32 > 0, s32, np.float32(1))
    q = np.clip(np.rint(m / safe[:, None]), -127, 127).astype(np.int8)
    q[s32 == 0] = 0
    return q, scale


def _write_sidecar(out: str, name: str, ck: Checkpoint, role: str, value_scale: float, kind: str) -> dict:
    """Writes the table of role, times value_scale (in float32), as INT8
    rows with fp16 scales (kind "int8") or as fp16 rows ("fp16"), a block
    of rows at a time (the per-layer table of E2B is 262144 x 8960)."""
    rows, cols = ck.shapes[role]
    data = f"{name}.q8" if kind == "int8" else f"{name}.f16"
    scales = f"{name}.scales.f16"
    block = max(1, (64 << 20) // (4 * cols))
    fs = open(os.path.join(out, scales), "wb") if kind == "int8" else None
    try:
        with open(os.path.join(out, data), "wb") as fq:
            for lo in range(0, rows, block):
                m = ck.rows(role, lo, min(rows, lo + block))
                if value_scale != 1.0:
                    m = m * np.float32(value_scale)
                if kind == "int8":
                    q, scale = quantize_rows(m)
                    fq.write(q.tobytes())
                    fs.write(scale.astype("<f2").tobytes())
                else:
                    h = m.astype("<f2")
                    if not np.all(np.isfinite(h)):
                        raise CheckpointError(f"{ck.path}: {ck._names[role]} overflows fp16")
                    fq.write(h.tobytes())
    finally:
        if fs is not None:
            fs.close()
    d = {"rows": int(rows), "cols": int(cols),
         "data": {"file": data, "dtype": "int8" if kind == "int8" else "float16",
                  "sha256": ckpt.sha256_file(os.path.join(out, data))},
         "value_scale": float(value_scale)}
    if kind == "int8":
        d["scales"] = {"file": scales, "dtype": "float16", "sha256": ckpt.sha256_file(os.path.join(out, scales))}
    return d


def _write_tokenizer(ck: Checkpoint, out: str) -> dict:
    t = ck.tokenizer
    if t["kind"] == "tokenizer.json":
        shutil.copyfile(t["src"], os.path.join(out, "tokenizer.json"))
        d = {"kind": "tokenizer.json", "file": "tokenizer.json"}
        cfg = os.path.join(os.path.dirname(t["src"]), "tokenizer_config.json")
        if os.path.exists(cfg):
            shutil.copyfile(cfg, os.path.join(out, "tokenizer_config.json"))
            d["config"] = "tokenizer_config.json"
    else:
        # A GGUF holding only the source's tokenizer.* metadata, which the
        # engine's tokenizer reads as it reads any GGUF vocabulary.
        import gguf
        r = gguf.GGUFReader(t["src"])
        w = gguf.GGUFWriter(os.path.join(out, "tokenizer.gguf"), "llama")
        for key, f in r.fields.items():
            if not key.startswith("tokenizer."):
                continue
            vt = f.types[0]
            sub = f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(key, f.contents(), vt, sub)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        d = {"kind": "gguf", "file": "tokenizer.gguf"}
    d["sha256"] = ckpt.sha256_file(os.path.join(out, d["file"]))
    return d


def _convert_one(prog, path: str, weights: str, head: str):
    import coremltools as ct
    m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                   pass_pipeline=ct.PassPipeline.EMPTY, compute_units=ct.ComputeUnit.CPU_AND_NE,
                   skip_model_load=True)
    if "int8" in (weights, head):
        # int8 per output channel, coremltools' linear_quantize_weights:
        # the linear layers' weights (--weights int8) and the output
        # projection's (a matmul, selected by its constant's name;
        # --head-weights int8). The RoPE rotation (matmul) and the norm
        # gammas stay fp16, so the rotation stays exact. (lutN weights are
        # palettised in the graph, graph.Weights.)
        from coremltools.optimize.coreml import OpLinearQuantizerConfig, OptimizationConfig, linear_quantize_weights
        q = OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int8", granularity="per_channel",
                                    weight_threshold=2048)
        cfg = OptimizationConfig(global_config=None, op_type_configs={"linear": q} if weights == "int8" else {},
                                 op_name_configs={HEAD_WEIGHT: q} if head == "int8" else {})
        m = linear_quantize_weights(m, config=cfg)
    m.save(path)


def _save_chunk(progs: List[tuple], path: str):
    """Saves the functions (name, program) as one multifunction package,
    merged in memory: one program holding every function, the constants
    they share (the same weights, palettes and indices) marked as one blob
    by coremltools' cross-function deduplication, then one conversion.
    save_multifunction does the same from saved packages, which it reads
    back whole, so its peak memory grows with the chunk (several times its
    weights); this never holds more than the functions being merged."""
    import coremltools as ct
    from coremltools.converters.mil.mil import Program
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY
    prog = Program()
    for name, p in progs:
        prog.add_function(name, p.functions["main"])
    prog.default_function_name = progs[0][0]
    prog.export_as_multifunction = True
    PASS_REGISTRY["common::const_deduplication"]._deduplicate_const_across_functions(prog)
    m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                   pass_pipeline=ct.PassPipeline.EMPTY, compute_units=ct.ComputeUnit.CPU_AND_NE,
                   skip_model_load=True)
    m.save(path)


def function_names(opt: Options, last: bool) -> List[tuple]:
    """(kind, width, name) of a chunk's functions, the default first: the
    last chunk also has the sample function."""
    fns = [(GENERATE, opt.width, f"generate_{opt.width}")]
    if last:
        fns.append((SAMPLE, opt.width, f"sample_{opt.width}"))
    return fns + [(PREFILL, opt.prefill, f"prefill_{opt.prefill}")]


def convert(model: str, out: str, opt: Options) -> dict:
    """Converts the checkpoint at model into a bundle directory out and
    returns the manifest. Nothing is written before the checkpoint is
    validated; the bundle is built under a temporary name beside out and
    renamed into place when complete."""
    t0 = time.time()
    ck = ckpt.load(model)
    a = ck.arch
    check_options(opt)
    if opt.sidecars not in ("int8", "fp16"):
        raise CheckpointError(f"--sidecars {opt.sidecars!r} is not one of int8, fp16")
    if opt.width < 1 or opt.prefill < 1:
        raise CheckpointError(f"--width {opt.width} and --prefill {opt.prefill} must be positive")
    context = min(opt.context, a.context)
    tmax = max(opt.width, opt.prefill)
    if tmax > context:
        raise CheckpointError(f"function widths up to {tmax} do not fit a context of {context}")
    sliding = min(context, a.window + tmax) if a.window else 0
    block = argmax_block(a.vocab) if opt.argmax_block is None else opt.argmax_block
    if not 1 <= block <= MAX_REDUCE or a.vocab % block:
        raise CheckpointError(f"--argmax-block {block} must divide the vocabulary ({a.vocab}) and be in 1..{MAX_REDUCE}")
    geo = Geometry(context=context, sliding_slots=sliding, argmax_block=block)
    planned = plan_chunks(ck, opt)
    chunks = [Chunk(j, p.first, p.end, j == len(planned) - 1) for j, p in enumerate(planned)]
    out = os.path.abspath(out)
    if os.path.exists(out) and not opt.force:
        raise CheckpointError(f"{out} exists (pass --force to replace it)")
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(out) + ".partial-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it 0700
    try:
        manifest = _build(ck, tmp, opt, geo, chunks)
        manifest["conversion_seconds"] = round(time.time() - t0, 3)
        with open(os.path.join(tmp, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        if os.path.exists(out):
            old = tempfile.mkdtemp(prefix=os.path.basename(out) + ".old-", dir=parent)
            os.rename(out, os.path.join(old, "b"))
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _fsync_dir(d: str):
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _matrices(ck: Checkpoint, c: Chunk, geo: Geometry) -> List[tuple]:
    """The matrices of chunk c that the weight options may palettise, as
    graph.Weights.prepare takes them."""
    a = ck.arch
    roles = [r for i in range(c.first, c.last) for r in ck.roles()
             if r.startswith(f"layers.{i}.") and r.rsplit(".", 1)[-1] in plan_mod.LINEAR_ROLES]
    if c.index == 0 and ck.has("ple_proj"):
        roles.append("ple_proj")
    jobs = [(r, tuple(ck.shapes[r]), 0, False) for r in roles]
    if c.is_last:
        B = geo.argmax_block
        jobs.append(("embed" if a.tied else "output", (1, a.vocab // B, B, a.hidden), 2, True))
    return jobs


def _build(ck: Checkpoint, out: str, opt: Options, geo: Geometry, chunks: List[Chunk]) -> dict:
    import coremltools as ct
    a = ck.arch
    head = head_weights(opt)
    w = Weights(ck, opt.weights, head, opt.palette, opt.workers)
    work = os.path.join(out, ".work")
    os.makedirs(work)
    man_chunks = []
    for c in chunks:
        fns = []
        paths = []
        w.prepare(_matrices(ck, c, geo))
        pkg = f"chunk_{c.index}.mlpackage"
        progs = []
        for kind, width, name in function_names(opt, c.is_last):
            prog, ins, outs = build_function(ck, w, geo, c, len(chunks), kind, width)
            progs.append((name, prog))
            fns.append({"name": name, "kind": kind, "width": width,
                        "inputs": [d.to_json() for d in ins], "outputs": [d.to_json() for d in outs]})
        if "int8" in (opt.weights, head):
            # coremltools' quantiser takes one function at a time: each is
            # saved, quantised, and save_multifunction merges them.
            for name, prog in progs:
                p = os.path.join(work, f"chunk{c.index}_{name}.mlpackage")
                _convert_one(prog, p, opt.weights, head)
                paths.append((p, name))
            desc = ct.utils.MultiFunctionDescriptor()
            for p, name in paths:
                desc.add_function(p, "main", name)
            desc.default_function_name = paths[0][1]
            ct.utils.save_multifunction(desc, os.path.join(out, pkg))
            for p, _ in paths:
                shutil.rmtree(p)
        else:
            _save_chunk(progs, os.path.join(out, pkg))
        del progs
        man_chunks.append({"index": c.index, "package": pkg, "layers": [c.first, c.last],
                           "weight_bytes": int(sum(w.fp16_bytes.values())),
                           "functions": fns})
        w.drop()
    shutil.rmtree(work)

    sidecars = {"embed": _write_sidecar(out, "embed", ck, "embed", a.embed_scale, opt.sidecars)}
    if a.ple_dim > 0:
        sidecars["per_layer"] = _write_sidecar(out, "per_layer", ck, "ple_embed", float(np.float32(np.sqrt(a.ple_dim))),
                                               opt.sidecars)
    tok = _write_tokenizer(ck, out)
    chat = {"format": ck.chat["format"]}
    if ck.chat.get("template_src"):
        dst = os.path.basename(ck.chat["template_src"])
        shutil.copyfile(ck.chat["template_src"], os.path.join(out, dst))
        chat["file"] = dst
    source = {"path": os.path.basename(os.path.normpath(ck.path)),
              "files": [{"file": os.path.relpath(f, ck.path) if os.path.isdir(ck.path) else os.path.basename(f),
                         "sha256": ckpt.sha256_file(f)} for f in ck.files]}
    import coremltools
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "architecture": a.arch,  # what engine/load.Detect reads
        "converter": {"coremltools": coremltools.__version__, "numpy": np.__version__,
                      "weights": opt.weights, "head_weights": head, "palette": opt.palette, "sidecars": opt.sidecars, "python": sys.version.split()[0]},
        "source": source,
        "arch": a.to_json(),
        "geometry": {"context": geo.context, "sliding_slots": geo.sliding_slots,
                     "generate_width": opt.width, "prefill_width": opt.prefill, "argmax_block": geo.argmax_block,
                     "rope_layout": a.ropes[a.layers[0].rope].layout},
        "tokenizer": tok,
        "chat_template": chat,
        "sidecars": sidecars,
        "chunks": man_chunks,
    }
