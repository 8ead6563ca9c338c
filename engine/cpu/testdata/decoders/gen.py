"""Reference logits of the random decoders in this directory.

The GGUF files here are written by the project's own writer
(go test ./engine/cpu -run TestWriteDecoderFixtures -write-fixtures); this
script loads each one with Hugging Face transformers (its GGUF loader:
from_pretrained(..., gguf_file=...), weights dequantised to float32) and
records, for a few prompts, the greedy continuation and the logits of every
position of prompt+continuation (float32, little-endian, base64). engine/cpu's TestDecoderReference compares the CPU backend
with them.

Two hyper-parameters the GGUF does not carry are set on the config, as
llama.cpp (and engine/arch) derive them:
  - qwen3: head_dim = qwen3.attention.key_length (transformers' GGUF map
    has no entry for it and would take Qwen3Config's default, 128);
  - gemma3: query_pre_attn_scalar = head_dim (Gemma3TextConfig's default is
    256, the head dim of the real checkpoints but not of this fixture).

Run once, with torch (CPU) and transformers in a throwaway virtualenv
outside the repository (never in make test):
    python gen.py            # writes reference.json
Versions used: see "versions" in reference.json.
"""
import base64
import hashlib
import json
import os
import sys

import gguf
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["qwen2", "qwen3", "gemma3"]
PROMPTS = [
    [1, 48, 85, 122, 159, 196, 233, 14, 51, 88, 125, 162],
    [1, 7, 7, 7, 200, 3, 99, 42, 42, 17],
]
GREEDY = 20


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def key_length(path, arch):
    r = gguf.GGUFReader(path)
    return int(r.fields[f"{arch}.attention.key_length"].contents())


def main():
    torch.manual_seed(0)
    out = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__, "gguf": gguf.__version__ if hasattr(gguf, "__version__") else "?"},
           "models": {}}
    for name in MODELS:
        file = f"{name}.gguf"
        path = os.path.join(HERE, file)
        cfg = AutoConfig.from_pretrained(HERE, gguf_file=file)
        if name == "qwen3":
            cfg.head_dim = key_length(path, name)
        if name == "gemma3":
            cfg.query_pre_attn_scalar = key_length(path, name)
        model = AutoModelForCausalLM.from_pretrained(HERE, gguf_file=file, config=cfg, torch_dtype=torch.float32,
                                                     attn_implementation="eager")
        model.eval()
        cases = []
        for prompt in PROMPTS:
            ids = torch.tensor([prompt])
            with torch.no_grad():
                gen = model.generate(ids, max_new_tokens=GREEDY, do_sample=False, min_new_tokens=GREEDY,
                                     eos_token_id=None, pad_token_id=0)
                seq = gen[0].tolist()
                logits = model(torch.tensor([seq])).logits[0]
            # float32 rows, little-endian, base64: exact and a quarter of
            # the size of decimal text.
            raw = logits.to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
            cases.append({"prompt": prompt, "greedy": seq[len(prompt):],
                          "logits_f32le": base64.b64encode(raw).decode()})
        out["models"][name] = {"file": file, "sha256": sha256(path), "config": cfg.to_diff_dict(), "cases": cases}
        print(name, cfg.__class__.__name__, [c["greedy"][:8] for c in cases], file=sys.stderr)
    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
