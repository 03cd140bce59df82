"""The metric families that are not a config's latest figures: what this edgeprof is
(``edgeprof_build_info``), and counters (``_total``) of every run by how it ended and of every serving
request that failed, from the database, so that a dashboard can rate() them and alert on a rise.

A counter here is a count of stored rows: it only grows while sweeps run (``db compact`` keeps runs and
requests), and Prometheus' rate() treats the rare fall (a sweep deleted by hand) as a reset.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from edgeprof import __version__
from edgeprof.fleet import sweep_scope
from edgeprof.runners.registry import kind_of
from edgeprof.storage.models import Device, Run, ServingRequest, Sweep


@dataclass
class Family:
    """One metric family before it is handed to prometheus_client: samples as (labels, value)."""

    name: str
    help: str
    labels: tuple[str, ...] = ()
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)
    kind: str = "gauge"  # or "counter" (its name without _total; the exposition adds it)

    def add(self, labels: Sequence[Any], value: float | int | bool | None) -> None:
        if value is None:  # not measured: absent from the scrape, never 0
            return
        self.samples.append((tuple("" if v is None else str(v) for v in labels), float(value)))


def endpoint_of(runner: str, effective_json: str | None) -> str:
    """The endpoint of a serving run ("" for the in-process runner): the one its runner always sends to
    (llama-server's own), else the one its plan named, as the run recorded it."""
    info = kind_of(runner)
    if info.in_process or info.endpoint:
        return info.endpoint
    try:
        effective = json.loads(effective_json) if effective_json else {}
    except ValueError:
        return ""
    server = effective.get("server") if isinstance(effective, dict) else None
    endpoint = server.get("endpoint") if isinstance(server, dict) else None
    return str(endpoint) if endpoint else ""


def build_info_family() -> Family:
    """1, labelled with the versions of this edgeprof, its llama-cpp-python and Python."""
    import importlib.metadata

    try:
        lcp = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        lcp = ""
    info = Family(
        "edgeprof_build_info",
        "The edgeprof that serves these metrics (1), its llama-cpp-python and Python versions.",
        ("version", "llama_cpp_python", "python"),
    )
    info.add((__version__, lcp, platform.python_version()), 1)
    return info


def count_families(session: Session, device: str | None = None) -> list[Family]:
    """``edgeprof_runs_total`` by device and status; ``edgeprof_serving_requests_failed_total`` by device,
    runner, endpoint and how the request failed."""
    runs = Family(
        "edgeprof_runs",
        "Runs stored, by device and how each ended (ok, error, crashed, timeout, ...).",
        ("device", "status"),
        kind="counter",
    )
    query = (
        select(Device.hostname, Run.status, func.count(Run.id))
        .select_from(Run)
        .join(Sweep, Run.sweep_id == Sweep.id)
        .join(Device, Sweep.device_id == Device.id)
        .where(*sweep_scope(device))
        .group_by(Device.hostname, Run.status)
        .order_by(Device.hostname, Run.status)
    )
    for hostname, status, n in session.execute(query):
        runs.add((hostname, status), n)
    failed = Family(
        "edgeprof_serving_requests_failed",
        "Serving requests that did not end ok (failed, timed out, rejected), by device, runner and endpoint.",
        ("device", "runner", "endpoint", "status"),
        kind="counter",
    )
    query_failed = (
        select(Device.hostname, Run.runner, Run.effective_json, ServingRequest.status, func.count())
        .select_from(ServingRequest)
        .join(Run, ServingRequest.run_id == Run.id)
        .join(Sweep, Run.sweep_id == Sweep.id)
        .join(Device, Sweep.device_id == Device.id)
        .where(ServingRequest.status != "ok", *sweep_scope(device))
        .group_by(Device.hostname, Run.runner, Run.effective_json, ServingRequest.status)
    )
    counts: dict[tuple[str, str, str, str], int] = {}
    for hostname, runner, effective_json, status, n in session.execute(query_failed):
        runner = runner or ""
        key = (hostname, runner, endpoint_of(runner, effective_json), status)
        counts[key] = counts.get(key, 0) + n
    for key, n in sorted(counts.items()):
        failed.add(key, n)
    return [runs, failed]
