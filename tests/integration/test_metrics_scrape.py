"""Prometheus metrics from a real agent: ``edgeprof agent --metrics-port`` scraped over HTTP while its sweep
runs (real tiny models, real SQLite), parsed with prometheus_client's own parser, its figures the same as
``report --format json``; then ``edgeprof metrics --textfile`` on the same database, and a port that is
taken refused at start."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.runs import clean_env, edgeprof, one_line_error, two_quant_plan

pytestmark = pytest.mark.timeout(240)

Samples = dict[str, list[tuple[dict[str, str], float]]]
LABELS = {
    "device", "model", "quant", "ctx", "ngl", "threads", "n_batch", "n_ubatch", "flash_attn", "type_k",
    "type_v", "depth", "workload", "runner", "variant",
}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse(text: str) -> Samples:
    return {
        fam.name: [(dict(sample.labels), sample.value) for sample in fam.samples]
        for fam in text_string_to_metric_families(text)
    }


def scrape(port: int) -> Samples | None:
    """One GET of /metrics; None while the endpoint is not up yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            assert response.status == 200
            return parse(response.read().decode())
    except (ConnectionError, urllib.error.URLError):
        return None


def value(samples: Samples, name: str, **labels: str) -> float | None:
    found = [v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def mid_sweep(samples: Samples | None) -> bool:
    """The agent runs its sweep's second config and the first one has finished."""
    return (
        samples is not None
        and value(samples, "edgeprof_agent_state", state="running") == 1.0
        and value(samples, "edgeprof_sweep_config_index") == 2.0
        and value(samples, "edgeprof_tg_tokens_per_second", model="q8") is not None
    )


def scrape_mid_sweep(proc: subprocess.Popen[str], port: int, timeout_s: float = 150.0) -> Samples:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        samples = scrape(port)
        if mid_sweep(samples):
            assert samples is not None
            return samples
        time.sleep(0.3)
    raise AssertionError(f"no scrape showed the sweep's first config done within {timeout_s} s")


def report_rows(db: Path) -> list[Mapping[str, object]]:
    proc = edgeprof("report", "--db", str(db), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


@pytest.mark.llama
def test_scraped_during_a_real_sweep_and_as_a_textfile_after(tmp_path: Path, tiny_models) -> None:
    queue, db, port = tmp_path / "queue", tmp_path / "m.db", free_port()
    queue.mkdir()
    # median != max; apart: q8 done before q4 starts
    plan = two_quant_plan(tiny_models, name="prom", timeout=120, repeat={"steady": 3}, apart=True)
    (queue / "plan.toml").write_text(plan)
    # the second config (q4) hangs in decode: the sweep is certainly still running when it is scraped
    env = clean_env(f"hang@decode:{tiny_models['Q4_K_M'].name}")
    args = ["agent", "--queue", str(queue), "--db", str(db), "--poll-s", "0.5", "--metrics-port", str(port)]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    proc = subprocess.Popen([sys.executable, "-m", "edgeprof", *args], env=env, text=True, **pipes)
    try:
        samples = scrape_mid_sweep(proc, port)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-3000:]

    assert value(samples, "edgeprof_agent_up") == 1.0
    assert value(samples, "edgeprof_sweep_configs") == 2.0
    assert value(samples, "edgeprof_sweep_configs_done") == 1.0
    [(info, one)] = samples["edgeprof_sweep_info"]
    assert (info["name"], info["status"], one) == ("prom", "running", 1.0)
    assert value(samples, "edgeprof_metrics_read_ok") == 1.0
    tg = samples["edgeprof_tg_tokens_per_second"]
    assert [set(labels) for labels, _ in tg] == [LABELS]  # only the finished config, with every label
    [(labels, scraped_tg)] = tg
    assert labels["quant"] == "Q8_0" and labels["ctx"] == "256" and labels["runner"] == "llama-cpp"
    assert labels["device"] == socket.gethostname() and labels["workload"] == "w"
    assert value(samples, "edgeprof_config_status", model="q8", status="ok") == 1.0
    assert value(samples, "edgeprof_pp_tokens_per_second", model="q8") is not None
    assert value(samples, "edgeprof_ttft_seconds", model="q8") is not None

    rows = {row["model_label"]: row for row in report_rows(db)}
    assert scraped_tg == rows["q8"]["tg_tps_median"]
    assert "edgeprof_config_run_id" not in samples  # an id is no measurement
    assert value(samples, "edgeprof_runs", status="ok") == 1.0  # a counter (edgeprof_runs_total): q8 ended

    # after the sweep: the same figures in node_exporter's textfile, the agent stopped, q4 interrupted
    out = tmp_path / "textfile" / "edgeprof.prom"
    out.parent.mkdir()
    done = edgeprof("metrics", "--textfile", str(out), "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    after = parse(out.read_text())
    assert value(after, "edgeprof_tg_tokens_per_second", model="q8") == scraped_tg
    assert value(after, "edgeprof_agent_state", state="stopped") == 1.0
    assert value(after, "edgeprof_tg_tokens_per_second", model="q4") is None  # never measured: absent
    assert value(after, "edgeprof_last_error_age_seconds") is not None  # the interrupted q4 run
    assert [p.name for p in out.parent.iterdir()] == ["edgeprof.prom"]

    # stdout without --textfile; a --textfile that is not a *.prom file (the database, say) is refused
    printed = edgeprof("metrics", "--db", str(db))
    assert printed.returncode == 0 and value(parse(printed.stdout), "edgeprof_agent_up") == 0.0
    refused = edgeprof("metrics", "--textfile", str(db), "--db", str(db))
    assert "reads only *.prom files" in one_line_error(refused)
    assert report_rows(db)  # the database is untouched


def test_a_metrics_port_that_is_taken_stops_the_start(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(two_quant_plan({"Q8_0": Path("/none.gguf"), "Q4_K_M": Path("/none.gguf")}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        db = str(tmp_path / "t.db")
        proc = edgeprof("agent", "--plan", str(plan), "--db", db, "--metrics-port", str(port))
    line = one_line_error(proc)
    assert line.startswith(f"edgeprof: error: --metrics-port {port}: cannot listen on 127.0.0.1"), line
