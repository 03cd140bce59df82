"""issue 9: KL divergence / same top / perplexity vs the reference.

Pure arithmetic on synthetic logits (hand-computed values), the cache file's integrity checks, and end to
end on the tiny generated models: self-KLD 0, cache reuse, a damaged cache rebuilt, resume adds nothing, a
disk too small refused with a stored row.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from edgeprof.plan import DEFAULT_TEXT_SHA256, PlanError, default_text, expand, parse_plan
from edgeprof.report import FIELD_NAMES, build_rows
from edgeprof.runners.quality_math import (
    CacheError,
    CacheReader,
    CacheWriter,
    TokenScores,
    encode_rows,
    predicted_size,
    score_rows,
    summarize,
    verify_cache,
)
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import QualityResult, Run
from edgeprof.sweep.loop import run_plan

LN2, LN3 = math.log(2), math.log(3)


def _two_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synthetic (labelled): 4-token vocabulary, two scored positions, reference and variant logits."""
    ref = np.array([[0, 0, 0, 0], [LN3, 0, 0, 0]], dtype=np.float32)  # p_ref: uniform; (1/2, 1/6, 1/6, 1/6)
    var = np.array([[LN2, 0, 0, 0], [0, LN2, 0, 0]], dtype=np.float32)  # q: (.4 .2 .2 .2), (.2 .4 .2 .2)
    next_tokens = np.array([1, 0])
    return ref, var, next_tokens


def test_kld_ppl_same_top_match_hand_computed_values() -> None:
    ref, var, toks = _two_rows()
    meta, q = encode_rows(ref, toks)
    s = summarize(score_rows(var, toks, meta, q))
    kld_a = 0.25 * (math.log(0.25 / 0.4) + 3 * math.log(0.25 / 0.2))
    kld_b = 0.5 * math.log(0.5 / 0.2) + (1 / 6) * math.log((1 / 6) / 0.4) + (2 / 6) * math.log((1 / 6) / 0.2)
    assert s["n_tokens"] == 2
    assert s["kld_mean"] == pytest.approx((kld_a + kld_b) / 2, rel=1e-5)
    assert s["kld_max"] == pytest.approx(max(kld_a, kld_b), rel=1e-5)
    # population variance / (n - 1), as llama-perplexity
    assert s["kld_se"] == pytest.approx(abs(kld_a - kld_b) / 2, rel=1e-4)
    # row A: both tops are token 0 (first of ties); row B: reference 0, variant 1
    assert s["same_top_pct"] == pytest.approx(50.0)
    # NLL of the actual next tokens: variant ln 5 twice; reference ln 4 and ln 2
    assert s["ppl"] == pytest.approx(5.0, rel=1e-5)
    assert s["ppl_ref"] == pytest.approx(math.sqrt(8.0), rel=1e-5)
    assert s["delta_ppl"] == pytest.approx(5.0 - math.sqrt(8.0), rel=1e-5)
    assert s["ln_ppl_ratio"] == pytest.approx(math.log(5.0 / math.sqrt(8.0)), rel=1e-5)
    # |Δp| of the reference's top token (0): |2/5 - 1/4| and |1/5 - 1/2|
    assert s["dp_top_mean"] == pytest.approx((0.15 + 0.3) / 2, rel=1e-5)
    assert s["dp_top_p99"] == pytest.approx(0.3, rel=1e-5)


def test_a_distribution_against_itself_gives_zero_kld_and_all_tops_the_same() -> None:
    rng = np.random.default_rng(7)
    logits = rng.normal(0, 3, size=(40, 300)).astype(np.float32)
    toks = rng.integers(0, 300, size=40)
    meta, q = encode_rows(logits, toks)
    s = summarize(score_rows(logits, toks, meta, q))
    assert abs(s["kld_mean"]) < 1e-6  # only the 16-bit rounding of the reference remains
    assert s["same_top_pct"] == 100.0
    assert s["ppl"] == pytest.approx(s["ppl_ref"], rel=1e-5)


def test_percentiles_are_nearest_rank() -> None:
    n = 100
    kld = np.arange(1, n + 1) / 100.0
    s = summarize(
        TokenScores(kld=kld, same_top=np.ones(n, bool), nll=np.ones(n), nll_ref=np.ones(n), dp_top=kld)
    )
    assert (s["kld_p90"], s["kld_p95"], s["kld_p99"], s["kld_max"]) == (0.90, 0.95, 0.99, 1.0)
    assert s["kld_median"] == pytest.approx(0.505)
    assert s["dp_top_p99"] == 0.99


