"""Run a plan: for each run spec, in order, a child process per cold start; store every outcome.

The sweep never stops for a failed run: a crash, hang or load failure is a stored row with a reason. It stops
for Ctrl-C/SIGTERM, after marking the current run and the sweep ``interrupted``; everything committed so far
stays, and running the same plan again resumes where it stopped.

It reads as its steps (``_run_plan_held``): the device and the lease, the models (hashed, one row each),
open or resume the sweep, preflight and fit, telemetry, then each config measured by its executor and
stored (``ConfigLoop``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from sqlalchemy import Engine, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from edgeprof import __version__
from edgeprof.device import (
    BusyScan,
    collect_device_facts,
    comparable_state,
    get_or_create_device,
    jetson_state,
    switch_power_mode,
    system_warnings,
)
from edgeprof.executors import Executor, RunContext, executor_of_run, executor_of_spec
from edgeprof.plan import Plan, RunSpec, expand
from edgeprof.run_states import FINISHED_STATUSES, SKIPPED_MEMORY, utcnow
from edgeprof.storage.guard import error_line
from edgeprof.storage.models import Device, Run, Sweep
from edgeprof.sweep.fit import FitChecker, record_sweep_bandwidth
from edgeprof.sweep.interleave import OpenConfig, measure_rivals, rival_units
from edgeprof.sweep.lease import Lease, lease_key, mark_interrupted, reconcile_plan
from edgeprof.sweep.lease import acquire as acquire_lease
from edgeprof.sweep.models import ModelRows, hash_models, model_group, same_file_lines
from edgeprof.sweep.progress import Progress
from edgeprof.sweep.runs import interrupted_before, new_run, store_interrupted
from edgeprof.sweep.verdicts import judge_run


class SweepHooks(Protocol):
    """Telemetry and cooldown attach here; every method is optional in spirit (no-ops by default)."""

    def before_run(self, session: Session, run: Run, spec: RunSpec) -> None: ...

    def on_child_event(self, run: Run, event: dict[str, Any]) -> None: ...

    def after_run(self, session: Session, run: Run, spec: RunSpec) -> None: ...

    # Optional: ``between_reps(session, run, event) -> seconds waited`` cools down before each steady rep.


@dataclass
class SweepOptions:
    """How ``run_plan`` runs a plan beyond the plan itself (its keyword options, every one optional)."""

    new_sweep: bool = False  # never resume: a fresh sweep even when one of this plan exists
    retry_failed: bool = False  # measure again what ended in anything but ``ok``
    out: TextIO | None = None  # the progress stream (None: stdout)
    hooks: SweepHooks | None = None  # around each run (telemetry brings its own)
    telemetry: Callable[[int], Any] | None = None  # sweep id -> telemetry, started here; also the hooks
    env: dict[str, str] | None = None  # the children's environment
    device_root: Path | str = "/"  # where /proc and /sys are read (a fake tree in tests)
    state_reader: Callable[[], dict[str, Any] | None] | None = None  # the device state (power mode, clocks)
    heartbeat: Callable[[], None] | None = None  # beaten with the lease (the agent's systemd watchdog)
    should_start: Callable[[], str | None] | None = None  # a reason not to start the next config, or None
    power_switcher: Callable[[str], str | None] | None = None  # switches nvpmodel; the error, or None
    # Measures the memory bandwidth once per sweep, for the report's share of the peak (the CLI and the
    # agent pass edgeprof.gguf.bandwidth.probe_bandwidth); without it the sweep's bw_probe_gbps stays NULL.
    bandwidth_probe: Callable[[], Any] | None = None
    system_check: bool = True  # say up front what will make the numbers noisy (as pyperf's system check)


@dataclass
class SweepOutcome:
    sweep_id: int
    n_specs: int
    n_skipped: int
    counts: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    paused: str | None = None  # why no further config was started (time window, disk space)

    def count(self, status: str) -> None:
        self.counts[status] = self.counts.get(status, 0) + 1


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """systemd stops a service with SIGTERM: treat it as Ctrl-C, so the current run is stored interrupted.

    Only the first SIGTERM raises: a second one (systemd repeats, an impatient user) must not break the
    handler that is marking the run and the sweep interrupted.
    """

    def handler(_signum: int, _frame: Any) -> None:
        if _SIGTERM_SEEN[0]:
            return
        _SIGTERM_SEEN[0] = True
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    outermost = not _SIGTERM_DEPTH[0]
    if outermost:
        _SIGTERM_SEEN[0] = False
    _SIGTERM_DEPTH[0] += 1
    try:
        yield
    finally:
        _SIGTERM_DEPTH[0] -= 1
        signal.signal(signal.SIGTERM, previous)


# Shared by nested sigterm_as_interrupt() scopes (run_plan's, and the config loop's inside it).
_SIGTERM_SEEN = [False]
_SIGTERM_DEPTH = [0]


class SweepAborted(RuntimeError):
    """The sweep could not go on (database full, damaged or unwritable); one line for the user."""


@dataclass
class _Held:
    """What the lease-holding wrapper around a sweep needs to know from inside it."""

    wait: bool = False
    on_wait: Callable[[str], None] | None = None
    lease: Lease | None = None
    sweep_id: int | None = None
    n_specs: int = 0

    def beat_with(self, heartbeat: Callable[[], None] | None) -> Callable[[], None]:
        def beat() -> None:
            if self.lease is not None:
                self.lease.beat()
            if heartbeat is not None:
                heartbeat()

        return beat


def run_plan(
    engine: Engine,
    plan: Plan,
    *,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
    **options: Any,
) -> SweepOutcome:
    """Measure every spec of ``plan`` not already finished in its sweep, holding the sweep's lease;
    ``options`` are the fields of ``SweepOptions``.

    Raises LeaseHeld when another live process runs this plan on this device (``wait``: wait for it), and
    SweepAborted when storage fails mid-sweep. Whatever ends the sweep - a stop signal while telemetry
    stops, a full disk - it is never left ``running``: it is marked ``interrupted`` here, or, when even that
    write fails, its dead owner is reconciled by the next ``run``/``status``.
    """
    opts = SweepOptions(**options)
    held = _Held(wait=wait, on_wait=on_wait)
    with sigterm_as_interrupt():
        try:
            return _run_plan_held(engine, plan, held=held, opts=opts)
        except KeyboardInterrupt:
            if held.sweep_id is None:
                raise
            # A stop outside the config loop (telemetry stopping, the final commit): the loop's own handler
            # did not see it.
            _mark_aborted(engine, held.sweep_id, "stopped by the user")
            return SweepOutcome(sweep_id=held.sweep_id, n_specs=held.n_specs, n_skipped=0, interrupted=True)
        except (SQLAlchemyError, OSError) as exc:
            first = error_line(exc)
            where = f"sweep {held.sweep_id}" if held.sweep_id is not None else "the sweep"
            marked = held.sweep_id is not None and _mark_aborted(engine, held.sweep_id, first)
            raise SweepAborted(
                f"{where} stopped: {first}"
                + ("; it is marked interrupted" if marked else "")
                + "; everything committed before is kept (free space or repair the database, then run "
                "the plan again to resume)"
            ) from None
        finally:
            if held.lease is not None:
                held.lease.release()


def _mark_aborted(engine: Engine, sweep_id: int, why: str) -> bool:
    """Best effort, in a fresh session: the failing one may hold a broken transaction."""
    try:
        with Session(engine) as session:
            sweep = session.get(Sweep, sweep_id)
            if sweep is not None and sweep.status == "running":
                mark_interrupted(session, sweep, why)
            session.commit()
        return True
    except Exception:  # noqa: BLE001 - the lease's dead owner is reconciled later instead
        return False


def _run_plan_held(engine: Engine, plan: Plan, *, held: _Held, opts: SweepOptions) -> SweepOutcome:
    """Measure every spec of ``plan`` not already finished in its sweep; returns counts per status."""
    from edgeprof.storage.db import new_session

    # started first: its window overlaps the lease, the model hashing and the sweep's opening, not a wait
    scan = BusyScan(opts.device_root) if opts.system_check else None
    with new_session(engine) as session:
        device = _device_and_lease(engine, session, plan, held, opts.device_root)
        heartbeat = held.beat_with(opts.heartbeat)
        models = hash_models(session, plan, heartbeat)
        specs = expand(plan, models.sha256)
        read_state = opts.state_reader or (lambda: jetson_state(opts.device_root))
        start_state = read_state()
        sweep = _open_or_resume(session, plan, device, len(specs), start_state, opts.new_sweep)
        assert held.lease is not None
        held.lease.attach(session, sweep.id)  # one commit with the sweep: no running sweep without an owner
        session.commit()
        held.sweep_id, held.n_specs = sweep.id, len(specs)
        todo = _still_to_measure(session, sweep, specs, opts.retry_failed)
        outcome = SweepOutcome(sweep_id=sweep.id, n_specs=len(specs), n_skipped=len(specs) - len(todo))
        progress = Progress(len(specs), opts.out or sys.stdout)
        for line in same_file_lines(plan, models) if todo else ():
            progress.line(line)
        fitter = _preflight(
            session, plan, sweep, device, start_state, bool(todo), outcome, progress, opts, scan=scan
        )
        tele, hooks = _start_telemetry(opts, sweep.id, bool(todo), progress, held)
        configs = ConfigLoop(
            session, plan, sweep, outcome, progress, fitter, models, opts,
            hooks=hooks, heartbeat=heartbeat, read_state=read_state, last_state=start_state,
        )  # fmt: skip
        try:
            with sigterm_as_interrupt():
                configs.measure_all(todo)
        except KeyboardInterrupt:
            outcome.interrupted = True
            outcome.count("interrupted")
            store_interrupted(session, sweep)
            progress.line(f"sweep {sweep.id} interrupted; everything measured so far is stored")
            return outcome
        finally:
            progress.close()
            if tele is not None:
                tele.stop()
        sweep.status, sweep.ended_at = ("paused" if outcome.paused else "completed"), utcnow()
        session.commit()
    return outcome


def _device_and_lease(engine: Engine, session: Session, plan: Plan, held: _Held, root: Path | str) -> Device:
    """This device's row, and the plan's lease on it: nobody else writes this plan's sweeps meanwhile."""
    device = get_or_create_device(session, collect_device_facts(root))
    # Commit before taking the lease: no write transaction may stay open across its own connection.
    session.commit()
    held.lease = acquire_lease(engine, lease_key(plan.hash, device.id), wait=held.wait, on_wait=held.on_wait)
    # Holding the lease, nobody else writes this plan's sweeps: whatever they left running is dead.
    reconcile_plan(session, plan.hash, device.id)
    session.commit()
    return device


