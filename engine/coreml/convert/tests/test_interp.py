"""The reference interpreter, op by op, against numpy references.

Each test builds a small MIL program with the builder, saves it as an
.mlpackage (the converter's settings: iOS18, no graph passes), reads the
package back and runs it on the interpreter. References are computed
independently: numpy's own float16 arithmetic for add and mul (correctly
rounded: float32 holds more than 2*11+2 bits, so its double rounding is
innocuous), float64 formulas through the math module elsewhere.
"""
import math
import os

import numpy as np
import pytest

import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import Function, Program, types

from anebundle import interp
from anebundle.graph import rot_matrix
from anebundle.host import mask_and_place

RNG = np.random.default_rng(7)


def run_prog(tmp_path, inputs, body, name="p"):
    """Builds body(*placeholders) over fp16 inputs, saves and reloads it,
    runs it on the interpreter and returns its outputs in order."""
    specs = {k: mb.placeholder(shape=v.shape, dtype=types.fp16 if v.dtype == np.float16 else types.int32)
             for k, v in inputs.items()}
    with Function(specs, opset_version=ct.target.iOS18) as fn:
        outs = body(*[fn.inputs[k] for k in inputs])
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        fn.set_outputs(outs)
    prog = Program()
    prog.add_function("main", fn)
    m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                   pass_pipeline=ct.PassPipeline.EMPTY, skip_model_load=True)
    path = os.path.join(str(tmp_path), name + ".mlpackage")
    m.save(path)
    pkg = interp.Package(path)
    fnl = pkg.prog.functions["main"]
    res = interp.run_function(fnl, inputs)
    return [res[v.name] for v in fnl.outputs]


def f16(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float16)


def ulps(a, b):
    """Distance in fp16 ulps (ordered bit patterns)."""
    def key(x):
        i = np.asarray(x, dtype=np.float16).view(np.int16).astype(np.int32)
        return np.where(i < 0, -32768 - i, i)
    return np.abs(key(a) - key(b))


def test_add_mul_are_ieee_fp16(tmp_path):
    x, y = f16(4, 64, scale=100), f16(4, 64, scale=0.01)
    y[0, :8] = np.float16(65504)  # overflow to inf
    a, m = run_prog(tmp_path, {"x": x, "y": y}, lambda x, y: [mb.add(x=x, y=y), mb.mul(x=x, y=y)])
    with np.errstate(over="ignore"):
        assert np.array_equal(a, x + y, equal_nan=True)
        assert np.array_equal(m, x * y, equal_nan=True)
    assert a.dtype == np.float16 and m.dtype == np.float16


def test_linear_and_matmul(tmp_path):
    x = f16(1, 5, 48)
    w = f16(24, 48, scale=0.2)
    y4 = f16(3, 6, 48)

    def body(x, y4):
        return [mb.linear(x=x, weight=w), mb.matmul(x=mb.reshape(x=x, shape=[1, 1, 5, 48]), y=y4, transpose_y=True)]
    lin, mm = run_prog(tmp_path, {"x": x, "y4": y4}, body)
    ref_lin = np.array([[[math.fsum(float(a) * float(b) for a, b in zip(x[0, t], w[o])) for o in range(24)]
                         for t in range(5)]]).astype(np.float16)
    assert np.array_equal(lin, ref_lin)
    ref_mm = np.einsum("tk,bnk->btn", x[0].astype(np.float64), y4.astype(np.float64))[None].astype(np.float16)
    assert mm.shape == (1, 3, 5, 6)
    assert ulps(mm, ref_mm.reshape(1, 3, 5, 6)).max() <= 1


def test_matmul_rows_are_independent_of_the_row_count():
    """The same row gives the same bits whether it is alone or among
    others (the property the generation function relies on)."""
    w = RNG.standard_normal((300, 40)).astype(np.float16)
    x = RNG.standard_normal((9, 300)).astype(np.float16)
    full = interp.matmul_fixed(x, w)
    for t in range(9):
        assert np.array_equal(full[t], interp.matmul_fixed(x[t:t + 1], w)[0])


