"""``edgeprof status``: what the agent is doing, read from the database alone (safe while it writes)."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.fleet import sweep_scope
from edgeprof.run_states import FINISHED_STATUSES, utcnow
from edgeprof.safetext import safe_text
from edgeprof.storage.models import AgentState, CollectorStatus, Run, Sweep
from edgeprof.sweep import owner_gone

# An agent beats every few seconds even mid-run; three times that without news means it is gone.
STALE_AFTER_S = 30.0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gather_status(session: Session, device: str | None = None) -> dict[str, Any]:
    """The agent's heartbeat, the current (else latest) sweep, its collectors and the last failed run.
    ``device``: only that device's sweeps (a central DB holds many devices' sweeps)."""
    sweep = _current_sweep(session, sweep_scope(device))
    return {
        "agent": _agent_info(session, device),
        "sweep": _sweep_info(session, sweep) if sweep is not None else None,
        "last_error": _last_error(session),
        "collectors": _collectors(session, sweep.id) if sweep is not None else [],
    }


def _agent_info(session: Session, device: str | None) -> dict[str, Any] | None:
    state = session.scalars(select(AgentState).order_by(AgentState.id.desc())).first()
    if state is None or (device is not None and state.hostname.lower() != device.lower()):
        return None  # no agent ever ran here, or the heartbeat in this DB is another machine's agent
    age = (utcnow() - state.heartbeat_at).total_seconds()
    alive = state.stopped_at is None and age < STALE_AFTER_S
    # on this machine a process that is gone without stopping died (kill -9, a crash): said so, at once
    died = state.stopped_at is None and state.hostname == socket.gethostname() and not _pid_alive(state.pid)
    alive = alive and not died
    shown = state.state if alive else "died" if died else "not responding"
    if state.stopped_at is not None:  # it exited: never its last state while it ran ("idle (pid ...)")
        shown = state.state if state.state in ("stopped", "died") else "stopped"
    return {
        "pid": state.pid,
        "state": shown,
        "message": state.message,
        "alive": alive,
        "heartbeat_age_s": round(age, 1),
        "started_at": state.started_at.isoformat(),
        "plan": state.plan_path,
    }


def _current_sweep(session: Session, scope: list[Any]) -> Sweep | None:
    """The newest running sweep, else the newest sweep."""
    running = select(Sweep).where(Sweep.status == "running", *scope).order_by(Sweep.id.desc())
    latest = select(Sweep).where(*scope).order_by(Sweep.id.desc())
    return session.scalars(running).first() or session.scalars(latest).first()


def _sweep_info(session: Session, sweep: Sweep) -> dict[str, Any]:
    runs = list(session.scalars(select(Run).where(Run.sweep_id == sweep.id).order_by(Run.id)))
    finished = {r.spec_id for r in runs if r.status in FINISHED_STATUSES}
    # A sweep whose lease owner is gone is shown as what it is (read-only: the next run/agent writes it).
    gone = owner_gone(session, sweep.id) if sweep.status == "running" else None
    shown_status = "interrupted" if gone else sweep.status
    current = None if gone else next((r for r in reversed(runs) if r.status == "running"), None)
    durations = [
        (r.ended_at - r.started_at).total_seconds()
        for r in runs
        if r.status in FINISHED_STATUSES and r.ended_at is not None
    ]
    remaining = max(0, sweep.n_specs - len(finished))
    eta_s = sum(durations) / len(durations) * remaining if durations and shown_status == "running" else None
    return {
        "id": sweep.id,
        "name": sweep.name,
        "status": shown_status,
        "owner_gone": gone,
        "configs_total": sweep.n_specs,
        "configs_done": len(finished),
        "config_index": len(finished) + (1 if current else 0),
        "eta_s": round(eta_s, 1) if eta_s is not None else None,
        "current": _run_info(current) if current else None,
        "counts": {s: sum(1 for r in runs if r.status == s) for s in sorted({r.status for r in runs})},
    } | _log_info(session, sweep)


def _log_info(session: Session, sweep: Sweep) -> dict[str, Any]:
    """An imported log's verdict per session, as stored at import: status reads one row, never the log's
    samples (a stale or missing verdict is said so, with the command that judges it)."""
    from edgeprof.verdicts.log_store import is_imported, stored_log_verdict

    if not is_imported(sweep):
        return {}
    stored = stored_log_verdict(session, sweep.id)
    if stored is None:
        return {"log_verdict": {"stored": False, "sessions": []}}
    sessions = [
        {"session": s.get("session"), "verdict": s.get("verdict"), "reason": s.get("reason")}
        for s in stored.get("sessions", [])
    ]
    return {
        "log_verdict": {
            "stored": True,
            "stale": bool(stored.get("stale")),
            "rule_version": stored.get("rule_version"),
            "sessions": sessions,
        }
    }


def _run_info(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "model": run.model_label,
        "ctx": run.n_ctx,
        "ngl": run.n_gpu_layers,
        "workload": run.workload_name,
        "started_at": run.started_at.isoformat(),
    }


def _collectors(session: Session, sweep_id: int) -> list[dict[str, Any]]:
    return [
        {"name": c.name, "ok": c.ok and not c.disabled_reason, "reason": c.disabled_reason or c.reason}
        for c in session.scalars(select(CollectorStatus).where(CollectorStatus.sweep_id == sweep_id))
    ]


def _last_error(session: Session) -> dict[str, Any] | None:
    failed = session.scalars(
        select(Run).where(Run.status.notin_(("ok", "running"))).order_by(Run.id.desc())
    ).first()
    if failed is None:
        return None
    return {
        "run_id": failed.id,
        "sweep_id": failed.sweep_id,
        "model": failed.model_label,
        "status": failed.status,
        "reason": failed.reason,
        "at": (failed.ended_at or failed.started_at).isoformat(),
    }


def render_status(status: dict[str, Any]) -> str:
    lines: list[str] = []
    agent = status["agent"]
    if agent is None:
        lines.append("agent: never ran against this database")
    else:
        lines.append(
            f"agent: {agent['state']} (pid {agent['pid']}, "
            f"last heartbeat {agent['heartbeat_age_s']:.0f} s ago)"
            + (f": {agent['message']}" if agent["message"] else "")
        )
    sweep = status["sweep"]
    if sweep is None:
        lines.append("sweep: none yet")
    else:
        eta = f", ETA {sweep['eta_s'] / 60:.1f} min" if sweep["eta_s"] is not None else ""
        lines.append(
            f"sweep {sweep['id']} {sweep['name']!r}: {sweep['status']}, config {sweep['config_index']} of "
            f"{sweep['configs_total']} ({sweep['configs_done']} done{eta})"
        )
        if sweep.get("owner_gone"):
            lines.append(f"  {sweep['owner_gone']}: the next `edgeprof run` of its plan or agent resumes it")
        if sweep["current"]:
            c = sweep["current"]
            lines.append(
                f"  now: run {c['run_id']} {c['model']} ctx={c['ctx']} ngl={c['ngl']} wl={c['workload']}"
            )
        if sweep["counts"]:
            lines.append("  runs: " + ", ".join(f"{n} {s}" for s, n in sweep["counts"].items()))
        lines.extend(_log_lines(sweep))
    if status["last_error"]:
        e = status["last_error"]
        lines.append(f"last error: run {e['run_id']} {e['model']} {e['status']}: {e['reason']}")
    for c in status["collectors"]:
        lines.append(f"  collector {c['name']}: {'ok' if c['ok'] else 'unavailable'} ({c['reason']})")
    # names, labels and reasons from plans and children: each line one visible line, no control sequence
    return "\n".join(safe_text(line) for line in lines)


def _log_lines(sweep: dict[str, Any]) -> list[str]:
    log = sweep.get("log_verdict")
    if log is None:
        return []
    if not log["stored"] or log["stale"]:
        why = "by an older judgement" if log["stored"] else "not judged yet"
        out = [f"  log verdict: {why}: `edgeprof analyse --sweep {sweep['id']}` judges and stores it"]
        then = [f"  log session {s['session']} (as judged then): {s['verdict']}" for s in log["sessions"]]
        return out + then
    return [f"  log session {s['session']}: {s['verdict']}: {s['reason']}" for s in log["sessions"]]


def status_json(status: dict[str, Any]) -> str:
    return json.dumps(status, indent=2)
