"""Figures and the self-contained HTML report, from hand-built databases (with and without telemetry); the
HTML of a real tiny sweep is in tests/integration/test_report_html.py."""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import delete
from sqlalchemy.orm import Session
from support import dbbuild

from edgeprof.report import ReportError, build_rows, render_html, write_html
from edgeprof.report.figures import comparison_png, timeline_png
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Build, Device, Measurement, ModelFile, Phase, Sample, Sweep, Verdict
from edgeprof.verdicts import analyse_sweep

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
T0 = datetime(2024, 5, 1, 12, 0)
TRIPS = {"temp.cpu_c": [("passive", 85.0), ("critical", 105.0)]}


def assert_png(path: Path, min_bytes: int = 5_000) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > min_bytes, f"{path} is only {len(data)} bytes"


def build_db(s: Session, *, telemetry: bool, hot_second_run: bool = True) -> int:
    """A sweep with three configs: two ok (the second heating up and losing clock) and one OOM."""
    dev = Device(
        fingerprint="fp-1",
        hostname="orin-nx-lab",
        arch="aarch64",
        cpu_model="ARMv8 Processor rev 1 (v8l)",
        cpu_count=8,
        ram_total_mb=15_656.0,
        board_model="NVIDIA Jetson Orin NX Engineering Reference Developer Kit",
        l4t_release="36.3.0",
        facts_json=json.dumps({"kernel": "5.15.136-tegra"}),
        first_seen=T0,
    )
    build = Build(
        fingerprint="b-1",
        llama_cpp_python_version="0.3.8",
        backend="cuda",
        gpu_offload=True,
        system_info="CUDA : ARCHS = 870 | USE_GRAPHS = 1",
        build_flags="-DGGML_CUDA=on",
        first_seen=T0,
    )
    s.add_all([dev, build])
    s.flush()
    sweep = Sweep(
        name="orin-quant-sweep",
        plan_path="/plans/orin.toml",
        plan_text='name = "orin-quant-sweep"\n',
        plan_hash="ph",
        device_id=dev.id,
        edgeprof_version="0.1.0",
        started_at=T0,
        ended_at=T0,
        status="completed",
        n_specs=3,
        device_state_json=json.dumps(
            {"nvpmodel": {"name": "MAXN", "id": 0}, "jetson_clocks": {"locked": False}}
        ),
    )
    s.add(sweep)
    s.flush()
    configs = [
        ("llama-<q8_0>", "Q8_0", 8.5, "ok", None, 100.0),
        ("llama-q4_k_m", "Q4_K_M", 4.8, "ok", None, 1000.0),
        ("llama-f16", "F16", 16.0, "oom", "killed by the OOM killer (SIGKILL) while loading", 2000.0),
    ]
    for seq, (label, quant, bpw, status, reason, t0) in enumerate(configs, start=1):
        mf = ModelFile(
            path=f"/m/{label}.gguf",
            sha256=f"{seq:064d}",
            size_bytes=int(bpw * 1e9 / 8),
            mtime_ns=0,
            n_params=1_000_000_000,
            quant_type=quant,
        )
        s.add(mf)
        s.flush()
        run = dbbuild.add_run(
            s,
            sweep,
            seq,
            spec_id=f"spec-{seq}",
            model_file_id=mf.id,
            build_id=build.id if status == "ok" else None,
            model_label=label,
            model_group="llama",
            model_path=mf.path,
            workload_name="chat",
            workload_json=json.dumps({"n_predict": 128}),
            n_ctx=2048,
            status=status,
            reason=reason,
            exit_code=None,
            signal_name="SIGKILL" if status != "ok" else None,
            log_tail="llama_model_load: loading tensors\nKilled" if status != "ok" else None,
            started_at=T0,
            t_start_mono=t0,
            t_end_mono=t0 + 70,
            peak_rss_mb=1800.0 + 100 * seq,
        )
        s.add(Phase(run_id=run.id, name="cooldown", t_start_mono=t0 - 20, t_end_mono=t0 - 5))
        s.add(Phase(run_id=run.id, name="idle", t_start_mono=t0 - 5, t_end_mono=t0))
        s.add(Phase(run_id=run.id, name="load", kind="cold", rep=0, t_start_mono=t0, t_end_mono=t0 + 2))
        hot = hot_second_run and seq == 2
        if status == "ok":
            for i in range(6):
                a = t0 + 2 + 10 * i
                tps = 20.0 - (1.5 * i if hot else 0.1 * (i % 2))
                s.add(
                    Phase(
                        run_id=run.id, name="prefill", kind="steady", rep=i, t_start_mono=a, t_end_mono=a + 1
                    )
                )
                s.add(
                    Phase(
                        run_id=run.id,
                        name="decode",
                        kind="steady",
                        rep=i,
                        t_start_mono=a + 1,
                        t_end_mono=a + 9,
                    )
                )
                s.add(
                    Measurement(
                        run_id=run.id,
                        kind="steady",
                        rep=i,
                        n_prompt=128,
                        pp_tps=300.0 + i,
                        ttft_ms=430.0 + i,
                        n_gen=128,
                        tg_tps=tps,
                        t_start_mono=a,
                        t_end_mono=a + 9,
                        decode_j_per_token=0.4 if telemetry else None,
                        decode_j_per_token_net=0.3 if telemetry else None,
                        decode_power_mw=9000.0 if telemetry else None,
                    )
                )
        if telemetry:
            t = t0 - 20
            while t <= t0 + 64:
                rel = t - t0
                temp = 55.0 + (0.4 * rel if hot and rel > 0 else 0.0)
                freq = 1984.0 if not hot or rel < 30 else 1190.0
                for metric, value in (
                    ("temp.cpu_c", temp),
                    ("temp.gpu_c", None),
                    ("cpufreq.policy0.cur_mhz", freq),
                    ("cpufreq.policy0.max_mhz", 1984.0),
                    ("power.vdd_in_mw", 9000.0 if rel >= 0 else 4500.0),
                ):
                    s.add(
                        Sample(
                            sweep_id=sweep.id,
                            run_id=run.id,
                            t_mono=t,
                            t_wall=t,
                            source="synthetic",
                            metric=metric,
                            value=value,
                        )
                    )
                t += 1.0
    s.commit()
    analyse_sweep(s, sweep.id, TRIPS)
    return sweep.id