def find_resumable_sweep(session: Session, plan: Plan, device: Device) -> Sweep | None:
    return session.scalars(
        select(Sweep)
        .where(Sweep.plan_hash == plan.hash, Sweep.device_id == device.id)
        .order_by(Sweep.id.desc())
    ).first()


def _open_or_resume(
    session: Session,
    plan: Plan,
    device: Device,
    n_specs: int,
    start_state: dict[str, Any] | None,
    new_sweep: bool,
) -> Sweep:
    """The plan's last sweep on this device, running again; a new one when there is none (or asked for)."""
    sweep = None if new_sweep else find_resumable_sweep(session, plan, device)
    if sweep is None:
        sweep = Sweep(
            name=plan.name,
            plan_path=plan.source,
            plan_text=plan.text,
            plan_hash=plan.hash,
            device_id=device.id,
            edgeprof_version=__version__,
            started_at=utcnow(),
            status="running",
            n_specs=n_specs,
            device_state_json=json.dumps(start_state) if start_state else None,
        )
        session.add(sweep)
    else:
        sweep.status, sweep.ended_at = "running", None
    session.flush()
    return sweep


def _still_to_measure(
    session: Session, sweep: Sweep, specs: list[RunSpec], retry_failed: bool
) -> list[RunSpec]:
    """The specs without a finished run in the sweep (``retry_failed``: without an ``ok`` one)."""
    finished = FINISHED_STATUSES if not retry_failed else ("ok",)
    done_ids = set(
        session.scalars(select(Run.spec_id).where(Run.sweep_id == sweep.id, Run.status.in_(finished))).all()
    )
    return [s for s in specs if s.spec_id not in done_ids]


