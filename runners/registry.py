"""The runners edgeprof can measure with, by the name a plan's ``runner`` axis uses.

What the child-process side and the plan validation need to know of a runner: its name, what its numbers
mean (``scenario``) and whether it takes the serving axes. How a config is executed and stored is the agent's
business (``edgeprof.executors``, one class per way of running, keyed by these names); this module names
nothing of the agent, so the lowest layer never points up into the highest.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_RUNNER = "llama-cpp"


@dataclass(frozen=True)
class RunnerInfo:
    name: str
    scenario: str  # what its numbers mean; a report never mixes two scenarios in one figure
    serving: bool  # takes the [serving] table and the concurrency / request_rate axes


RUNNERS: dict[str, RunnerInfo] = {
    "llama-cpp": RunnerInfo("llama-cpp", "in-process (llama-cpp-python)", serving=False),
    "llama-server": RunnerInfo("llama-server", "HTTP API (llama-server, streamed)", serving=True),
    # a server edgeprof did not start, at [serving] target (runners/openai_api.py)
    "openai": RunnerInfo("openai", "HTTP API (OpenAI-compatible server, streamed)", serving=True),
}


def get(name: str | None) -> RunnerInfo:
    return RUNNERS[name or DEFAULT_RUNNER]
