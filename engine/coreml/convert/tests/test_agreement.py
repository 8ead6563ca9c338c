"""The proof that a bundle computes what the CPU backend computes.

Each test runs on three tiny models: stories260K (the llama path, from
GGUF), the Gemma 4 fixture (engine/cpu/testdata/gemma4, split into 3 chunks
so that KV-shared layers read rows computed in an earlier chunk), and the
peaked Gemma 4 fixture (engine/cpu/testdata/gemma4-peaked, the same config
and chunks, weights built so the top logit leads by several units at every
step). The CPU
backend runs the checkpoint the bundle holds (anebundle.refmodel: fp16
weights, the INT8 sidecars' embedding values), so the two differ only by
fp16 versus float32 arithmetic.

Tolerance (stated once, used by every comparison): each op of a function
rounds its result to fp16, a relative error of at most u = 2^-11. A value
that passed through d roundings on its longest path from the inputs
(interp.rounding_depth, counted on the saved function) carries, to first
order, a relative error of at most d*u; measured against the scale of the
reference (its largest magnitude in the compared rows) that allows
|bundle - cpu| <= d * u * max|cpu|. Inputs carried from an earlier chunk
add that chunk's depth. The functions return logits before the softcap,
which the host applies in float32 as the CPU backend does; the softcap
c*tanh(z/c) is 1-Lipschitz, so the error after it is at most the error
before it, measured against the scale of the logits before it.
"""
import copy
import os

import numpy as np
import pytest

from anebundle import bundle as bundle_mod
from anebundle import host, interp, refmodel
from anebundle.host import Bundle, Sampler, generate, greedy
from conftest import GEMMA, fp16_u, long_axes

PROMPTS = [
    "Once upon a time, there was a little girl named Lily.",
    "The quick brown fox jumps over the lazy dog.",
    "Tom and Sam went to the store to buy some milk.",
    "Hello, world! How are you doing today?",
    "The sun is hot. The moon is cold.",
    "Why is the sky blue?",
    "One day, a big dog found a red ball in the park.",
    "She liked to play with her friends every day.",
    "It was the best of times, it was the worst of times.",
    "There was a cat and a bird who were friends.",
    "The little boy was sad because his toy was broken.",
    "Mom said it was time to go to bed.",
]

# How many of PROMPTS must give exactly the CPU backend's 32 ids. The
# Gemma 4 fixture is a random model whose top two logits are often within
# a few hundredths (reference.json: min margins 0.013-0.030), below fp16's
# resolution of logits near 15 (0.0078) times the error the bundle
# accumulates, so there the test asserts what fp16 allows: every id equal
# up to a near tie, and the rest checked teacher-forced. The peaked fixture
# keeps a top-1/top-2 gap of at least 3.5 on every step of these prompts
# (its reference.json), far above any fp16 error, so there all 12 prompts
# must match exactly (the issue asks for at least 10) and no near tie is
# allowed.
MIN_EQUAL = {"stories": 10, "gemma4": 5, "gemma4-peaked": 12}


def _depths(m):
    """Rounding depth of every output of every function, chained through
    the chunks (a chunk's inputs carry the depth of the chunk that made
    them)."""
    out = {}
    for kind in ("generate", "sample", "prefill"):
        carried = {}
        for ci, c in enumerate(m.bundle.chunks):
            f = m.bundle.function(ci, kind)
            fn = m.bundle.packages[ci].prog.functions[f["name"]]
            base = max([carried.get("hidden_out" if d["name"] == "hidden_in" else d["name"], 0)
                        for d in f["inputs"]] + [0])
            for name, d in interp.rounding_depth(fn).items():
                carried[name] = base + d
        out[kind] = carried
    return out


def _rows(a, n):
    """[1, kv_heads, T, hd] new rows -> [n, kv_heads*hd] as the CPU lays them out."""
    return a[0, :, :n, :].transpose(1, 0, 2).reshape(n, -1).astype(np.float32)


def _scale(want, cap):
    """max|z| of the reference's logits before the softcap (want is after
    it): the scale of the error of logits the host softcaps."""
    want = np.asarray(want, dtype=np.float64)
    if cap <= 0:
        return float(np.abs(want).max())
    return float(np.abs(cap * np.arctanh(np.clip(want / cap, -1 + 1e-12, 1 - 1e-12))).max())


