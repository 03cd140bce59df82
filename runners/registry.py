"""The runners edgeprof can measure with, by the name a plan's ``runner`` axis uses, and what kind each is.

What the child-process side, plan validation, expansion, the sweep and the report need to know of a runner:
its name, what its numbers mean (``scenario``), and its kind: in process, a server edgeprof starts, or a
server edgeprof did not start (at ``[serving] target``). Every "is this a serving runner" question anywhere
is asked here, never by comparing a runner's name. How a config is executed and stored is the agent's
business (``edgeprof.executors``, one class per way of running, keyed by these names); this module names
nothing of the agent, so the lowest layer never points up into the highest.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_RUNNER = "llama-cpp"

IN_PROCESS = "in-process"  # llama-cpp-python in a worker child: reps, cold start, interleaved blocks
OWN_SERVER = "own-server"  # a server edgeprof starts per config: one slot per client, its own cold start
FOREIGN_SERVER = "foreign-server"  # a server edgeprof did not start: its settings and logits are its own


@dataclass(frozen=True)
class RunnerInfo:
    name: str
    scenario: str  # what its numbers mean; a report never mixes two scenarios in one figure
    kind: str  # IN_PROCESS, OWN_SERVER or FOREIGN_SERVER
    endpoint: str = ""  # the endpoint a serving runner always sends to; "" where the plan picks it
    chat: bool = True  # takes a chat workload (messages)
    title: str = ""  # how a report names the server it measured
    token_source: str = ""  # where its output token counts come from, as a report says it

    @property
    def serving(self) -> bool:
        """Takes the [serving] table and the concurrency / request_rate axes; its configs are load levels."""
        return self.kind != IN_PROCESS

    @property
    def in_process(self) -> bool:
        return self.kind == IN_PROCESS

    @property
    def foreign(self) -> bool:
        """Measures a server at ``[serving] target``: one model, the server's own settings, no logits."""
        return self.kind == FOREIGN_SERVER

    def server_slots(self, concurrency: int | None) -> int:
        """The slots of a server edgeprof starts: one per client, so a closed loop at c never queues in the
        server (each slot with the plan's ctx); 1 otherwise. The memory prediction and the server's command
        line both count them."""
        return int(concurrency or 1) if self.kind == OWN_SERVER else 1


RUNNERS: dict[str, RunnerInfo] = {
    "llama-cpp": RunnerInfo("llama-cpp", "in-process (llama-cpp-python)", IN_PROCESS),
    "llama-server": RunnerInfo(
        "llama-server",
        "HTTP API (llama-server, streamed)",
        OWN_SERVER,
        endpoint="completion",  # llama-server's native endpoint: text or token prompts, no messages yet
        chat=False,
        title="llama-server",
        token_source="llama-server's own count",
    ),
    # a server edgeprof did not start, at [serving] target (runners/openai_api.py)
    "openai": RunnerInfo(
        "openai",
        "HTTP API (OpenAI-compatible server, streamed)",
        FOREIGN_SERVER,
        title="an OpenAI-compatible server",
        token_source="the response's usage where the server gives it, else one per streamed chunk",
    ),
}

# A stored run of a runner this installation does not know: not the in-process one, so a serving level
UNKNOWN = RunnerInfo("unknown", "unknown runner", FOREIGN_SERVER)


def get(name: str | None) -> RunnerInfo:
    """A plan's runner (validated against ``RUNNERS``); KeyError for a name it does not know."""
    return RUNNERS[name or DEFAULT_RUNNER]


def kind_of(name: str | None) -> RunnerInfo:
    """A stored or planned runner's entry; one this installation does not know counts as a foreign server."""
    return RUNNERS.get(name or DEFAULT_RUNNER, UNKNOWN)


def is_serving(name: str | None) -> bool:
    return kind_of(name).serving