def _preflight(
    session: Session,
    plan: Plan,
    sweep: Sweep,
    device: Device,
    start_state: dict[str, Any] | None,
    anything_to_do: bool,
    outcome: SweepOutcome,
    progress: Progress,
    opts: SweepOptions,
    *,
    scan: BusyScan | None,
) -> FitChecker:
    """Before the first config: what will make this sweep's numbers noisy (the busy-process scan started
    with the sweep), the memory bandwidth once per sweep, and the fit checker that predicts each config's
    memory before it starts."""
    if anything_to_do and scan is not None:
        for warning in system_warnings(opts.device_root, jetson=start_state, scan=scan):
            progress.line(f"warning: {warning}")
    fitter = FitChecker(opts.device_root, plan.reserve_mb)
    if anything_to_do:
        facts = json.loads(device.facts_json)
        record_sweep_bandwidth(sweep, facts, start_state, opts.bandwidth_probe, progress.line)
        session.commit()
    if outcome.n_skipped:
        progress.line(
            f"sweep {sweep.id}: {outcome.n_skipped} of {outcome.n_specs} configs already measured, skipped"
        )
    return fitter


def _start_telemetry(
    opts: SweepOptions, sweep_id: int, anything_to_do: bool, progress: Progress, held: _Held
) -> tuple[Any, SweepHooks | None]:
    """The started telemetry (None without a factory or work) and the hooks around each run."""
    if opts.telemetry is None or not anything_to_do:
        return None, opts.hooks
    # Built once the sweep exists: samples and collector states are stored against it.
    tele = opts.telemetry(sweep_id)
    if hasattr(tele, "on_phase"):
        tele.on_phase = progress.phase
    if hasattr(tele, "current_temp_c"):
        progress.read_temp = tele.current_temp_c  # a soak's live line shows the temperature
    if hasattr(tele, "heartbeat"):
        # A cooldown or idle baseline can outlast the lease's staleness limit (max_wait_s is the user's):
        # the telemetry's waits beat the lease too, or another host takes the sweep over.
        tele.heartbeat = held.beat_with(tele.heartbeat)
    tele.start()
    return tele, tele