def _check(name, got, want, depth, report, scale=None):
    tol = depth * fp16_u() * (float(np.abs(want).max()) if scale is None else scale)
    err = float(np.abs(got.astype(np.float32) - want).max())
    report.append((name, err, tol))
    assert err <= tol, f"{name}: max |bundle - cpu| = {err:.4g} > {tol:.4g} (depth {depth})"


def _blocks_are_the_flat_argmax(what, c, raw, block):
    """The blockwise outputs of call c (generate or prefill) against logits
    raw computed for the same rows (fp16, before the softcap): each block's
    maximum and first index of it, bit for bit, and the host's id the flat
    argmax (the lowest id holding the maximum), its top logit that maximum.
    Returns how many rows had their maximum at several ids inside one
    block, and in several blocks."""
    local, top = c.blocks
    within = across = 0
    for t in range(len(c.argmax)):
        bl = raw[t].reshape(-1, block)
        assert np.array_equal(top[t], bl.max(axis=-1)), f"{what} row {t}: block maxima"
        assert np.array_equal(local[t], bl.argmax(axis=-1)), f"{what} row {t}: block argmax"
        assert int(c.argmax[t]) == greedy(raw[t]), f"{what} row {t}: {c.argmax[t]}, flat argmax {greedy(raw[t])}"
        assert c.top[t] == raw[t].max()
        at = np.flatnonzero(raw[t] == raw[t].max())
        within += int(np.any(np.bincount(at // block) > 1))
        across += int(len(set(at // block)) > 1)
    return within, across


def test_functions_match_cpu(model, cpuref):
    """Every function, every output: prefill from offset 0 and from a
    later offset (a short last piece, so padded rows), a full-width
    generation call, and a width-1 one (7 padded rows), the generation
    calls run with generate and with sample on the same state, against the
    CPU backend on the same tokens and committed rows: the logits (sample,
    prefill; softcapped by the host) and the new K/V rows within the
    tolerance; the blockwise argmax (generate, prefill) exactly the flat
    argmax of the logits of the same rows (prefill: its own; generate: the
    sample function's), block by block, and the CPU's pick or a near tie
    of the CPU's logits."""
    b = model.bundle
    resp, _ = cpuref.run(model.reference, {"encode": [PROMPTS[0] + " " + PROMPTS[1]]})
    ids = resp["encoded"][0]
    N, K, B = b.geo["prefill_width"], b.geo["generate_width"], b.geo["argmax_block"]
    assert len(ids) > N, "the prompt must need two prefill pieces"
    assert b.arch["vocab"] // B == 8
    p1, p2 = ids[:N], ids[N:N + N // 2]
    steps = [("prefill", p1, len(p1)), ("prefill", p2, len(p2)),
             ("generate", [5, 9, 17, 33, 65, 129, 257, 300][:K], 3), ("generate", [7], 1)]
    _, ref = cpuref.run(model.reference, {"sequences": [{"name": "s", "steps": [
        {"tokens": t, "commit": c} for _, t, c in steps]}]})
    depth = _depths(model)
    cap = b.arch["softcap"]
    kv = b.new_kv()
    report = []
    for si, (kind, toks, commit) in enumerate(steps):
        c = b.call(toks, kv.n, kv, kind)
        n = len(toks)
        want = ref[f"s.{si}.logits"]
        lk = "prefill"
        if kind == "prefill":
            want, s = want[n - 1:n], c
        else:
            s, lk = b.call(toks, kv.n, kv, "sample"), "sample"
            assert c.logits is None and s.blocks is None
            for nm, v in c.new.items():
                assert np.array_equal(v, s.new[nm]), f"{si}: generate and sample disagree on {nm}"
        _check(f"{si} {lk} logits", s.logits, want, depth[lk]["logits"], report, _scale(want, cap))
        _blocks_are_the_flat_argmax(f"{si} {kind}", c, s.raw, B)
        tol = depth[kind]["block_max"] * fp16_u() * _scale(want, cap)
        for t, i in enumerate(c.argmax):
            gap = float(want[t].max() - want[t, i])
            assert gap <= tol, f"{si} {kind} row {t}: id {i}, the cpu's {np.argmax(want[t])} by {gap:.4g} > {tol:.4g}"
        for s_ in b.owners:
            for kv_ in ("k", "v"):
                nm = f"{kv_}_new_{s_}"
                _check(f"{si} {kind} {nm}", _rows(c.new[nm], n), ref[f"s.{si}.{kv_}.{s_}"], depth[kind][nm], report)
        b.commit(kv, c, commit)
    worst = max(report, key=lambda r: r[1] / r[2])
    print(f"\n{model.name}: worst error/tolerance {worst[1]:.4g}/{worst[2]:.4g} ({worst[0]})")


def _greedy_cpu(model, cpuref, n=32):
    resp, _ = cpuref.run(model.reference, {"encode": PROMPTS})
    prompts = resp["encoded"]
    g, _ = cpuref.run(model.reference, {"greedy": [{"name": str(i), "ids": p, "n": n} for i, p in enumerate(prompts)]})
    return prompts, [g["greedy"][str(i)] for i in range(len(prompts))]


def test_greedy_ids_match_cpu_with_and_without_speculation(model, cpuref, monkeypatch):
    """The Python host pipeline (sidecar lookup, RoPE tables, masks,
    placement, host KV, chunk handoff, accept/commit) gives the CPU
    backend's greedy ids on the prompts (32 ids each): exactly on at least
    MIN_EQUAL of them; on the others the first differing id is a near tie
    of the CPU's logits (its top two within the logits tolerance), and
    teacher-forced on the CPU's ids every position's argmax is the CPU's
    or such a near tie. With prompt-lookup drafts filling up to 7 of the
    generation function's slots, the ids are the same bytes again. On the
    peaked fixture, whose prompt-lookup drafts are all right (it repeats
    its prompt's tail), the same again with every call's middle draft made
    wrong, so rejections and the commit of a prefix run too."""
    b = model.bundle
    prompts, want = _greedy_cpu(model, cpuref)
    if model.recorded is not None:
        # The CPU backend on the bundle's checkpoint (fp16 weights, INT8
        # sidecar embeddings) gives the ids Go recorded for the source
        # checkpoint: the comparison below is against those ids.
        assert [c["text"] for c in model.recorded] == PROMPTS
        assert prompts == [c["prompt_ids"] for c in model.recorded]
        assert want == [c["greedy_ids"] for c in model.recorded]
    depth = _depths(model)
    drafted = accepted = equal = 0
    ties = []
    for i, (p, w) in enumerate(zip(prompts, want)):
        plain = model.plain[tuple(p)] = generate(b, p, 32)
        st = {}
        spec = generate(b, p, 32, spec=7, stats=st)
        assert spec == plain, f"prompt {i}: speculation changed the ids"
        drafted += st["drafted"]
        accepted += st["accepted"]
        if plain == w:
            equal += 1
            continue
        # Teacher-forced: the CPU's logits at every position of p + w.
        _, ref = cpuref.run(model.reference, {"sequences": [{"name": "s", "steps": [
            {"tokens": p + w[:-1], "commit": 0}]}]})
        z = ref["s.0.logits"][len(p) - 1:]
        tol = depth["generate"]["block_max"] * fp16_u() * _scale(z, b.arch["softcap"])
        kv = b.new_kv()
        got = [int(b.prefill(p, kv).argmax[0])]
        for t in range(31):
            c = b.call([w[t]], kv.n, kv, "generate")
            b.commit(kv, c, 1)
            got.append(int(c.argmax[0]))
        for t in range(32):
            gap = float(z[t, w[t]] - z[t, got[t]])
            assert gap <= tol, f"prompt {i} position {t}: bundle picks {got[t]}, cpu {w[t]} by {gap:.4g} > {tol:.4g}"
            if got[t] != w[t]:
                ties.append(gap)
    assert equal >= MIN_EQUAL[model.name], f"only {equal} of {len(prompts)} prompts gave the CPU's ids"
    if model.recorded is not None:
        assert not ties, f"near ties on the peaked fixture: {ties}"
        lookup = host.lookup_drafts

        def wrong(history, k, ngram=2):
            d = lookup(history, k, ngram)
            if len(d) > 1:
                d[len(d) // 2] ^= 1  # another id of the vocabulary
            return d

        monkeypatch.setattr(host, "lookup_drafts", wrong)
        rejected = 0
        for i, (p, w) in enumerate(zip(prompts, want)):
            st = {}
            assert generate(b, p, 32, spec=7, stats=st) == w, f"prompt {i}: a rejected draft changed the ids"
            rejected += st["drafted"] - st["accepted"]
        assert rejected > 0, "no draft was rejected"
        print(f"\n{model.name}: with wrong drafts {rejected} rejected, same ids")
    assert drafted > 0, "no prompt produced a draft: speculation was not exercised"
    print(f"\n{model.name}: {equal} of {len(prompts)} prompts x 32 ids equal to the CPU backend's; "
          f"near ties elsewhere (cpu gaps {', '.join(f'{g:.3g}' for g in ties) or 'none'}); "
          f"{drafted} drafted, {accepted} accepted")


def test_sampled_speculation_is_identical(model, cpuref):
    """Seeded sampling (temperature 0.8) runs the sample function on every
    generation call: its logits, softcapped by the host, one draw per
    emitted token. With speculation on (drafts in up to 7 slots, the rows
    sampled in order until one differs from its draft) the ids (24 per
    prompt) are the same bytes as with it off."""
    b = model.bundle
    resp, _ = cpuref.run(model.reference, {"encode": PROMPTS[:2]})
    drafted = accepted = 0
    for i, p in enumerate(resp["encoded"]):
        plain = model.sampled[(tuple(p), i)] = generate(b, p, 24, sampler=Sampler(0.8, i))
        st = {}
        assert generate(b, p, 24, spec=7, stats=st, sampler=Sampler(0.8, i)) == plain, f"prompt {i}"
        drafted += st["drafted"]
        accepted += st["accepted"]
    assert drafted > 0, "no prompt produced a draft: speculation was not exercised"
    print(f"\n{model.name}: sampled, {drafted} drafted, {accepted} accepted, same ids")


def test_resume_from_snapshot_continues_identically(model, cpuref):
    """A resume from a mid-sequence KV state (the rows copied out as a
    snapshot would store them, and read back) continues exactly as the
    uninterrupted run, with speculation on and off, greedy (and, where Go
    recorded the CPU backend's ids, gives those) and sampled (the first
    prompt; the sampler carried over in its state)."""
    import io
    b = model.bundle
    resp, _ = cpuref.run(model.reference, {"encode": PROMPTS[:2]})
    runs = [(p, None) for p in resp["encoded"]] + [(resp["encoded"][0], 0)]
    for p, seed in runs:
        sampler = None if seed is None else Sampler(0.8, seed)
        n = 32 if sampler is None else 24  # the sampled runs are test_sampled_speculation_is_identical's
        if sampler is None:
            full = model.plain.get(tuple(p)) or generate(b, p, n)
        else:
            full = model.sampled.get((tuple(p), seed)) or generate(b, p, n, sampler=Sampler(0.8, seed))
        st = {}
        head = generate(b, p, 12, stats=st, sampler=sampler)
        assert head == full[:12]
        buf = io.BytesIO()
        kv = st["kv"]
        np.savez(buf, **{f"{x}{s}_{q}": getattr(kv, x)[s][q] for x in ("k", "v") for s in kv.k for q in kv.k[s]})
        buf.seek(0)
        saved = np.load(buf)
        restored = b.new_kv()
        for key in saved.files:
            x, rest = key[0], key[1:]
            s, q = (int(v) for v in rest.split("_"))
            getattr(restored, x)[s][q] = saved[key]
        restored.n = kv.n
        for spec in (0, 7):
            tail = generate(b, p + head[:-1], n - 11, spec=spec, kv=restored.copy(), first=st["next"],
                            sampler=copy.deepcopy(sampler))
            assert head[:-1] + tail == full, f"resume (spec {spec}, seed {seed}) diverged"
    if model.recorded is not None:
        for p, c in zip(resp["encoded"], model.recorded):
            assert p == c["prompt_ids"]
            assert (model.plain.get(tuple(p)) or generate(b, p, 32)) == c["greedy_ids"]


def test_planted_ties_pick_the_lowest_id(workdir, cpuref):
    """On a Gemma 4 checkpoint with a vocabulary of 32768 ids (wider than
    the 16384 of the lore: refmodel.write_wide_vocab) whose output
    projection repeats rows (refmodel.write_planted_ties: ids 2k and 2k+1
    share a row, and in odd blocks of 64 ids half of them repeat the block
    before), so that every row's maximum is an exact tie inside a block and
    about a third of them tie across blocks: no value the functions compute
    has a last axis over 16384 (the output projection's matmul makes
    [1, nb, R, B]); the two-level argmax of the generate and prefill
    functions is the flat argmax (the lowest id holding the maximum) of the
    sample function's logits, on every row of a prefill and of every
    generation call along a prompt; the ids are the CPU backend's (or a near
    tie of its logits: the fixture's top logits are close)."""
    wide = refmodel.write_wide_vocab(GEMMA, os.path.join(workdir, "wide-src"), 32768)
    src = refmodel.write_planted_ties(wide, os.path.join(workdir, "ties-src"), 64)
    out = os.path.join(workdir, "ties.bundle")
    # A last chunk of one layer: save_multifunction's cost grows faster
    # than its functions' op counts, and the tail is what is tested here.
    bundle_mod.convert(src, out, bundle_mod.Options(width=8, prefill=16, context=64, chunks="0-4,5-5", argmax_block=64,
                                                    weights="fp16"))
    ref = refmodel.write_gemma4_dir(src, out, os.path.join(workdir, "ties-ref"))
    b = Bundle(out)
    for p in b.packages:
        assert not long_axes(p), long_axes(p)
    cap = b.arch["softcap"]
    resp, _ = cpuref.run(ref, {"encode": [" ".join(PROMPTS[i] for i in (0, 1, 5))]})
    ids = resp["encoded"][0]
    _, z = cpuref.run(ref, {"sequences": [{"name": "s", "steps": [{"tokens": ids, "commit": 0}]}]})
    z = z["s.0.logits"]
    N, K = b.geo["prefill_width"], b.geo["generate_width"]
    kv = b.new_kv()
    c = b.call(ids[:N], 0, kv, "prefill")
    within, across = _blocks_are_the_flat_argmax("prefill", c, c.raw, 64)
    rows, picks = [c.argmax[0]], [N - 1]
    b.commit(kv, c, N)
    for lo in range(N, len(ids), K):
        part = ids[lo:lo + K]
        g, s_ = b.call(part, lo, kv, "generate"), b.call(part, lo, kv, "sample")
        w, a = _blocks_are_the_flat_argmax(f"call at {lo}", g, s_.raw, 64)
        within, across = within + w, across + a
        rows += list(g.argmax)
        picks += list(range(lo, lo + len(part)))
        b.commit(kv, g, len(part))
    assert within == len(rows) and across >= 3, f"{within} ties inside a block, {across} across blocks in {len(rows)} rows"
    tol = 64 * fp16_u() * _scale(z, cap)  # far above this model's depth; ties here are exact
    for i, t in zip(rows, picks):
        assert i % 2 == 0, f"position {t}: id {i}, not the lower of its tied pair"
        assert i == int(np.argmax(z[t])) or z[t].max() - z[t, i] <= tol, f"position {t}: {i}, the cpu's {np.argmax(z[t])}"
    print(f"\nplanted ties: {within} rows tie inside a block, {across} across blocks, of {len(rows)}")


def test_lut4_bundle_matches_cpu(workdir, cpuref):
    """The default weights, LUT4 (a 16-entry palette per 16 rows, the output
    projection's too), on the peaked Gemma 4 fixture: against the CPU
    backend running the checkpoint the bundle holds (refmodel reads the
    palettised matrices back from the packages), every output of every
    function within the fp16 tolerance (test_functions_match_cpu); greedy
    ids with speculation on and off the same bytes, and the CPU's."""
    from conftest import SOURCES, TEST_OPTS, Model
    src = SOURCES["gemma4-peaked"]
    out = os.path.join(workdir, "peaked-lut4.bundle")
    m = bundle_mod.convert(src, out, bundle_mod.Options(**dict(TEST_OPTS["gemma4-peaked"], weights="lut4")))
    assert (m["converter"]["weights"], m["converter"]["head_weights"]) == ("lut4", "lut4")
    ref = refmodel.write_gemma4_dir(src, out, os.path.join(workdir, "peaked-lut4-ref"))
    model = Model("gemma4-peaked-lut4", src, out, ref)
    test_functions_match_cpu(model, cpuref)
    prompts, want = _greedy_cpu(model, cpuref, n=16)
    for i in (0, 5):
        plain = generate(model.bundle, prompts[i], 16)
        st = {}
        assert generate(model.bundle, prompts[i], 16, spec=7, stats=st) == plain, f"prompt {i}: speculation"
        assert st["drafted"] > 0
        assert plain == want[i], f"prompt {i}: {plain}, the cpu's {want[i]}"
