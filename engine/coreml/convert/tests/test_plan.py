"""The chunk planner (anebundle/plan.py) and `--plan`: limits on weight
bytes per package and ops per function, the output projection never alone,
a layer too big for any chunk named before anything is converted, and op
counts and byte estimates that match the saved packages."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from anebundle import bundle as bundle_mod
from anebundle import checkpoint as ckpt
from anebundle import interp, plan
from anebundle.checkpoint import CheckpointError
from conftest import CONVERT, GEMMA, TEST_OPTS

MIB = 1 << 20


def _e2b_config(tmp_path, layers=35, vocab=262144):
    """config.json alone (no weights) of E2B's geometry, from
    bench/random_e2b.py."""
    spec = importlib.util.spec_from_file_location("random_e2b", os.path.join(CONVERT, "bench", "random_e2b.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d = tmp_path / f"e2b-{layers}"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(mod.e2b_config(layers, vocab)))
    return str(d)


def _plan(src, **kw):
    return bundle_mod.plan_json(src, bundle_mod.Options(**kw))


def test_e2b_plan_meets_limits(tmp_path):
    """Gemma 4 E2B (35 layers, vocab 262144) at LUT4 from config.json
    alone: CoreML-LLM's three chunks 0-7, 8-24, 25-34 (about 149 / 439 /
    503 MiB), every package under 950 MiB, every function under 1,800 ops,
    the output projection with ten layers."""
    p = _plan(_e2b_config(tmp_path), weights="lut4")
    chunks = p["chunks"]
    assert [c["layers"] for c in chunks] == [[0, 8], [8, 25], [25, 35]]
    assert [c["lm_head"] for c in chunks] == [False, False, True]
    for c in chunks:
        assert set(c) == {"layers", "weight_bytes", "ops", "lm_head"}
        assert 0 < c["weight_bytes"] <= 950 * MIB
        assert 0 < max(c["ops"].values()) <= 1800
    assert sorted(chunks[-1]["ops"]) == ["generate_8", "prefill_64", "sample_8"]
    assert sorted(chunks[0]["ops"]) == ["generate_8", "prefill_64"]
    # CoreML-LLM's LUT4 chunks of the same layers (its 3-chunk build,
    # docs/THREE_CHUNK_MAC_BENCH.md), as issue 26 gives them: 149 / 439 /
    # 503 MB; ours also store the RoPE rotation constants.
    mib = [c["weight_bytes"] / MIB for c in chunks]
    assert all(abs(m - ref) <= 0.02 * ref for m, ref in zip(mib, [149, 439, 503])), mib


def test_e2b_fp16_head_would_be_alone(tmp_path):
    """At fp16 E2B's 262144 x 1536 projection (768 MiB) leaves no room for
    a second layer under 950 MiB: the plan fails instead of putting it
    alone with the last layer, and says what to change (E2B's first 10
    layers, for speed)."""
    with pytest.raises(CheckpointError, match="output projection .* alone"):
        _plan(_e2b_config(tmp_path, layers=10), weights="fp16")


def test_too_big_layer_is_named(tmp_path):
    """A layer that fits no chunk fails the plan with its name: at fp16
    under 100 MiB the first KV-shared layer (double-wide MLP, about 120
    MiB; layer 5 of E2B's first 10) is the first too big."""
    with pytest.raises(CheckpointError, match=r"layer 5 alone needs 1[0-9][0-9]\.\d MiB"):
        _plan(_e2b_config(tmp_path, layers=10), weights="fp16", chunk_mb=100)


def test_op_limit_splits(tmp_path):
    """The op limit alone splits a model whose bytes fit one package (the
    10-layer E2B cut at LUT4), each function under the limit, and the
    output projection's chunk holds more than one layer."""
    src = _e2b_config(tmp_path, layers=10, vocab=65536)
    whole = _plan(src, weights="lut4")["chunks"]
    assert [c["layers"] for c in whole] == [[0, 10]]
    limit = max(whole[0]["ops"].values()) // 2
    chunks = _plan(src, weights="lut4", max_ops=limit)["chunks"]
    assert len(chunks) >= 2 and chunks[-1]["layers"][1] - chunks[-1]["layers"][0] > 1
    assert all(max(c["ops"].values()) <= limit for c in chunks)
    assert [c["layers"][0] for c in chunks[1:]] == [c["layers"][1] for c in chunks[:-1]]


def test_explicit_chunks_over_limit_fail_before_writing(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(CheckpointError, match=r"chunk 0 \(layers 0-1\) .* 167 ops in generate_8"):
        bundle_mod.convert(GEMMA, str(out), bundle_mod.Options(prefill=16, context=64, chunks="0-1,2-3,4-5",
                                                               max_ops=150))
    assert list(tmp_path.iterdir()) == [], "something was written"


def test_plan_cli_reads_no_weights(tmp_path):
    """`--plan` prints the plan as JSON from config.json alone (the
    directory has no safetensors, so no weight can be read) and writes
    nothing."""
    src = _e2b_config(tmp_path)
    p = subprocess.run([sys.executable, "-m", "anebundle", os.path.join(src, "config.json"), "--plan"],
                       cwd=CONVERT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert set(got) == {"chunks", "weights", "head_weights", "limits"}
    assert (got["weights"], got["head_weights"]) == ("lut4", "lut4")
    assert got["limits"] == {"max_bytes": 950 * MIB, "max_ops": 1800}
    for c in got["chunks"]:
        assert set(c) == {"layers", "weight_bytes", "ops", "lm_head"}
        assert c["weight_bytes"] <= 950 * MIB
    assert sorted(os.listdir(src)) == ["config.json"]


def test_plan_matches_saved_packages(model):
    """The plan of a test bundle (its options) has, per chunk, exactly the
    saved functions' op counts (constants excluded, as bundle audit counts
    them) and weight bytes within 8% of weight.bin."""
    with open(os.path.join(model.dir, "manifest.json")) as f:
        m = json.load(f)
    planned = bundle_mod.plan_chunks(ckpt.load(model.src), bundle_mod.Options(**TEST_OPTS[model.name]))
    assert [[p.first, p.end] for p in planned] == [c["layers"] for c in m["chunks"]]
    for c, p in zip(m["chunks"], planned):
        pkg = interp.Package(os.path.join(model.dir, c["package"]))
        ops = {name: sum(1 for op in fn.operations if op.op_type != "const" and not op.op_type.startswith("constexpr_"))
               for name, fn in pkg.prog.functions.items()}
        assert ops == p.ops
        size = os.path.getsize(os.path.join(model.dir, c["package"], "Data", "com.apple.CoreML", "weights",
                                            "weight.bin"))
        assert abs(size - p.weight_bytes) <= 0.08 * size, (size, p.weight_bytes)


def test_storage_bytes():
    """Storage per weight option of a 2048 x 1536 matrix: fp16 2 bytes per
    element, int8 1 and a scale per row, LUT4 half a byte and a 16-entry
    fp16 palette per 16 rows; below 2048 elements everything stays fp16."""
    n, o = 2048 * 1536, plan.BLOB_OVERHEAD
    assert plan.storage_bytes("fp16", 2048, 1536) == 2 * n + o
    assert plan.storage_bytes("int8", 2048, 1536) == n + 2 * 2048 + 2 * o
    assert plan.storage_bytes("lut4", 2048, 1536) == n // 2 + 128 * 16 * 2 + 2 * o
    assert plan.storage_bytes("lut6", 2048, 1536) == n * 3 // 4 + 128 * 64 * 2 + 2 * o
    assert plan.storage_bytes("lut4", 16, 100) == 2 * 1600 + o
