"""Telemetry around a sweep: the sampler thread, cooldown and idle baseline before each config, and the
per-phase aggregates and energy figures stored after it (``energy_j`` per phase, and joules per token where
a power rail was sampled)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from edgeprof import verdicts
from edgeprof.collectors import Collector, MetricRole, build_collectors, roles_for
from edgeprof.collectors.evidence import judge_evidence, thermometer_sources
from edgeprof.executors import EnergyOver, executor_of_run
from edgeprof.plan import Collect, Cooldown, RunSpec
from edgeprof.storage.models import CollectorStatus, Measurement, Phase, PhaseStat, Run, Sweep
from edgeprof.storage.samples import read_samples, seal_run, write_batch
from edgeprof.telemetry import (
    CooldownResult,
    EnergySource,
    Sampler,
    SampleRow,
    Series,
    aggregate_phase,
    choose_energy_source,
    energy_j,
    energy_per_token,
    max_over,
    net_energy_j,
    wait_for_cooldown,
)


def choose_power_source(
    metrics: set[str] | Mapping[str, str], wraps: Mapping[str, float | None] | None = None
) -> EnergySource | None:
    """The energy source of a run measured with ``metrics`` (names, or name -> collector), by the roles their
    collectors declare and ``edgeprof.telemetry.energy``'s precedence; None where nothing measures power."""
    sources = metrics if isinstance(metrics, Mapping) else None
    return choose_energy_source(roles_for(metrics, sources), wraps)


def hottest_c(values: dict[str, float | None]) -> float | None:
    from edgeprof.collectors import hottest_c as thermal_hottest

    return thermal_hottest(values)


def _max_around(series: Series, t_start: float, t_end: float, tol_s: float = 1.0) -> float | None:
    """Max reading inside the window; for a request shorter than the sampling interval, the max of the
    readings that bracket it (within ``tol_s``), since temperature cannot jump between two close readings."""
    inside = max_over(series, t_start, t_end)
    if inside is not None:
        return inside
    before = [v for t, v in series if v is not None and t_start - tol_s <= t <= t_start]
    after = [v for t, v in series if v is not None and t_end <= t <= t_end + tol_s]
    around = before[-1:] + after[:1]
    return max(around) if around else None


def _peak(
    series: dict[str, Series], names: list[str], t0: float, t1: float, total: bool = False
) -> float | None:
    """Max over [t0, t1] of one metric, or of the per-tick sum of several (``total``: all GPUs together)."""
    present = [n for n in names if n in series]
    if not present:
        return None
    if not total or len(present) == 1:
        return max_over(series[present[0]], t0, t1)
    by_t: dict[float, float] = {}
    for n in present:
        for t, v in series[n]:
            if v is not None and t0 <= t <= t1:
                by_t[t] = by_t.get(t, 0.0) + v
    return max(by_t.values()) if by_t else None


