"""Metric roles for pure tests that hand series in by name: what the built-in collectors declare for those
names, the same roles a live sweep stores with its collector status."""

from __future__ import annotations

from collections.abc import Iterable

from edgeprof.collectors import MetricRole, roles_for


def declared_roles(metrics: Iterable[str]) -> dict[str, MetricRole]:
    """metric -> its role, for every name a built-in collector claims (the others have none)."""
    return roles_for(metrics)


def role(metric: str) -> MetricRole | None:
    """The role a built-in collector declares for ``metric``; None where none claims it."""
    return declared_roles([metric]).get(metric)
