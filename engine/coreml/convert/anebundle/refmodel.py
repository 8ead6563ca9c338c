"""The checkpoint a bundle computes, written back for the CPU backend.

A bundle is lossy in two documented places: its weights are fp16 (or
palettised, or int8) and its embedding rows come from INT8 sidecars. To
prove that the *graph and host pipeline* compute what the CPU backend
computes, the tests run the CPU backend on the model the bundle really
holds: every weight rounded to fp16, or, where the bundle palettises it
(--weights/--head-weights lutN), its palettised values read back from the
packages; the input embeddings (and per-layer embeddings) equal to the
sidecars' values, and the output projection the bundle's matrix (so a tied
model becomes untied). int8 weights are not read back (a bundle of them
has no checkpoint of its own here). The CPU backend then differs from the
bundle only by computing in float32 where the bundle computes in fp16. The
error of the format itself (against the original checkpoint) is measured
separately and reported.
"""
from __future__ import annotations

import json
import os
import shutil

import numpy as np

from . import checkpoint as ckpt
from .host import Sidecar


def _f16(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float32)


def _sidecar_values(bundle_dir: str, name: str) -> np.ndarray:
    with open(os.path.join(bundle_dir, "manifest.json")) as f:
        m = json.load(f)
    sc = Sidecar(bundle_dir, m["sidecars"][name])
    return sc.rows_of(np.arange(sc.rows)).astype(np.float32), m["sidecars"][name]["value_scale"]


def bundle_matrices(bundle_dir: str, ck) -> dict:
    """The palettised matrices of a bundle, dequantised as the interpreter
    does, by role ("head" for the output projection, as [vocab, hidden]):
    each chunk's constexpr_lut_to_dense ops named graph.weight_name(role)
    or graph.HEAD_WEIGHT. Empty for a bundle with no palettised weight."""
    from . import interp
    from .graph import HEAD_WEIGHT, weight_name
    with open(os.path.join(bundle_dir, "manifest.json")) as f:
        m = json.load(f)
    names = {weight_name(r): r for r in ck.roles()}
    out = {}
    for c in m["chunks"]:
        pkg = interp.Package(os.path.join(bundle_dir, c["package"]))
        fn = pkg.prog.functions[c["functions"][0]["name"]]
        for op in fn.operations:
            if op.op_type != "constexpr_lut_to_dense":
                continue
            name = op.outputs[0].name
            val = interp.run_op(op, {})[0].astype(np.float32)
            if name == HEAD_WEIGHT:
                out["head"] = val.reshape(ck.arch.vocab, ck.arch.hidden)
            elif name in names:
                out[names[name]] = val.reshape(ck.shapes[names[name]])
    return out


def write_llama_gguf(src: str, bundle_dir: str, out: str) -> str:
    """The bundle's llama model as a GGUF file (all tensors F32)."""
    import gguf
    r = gguf.GGUFReader(src)
    ck = ckpt.load_llama_gguf(src)
    w = gguf.GGUFWriter(out, "llama")
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vt = f.types[0]
        sub = f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, f.contents(), vt, sub)
    emb, scale = _sidecar_values(bundle_dir, "embed")
    if scale != 1.0:
        raise ValueError("a llama bundle's embedding sidecar is not prescaled")
    mats = bundle_matrices(bundle_dir, ck)
    names = {v: k for k, v in ck._names.items()}
    for t in r.tensors:
        role = names.get(t.name)
        if role is None:
            raise ValueError(f"{src}: tensor {t.name} has no role in the bundle")
        if role == "embed":
            a = emb
            if ck.arch.tied:
                w.add_tensor("output.weight", mats.get("head", _f16(ck.weight("embed"))))
        elif role == "output":
            a = mats.get("head", _f16(ck.weight(role)))
        else:
            a = mats.get(role, _f16(ck.weight(role)))
        w.add_tensor(t.name, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def write_gemma4_dir(src: str, bundle_dir: str, out: str) -> str:
    """The bundle's gemma4 model as a Hugging Face directory (F32 tensors,
    untied output projection)."""
    from safetensors.numpy import save_file
    ck = ckpt.load_gemma4(src)
    a = ck.arch
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    tgt = cfg.get("text_config", cfg)
    tgt["tie_word_embeddings"] = False
    cfg["tie_word_embeddings"] = False
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    for name in ("tokenizer.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))
    mats = bundle_matrices(bundle_dir, ck)
    tensors = {}
    for role in ck.roles():
        name = ck._names[role]
        if role == "embed":
            emb, scale = _sidecar_values(bundle_dir, "embed")
            tensors[name] = emb / np.float32(scale)
            tensors["lm_head.weight"] = mats.get("head", _f16(ck.weight("embed" if a.tied else "output")))
        elif role == "ple_embed":
            ple, scale = _sidecar_values(bundle_dir, "per_layer")
            tensors[name] = ple / np.float32(scale)
        elif role == "output":
            continue
        else:
            tensors[name] = mats.get(role, _f16(ck.weight(role)))
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()},
              os.path.join(out, "model.safetensors"))
    return out


