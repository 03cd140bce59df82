"""Throttle and stability verdicts: synthetic series with known answers, a hand-built DB, and one end-to-end
sweep on a tiny model with a fake sysfs tree that heats up and throttles while the model runs."""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from support import dbbuild

from edgeprof.collectors.registry import build_collectors
from edgeprof.collectors.sysfs_thermal import ThermalZonesCollector
from edgeprof.plan.parse import Collect, Cooldown, parse_plan
from edgeprof.runners.protocol import FAULT_ENV
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Phase, Run, Sample, Sweep, Verdict
from edgeprof.sweep import Telemetry, run_plan
from edgeprof.verdicts.judge import (
    RepSample,
    ThrottleInputs,
    ThrottleThresholds,
    VerdictLikeRow,
    analyse_run,
    attach_verdicts,
    config_verdict,
    spearman,
    stability,
    summary_line,
    throttle_verdict,
    trip_points_from,
    value_at,
)

TRIPS = {"temp.cpu_c": [("active", 50.0), ("passive", 85.0), ("critical", 105.0)]}


# -- synthetic runs --------------------------------------------------------------------------------------
def reps_of(tps: Sequence[float | None], rep_s: float = 10.0) -> list[RepSample]:
    """Steady reps back to back from t=0, each ``rep_s`` long."""
    return [RepSample(i, i * rep_s, i * rep_s + rep_s - 0.5, v) for i, v in enumerate(tps)]


def series(fn: Callable[[float], float | None], t_end: float = 60.0, step: float = 1.0) -> list[Any]:
    n = round(t_end / step)
    return [(i * step, fn(i * step)) for i in range(n + 1)]


def flat(value: float) -> Callable[[float], float]:
    return lambda _t: value


def inputs(
    tps: Sequence[float | None],
    metrics: dict[str, list[Any]],
    *,
    trips: dict[str, list[tuple[str, float]]] | None = None,
    max_freq: dict[str, float] | None = None,
    gpu: bool = False,
) -> ThrottleInputs:
    reps = reps_of(tps)
    return ThrottleInputs(
        reps=reps,
        series=metrics,
        load_start=0.0,
        load_end=reps[-1].t_end if reps else 60.0,
        trip_points=trips if trips is not None else TRIPS,
        max_freq_mhz=max_freq or {},
        gpu_in_use=gpu,
    )


STEADY_TPS = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0]
FALLING_TPS = [100.0, 99.0, 95.0, 90.0, 85.0, 84.0]


def cool_metrics() -> dict[str, list[Any]]:
    return {
        "temp.cpu_c": series(lambda t: 50.0 + (0.3 if int(t) % 2 else 0.0)),
        "cpufreq.policy0.cur_mhz": series(flat(2000.0)),
        "cpufreq.policy0.max_mhz": series(flat(2000.0)),
        "cpufreq.policy0.hw_max_mhz": series(flat(2000.0)),
    }


def test_clean_run_is_not_throttled() -> None:
    result = throttle_verdict(inputs(STEADY_TPS, cool_metrics()))
    assert result.value == "not_throttled", result.evidence["reasons"]
    ev = result.evidence
    assert ev["clocks"]["status"] == "steady"
    assert ev["temperature"]["status"] == "flat"
    assert ev["drift"]["status"] == "steady"
    assert ev["hardware"]["flags"] == []
    assert ev["signals"] == []
    json.dumps(ev, allow_nan=False)  # storable as evidence_json


def test_rising_temperature_clock_drop_and_falling_tps_is_throttled_with_all_three_evidences() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 50.0 + 0.5 * t)  # 30 °C/min up to 79.5 °C
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else 1400.0)
    result = throttle_verdict(inputs(FALLING_TPS, metrics))
    assert result.value == "throttled"
    ev = result.evidence
    assert set(ev["signals"]) >= {"clock", "temperature", "drift"}
    cpu = ev["clocks"]["domains"]["cpu"]
    assert cpu["status"] == "dropped" and cpu["fraction"] == pytest.approx(0.7)
    assert cpu["reference_mhz"] == 2000.0 and cpu["first_below_t"] == 30.0
    zone = ev["temperature"]["zones"]["temp.cpu_c"]
    assert zone["rising"] and zone["slope_c_per_min"] == pytest.approx(30.0)
    assert zone["trip"] == {"type": "passive", "c": 85.0} and not zone["near_trip"]
    assert ev["drift"]["status"] == "falling"
    assert ev["drift"]["drop_fraction"] == pytest.approx(1 - 84.5 / 99.5, abs=1e-4)
    assert ev["drift"]["spearman_tps_vs_temp"] == pytest.approx(-1.0)
    assert any("cpu clock 1400 MHz" in r for r in ev["reasons"])


