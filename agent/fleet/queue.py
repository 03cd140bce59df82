"""The fleet's job queue in the central PostgreSQL: PostgreSQL's own primitives, no broker.

* a claim is one statement: ``UPDATE fleet_job ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1)``
  over the board's own ``--each`` jobs and the ``--any`` jobs matched to it; two boards never get one job,
  and a board never waits on another's claim;
* a claim is a lease: ``lease_until`` (the server's ``now()`` + the lease) is pushed on by the board's
  heartbeat; a claim carries a random token that every later write of that attempt must show, so a board
  that lost its lease (it stalled, the job was re-queued and claimed elsewhere) can no longer finish it;
* before each claim the expired leases are reaped (``... FOR UPDATE SKIP LOCKED``): an ``--any`` job goes
  back to the queue for any matching board, an ``--each`` job waits for its own board (which resumes the
  sweep), each with a reason; a job that has used its attempts is ``failed`` with all of them;
* a finished job is pushed and marked ``done`` under its row lock: a reaper waits for (or skips) the row,
  then finds it done, so a result lands once.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text

from edgeprof.fleet.jobfiles import SubmittedPlan
from edgeprof.fleet.selector import matches, parse_selector

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_LEASE_S = 60.0
POSTGRES_ONLY = "the fleet queue lives in a central PostgreSQL database: give a postgresql:// URL"
CANCELLED = "'cancelled by fleet cancel'"


class FleetQueueError(RuntimeError):
    """A fleet command that cannot be done (no PostgreSQL, no such job, no matching board); one line."""


@dataclass
class FleetConfig:
    """How an agent joins the fleet (``edgeprof agent --fleet URL ...``)."""

    url: str
    labels: dict[str, str] = field(default_factory=dict)
    lease_s: float = DEFAULT_LEASE_S  # heartbeats every third of it
    models_dir: Path | None = None  # where models are looked for and fetched to (default: beside the DB)
    device_root: Path = Path("/")  # where device facts are read (a fake tree in tests)


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    plan_name: str
    plan_text: str
    plan_sha256: str
    models: list[dict[str, Any]]
    model_source: str | None
    attempts: int
    max_attempts: int
    token: str
    sweep_uid: str | None


def require_postgres(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        raise FleetQueueError(POSTGRES_ONLY)


def _board_matches(conn: Connection, selector: str) -> list[int]:
    terms = parse_selector(selector)
    rows = conn.execute(text("SELECT id, facts_json, labels_json FROM fleet_board ORDER BY id"))
    return [i for i, facts, labels in rows if matches(terms, facts, labels)]


def register_board(
    engine: Engine, name: str, facts: Mapping[str, Any], labels: Mapping[str, str], heartbeat_s: float
) -> int:
    """This board's row, facts and labels refreshed; its matches to every ``--any`` job not ended (queued,
    or running elsewhere: it may come back) computed afresh. Returns its id."""
    with engine.begin() as conn:
        board_id = int(
            conn.execute(
                text("""
            INSERT INTO fleet_board (name, fingerprint, facts_json, labels_json, heartbeat_s)
            VALUES (:n, :fp, CAST(:f AS jsonb), CAST(:l AS jsonb), :hb)
            ON CONFLICT (name) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
                facts_json = EXCLUDED.facts_json, labels_json = EXCLUDED.labels_json,
                heartbeat_s = EXCLUDED.heartbeat_s, started_at = now(), heartbeat_at = now(),
                stopped_at = NULL, activity = 'idle'
            RETURNING id"""),
                {
                    "n": name,
                    "fp": facts.get("fingerprint") or "",
                    "f": json.dumps(dict(facts)),
                    "l": json.dumps(dict(labels)),
                    "hb": heartbeat_s,
                },
            ).scalar_one()
        )
        conn.execute(text("DELETE FROM fleet_match WHERE board_id = :b"), {"b": board_id})
        queued = conn.execute(
            text("SELECT id, selector FROM fleet_job WHERE kind = 'any' AND state IN ('queued', 'running')")
        ).all()
        by_selector: dict[str, bool] = {}
        mine = []
        for job_id, selector in queued:
            if selector not in by_selector:
                by_selector[selector] = matches(parse_selector(selector), facts, labels)
            if by_selector[selector]:
                mine.append({"b": board_id, "j": job_id})
        if mine:
            conn.execute(text("INSERT INTO fleet_match (board_id, job_id) VALUES (:b, :j)"), mine)
    return board_id


def _add_reason(sql_reason: str) -> str:
    return f"reasons_json = reasons_json || jsonb_build_array({sql_reason})"


def release_own(engine: Engine, board_id: int, why: str) -> int:
    """At an agent's start: what this board was running died with its last agent; back to the queue (an
    ``--each`` job for this board, which resumes it at once). Returns how many."""
    with engine.begin() as conn:
        return conn.execute(
            text(f"""
            UPDATE fleet_job SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                finished_at = CASE WHEN attempts >= max_attempts THEN now() END,
                board_id = CASE WHEN kind = 'any' THEN NULL ELSE board_id END,
                claim_token = NULL, lease_until = NULL,
                {
                _add_reason(
                    "format('attempt %s on %s: %s', attempts, (SELECT name FROM fleet_board "
                    "WHERE id = :b), CAST(:why AS text))"
                )
            }
            WHERE board_id = :b AND state = 'running'"""),
            {"b": board_id, "why": why},
        ).rowcount


def reap_expired(conn: Connection) -> int:
    """Jobs whose board stopped heartbeating past the lease: re-queued, or failed after their attempts."""
    return conn.execute(
        text(f"""
        UPDATE fleet_job j SET
            state = CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'queued' END,
            finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
            board_id = CASE WHEN j.kind = 'any' THEN NULL ELSE j.board_id END,
            claim_token = NULL, lease_until = NULL,
            {
            _add_reason(
                "format('attempt %s on %s: no heartbeat since %s (lease expired)', j.attempts, "
                "(SELECT name FROM fleet_board WHERE id = j.board_id), "
                "to_char(j.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'))"
            )
        }
        WHERE j.id IN (SELECT id FROM fleet_job WHERE state = 'running' AND lease_until < now()
                       FOR UPDATE SKIP LOCKED)""")
    ).rowcount


_CLAIM = """
    UPDATE fleet_job j SET state = 'running', board_id = :b, attempts = j.attempts + 1, claim_token = :tok,
        claimed_at = now(), heartbeat_at = now(), lease_until = now() + make_interval(secs => :lease),
        configs_done = NULL, configs_total = NULL, eta_s = NULL
    WHERE j.state = 'queued' AND j.id = (
        SELECT q.id FROM fleet_job q
        WHERE q.state = 'queued'
          AND (q.target_board_id = :b
               OR (q.kind = 'any' AND EXISTS (SELECT 1 FROM fleet_match m WHERE m.board_id = :b
                                                AND m.job_id = q.id)))
        ORDER BY q.id
        FOR UPDATE SKIP LOCKED LIMIT 1)
      AND EXISTS (SELECT 1 FROM fleet_board b WHERE b.id = :b AND b.health IN ('passed', 'unchecked'))
    RETURNING j.id, j.kind, j.plan_name, j.plan_text, j.plan_sha256, j.models_json, j.model_source,
        j.attempts, j.max_attempts, j.sweep_uid
