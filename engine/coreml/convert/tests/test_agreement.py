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
add that chunk's depth.
"""
import numpy as np
import pytest

from anebundle import host, interp
from anebundle.host import generate
from conftest import fp16_u

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
    for kind in ("generate", "prefill"):
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


def _check(name, got, want, depth, report):
    tol = depth * fp16_u() * float(np.abs(want).max())
    err = float(np.abs(got.astype(np.float32) - want).max())
    report.append((name, err, tol))
    assert err <= tol, f"{name}: max |bundle - cpu| = {err:.4g} > {tol:.4g} (depth {depth})"


def test_functions_match_cpu(model, cpuref):
    """Every function, every output: prefill from offset 0 and from a
    later offset (a short last piece, so padded rows), a full-width
    generation call, and a width-1 one (7 padded rows), against the CPU
    backend on the same tokens and committed rows."""
    b = model.bundle
    resp, _ = cpuref.run(model.reference, {"encode": [PROMPTS[0] + " " + PROMPTS[1]]})
    ids = resp["encoded"][0]
    N, K = b.geo["prefill_width"], b.geo["generate_width"]
    assert len(ids) > N, "the prompt must need two prefill pieces"
    p1, p2 = ids[:N], ids[N:N + N // 2]
    steps = [("prefill", p1, len(p1)), ("prefill", p2, len(p2)),
             ("generate", [5, 9, 17, 33, 65, 129, 257, 300][:K], 3), ("generate", [7], 1)]
    _, ref = cpuref.run(model.reference, {"sequences": [{"name": "s", "steps": [
        {"tokens": t, "commit": c} for _, t, c in steps]}]})
    depth = _depths(model)
    kv = b.new_kv()
    report = []
    for si, (kind, toks, commit) in enumerate(steps):
        c = b.call(toks, kv.n, kv, kind)
        n = len(toks)
        want = ref[f"s.{si}.logits"]
        if kind == "prefill":
            _check(f"{si} {kind} logits", c.logits, want[n - 1:n], depth[kind]["logits"], report)
            assert int(c.argmax[0]) == int(np.argmax(want[n - 1])) or \
                np.sort(want[n - 1])[-1] - np.sort(want[n - 1])[-2] < depth[kind]["logits"] * fp16_u() * np.abs(want).max()
        else:
            _check(f"{si} {kind} logits", c.logits, want, depth[kind]["logits"], report)
        for s in b.owners:
            for kv_ in ("k", "v"):
                nm = f"{kv_}_new_{s}"
                _check(f"{si} {kind} {nm}", _rows(c.new[nm], n), ref[f"s.{si}.{kv_}.{s}"], depth[kind][nm], report)
        b.commit(kv, c, commit)
    worst = max(report, key=lambda r: r[1] / r[2])
    print(f"\n{model.name}: worst error/tolerance {worst[1]:.4g}/{worst[2]:.4g} ({worst[0]})")


@pytest.fixture(scope="module")
def greedy(request):
    return {}


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
        tol = depth["generate"]["logits"] * fp16_u() * float(np.abs(z).max())
        kv = b.new_kv()
        first = b.prefill(p, kv)
        got = [first]
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


def test_resume_from_snapshot_continues_identically(model, cpuref):
    """A resume from a mid-sequence KV state (the rows copied out as a
    snapshot would store them, and read back) continues exactly as the
    uninterrupted run, with speculation on and off (and, where Go recorded
    the CPU backend's ids, gives those)."""
    import io
    b = model.bundle
    resp, _ = cpuref.run(model.reference, {"encode": PROMPTS[:2]})
    for p in resp["encoded"]:
        full = model.plain.get(tuple(p)) or generate(b, p, 32)
        st = {}
        head = generate(b, p, 12, stats=st)
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
            tail = generate(b, p + head[:-1], 32 - 11, spec=spec, kv=restored.copy(), first=st["next"])
            assert head[:-1] + tail == full, f"resume (spec {spec}) diverged"
    if model.recorded is not None:
        for p, c in zip(resp["encoded"], model.recorded):
            assert p == c["prompt_ids"]
            assert (model.plain.get(tuple(p)) or generate(b, p, 32)) == c["greedy_ids"]