def test_falling_tps_with_flat_temperatures_and_steady_clocks_is_not_thermal() -> None:
    result = throttle_verdict(inputs(FALLING_TPS, cool_metrics()))
    assert result.value == "slowdown_not_thermal"
    assert result.evidence["drift"]["status"] == "falling"
    assert result.evidence["temperature"]["status"] == "flat"
    assert result.evidence["clocks"]["status"] == "steady"


def test_too_few_samples_or_reps_is_inconclusive() -> None:
    few = {
        "temp.cpu_c": [(0.0, 50.0), (5.0, 50.0), (10.0, 50.0)],
        "cpufreq.policy0.cur_mhz": [(0.0, 2000.0), (5.0, 2000.0), (10.0, 2000.0)],
    }
    result = throttle_verdict(inputs([100.0, 100.0], few))
    assert result.value == "inconclusive"
    assert result.evidence["samples_under_load"] == 3
    assert any("need 3" in r for r in result.evidence["reasons"])
    assert any("need 5" in r for r in result.evidence["reasons"])
    # Plenty of reps but no telemetry at all: still inconclusive, never "fine".
    assert throttle_verdict(inputs(STEADY_TPS, {})).value == "inconclusive"
    # Nothing to place the run in time.
    assert throttle_verdict(ThrottleInputs()).value == "inconclusive"


def test_nvml_thermal_reason_alone_is_throttled() -> None:
    metrics = cool_metrics()
    # GpuIdle (0x1) then SwThermalSlowdown (0x20) for a few readings under load
    metrics["gpu0.clock_event_reasons"] = series(lambda t: 0x20 if 5 <= t <= 8 else 0x1)
    result = throttle_verdict(inputs([100.0, 100.0], metrics, gpu=True))  # even with too few reps
    assert result.value == "throttled"
    assert result.evidence["signals"] == ["hardware"]
    detail = result.evidence["hardware"]["detail"]["gpu0.clock_event_reasons"]
    assert detail["throttle_reasons"] == ["SwThermalSlowdown"]
    assert "GpuIdle" in detail["reasons_seen"]
    # The same flag on a GPU the run did not use (ngl=0) says nothing about the run.
    ignored = throttle_verdict(inputs(STEADY_TPS, metrics, gpu=False))
    assert ignored.value == "not_throttled"
    assert "ignored" in ignored.evidence["hardware"]["detail"]["gpu0.clock_event_reasons"]
    # Idle and application-clock reasons are normal operation.
    metrics["gpu0.clock_event_reasons"] = series(flat(0x1 | 0x2))
    metrics["gpu.freq_mhz"] = series(flat(1300.0))
    assert throttle_verdict(inputs(STEADY_TPS, metrics, gpu=True)).value == "not_throttled"


def test_x86_throttle_counter_delta_alone_is_throttled() -> None:
    metrics = cool_metrics()
    metrics["throttle.package0.count"] = series(lambda t: 10.0 if t < 40 else 14.0)
    metrics["throttle.cpu0.core_count"] = series(flat(3.0))
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "throttled"
    assert result.evidence["hardware"]["detail"]["throttle.package0.count"]["delta"] == 4.0
    assert result.evidence["hardware"]["detail"]["throttle.cpu0.core_count"]["delta"] == 0.0
    assert result.evidence["hardware"]["flags"] == ["throttle.package0.count: +4 throttle events during load"]


