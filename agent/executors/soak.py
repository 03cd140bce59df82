"""Soak runs: one request repeated back to back for a duration, in ONE in-process worker child.

The child (``edgeprof.runners.llama_worker`` with ``runners/soak.py``) loads the model once, runs the cold
request (stored as a cold measurement, like every config's), then the soak, and reports one ``soak_window``
event per window. Each window is stored twice: as a ``Phase`` (name ``soak_window``, kind ``soak``, rep = the
window's index), so the telemetry's phase aggregates cover each window like every other phase, and as a
``SoakWindow`` row holding its speeds (and, once the run's samples are in, its telemetry figures).

A soak is one measurement: one that was stopped (Ctrl-C, SIGTERM) is stored ``interrupted`` with the windows
it got, and the plan run again starts it afresh as a new run (the sweep redoes every interrupted run); a
crash or a timeout mid-soak is a stored row with its windows, and the sweep goes on.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.executors.base import EnergyOver, RunContext, config_label, end_run
from edgeprof.executors.inprocess import InProcessExecutor
from edgeprof.plan import RunSpec
from edgeprof.runners import RunInterrupted
from edgeprof.stats import median
from edgeprof.storage.models import Phase, Run, SoakWindow
from edgeprof.verdicts import WindowSpeed

WINDOW_PHASE = "soak_window"


def speeds_from_events(events: Iterable[dict[str, Any]]) -> list[WindowSpeed]:
    """The ``soak_window`` events as speeds, by index (a repeated index keeps its first report)."""
    out: dict[int, WindowSpeed] = {}
    for e in events:
        index = int(e["index"])
        out.setdefault(
            index,
            WindowSpeed(
                index=index,
                t_start=float(e["t_start"]),
                t_end=float(e["t_end"]),
                tokens=int(e.get("tokens") or 0),
                decode_s=float(e.get("decode_s") or 0.0),
                tg_tps=e.get("tg_tps"),
                pp_tps=e.get("pp_tps"),
            ),
        )
    return [out[i] for i in sorted(out)]


def store_soak_windows(session: Session, run: Run, speeds: Sequence[WindowSpeed]) -> None:
    """Each window of ``run`` as a phase and a ``soak_window`` row (its telemetry columns NULL for now)."""
    for w in speeds:
        session.add(
            Phase(
                run_id=run.id,
                name=WINDOW_PHASE,
                kind="soak",
                rep=w.index,
                t_start_mono=w.t_start,
                t_end_mono=w.t_end,
            )
        )
        session.add(
            SoakWindow(
                run_id=run.id,
                idx=w.index,
                t_start_mono=w.t_start,
                t_end_mono=w.t_end,
                tokens=w.tokens,
                decode_s=w.decode_s,
                tg_tps=w.tg_tps,
                pp_tps=w.pp_tps,
            )
        )


def stored_windows(session: Session, run: Run) -> list[SoakWindow]:
    return list(
        session.scalars(select(SoakWindow).where(SoakWindow.run_id == run.id).order_by(SoakWindow.idx))
    )


def attach_soak_telemetry(session: Session, run: Run, energy: EnergyOver) -> None:
    """The soak's after-run step, once the run's samples are stored: each window's energy, mean power and
    J per decoded token from the power source the telemetry chose.

    The windows' temperatures, clocks, throttle signals and other processes' load come with the run's
    verdicts (``agent/verdicts/store.py`` judges the soak from the same samples).
    """
    for row in stored_windows(session, run):
        span = row.t_end_mono - row.t_start_mono
        e_j = energy(row.t_start_mono, row.t_end_mono) if span > 0 else None
        row.energy_j = e_j
        row.power_mw = e_j / span * 1000.0 if e_j is not None else None
        row.j_per_token = e_j / row.tokens if e_j is not None and row.tokens > 0 else None


class SoakExecutor:
    runner = "llama-cpp"
    workload_kind = "soak"

    def execute(self, session: Session, run: Run, spec: RunSpec, ctx: RunContext) -> Run:
        """One child: the cold request, then the soak; every window it reported is stored, however it
        ended."""
        run.t_start_mono = time.monotonic()
        events: list[dict[str, Any]] = []

        def collect(event: dict[str, Any]) -> None:
            if event.get("event") == WINDOW_PHASE:
                events.append(event)
            if ctx.on_event is not None:
                ctx.on_event(event)

        # No pacing: the device is cooled before the soak (the sweep's before-run step), never inside it.
        soak_ctx = replace(ctx, on_event=collect, between_reps=None)
        try:
            child = InProcessExecutor().cold_start(session, run, spec, soak_ctx, cold_rep=0)
        except RunInterrupted:
            store_soak_windows(session, run, speeds_from_events(events))  # kept under this (stopped) run
            session.commit()
            raise
        store_soak_windows(session, run, speeds_from_events(events))
        run.status, run.reason = child.status, child.reason
        run.exit_code, run.signal_name = child.exit_code, child.signal_name
        run.log_tail = child.log_tail[-2000:] if child.status != "ok" and child.log_tail else None
        return end_run(session, run)

    def label(self, spec: RunSpec) -> str:
        soak = spec.workload.soak
        what = f" (soak {soak.duration_s:g} s in {soak.window_s:g} s windows)" if soak is not None else ""
        return config_label(spec) + what

    def describe(self, session: Session, run: Run) -> str:
        """The windows' count and median decode speed (the judgement's figures come with the verdict)."""
        windows = stored_windows(session, run)
        tg = median([w.tg_tps for w in windows if w.tg_tps is not None])
        return "  ".join(
            ["ok", f"{len(windows)} windows"] + ([f"tg {tg:.1f} t/s (median)"] if tg is not None else [])
        )

    def attach_energy(self, session: Session, run: Run, energy: EnergyOver) -> None:
        attach_soak_telemetry(session, run, energy)
