"""llama.cpp's own outputs on the real GGUF files, recorded once as test data.

llama.cpp is built from source outside the repository (never committed) and
run as its HTTP server on 127.0.0.1 only; this script talks to it with the
standard library. For each model it records, from llama.cpp itself:

  - greedy decoding: for each prompt (token ids from llama.cpp's /tokenize,
    BOS added as the model asks), the ids llama.cpp generates at
    temperature 0 and, at every generated position, the log-probabilities
    of its top N tokens (n_probs; softmax of the raw logits, before any
    sampler): the top-2 margin in nats is their difference;
  - (gemma3) tokenization: every string of
    engine/tokenizer/testdata/gemma3.jsonl.gz tokenized by /tokenize
    without BOS, with special-token text as text (parse_special false) and
    recognised (true), written to
    engine/tokenizer/testdata/gemma3_270m_llamacpp.jsonl.gz.

Usage (the GGUFs as build/scripts/deps-*.sh install them):
    python3 gen.py --bin /path/to/llama.cpp/build/bin           # both models
    python3 gen.py --bin ... gemma3                              # one
    python3 gen.py --bin ... --f32kv                             # and NAME_f32kv.json
Writes gemma3_270m.json and smollm2.json next to this script, each with the
llama.cpp version it ran (llama-server --version).
"""
import argparse
import gzip
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
PYPI = os.path.join(ROOT, "build", "testdeps", "pypi")

GEMMA3_PROMPTS = [
    "The history of the Roman Empire",
    "def quicksort(arr):\n",
    "Once upon a time, in a small village by the sea,",
    "The three laws of thermodynamics state that",
    "Photosynthesis is the process by which",
    "Here is a recipe for chocolate chip cookies:\n\nIngredients:\n",
    "In 1969, Apollo 11 landed on the Moon. The astronauts",
    "The capital of France is",
    "import numpy as np\nimport matplotlib.pyplot as plt\n\n",
    "Dear Sir or Madam,\n\nI am writing to",
    "The mitochondria is the powerhouse of the cell because",
    "Q: What is the boiling point of water at sea level?\nA:",
]

SMOLLM2_QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the ocean.",
    "Explain photosynthesis in one paragraph.",
    "How do I reverse a list in Python?",
    "What are the three primary colors?",
    "Give me three tips for better sleep.",
    "What is the difference between weather and climate?",
    "Translate 'good morning' into Spanish.",
    "Who wrote Romeo and Juliet?",
    "Summarize the plot of Cinderella.",
    "What is 17 times 23?",
    "Write a short poem about autumn leaves.",
    "Why is the sky blue?",
    "List five fruits that are red.",
    "How does a refrigerator keep food cold?",
    "What is a black hole?",
    "Suggest a name for a pet goldfish.",
    "Explain what a computer virus is.",
    "What should I pack for a beach trip?",
    "Describe the water cycle.",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, bin_dir, model, extra=()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [os.path.join(bin_dir, "llama-server"), "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
                "-t", "2", "-c", "4096", "-np", "1", "--no-webui", "--log-disable",
                # No extra buffer types: a -march=native build on a CPU that
                # reports AMX runs its AMX kernels, which fault (SIGILL) in a
                # VM that does not grant the tile state. The plain CPU
                # kernels remain (same types, same activation quantisation).
                "--no-repack", *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if json.load(r).get("status") == "ok":
                        return
            except Exception:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("llama-server exited")
            time.sleep(0.5)
        raise RuntimeError("llama-server did not start")

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.load(r)

    def tokenize(self, text, add_special, parse_special):
        return self.post("/tokenize", {"content": text, "add_special": add_special, "parse_special": parse_special})["tokens"]

    def greedy(self, ids, n, n_probs):
        r = self.post("/completion", {"prompt": ids, "n_predict": n, "temperature": 0, "top_k": 1, "n_probs": n_probs,
                                      "cache_prompt": False, "ignore_eos": True, "samplers": ["top_k"]})
        steps = []
        for p in r["completion_probabilities"]:
            steps.append({"id": p["id"], "top": [[t["id"], t["logprob"]] for t in p["top_logprobs"]]})
        return steps

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)


def version(bin_dir):
    out = subprocess.run([os.path.join(bin_dir, "llama-server"), "--version"], capture_output=True, text=True)
    return (out.stdout + out.stderr).strip().splitlines()[0]


def record(srv, name, prompts, n, n_probs, bin_dir, model, extra=()):
    cases = []
    for text in prompts:
        ids = srv.tokenize(text, True, True)
        steps = srv.greedy(ids, n, n_probs)
        cases.append({"text": text, "prompt": ids, "steps": steps})
        margins = [s["top"][0][1] - s["top"][1][1] for s in steps]
        print(f"{name}: {len(ids)} prompt ids, min top-2 margin {min(margins):.3f}", file=sys.stderr)
    out = {"llama.cpp": version(bin_dir), "model": os.path.basename(model), "args": list(extra), "greedy": n, "n_probs": n_probs,
           "cases": cases}
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


def gemma3_tokens(srv):
    src = os.path.join(ROOT, "engine", "tokenizer", "testdata", "gemma3.jsonl.gz")
    dst = os.path.join(ROOT, "engine", "tokenizer", "testdata", "gemma3_270m_llamacpp.jsonl.gz")
    strings = []
    with gzip.open(src, "rt", encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if "s" in e:
                strings.append(e["s"])
    with gzip.open(dst, "wt", encoding="utf-8", compresslevel=9) as f:
        for s in strings:
            rec = {"s": s, "enc": srv.tokenize(s, False, False), "encs": srv.tokenize(s, False, True)}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"gemma3 tokenization: {len(strings)} strings", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="llama.cpp build/bin directory (llama-server)")
    ap.add_argument("--f32kv", action="store_true",
                    help="also record each model with a float32 KV cache and no flash attention "
                         "(NAME_f32kv.json): llama.cpp's default F16 cache and F16 flash-attention "
                         "accumulation are roundings we do not make, so this tells them apart from the rest")
    ap.add_argument("which", nargs="*", default=["gemma3", "smollm2"])
    a = ap.parse_args()
    variants = [((), "")] + ([(("-fa", "off", "-ctk", "f32", "-ctv", "f32"), "_f32kv")] if a.f32kv else [])
    for extra, suffix in variants:
        if "gemma3" in a.which:
            model = os.path.join(PYPI, "gemma-3-270m-q4_k_m.gguf")
            srv = Server(a.bin, model, extra)
            try:
                if not suffix:
                    gemma3_tokens(srv)
                record(srv, "gemma3_270m" + suffix, GEMMA3_PROMPTS, 64, 10, a.bin, model, extra)
            finally:
                srv.close()
        if "smollm2" in a.which:
            model = os.path.join(PYPI, "SmolLM2-135M-Instruct.Q4_1.gguf")
            srv = Server(a.bin, model, extra)
            try:
                prompts = [f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n" for q in SMOLLM2_QUESTIONS]
                record(srv, "smollm2" + suffix, prompts, 32, 10, a.bin, model, extra)
            finally:
                srv.close()


if __name__ == "__main__":
    main()
