#!/usr/bin/env python3
"""Generates the "peaked" tiny Gemma 4 fixture (run by hand, output committed).

Made with numpy 2.4.6 and safetensors 0.8.0 (the converter's venv,
build/scripts/deps-coreml.sh; no torch):

    .tools/venv/bin/python engine/cpu/testdata/gemma4-peaked/gen.py

Why a second fixture: ../gemma4 is a random model whose top two logits are
often within a few hundredths of each other, below what fp16 arithmetic
(a Core ML bundle) can resolve, so greedy ids there agree with the CPU
backend's float32 only up to near ties. This model has the same config
(every Gemma 4 feature on: sliding and full layers, KV sharing, two head
dims, proportional partial RoPE, PLE, layer scalars, softcap) and the same
tokenizer, but its weights are built so that the next token is determined
with a wide margin: it is an "induction copy" model whose next token is the
token DELTA positions before the current one, so after any prompt it
repeats the prompt's last DELTA+1 tokens. The copy runs through attention,
twice:

  - a constant channel: the last CHAN coordinates of every token embedding
    hold the same value, and no projection reads from it or writes to it
    except the copy heads' Q and K, so it carries "a token is here" to every
    layer;
  - sliding copy: layer 1 computes K/V that layer 4 reuses (KV sharing).
    K's first rotary pair is the constant channel at phase DELTA*theta, Q's
    is the constant channel at phase 0, so after RoPE q_i.k_j peaks at
    j = i - DELTA (theta = 1 rad on sliding layers; the next peaks are in
    the future or past the window of 8). V carries token coordinates
    0..31, and layer 4's O and post-attention norm add them to the residual
    with a large gain;
  - full copy: the same from layer 2 to layer 5 on the 4 rotating
    frequencies of the full layers' proportional RoPE, carrying all token
    coordinates (the peak stays sharp over the whole context);
  - the final norm scales the constant channel down, so the logits (tied
    embeddings) are dominated by the copied token's embedding, whose dot
    product with itself beats every other row by several units.

Every other weight is random (PCG64 seeded, uniform with the stated
standard deviation), attention weights of the copy layers scaled down by
SMALL, so the rest of the network still computes non-trivial values that the
tests compare. Measured with the CPU backend on the converter tests' 12
prompts x 32 greedy ids: smallest top-1/top-2 logit margin about 3.5
(../gemma4: 0.003); ../gemma4-peaked's reference.json records the ids and
margins (written by go test ./engine/cpu -run TestGemma4Peaked -update).

Writes next to this script: model/config.json (../gemma4/model's),
model/tokenizer.json and model/generation_config.json (copies of
../gemma4/model's), model/model.safetensors (F16: the fp16 bundle and the
CPU backend then start from the same weight values). Deterministic:
rerunning gives the same bytes.
"""
import json
import math
import os
import shutil

import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
FLAT = os.path.join(HERE, "..", "gemma4", "model")
OUT = os.path.join(HERE, "model")

SEED = 12
H, V, HD_S, HD_F, HEADS, KVH, PLE, L = 64, 512, 16, 32, 4, 2, 16, 6
KINDS = ["sliding", "sliding", "full", "sliding", "sliding", "full"]
SHARED = 3  # the last 3 layers reuse K/V of layers 1 (sliding) and 2 (full)
DELTA = 4  # the copy offset: next token = token DELTA positions back
CHAN = 8  # width of the constant channel (the last CHAN coordinates)
EMBED = 0.5  # std of the token coordinates of the embeddings
MU = 1.7  # constant channel value, in units of EMBED
GAIN = 8.0  # post-attention norm gain of the copied coordinates
QK_NORM = 2.0  # Q/K norm weight of the copy's rotary pair
COPY_K = 4.0  # the copy heads' Q/K projection scale
SMALL = 0.1  # scale of the copy layers' other attention weights
FINAL_MU = 0.2  # final norm weight factor on the constant channel


