"""The systemd units in ``systemd/`` and ``scripts/install-service.sh``, read from the files themselves: the
settings the agent relies on (notify + watchdog, restart policy, stop timeout, user and groups, hardening,
and what must stay unset). Running them (``systemd-analyze verify``, the ExecCondition= lines, the install
script): tests/integration/test_systemd_install.py.
"""

from __future__ import annotations

import itertools

import pytest
from support.systemd_units import (
    AGENT,
    EXE,
    SCRIPT,
    SERVICES,
    STATE,
    SWEEP,
    TIMER,
    UNIT_DIR,
    UNITS,
    Unit,
    exec_argv,
    one,
    parse_unit,
    timespan_s,
)


@pytest.fixture(scope="module")
def units() -> dict[str, Unit]:
    return {name: parse_unit(UNIT_DIR / name) for name in UNITS}


# -- settings ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SERVICES)
def test_service_identity_and_hardening(units: dict[str, Unit], name: str) -> None:
    unit = units[name]
    svc = unit["Service"]
    assert one(unit, "Service", "User") == "edgeprof"
    assert one(unit, "Service", "Group") == "edgeprof"
    assert {"jtop", "video"} <= set(one(unit, "Service", "SupplementaryGroups").split())
    assert one(unit, "Service", "StateDirectory") == "edgeprof"
    assert one(unit, "Service", "NotifyAccess") == "main"
    assert one(unit, "Service", "NoNewPrivileges") == "yes"
    assert one(unit, "Service", "ProtectSystem") == "strict"
    assert STATE in " ".join(svc["ReadWritePaths"]).split()
    assert one(unit, "Service", "PrivateTmp") == "yes"
    assert one(unit, "Service", "ProtectHome") == "read-only"
    assert one(unit, "Service", "ProtectKernelTunables") == "yes"
    assert one(unit, "Service", "ProtectControlGroups") == "yes"
    assert one(unit, "Service", "RestrictSUIDSGID") == "yes"
    assert one(unit, "Service", "LockPersonality") == "yes"
    assert {"PYTHONUNBUFFERED=1", f"EDGEPROF_DB={STATE}/edgeprof.db"} <= set(svc["Environment"])
    # CUDA/llama.cpp JIT needs W+X memory; the GPU device nodes must stay visible; measurements run at
    # normal priority.
    forbidden = {
        "MemoryDenyWriteExecute",
        "PrivateDevices",
        "DevicePolicy",
        "DeviceAllow",
        "ProtectClock",
        "Nice",
        "CPUSchedulingPolicy",
        "IOSchedulingClass",
        "CPUQuota",
        "MemoryMax",
    }
    assert forbidden.isdisjoint(svc), f"must not be set: {sorted(forbidden & set(svc))}"
    assert one(unit, "Service", "Restart") == "on-failure"
    assert one(unit, "Service", "KillMode") == "mixed"
    assert timespan_s(one(unit, "Service", "TimeoutStopSec")) >= 120
    burst = int(one(unit, "Unit", "StartLimitBurst"))
    interval = timespan_s(one(unit, "Unit", "StartLimitIntervalSec"))
    # the limit can only trip if `burst` restarts fit in the interval
    assert interval > burst * timespan_s(one(unit, "Service", "RestartSec"))
    assert "StartLimitBurst" not in svc and "StartLimitIntervalSec" not in svc


@pytest.mark.parametrize("name", SERVICES)
def test_watchdog_is_set_and_catches_a_hang_within_minutes(units: dict[str, Unit], name: str) -> None:
    """The agent beats at least every second (runs, idle, cooldown and idle baseline slept in 1 s slices,
    hashing per chunk; see tests/integration/test_agent.py and agent/sweep/telemetry.py), so the watchdog
    only has to outlast one slow step: 120 s leaves room for a slow SD card and still restarts a hung agent
    the same night."""
    watchdog = timespan_s(one(units[name], "Service", "WatchdogSec"))
    assert 60 <= watchdog <= 300