def write_planted_ties(src: str, out: str, block: int) -> str:
    """A copy of the gemma4 checkpoint directory src whose output projection
    (untied: the embedding stays as it is) repeats rows, so that logits tie
    exactly wherever a repeated row wins: ids 2k and 2k+1 share a row (every
    maximum is a tie inside a block of `block` ids), and in every odd block
    the ids at offsets 2, 3 (mod 4) take the row of the same offset in the
    block before (a third of the distinct rows tie across two blocks, the
    lower in an even block). For the tests of the blockwise argmax."""
    from safetensors.numpy import load_file, save_file
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    t = load_file(os.path.join(src, "model.safetensors"))
    prefix = "model.language_model." if "model.language_model.embed_tokens.weight" in t else "model."
    w = t["lm_head.weight"] if "lm_head.weight" in t else t[prefix + "embed_tokens.weight"]
    V = w.shape[0]
    rows = w[np.arange(V) & ~1].copy()
    for j in range(block, V):
        if (j // block) % 2 == 1 and j % block % 4 in (2, 3):
            rows[j] = rows[j - block]
    t["lm_head.weight"] = rows
    cfg.get("text_config", cfg)["tie_word_embeddings"] = False
    cfg["tie_word_embeddings"] = False
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    for name in ("tokenizer.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))
    save_file({k: np.ascontiguousarray(v) for k, v in sorted(t.items())}, os.path.join(out, "model.safetensors"))
    return out


def write_wide_vocab(src: str, out: str, vocab: int) -> str:
    """A copy of the gemma4 checkpoint directory src with its vocabulary
    widened to `vocab` ids (more than the argmax's block of 16384): the new
    rows of the embedding tables (the output projection is tied) are
    random with the spread of the old ones; the tokenizer stays (the tests
    feed ids). For the tests that no op but the output projection sees the
    vocabulary axis whole."""
    from safetensors.numpy import load_file, save_file
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    t = load_file(os.path.join(src, "model.safetensors"))
    rng = np.random.default_rng(26)
    for name in ("model.embed_tokens.weight", "model.embed_tokens_per_layer.weight", "lm_head.weight"):
        if name in t:
            w = t[name]
            extra = rng.standard_normal((vocab - w.shape[0], w.shape[1])) * float(w.std())
            t[name] = np.concatenate([w, extra.astype(w.dtype)])
    tc = cfg.get("text_config", cfg)
    tc["vocab_size"] = vocab
    if "vocab_size_per_layer_input" in tc:
        tc["vocab_size_per_layer_input"] = vocab
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    for name in ("tokenizer.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))
    save_file({k: np.ascontiguousarray(v) for k, v in sorted(t.items())}, os.path.join(out, "model.safetensors"))
    return out