def test_rms_norm_by_layer_norm(tmp_path):
    """RMSNorm as the converter writes it: layer_norm over [x, -x] (mean
    exactly 0), times the weight, first half; large values do not overflow
    (no x^2 in fp16)."""
    x = f16(3, 64, scale=300)
    w = f16(64)
    eps = 1e-6

    def body(x):
        xx = mb.concat(values=[x, mb.mul(x=x, y=np.float16(-1))], axis=-1)
        n = mb.layer_norm(x=xx, axes=[-1], gamma=np.concatenate([w, w]), epsilon=np.float16(eps))
        return mb.slice_by_index(x=n, begin=[0, 0], end=[3, 64])
    (got,) = run_prog(tmp_path, {"x": x}, body)
    e16 = float(np.float16(eps))
    ref = np.array([[float(x[r, i]) / math.sqrt(math.fsum(float(v) ** 2 for v in x[r]) / 64 + e16) * float(w[i])
                     for i in range(64)] for r in range(3)]).astype(np.float16)
    assert np.all(np.isfinite(got))
    assert ulps(got, ref).max() <= 1


def test_masked_softmax_rows(tmp_path):
    """-inf entries get exactly 0, a row with one visible entry exactly 1,
    and each visible entry is the softmax over the visible ones alone."""
    s = f16(1, 2, 6, 10, scale=4)
    mask = np.full((1, 1, 6, 10), -np.inf, dtype=np.float16)
    vis = [[0], [0, 1], [3, 4, 5], list(range(10)), [9], [2, 7]]
    for r, cols in enumerate(vis):
        mask[0, 0, r, cols] = 0
    (p,) = run_prog(tmp_path, {"s": s, "m": mask}, lambda s, m: mb.softmax(x=mb.add(x=s, y=m), axis=-1))
    for h in range(2):
        for r, cols in enumerate(vis):
            row = p[0, h, r]
            hidden = [c for c in range(10) if c not in cols]
            assert np.all(row[hidden] == 0)
            e = [math.exp(float(s[0, h, r, c])) for c in cols]
            ref = np.array([v / math.fsum(e) for v in e]).astype(np.float16)
            assert ulps(row[cols], ref).max() <= 1
            if len(cols) == 1:
                assert row[cols[0]] == 1


def test_activations(tmp_path):
    x = np.concatenate([f16(200, scale=3), np.array([0, -0.0, 8, -8, 1e-4, 11], dtype=np.float16)])
    g, s, t = run_prog(tmp_path, {"x": x}, lambda x: [mb.gelu(x=x, mode="TANH_APPROXIMATION"), mb.silu(x=x), mb.tanh(x=x)])
    c = math.sqrt(2 / math.pi)
    xs = [float(v) for v in x]
    assert ulps(g, np.array([0.5 * v * (1 + math.tanh(c * (v + 0.044715 * v ** 3))) for v in xs]).astype(np.float16)).max() <= 1
    assert ulps(s, np.array([v / (1 + math.exp(-v)) for v in xs]).astype(np.float16)).max() <= 1
    assert ulps(t, np.array([math.tanh(v) for v in xs]).astype(np.float16)).max() <= 1


def test_argmax_ties_go_to_the_lowest_index(tmp_path):
    x = f16(1, 4, 50)
    x[0, 1, [3, 17, 40]] = 100
    x[0, 2, :] = 5
    (a,) = run_prog(tmp_path, {"x": x}, lambda x: mb.reduce_argmax(x=x, axis=-1, keep_dims=False))
    assert a.dtype == np.int32
    assert list(a[0]) == [int(np.argmax(x[0, 0])), 3, 0, int(np.argmax(x[0, 3]))]