def test_clock_drop_without_heat_is_a_note_or_a_non_thermal_slowdown() -> None:
    metrics = cool_metrics()
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else 1200.0)
    quiet = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert quiet.value == "not_throttled"
    assert quiet.evidence["clocks"]["status"] == "dropped"
    assert any("without heat" in n for n in quiet.evidence["notes"])
    slowed = throttle_verdict(inputs(FALLING_TPS, metrics))
    assert slowed.value == "slowdown_not_thermal"
    assert any("power cap or governor" in r for r in slowed.evidence["reasons"])


def test_near_trip_without_throttling_is_noted() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(flat(82.0))
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "not_throttled"
    assert result.evidence["temperature"]["status"] == "near_trip"
    assert result.evidence["temperature"]["zones"]["temp.cpu_c"]["margin_c"] == 3.0
    assert any("close to a trip point" in n for n in result.evidence["notes"])
    # Without trip points the same flat 82 °C is just flat.
    assert throttle_verdict(inputs(STEADY_TPS, metrics, trips={})).evidence["temperature"]["status"] == "flat"


def test_hot_and_slow_from_the_start_is_caught_by_the_sweep_reference() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 70.0 + 0.2 * t)
    metrics["cpufreq.policy0.cur_mhz"] = series(flat(1500.0))
    # Compared with itself the clock never moved ...
    assert throttle_verdict(inputs(STEADY_TPS, metrics)).evidence["clocks"]["status"] == "steady"
    # ... but an earlier, cooler run of the same shape reached 2000 MHz.
    result = throttle_verdict(inputs(STEADY_TPS, metrics, max_freq={"cpu": 2000.0}))
    assert result.value == "throttled"
    assert result.evidence["clocks"]["domains"]["cpu"]["reference_source"] == "comparable runs of the sweep"


def test_lowered_cpufreq_cap_counts_as_a_clock_drop() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 60.0 + 0.4 * t)
    metrics["cpufreq.policy0.max_mhz"] = series(lambda t: 2000.0 if t < 45 else 1200.0)
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "throttled"
    cap = result.evidence["clocks"]["domains"]["cpu_cap.policy0"]
    assert cap["status"] == "dropped" and cap["observed_mhz"] == 1200.0


def test_an_idle_cluster_at_a_low_clock_is_not_a_drop() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 50.0 + 0.5 * t)  # heating, as any loaded board does
    metrics["cpufreq.policy4.cur_mhz"] = series(flat(600.0))  # the other cluster, idle all along
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "not_throttled"
    assert result.evidence["clocks"]["domains"]["cpu"]["observed_mhz"] == 2000.0


def test_a_dgpu_run_is_judged_on_the_gpu_sensor_and_sm_clock() -> None:
    metrics = {
        "gpu0.temp_c": series(lambda t: 60.0 + 0.3 * t),  # NVML's own sensor, no thermal zone
        "gpu0.sm_clock_mhz": series(lambda t: 1800.0 if t < 30 else 1300.0),
        "cpufreq.policy0.cur_mhz": series(flat(3000.0)),
    }
    result = throttle_verdict(inputs(STEADY_TPS, metrics, gpu=True))
    assert result.value == "throttled"
    assert result.evidence["clocks"]["domains"]["gpu"]["status"] == "dropped"
    assert result.evidence["clocks"]["domains"]["cpu"]["status"] == "steady"
    assert result.evidence["temperature"]["zones"]["gpu0.temp_c"]["rising"]
    # A CPU-only run (ngl=0) on the same box: the GPU's sensor and clock say nothing about it.
    cpu_only = throttle_verdict(inputs(STEADY_TPS, metrics, gpu=False))
    assert cpu_only.value == "not_throttled"
    assert "gpu" not in cpu_only.evidence["clocks"]["domains"]
    assert cpu_only.evidence["temperature"]["status"] == "unknown"
    assert any("no temperature sensor" in n for n in cpu_only.evidence["notes"])


def test_heat_with_unmeasured_clocks_needs_tps_to_track_temperature() -> None:
    hot = {"temp.cpu_c": series(lambda t: 50.0 + 0.5 * t)}
    result = throttle_verdict(inputs(FALLING_TPS, hot))
    assert result.value == "throttled"
    assert result.evidence["clocks"]["status"] == "unknown"
    assert set(result.evidence["signals"]) == {"drift", "temperature"}
    # Falling speed but no temperature sensor: nothing to attribute it to.
    no_temp = {"cpufreq.policy0.cur_mhz": series(flat(2000.0))}
    assert throttle_verdict(inputs(FALLING_TPS, no_temp)).value == "inconclusive"