@pytest.mark.parametrize("telemetry", [True, False])
def test_timeline_and_comparison_pngs_are_written(tmp_path: Path, telemetry: bool) -> None:
    engine = open_engine(tmp_path / "p.db")
    with new_session(engine) as s:
        sweep_id = build_db(s, telemetry=telemetry)
        tl = timeline_png(s, sweep_id, tmp_path / "out" / "timeline.png", TRIPS)
        cmp_ = comparison_png(build_rows(s, sweep_id), tmp_path / "out" / "compare.png")
    assert tl == tmp_path / "out" / "timeline.png"
    assert_png(tl, 20_000)
    assert_png(cmp_, 20_000)


def test_figures_never_crash_on_missing_data(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "e.db")
    with new_session(engine) as s:
        dev = Device(fingerprint="f", hostname="h", arch="x86_64", facts_json="{}", first_seen=T0)
        s.add(dev)
        s.flush()
        empty = Sweep(
            name="empty",
            plan_text="",
            plan_hash="x",
            device_id=dev.id,
            edgeprof_version="0",
            started_at=T0,
            status="running",
            n_specs=0,
        )
        s.add(empty)
        s.commit()
        assert_png(timeline_png(s, empty.id, tmp_path / "empty.png"), 1_000)
        assert_png(timeline_png(s, 9999, tmp_path / "missing.png"), 1_000)
    assert_png(comparison_png([], tmp_path / "none.png"), 1_000)
    bare = {
        "model_label": "m",
        "quant": None,
        "ctx": 512,
        "ngl": 0,
        "status": "timeout",
        "tg_tps_median": None,
        "pp_tps_median": float("nan"),
    }
    assert_png(comparison_png([bare, {**bare, "ctx": 1024, "status": "ok"}], tmp_path / "bare.png"), 5_000)


def test_html_is_self_contained_with_verdicts_failures_and_metadata(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "h.db")
    with new_session(engine) as s:
        sweep_id = build_db(s, telemetry=True)
        page = render_html(s, sweep_id, trip_points=TRIPS)
        written = write_html(s, sweep_id, tmp_path / "r" / "report.html")
    assert written.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")

    # self-contained: no remote or relative resources, no script
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
    assert "<script" not in page.lower() and "<link" not in page.lower()
    # a phone or a narrow window lays the page out at its own width
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    images = re.findall(r'<img [^>]*src="([^"]+)"', page)
    assert len(images) == 2
    for uri in images:
        assert uri.startswith("data:image/png;base64,")
        assert base64.b64decode(uri.split(",", 1)[1])[:8] == PNG_MAGIC

    # configs with verdicts; the label is escaped, never injected
    assert "llama-&lt;q8_0&gt;" in page and "<q8_0>" not in page
    assert "Q4_K_M" in page
    # verdicts with their evidence: run 2 heated up and lost clock, run 1 did not
    assert 'class="badge v-throttled">throttled<' in page
    assert 'class="badge v-not_throttled">not_throttled<' in page
    assert "cpu clock 1190 MHz under load" in page
    assert "temp.cpu_c rising" in page
    assert "&quot;signals&quot;" in page  # the evidence JSON itself
    # failed runs with reasons and log tails
    assert "killed by the OOM killer (SIGKILL) while loading" in page
    assert "llama_model_load: loading tensors" in page
    # device, build, power mode
    assert "orin-nx-lab" in page and "36.3.0" in page
    assert "0.3.8" in page and "-DGGML_CUDA=on" in page
    assert "MAXN" in page


def test_html_without_telemetry_or_verdicts_still_renders(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "n.db")
    with new_session(engine) as s:
        sweep_id = build_db(s, telemetry=False)
        # forget the verdicts: a sweep recorded before verdicts existed
        s.execute(delete(Verdict))
        s.commit()
        page = render_html(s, sweep_id)
        with pytest.raises(ReportError):
            render_html(s, 4242)
    assert page.count('src="data:image/png;base64,') == 2
    assert "No verdicts stored for this sweep" in page
    assert "not judged" in page
    assert "No telemetry collectors recorded" in page
    assert "killed by the OOM killer" in page