"""


def claim(engine: Engine, board_id: int, lease_s: float) -> Job | None:
    """The next job for this board (its own ``--each`` jobs and matched ``--any`` ones, oldest first), under
    a lease of ``lease_s``; None when there is none or the board is unhealthy."""
    token = secrets.token_hex(16)
    with engine.begin() as conn:
        reap_expired(conn)
        row = conn.execute(text(_CLAIM), {"b": board_id, "tok": token, "lease": lease_s}).first()
        if row is not None:
            conn.execute(
                text("UPDATE fleet_board SET activity = 'job', heartbeat_at = now() WHERE id = :b"),
                {"b": board_id},
            )
    if row is None:
        return None
    return Job(
        row.id,
        row.kind,
        row.plan_name,
        row.plan_text,
        row.plan_sha256,
        list(row.models_json),
        row.model_source,
        row.attempts,
        row.max_attempts,
        token,
        row.sweep_uid,
    )


def heartbeat(
    engine: Engine, board_id: int, lease_s: float, job: Job | None, progress: Mapping[str, Any] | None = None
) -> bool:
    """The board's heartbeat, and its job's lease pushed on (with its progress); False when the job is no
    longer this attempt's (cancelled, or re-queued after a lost lease): the board stops it."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE fleet_board SET heartbeat_at = now() WHERE id = :b"), {"b": board_id})
        if job is None:
            return True
        p = dict(progress or {})
        held = conn.execute(
            text("""
            UPDATE fleet_job SET heartbeat_at = now(), lease_until = now() + make_interval(secs => :lease),
                configs_done = COALESCE(:done, configs_done), configs_total = COALESCE(:total, configs_total),
                eta_s = :eta, sweep_uid = COALESCE(:sweep, sweep_uid)
            WHERE id = :j AND claim_token = :tok AND state = 'running'"""),
            {
                "lease": lease_s,
                "j": job.id,
                "tok": job.token,
                "done": p.get("done"),
                "total": p.get("total"),
                "eta": p.get("eta_s"),
                "sweep": p.get("sweep_uid"),
            },
        ).rowcount
    return held == 1