def test_blockwise_argmax_is_the_flat_argmax(tmp_path):
    """The generation function's tail: the logits [1,T,V] reshaped to
    [1,T,nb,B], reduce_argmax and reduce_max per block (exact: they move
    values, round nothing), then the host's second level
    (host.block_argmax): the lowest block holding the row's maximum, which
    is the flat argmax (lowest id among equal maxima). Rows with ties
    inside a block, across blocks, an all-equal row, -inf, and NaN (never
    wins; a row of NaN gives -1)."""
    from anebundle.host import block_argmax, greedy
    T, nb, B = 8, 4, 16
    x = f16(1, T, nb * B)
    x[0, 1, [5, 9]] = 50  # inside one block
    x[0, 2, [7, 23, 55]] = 50  # across blocks: 7 wins
    x[0, 3, [40, 20]] = 50  # across blocks, the later block listed first
    x[0, 4, :] = 3  # all equal: id 0
    x[0, 5, :] = -np.inf
    x[0, 5, 33] = -60000
    x[0, 6, [2, 30]] = np.nan  # NaN never wins
    x[0, 6, 47] = 70
    x[0, 7, :] = np.nan

    def body(x):
        zb = mb.reshape(x=x, shape=[1, T, nb, B])
        return [mb.reduce_argmax(x=zb, axis=-1, keep_dims=False), mb.reduce_max(x=zb, axes=[-1], keep_dims=False)]
    am, mx = run_prog(tmp_path, {"x": x}, body)
    assert am.dtype == np.int32 and mx.dtype == np.float16 and am.shape == mx.shape == (1, T, nb)
    blocks = x.reshape(1, T, nb, B)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(mx, blocks.max(axis=-1), equal_nan=True)
    assert np.array_equal(am, blocks.argmax(axis=-1))
    ids = [block_argmax(am[0, t], mx[0, t], B)[0] for t in range(T)]
    assert ids == [greedy(x[0, t]) for t in range(T)]
    assert ids[1:] == [5, 7, 20, 0, 33, 47, -1]
    assert block_argmax(am[0, 2], mx[0, 2], B)[1] == 50


def test_data_movement(tmp_path):
    x = f16(1, 4, 6, 8)

    def body(x):
        return [mb.transpose(x=x, perm=[0, 2, 1, 3]), mb.reshape(x=x, shape=[1, 24, 8]),
                mb.slice_by_index(x=x, begin=[0, 1, 2, 0], end=[1, 3, 6, 5]), mb.concat(values=[x, x], axis=2)]
    t, r, s, c = run_prog(tmp_path, {"x": x}, body)
    assert np.array_equal(t, x.transpose(0, 2, 1, 3))
    assert np.array_equal(r, x.reshape(1, 24, 8))
    assert np.array_equal(s, x[:, 1:3, 2:6, 0:5])
    assert np.array_equal(c, np.concatenate([x, x], axis=2))


def test_rope_rotation_is_exact(tmp_path):
    """x @ R gives the pair partners, the first of each pair negated, with
    no rounding; RoPE is then x*cos + (x@R)*sin."""
    for layout in ("halves", "interleaved"):
        x = f16(1, 2, 3, 16)
        (r,) = run_prog(tmp_path, {"x": x}, lambda x: mb.matmul(x=x, y=rot_matrix(16, layout)), name=layout)
        want = np.empty_like(x)
        for i in range(8):
            a, b = (i, i + 8) if layout == "halves" else (2 * i, 2 * i + 1)
            want[..., a], want[..., b] = -x[..., b], x[..., a]
        assert np.array_equal(r, want)


def test_unsupported_op_is_refused(tmp_path):
    x = f16(2, 3)
    with pytest.raises(interp.Unsupported):
        run_prog(tmp_path, {"x": x}, lambda x: mb.sigmoid(x=x))


