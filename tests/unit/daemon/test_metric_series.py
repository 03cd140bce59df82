"""Prometheus series are one per config or serving level (agent/daemon/metrics.py, metric_counts.py): a
sweep with two endpoints and two concurrencies scrapes as 4 serving series, two thread counts as 2 config
series, two configs that differ only in an unlabelled knob get a ``variant``; ``edgeprof_build_info``, the
``_total`` counters of runs by status and of failed requests, and no id exported as a value.

The database is hand-built (SYNTHETIC rows through tests/support/dbbuild.py), scraped through the text
format a Prometheus server reads."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine
from support import dbbuild

from edgeprof.daemon import metrics_text
from edgeprof.run_states import utcnow
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Run, ServingLevel, ServingRequest

pytestmark = pytest.mark.timeout(60)


def steady(run: Run, rep: int, tg: float) -> Measurement:
    return Measurement(run_id=run.id, kind="steady", rep=rep, n_prompt=16, tg_tps=tg, pp_tps=100.0)


def request(run: Run, idx: int, status: str) -> ServingRequest:
    return ServingRequest(run_id=run.id, kind="measured", idx=idx, client=0, status=status, t_send_mono=1.0)


def build_db(path: Path) -> Engine:
    """SYNTHETIC: device ``jet``; in-process at -t 1 and -t 2; the same config twice apart from mmap; an
    openai server's chat and completions endpoints at c = 1 and 2, one failed and one timed-out request."""
    engine = open_engine(path)
    now = utcnow()
    done = {"status": "ok", "started_at": now - timedelta(minutes=9), "ended_at": now - timedelta(minutes=8)}
    with new_session(engine) as s:
        device = dbbuild.add_device(s, hostname="jet")
        sweep = dbbuild.add_sweep(s, device, name="sweep", status="completed", n_specs=8)
        for seq, threads in enumerate((1, 2)):
            run = dbbuild.add_run(s, sweep, seq, n_threads=threads, **done)
            s.add_all([steady(run, 0, 10.0 * threads), steady(run, 1, 10.0 * threads)])
        for seq, mmap in ((2, True), (3, False)):  # -t 4 twice, mmap on and off
            run = dbbuild.add_run(s, sweep, seq, n_threads=4, use_mmap=mmap, **done)
            s.add(steady(run, 0, 7.0 if mmap else 8.0))
        seq = 4
        for endpoint in ("chat", "completions"):
            for conc in (1, 2):
                effective = json.dumps({"server": {"endpoint": endpoint}})
                run = dbbuild.add_run(
                    s, sweep, seq, runner="openai", concurrency=conc, effective_json=effective, **done
                )
                s.add(ServingLevel(run_id=run.id, concurrency=conc, ttft_p50_ms=10.0 * conc + seq))
                s.add_all([request(run, 0, "ok"), request(run, 1, "error" if conc == 1 else "timeout")])
                seq += 1
        dbbuild.add_run(s, sweep, seq, status="crashed", reason="SIGSEGV", n_threads=8, **{
            k: v for k, v in done.items() if k != "status"
        })  # fmt: skip
        s.commit()
    return engine


@pytest.fixture
def families(tmp_path: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = metrics_text(build_db(tmp_path / "m.db")).decode()
    return {
        fam.name: [(dict(sample.labels), sample.value) for sample in fam.samples]
        for fam in text_string_to_metric_families(text)
    }


def series(samples: list[tuple[dict[str, str], float]]) -> set[tuple[tuple[str, str], ...]]:
    return {tuple(sorted(labels.items())) for labels, _ in samples}


def test_two_endpoints_by_two_concurrencies_are_four_serving_series(families: dict) -> None:
    ttft = families["edgeprof_serving_ttft_seconds"]
    assert len(ttft) == len(series(ttft)) == 4
    assert {(lab["endpoint"], lab["concurrency"]) for lab, _ in ttft} == {
        ("chat", "1"), ("chat", "2"), ("completions", "1"), ("completions", "2"),
    }  # fmt: skip


def test_two_thread_counts_are_two_config_series_and_an_unlabelled_knob_a_variant(families: dict) -> None:
    tg = families["edgeprof_tg_tokens_per_second"]
    assert len(tg) == len(series(tg)) == 4
    by_threads = {lab["threads"]: v for lab, v in tg if lab["threads"] in ("1", "2")}
    assert by_threads == {"1": 10.0, "2": 20.0}
    assert all(lab["variant"] == "" for lab, _ in tg if lab["threads"] in ("1", "2"))
    # mmap has no label: the two -t 4 configs are told apart by their spec ids
    assert sorted(lab["variant"] for lab, _ in tg if lab["threads"] == "4") == ["spec2", "spec3"]


def test_every_family_has_one_sample_per_label_set(families: dict) -> None:
    for name, samples in families.items():
        assert len(samples) == len(series(samples)), name


def test_counters_of_runs_by_status_and_failed_requests(families: dict) -> None:
    runs = {lab["status"]: v for lab, v in families["edgeprof_runs"] if lab["device"] == "jet"}
    assert runs == {"ok": 8.0, "crashed": 1.0}
    failed = {(lab["endpoint"], lab["status"]): v for lab, v in families["edgeprof_serving_requests_failed"]}
    assert failed == {("chat", "error"): 1.0, ("chat", "timeout"): 1.0,
                      ("completions", "error"): 1.0, ("completions", "timeout"): 1.0}  # fmt: skip


def test_counters_are_exposed_as_total_and_build_info_is_there(tmp_path: Path) -> None:
    text = metrics_text(build_db(tmp_path / "m.db")).decode()
    assert "# TYPE edgeprof_runs_total counter" in text or "# TYPE edgeprof_runs counter" in text
    assert 'edgeprof_runs_total{device="jet",status="ok"} 8.0' in text
    assert "edgeprof_serving_requests_failed_total{" in text
    assert 'edgeprof_build_info{llama_cpp_python="' in text
    # no id is a value: run ids were once exported as gauges
    assert "_run_id" not in text