@dataclass
class ConfigLoop:
    """Each config still to measure, in plan order: its run row, the device state it starts in, the fit
    check, its executor with the telemetry around it, and its line on the progress stream."""

    session: Session
    plan: Plan
    sweep: Sweep
    outcome: SweepOutcome
    progress: Progress
    fitter: FitChecker
    models: ModelRows
    opts: SweepOptions
    hooks: SweepHooks | None
    heartbeat: Callable[[], None]
    read_state: Callable[[], dict[str, Any] | None]
    last_state: dict[str, Any] | None = None  # as the previous config (or the sweep) started
    decision_spent_s: float = 0.0  # the sweep's extra rounds of sequential decisions so far
    index: int = field(init=False)  # the current config's place among all of the plan's
    seq_base: int = field(init=False)

    def __post_init__(self) -> None:
        self.seq_base = len(self.sweep.runs)
        self.index = self.outcome.n_skipped

    def measure_all(self, todo: list[RunSpec]) -> None:
        """Each config, or each set of rival configs measured interleaved (agent/sweep/interleave.py)."""
        group_of = lambda s: model_group(s, self.plan.model_info.get(s.model.path))  # noqa: E731
        for unit in rival_units(todo, group_of, self.plan.decide.sequential):
            stop_reason = self.opts.should_start() if self.opts.should_start is not None else None
            if stop_reason:
                self.outcome.paused = stop_reason
                where = f"sweep {self.sweep.id} paused before config {self.index + 1}"
                self.progress.line(f"{where}: {stop_reason}")
                return
            if len(unit) == 1:
                self.measure_one(unit[0])
            else:
                measure_rivals(self, unit)

    def measure_one(self, spec: RunSpec) -> None:
        """One config, from its run row to its finished line; a refused config is a stored row too."""
        opened = self.open_config(spec, spec)
        if opened is not None:
            self.close_config(opened)

    def open_config(self, spec: RunSpec, first: RunSpec) -> OpenConfig | None:
        """A config's run row, power mode, fit check and first child (``first``: the spec it runs with, the
        spec itself or its first block of steady reps); None when it was refused (stored and said so)."""
        self.index += 1
        session = self.session
        executor = executor_of_spec(spec)
        label = executor.label(spec)
        group = model_group(spec, self.plan.model_info.get(spec.model.path))
        file_id = self.models.file_id.get(spec.model.path)  # None: a foreign server's model
        run = new_run(self.sweep, spec, self.seq_base + self.index, file_id, group)
        switch_error = self.set_power_mode(spec)
        self.note_device_state(run)
        session.add(run)
        session.commit()
        if switch_error is not None:
            self.refuse(run, label, "error", f"power mode switch failed: {switch_error}", "ERROR")
            return None
        fit = self.fitter.assess(run, spec)
        session.commit()
        if fit is not None and fit.fits is False:  # not started: it would be OOM-killed
            self.refuse(run, label, SKIPPED_MEMORY, f"predicted not to fit: {fit.message()}", "SKIPPED")
            return None
        self.progress.start(self.index, label)
        if interrupted_before(session, self.sweep, spec, run) and spec.workload.kind == "soak":
            self.progress.line(f"run {run.id} {label}: soak restarts (a soak is one measurement)")
        opened = OpenConfig(spec, run, executor, label, self.index, time.monotonic())
        self.execute(executor, run, first)
        return opened

    def close_config(self, opened: OpenConfig) -> None:
        """After a config's last child: bandwidth, the memory calibration, telemetry's analysis, the
        verdicts, its line."""
        session, run, spec = self.session, opened.run, opened.spec
        _guarded(session, self.progress, "computing bandwidth", self.fitter.annotate_bandwidth, run, spec)
        self.fitter.calibrate(run, spec)
        session.commit()
        if self.hooks is not None:
            _guarded(session, self.progress, "analysing the run", self.hooks.after_run, session, run, spec)
        judge_run(session, run, self.progress.line)  # with telemetry or without (agent/sweep/verdicts.py)
        self.outcome.count(run.status)
        seconds = time.monotonic() - opened.t0
        self.finish_line(run, opened.label, describe_outcome(session, run), seconds, opened.index)

    def set_power_mode(self, spec: RunSpec) -> str | None:
        """Switch to the spec's power mode (a plan axis) unless the device is in it; the error, or None."""
        wanted = spec.params.power_mode
        if wanted is None or (comparable_state(self.last_state) or {}).get("power_mode") == wanted:
            return None
        self.progress.line(f"switching power mode to {wanted} (plan axis)")
        root = self.opts.device_root
        error = (self.opts.power_switcher or (lambda m: switch_power_mode(m, root)))(wanted)
        self.last_state = self.read_state()  # a change we asked for is not a surprise
        got = (comparable_state(self.last_state) or {}).get("power_mode")
        if error is None and got != wanted:
            error = f"nvpmodel reports {got!r} after switching to {wanted!r}"
        return error

    def note_device_state(self, run: Run) -> None:
        # Re-read before each config: someone may change the power mode during an overnight sweep.
        state = self.read_state()
        if state is not None:
            run.device_state_json = json.dumps(state)
            run.device_state_changed = comparable_state(state) != comparable_state(self.last_state)
            if run.device_state_changed:
                self.progress.line(f"note: device state changed: {comparable_state(state)}")
            self.last_state = state

    def rep_state(self) -> dict[str, Any]:
        """What changes speed outside the model, as a block of steady reps starts: the CPU governors and
        clock caps (cpufreq), and on a Jetson the power mode and jetson_clocks (``comparable_state``)."""
        state: dict[str, Any] = dict(comparable_state(self.read_state()) or {})
        state.update(cpufreq_state(self.opts.device_root))
        return state

    def refuse(self, run: Run, label: str, status: str, reason: str, word: str) -> None:
        """A config that is not started: stored with its reason, counted, and said so."""
        run.status, run.reason = status, reason
        run.ended_at = utcnow()
        self.session.commit()
        self.outcome.count(status)
        self.finish_line(run, label, f"{word}: {run.reason}", 0.0)

    def finish_line(
        self, run: Run, label: str, outcome: str, seconds: float, index: int | None = None
    ) -> None:
        n_left = self.outcome.n_specs - self.index
        where = self.index if index is None else index
        self.progress.finish(where, f"run {run.id} {label}", outcome, seconds, n_left)

    def execute(self, executor: Executor, run: Run, spec: RunSpec) -> None:
        """The executor runs the config, the telemetry hooks around it, every child event relayed to both."""
        session, progress, hooks = self.session, self.progress, self.hooks
        if hooks is not None:
            _guarded(session, progress, "before the run", hooks.before_run, session, run, spec)
        executor.execute(session, run, spec, self.run_context(run))

    def run_context(self, run: Run) -> RunContext:
        """What an executor's children report to: progress and telemetry, the lease, the cooldown."""
        session, progress, hooks = self.session, self.progress, self.hooks

        def relay(event: dict[str, Any]) -> None:
            progress.event(event)
            if hooks is not None:
                hooks.on_child_event(run, event)

        pace = getattr(hooks, "between_reps", None)

        def cool(event: dict[str, Any]) -> float:
            return float(pace(session, run, event)) if pace is not None else 0.0

        return RunContext(
            plan=self.plan,
            on_event=relay,
            env=self.opts.env,
            heartbeat=self.heartbeat,
            between_reps=cool if pace is not None else None,
            say=progress.line,
        )


