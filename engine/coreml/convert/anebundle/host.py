"""The host side of a bundle, in Python: what the Go Core ML backend does
around each call (README.md, "Driving a bundle"), run here on the reference
interpreter. Sidecar lookup, RoPE tables, masks, placement matrices, the
host KV rows, the chunk handoff, the second level of the blockwise argmax,
the softcap of the logits, and commit.
"""
from __future__ import annotations

import json
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import checkpoint as ckpt
from .bundle import FORMAT, FORMAT_VERSION, MANIFEST
from .graph import GENERATE, PREFILL, SAMPLE

NEG_INF = np.float16(-np.inf)


class BundleError(Exception):
    """A bundle that is incomplete, damaged or of another format."""


class Sidecar:
    """An embedding table: INT8 rows with per-row fp16 scales, row r reading
    back as fp16(float32(q[r]) * float32(scale[r])); or plain fp16 rows."""

    def __init__(self, root: str, d: dict, verify: bool = True):
        self.rows, self.cols = d["rows"], d["cols"]
        parts = [p for p in ("data", "scales") if p in d]
        for part in parts:
            p = os.path.join(root, d[part]["file"])
            if verify and ckpt.sha256_file(p) != d[part]["sha256"]:
                raise BundleError(f"{p}: sha256 differs from the manifest")
        dt = {"int8": np.int8, "float16": "<f2"}[d["data"]["dtype"]]
        self.q = np.fromfile(os.path.join(root, d["data"]["file"]), dtype=dt)
        if self.q.size != self.rows * self.cols:
            raise BundleError(f"{d['data']['file']}: {self.q.size} values for {self.rows} x {self.cols}")
        self.q = self.q.reshape(self.rows, self.cols)
        self.scale = None
        if "scales" in d:
            self.scale = np.fromfile(os.path.join(root, d["scales"]["file"]), dtype="<f2")
            if self.scale.shape != (self.rows,):
                raise BundleError(f"{d['scales']['file']}: {self.scale.shape[0]} scales for {self.rows} rows")

    def rows_of(self, ids: Sequence[int]) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if self.scale is None:
            return self.q[ids].astype(np.float16)
        v = self.q[ids].astype(np.float32) * self.scale[ids].astype(np.float32)[:, None]
        return v.astype(np.float16)