def finish(engine: Engine, job: Job, push: Callable[[Connection], str | None]) -> bool:
    """Push the job's result and mark it done, under the job's row lock and only while this attempt holds
    it: False (nothing pushed) when the lease was lost meanwhile. ``push`` gets the locking connection (a
    result written through it commits with the job's ``done``) and returns the sweep's uid."""
    with engine.begin() as conn:
        held = conn.execute(
            text(
                "SELECT id FROM fleet_job WHERE id = :j AND claim_token = :tok AND state = 'running' "
                "FOR UPDATE"
            ),
            {"j": job.id, "tok": job.token},
        ).first()
        if held is None:
            return False
        sweep_uid = push(conn)
        conn.execute(
            text("""
            UPDATE fleet_job SET state = 'done', finished_at = now(), claim_token = NULL, lease_until = NULL,
                sweep_uid = COALESCE(:sweep, sweep_uid), eta_s = NULL, configs_done = configs_total
            WHERE id = :j"""),
            {"j": job.id, "sweep": sweep_uid},
        )
    return True


def fail_attempt(engine: Engine, job: Job, board_name: str, reason: str, final: bool = False) -> str:
    """This attempt failed: the job back in the queue, or ``failed`` once its attempts are spent (or at
    once, ``final``: a retry could not help). Returns the job's new state ('' when no longer held)."""
    with engine.begin() as conn:
        row = conn.execute(
            text(f"""
            UPDATE fleet_job SET
                state = CASE WHEN :final OR attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                finished_at = CASE WHEN :final OR attempts >= max_attempts THEN now() END,
                board_id = CASE WHEN kind = 'any' THEN NULL ELSE board_id END,
                claim_token = NULL, lease_until = NULL, eta_s = NULL,
                {
                _add_reason(
                    "format('attempt %s on %s: %s', attempts, CAST(:board AS text), CAST(:why AS text))"
                )
            }
            WHERE id = :j AND claim_token = :tok AND state = 'running'
            RETURNING state"""),
            {"final": final, "j": job.id, "tok": job.token, "board": board_name, "why": reason},
        ).first()
    return row.state if row is not None else ""


def set_activity(engine: Engine, board_id: int, activity: str, stopped: bool = False) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE fleet_board SET activity = :a, heartbeat_at = now(), "
                "stopped_at = CASE WHEN :s THEN now() END WHERE id = :b"
            ),
            {"a": activity, "s": stopped, "b": board_id},
        )


def submit(
    engine: Engine,
    plan: SubmittedPlan,
    selector: str,
    kind: str,
    model_source: str | None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> tuple[list[int], list[int]]:
    """Queue ``plan``: one job per matching board (``each``) or one job for the first free match
    (``any``). Returns (job ids, matching board ids); an ``each`` with no matching board queues nothing."""
    submission = str(uuid.uuid4())
    values = {
        "kind": kind,
        "sub": submission,
        "name": plan.name,
        "sha": plan.sha256,
        "text": plan.text,
        "models": json.dumps(plan.models),
        "src": model_source,
        "sel": selector,
        "max": max_attempts,
    }
    insert = text("""
        INSERT INTO fleet_job (kind, submission, plan_name, plan_sha256, plan_text, models_json,
            model_source, selector, target_board_id, max_attempts)
        VALUES (:kind, :sub, :name, :sha, :text, CAST(:models AS jsonb), :src, :sel, :target, :max)
        RETURNING id""")
    with engine.begin() as conn:
        boards = _board_matches(conn, selector)
        if kind == "each":
            ids = [int(conn.execute(insert, {**values, "target": b}).scalar_one()) for b in boards]
            return ids, boards
        job_id = int(conn.execute(insert, {**values, "target": None}).scalar_one())
        if boards:
            conn.execute(
                text("INSERT INTO fleet_match (board_id, job_id) VALUES (:b, :j)"),
                [{"b": b, "j": job_id} for b in boards],
            )
    return [job_id], boards


def cancel(engine: Engine, job_id: int) -> str:
    """Cancel a queued or running job (a running one stops after its current config); returns the state it
    was in. Raises FleetQueueError for no such job or one already ended."""
    with engine.begin() as conn:
        row = conn.execute(
            text("SELECT state FROM fleet_job WHERE id = :j FOR UPDATE"), {"j": job_id}
        ).first()
        if row is None:
            raise FleetQueueError(f"no fleet job {job_id}")
        if row.state not in ("queued", "running"):
            raise FleetQueueError(f"fleet job {job_id} already ended ({row.state})")
        conn.execute(
            text(
                f"UPDATE fleet_job SET state = 'cancelled', finished_at = now(), claim_token = NULL, "
                f"lease_until = NULL, {_add_reason(CANCELLED)} WHERE id = :j"
            ),
            {"j": job_id},
        )
    return str(row.state)