def _write_cache(path: Path) -> dict[str, object]:
    rng = np.random.default_rng(1)
    ctx, n_vocab, n_chunks = 16, 50, 2
    key = {"model_sha256": "a" * 64, "text_sha256": "b" * 64, "ctx": ctx, "chunks": None, "max_chunks": 100}
    header = {**key, "format": 1, "n_chunks": n_chunks, "n_vocab": n_vocab, "add_bos": True}
    tokens = rng.integers(0, n_vocab, size=n_chunks * ctx)
    w = CacheWriter(path, header, tokens)
    for _ in range(n_chunks):
        w.write_chunk(*encode_rows(rng.normal(size=(7, n_vocab)).astype(np.float32), rng.integers(0, 50, 7)))
    w.finish()
    assert path.stat().st_size == predicted_size(header)
    return key


def test_cache_file_round_trip_and_damage_detected(tmp_path: Path) -> None:
    path = tmp_path / "ref.eplp"
    key = _write_cache(path)
    verify_cache(path, key)
    chunks = list(CacheReader(path).chunks())
    assert len(chunks) == 2 and chunks[0][1].shape == (7, 50)
    with pytest.raises(CacheError, match="made for ctx"):
        verify_cache(path, {**key, "ctx": 32})
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError, match="corrupt"):
        verify_cache(path, key)
    path.write_bytes(bytes(data[: len(data) - 100]))
    with pytest.raises(CacheError, match="truncated"):
        verify_cache(path, key)
    path.write_bytes(b"junk")
    with pytest.raises(CacheError):
        verify_cache(path, key)


def test_default_text_ships_with_its_hash() -> None:
    text = default_text()
    assert len(text.encode()) > 20_000  # a few thousand tokens of prose
    assert "Alice" in text
    import hashlib

    assert hashlib.sha256(text.encode()).hexdigest() == DEFAULT_TEXT_SHA256


QPLAN = """
name = "quality"
[matrix]
models = [
  {{ path = "{f16}", label = "f16" }},
  {{ path = "{f16}", label = "f16-copy" }},
  {{ path = "{q4}", label = "q4" }},
]
ctx = [256]
threads = [1]
[[workload]]
name = "kld"
kind = "quality"
ctx = 64
chunks = 2
{extra}
[repeat]
cold = 1
warmup = 0
steady = 1
[run]
timeout_s = 60
"""


def _plan(tmp_path: Path, models: dict[str, Path], extra: str = ""):
    text = QPLAN.format(f16=models["F16"], q4=models["Q4_K_M"], extra=extra)
    return parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)


