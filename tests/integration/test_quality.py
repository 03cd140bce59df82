"""Quality runs end to end on the tiny generated models: self-KLD 0, cache reuse, a damaged cache rebuilt,
resume adds nothing, a disk too small refused with a stored row, a crashing scoring child a stored row. The
arithmetic and the cache file are tests/unit/runners/test_quality_math.py."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from sqlalchemy import func, select
from support.quality import quality_plan

from edgeprof.report import FIELD_NAMES, build_rows
from edgeprof.runners.quality_math import CacheReader, verify_cache
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import QualityResult, Run
from edgeprof.sweep import run_plan


@pytest.mark.llama
def test_quality_end_to_end_cache_reuse_damage_and_resume(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(cache))
    engine = open_engine(tmp_path / "q.db")
    plan = quality_plan(tmp_path, tiny_models)
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
    out = run_plan(engine, quality_plan(tmp_path, tiny_models), out=io.StringIO())
    assert out.counts == {"error": 3}  # every variant needs the reference; the sweep went on through all
    with new_session(engine) as s:
        reasons = [r.reason or "" for r in s.scalars(select(Run))]
    assert all("the reference cache needs" in r and "MiB free" in r for r in reasons), reasons
    assert not list((tmp_path / "cache").glob("*.eplp*"))
    assert os.environ["EDGEPROF_TEST_DISK_FREE_BYTES"] == "1000"


@pytest.mark.llama
def test_a_crashing_quality_child_is_a_stored_row_and_the_sweep_goes_on(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from edgeprof.runners import FAULT_ENV

    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env[FAULT_ENV] = "kill@prefill:q4_k_m"  # the variant's scoring child dies by SIGKILL
    engine = open_engine(tmp_path / "c.db")
    out = run_plan(engine, quality_plan(tmp_path, tiny_models), out=io.StringIO(), env=env)
    assert out.counts == {"ok": 2, "crashed": 1}
    with new_session(engine) as s:
        rows = {r["model_label"]: r for r in build_rows(s, out.sweep_id)}
    assert rows["q4"]["status"] == "crashed" and "SIGKILL" in (rows["q4"]["reason"] or "")
    assert rows["q4"]["kld_mean"] is None  # not measured: NULL, never a number
    assert rows["f16-copy"]["same_top_pct"] == 100.0
