"""A reference interpreter for the MIL ops a bundle uses, reading the
*saved* .mlpackage (coremltools' milproto loader: the program as Core ML
will get it, not the builder's in-memory program).

Semantics, per op: the inputs (fp16, int32 or fp32 tensors) are widened
exactly to float64; every output element is computed in float64 with sums
in one fixed order (matmul/linear: ascending over the inner index; other
reductions: numpy's pairwise sum over a contiguous axis, fixed for a given
length); the result is rounded once to the op's declared output dtype. So
add and mul are exactly IEEE fp16 arithmetic, and a long reduction rounds
once at its end, as a correctly rounding fp16 unit with a wide accumulator
would. This is a specification of what each op computes, not a model of
the Neural Engine's internal rounding (which only a Mac can measure).

Any op or option the converter does not emit raises Unsupported: the
interpreter implements exactly the ops it is tested on.
"""
from __future__ import annotations

import os
from typing import Dict, List

import numpy as np


class Unsupported(Exception):
    """An op, or an option of an op, the interpreter does not implement."""


_DTYPES = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "int8": np.int8, "uint8": np.uint8,
           "int4": np.int8, "uint4": np.uint8, "bool": np.bool_, "int16": np.int16, "uint16": np.uint16,
           "uint1": np.uint8, "uint2": np.uint8, "uint3": np.uint8, "uint6": np.uint8}


def _dtype_name(t) -> str:
    from coremltools.converters.mil.mil import types
    if types.is_tensor(t):
        t = t.get_primitive()
    return types.builtin_to_string(t)


def np_dtype(var) -> type:
    name = _dtype_name(var.sym_type if hasattr(var, "sym_type") else var)
    if name not in _DTYPES:
        raise Unsupported(f"dtype {name}")
    return _DTYPES[name]


def load_package(path: str):
    """The MIL program of a saved .mlpackage, read back on Linux: its
    functions by name, each op with its inputs and weight values (from the
    package's weight.bin). Also returns the model spec (the functions'
    input/output descriptions)."""
    import coremltools as ct
    from coremltools.converters.mil.frontend.milproto import load as milproto
    m = ct.models.MLModel(path, skip_model_load=True)
    spec = m.get_spec()
    weights = os.path.join(path, "Data", "com.apple.CoreML", "weights")
    prog = milproto.load(spec, spec.specificationVersion, weights)
    return prog, spec


def _val(var):
    v = var.val
    if v is None:
        raise Unsupported(f"{var.name} is not a constant")
    return v