def test_thresholds_are_honoured() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 50.0 + 0.5 * t)
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else 1800.0)  # 0.9
    assert throttle_verdict(inputs(STEADY_TPS, metrics)).value == "not_throttled"
    strict = ThrottleThresholds(clock_drop_fraction=0.95)
    assert throttle_verdict(inputs(STEADY_TPS, metrics), strict).value == "throttled"


def test_stability() -> None:
    value, ev = stability([100.0, 101.0, 99.0, 100.0, 102.0])
    assert value == "stable" and ev["n"] == 5 and ev["cv"] < 0.02
    spike = stability([100.0, 130.0, 100.0, 100.0, 100.0])
    assert spike.value == "unstable" and spike.evidence["max_over_median"] == pytest.approx(1.3)
    slow = stability([100.0, 100.0, 100.0, 70.0, 100.0])
    assert slow.value == "unstable" and any("min is 0.70x" in r for r in slow.evidence["reasons"])
    noisy = stability([80.0, 120.0, 80.0, 120.0, 100.0])
    assert noisy.value == "unstable" and noisy.evidence["cv"] == pytest.approx(0.2, abs=1e-3)
    assert any("stdev is 20.0% of the mean" in r for r in noisy.evidence["reasons"])
    assert stability([100.0, 50.0]).value == "inconclusive"
    assert stability([100.0, None, 101.0, None]).value == "inconclusive"  # None is not a value
    assert stability([]).evidence["n"] == 0


def test_spearman_and_value_at() -> None:
    assert spearman([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 1, 2, 2]) == pytest.approx(0.894, abs=1e-3)  # ties share ranks
    assert spearman([1, 2], [2, 1]) is None
    assert spearman([1, 2, 3], [5, 5, 5]) is None
    pts = [(0.0, 10.0), (2.0, 20.0), (3.0, None)]
    assert value_at(pts, 1.0) == 15.0
    assert value_at(pts, 3.5) == 20.0  # beyond the readings: the nearest one, if close
    assert value_at(pts, 10.0) is None


def test_config_verdict_takes_the_worst_attempt() -> None:
    rows = [
        VerdictLikeRow("throttle", "not_throttled"),
        VerdictLikeRow("throttle", "throttled"),
        VerdictLikeRow("stability", "stable"),
        VerdictLikeRow("stability", "inconclusive"),
        VerdictLikeRow("interference", "quiet"),
        VerdictLikeRow("interference", "contended"),
    ]
    assert config_verdict(rows) == {
        "throttle": "throttled",
        "stability": "inconclusive",
        "interference": "contended",
    }
    assert config_verdict([]) == {"throttle": None, "stability": None, "interference": None}


# -- a hand-built database -------------------------------------------------------------------------------


def add_run(
    s: Session,
    sweep: Sweep,
    seq: int,
    *,
    t0: float,
    temp: Callable[[float], float],
    freq: Callable[[float], float],
    tps: Sequence[float],
    threads: int = 4,
) -> Run:
    run = dbbuild.add_run(s, sweep, seq, model_label="m-q4", n_threads=threads)
    s.add(Phase(run_id=run.id, name="idle", t_start_mono=t0 - 5, t_end_mono=t0))
    s.add(Phase(run_id=run.id, name="load", kind="cold", rep=0, t_start_mono=t0, t_end_mono=t0 + 1))
    for i, v in enumerate(tps):
        a = t0 + 1 + 10 * i
        s.add(Phase(run_id=run.id, name="prefill", kind="steady", rep=i, t_start_mono=a, t_end_mono=a + 1))
        s.add(Phase(run_id=run.id, name="decode", kind="steady", rep=i, t_start_mono=a + 1, t_end_mono=a + 9))
        s.add(
            Measurement(
                run_id=run.id, kind="steady", rep=i, tg_tps=v, pp_tps=500.0, t_start_mono=a, t_end_mono=a + 9
            )
        )
    t = t0 - 5.0
    while t <= t0 + 1 + 10 * len(tps):
        rel = t - t0
        for metric, value in (("temp.cpu_c", temp(rel)), ("cpufreq.policy0.cur_mhz", freq(rel))):
            s.add(
                Sample(
                    sweep_id=sweep.id,
                    run_id=run.id,
                    t_mono=t,
                    t_wall=t,
                    source="x",
                    metric=metric,
                    value=value,
                )
            )
        s.add(
            Sample(
                sweep_id=sweep.id,
                run_id=run.id,
                t_mono=t,
                t_wall=t,
                source="x",
                metric="power.vdd_in_mw",
                value=None,
            )
        )
        t += 1.0
    s.commit()
    return run


