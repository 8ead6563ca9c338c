#!/usr/bin/env python3
"""Generates the tiny Gemma 4 fixture once (run by hand, output committed).

Made with: torch 2.15.0, transformers 5.24.0, safetensors 0.8.0, tokenizers 0.23.3
(Python 3.11, CPU, fp32):

    python3 -m venv /tmp/g4 && /tmp/g4/bin/pip install torch==2.15.0 \
        transformers==5.24.0 safetensors==0.8.0 tokenizers==0.23.3
    /tmp/g4/bin/python engine/cpu/testdata/gemma4/gen.py

A random-initialised `gemma4_text` model (Gemma4ForCausalLM) with every
feature of Gemma 4 E2B switched on, at toy size:

  - 6 layers: sliding, sliding, full, sliding, sliding, full (window 8)
  - KV sharing: the last 3 layers compute no K/V; they reuse layer 1 (sliding)
    and layer 2 (full)
  - two head dims: 16 on sliding layers, 32 on full layers; 4 query heads over
    2 KV heads (grouped-query attention)
  - per-head Q/K RMSNorm, weightless V norm, attention scale 1.0
  - proportional partial RoPE on full layers (theta 1e6, factor 0.25: 4 of 16
    frequency pairs rotate), plain RoPE theta 1e4 on sliding layers
  - GELU-tanh gated MLP 96 wide, 192 (double) on the KV-shared layers
  - per-layer embeddings (PLE) of 16 per layer, per-layer scalars
  - final logit softcap 30, tied embeddings scaled by sqrt(hidden)

Weights are drawn with a fixed seed at scales that make the model "peaky"
(logits of several units, so the softcap bends them and greedy choices are
far from ties), not at the library's tiny init. Norm weights and layer scalars
are random too, so nothing that multiplies by them can be skipped unnoticed.

Writes next to this script:
  model/config.json, model/model.safetensors, model/generation_config.json
                                   the model (save_pretrained, fp32): a model
                                   directory as engine.Open takes it
  model/tokenizer.json                   a Gemma-style BPE (byte fallback, "▁" for
                                   spaces, <bos>/<eos>/<|turn>/<turn|>) trained
                                   here with `tokenizers` for the 512-id vocab
  reference.json                   per case: the prompt text (or the user turn
                                   of the chat case), its ids, 64 greedy ids (from a
                                   full re-forward per step, no cache), the
                                   smallest top-1/top-2 logit margin
  model-bf16/                      the same model with BF16 weights
  reference.safetensors            per case "<name>.logits": fp32 logits at
                                   every position of prompt+greedy (one
                                   forward of the whole sequence); and
                                   "story.bf16.logits": the same for the
                                   first case, computed in fp32 from the BF16
                                   weights
  dtypes.safetensors               one tensor in F32, F16 and BF16, and torch's
                                   widening of the narrow ones back to F32, to
                                   check the reader's decoding

Everything is deterministic: rerunning gives the same files.
"""
import json
import os
import random

import torch
import safetensors.torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import Gemma4ForCausalLM, Gemma4TextConfig

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "model")
MODEL_BF16 = os.path.join(HERE, "model-bf16")
VOCAB = 512
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>", "<turn|>"]
GREEDY = 64
EMBED_STD = float(os.environ.get("G4_EMBED_STD", "0.5"))
POST_NORM = float(os.environ.get("G4_POST_NORM", "2.0"))

TRAIN_TEXT = [
    "Once upon a time, there was a little girl named Lily. She liked to play in the park with her dog.",
    "The quick brown fox jumps over the lazy dog. The dog was not happy about it at all.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Hello, world! How are you doing today? I am fine, thank you very much.",
    "The sun is hot. The moon is cold. The stars are far away and very bright at night.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n",
    "Tom and Sam went to the store to buy some milk, bread, eggs and apples for their mother.",
    "Why is the sky blue? Because the air scatters blue light more than red light.",
    "user model question answer please tell me a story about a cat and a bird",
]


def make_tokenizer():
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 256, special_tokens=SPECIALS, show_progress=False)
    text = []
    rng = random.Random(1)
    for _ in range(40):
        text.append(" ".join(rng.sample(TRAIN_TEXT, len(TRAIN_TEXT))))
    tok.train_from_iterator(text, trainer)
    trained = tok.model
    # Rebuild with the 256 byte-fallback pieces right after the specials, as
    # Gemma's vocabulary has them; the trainer's own pieces follow.
    saved = json.loads(tok.to_str())
    vocab = saved["model"]["vocab"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in saved["model"]["merges"]]
    order = sorted(vocab.items(), key=lambda kv: kv[1])
    new_vocab = {}
    for s in SPECIALS:
        new_vocab[s] = len(new_vocab)
    for b in range(256):
        new_vocab["<0x%02X>" % b] = len(new_vocab)
    for piece, _ in order:
        if piece not in new_vocab:
            new_vocab[piece] = len(new_vocab)
    assert len(new_vocab) <= VOCAB, len(new_vocab)
    # Pad with unused pieces so that the vocabulary is exactly VOCAB.
    while len(new_vocab) < VOCAB:
        new_vocab["<unused%d>" % (len(new_vocab))] = len(new_vocab)
    del trained
    out = Tokenizer(models.BPE(vocab=new_vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    out.normalizer = normalizers.Replace(" ", "\u2581")
    out.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    out.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    out.add_special_tokens(SPECIALS)
    out.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B",
                                                       special_tokens=[("<bos>", 2)])
    return out


def make_config():
    return Gemma4TextConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        global_head_dim=32,
        layer_types=["sliding_attention", "sliding_attention", "full_attention",
                     "sliding_attention", "sliding_attention", "full_attention"],
        sliding_window=8,
        final_logit_softcapping=30.0,
        vocab_size_per_layer_input=VOCAB,
        hidden_size_per_layer_input=16,
        num_kv_shared_layers=3,
        use_double_wide_mlp=True,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        eos_token_id=[1, 6],
        bos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=True,
        attn_implementation="eager",
    )