def test_quality_plan_validation(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    plan = _plan(tmp_path, tiny_models)
    specs = expand(plan, {m.path: "0" * 64 for m in plan.models})
    assert len(specs) == 3 and plan.n_specs() == 3  # once per model, not per matrix cell
    assert all(s.params.n_ctx == 64 and s.params.n_batch == 64 for s in specs)
    assert "text" not in specs[0].workload.to_json()["quality"]  # its hash, not the text
    bad = QPLAN.format(
        f16=tiny_models["F16"], q4=tiny_models["Q4_K_M"], extra='reference = "nope"\nbogus = 1'
    )
    with pytest.raises(PlanError) as err:
        parse_plan(bad, source="p.toml", base=tmp_path)
    text = "; ".join(err.value.problems)
    assert "no model labelled 'nope'" in text and "bogus" in text


@pytest.mark.llama
def test_quality_end_to_end_cache_reuse_damage_and_resume(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(cache))
    engine = open_engine(tmp_path / "q.db")
    plan = _plan(tmp_path, tiny_models)
    out = io.StringIO()
    first = run_plan(engine, plan, out=out)
    assert first.counts == {"ok": 3}, out.getvalue()
    assert "reference cache (f16): writing" in out.getvalue()  # the size is said before writing
    files = list(cache.glob("*.eplp"))
    assert len(files) == 1
    with new_session(engine) as s:
        rows = {r["model_label"]: r for r in build_rows(s, first.sweep_id)}
        results = {r.run_id: r for r in s.scalars(select(QualityResult))}
    assert set(FIELD_NAMES) <= set(rows["q4"])
    ref, copy, q4 = rows["f16"], rows["f16-copy"], rows["q4"]
    assert ref["kld_mean"] == 0.0 and ref["same_top_pct"] == 100.0
    # the same file scored by its own child against the cached 16-bit reference: KLD 0, same top 100 %
    assert abs(copy["kld_mean"]) < 1e-5 and copy["same_top_pct"] == 100.0
    assert copy["ppl"] == pytest.approx(ref["ppl"], rel=1e-4)
    assert q4["kld_mean"] > 100 * abs(copy["kld_mean"]) and q4["quality_reference_label"] == "f16"
    assert q4["quality_n_tokens"] == 2 * (64 - 1 - 32)
    assert all(r.cache_reused is False for r in results.values() if r.is_reference)

    # resume: nothing is recomputed, nothing added
    again = run_plan(engine, plan, out=io.StringIO())
    assert again.n_skipped == 3 and again.counts == {}
    with new_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(QualityResult)) == 3
        assert s.scalar(select(func.count()).select_from(Run)) == 3

    # a new sweep reuses the cache: no reference pass, same figures
    mtime = files[0].stat().st_mtime_ns
    reuse = run_plan(engine, plan, new_sweep=True, out=io.StringIO())
    assert files[0].stat().st_mtime_ns == mtime
    with new_session(engine) as s:
        new_rows = {r["model_label"]: r for r in build_rows(s, reuse.sweep_id)}
        of_sweep = select(QualityResult).join(Run).where(Run.sweep_id == reuse.sweep_id)
        reused = [r.cache_reused for r in s.scalars(of_sweep)]
    assert reused == [True, True, True]
    assert new_rows["q4"]["kld_mean"] == pytest.approx(q4["kld_mean"], rel=1e-9)

    # a corrupt, then a truncated cache is detected and rebuilt
    for damage in ("flip", "truncate"):
        data = bytearray(files[0].read_bytes())
        if damage == "flip":
            data[len(data) // 3] ^= 0x55
        else:
            data = data[: len(data) // 2]
        files[0].write_bytes(bytes(data))
        log = io.StringIO()
        redo = run_plan(engine, plan, new_sweep=True, out=log)
        assert redo.counts == {"ok": 3}, log.getvalue()
        assert "reference cache rejected" in log.getvalue()
        with new_session(engine) as s:
            rows2 = {r["model_label"]: r for r in build_rows(s, redo.sweep_id)}
        assert rows2["q4"]["kld_mean"] == pytest.approx(q4["kld_mean"], rel=1e-9)
        verify_cache(files[0], {k: v for k, v in CacheReader(files[0]).header.items() if k == "ctx"})


@pytest.mark.llama
def test_a_disk_too_small_for_the_cache_is_a_stored_refusal(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EDGEPROF_TEST_DISK_FREE_BYTES", "1000")
    engine = open_engine(tmp_path / "d.db")
    out = run_plan(engine, _plan(tmp_path, tiny_models), out=io.StringIO())
    assert out.counts == {"error": 3}  # every variant needs the reference; the sweep went on through all
    with new_session(engine) as s:
        reasons = [r.reason or "" for r in s.scalars(select(Run))]
    assert all("the reference cache needs" in r and "MB free" in r for r in reasons), reasons
    assert not list((tmp_path / "cache").glob("*.eplp*"))
    assert os.environ["EDGEPROF_TEST_DISK_FREE_BYTES"] == "1000"


@pytest.mark.llama
def test_a_crashing_quality_child_is_a_stored_row_and_the_sweep_goes_on(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from edgeprof.runners.protocol import FAULT_ENV

    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env[FAULT_ENV] = "kill@prefill:q4_k_m"  # the variant's scoring child dies by SIGKILL
    engine = open_engine(tmp_path / "c.db")
    out = run_plan(engine, _plan(tmp_path, tiny_models), out=io.StringIO(), env=env)
    assert out.counts == {"ok": 2, "crashed": 1}
    with new_session(engine) as s:
        rows = {r["model_label"]: r for r in build_rows(s, out.sweep_id)}
    assert rows["q4"]["status"] == "crashed" and "SIGKILL" in (rows["q4"]["reason"] or "")
    assert rows["q4"]["kld_mean"] is None  # not measured: NULL, never a number
    assert rows["f16-copy"]["same_top_pct"] == 100.0


def test_reference_is_the_most_bits_per_weight_from_tensor_sizes_unless_named(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    from edgeprof.executors.quality import reference_entry

    text = f"""
[matrix]
models = [
  {{ path = "{tiny_models["Q4_K_M"]}", label = "q4" }},
  {{ path = "{tiny_models["Q8_0"]}", label = "q8" }},
  {{ path = "{tiny_models["Q5_K_M"]}", label = "q5" }},
]
[[workload]]
name = "kld"
kind = "quality"
ctx = 64
{{ref}}
"""
    plan = parse_plan(text.replace("{ref}", ""), source="p.toml", base=tmp_path)
    q4 = plan.models[0]
    info = {m.label: plan.model_info[m.path] for m in plan.models}
    bpw = {label: i.tensor_bits_per_weight or 0.0 for label, i in info.items()}
    assert bpw["q8"] > bpw["q5"] > bpw["q4"] > 0
    wl = plan.workloads[0].quality
    assert wl is not None and reference_entry(plan, q4, wl).label == "q8"
    named = parse_plan(text.replace("{ref}", 'reference = "q5"'), source="p.toml", base=tmp_path)
    assert named.workloads[0].quality is not None
    assert reference_entry(named, q4, named.workloads[0].quality).label == "q5"
