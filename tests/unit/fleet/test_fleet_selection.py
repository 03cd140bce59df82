"""Which sweeps a fleet command means (agent/fleet/): a device named by hostname, board model or uid prefix,
exactly one of --sweep / --since / --all, and a push that cannot hang on a dead central database.
Synthetic rows in SQLite (tests/support/dbbuild.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.dbbuild import add_device, add_sweep

from edgeprof.fleet import (
    FleetError,
    check_sweep_device,
    latest_sweep_of,
    list_sweeps,
    render_sweeps,
    select_sweeps,
    with_connect_timeout,
)
from edgeprof.storage.db import new_session, open_engine


@pytest.fixture
def session(tmp_path: Path) -> Any:
    engine = open_engine(tmp_path / "fleet.db")
    with new_session(engine) as s:
        nano = add_device(s, fingerprint="a", hostname="orin-nano-1", board_model="Jetson Orin Nano")
        agx = add_device(s, fingerprint="b", hostname="agx-orin-1", board_model="Jetson AGX Orin")
        add_sweep(s, nano, name="n1", started_at=datetime(2026, 1, 1))
        add_sweep(s, agx, name="a1", started_at=datetime(2026, 1, 2))
        add_sweep(s, nano, name="n2", started_at=datetime(2026, 1, 3))
        yield s
    engine.dispose()


def test_a_device_is_found_by_hostname_board_model_or_uid_prefix(session: Any) -> None:
    agx_uid = next(r["device_uid"] for r in list_sweeps(session) if r["device_hostname"] == "agx-orin-1")
    for name in ("ORIN-NANO-1", "jetson orin nano"):
        assert latest_sweep_of(session, name) == 3  # the device's newest sweep
        assert [r["name"] for r in list_sweeps(session, device=name)] == ["n2", "n1"]
    assert latest_sweep_of(session, agx_uid[:8]) == 2
    assert latest_sweep_of(session, "orin") is None  # a name, not a substring
    assert check_sweep_device(session, 1, "orin-nano-1") and not check_sweep_device(session, 2, "orin-nano-1")
    assert render_sweeps([]) == "no sweeps"


def test_exactly_one_of_sweep_since_or_all_chooses_the_sweeps(session: Any) -> None:
    both = ([1], datetime(2026, 1, 1), False)
    for sweep_ids, since, everything in ((None, None, False), ([1], None, True), both):
        with pytest.raises(FleetError, match="exactly one of"):
            select_sweeps(session, sweep_ids, since, everything)
    assert select_sweeps(session, [3, 1, 3], None, False) == [1, 3]
    with pytest.raises(FleetError, match="no sweep 7, 9 in this database"):
        select_sweeps(session, [1, 7, 9], None, False)
    assert select_sweeps(session, None, datetime(2026, 1, 2), False) == [2, 3]
    assert select_sweeps(session, None, None, True) == [1, 2, 3]


def test_a_push_target_gets_a_connect_timeout_unless_it_has_one() -> None:
    url = with_connect_timeout("postgresql://fleet:pw@central/fleet")
    assert url.startswith("postgresql+psycopg://fleet:pw@central/fleet") and "connect_timeout=10" in url
    own = with_connect_timeout("postgresql://fleet@central/fleet?connect_timeout=3")
    assert "connect_timeout=3" in own and "connect_timeout=10" not in own
    assert with_connect_timeout("/var/lib/edgeprof/central.db") == "sqlite:////var/lib/edgeprof/central.db"