def make_sweep(s: Session) -> Sweep:
    sweep = dbbuild.add_sweep(s, name="s", plan_hash="h", n_specs=3)
    s.commit()
    return sweep


def test_analyse_run_stores_verdicts_and_uses_comparable_runs_as_clock_reference(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "v.db")
    with new_session(engine) as s:
        sweep = make_sweep(s)
        cool = add_run(s, sweep, 1, t0=1000.0, temp=flat(45.0), freq=flat(2000.0), tps=STEADY_TPS)
        hot = add_run(s, sweep, 2, t0=2000.0, temp=lambda r: 70 + 0.2 * r, freq=flat(1500.0), tps=STEADY_TPS)
        other = add_run(
            s, sweep, 3, t0=3000.0, temp=lambda r: 70 + 0.2 * r, freq=flat(1500.0), tps=STEADY_TPS, threads=8
        )

        stored = analyse_run(s, cool.id, TRIPS)
        assert [(v.kind, v.value) for v in stored] == [
            ("throttle", "not_throttled"),
            ("stability", "stable"),
            ("interference", "inconclusive"),  # this hand-built run has no CPU-time counters
        ]
        hot_v = {v.kind: v for v in analyse_run(s, hot.id, TRIPS)}
        assert hot_v["throttle"].value == "throttled"
        assert summary_line(hot_v["throttle"]).startswith(
            "throttled: cpu clock 1500 MHz under load = 75% of 2000"
        )
        evidence = json.loads(hot_v["throttle"].evidence_json)
        assert evidence["clocks"]["domains"]["cpu"]["reference_mhz"] == 2000.0
        # A different thread count is a different load shape: run 1 is not its reference.
        other_v = {v.kind: v for v in analyse_run(s, other.id, TRIPS)}
        assert other_v["throttle"].value == "not_throttled"

        # A second collector reporting the same metric (jtop beside tegrastats) is not interleaved into it.
        for i in range(60):
            t = 995.5 + i
            s.add(
                Sample(
                    sweep_id=sweep.id,
                    run_id=cool.id,
                    t_mono=t,
                    t_wall=t,
                    source="jtop",
                    metric="temp.cpu_c",
                    value=95.0,
                )
            )
        s.commit()
        again = json.loads(analyse_run(s, cool.id, TRIPS)[0].evidence_json)
        assert again["temperature"]["zones"]["temp.cpu_c"]["max_c"] == 45.0

        analyse_run(s, hot.id, TRIPS)  # judging again replaces, never duplicates
        # throttle, stability, interference: one row each
        assert len(list(s.scalars(select(Verdict).where(Verdict.run_id == hot.id)))) == 3
        rows = attach_verdicts(s, [{"run_id": cool.id}, {"run_id": hot.id}, {"run_id": 999}])
        assert [r["throttle_verdict"] for r in rows] == ["not_throttled", "throttled", None]
        assert rows[0]["stability_verdict"] == "stable"
        with pytest.raises(ValueError, match="no run"):
            analyse_run(s, 12345)


# -- end to end: a real tiny model while a fake sysfs heats up and throttles -----------------------------
def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # atomic: the sampler never reads a half-written file


