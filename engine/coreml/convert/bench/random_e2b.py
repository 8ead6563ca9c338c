#!/usr/bin/env python3
"""Writes a gemma4 checkpoint of Gemma 4 E2B's layer geometry with random
BF16 weights (what engine/cpu's Gemma4E2B(layers, vocab) benchmarks use):
hidden 1536, 8 heads, 1 KV head, head dims 256 sliding / 512 full (every 5th
layer), window 512, MLP 6144 (12288 on the KV-shared last layers, 20 of 35
scaled to the layer count), PLE 256, softcap 30, tied embeddings.

    python bench/random_e2b.py OUT_DIR [--layers 10] [--vocab 65536] [--config-only]

For conversion figures only (time, memory, sizes): the weights mean nothing.
The tokenizer is the Gemma 4 fixture's (the converter copies it as is).
--config-only writes config.json alone (what `anebundle --plan` reads):
`--layers 35 --vocab 262144 --config-only` is the full E2B's geometry.
"""
import argparse
import json
import os
import shutil

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "..", "..", "cpu", "testdata", "gemma4", "model")


def bf16(rng, shape, scale):
    x = (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).view(np.uint32)
    return (x >> 16).astype(np.uint16)  # truncation: fine for random weights


def e2b_config(L: int, V: int) -> dict:
    """config.json of E2B's geometry cut to L layers (the last L*20//35
    KV-shared) and a vocabulary of V ids."""
    H, P = 1536, 256
    shared = L * 20 // 35
    types = ["full_attention" if i % 5 == 4 else "sliding_attention" for i in range(L)]
    return {
        "architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "vocab_size": V, "hidden_size": H,
        "intermediate_size": 6144, "num_hidden_layers": L, "num_attention_heads": 8, "num_key_value_heads": 1,
        "head_dim": 256, "global_head_dim": 512, "layer_types": types, "sliding_window": 512,
        "final_logit_softcapping": 30.0, "vocab_size_per_layer_input": V, "hidden_size_per_layer_input": P,
        "num_kv_shared_layers": shared, "use_double_wide_mlp": True, "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6, "eos_token_id": [1, 106], "bos_token_id": 2, "tie_word_embeddings": True,
        "hidden_activation": "gelu_pytorch_tanh",
        "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1e6,
                                               "rope_type": "proportional"},
                            "sliding_attention": {"rope_theta": 1e4, "rope_type": "default"}},
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=10)
    p.add_argument("--vocab", type=int, default=65536)
    p.add_argument("--config-only", action="store_true", help="write config.json only (for --plan)")
    a = p.parse_args()
    L, V, H, P = a.layers, a.vocab, 1536, 256
    shared = L * 20 // 35
    types = ["full_attention" if i % 5 == 4 else "sliding_attention" for i in range(L)]
    cfg = e2b_config(L, V)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    if a.config_only:
        print(f"wrote {a.out}/config.json: {L} layers, vocab {V}")
        return
    shutil.copyfile(os.path.join(FIXTURE, "tokenizer.json"), os.path.join(a.out, "tokenizer.json"))
    # (name, shape, scale) in the order the generator draws them; written
    # a block of rows at a time at their place in the file (safetensors
    # orders tensors by name), so memory stays small at the full geometry
    # (5.1G parameters). The bytes equal drawing each tensor whole.
    t = []
    pre = "model."
    t.append((pre + "embed_tokens.weight", (V, H), 0.03))
    t.append((pre + "norm.weight", (H,), 1.0))
    t.append((pre + "embed_tokens_per_layer.weight", (V, L * P), 0.03))
    t.append((pre + "per_layer_model_projection.weight", (L * P, H), H ** -0.5))
    t.append((pre + "per_layer_projection_norm.weight", (P,), 1.0))
    first_shared = L - shared
    for i, typ in enumerate(types):
        hd = 512 if typ == "full_attention" else 256
        ffn = 12288 if i >= first_shared else 6144
        q = f"{pre}layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm", "post_per_layer_input_norm"):
            t.append((q + n + ".weight", (H,), 1.0))
        t.append((q + "self_attn.q_norm.weight", (hd,), 1.0))
        t.append((q + "self_attn.q_proj.weight", (8 * hd, H), H ** -0.5))
        t.append((q + "self_attn.o_proj.weight", (H, 8 * hd), (8 * hd) ** -0.5))
        if i < first_shared:
            t.append((q + "self_attn.k_norm.weight", (hd,), 1.0))
            t.append((q + "self_attn.k_proj.weight", (hd, H), H ** -0.5))
            t.append((q + "self_attn.v_proj.weight", (hd, H), H ** -0.5))
        t.append((q + "mlp.gate_proj.weight", (ffn, H), H ** -0.5))
        t.append((q + "mlp.up_proj.weight", (ffn, H), H ** -0.5))
        t.append((q + "mlp.down_proj.weight", (H, ffn), ffn ** -0.5))
        t.append((q + "per_layer_input_gate.weight", (P, H), H ** -0.5))
        t.append((q + "per_layer_projection.weight", (H, P), P ** -0.5))
    # safetensors with BF16 tensors, written by hand (numpy has no bfloat16).
    header, off = {}, 0
    shapes = {n: shape for n, shape, _ in t}
    for n in sorted(shapes):
        size = 2 * int(np.prod(shapes[n]))
        header[n] = {"dtype": "BF16", "shape": list(shapes[n]), "data_offsets": [off, off + size]}
        off += size
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    rng = np.random.default_rng(1)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(len(hb).to_bytes(8, "little"))
        f.write(hb)
        f.truncate(8 + len(hb) + off)
        for n, shape, scale in t:
            rows, rest = shape[0], tuple(shape[1:])
            per = max(1, (1 << 24) // max(1, int(np.prod(rest))))
            at = 8 + len(hb) + header[n]["data_offsets"][0]
            for r0 in range(0, rows, per):
                block = bf16(rng, (min(per, rows - r0),) + rest, scale)
                f.seek(at + 2 * r0 * int(np.prod(rest)))
                f.write(block.tobytes())
    print(f"wrote {a.out}: {L} layers, vocab {V}, {off / 2 / 1e6:.0f}M parameters")


if __name__ == "__main__":
    main()
