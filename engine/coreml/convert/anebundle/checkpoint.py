"""Reading a checkpoint: its architecture description and its weights.

Two inputs, read as the CPU backend reads them (engine/cpu):

- a Hugging Face gemma4 directory (config.json + *.safetensors), whose
  config is checked by the same rules as engine/cpu/gemma4_config.go;
- a llama-architecture GGUF file (stories260K, SmolLM2), checked as
  engine/cpu/llama.go checks it. GGUF llama Q/K rows are in the
  interleaved RoPE layout (pairs 2i, 2i+1), which the CPU backend keeps;
  the bundle keeps it too, so its K rows equal the CPU backend's.

Everything is validated before the converter writes a byte: a missing
tensor, a shape that disagrees with the config, or a feature the bundle
does not implement raises CheckpointError naming the file and the tensor or
field.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from typing import Callable, Dict, List, Optional

import numpy as np


class CheckpointError(Exception):
    """A checkpoint the converter cannot bundle; the message names the file
    and the tensor or config field, and what is wrong."""


@dataclasses.dataclass
class RopeShape:
    """One RoPE table shape: pair i of a head turns by pos*inv_freq[i] for
    i < pairs (the rest stay), inv_freq[i] = theta^(-2i/freq_dim)."""
    name: str
    head_dim: int
    theta: float
    pairs: int
    freq_dim: int
    # "halves": pair i is (i, i+head_dim/2) (Hugging Face rotate_half);
    # "interleaved": pair i is (2i, 2i+1) (GGUF llama).
    layout: str
    # "f32": the angle is float32(pos)*float32(inv_freq) (gemma4, as
    # engine/cpu/gemma4.go); "f64": pos*inv_freq in float64 (llama).
    angle: str


@dataclasses.dataclass
class Layer:
    kind: str  # "full" or "sliding"
    head_dim: int
    kv_heads: int
    source: int  # the layer whose K/V rows this one reads
    ffn: int
    rope: str  # RopeShape.name


@dataclasses.dataclass
class Arch:
    """The architecture description the bundle is built from (and that the
    manifest carries)."""
    arch: str  # "llama" or "gemma4"
    vocab: int
    hidden: int
    heads: int
    eps: float
    context: int  # the checkpoint's max positions
    window: int  # sliding window W (0: no sliding layers)
    softcap: float  # final logit softcap (0: none)
    ple_dim: int  # per-layer embedding width (0: none)
    ple_vocab: int
    tied: bool
    bos: int  # -1: none
    eos: List[int]
    attn_scale: float  # scores = scale * q.k
    embed_scale: float  # hidden input = embedding row * embed_scale
    layers: List[Layer]
    ropes: Dict[str, RopeShape]
    # gemma4 block structure: post-attention / post-FFN norms, Q/K/V norms,
    # GELU-tanh (else llama: SiLU, no extra norms).
    family: str

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["ropes"] = {k: dataclasses.asdict(v) for k, v in self.ropes.items()}
        return d


class Checkpoint:
    """An architecture plus named float32 weights (read on demand)."""

    def __init__(self, path: str, arch: Arch, get: Callable[[str], np.ndarray], names: Dict[str, str],
                 files: List[str], tokenizer: dict, chat: dict, shapes: Dict[str, tuple],
                 get_rows: Optional[Callable[[str, int, int], np.ndarray]] = None):
        self.path = path
        self._get_rows = get_rows
        self.shapes = shapes  # role -> shape (validated against the config)
        self.arch = arch
        self._get = get
        self._names = names  # role -> tensor name in the checkpoint
        self.files = files  # the weight files (fingerprinted in the manifest)
        self.tokenizer = tokenizer  # {"kind": "tokenizer.json"|"gguf", "src": path}
        self.chat = chat  # {"format": name, "template_src": path or None}

    def has(self, role: str) -> bool:
        return role in self._names

    def weight(self, role: str) -> np.ndarray:
        """The float32 weight of a role, e.g. "layers.0.wq" (rows x cols as
        the matrix multiplies: out x in)."""
        return self._get(self._names[role])

    def rows(self, role: str, lo: int, hi: int) -> np.ndarray:
        """Rows lo..hi-1 of a matrix role as float32 (reading only those
        rows where the format allows: the embedding tables are large)."""
        if self._get_rows is not None:
            return self._get_rows(self._names[role], lo, hi)
        return self.weight(role)[lo:hi]

    def roles(self) -> List[str]:
        return list(self._names)


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


# ---------------------------------------------------------------- gemma4


def _gemma4_config(path: str, c: dict) -> Arch:
    def bad(msg):
        raise CheckpointError(f"{path}: {msg}")

    if not isinstance(c, dict):
        bad("config.json is not a JSON object")
    if c.get("text_config") is not None:
        if c.get("model_type") != "gemma4":
            bad(f"model_type {c.get('model_type')!r} with a text_config is not gemma4")
        outer = c
        c = dict(c["text_config"])
        if c.get("eos_token_id") is None:
            c["eos_token_id"] = outer.get("eos_token_id")
        if c.get("bos_token_id") is None:
            c["bos_token_id"] = outer.get("bos_token_id")
    elif c.get("model_type") != "gemma4_text":
        bad(f"model_type {c.get('model_type')!r} is not gemma4_text (want gemma4_text, or gemma4 with a text_config)")

    def num(name):
        v = c.get(name)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0 or v > 1 << 24:
            bad(f"{name} = {v!r} is missing or out of range")
        return v

    vocab, hidden, ffn = num("vocab_size"), num("hidden_size"), num("intermediate_size")
    n_layers, heads, kv_heads = num("num_hidden_layers"), num("num_attention_heads"), num("num_key_value_heads")
    head_dim, context, window = num("head_dim"), num("max_position_embeddings"), num("sliding_window")
    if c.get("hidden_activation") != "gelu_pytorch_tanh":
        bad(f"hidden_activation {c.get('hidden_activation')!r} is not supported (want gelu_pytorch_tanh)")
    for flag, what in [("enable_moe_block", "mixture of experts"), ("attention_k_eq_v", "k = v attention"),
                       ("attention_bias", "attention biases")]:
        if c.get(flag):
            bad(f"{flag} ({what}) is not supported")
    if c.get("use_bidirectional_attention") is not None:
        bad(f"use_bidirectional_attention {c['use_bidirectional_attention']!r} is not supported")
    if c.get("attn_logit_softcapping") is not None:
        bad("attn_logit_softcapping is not supported")
    types = c.get("layer_types")
    if not isinstance(types, list) or len(types) != n_layers:
        bad(f"layer_types has {len(types) if isinstance(types, list) else 'no'} entries for {n_layers} layers")
    shared = c.get("num_kv_shared_layers", 0) or 0
    if not isinstance(shared, int) or shared < 0 or shared >= n_layers:
        bad(f"num_kv_shared_layers = {shared!r} must be in 0..{n_layers - 1}")
    eps = c.get("rms_norm_eps")
    if not isinstance(eps, (int, float)) or not (0 < eps <= 1):
        bad(f"rms_norm_eps = {eps!r} is missing or out of range")
    if heads % kv_heads:
        bad(f"{heads} attention heads are not a multiple of {kv_heads} KV heads")
    tied = c.get("tie_word_embeddings", True)
    tied = True if tied is None else bool(tied)
    softcap = c.get("final_logit_softcapping")
    softcap = 0.0 if softcap is None else float(softcap)
    if softcap < 0:
        bad(f"final_logit_softcapping = {softcap} is negative")
    ple_dim = c.get("hidden_size_per_layer_input", 256)
    ple_dim = 256 if ple_dim is None else ple_dim
    ple_vocab = 0
    if ple_dim > 0:
        ple_vocab = c.get("vocab_size_per_layer_input") or 262144
        if ple_vocab <= 0 or ple_vocab > 1 << 24 or ple_dim > 1 << 16:
            bad(f"per-layer embeddings of {ple_vocab} x {ple_dim} are out of range")
    bos = c.get("bos_token_id")
    bos = bos if isinstance(bos, int) and 0 <= bos < vocab else -1
    eos = c.get("eos_token_id")
    eos = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    eos = [e for e in eos if isinstance(e, int) and 0 <= e < vocab]

    rope_params = c.get("rope_parameters") or {}
    per_layer = c.get("per_layer_config")
    first_shared = n_layers - shared
    last_of_kind: Dict[str, int] = {}
    layers: List[Layer] = []
    ropes: Dict[str, RopeShape] = {}
    for i, typ in enumerate(types):
        if typ == "sliding_attention":
            kind = "sliding"
        elif typ == "full_attention":
            kind = "full"
        else:
            bad(f"layer {i}: layer type {typ!r} is not supported")
        hd, kvh = head_dim, kv_heads
        if per_layer is not None:
            for k, v in (per_layer.get(str(i)) or {}).items():
                if k == "head_dim":
                    hd = v
                elif k == "num_key_value_heads":
                    kvh = v
                else:
                    bad(f"layer {i}: per_layer_config field {k!r} is not supported")
        elif kind == "full":
            hd = c.get("global_head_dim") or 512
        if hd <= 0 or hd % 2 or hd > 1 << 14 or kvh <= 0 or heads % kvh:
            bad(f"layer {i}: head dim {hd}, {kvh} KV heads for {heads} heads are invalid")
        r = rope_params.get(typ)
        if r is None:
            bad(f"rope_parameters has no entry for {typ}")
        if r.get("factor") not in (None, 1, 1.0):
            bad(f"rope_parameters.{typ}.factor {r.get('factor')} is not supported")
        theta = r.get("rope_theta")
        if not isinstance(theta, (int, float)) or theta <= 0:
            bad(f"rope_parameters.{typ}.rope_theta {theta!r} is missing or invalid")
        rtype = r.get("rope_type") or "default"
        partial = r.get("partial_rotary_factor")
        if rtype == "default":
            if partial not in (None, 1, 1.0):
                bad(f"rope_parameters.{typ}: partial_rotary_factor with rope_type default is not supported")
            pairs = hd // 2
        elif rtype == "proportional":
            p = 1.0 if partial is None else float(partial)
            if not (0 <= p <= 1):
                bad(f"rope_parameters.{typ}.partial_rotary_factor {p} is out of range")
            pairs = int(p * hd / 2)
        else:
            bad(f"rope_parameters.{typ}: rope_type {rtype!r} is not supported")
        # One table per distinct (head dim, theta, pairs): named by the
        # layer kind, numbered when a kind has more than one shape.
        shape = RopeShape(kind, hd, float(theta), pairs, hd, "halves", "f32")
        rname = None
        for n, s in ropes.items():
            if (s.head_dim, s.theta, s.pairs) == (hd, float(theta), pairs):
                rname = n
        if rname is None:
            rname = kind
            k = 2
            while rname in ropes:
                rname, k = f"{kind}{k}", k + 1
            shape.name = rname
            ropes[rname] = shape
        src, lffn = i, ffn
        if i >= first_shared:
            if kind not in last_of_kind:
                bad(f"layer {i} is KV-shared but no earlier non-shared layer is of its kind")
            src = last_of_kind[kind]
            s = layers[src]
            if s.head_dim != hd or s.kv_heads != kvh:
                bad(f"layer {i} shares the KV of layer {src}, whose heads differ")
            if c.get("use_double_wide_mlp"):
                lffn = 2 * ffn
        else:
            last_of_kind[kind] = i
        layers.append(Layer(kind, hd, kvh, src, lffn, rname))
    return Arch(arch="gemma4", vocab=vocab, hidden=hidden, heads=heads, eps=float(eps), context=context,
                window=window, softcap=softcap, ple_dim=ple_dim, ple_vocab=ple_vocab, tied=tied, bos=bos, eos=eos,
                attn_scale=1.0, embed_scale=float(np.float32(math.sqrt(hidden))), layers=layers, ropes=ropes,
                family="gemma4")


class _SafetensorsDir:
    """The tensors of a directory's *.safetensors files (an index json, if
    present, is not needed: every file's header is read)."""

    def __init__(self, d: str):
        from safetensors import safe_open
        self.dir = d
        self.files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".safetensors"))
        if not self.files:
            raise CheckpointError(f"{d}: no *.safetensors files")
        self.where: Dict[str, str] = {}
        self.shapes: Dict[str, tuple] = {}
        self.dtypes: Dict[str, str] = {}
        for f in self.files:
            try:
                with safe_open(f, framework="numpy") as h:
                    for k in h.keys():
                        sl = h.get_slice(k)
                        self.where[k] = f
                        self.shapes[k] = tuple(sl.get_shape())
                        self.dtypes[k] = sl.get_dtype()
            except Exception as e:  # a damaged header
                raise CheckpointError(f"{f}: cannot read the safetensors header: {e}") from e

    def rows(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows lo..hi-1 of a 2-D tensor as float32, reading only them."""
        from safetensors import safe_open
        if self.dtypes[name] == "BF16":
            cols = self.shapes[name][1]
            with open(self.where[name], "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                start = json.loads(f.read(n))[name]["data_offsets"][0]
                f.seek(8 + n + start + lo * cols * 2)
                raw = np.frombuffer(f.read((hi - lo) * cols * 2), dtype="<u2")
            return (raw.astype(np.uint32) << 16).view(np.float32).reshape(hi - lo, cols)
        with safe_open(self.where[name], framework="numpy") as h:
            return np.asarray(h.get_slice(name)[lo:hi], dtype=np.float32)

    def get(self, name: str) -> np.ndarray:
        from safetensors import safe_open
        dt = self.dtypes[name]
        if dt == "BF16":
            # numpy has no bfloat16: widen the raw bits.
            with open(self.where[name], "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(n))
                lo, hi = header[name]["data_offsets"]
                f.seek(8 + n + lo)
                raw = np.frombuffer(f.read(hi - lo), dtype="<u2")
            return (raw.astype(np.uint32) << 16).view(np.float32).reshape(self.shapes[name])
        with safe_open(self.where[name], framework="numpy") as h:
            return np.asarray(h.get_tensor(name), dtype=np.float32)


def _read_gemma4_config(d: str) -> Arch:
    """The Arch of the gemma4 directory d from config.json (and the EOS ids
    of generation_config.json), without reading a weight."""
    cfg_path = os.path.join(d, "config.json")
    try:
        with open(cfg_path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{cfg_path}: {e}") from e
    arch = _gemma4_config(cfg_path, cfg)
    gen_path = os.path.join(d, "generation_config.json")
    if os.path.exists(gen_path):
        try:
            with open(gen_path) as f:
                g = json.load(f).get("eos_token_id")
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{gen_path}: {e}") from e
        for e in ([] if g is None else [g] if isinstance(g, int) else g):
            if isinstance(e, int) and 0 <= e < arch.vocab and e not in arch.eos:
                arch.eos.append(e)
    return arch


def _gemma4_tensors(arch: Arch, prefix: str):
    """(role, tensor name, shape, required) of every weight a gemma4
    checkpoint with this architecture holds; the per-layer scalars
    (layer_scalar) are optional."""
    H, L, P = arch.hidden, len(arch.layers), arch.ple_dim
    out = [("embed", prefix + "embed_tokens.weight", (arch.vocab, H), True)]
    if not arch.tied:
        out.append(("output", "lm_head.weight", (arch.vocab, H), True))
    out.append(("norm", prefix + "norm.weight", (H,), True))
    if P > 0:
        out += [("ple_embed", prefix + "embed_tokens_per_layer.weight", (arch.ple_vocab, L * P), True),
                ("ple_proj", prefix + "per_layer_model_projection.weight", (L * P, H), True),
                ("ple_norm", prefix + "per_layer_projection_norm.weight", (P,), True)]
    for i, lo in enumerate(arch.layers):
        p = f"{prefix}layers.{i}."
        r = f"layers.{i}."
        qd, kvd = arch.heads * lo.head_dim, lo.kv_heads * lo.head_dim
        for role, name, shape in [
            ("in_norm", "input_layernorm.weight", (H,)), ("post_attn_norm", "post_attention_layernorm.weight", (H,)),
            ("pre_ffn_norm", "pre_feedforward_layernorm.weight", (H,)),
            ("post_ffn_norm", "post_feedforward_layernorm.weight", (H,)),
            ("q_norm", "self_attn.q_norm.weight", (lo.head_dim,)),
            ("wq", "self_attn.q_proj.weight", (qd, H)), ("wo", "self_attn.o_proj.weight", (H, qd)),
            ("gate", "mlp.gate_proj.weight", (lo.ffn, H)), ("up", "mlp.up_proj.weight", (lo.ffn, H)),
            ("down", "mlp.down_proj.weight", (H, lo.ffn)),
        ]:
            out.append((r + role, p + name, shape, True))
        if lo.source == i:
            out += [(r + "wk", p + "self_attn.k_proj.weight", (kvd, H), True),
                    (r + "wv", p + "self_attn.v_proj.weight", (kvd, H), True),
                    (r + "k_norm", p + "self_attn.k_norm.weight", (lo.head_dim,), True)]
        if P > 0:
            out += [(r + "ple_gate", p + "per_layer_input_gate.weight", (P, H), True),
                    (r + "ple_proj", p + "per_layer_projection.weight", (H, P), True),
                    (r + "ple_post_norm", p + "post_per_layer_input_norm.weight", (H,), True)]
        out.append((r + "scalar", p + "layer_scalar", (1,), False))
    return out


def load_gemma4_config(d: str) -> Checkpoint:
    """The gemma4 directory d as config.json describes it, with no weights:
    roles and shapes for a plan (`--plan`), every per-layer scalar assumed
    present. Reading a weight raises CheckpointError."""
    arch = _read_gemma4_config(d)

    def no_weights(name):
        raise CheckpointError(f"{d}: a plan from config.json reads no weights (asked for {name!r})")
    names, shapes = {}, {}
    for role, name, shape, _ in _gemma4_tensors(arch, "model."):
        names[role] = name
        shapes[role] = shape
    return Checkpoint(d, arch, no_weights, names, [], {}, {}, shapes)


def load_gemma4(d: str) -> Checkpoint:
    cfg_path = os.path.join(d, "config.json")
    gen_path = os.path.join(d, "generation_config.json")
    arch = _read_gemma4_config(d)
    st = _SafetensorsDir(d)
    prefix = "model.language_model." if "model.language_model.embed_tokens.weight" in st.where else "model."
    names: Dict[str, str] = {}
    want: Dict[str, tuple] = {}

    def need(role, name, shape):
        if name not in st.where:
            raise CheckpointError(f"{d}: missing tensor {name!r}")
        if st.shapes[name] != tuple(shape):
            raise CheckpointError(f"{st.where[name]}: tensor {name!r} has shape {list(st.shapes[name])}, "
                                  f"want {list(shape)} (from config.json)")
        if st.dtypes[name] not in ("F32", "F16", "BF16"):
            raise CheckpointError(f"{st.where[name]}: tensor {name!r} has dtype {st.dtypes[name]} "
                                  f"(want F32, F16 or BF16)")
        names[role] = name
        want[role] = shape

    for role, name, shape, required in _gemma4_tensors(arch, prefix):
        if required or name in st.where:
            need(role, name, shape)

    tok = os.path.join(d, "tokenizer.json")
    if not os.path.exists(tok):
        raise CheckpointError(f"{d}: missing tokenizer.json (the bundle ships the model's tokenizer)")
    template = None
    for cand in ("chat_template.jinja", "chat_template.json"):
        if os.path.exists(os.path.join(d, cand)):
            template = os.path.join(d, cand)
            break
    files = list(st.files) + [cfg_path] + ([gen_path] if os.path.exists(gen_path) else [])
    return Checkpoint(d, arch, st.get, names, files, {"kind": "tokenizer.json", "src": tok},
                      {"format": "gemma4", "template_src": template}, want, st.rows)


# ---------------------------------------------------------------- llama GGUF


def load_llama_gguf(path: str) -> Checkpoint:
    try:
        import gguf
        r = gguf.GGUFReader(path)
    except Exception as e:
        raise CheckpointError(f"{path}: not a readable GGUF file: {e}") from e

    def field(key, default=None, required=False):
        f = r.fields.get(key)
        if f is None:
            if required:
                raise CheckpointError(f"{path}: missing metadata {key!r}")
            return default
        return f.contents()

    arch_name = field("general.architecture", required=True)
    if arch_name != "llama":
        raise CheckpointError(f"{path}: architecture {arch_name!r} is not supported (want llama)")

    def count(key, required=True, default=None):
        v = field(key, default, required)
        if not isinstance(v, int) or v <= 0 or v > 1 << 24:
            raise CheckpointError(f"{path}: {key} = {v!r} is out of range")
        return v

    hidden, ffn = count("llama.embedding_length"), count("llama.feed_forward_length")
    n_layers, heads = count("llama.block_count"), count("llama.attention.head_count")
    context = count("llama.context_length")
    kv_heads = count("llama.attention.head_count_kv", False, heads)
    if heads % kv_heads or hidden % heads:
        raise CheckpointError(f"{path}: {heads} heads, {kv_heads} kv heads, hidden {hidden} are inconsistent")
    hd = hidden // heads
    rope_dim = count("llama.rope.dimension_count", False, hd)
    if rope_dim > hd or rope_dim % 2:
        raise CheckpointError(f"{path}: llama.rope.dimension_count {rope_dim} must be even and at most the head dim {hd}")
    base = float(field("llama.rope.freq_base", 10000.0))
    if field("llama.rope.scaling.type") is not None:
        raise CheckpointError(f"{path}: llama.rope.scaling.type is not supported")
    eps = float(field("llama.attention.layer_norm_rms_epsilon", 1e-5))
    tensors = {t.name: t for t in r.tensors}
    if "rope_freqs.weight" in tensors:
        raise CheckpointError(f"{path}: tensor 'rope_freqs.weight' (rope frequency factors) is not supported")
    emb = tensors.get("token_embd.weight")
    if emb is None or len(emb.shape) != 2:
        raise CheckpointError(f"{path}: missing or malformed tensor 'token_embd.weight'")
    vocab = int(emb.shape[1])
    names: Dict[str, str] = {}

    def need(role, name, rows, cols=None):
        t = tensors.get(name)
        if t is None:
            raise CheckpointError(f"{path}: missing tensor {name!r}")
        want = [cols, rows] if cols is not None else [rows]  # GGUF dims: [cols, rows]
        if [int(x) for x in t.shape] != want:
            raise CheckpointError(f"{path}: tensor {name!r} has shape {[int(x) for x in t.shape]}, want {want}")
        names[role] = name
        shapes[role] = (rows, cols) if cols is not None else (rows,)

    shapes: Dict[str, tuple] = {}
    need("embed", "token_embd.weight", vocab, hidden)
    tied = "output.weight" not in tensors
    if not tied:
        need("output", "output.weight", vocab, hidden)
    need("norm", "output_norm.weight", hidden)
    qd, kvd = heads * hd, kv_heads * hd
    for i in range(n_layers):
        p, q = f"blk.{i}.", f"layers.{i}."
        need(q + "in_norm", p + "attn_norm.weight", hidden)
        need(q + "ffn_norm", p + "ffn_norm.weight", hidden)
        for role, name, rows, cols in [("wq", "attn_q.weight", qd, hidden), ("wk", "attn_k.weight", kvd, hidden),
                                       ("wv", "attn_v.weight", kvd, hidden), ("wo", "attn_output.weight", hidden, qd),
                                       ("gate", "ffn_gate.weight", ffn, hidden), ("up", "ffn_up.weight", ffn, hidden),
                                       ("down", "ffn_down.weight", hidden, ffn)]:
            need(q + role, p + name, rows, cols)

    def get(name):
        t = tensors[name]
        shape = tuple(int(x) for x in reversed(t.shape))
        if t.tensor_type == gguf.GGMLQuantizationType.F32:
            a = np.asarray(t.data, dtype=np.float32)
        elif t.tensor_type == gguf.GGMLQuantizationType.F16:
            a = np.asarray(t.data, dtype=np.float16).astype(np.float32)
        else:
            from gguf import quants
            a = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        return a.reshape(shape)

    def idfield(key):
        v = field(key)
        return v if isinstance(v, int) and 0 <= v < vocab else None

    bos = idfield("tokenizer.ggml.bos_token_id")
    eos = [e for e in (idfield("tokenizer.ggml.eos_token_id"), idfield("tokenizer.ggml.eot_token_id")) if e is not None]
    eos = list(dict.fromkeys(eos))
    rope = RopeShape("rope", hd, base, rope_dim // 2, rope_dim, "interleaved", "f64")
    layers = [Layer("full", hd, kv_heads, i, ffn, "rope") for i in range(n_layers)]
    arch = Arch(arch="llama", vocab=vocab, hidden=hidden, heads=heads, eps=eps, context=context, window=0,
                softcap=0.0, ple_dim=0, ple_vocab=0, tied=tied, bos=-1 if bos is None else bos, eos=eos,
                attn_scale=float(np.float32(1 / math.sqrt(hd))), embed_scale=1.0, layers=layers,
                ropes={"rope": rope}, family="llama")
    tokens = field("tokenizer.ggml.tokens")
    chat = "chatml" if isinstance(tokens, list) and "<|im_start|>" in tokens else "plain"
    return Checkpoint(path, arch, get, names, [path], {"kind": "gguf", "src": path},
                      {"format": chat, "template_src": None}, shapes)


def load(path: str) -> Checkpoint:
    """Reads and validates the checkpoint at path: a directory with
    config.json (gemma4) or a .gguf file (llama)."""
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, "config.json")):
            raise CheckpointError(f"{path}: a model directory needs config.json")
        return load_gemma4(path)
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: no such file or directory")
    if not path.lower().endswith(".gguf"):
        raise CheckpointError(f"{path}: unknown model format (want a .gguf file or a directory with config.json)")
    return load_llama_gguf(path)


def load_spec(path: str) -> Checkpoint:
    """The architecture, roles and shapes of the model at path without
    reading a weight (what `--plan` needs): a gemma4 directory's
    config.json (the directory or the file itself; no safetensors needed),
    or a GGUF file's header."""
    if os.path.isfile(path) and os.path.basename(path) == "config.json":
        path = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        if not os.path.exists(os.path.join(path, "config.json")):
            raise CheckpointError(f"{path}: a model directory needs config.json")
        return load_gemma4_config(path)
    return load(path)
