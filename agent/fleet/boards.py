"""What the fleet is doing: the boards with their state, the jobs with their boards, and each board's
health plan and health history (agent/fleet/health.py holds the rule).

A board's state, most telling first:

* ``offline since T``: no heartbeat for three heartbeat periods (or its agent stopped), T its last one;
* ``unhealthy (why)``: its last health check failed; it takes no job until one passes;
* ``running job N (sweep, config i of n, ETA)`` / ``checking health``;
* ``idle``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, text

from edgeprof.fleet.jobfiles import SubmittedPlan
from edgeprof.fleet.selector import matches, parse_selector

OFFLINE_AFTER_BEATS = 3.0
BOARDS_HEADERS = ("board", "state", "facts", "labels", "health")
JOBS_HEADERS = ("job", "kind", "plan", "select", "board", "state", "tries", "progress", "sweep", "reasons")


def _when(value: Any) -> str | None:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S") if value is not None else None


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA unknown"
    minutes = round(seconds / 60)
    return f"ETA {minutes // 60}h{minutes % 60:02d}" if minutes >= 60 else f"ETA {max(minutes, 1)} min"


def board_state(row: Any, job: Any | None) -> str:
    """One board's state line (see the module's list)."""
    if row.offline:
        return f"offline since {_when(row.heartbeat_at)}"
    if row.health == "failed":
        return f"unhealthy ({row.health_reason})"
    if row.activity == "health":
        return "checking health"
    if job is not None:
        at = job.configs_done + 1 if job.configs_done is not None else "?"
        where = f"config {at} of {job.configs_total or '?'}"
        if job.configs_total and job.configs_done is not None and job.configs_done >= job.configs_total:
            where = f"config {job.configs_total} of {job.configs_total}"
        return f"running job {job.id} ({job.plan_name}, {where}, {_eta(job.eta_s)})"
    return "idle"


def list_boards(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        boards = conn.execute(
            text(f"""
            SELECT *, (stopped_at IS NOT NULL
                       OR heartbeat_at < now() - make_interval(secs => heartbeat_s * {OFFLINE_AFTER_BEATS}))
                      AS offline
            FROM fleet_board ORDER BY name""")
        ).all()
        running = {
            r.board_id: r
            for r in conn.execute(text("SELECT * FROM fleet_job WHERE state = 'running' ORDER BY id"))
        }
    out = []
    for b in boards:
        job = running.get(b.id)
        out.append(
            {
                "board": b.name,
                "state": board_state(b, job),
                "job": job.id if job is not None else None,
                "facts": {k: v for k, v in b.facts_json.items() if k != "fingerprint" and v is not None},
                "labels": b.labels_json,
                "health": b.health,
                "health_reason": b.health_reason,
                "health_at": _when(b.health_at),
                "heartbeat_at": _when(b.heartbeat_at),
                "registered_at": _when(b.registered_at),
                "fingerprint": b.fingerprint,
            }
        )
    return out


def list_jobs(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("""
            SELECT j.*, t.name AS target, b.name AS board FROM fleet_job j
            LEFT JOIN fleet_board t ON t.id = j.target_board_id
            LEFT JOIN fleet_board b ON b.id = j.board_id
            ORDER BY j.id""")
        ).all()
    return [
        {
            "job": r.id,
            "kind": r.kind,
            "plan": r.plan_name,
            "plan_sha256": r.plan_sha256,
            "select": r.selector,
            "board": r.board or r.target,
            "state": r.state,
            "attempts": r.attempts,
            "max_attempts": r.max_attempts,
            "configs_done": r.configs_done,
            "configs_total": r.configs_total,
            "eta_s": r.eta_s,
            "sweep_uid": r.sweep_uid,
            "reasons": r.reasons_json,
            "submitted_at": _when(r.submitted_at),
            "finished_at": _when(r.finished_at),
        }
        for r in rows
    ]


def board_cells(rows: list[dict[str, Any]]) -> list[list[str]]:
    def facts(f: dict[str, Any]) -> str:
        keys = ("board", "jetpack", "ram_mb", "cores", "gpu", "llama_cpp")
        return " ".join(f"{k}={f[k]}" for k in keys if f.get(k) is not None) or "-"

    return [
        [
            r["board"],
            r["state"],
            facts(r["facts"]),
            " ".join(f"{k}={v}" for k, v in sorted(r["labels"].items())) or "-",
            r["health"],
        ]
        for r in rows
    ]


def job_cells(rows: list[dict[str, Any]]) -> list[list[str]]:
    def progress(r: dict[str, Any]) -> str:
        if r["configs_total"] is None:
            return "-"
        return f"{r['configs_done'] or 0}/{r['configs_total']}"

    return [
        [
            str(r["job"]),
            r["kind"],
            r["plan"],
            r["select"],
            r["board"] or "-",
            r["state"],
            f"{r['attempts']}/{r['max_attempts']}",
            progress(r),
            (r["sweep_uid"] or "-")[:8],
            r["reasons"][-1] if r["reasons"] else "-",
        ]
        for r in rows
    ]


# -- health plans and history -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HealthPlan:
    id: int
    plan_name: str
    plan_text: str
    plan_sha256: str
    models: list[dict[str, Any]]
    model_source: str | None
    every_s: float


def set_health_plan(
    engine: Engine, plan: SubmittedPlan, selector: str, every_s: float, model_source: str | None
) -> int:
    parse_selector(selector)
    with engine.begin() as conn:
        return int(
            conn.execute(
                text("""
            INSERT INTO fleet_health_plan (selector, plan_name, plan_sha256, plan_text, models_json,
                model_source, every_s)
            VALUES (:sel, :name, :sha, :text, CAST(:models AS jsonb), :src, :every) RETURNING id"""),
                {
                    "sel": selector,
                    "name": plan.name,
                    "sha": plan.sha256,
                    "text": plan.text,
                    "models": json.dumps(plan.models),
                    "src": model_source,
                    "every": every_s,
                },
            ).scalar_one()
        )


def health_plan_for(engine: Engine, board_id: int) -> HealthPlan | None:
    """The newest health plan whose selector matches the board (its device class), or None."""
    with engine.connect() as conn:
        board = conn.execute(
            text("SELECT facts_json, labels_json FROM fleet_board WHERE id = :b"), {"b": board_id}
        ).one()
        for r in conn.execute(text("SELECT * FROM fleet_health_plan ORDER BY id DESC")):
            if matches(parse_selector(r.selector), board.facts_json, board.labels_json):
                return HealthPlan(
                    r.id,
                    r.plan_name,
                    r.plan_text,
                    r.plan_sha256,
                    list(r.models_json),
                    r.model_source,
                    r.every_s,
                )
    return None


def health_history(engine: Engine, board_id: int, plan_sha256: str, window: int) -> list[float]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("""
            SELECT tg_tps FROM fleet_health WHERE board_id = :b AND plan_sha256 = :sha AND passed
              AND tg_tps IS NOT NULL ORDER BY at DESC LIMIT :n"""),
            {"b": board_id, "sha": plan_sha256, "n": window},
        ).all()
    return [float(r.tg_tps) for r in rows]


def record_health(
    engine: Engine,
    board_id: int,
    plan_sha256: str,
    passed: bool,
    tg_tps: float | None,
    reason: str,
    next_in_s: float | None,
    sweep_uid: str | None = None,
) -> None:
    """One health check's result, and the board's health (and when the next check is due)."""
    with engine.begin() as conn:
        conn.execute(
            text("""
            INSERT INTO fleet_health (board_id, plan_sha256, passed, tg_tps, reason, sweep_uid)
            VALUES (:b, :sha, :ok, :tg, :why, :sweep)"""),
            {
                "b": board_id,
                "sha": plan_sha256,
                "ok": passed,
                "tg": tg_tps,
                "why": reason,
                "sweep": sweep_uid,
            },
        )
        conn.execute(
            text("""
            UPDATE fleet_board SET health = :h, health_reason = :why, health_at = now(),
                health_due_at = CASE WHEN :next IS NULL THEN NULL
                                     ELSE now() + make_interval(secs => :next) END
            WHERE id = :b"""),
            {"h": "passed" if passed else "failed", "why": reason, "next": next_in_s, "b": board_id},
        )


def health_due(engine: Engine, board_id: int) -> bool:
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT health_due_at IS NOT NULL AND health_due_at <= now() "
                    "FROM fleet_board WHERE id = :b"
                ),
                {"b": board_id},
            ).scalar()
        )


def set_unchecked(engine: Engine, board_id: int) -> None:
    """No health plan covers this board: it takes jobs, and ``fleet boards`` says it is unchecked."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE fleet_board SET health = 'unchecked', health_reason = 'no health plan for "
                "this board', health_due_at = NULL WHERE id = :b"
            ),
            {"b": board_id},
        )
