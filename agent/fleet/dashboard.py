"""The Grafana dashboard shipped with edgeprof (package data): panels over the fleet DB's views and series."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

DASHBOARD = "data/grafana/edgeprof.json"


def grafana_dashboard() -> Path:
    """Where the dashboard JSON is installed (import it in Grafana: Dashboards > New > Import)."""
    return Path(str(resources.files("edgeprof").joinpath(DASHBOARD)))
