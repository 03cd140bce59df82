"""The Prometheus metric set read from a hand-built database (agent/daemon/metrics.py, exposition.py): the
families and their labels, the latest finished run per config, values that were not measured left out (never
0), verdicts and states as state sets, the agent's figures, a failed read that never raises, and the
textfile written through a temp file."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, create_engine
from support import dbbuild

from edgeprof.daemon import MetricsCollector, metrics_text, write_textfile
from edgeprof.report import build_rows
from edgeprof.run_states import utcnow
from edgeprof.safefs import UnsafePath
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import AgentState, Measurement, ModelFile, Run, ServingLevel, Verdict

pytestmark = pytest.mark.timeout(60)

LABELS = {
    "device", "model", "quant", "ctx", "ngl", "threads", "n_batch", "n_ubatch", "flash_attn", "type_k",
    "type_v", "depth", "workload", "runner", "variant",
}  # fmt: skip


def steady(run: Run, rep: int, tg: float, **fields: Any) -> Measurement:
    values: dict[str, Any] = {"pp_tps": 200.0 + rep, "ttft_ms": 40.0 + rep} | fields
    return Measurement(run_id=run.id, kind="steady", rep=rep, n_prompt=16, tg_tps=tg, **values)


def model_file(quant: str, sha: str) -> ModelFile:
    mf = ModelFile(path=f"/m/{quant}.gguf", sha256=sha * 64, size_bytes=1000, mtime_ns=1, n_params=100)
    mf.quant_type = quant
    return mf


def build_db(path: Path) -> Engine:
    """Device ``jet``: sweep 1 runs q8 and q4 (q4 throttled); sweep 2 runs q8 again (faster, the latest),
    a q4 at ctx 1024 that crashed, two serving levels (c = 2 and 4), and one config still running. An
    agent is running sweep 2."""
    engine = open_engine(path)
    now = utcnow()
    with new_session(engine) as s:
        device = dbbuild.add_device(s, hostname="jet")
        q8, q4 = model_file("Q8_0", "8"), model_file("Q4_K_M", "4")
        s.add_all([q8, q4])
        s.flush()
        old = dbbuild.add_sweep(s, device, name="nightly", status="completed", n_specs=2)
        done = {"status": "ok", "started_at": now - timedelta(hours=9), "ended_at": now - timedelta(hours=8)}
        a = dbbuild.add_run(s, old, 0, model_label="q8", model_file_id=q8.id, **done)
        b = dbbuild.add_run(s, old, 1, model_label="q4", model_file_id=q4.id, **done)
        s.add_all([steady(a, 0, 10.0), steady(a, 1, 12.0), steady(a, 2, 11.0)])
        s.add_all([steady(b, r, 20.0, temp_max_c=60.0 + r, decode_j_per_token=0.5) for r in range(3)])
        s.add(Verdict(run_id=b.id, kind="throttle", value="throttled", evidence_json="{}"))
        s.add(Verdict(run_id=b.id, kind="stability", value="stable", evidence_json="{}"))
        new = dbbuild.add_sweep(s, device, name="nightly", status="running", n_specs=6)
        ago = {m: now - timedelta(minutes=m) for m in (7, 8, 9)}
        fresh = {"status": "ok", "started_at": ago[9], "ended_at": ago[8]}
        c = dbbuild.add_run(s, new, 0, model_label="q8", model_file_id=q8.id, **fresh)
        s.add_all([steady(c, 0, 15.0), steady(c, 1, 17.0)])
        crash = {
            "status": "crashed",
            "reason": "SIGSEGV",
            "started_at": ago[8],
            "ended_at": ago[7],
        }
        dbbuild.add_run(s, new, 1, model_label="q4", model_file_id=q4.id, n_ctx=1024, **crash)
        srv = dbbuild.add_run(s, new, 2, model_label="q8", runner="llama-server", concurrency=2, **fresh)
        s.add(steady(srv, 0, 99.0))
        s.add(ServingLevel(run_id=srv.id, concurrency=2, ttft_p50_ms=25.0, ttft_p99_ms=40.0, tpot_p50_ms=5.0,
                           output_tps=300.0, stats_json='{"error_rate": 0.0}'))  # fmt: skip
        s.add(Verdict(run_id=srv.id, kind="interference", value="contended", evidence_json="{}"))
        srv4 = dbbuild.add_run(s, new, 4, model_label="q8", runner="llama-server", concurrency=4, **fresh)
        s.add(ServingLevel(run_id=srv4.id, concurrency=4, ttft_p50_ms=60.0))
        dbbuild.add_run(s, new, 3, model_label="q4", model_file_id=q4.id, status="running", started_at=now)
        agent = AgentState(pid=os.getpid(), hostname="jet", started_at=now, heartbeat_at=now, state="running")
        agent.sweep_id = new.id
        s.add(agent)
        s.commit()
    return engine


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return build_db(tmp_path / "m.db")


def scrape(engine: Engine) -> dict[str, list[tuple[dict[str, str], float]]]:
    """family name -> its samples (labels, value), through the text format a Prometheus server reads."""
    text = metrics_text(engine).decode()
    return {
        fam.name: [(dict(sample.labels), sample.value) for sample in fam.samples]
        for fam in text_string_to_metric_families(text)
    }


def one(samples: list[tuple[dict[str, str], float]], **labels: str) -> float:
    found = [v for lab, v in samples if all(lab.get(k) == val for k, val in labels.items())]
    assert len(found) == 1, (labels, samples)
    return found[0]


def test_each_config_shows_its_latest_finished_run_with_the_report_row_values(engine: Engine) -> None:
    families = scrape(engine)
    tg = families["edgeprof_tg_tokens_per_second"]
    assert all(set(labels) == LABELS for labels, _ in tg)
    # q8 at ctx 512 ran in both sweeps: the newer run speaks, with the value its report row gives
    with new_session(engine) as s:
        row = next(r for r in build_rows(s, 2) if r["model_label"] == "q8")
    assert one(tg, model="q8") == row["tg_tps_median"] == 16.0
    assert "edgeprof_config_run_id" not in families  # an id is no measurement
    key = {"device": "jet", "quant": "Q8_0", "ctx": "512", "ngl": "0", "workload": "w", "runner": "llama-cpp"}
    assert one(tg, model="q8", **key) == 16.0
    assert one(tg, model="q4", ctx="512") == 20.0  # only in the older sweep: still shown
    assert one(families["edgeprof_pp_tokens_per_second"], model="q8") == row["pp_tps_median"]
    assert one(families["edgeprof_ttft_seconds"], model="q8") == pytest.approx(row["ttft_ms_p50"] / 1000)
    # the serving level is another scenario, and the config still running has no figures yet
    assert {lab["runner"] for lab, _ in tg} == {"llama-cpp"}
    assert len(tg) == 2


def test_each_serving_level_shows_its_latest_figures_labelled_by_its_load(engine: Engine) -> None:
    families = scrape(engine)
    ttft = families["edgeprof_serving_ttft_seconds"]
    assert all(set(labels) == LABELS | {"endpoint", "concurrency", "request_rate"} for labels, _ in ttft)
    assert {labels["endpoint"] for labels, _ in ttft} == {"completion"}  # llama-server's own endpoint
    assert one(ttft, concurrency="2", runner="llama-server", model="q8") == pytest.approx(0.025)
    assert one(ttft, concurrency="4") == pytest.approx(0.060)
    assert one(families["edgeprof_serving_ttft_p99_seconds"], concurrency="2") == pytest.approx(0.040)
    assert one(families["edgeprof_serving_tpot_seconds"], concurrency="2") == pytest.approx(0.005)
    assert one(families["edgeprof_serving_output_tokens_per_second"], concurrency="2") == 300.0
    assert one(families["edgeprof_serving_error_ratio"], concurrency="2") == 0.0
    # what the c = 4 level did not measure is absent, not 0; no SLOs: no goodput at all
    assert [lab["concurrency"] for lab, _ in families["edgeprof_serving_output_tokens_per_second"]] == ["2"]
    assert not families.get("edgeprof_serving_goodput_requests_per_second")
    interference = families["edgeprof_serving_interference_verdict"]
    assert one(interference, concurrency="2", verdict="contended") == 1.0
    assert one(interference, concurrency="2", verdict="quiet") == 0.0
    assert one(families["edgeprof_serving_status"], concurrency="4", status="ok") == 1.0


def test_what_was_not_measured_is_absent_never_zero(engine: Engine) -> None:
    families = scrape(engine)
    temps = families["edgeprof_temperature_max_celsius"]
    joules = families["edgeprof_energy_joules_per_token"]
    assert [(lab["model"], v) for lab, v in temps] == [("q4", 62.0)]
    assert [(lab["model"], v) for lab, v in joules] == [("q4", 0.5)]
    # the crashed config: its status, and no speed at all
    status = families["edgeprof_config_status"]
    assert one(status, model="q4", ctx="1024", status="crashed") == 1.0
    assert one(status, model="q4", ctx="1024", status="ok") == 0.0
    assert not [lab for lab, _ in families["edgeprof_tg_tokens_per_second"] if lab["ctx"] == "1024"]


def test_verdicts_are_state_sets_with_one_for_the_current_value(engine: Engine) -> None:
    families = scrape(engine)
    throttle = families["edgeprof_throttle_verdict"]
    mine = {lab["verdict"]: v for lab, v in throttle if lab["model"] == "q4"}
    assert mine == {
        "throttled": 1.0, "slowdown_not_thermal": 0.0, "inconclusive": 0.0, "error": 0.0, "not_throttled": 0.0
    }
    assert {lab["model"] for lab, _ in throttle} == {"q4"}  # q8 was not judged: absent, not "not throttled"
    assert one(families["edgeprof_stability_verdict"], model="q4", verdict="stable") == 1.0
    assert "edgeprof_interference_verdict" not in families or not families["edgeprof_interference_verdict"]


def test_the_agent_its_sweep_and_the_last_error(engine: Engine) -> None:
    families = scrape(engine)
    assert one(families["edgeprof_agent_state"], state="running") == 1.0
    assert one(families["edgeprof_agent_state"], state="idle") == 0.0
    assert families["edgeprof_agent_up"] == [({}, 1.0)]
    info = families["edgeprof_sweep_info"]
    assert info == [({"sweep_id": "2", "name": "nightly", "status": "running"}, 1.0)]
    assert families["edgeprof_sweep_configs"] == [({}, 6.0)]
    assert families["edgeprof_sweep_configs_done"] == [({}, 4.0)]
    assert families["edgeprof_sweep_config_index"] == [({}, 5.0)]
    assert families["edgeprof_sweep_eta_seconds"][0][1] > 0
    age = families["edgeprof_last_error_age_seconds"][0][1]
    assert 7 * 60 <= age < 60 * 60  # the crash ended 7 minutes ago (a slow machine adds seconds, not an hour)
    assert families["edgeprof_metrics_read_ok"] == [({}, 1.0)]


def test_device_keeps_one_device_of_a_central_database(engine: Engine) -> None:
    with new_session(engine) as s:
        other = dbbuild.add_device(s, fingerprint="other", hostname="orin")
        sweep = dbbuild.add_sweep(s, other, name="theirs", status="completed")
        run = dbbuild.add_run(s, sweep, 0, model_label="theirs", ended_at=utcnow())
        s.add(steady(run, 0, 5.0))
        s.commit()
    both = {lab["device"] for lab, _ in scrape(engine)["edgeprof_tg_tokens_per_second"]}
    assert both == {"jet", "orin"}
    mine = parse_metrics(MetricsCollector(engine, device="orin"))
    assert [lab["model"] for lab, _ in mine["edgeprof_tg_tokens_per_second"]] == ["theirs"]
    assert mine["edgeprof_sweep_info"][0][0]["name"] == "theirs"
    assert not mine["edgeprof_agent_state"]  # the heartbeat in this database is jet's agent


def parse_metrics(collector: MetricsCollector) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {m.name: [(dict(s.labels), s.value) for s in m.samples] for m in collector.collect()}


def test_an_empty_database_scrapes_without_samples(tmp_path: Path) -> None:
    families = scrape(open_engine(tmp_path / "empty.db"))
    assert families["edgeprof_metrics_read_ok"] == [({}, 1.0)]
    always = ("edgeprof_metrics_read_ok", "edgeprof_build_info")  # what serves the metrics, known anyway
    assert all(not samples for name, samples in families.items() if name not in always)


def test_a_failed_read_is_a_gauge_not_an_exception(tmp_path: Path) -> None:
    broken = create_engine(f"sqlite:///{tmp_path / 'no-such-dir' / 'x.db'}")
    metrics = list(MetricsCollector(broken).collect())
    assert [(m.name, [s.value for s in m.samples]) for m in metrics] == [("edgeprof_metrics_read_ok", [0.0])]


def test_the_textfile_is_replaced_whole(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "edgeprof.prom"
    out.write_text("# HELP edgeprof_agent_up old\n")  # an earlier textfile of ours
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    write_textfile(engine, out)
    first = out.read_text()
    assert "edgeprof_tg_tokens_per_second{" in first and "old" not in first
    assert {f.name for f in text_string_to_metric_families(first)} >= {"edgeprof_agent_state"}
    # a symlink planted at the path is refused, never written through nor replaced
    out.unlink()
    out.symlink_to(target)
    with pytest.raises(UnsafePath, match="symbolic link"):
        write_textfile(engine, out)
    assert out.is_symlink() and target.read_text() == "keep"
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no temp file left behind


def test_a_heartbeat_gone_stale_shows_as_not_responding(engine: Engine) -> None:
    with new_session(engine) as s:
        state = s.query(AgentState).one()
        state.heartbeat_at = datetime(2024, 1, 1)
        s.commit()
    families = scrape(engine)
    assert one(families["edgeprof_agent_state"], state="not responding") == 1.0
    assert families["edgeprof_agent_up"] == [({}, 0.0)]
    assert families["edgeprof_agent_heartbeat_age_seconds"][0][1] > 3600