@pytest.mark.parametrize("window,width", [(4, 1), (4, 3), (5, 8)])
def test_sliding_attention_past_the_window(tmp_path, window, width):
    """Attention over a sliding layer's ring of W+T slots, as the bundle
    runs it (the call's rows placed into the cache tensor, one masked
    softmax over the slots), at positions far past the window and around
    the ring several times: each row equals attention over exactly
    positions p-W+1..p computed directly, and the mask shows exactly those
    slots."""
    hd, slots = 8, window + width
    n_pos = 6 * slots
    K = RNG.standard_normal((n_pos, hd)).astype(np.float16)
    V = RNG.standard_normal((n_pos, hd)).astype(np.float16)
    Q = RNG.standard_normal((n_pos, hd)).astype(np.float16)

    def body(q, kc, vc, kn, vn, mask, place):
        pk = mb.add(x=kc, y=mb.matmul(x=place, y=kn))
        pv = mb.add(x=vc, y=mb.matmul(x=place, y=vn))
        sc = mb.add(x=mb.matmul(x=q, y=pk, transpose_y=True), y=mask)
        return [mb.matmul(x=mb.softmax(x=sc, axis=-1), y=pv), pk]

    shape = lambda *s: np.zeros(s, dtype=np.float16)  # noqa: E731
    inputs = {"q": shape(1, 1, width, hd), "kc": shape(1, 1, slots, hd), "vc": shape(1, 1, slots, hd),
              "kn": shape(1, 1, width, hd), "vn": shape(1, 1, width, hd), "mask": shape(1, 1, width, slots),
              "place": shape(1, 1, slots, width)}
    specs = {k: mb.placeholder(shape=v.shape, dtype=types.fp16) for k, v in inputs.items()}
    with Function(specs, opset_version=ct.target.iOS18) as fn:
        fn.set_outputs(body(*[fn.inputs[k] for k in inputs]))
    prog = Program()
    prog.add_function("main", fn)
    path = os.path.join(str(tmp_path), f"att{window}_{width}.mlpackage")
    ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
               pass_pipeline=ct.PassPipeline.EMPTY, skip_model_load=True).save(path)
    f = interp.Package(path).prog.functions["main"]
    p = 0
    while p < n_pos:
        n = min(width, n_pos - p, 1 + (p % 3))  # calls of 1..3 real rows, the rest padding
        pos = [p + t for t in range(n)] + [p + n - 1] * (width - n)
        mask, place = mask_and_place(pos, n, slots, window)
        for t in range(width):
            vis = {q % slots for q in range(max(0, pos[t] - window + 1), pos[t] + 1)}
            assert {j for j in range(slots) if mask[t, j] == 0} == vis
        kc, vc = np.zeros((slots, hd), np.float16), np.zeros((slots, hd), np.float16)
        for q in range(max(0, p - slots + n), p):  # committed rows; the call's own slots stay zero
            kc[q % slots], vc[q % slots] = K[q], V[q]
        ids = [min(x, n_pos - 1) for x in pos]
        out = interp.run_function(f, {
            "q": Q[ids][None, None], "kc": kc[None, None], "vc": vc[None, None],
            "kn": K[ids][None, None], "vn": V[ids][None, None], "mask": mask[None, None], "place": place[None, None]})
        att, placed = out[f.outputs[0].name], out[f.outputs[1].name]
        for t in range(n):
            assert np.array_equal(placed[0, 0, pos[t] % slots], K[pos[t]])  # placement is exact
            lo = max(0, pos[t] - window + 1)
            s = [math.fsum(float(a) * float(b) for a, b in zip(Q[pos[t]], K[q])) for q in range(lo, pos[t] + 1)]
            sc16 = np.array(s).astype(np.float16).astype(np.float64)
            e = np.exp(sc16 - sc16.max())
            pr = (e / e.sum()).astype(np.float16).astype(np.float64)
            ref = (pr[:, None] * V[lo:pos[t] + 1].astype(np.float64)).sum(axis=0).astype(np.float16)
            assert ulps(att[0, 0, t], ref).max() <= 2, (p, t)
        p += n
