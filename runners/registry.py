"""The runners edgeprof can measure with, by the name a plan's ``runner`` axis uses.

A runner says how a config is executed (``executor``: ``module:function`` called as
``f(session, run, spec, on_event=, env=, heartbeat=, between_reps=)``, storing its rows), what build it
measured, and which process the sampler follows for RSS/CPU (the executor announces it with a ``start`` event
carrying ``pid``). A new runner is a module in ``runners/`` plus one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_RUNNER = "llama-cpp"


@dataclass(frozen=True)
class RunnerInfo:
    name: str
    scenario: str  # what its numbers mean; a report never mixes two scenarios in one figure
    executor: str  # "module:function"
    serving: bool  # takes the [serving] table and the concurrency / request_rate axes


RUNNERS: dict[str, RunnerInfo] = {
    "llama-cpp": RunnerInfo(
        "llama-cpp", "in-process (llama-cpp-python)", "edgeprof.sweep.loop:execute_spec", False
    ),
    "llama-server": RunnerInfo(
        "llama-server",
        "HTTP API (llama-server, streamed)",
        "edgeprof.executors.serving:execute_serving_spec",
        True,
    ),
}


def get(name: str | None) -> RunnerInfo:
    return RUNNERS[name or DEFAULT_RUNNER]


def executor(name: str | None) -> Callable[..., Any]:
    module, _, func = get(name).executor.partition(":")
    return getattr(importlib.import_module(module), func)