def randomise(model, gen):
    sd = model.state_dict()
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith(("post_attention_layernorm.weight", "post_feedforward_layernorm.weight")):
                # Larger than 1, so that each block's output competes with
                # the embedding in the residual stream (otherwise a random
                # tied model just repeats its last token).
                p.copy_(POST_NORM + 0.5 * torch.randn(p.shape, generator=gen))
            elif name.endswith("norm.weight"):
                p.copy_(1.0 + 0.25 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(EMBED_STD * torch.randn(p.shape, generator=gen))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * p.shape[1] ** -0.5)
            else:
                raise SystemExit("unexpected parameter " + name)
        for name, b in sorted(model.named_buffers()):
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + 0.5 * torch.rand(b.shape, generator=gen))
    assert set(sd) >= {n for n, _ in model.named_parameters()}


def greedy(model, ids, n):
    """n greedy ids, each from a full forward of the whole sequence (no cache),
    plus the smallest margin between the top two logits."""
    seq = list(ids)
    out, margin = [], float("inf")
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1]
            top = torch.topk(logits, 2)
            margin = min(margin, float(top.values[0] - top.values[1]))
            nxt = int(torch.argmax(logits))
            out.append(nxt)
            seq.append(nxt)
    return out, margin


def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    tok = make_tokenizer()
    os.makedirs(MODEL, exist_ok=True)
    tok.save(os.path.join(MODEL, "tokenizer.json"))
    tok = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))

    cfg = make_config()
    model = Gemma4ForCausalLM(cfg).eval().to(torch.float32)
    randomise(model, torch.Generator().manual_seed(4))
    model.save_pretrained(MODEL, safe_serialization=True)
    # Reload what was written, so the references come from the files.
    model = Gemma4ForCausalLM.from_pretrained(MODEL, dtype=torch.float32, attn_implementation="eager").eval()

    # Raw prompts (tokenizers adds <bos>), and one chat turn in the Gemma 4
    # format, tokenized whole as transformers' apply_chat_template does.
    user = "Tell me a story about a cat."
    chat = "<|turn>user\n" + user + "<turn|>\n<|turn>model\n"
    texts = [
        ("story", "Once upon a time, there was a little girl named Lily."),
        ("fox", "The quick brown fox jumps over the lazy dog. The dog was not happy."),
        ("short", "Hello"),
        ("chat", chat),
    ]
    cases = [(name, text, tok.encode(text).ids) for name, text in texts]
    ref = {"torch": torch.__version__, "transformers": transformers.__version__, "cases": []}
    tensors = {}
    for name, text, ids in cases:
        assert ids[0] == 2
        gen_ids, margin = greedy(model, ids, GREEDY)
        seq = ids + gen_ids
        with torch.no_grad():
            logits = model(torch.tensor([seq]), use_cache=False).logits[0]
        # The one-shot forward agrees with the step-by-step greedy choices.
        assert [int(i) for i in torch.argmax(logits[len(ids) - 1:-1], dim=-1)] == gen_ids, name
        # And transformers' own cached generation (sliding cache) agrees too.
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=GREEDY, min_new_tokens=GREEDY,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)
        cached = [int(i) for i in out[0, len(ids):]]
        tensors[name + ".logits"] = logits.contiguous().to(torch.float32)
        entry = {"name": name, "text": text}
        if name == "chat":
            entry = {"name": name, "chat_user": user}
        ref["cases"].append({**entry, "prompt_ids": ids, "greedy_ids": gen_ids,
                             "min_margin": margin, "cached_generate_agrees": cached == gen_ids})
        print(f"{name}: {len(ids)} prompt ids, {len(set(gen_ids))} distinct greedy ids, min margin {margin:.4f}, "
              f"max |logit| {float(logits.abs().max()):.2f}, cached generate agrees: {cached == gen_ids}")
    # The same model with BF16 weights (what real checkpoints ship), and the
    # logits of the first case computed in fp32 from those rounded weights:
    # the math the CPU backend does on a BF16 checkpoint.
    model.to(torch.bfloat16).save_pretrained(MODEL_BF16, safe_serialization=True)
    wide = Gemma4ForCausalLM.from_pretrained(MODEL_BF16, dtype=torch.float32, attn_implementation="eager").eval()
    name, _, ids = cases[0]
    seq = ids + ref["cases"][0]["greedy_ids"]
    with torch.no_grad():
        tensors[name + ".bf16.logits"] = wide(torch.tensor([seq]), use_cache=False).logits[0].contiguous()
    safetensors.torch.save_file(tensors, os.path.join(HERE, "reference.safetensors"))
    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")

    g = torch.Generator().manual_seed(9)
    x = torch.cat([torch.randn(61, generator=g) * 10, torch.tensor([0.0, -0.0, 1e-6, -7e-8, 65504.0, 1e-40, 3.0e38])])
    safetensors.torch.save_file({"x.f32": x, "x.f16": x.to(torch.float16), "x.bf16": x.to(torch.bfloat16),
                                 # torch's own widening of the narrow types, to compare against
                                 "x.f16.as_f32": x.to(torch.float16).to(torch.float32),
                                 "x.bf16.as_f32": x.to(torch.bfloat16).to(torch.float32),
                                 "m.f32": x[:60].reshape(6, 10).clone(), "ids.i64": torch.arange(5)},
                                os.path.join(HERE, "dtypes.safetensors"), metadata={"made_by": "gen.py"})


if __name__ == "__main__":
    main()