class Rand:
    """Uniform draws from PCG64's raw stream (stable across numpy versions)."""

    def __init__(self, seed):
        self.g = np.random.PCG64(seed)

    def uniform(self, shape, std):
        n = int(np.prod(shape))
        u = (self.g.random_raw(n) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        return ((2.0 * u - 1.0) * (math.sqrt(3.0) * std)).reshape(shape)


def build():
    r = Rand(SEED)
    t = {}
    C = H - CHAN
    mu = np.zeros(H)
    mu[C:] = MU * EMBED
    mu_hat = mu / np.linalg.norm(mu)
    emb = r.uniform((V, H), EMBED)
    emb[:, C:] = mu[C:]
    t["embed_tokens.weight"] = emb
    t["embed_tokens_per_layer.weight"] = r.uniform((V, L * PLE), 1.0)
    t["per_layer_model_projection.weight"] = r.uniform((L * PLE, H), H ** -0.5)
    t["per_layer_projection_norm.weight"] = 1.0 + r.uniform((PLE,), 0.25)
    fw = 1.0 + r.uniform((H,), 0.25)
    fw[C:] *= FINAL_MU
    t["norm.weight"] = fw

    def norm(n):
        return 1.0 + r.uniform((n,), 0.25)

    for li, kind in enumerate(KINDS):
        q = f"layers.{li}."
        hd = HD_S if kind == "sliding" else HD_F
        owns = li < L - SHARED
        ffn = 96 if owns else 192  # use_double_wide_mlp on the KV-shared layers
        t[q + "input_layernorm.weight"] = norm(H)
        t[q + "pre_feedforward_layernorm.weight"] = norm(H)
        t[q + "post_attention_layernorm.weight"] = norm(H)
        t[q + "post_feedforward_layernorm.weight"] = norm(H)
        t[q + "post_per_layer_input_norm.weight"] = norm(H)
        t[q + "layer_scalar"] = 0.75 + r.uniform((1,), 0.25 / math.sqrt(3))
        t[q + "self_attn.q_norm.weight"] = norm(hd)
        t[q + "self_attn.q_proj.weight"] = r.uniform((HEADS * hd, H), H ** -0.5)
        t[q + "self_attn.o_proj.weight"] = r.uniform((H, HEADS * hd), (HEADS * hd) ** -0.5)
        if owns:
            t[q + "self_attn.k_norm.weight"] = norm(hd)
            t[q + "self_attn.k_proj.weight"] = r.uniform((KVH * hd, H), H ** -0.5)
            t[q + "self_attn.v_proj.weight"] = r.uniform((KVH * hd, H), H ** -0.5)
        t[q + "mlp.gate_proj.weight"] = r.uniform((ffn, H), H ** -0.5)
        t[q + "mlp.up_proj.weight"] = r.uniform((ffn, H), H ** -0.5)
        t[q + "mlp.down_proj.weight"] = r.uniform((H, ffn), ffn ** -0.5)
        t[q + "per_layer_input_gate.weight"] = r.uniform((PLE, H), H ** -0.5)
        t[q + "per_layer_projection.weight"] = r.uniform((H, PLE), PLE ** -0.5)
    # Nothing reads the constant channel, nothing writes into it (the copy
    # heads' Q/K below are the exception).
    for k, a in t.items():
        if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight", "up_proj.weight",
                       "per_layer_input_gate.weight", "per_layer_model_projection.weight")):
            a[:, C:] = 0
        if k.endswith(("o_proj.weight", "down_proj.weight", "per_layer_projection.weight")):
            a[C:, :] = 0

    def copy(owner, reader, hd, thetas, coords):
        """Layer reader (reusing owner's K/V) adds the embedding coordinates
        coords of the token DELTA positions back."""
        kw, vw = t[f"layers.{owner}.self_attn.k_proj.weight"], t[f"layers.{owner}.self_attn.v_proj.weight"]
        qw, ow = t[f"layers.{reader}.self_attn.q_proj.weight"], t[f"layers.{reader}.self_attn.o_proj.weight"]
        for a in (kw, vw, qw, ow):
            a *= SMALL
        h2 = hd // 2  # RoPE pairs dimension i with i + hd/2
        for h in range(KVH):
            for i, th in enumerate(thetas):
                kw[h * hd + i] = math.cos(DELTA * th) * mu_hat * COPY_K
                kw[h * hd + h2 + i] = math.sin(DELTA * th) * mu_hat * COPY_K
        for h in range(HEADS):
            for i in range(len(thetas)):
                qw[h * hd + i] = mu_hat * COPY_K
        per = -(-len(coords) // KVH)
        for n, c in enumerate(coords):
            kv, e = divmod(n, per)
            vw[kv * hd + e, c] = 1.0
            for h in (2 * kv, 2 * kv + 1):  # the two query heads of KV head kv
                ow[c, h * hd + e] += 0.5
        for nm in (f"layers.{owner}.self_attn.k_norm.weight", f"layers.{reader}.self_attn.q_norm.weight"):
            w = t[nm]
            for i in range(len(thetas)):
                w[i] = w[h2 + i] = QK_NORM
        pa = t[f"layers.{reader}.post_attention_layernorm.weight"]
        pa[coords] = GAIN * (1.0 + 0.1 * (pa[coords] - 1))

    copy(1, 4, HD_S, [1.0], list(range(0, 32)))
    # Full layers: theta 1e6, partial factor 0.25 -> 4 of 16 pairs rotate,
    # frequencies 1e6^(-2i/32) (proportional: over the whole head dim).
    copy(2, 5, HD_F, [float(np.float32(1e6) ** np.float32(-2 * i / 32)) for i in range(4)], list(range(0, C)))
    return {"model." + k: v for k, v in t.items()}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "generation_config.json"):
        shutil.copyfile(os.path.join(FLAT, name), os.path.join(OUT, name))
    with open(os.path.join(OUT, "config.json")) as f:
        cfg = json.load(f)
    cfg["dtype"] = "float16"
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    t = build()
    save_file({k: np.ascontiguousarray(v, dtype=np.float16) for k, v in sorted(t.items())},
              os.path.join(OUT, "model.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    main()