def cpufreq_state(root: Path | str) -> dict[str, Any]:
    """Each cpufreq policy's governor and cap (scaling_max_freq) against its hardware maximum; {} where the
    kernel has no cpufreq (a VM)."""
    out: dict[str, Any] = {}
    base = Path(root) / "sys/devices/system/cpu/cpufreq"
    try:
        policies = sorted(p for p in base.iterdir() if p.name.startswith("policy"))
    except OSError:
        return out
    for policy in policies:
        for key, name in (("governor", "scaling_governor"), ("cap_khz", "scaling_max_freq"),
                          ("max_khz", "cpuinfo_max_freq")):  # fmt: skip
            try:
                text = (policy / name).read_text().strip()
            except OSError:
                continue
            out[f"{policy.name}.{key}"] = int(text) if text.isdigit() else text
    return out


def describe_outcome(session: Session, run: Run) -> str:
    """A finished run on its progress line: the failure and its reason, or its executor's summary."""
    if run.status != "ok":
        return f"{run.status.upper()}: {run.reason}"
    return executor_of_run(run).describe(session, run)


def _guarded(session: Session, progress: Progress, what: str, step: Callable[..., None], *args: Any) -> None:
    """Telemetry steps around a run: a bug there costs that step, never the stored run or the sweep."""
    try:
        step(*args)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - reported on the progress stream, the sweep goes on
        session.rollback()
        progress.line(f"warning: telemetry failed {what}: {type(exc).__name__}: {exc}")


def env_without_fault() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("EDGEPROF_TEST_FAULT", None)
    return env
