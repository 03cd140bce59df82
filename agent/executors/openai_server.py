"""The openai runner's agent side: a server edgeprof did not start, measured at ``[serving] target``
(``runners.openai_api``), stored as a serving level like llama-server's (same request rows, same figures)
with what could not be measured left NULL: no KV budget (the server's memory is its own), no process, no
load or cold-start time, no build row. What the server says it is (``/v1/models``, ``/props``) is the
level's ``props_json``; without a model file, the run carries the server's model and its URL (credentials
dropped) as its label and path."""

from __future__ import annotations

import json
import time
from pathlib import PurePosixPath
from typing import Any

from sqlalchemy.orm import Session

from edgeprof.executors.base import RunContext, end_run
from edgeprof.executors.serving import (
    ServingExecutor,
    level_stats,
    note_prompt_nonce,
    put_stats,
    request_row,
)
from edgeprof.executors.store import add_phases
from edgeprof.plan import RunSpec, is_server_entry
from edgeprof.runners.llama_server import ServingResult
from edgeprof.runners.openai_api import run_openai
from edgeprof.storage.models import Run, ServingLevel


def server_label(identity: dict[str, Any]) -> str | None:
    """'<model> @ host:port': the model the server reported (a file's name where it reports a path), at
    its URL; None when it reported no model."""
    model = identity.get("model")
    if not isinstance(model, str) or not model:
        return None
    name = PurePosixPath(model).name if model.endswith(".gguf") else model
    where = str(identity.get("target") or "").split("://", 1)[-1]
    return f"{name} @ {where}"[:255]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _max_metric(samples: list[dict[str, float]], name: str) -> float | None:
    values = [s[name] for s in samples if name in s]
    return max(values) if values else None


def foreign_level_row(run: Run, spec: RunSpec, res: ServingResult) -> ServingLevel:
    """The level with the server's identity; NULL for what a server edgeprof did not start cannot give."""
    identity = res.props or {}
    return ServingLevel(
        run_id=run.id,
        concurrency=int(spec.params.concurrency or 1),
        request_rate=spec.params.request_rate,
        n_slots=_int(identity.get("total_slots")),
        slot_n_ctx=_int(identity.get("slot_n_ctx")),
        max_deferred=_max_metric(res.metrics_samples, "llamacpp:requests_deferred"),
        metrics_before_json=json.dumps(res.metrics_before) if res.metrics_before is not None else None,
        metrics_after_json=json.dumps(res.metrics_after) if res.metrics_after is not None else None,
        props_json=json.dumps(identity, sort_keys=True, default=str) if identity else None,
        t_start_mono=res.level_t_start,
        t_end_mono=res.level_t_end,
    )


def store_foreign(session: Session, run: Run, spec: RunSpec, res: ServingResult) -> None:
    """Every number of one config against a foreign server, with its identity."""
    add_phases(session, run, res.phases)
    for r in res.records:
        session.add(request_row(run, r))
    level = foreign_level_row(run, spec, res)
    stats = level_stats(spec, res)
    if stats is not None:
        put_stats(level, stats)
    session.add(level)
    identity = res.props or {}
    if is_server_entry(spec.model.path):  # no model file named it (its path is the URL): the server's word
        run.model_label = server_label(identity) or run.model_label
    run.effective_json = json.dumps({"server": identity}, sort_keys=True, default=str)


class OpenAIExecutor(ServingExecutor):
    """A server at ``[serving] target``; describe and energy as for llama-server (the same level rows)."""

    runner = "openai"

    def execute(self, session: Session, run: Run, spec: RunSpec, ctx: RunContext) -> Run:
        """One level against the server; never raises for a failed or unreachable one (a stop by the user is
        stored ``interrupted``, then raised)."""
        run.t_start_mono = time.monotonic()
        job = self.job_for(spec, None)
        session.commit()  # no write transaction open while the level runs (the sampler's, the lease's)
        res = run_openai(job, spec.timeout_s, on_event=ctx.on_event, heartbeat=ctx.heartbeat, env=ctx.env)
        store_foreign(session, run, spec, res)
        note_prompt_nonce(run, job)
        self.store_more(session, run, spec, res)
        run.status, run.reason = res.status, res.reason
        end_run(session, run)
        if res.status == "interrupted":
            raise KeyboardInterrupt
        return run

    def label(self, spec: RunSpec) -> str:
        p, serving = spec.params, spec.serving
        rate = f" rate={p.request_rate:g}/s" if p.request_rate is not None else ""
        endpoint = serving.endpoint if serving is not None else None
        return f"{spec.model.label} openai {endpoint} c={p.concurrency}{rate} wl={spec.workload.name}"
