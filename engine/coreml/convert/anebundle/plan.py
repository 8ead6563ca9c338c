"""Chunk planning: which layers go into which package, decided before a
weight is read.

A chunk is a run of layers [first, end) in one multifunction package; the
first chunk also holds the per-layer projection, the last the final norm
and the output projection. A plan must keep every package under two limits
that public projects measured on the Neural Engine (the same thresholds
`anechat bundle audit` checks, engine/coreml/mlprogram/audit.go):

- weight bytes per package, default 950 MiB: ANEMLL's chunk planner default
  (Anemll docs/calc_chunk_split.md, `--max-chunk-mb` "default 950"), under
  iOS's 1 GB model-file limit (Anemll docs/ANE_converter.md); CoreML-LLM
  recorded a 1.94 GB model running with 0% of its ops on the ANE
  (docs/DECODE_STATE_LAYOUTS.md section 2).
- ops per function (constants not counted), default 1,800: CoreML-LLM's
  largest working chunk has 1,847 ops of which 133 are LUT constants
  (docs/THREE_CHUNK_MAC_BENCH.md); no project documents a hard limit.

The op count of a function is not estimated: it is counted on a miniature
of the real graph, built by graph.build_function with the model's layer
structure (layer kinds, KV sources, per-layer inputs, which chunk reads
which cache) and every dimension shrunk, so it has exactly the real
graph's ops at a fraction of the cost and with no weights. The byte count
is each weight's storage size under the chosen weight option (storage_bytes).

The output projection is never alone in a chunk: a plan whose last chunk
would hold it with a single layer of a multi-layer model fails (issue 26:
the old greedy planner put E2B's 262144 x 1536 projection with layer 34
alone). A layer that cannot fit in any chunk fails the plan before
anything is converted, naming the layer.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np

from .checkpoint import Arch, Checkpoint, CheckpointError
from .graph import LUT_GROUP, QUANT_THRESHOLD

MIB = 1 << 20
# Anemll docs/calc_chunk_split.md: --max-chunk-mb "default 950" (see above).
DEFAULT_CHUNK_MIB = 950.0
# CoreML-LLM docs/THREE_CHUNK_MAC_BENCH.md: 1,847 ops in its largest working
# chunk, 133 of them LUT constants (see above).
DEFAULT_MAX_OPS = 1800

# The per-layer roles that are linear layers' weights (quantised under a
# compressed weight option); the others are norm gammas (stored doubled for
# the [x, -x] RMSNorm, graph._Builder.rms) or scalars (immediates).
LINEAR_ROLES = ("wq", "wk", "wv", "wo", "gate", "up", "down", "ple_gate", "ple_proj")


# What weight.bin adds per stored array: a 64-byte record header, the data
# aligned to 64 bytes (coremltools' blob storage).
BLOB_OVERHEAD = 128


def storage_bytes(kind: str, rows: int, cols: int) -> int:
    """Bytes a [rows, cols] matrix takes in weight.bin under weight option
    kind (graph.WEIGHT_OPTIONS): fp16 2 per element; int8 1 per element and
    an fp16 scale per row; lutN N bits per element and, per group of 16
    rows, a palette of 2^N fp16 values. A matrix under QUANT_THRESHOLD
    elements, or one whose rows do not divide into groups of 16, stays
    fp16 (as coremltools leaves it)."""
    n = rows * cols
    one, two = BLOB_OVERHEAD, 2 * BLOB_OVERHEAD  # fp16: one array; compressed: data and scales (or palettes)
    if kind == "fp16" or n < QUANT_THRESHOLD:
        return 2 * n + one
    if kind == "int8":
        return n + 2 * rows + two
    if kind.startswith("lut"):
        bits = int(kind[3:])
        if rows % LUT_GROUP:
            return 2 * n + one
        return (n * bits + 7) // 8 + (rows // LUT_GROUP) * (1 << bits) * 2 + two
    raise ValueError(f"unknown weight option {kind!r}")


@dataclasses.dataclass
class Limits:
    """The plan's limits: weight bytes per package and ops per function."""
    max_bytes: int = int(DEFAULT_CHUNK_MIB * MIB)
    max_ops: int = DEFAULT_MAX_OPS


@dataclasses.dataclass
class Planned:
    """One chunk of a plan: layers [first, end), its packages' weight bytes,
    each function's op count, and whether it holds the output projection."""
    first: int
    end: int
    weight_bytes: int
    ops: Dict[str, int]
    lm_head: bool

    def to_json(self) -> dict:
        return {"layers": [self.first, self.end], "weight_bytes": self.weight_bytes, "ops": dict(self.ops),
                "lm_head": self.lm_head}