def test_cooldown_and_idle_beat_every_second() -> None:
    from edgeprof.sweep import Telemetry

    beats: list[float] = []
    clock = [0.0]

    def fake_sleep(s: float) -> None:
        assert s <= 1.0
        clock[0] += s

    tele = Telemetry.__new__(Telemetry)  # only the sleep helper is under test here
    tele._sleep, tele.clock, tele.heartbeat = fake_sleep, (lambda: clock[0]), (lambda: beats.append(clock[0]))
    tele.sleep(300.0)
    gaps = [b - a for a, b in itertools.pairwise(beats)]
    assert clock[0] == pytest.approx(300.0) and max(gaps) <= 1.0


def test_agent_service(units: dict[str, Unit]) -> None:
    unit = units[AGENT]
    assert one(unit, "Service", "Type") == "notify"
    argv = exec_argv(one(unit, "Service", "ExecStart"))
    assert argv == [EXE, "agent", "--queue", f"{STATE}/queue", "--db", f"{STATE}/edgeprof.db"]
    assert exec_argv(one(unit, "Service", "ExecReload")) == ["/bin/kill", "-HUP", "$MAINPID"]
    assert timespan_s(one(unit, "Service", "RestartSec")) == 30
    assert timespan_s(one(unit, "Service", "TimeoutStopSec")) == 180
    assert one(unit, "Install", "WantedBy") == "multi-user.target"


def test_sweep_service_and_timer(units: dict[str, Unit]) -> None:
    svc, timer = units[SWEEP], units[TIMER]
    assert one(svc, "Service", "Type") == "oneshot"
    argv = exec_argv(one(svc, "Service", "ExecStart"))
    assert argv[:2] == [EXE, "agent"]
    assert "--once" in argv
    opts = {a: b for a, b in itertools.pairwise(argv) if a.startswith("--")}
    assert opts["--queue"] == f"{STATE}/queue" and opts["--db"] == f"{STATE}/edgeprof.db"
    assert "Install" not in svc, "the timer is enabled, not the service"
    assert one(timer, "Timer", "OnCalendar") == "*-*-* 01:00:00"
    assert one(timer, "Timer", "Persistent") == "true"
    assert timespan_s(one(timer, "Timer", "RandomizedDelaySec")) == 0
    assert one(timer, "Timer", "Unit") == SWEEP
    assert one(timer, "Install", "WantedBy") == "timers.target"
    # the three places that describe the night agree: 01:00 start, --until 07:00, hour check 1 <= h < 7
    start_h = int(one(timer, "Timer", "OnCalendar").split()[1].split(":")[0])
    until_h = int(opts["--until"].split(":")[0])
    hours = next(v for v in svc["Service"]["ExecCondition"] if "date" in v)
    assert f"-ge {start_h} ]" in hours.replace('"', "") and f"-lt {until_h} ]" in hours.replace('"', "")
    # a oneshot's start timeout covers the whole night: long enough for 01:00 -> 07:00 plus a last config
    assert timespan_s(one(svc, "Service", "TimeoutStartSec")) >= (until_h - start_h + 0.5) * 3600


@pytest.mark.parametrize("name", SERVICES)
def test_unattended_hardening_lines(units: dict[str, Unit], name: str) -> None:
    """UMask, no capabilities, address families, a syscall filter; DB and queue not world-readable (an agent
    that runs for days unattended, often as the only service of the board)."""
    unit = units[name]
    svc = unit["Service"]
    assert one(unit, "Service", "UMask") == "0027"
    assert one(unit, "Service", "StateDirectoryMode") == "0750"
    assert one(unit, "Service", "CapabilityBoundingSet") == ""
    assert set(one(unit, "Service", "RestrictAddressFamilies").split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}
    filters = svc["SystemCallFilter"]
    assert "@system-service" in filters
    denied = next(f for f in filters if f.startswith("~")).lstrip("~").split()
    assert {"@mount", "@module", "@reboot", "@debug", "@raw-io"} <= set(denied)
    assert "ioctl" not in " ".join(denied)  # every GPU call is an ioctl
    assert one(unit, "Service", "SystemCallErrorNumber") == "EPERM"
    readme = (UNIT_DIR / "README.md").read_text()
    assert "left out of the deny" in readme and "--allow-power-mode-change" in readme


def test_install_script_keeps_the_queue_private() -> None:
    text = SCRIPT.read_text()
    assert "mode=2770" in text and "mode=0750" in text and "2775" not in text