class Telemetry:
    """Implements the sweep's hooks (``SweepHooks`` in ``edgeprof.sweep.loop``)."""

    def __init__(
        self,
        engine: Engine,
        sweep_id: int,
        collect: Collect,
        cooldown: Cooldown,
        *,
        root: Path | str = "/",
        collectors: list[Collector] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.sweep_id = sweep_id
        self.collect = collect
        self.cooldown = cooldown
        self._sleep = sleep
        self.heartbeat = heartbeat
        self.clock = clock
        # Set by the sweep to show the current phase (cooldown with its temperature) on the terminal.
        self.on_phase: Callable[[str], None] | None = None
        names = list(collect.collectors) if collect.collectors is not None else None
        self.collectors = collectors if collectors is not None else build_collectors(Path(root), names)
        self.sampler = Sampler(self.collectors, collect.interval_ms / 1000.0, self._write, clock=clock)
        self.trip_points = verdicts.trip_points_from(self.collectors)
        self.wraps: dict[str, float | None] = {}
        self._thermometers: list[Collector] | None = None
        # metric -> the collector whose readings of it are used (the first to report it)
        self._owners: dict[str, str] = {}
        for state in self.sampler.states:
            if state.ok:
                with contextlib.suppress(Exception):
                    for m in state.collector.metrics():
                        self.wraps[m.name] = m.wrap
        self._record_collectors()

    def sleep(self, seconds: float) -> None:
        """Sleep in slices of at most a second, beating in between: a 5-minute cooldown is progress, and the
        agent's systemd watchdog must see it as such."""
        end = self.clock() + seconds
        while True:
            if self.heartbeat is not None:
                self.heartbeat()
            left = end - self.clock()
            if left <= 0:
                return
            self._sleep(min(1.0, left))

    # -- storage ----------------------------------------------------------------------------------------
    def _write(self, rows: list[SampleRow]) -> None:
        # One compressed block per (run, source) per flush (storage/samples.py): ~100 bytes a reading as rows,
        # a few bytes as blocks.
        with Session(self.engine) as session:
            write_batch(session, self.sweep_id, rows)
            session.commit()

    def _seal(self, run_id: int) -> None:
        # The run's ~2-s sampler blocks become blocks of up to 3000 ticks (storage.samples.seal_run): smaller
        # on disk, faster to read. Lossless; a failure leaves the small blocks, which read the same.
        try:
            with Session(self.engine) as session:
                seal_run(session, run_id)
                session.commit()
        except Exception as exc:  # noqa: BLE001 - compaction is an optimisation, never a lost run
            self.sampler.sink_errors.append(f"sealing run {run_id}: {type(exc).__name__}: {exc}")

    def _record_collectors(self) -> None:
        with Session(self.engine) as session:
            session.execute(delete(CollectorStatus).where(CollectorStatus.sweep_id == self.sweep_id))
            for state in self.sampler.states:
                metrics: list[dict[str, Any]] = []
                if state.ok:
                    with contextlib.suppress(Exception):
                        metrics = [
                            {"name": m.name, "unit": m.unit, "kind": m.kind}
                            | ({"role": m.role.as_json()} if m.role is not None else {})
                            for m in state.collector.declared_metrics()
                        ]
                    # Static facts a verdict needs later: thermal trip points, cpufreq governors.
                    for attr, key in (("trip_points", "trip_points"), ("governors", "governors")):
                        getter = getattr(state.collector, attr, None)
                        if callable(getter):
                            with contextlib.suppress(Exception):
                                extra = getter()
                                for entry in metrics:
                                    if (
                                        isinstance(extra, dict)
                                        and key == "trip_points"
                                        and entry["name"] in extra
                                    ):
                                        entry[key] = extra[entry["name"]]
                                if key == "governors" and isinstance(extra, dict):
                                    metrics.append(
                                        {
                                            "name": "cpufreq.governors",
                                            "unit": "",
                                            "kind": "info",
                                            "governors": extra,
                                        }
                                    )
                session.add(
                    CollectorStatus(
                        sweep_id=self.sweep_id,
                        name=state.collector.name,
                        ok=state.ok,
                        reason=state.reason,
                        metrics_json=json.dumps(metrics),
                    )
                )
            session.commit()

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        self.sampler.start()

    def stop(self) -> None:
        self.sampler.stop()
        with Session(self.engine) as session:
            for state in self.sampler.states:
                row = session.scalar(
                    select(CollectorStatus).where(
                        CollectorStatus.sweep_id == self.sweep_id,
                        CollectorStatus.name == state.collector.name,
                    )
                )
                if row is not None:
                    row.disabled_reason, row.last_error = state.disabled_reason, state.last_error
            sweep = session.get(Sweep, self.sweep_id)
            if sweep is not None:
                summary = self.sampler.stats.summary(self.sampler.interval_s)
                summary["sink_errors"] = self.sampler.sink_errors[-5:]
                sweep.sampler_json = json.dumps(summary)
            session.commit()

    def thermometers(self) -> list[Collector]:
        """The available sources that declare a board thermometer, in the registry's order (the evidence
        rule, ``thermometer_sources``: thermal zones first, then tegrastats, jtop, a Pi's firmware ...)."""
        if self._thermometers is None:
            ok = [s.collector for s in self.sampler.states if s.ok]
            declared: dict[str, list[MetricRole | None]] = {}
            for collector in ok:
                try:
                    declared[collector.name] = [m.role for m in collector.declared_metrics()]
                except Exception:  # noqa: BLE001 - a source that cannot say its metrics is no thermometer
                    declared[collector.name] = []
            names = thermometer_sources(declared)
            self._thermometers = [c for c in ok if c.name in names]
        return self._thermometers

    def current_temp_c(self) -> float | None:
        """The hottest thermometer now (the evidence rule: no pseudo-sensor), from the first source that
        has a reading."""
        for collector in self.thermometers():
            values, _err = collector.safe_sample()
            temp = hottest_c(values)
            if temp is not None:
                return temp
        return None

    # -- hooks ------------------------------------------------------------------------------------------
    def _cool_down(
        self, session: Session, run: Run, kind: str | None = None, rep: int | None = None
    ) -> CooldownResult:
        """Wait as ``[cooldown]`` says and store the wait as a ``cooldown`` phase of the run."""
        cd = self.cooldown
        t0 = self.clock()

        def read_temp() -> float | None:
            temp_c = self.current_temp_c()
            if self.on_phase is not None:
                self.on_phase("cooldown" + (f" {temp_c:.1f} °C" if temp_c is not None else ""))
            return temp_c

        result = wait_for_cooldown(
            read_temp=read_temp,
            clock=self.clock,
            sleep=self.sleep,
            below_c=cd.below_c,
            max_wait_s=cd.max_wait_s,
            slope_c_per_min=cd.slope_c_per_min,
            window_s=cd.window_s,
            delay_s=cd.delay_s,
        )
        t1 = self.clock()
        if t1 > t0:
            session.add(
                Phase(run_id=run.id, name="cooldown", kind=kind, rep=rep, t_start_mono=t0, t_end_mono=t1)
            )
        return result

    def before_run(self, session: Session, run: Run, spec: RunSpec) -> None:
        self.sampler.set_run(run.id)
        result = self._cool_down(session, run)
        run.start_temp_c = result.end_temp_c if result.end_temp_c is not None else self.current_temp_c()
        run.cooldown_wait_s, run.cooldown_reason = result.waited_s, result.reason
        if self.collect.idle_s > 0:
            if self.on_phase is not None:
                self.on_phase(f"idle baseline {self.collect.idle_s:g} s")
            t_idle = self.clock()
            self.sleep(self.collect.idle_s)
            session.add(
                Phase(
                    run_id=run.id,
                    name="idle",
                    kind=None,
                    rep=None,
                    t_start_mono=t_idle,
                    t_end_mono=self.clock(),
                )
            )
        session.commit()

    def resume_run(self, session: Session, run: Run) -> None:
        """A later block of ``run``'s steady reps (agent/sweep/interleave.py): its samples are this run's
        again, without another cooldown or idle baseline (the blocks of its rivals ran just before)."""
        self.sampler.set_run(run.id)

    def between_reps(self, session: Session, run: Run, event: dict[str, Any]) -> float:
        """``[cooldown] per_rep``: the same wait as before a config, before each steady rep; returns the
        seconds waited (the child's timeout is moved by as much)."""
        t0 = self.clock()
        self._cool_down(session, run, event.get("kind"), event.get("rep"))
        return self.clock() - t0

    def on_child_event(self, run: Run, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "start" and isinstance(event.get("pid"), int):
            self.sampler.set_child_pid(event["pid"])
        elif kind in ("measurement", "soak_window"):
            # The rep (or a soak's window) has ended (the child reports after its last token): a
            # CPU-time/energy reading now closes it, however short it is next to the sampling interval.
            self.sampler.mark_boundary()

    def after_run(self, session: Session, run: Run, spec: RunSpec) -> None:
        self.sampler.settle()  # the last rep's boundary reading still belongs to this run
        self.sampler.set_child_pid(None)
        self.sampler.set_run(None)
        self.sampler.flush_now()
        self._seal(run.id)
        series = self._series(session, run.id)
        power = choose_power_source(self._owners, self.wraps)
        # Named on every run with energy: which metrics, which precedence step, whole board or not.
        run.power_source = power.short_name if power else None
        run.energy_sources = power.name if power else None
        run.energy_basis = power.basis if power else None
        run.energy_whole_board = power.whole_board if power else None
        # the evidence rule over this run: a fixed zone is no thermometer in any aggregate, column or verdict
        declared = roles_for(series, self._owners)
        roles = judge_evidence(series, declared).apply(declared)
        phases = list(session.scalars(select(Phase).where(Phase.run_id == run.id)))
        _memory_peaks(run, series, roles)

        def energy(t_start: float, t_end: float) -> float | None:
            return energy_j(power, series, t_start, t_end)

        idle = next((p for p in phases if p.name == "idle"), None)
        if idle is not None and power is not None and idle.t_end_mono > idle.t_start_mono:
            e_idle = energy(idle.t_start_mono, idle.t_end_mono)
            run.idle_power_mw = (
                e_idle / (idle.t_end_mono - idle.t_start_mono) * 1000.0 if e_idle is not None else None
            )
        _phase_stats(session, run, phases, series, roles)
        gpu_in_use = verdicts.gpu_in_use(run)
        temps = [m for m in series if verdicts.is_temperature(m, gpu_in_use, roles)]
        executor_of_run(run).attach_energy(session, run, energy)  # a serving level's J per output token
        _rep_energy_and_temperature(session, run, phases, energy, series, temps)
        session.commit()
        # The verdicts are the sweep's next step (agent/sweep/verdicts.py), run with telemetry or without.

    def _series(self, session: Session, run_id: int) -> dict[str, Series]:
        out: dict[str, Series] = {}
        owner: dict[str, str] = {}
        self._owners = owner  # this run's metrics and their collector, for the roles
        for r in read_samples(session, None, run_ids=[run_id]):
            metric, t, value, source = r.metric, r.t_mono, r.value, r.source
            # On a Jetson, tegrastats and jtop both report temp.* and power.*: one source per metric, so
            # two samplers' readings are never interleaved into one series.
            if owner.setdefault(metric, source) != source:
                continue
            out.setdefault(metric, []).append((t, value))
        return out


def _memory_peaks(run: Run, series: dict[str, Series], roles: dict[str, Any]) -> None:
    """Memory beside RSS: on a Jetson the GPU's buffers live in shared RAM (NvMap), on a dGPU in VRAM;
    peaks over the run's own span (load to last token), not the idle and cooldown before it."""
    if run.t_start_mono is None or run.t_end_mono is None:
        return
    t0, t1 = run.t_start_mono, run.t_end_mono
    run.peak_shared_mb = _peak(series, ["mem.shared_mb"], t0, t1)
    gpu_mem = sorted(
        m for m, r in roles.items() if r.role == "memory" and r.component == "gpu" and r.discrete
    )
    run.peak_gpu_mem_mb = _peak(series, gpu_mem, t0, t1, total=True)
    run.peak_ram_used_mb = _peak(series, ["mem.ram_used_mb"], t0, t1)


def _phase_stats(
    session: Session, run: Run, phases: list[Phase], series: dict[str, Series], roles: dict[str, Any]
) -> None:
    """Every metric aggregated over every phase of the run (min/mean/max..., by the metric's role)."""
    for ph in phases:
        for agg in aggregate_phase(series, ph.t_start_mono, ph.t_end_mono, roles=roles):
            session.add(
                PhaseStat(
                    run_id=run.id,
                    phase=ph.name,
                    kind=ph.kind,
                    rep=ph.rep,
                    metric=agg.metric,
                    stat=agg.stat,
                    value=agg.value,
                )
            )


def _rep_energy_and_temperature(
    session: Session,
    run: Run,
    phases: list[Phase],
    energy: EnergyOver,
    series: dict[str, Series],
    temps: list[str],
) -> None:
    """Per measured rep: the prefill's and the decode's energy (gross, and net of the idle draw), the
    decode's mean power, and the hottest temperature from prefill start to decode end."""
    by_key = {(p.name, p.kind, p.rep): p for p in phases}
    for m in session.scalars(select(Measurement).where(Measurement.run_id == run.id)):
        pre = by_key.get(("prefill", m.kind, m.rep))
        dec = by_key.get(("decode", m.kind, m.rep))
        if pre is not None:
            m.prefill_energy_j = energy(pre.t_start_mono, pre.t_end_mono)
            m.prefill_j_per_token = energy_per_token(m.prefill_energy_j, m.n_prompt)
            net = net_energy_j(
                m.prefill_energy_j, run.idle_power_mw, pre.t_end_mono - pre.t_start_mono
            )
            m.prefill_j_per_token_net = energy_per_token(net, m.n_prompt)
        if dec is not None:
            duration = dec.t_end_mono - dec.t_start_mono
            m.decode_energy_j = energy(dec.t_start_mono, dec.t_end_mono)
            m.decode_j_per_token = energy_per_token(m.decode_energy_j, m.n_gen)
            net = net_energy_j(m.decode_energy_j, run.idle_power_mw, duration)
            m.decode_j_per_token_net = energy_per_token(net, m.n_gen)
            m.decode_power_mw = (
                m.decode_energy_j / duration * 1000.0
                if m.decode_energy_j is not None and duration > 0
                else None
            )
        if pre is not None and dec is not None and temps:
            maxima = [_max_around(series[t], pre.t_start_mono, dec.t_end_mono) for t in temps]
            known = [v for v in maxima if v is not None]
            m.temp_max_c = max(known) if known else None
