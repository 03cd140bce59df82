"""edgeprof's agent: CLI, plans, sweeps, reports."""

__version__ = "0.1.0"