def _functions(width: int, prefill: int, last: bool) -> List[Tuple[str, int, str]]:
    from .graph import GENERATE, PREFILL, SAMPLE
    fns = [(GENERATE, width, f"generate_{width}")]
    if last:
        fns.append((SAMPLE, width, f"sample_{width}"))
    return fns + [(PREFILL, prefill, f"prefill_{prefill}")]


class _Miniature:
    """A checkpoint with the layer structure of ck and every dimension
    shrunk (hidden 8, head dim 4, MLP 8, per-layer width 2, vocabulary 4):
    graph.build_function emits for it exactly the ops it emits for ck, at a
    tiny cost and with no weights read. The per-layer scalars are taken
    from ck when it has weights (their value decides whether a mul is
    emitted) and assumed not 1 otherwise (a config-only plan then counts
    at most one op per layer too many)."""

    def __init__(self, ck: Checkpoint, scalars: Dict[str, float]):
        a = ck.arch
        H, HD, F, P, V = 8, 4, 8, 2 if a.ple_dim > 0 else 0, 4
        m = copy.deepcopy(a)
        m.hidden, m.vocab, m.ple_dim = H, V, P
        m.ple_vocab = V if P else 0
        for lay in m.layers:
            lay.head_dim, lay.ffn = HD, F
        for r in m.ropes.values():
            r.head_dim, r.pairs, r.freq_dim = HD, min(r.pairs, HD // 2), HD
        self.arch = m
        self.path = ck.path
        L = len(m.layers)
        self.shapes: Dict[str, tuple] = {}
        for role in ck.roles():
            self.shapes[role] = self._shape(m, role, H, HD, F, P, V, L)
        self._names = {r: r for r in self.shapes}
        self.scalars = scalars

    @staticmethod
    def _shape(m: Arch, role: str, H, HD, F, P, V, L):
        if role in ("embed", "output"):
            return (V, H)
        if role == "norm":
            return (H,)
        if role == "ple_embed":
            return (V, L * P)
        if role == "ple_proj":
            return (L * P, H)
        if role == "ple_norm":
            return (P,)
        name = role.split(".", 2)[2]
        qd, kvd = m.heads * HD, m.layers[int(role.split(".")[1])].kv_heads * HD
        return {"wq": (qd, H), "wk": (kvd, H), "wv": (kvd, H), "wo": (H, qd), "gate": (F, H), "up": (F, H),
                "down": (H, F), "ple_gate": (P, H), "ple_proj": (H, P), "q_norm": (HD,), "k_norm": (HD,),
                "scalar": (1,)}.get(name, (H,))

    def has(self, role: str) -> bool:
        return role in self.shapes

    def roles(self) -> List[str]:
        return list(self.shapes)

    def weight(self, role: str) -> np.ndarray:
        if role.endswith(".scalar"):
            return np.full((1,), self.scalars.get(role, 0.5), dtype=np.float32)
        return np.full(self.shapes[role], 0.25, dtype=np.float32)


class Planner:
    """Plans the chunks of ck (a loaded checkpoint or a config-only
    checkpoint.load_spec) for functions of width `width` and `prefill`,
    weights stored as `weights` (the output projection's as `head_weights`),
    under `limits`."""

    def __init__(self, ck: Checkpoint, width: int, prefill: int, weights: str, head_weights: str,
                 limits: Limits, read_scalars: bool = True):
        self.ck = ck
        self.a = ck.arch
        self.L = len(self.a.layers)
        self.width, self.prefill = width, prefill
        self.weights, self.head_weights = weights, head_weights
        self.limits = limits
        scalars = {}
        if read_scalars:
            for i in range(self.L):
                r = f"layers.{i}.scalar"
                if ck.has(r):
                    scalars[r] = float(ck.weight(r).reshape(-1)[0])
        self.mini = _Miniature(ck, scalars)
        self._ops: Dict[tuple, Dict[str, int]] = {}
        self.layer_bytes = [self._layer_bytes(i) for i in range(self.L)]
        self.first_bytes = self._role_bytes("ple_proj") + self._role_bytes("ple_norm")
        head = "embed" if self.a.tied else "output"
        self.head_bytes = storage_bytes(self.head_weights, *ck.shapes[head]) + self._role_bytes("norm")

    def _role_bytes(self, role: str) -> int:
        if not self.ck.has(role):
            return 0
        shape = self.ck.shapes[role]
        name = role.rsplit(".", 1)[-1]
        if len(shape) == 2 and (name in LINEAR_ROLES or role == "ple_proj"):
            return storage_bytes(self.weights, *shape)
        if name == "scalar":
            return 0
        return 4 * int(np.prod(shape)) + BLOB_OVERHEAD  # norm gammas, stored doubled in fp16

    def _layer_bytes(self, i: int) -> int:
        p = f"layers.{i}."
        lay = self.a.layers[i]
        # The RoPE rotation (graph.rot_matrix), an fp16 head_dim x head_dim
        # constant per use: Q, and K on a layer that owns its cache.
        rot = (2 * lay.head_dim * lay.head_dim + BLOB_OVERHEAD) * (2 if lay.source == i else 1)
        return rot + sum(self._role_bytes(r) for r in self.ck.roles() if r.startswith(p))

    def chunk_bytes(self, first: int, end: int, last: bool) -> int:
        b = sum(self.layer_bytes[first:end])
        if first == 0:
            b += self.first_bytes
        if last:
            b += self.head_bytes
        return b

    def chunk_ops(self, first: int, end: int, last: bool) -> Dict[str, int]:
        """Each function's op count (constants excluded, as bundle audit
        counts) of the chunk [first, end), from the miniature graph."""
        key = (first, end, last)
        got = self._ops.get(key)
        if got is None:
            from .graph import Chunk, Geometry, Weights, build_function
            geo = Geometry(context=8, sliding_slots=8, argmax_block=self.mini.arch.vocab)
            index = 0 if first == 0 else 1
            c = Chunk(index, first, end, last)
            w = Weights(self.mini)
            got = {}
            for kind, _, name in _functions(self.width, self.prefill, last):
                prog, _, _ = build_function(self.mini, w, geo, c, index + 1, kind, 2)
                fn = prog.functions["main"]
                got[name] = sum(1 for op in fn.operations if op.op_type != "const")
            self._ops[key] = got
        return got

    def planned(self, first: int, end: int, last: bool) -> Planned:
        return Planned(first, end, self.chunk_bytes(first, end, last), self.chunk_ops(first, end, last), last)

    def fits(self, first: int, end: int, last: bool) -> bool:
        if self.chunk_bytes(first, end, last) > self.limits.max_bytes:
            return False
        return max(self.chunk_ops(first, end, last).values()) <= self.limits.max_ops

    def _too_big(self, i: int, last: bool) -> CheckpointError:
        p = self.planned(i, i + 1, last)
        what = f"layer {i}"
        if i == 0:
            what += " with the per-layer projection"
        if last:
            what += " with the final norm and the output projection"
        fn, ops = max(p.ops.items(), key=lambda kv: kv[1])
        return CheckpointError(
            f"{self.ck.path}: {what} alone needs {p.weight_bytes / MIB:.1f} MiB of weights "
            f"(--weights {self.weights}, head {self.head_weights}) and {ops} ops in {fn}, over the limits "
            f"of {self.limits.max_bytes / MIB:.0f} MiB per package (--chunk-mb) and {self.limits.max_ops} ops "
            f"per function (--max-ops): choose a smaller --weights option or raise the limits")

    def check(self, ranges: List[Tuple[int, int]]) -> List[Planned]:
        """The planned chunks of explicit ranges, failing on the first over a
        limit."""
        out = []
        for j, (lo, hi) in enumerate(ranges):
            last = j == len(ranges) - 1
            p = self.planned(lo, hi, last)
            fn, ops = max(p.ops.items(), key=lambda kv: kv[1])
            if p.weight_bytes > self.limits.max_bytes or ops > self.limits.max_ops:
                raise CheckpointError(
                    f"{self.ck.path}: chunk {j} (layers {lo}-{hi - 1}) needs {p.weight_bytes / MIB:.1f} MiB of "
                    f"weights (--weights {self.weights}) and {ops} ops in {fn}, over the limits of "
                    f"{self.limits.max_bytes / MIB:.0f} MiB per package (--chunk-mb) and {self.limits.max_ops} "
                    f"ops per function (--max-ops): split it, choose smaller weights or raise the limits")
            out.append(p)
        return out

    def kv_shared_layout(self) -> Optional[List[Tuple[int, int]]]:
        """CoreML-LLM's three chunks for a Gemma 4 model with KV-shared
        layers (conversion/models/gemma4_swa_chunks.py,
        compute_chunk_boundaries, merged to three chunks by
        build_gemma4_e2b_stateful_3chunks.py): the owning layers' first
        half; the rest of them with the first half of the shared layers;
        the other shared layers with the output projection. For E2B (35
        layers, 20 shared) that is 0-7, 8-24, 25-34, the layout CoreML-LLM
        runs on a Mac's ANE (docs/THREE_CHUNK_MAC_BENCH.md: the merged
        17-layer middle chunk, 34.8 tok/s against 33.1 with four chunks)."""
        shared = [i for i, lay in enumerate(self.a.layers) if lay.source != i]
        if not shared or self.L < 3:
            return None
        own_end = shared[0]
        if any(lay.source == i for i, lay in enumerate(self.a.layers[own_end:], own_end)):
            return None  # owning layers after shared ones: not the Gemma 4 shape
        c1 = (own_end + 1) // 2
        c3 = own_end + (self.L - own_end) // 2
        if not 0 < c1 < c3 < self.L:
            return None
        return [(0, c1), (c1, c3), (c3, self.L)]

    def plan(self) -> List[Planned]:
        """The default plan: one chunk if the model fits; else, for a Gemma 4
        model with KV-shared layers, CoreML-LLM's three chunks when they fit;
        else chunks filled from the end (the output projection's chunk
        first, as many layers as the limits allow, then backwards). Fails
        naming the layer that fits no chunk, or when the output projection
        would be alone with one layer."""
        L = self.L
        if self.fits(0, L, True):
            return [self.planned(0, L, True)]
        for i in range(L):  # the first layer that fits no chunk, by name
            if not self.fits(i, i + 1, i == L - 1):
                raise self._too_big(i, i == L - 1)
        shared = self.kv_shared_layout()
        if shared is not None and all(self.fits(lo, hi, j == len(shared) - 1) for j, (lo, hi) in enumerate(shared)):
            return self.check(shared)
        ranges: List[Tuple[int, int]] = []
        end = L
        while end > 0:
            last = end == L
            # The lowest first layer that fits (a chunk's bytes and ops only
            # grow as it takes more layers): a binary search, so a plan
            # builds O(log L) miniatures per chunk.
            lo, hi = 0, end - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if self.fits(mid, end, last):
                    hi = mid
                else:
                    lo = mid + 1
            ranges.insert(0, (lo, end))
            end = lo
        if L > 1 and ranges[-1][1] - ranges[-1][0] == 1:
            p = self.planned(L - 1, L, True)
            raise CheckpointError(
                f"{self.ck.path}: the output projection ({self.head_bytes / MIB:.1f} MiB at --weights "
                f"{self.head_weights}) leaves room for no layer but {L - 1} in its chunk ({p.weight_bytes / MIB:.1f} "
                f"MiB) under {self.limits.max_bytes / MIB:.0f} MiB per package and {self.limits.max_ops} ops "
                f"per function: it would be alone; choose a smaller --weights option or raise --chunk-mb")
        return [self.planned(lo, hi, j == len(ranges) - 1) for j, (lo, hi) in enumerate(ranges)]


def parse_ranges(spec: str, n_layers: int) -> List[Tuple[int, int]]:
    """--chunks "0-7,8-24,25-34" as [first, end) ranges covering every layer
    in order."""
    ranges = []
    for part in spec.split(","):
        try:
            lo, hi = (int(x) for x in part.split("-"))
        except ValueError:
            raise CheckpointError(f"--chunks {spec!r}: {part!r} is not a range like 0-7")
        ranges.append((lo, hi + 1))
    want = 0
    for lo, hi in ranges:
        if lo != want or hi <= lo:
            raise CheckpointError(f"--chunks {spec!r}: the ranges must cover layers 0..{n_layers - 1} in order")
        want = hi
    if want != n_layers:
        raise CheckpointError(f"--chunks {spec!r}: the ranges must cover layers 0..{n_layers - 1} in order")
    return ranges


def plan_json(plan: List[Planned], weights: str, head_weights: str, limits: Limits) -> dict:
    """What `--plan` prints."""
    return {"chunks": [p.to_json() for p in plan], "weights": weights, "head_weights": head_weights,
            "limits": {"max_bytes": limits.max_bytes, "max_ops": limits.max_ops}}