def matmul_fixed(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x @ y over the last two axes (batch axes broadcast) in float64: the
    products (exact for fp16 operands) of each output element are laid out
    contiguously over k and summed by numpy's pairwise reduction, one fixed
    summation tree for a given inner length K. The blocking below bounds
    memory and changes no element's tree, so an output row does not depend
    on how many rows the call has."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim == 1 or y.ndim == 1:
        raise Unsupported("matmul of a rank-1 operand")
    K = x.shape[-1]
    if y.shape[-2] != K:
        raise ValueError(f"matmul inner dims {x.shape} @ {y.shape}")
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    M, N = x.shape[-2], y.shape[-1]
    x = np.broadcast_to(x, batch + (M, K))
    yt = np.ascontiguousarray(np.swapaxes(np.broadcast_to(y, batch + (K, N)), -1, -2))  # [..., N, K]
    out = np.empty(batch + (M, N), dtype=np.float64)
    nb = int(np.prod(batch))
    budget = 1 << 22
    nblk = max(1, min(N, budget // max(1, nb * K)))
    mblk = max(1, min(M, budget // max(1, nb * K * nblk)))
    for m0 in range(0, M, mblk):
        m1 = min(M, m0 + mblk)
        for n0 in range(0, N, nblk):
            n1 = min(N, n0 + nblk)
            prod = x[..., m0:m1, None, :] * yt[..., None, n0:n1, :]
            out[..., m0:m1, n0:n1] = np.add.reduce(prod, axis=-1)
    return out


def _round(a: np.ndarray, dt) -> np.ndarray:
    # numpy rounds float64 -> float16 correctly (one rounding, ties to even).
    with np.errstate(over="ignore"):  # overflow to inf is fp16 rounding too
        return np.asarray(a).astype(dt)


def _ln(x, axes, gamma, beta, eps):
    x = x.astype(np.float64)
    ax = tuple(sorted(a % x.ndim for a in axes))
    mean = np.mean(x, axis=ax, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=ax, keepdims=True)
    y = d / np.sqrt(var + float(eps))
    if gamma is not None:
        y = y * gamma.astype(np.float64)
    if beta is not None:
        y = y + beta.astype(np.float64)
    return y


def _softmax(x, axis):
    x = x.astype(np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    e = np.ascontiguousarray(np.moveaxis(e, axis, -1))
    s = np.sum(e, axis=-1, keepdims=True)
    return np.moveaxis(e / s, -1, axis)


def _gelu_tanh(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _slice(x, begin, end, stride, begin_mask, end_mask, squeeze_mask):
    if squeeze_mask is not None and np.any(squeeze_mask):
        raise Unsupported("slice_by_index with squeeze_mask")
    idx = []
    for i in range(x.ndim):
        b = None if (begin_mask is not None and begin_mask[i]) else int(begin[i])
        e = None if (end_mask is not None and end_mask[i]) else int(end[i])
        s = 1 if stride is None else int(stride[i])
        idx.append(slice(b, e, s))
    return x[tuple(idx)]


def _blockwise_dequant(data, scale, offset):
    """constexpr_blockwise_shift_scale: (data - offset) * scale, with scale
    and offset repeated over blocks along each axis."""
    data = data.astype(np.float64)
    rep = [d // s for d, s in zip(data.shape, scale.shape)]
    sc = scale.astype(np.float64)
    for ax, r in enumerate(rep):
        sc = np.repeat(sc, r, axis=ax)
    if offset is not None:
        of = offset.astype(np.float64)
        for ax, r in enumerate(rep):
            of = np.repeat(of, r, axis=ax)
        data = data - of
    return data * sc


def _lut_dequant(indices, lut):
    """constexpr_lut_to_dense (iOS18): lut[..., index, vector] per block."""
    if lut.shape[-1] != 1:
        raise Unsupported("constexpr_lut_to_dense with vector palettes")
    idx = indices.astype(np.int64)
    rep = [d // s for d, s in zip(idx.shape, lut.shape[:-2])]
    out = np.empty(idx.shape, dtype=np.float64)
    it = np.ndindex(*lut.shape[:-2])
    for blk in it:
        sl = tuple(slice(b * r, (b + 1) * r) for b, r in zip(blk, rep))
        table = lut[blk][:, 0].astype(np.float64)
        out[sl] = table[idx[sl]]
    return out


def run_op(op, env: Dict[str, np.ndarray], out_dt=None) -> List[np.ndarray]:
    """Computes one op's outputs from env (var name -> value); out_dt is
    the declared dtype of its first output (looked up when None)."""
    t = op.op_type
    # op.inputs builds a new dict on every access: keep one per op, and the
    # values of its constant parameters.
    ins = op.__dict__.get("_ane_inputs")
    if ins is None:
        ins = op.__dict__["_ane_inputs"] = dict(op.inputs)
        op.__dict__["_ane_consts"] = {}
    consts = op.__dict__["_ane_consts"]

    def inp(name, required=True):
        v = ins.get(name)
        if v is None:
            if required:
                raise Unsupported(f"{t} {op.name}: missing input {name}")
            return None
        if isinstance(v, (list, tuple)):
            return [env[x.name] if x.name in env else _val(x) for x in v]
        if v.name in env:
            return env[v.name]
        return np.asarray(const(name))

    def const(name, default=None):
        if name in consts:
            return consts[name]
        v = ins.get(name)
        if v is None:
            return default
        consts[name] = _val(v)
        return consts[name]

    if t == "const":
        v = op.outputs[0].val
        if isinstance(v, str):
            return [v]
        return [np.asarray(v).astype(np_dtype(op.outputs[0]))]
    if out_dt is None:
        out_dt = np_dtype(op.outputs[0])
    if t == "linear":
        x, w = inp("x"), inp("weight")
        y = matmul_fixed(x, np.swapaxes(w, -1, -2))
        b = inp("bias", False)
        if b is not None:
            y = y + b.astype(np.float64)
        return [_round(y, out_dt)]
    if t == "matmul":
        x, y = inp("x"), inp("y")
        if const("transpose_x", False):
            x = np.swapaxes(x, -1, -2)
        if const("transpose_y", False):
            y = np.swapaxes(y, -1, -2)
        return [_round(matmul_fixed(x, y), out_dt)]
    if t in ("add", "mul", "sub", "real_div"):
        x, y = inp("x").astype(np.float64), inp("y").astype(np.float64)
        r = {"add": np.add, "mul": np.multiply, "sub": np.subtract, "real_div": np.divide}[t](x, y)
        return [_round(r, out_dt)]
    if t == "concat":
        if const("interleave", False):
            raise Unsupported("concat with interleave")
        return [np.concatenate(inp("values"), axis=int(const("axis"))).astype(out_dt)]
    if t == "layer_norm":
        x = inp("x")
        g, b = inp("gamma", False), inp("beta", False)
        eps = const("epsilon", np.float16(1e-5))
        return [_round(_ln(x, [int(a) for a in const("axes")], g, b, np.float64(eps)), out_dt)]
    if t == "slice_by_index":
        x = inp("x")
        return [_slice(x, const("begin"), const("end"), const("stride"), const("begin_mask"), const("end_mask"),
                       const("squeeze_mask")).astype(out_dt)]
    if t == "reshape":
        return [inp("x").reshape([int(s) for s in const("shape")]).astype(out_dt)]
    if t == "transpose":
        return [np.transpose(inp("x"), [int(p) for p in const("perm")]).astype(out_dt)]
    if t == "softmax":
        return [_round(_softmax(inp("x"), int(const("axis"))), out_dt)]
    if t == "silu":
        x = inp("x").astype(np.float64)
        return [_round(x / (1 + np.exp(-x)), out_dt)]
    if t == "gelu":
        if const("mode") != "TANH_APPROXIMATION":
            raise Unsupported(f"gelu mode {const('mode')}")
        return [_round(_gelu_tanh(inp("x")), out_dt)]
    if t == "tanh":
        return [_round(np.tanh(inp("x").astype(np.float64)), out_dt)]
    if t == "identity":
        return [inp("x").astype(out_dt)]
    if t == "reduce_argmax":
        x = inp("x")
        axis = int(const("axis"))
        keep = bool(const("keep_dims", False))
        r = np.argmax(x, axis=axis)  # the first maximum: ties go to the lowest index
        if keep:
            r = np.expand_dims(r, axis)
        return [r.astype(out_dt)]
    if t == "reduce_max":
        # Exact: the maximum is one of the inputs (a NaN propagates, as in
        # numpy; reduce_argmax then points at the first NaN).
        x = inp("x")
        axes = const("axes")
        ax = None if axes is None else tuple(int(a) for a in np.atleast_1d(axes))
        return [np.max(x, axis=ax, keepdims=bool(const("keep_dims", False))).astype(out_dt)]
    if t == "constexpr_blockwise_shift_scale":
        return [_round(_blockwise_dequant(inp("data"), inp("scale"), inp("offset", False)), out_dt)]
    if t == "constexpr_lut_to_dense":
        return [_round(_lut_dequant(inp("indices"), inp("lut")), out_dt)]
    raise Unsupported(f"op {t} ({op.name})")


def _prepare(fn):
    """Per function, once: the constants' values and each op's declared
    output dtypes and shapes (the program is immutable once loaded)."""
    prep = getattr(fn, "_anebundle_prep", None)
    if prep is None:
        consts: Dict[str, np.ndarray] = {}
        ops = []
        for op in fn.operations:
            if op.op_type == "const":
                consts[op.outputs[0].name] = run_op(op, {})[0]
                continue
            ops.append((op, np_dtype(op.outputs[0]), [(v.name, tuple(int(s) for s in v.shape)) for v in op.outputs]))
        prep = (consts, ops)
        fn._anebundle_prep = prep
    return prep


def run_function(fn, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Executes a loaded MIL function op by op. inputs must have exactly the
    function's input names, shapes and dtypes."""
    consts, ops = _prepare(fn)
    env: Dict[str, np.ndarray] = dict(consts)
    for name, var in fn.inputs.items():
        if name not in inputs:
            raise ValueError(f"missing input {name}")
        a = np.asarray(inputs[name])
        want = tuple(int(s) for s in var.shape)
        if a.shape != want or a.dtype != np_dtype(var):
            raise ValueError(f"input {name}: got {a.shape} {a.dtype}, want {want} {np_dtype(var).__name__}")
        env[name] = a
    extra = set(inputs) - set(fn.inputs)
    if extra:
        raise ValueError(f"unknown inputs {sorted(extra)}")
    for op, dt, outs in ops:
        vals = run_op(op, env, dt)
        for (name, want), v in zip(outs, vals):
            if v.shape != want:
                raise ValueError(f"{op.op_type} {op.name}: computed shape {v.shape}, declared {want}")
            env[name] = v
    return {v.name: env[v.name] for v in fn.outputs}


class Package:
    """A saved chunk package: its functions, runnable by name."""

    def __init__(self, path: str):
        self.path = path
        self.prog, self.spec = load_package(path)

    def functions(self) -> List[str]:
        return list(self.prog.functions)

    def run(self, function: str, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return run_function(self.prog.functions[function], inputs)

    def op_types(self) -> Dict[str, int]:
        seen: Dict[str, int] = {}
        for fn in self.prog.functions.values():
            for op in fn.operations:
                seen[op.op_type] = seen.get(op.op_type, 0) + 1
        return seen


# Ops that move or select values without rounding them.
EXACT_OPS = {"const", "reshape", "transpose", "slice_by_index", "concat", "identity", "reduce_argmax", "reduce_max"}


def rounding_depth(fn) -> Dict[str, int]:
    """For each output of a loaded function: the largest number of fp16
    roundings on any path from the inputs to it (ops of EXACT_OPS round
    nothing; every other op rounds its result once)."""
    depth: Dict[str, int] = {name: 0 for name in fn.inputs}
    for op in fn.operations:
        d = 0
        for v in op.inputs.values():
            for x in (v if isinstance(v, (list, tuple)) else [v]):
                d = max(d, depth.get(x.name, 0))
        d += 0 if op.op_type in EXACT_OPS else 1
        for o in op.outputs:
            depth[o.name] = d
    return {v.name: depth[v.name] for v in fn.outputs}