def rope_table(shape: dict, positions: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
    """cos and sin [len(positions), head_dim] as fp16, each element holding
    its pair's value (README.md, "RoPE"), computed as the CPU backend does."""
    hd, pairs, fd, theta = shape["head_dim"], shape["pairs"], shape["freq_dim"], shape["theta"]
    half = hd // 2
    n = len(positions)
    c = np.ones((n, half), dtype=np.float64)
    s = np.zeros((n, half), dtype=np.float64)
    for i in range(pairs):
        for t, pos in enumerate(positions):
            if shape["angle"] == "f32":
                e = np.float32(2 * i) / np.float32(fd)
                inv = np.float32(1) / np.float32(math.pow(float(np.float32(theta)), float(e)))
                ang = float(np.float32(pos) * inv)
                c[t, i] = float(np.float32(math.cos(ang)))
                s[t, i] = float(np.float32(math.sin(ang)))
            else:
                inv = math.pow(theta, -float(2 * i) / float(fd))
                ang = float(pos) * inv
                c[t, i], s[t, i] = math.cos(ang), math.sin(ang)
    if shape["layout"] == "halves":
        C, S = np.concatenate([c, c], axis=1), np.concatenate([s, s], axis=1)
    else:
        C, S = np.repeat(c, 2, axis=1), np.repeat(s, 2, axis=1)
    return C.astype(np.float16), S.astype(np.float16)


def mask_and_place(pos: Sequence[int], n: int, slots: int, window: int) -> Tuple[np.ndarray, np.ndarray]:
    """The attention mask [T, slots] and placement matrix [slots, T] of a
    call whose rows sit at positions pos (T = len(pos); rows from n on are
    padding). Position q lives in slot q % slots. Row t sees exactly the
    slots of positions max(0, pos[t]-window+1) .. pos[t] (window 0: from
    0), 0 there and -inf elsewhere (DESIGN.md invariant 2); a real row's
    new K/V row is placed in its position's slot, a padded row nowhere."""
    T = len(pos)
    mask = np.full((T, slots), NEG_INF, dtype=np.float16)
    place = np.zeros((slots, T), dtype=np.float16)
    for t in range(T):
        lo = 0 if window == 0 else max(0, pos[t] - window + 1)
        if pos[t] - lo + 1 > slots:
            raise ValueError(f"position {pos[t]}: {pos[t] - lo + 1} visible positions do not fit {slots} slots")
        for q in range(lo, pos[t] + 1):
            mask[t, q % slots] = 0
        if t < n:
            place[pos[t] % slots, t] = 1
    return mask, place


class KV:
    """The host's committed K/V rows: per owning layer, position -> fp16
    [kv_heads, head_dim] rows."""

    def __init__(self, owners: Sequence[int]):
        self.k: Dict[int, Dict[int, np.ndarray]] = {s: {} for s in owners}
        self.v: Dict[int, Dict[int, np.ndarray]] = {s: {} for s in owners}
        self.n = 0  # committed positions

    def copy(self) -> "KV":
        c = KV(list(self.k))
        c.k = {s: dict(d) for s, d in self.k.items()}
        c.v = {s: dict(d) for s, d in self.v.items()}
        c.n = self.n
        return c


def softcap(z: np.ndarray, cap: float) -> np.ndarray:
    """The final logit softcap as the CPU backend computes it
    (engine/cpu.Softcap): float32(tanh(float64(z/c))) * c in float32 (numpy's
    tanh where Go has its canonical tanh64; they agree to float32 rounding
    but for a rare last bit). cap 0: z as float32."""
    z = np.asarray(z, dtype=np.float32)
    if cap <= 0:
        return z.copy()
    c = np.float32(cap)
    return np.tanh((z / c).astype(np.float64)).astype(np.float32) * c


def greedy(row: np.ndarray) -> int:
    """The flat argmax of a row as sample.Greedy picks it: the first
    maximum, NaN never wins, -1 for a row of NaN."""
    row = np.asarray(row, dtype=np.float32)
    if np.isnan(row).all():
        return -1
    return int(np.nanargmax(row))


def block_argmax(local: np.ndarray, top: np.ndarray, block: int) -> Tuple[int, float]:
    """The second level of the blockwise argmax (README "Outputs"): given
    each block's first maximum (local index) and value, the id of the row's
    maximum is b*block + local[b] for the lowest block b whose value is the
    row's maximum: the lowest id holding the maximum, the flat argmax's
    choice. NaN never wins; a row of NaN (or a local index outside the
    block) gives -1. Returns the id and the row's maximum."""
    top = np.asarray(top, dtype=np.float32)
    if np.isnan(top).all():
        return -1, float("nan")
    b = int(np.nanargmax(top))  # the first block holding the maximum
    i = int(local[b])
    if not 0 <= i < block:
        return -1, float("nan")
    return b * block + i, float(top[b])


class Call:
    """The result of one call: per real row (one for prefill) the greedy id
    (argmax), the row's top logit before the softcap (top; generate and
    prefill) and the logits after the softcap in float32 (logits; sample
    and prefill; raw: as the function returned them, fp16 before the
    softcap), and the new K/V rows of every owning layer (not yet
    committed)."""

    def __init__(self, start, n, argmax, new, top=None, logits=None, raw=None, blocks=None):
        self.start, self.n = start, n
        self.argmax, self.new = argmax, new
        self.top, self.logits, self.raw, self.blocks = top, logits, raw, blocks


class Bundle:
    def __init__(self, root: str, verify: bool = True):
        from .interp import Package
        self.root = root
        p = os.path.join(root, MANIFEST)
        try:
            with open(p) as f:
                self.m = json.load(f)
        except (OSError, ValueError) as e:
            raise BundleError(f"{p}: {e}") from e
        if self.m.get("format") != FORMAT or self.m.get("format_version") != FORMAT_VERSION:
            raise BundleError(f"{p}: format {self.m.get('format')!r} version {self.m.get('format_version')!r} "
                              f"is not {FORMAT} {FORMAT_VERSION} (rebuild the bundle with `make bundle`)")
        self.arch = self.m["arch"]
        self.geo = self.m["geometry"]
        self.embed = Sidecar(root, self.m["sidecars"]["embed"], verify)
        self.ple = Sidecar(root, self.m["sidecars"]["per_layer"], verify) if "per_layer" in self.m["sidecars"] else None
        self.chunks = self.m["chunks"]
        self.packages = [Package(os.path.join(root, c["package"])) for c in self.chunks]
        self.layers = self.arch["layers"]
        self.owners = [i for i, l in enumerate(self.layers) if l["source"] == i]

    def new_kv(self) -> KV:
        return KV(self.owners)

    def function(self, chunk: int, kind: str) -> dict:
        """The function a call of kind runs on chunk: a sample call runs the
        generate function on every chunk but the last."""
        if kind == SAMPLE and chunk < len(self.chunks) - 1:
            kind = GENERATE
        for f in self.chunks[chunk]["functions"]:
            if f["kind"] == kind:
                return f
        raise BundleError(f"chunk {chunk} has no {kind} function")

    def slots(self, kind: str) -> int:
        return self.geo["context"] if kind == "full" else self.geo["sliding_slots"]

    def slot(self, kind: str, pos: int) -> int:
        return pos % self.slots(kind)

    def inputs_for(self, tokens: Sequence[int], start: int, width: int, kv: KV, is_prefill: bool) -> Dict[str, np.ndarray]:
        """Every host-built input of a call of len(tokens) real rows at
        positions start.. in a function of the given width (the rows past
        len(tokens) are padding: the last real row repeated, never placed)."""
        n = len(tokens)
        if not 1 <= n <= width:
            raise ValueError(f"{n} tokens for a function of width {width}")
        if start != kv.n:
            raise ValueError(f"call at {start}, cache holds {kv.n}")
        if start + n > self.geo["context"]:
            raise ValueError(f"positions up to {start + n - 1} exceed the context {self.geo['context']}")
        ids = list(tokens) + [tokens[-1]] * (width - n)
        pos = [start + t for t in range(n)] + [start + n - 1] * (width - n)
        x: Dict[str, np.ndarray] = {"hidden_in": self.embed.rows_of(ids)[None]}
        if self.ple is not None:
            x["ple_rows"] = self.ple.rows_of(ids)[None]
        for name, shape in self.arch["ropes"].items():
            c, s = rope_table(shape, pos)
            x[f"rope_cos_{name}"], x[f"rope_sin_{name}"] = c[None, None], s[None, None]
        for kind in ("full", "sliding"):
            if not any(l["kind"] == kind for l in self.layers):
                continue
            window = 0 if kind == "full" else self.arch["window"]
            mask, place = mask_and_place(pos, n, self.slots(kind), window)
            x[f"mask_{kind}"], x[f"place_{kind}"] = mask[None, None], place[None, None]
        for s in self.owners:
            l = self.layers[s]
            S = self.slots(l["kind"])
            kc = np.zeros((1, l["kv_heads"], S, l["head_dim"]), dtype=np.float16)
            vc = np.zeros_like(kc)
            lo = 0 if l["kind"] == "full" else max(0, start - S + n)  # the call's own slots stay zero
            for q in range(lo, start):
                j = self.slot(l["kind"], q)
                kc[0, :, j, :], vc[0, :, j, :] = kv.k[s][q], kv.v[s][q]
            x[f"k_cache_{s}"], x[f"v_cache_{s}"] = kc, vc
        if is_prefill:
            last = np.zeros((1, 1, width), dtype=np.float16)
            last[0, 0, n - 1] = 1
            x["last"] = last
        return x

    def call(self, tokens: Sequence[int], start: int, kv: KV, kind: str = GENERATE) -> Call:
        """One call of the generate, sample or prefill function on every
        chunk in turn; the new rows are returned, not committed."""
        width = self.geo["prefill_width" if kind == PREFILL else "generate_width"]
        host = self.inputs_for(tokens, start, width, kv, kind == PREFILL)
        carried: Dict[str, np.ndarray] = {}
        new: Dict[str, np.ndarray] = {}
        out = None
        for ci, c in enumerate(self.chunks):
            f = self.function(ci, kind)
            feed = {}
            for d in f["inputs"]:
                nm = d["name"]
                if nm == "hidden_in" and ci > 0:
                    feed[nm] = carried["hidden_out"]
                elif nm in carried:
                    feed[nm] = carried[nm]
                else:
                    feed[nm] = host[nm]
            out = self.packages[ci].run(f["name"], feed)
            for k, v in out.items():
                carried[k] = v
                if k.startswith(("k_new_", "v_new_")):
                    new[k] = v
        n = len(tokens)
        rows = 1 if kind == PREFILL else n
        c = Call(start, n, None, new)
        if "block_argmax" in out:
            # [1, nb, R]: block b's first maximum for row t at [0, b, t].
            B = self.geo["argmax_block"]
            c.blocks = (out["block_argmax"][0, :, :rows].T, out["block_max"][0, :, :rows].T)
            picks = [block_argmax(c.blocks[0][t], c.blocks[1][t], B) for t in range(rows)]
            c.argmax = np.array([i for i, _ in picks], dtype=np.int64)
            c.top = np.array([v for _, v in picks], dtype=np.float32)
        if "logits" in out:
            # [1, nb, R, B]: id b*B + j of row t at [0, b, t, j].
            z = out["logits"][0, :, :rows, :]
            c.raw = np.ascontiguousarray(z.transpose(1, 0, 2)).reshape(rows, -1)
            c.logits = softcap(c.raw, self.arch["softcap"])
            if c.argmax is None:
                c.argmax = np.array([greedy(r) for r in c.raw], dtype=np.int64)
        return c

    def commit(self, kv: KV, call: Call, m: int):
        """Keeps the first m rows of call (0 <= m <= call.n)."""
        if not 0 <= m <= call.n:
            raise ValueError(f"commit of {m} rows of {call.n}")
        if call.start != kv.n:
            raise ValueError("call does not continue the cache")
        for s in self.owners:
            k, v = call.new[f"k_new_{s}"], call.new[f"v_new_{s}"]
            for t in range(m):
                kv.k[s][call.start + t] = k[0, :, t, :].copy()
                kv.v[s][call.start + t] = v[0, :, t, :].copy()
        kv.n += m

    def prefill(self, ids: Sequence[int], kv: KV) -> Call:
        """Prefills ids from kv.n in prefill-width pieces and returns the
        last piece's call: its argmax[0] is the greedy next id, logits[0]
        the last row's logits."""
        N = self.geo["prefill_width"]
        c = None
        for i in range(0, len(ids), N):
            part = ids[i:i + N]
            c = self.call(part, kv.n, kv, PREFILL)
            self.commit(kv, c, len(part))
        return c


class Sampler:
    """Seeded temperature sampling from a row of (softcapped) logits, one
    uniform draw per sampled row, so the stream of draws depends only on
    how many tokens were sampled: a speculative call samples its rows in
    order and stops at the first that differs from its draft, drawing once
    per emitted token, as a call per token does (the verify rule of
    engine/spec for sampled sessions)."""

    def __init__(self, temperature: float, seed: int):
        self.t = float(temperature)
        self.rng = np.random.default_rng(seed)

    def sample(self, logits: np.ndarray) -> int:
        z = np.asarray(logits, dtype=np.float64) / self.t
        z = np.where(np.isnan(z), -np.inf, z)
        p = np.exp(z - z.max())
        c = np.cumsum(p / p.sum())
        return int(min(np.searchsorted(c, self.rng.random(), side="right"), len(c) - 1))


def lookup_drafts(history: Sequence[int], k: int, ngram: int = 2) -> List[int]:
    """Prompt-lookup drafts: the tokens that followed the latest earlier
    occurrence of the history's last ngram ids (none if there is none)."""
    if k <= 0 or len(history) < ngram + 1:
        return []
    tail = list(history[-ngram:])
    for i in range(len(history) - ngram - 1, -1, -1):
        if list(history[i:i + ngram]) == tail:
            return list(history[i + ngram:i + ngram + k])
    return []


def generate(b: Bundle, prompt: Sequence[int], steps: int, spec: int = 0, kv: Optional[KV] = None,
             first: Optional[int] = None, stats: Optional[dict] = None, sampler: Optional[Sampler] = None) -> List[int]:
    """Generation of `steps` ids after prompt: greedy, or with sampler
    drawing each id from the logits. spec is how many of the generation
    width's slots may hold prompt-lookup drafts (0: off); every call runs
    one function whatever spec is: generate when greedy (its ids, no
    logits), sample when sampling. With kv and first given, continues from
    that state (a resume: prompt is then the whole history) instead of
    prefilling. stats, if given, receives the call and draft counts and the
    final state: "kv" holds the rows of prompt + ids[:-1], "next" = ids[-1]
    is the pending token."""
    kind = GENERATE if sampler is None else SAMPLE
    if kv is None:
        kv = b.new_kv()
        last = b.prefill(list(prompt), kv)
        first = int(last.argmax[0]) if sampler is None else sampler.sample(last.logits[0])
    hist = list(prompt)
    out: List[int] = []
    nxt = first
    calls = drafted = accepted = 0
    K = b.geo["generate_width"]
    while True:
        out.append(nxt)
        hist.append(nxt)
        if len(out) >= steps:
            break
        # At most steps-len(out)-1 drafts, so ids never overshoot steps.
        drafts = lookup_drafts(hist, min(spec, K - 1, steps - len(out) - 1))
        c = b.call([nxt] + drafts, kv.n, kv, kind)
        calls += 1
        acc = 0
        while True:
            y = int(c.argmax[acc]) if sampler is None else sampler.sample(c.logits[acc])
            if acc < len(drafts) and drafts[acc] == y:
                acc += 1
                continue
            break
        b.commit(kv, c, acc + 1)
        drafted += len(drafts)
        accepted += acc
        out += drafts[:acc]
        hist += drafts[:acc]
        nxt = y
    if stats is not None:
        stats.update(calls=calls, drafted=drafted, accepted=accepted, kv=kv, next=out[-1])
    return out