def fake_hot_sys(root: Path) -> Path:
    """Synthetic sysfs tree (not a capture): one zone with a passive trip at 85 °C, one cpufreq policy."""
    zone = root / "sys/class/thermal/thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "type").write_text("cpu-thermal\n")
    (zone / "temp").write_text("60000\n")
    (zone / "mode").write_text("enabled\n")
    for i, (kind, milli) in enumerate((("active", 50000), ("passive", 85000), ("critical", 105000))):
        (zone / f"trip_point_{i}_type").write_text(f"{kind}\n")
        (zone / f"trip_point_{i}_temp").write_text(f"{milli}\n")
    pol = root / "sys/devices/system/cpu/cpufreq/policy0"
    pol.mkdir(parents=True)
    for name, value in (
        ("scaling_cur_freq", "2000000"),
        ("scaling_max_freq", "2000000"),
        ("cpuinfo_max_freq", "2000000"),
        ("related_cpus", "0"),
        ("affected_cpus", "0"),
        ("scaling_governor", "schedutil"),
    ):
        (pol / name).write_text(f"{value}\n")
    return root


class Heater(threading.Thread):
    """Once the model is loaded: the zone climbs 40 °C/s from 60 °C (held at 84 °C, 1 °C under the passive
    trip) and the kernel "caps" the CPU from 2000 to 1000 MHz, as a thermal governor does."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.zone = root / "sys/class/thermal/thermal_zone0"
        self.policy = root / "sys/devices/system/cpu/cpufreq/policy0"
        self.go = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.go.wait(0.01):
            if self.stop.is_set():
                return
        _write(self.policy / "scaling_max_freq", "1000000\n")
        _write(self.policy / "scaling_cur_freq", "1000000\n")
        temp = 60.0
        while not self.stop.wait(0.01):
            temp = min(temp + 0.4, 84.0)
            _write(self.zone / "temp", f"{int(temp * 1000)}\n")


@pytest.mark.llama
def test_end_to_end_a_run_that_heats_and_loses_clock_is_judged_throttled(tmp_path: Path, tiny_models) -> None:
    root = fake_hot_sys(tmp_path / "root")
    plan = parse_plan(
        f"""
        [matrix]
        models = ["{tiny_models["Q4_K_M"]}"]
        ctx = [256]
        threads = [1]
        [[workload]]
        name = "w"
        prompt_tokens = 32
        n_predict = 200
        [repeat]
        warmup = 2
        steady = 20
        """,
        str(tmp_path / "p.toml"),
        tmp_path,
    )
    engine = open_engine(tmp_path / "e2e.db")
    collectors = build_collectors(root)
    heater = Heater(root)

    class HeatingTelemetry(Telemetry):
        def on_child_event(self, run: Run, event: dict[str, Any]) -> None:
            super().on_child_event(run, event)
            if event.get("event") == "loaded":
                heater.go.set()

    def factory(sweep_id: int) -> Telemetry:
        return HeatingTelemetry(
            engine, sweep_id, Collect(interval_ms=50, idle_s=0.2), Cooldown(), collectors=collectors
        )

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    heater.start()
    try:
        outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env)
    finally:
        heater.stop.set()
        heater.join(timeout=5)
    assert outcome.counts == {"ok": 1}
    trips = trip_points_from(collectors)
    assert trips == ThermalZonesCollector(root).trip_points()
    assert ("passive", 85.0) in trips["temp.cpu_c"]

    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        analyse_run(s, run.id, trips)
    with new_session(engine) as s:  # read back what was stored, in a fresh session
        stored = {v.kind: v for v in s.scalars(select(Verdict).where(Verdict.run_id == run.id))}
    assert set(stored) == {"throttle", "stability", "interference"}
    evidence = json.loads(stored["throttle"].evidence_json)
    assert evidence["samples_under_load"] >= 5, "the run was too short for 5 readings at 50 ms"
    assert stored["throttle"].value == "throttled", evidence["reasons"]
    assert {"clock", "temperature"} <= set(evidence["signals"])
    assert evidence["clocks"]["domains"]["cpu_cap.policy0"]["status"] == "dropped"
    assert evidence["clocks"]["domains"]["cpu_cap.policy0"]["reference_mhz"] == 2000.0
    zone = evidence["temperature"]["zones"]["temp.cpu_c"]
    assert zone["rising"] or zone["near_trip"]
    assert zone["trip"] == {"type": "passive", "c": 85.0}
    assert stored["stability"].value in ("stable", "unstable")
