"""The systemd units in ``systemd/`` and ``scripts/install-service.sh``.

- ``systemd-analyze verify`` on copies of the three units (skipped where systemd-analyze is missing). It
  checks that every Exec*= command exists, and /opt/edgeprof/.venv/bin/edgeprof does not exist on a test
  machine, so the copies run ``true`` instead; everything else is verified as installed.
- The settings the agent relies on (notify + watchdog, restart policy, stop timeout, user and groups,
  hardening, and what must stay unset) are read from the files themselves.
- The nightly service's ExecCondition= shell lines are run with a fake ``date`` and ``systemctl``.
- The install script: ``bash -n``, ``--dry-run`` (needs no root, changes nothing) and its refusals.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

ROOT = REPO_ROOT
UNIT_DIR = ROOT / "systemd"
AGENT = "edgeprof-agent.service"
SWEEP = "edgeprof-sweep.service"
TIMER = "edgeprof-sweep.timer"
UNITS = (AGENT, SWEEP, TIMER)
SERVICES = (AGENT, SWEEP)
SCRIPT = ROOT / "scripts" / "install-service.sh"
EXE = "/opt/edgeprof/.venv/bin/edgeprof"
STATE = "/var/lib/edgeprof"

Unit = dict[str, dict[str, list[str]]]


def parse_unit(path: Path) -> Unit:
    """section -> key -> every value in file order (systemd allows repeated keys, e.g. Environment=)."""
    unit: Unit = {}
    section: dict[str, list[str]] | None = None
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            section = unit.setdefault(line[1:-1], {})
            continue
        assert section is not None, f"{path.name}: {line!r} before any [section]"
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not key=value: {line!r}"
        section.setdefault(key.strip(), []).append(value.strip())
    return unit


def one(unit: Unit, section: str, key: str) -> str:
    values = unit.get(section, {}).get(key, [])
    assert len(values) == 1, f"[{section}] {key}= expected once, found {values}"
    return values[0]


def timespan_s(text: str) -> float:
    """A systemd time span as seconds: '600', '15min', '7h', '1min 30s'."""
    factors = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400}
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip())
    assert parts and "".join(n + u for n, u in parts) == text.replace(" ", ""), f"bad time span {text!r}"
    return sum(float(n) * factors[u] for n, u in parts)


def exec_argv(value: str) -> list[str]:
    """An Exec*= value as argv, after systemd's $$ and %% unescaping (no prefixes like '-' or '@')."""
    return shlex.split(value.replace("$$", "$").replace("%%", "%"))


@pytest.fixture(scope="module")
def units() -> dict[str, Unit]:
    return {name: parse_unit(UNIT_DIR / name) for name in UNITS}


# -- systemd-analyze verify -------------------------------------------------------------------------------


def _verify(paths: list[Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.skip("systemd-analyze not installed (not a systemd distribution)")
    return subprocess.run(
        [exe, "verify", "--man=no", *[str(p) for p in paths]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _copies_for_verify(tmp_path: Path) -> list[Path]:
    true = shutil.which("true")
    assert true is not None
    paths = []
    for name in UNITS:
        text = (UNIT_DIR / name).read_text(encoding="utf-8")
        # verify fails a unit whose ExecStart= executable is missing; the real one exists only after install
        (tmp_path / name).write_text(text.replace(EXE, str(Path(true).resolve())), encoding="utf-8")
        paths.append(tmp_path / name)
    return paths


def _about_our_units(output: str, names: tuple[str, ...]) -> list[str]:
    # verify also loads the system's own units (multi-user.target, timers.target, ...) and may warn about
    # them on some hosts; only lines naming our files count.
    return [line for line in output.splitlines() if any(n in line for n in names)]


def test_systemd_analyze_verify_is_clean(tmp_path: Path) -> None:
    result = _verify(_copies_for_verify(tmp_path), tmp_path)
    ours = _about_our_units(result.stdout + result.stderr, UNITS)
    assert ours == [], "systemd-analyze verify complains:\n" + "\n".join(ours)


def test_verify_would_catch_a_broken_unit(tmp_path: Path) -> None:
    """The check above is not vacuous: verify run the same way reports a typo in one of our units."""
    paths = _copies_for_verify(tmp_path)
    broken = tmp_path / "edgeprof-broken.service"
    text = paths[0].read_text(encoding="utf-8").replace("KillMode=mixed", "KillMode=mixd")
    broken.write_text(text, encoding="utf-8")
    result = _verify([broken], tmp_path)
    assert any("mixd" in line for line in _about_our_units(result.stdout + result.stderr, (broken.name,)))


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
    hashing per chunk; see tests/test_agent.py and agent/sweep/telemetry.py), so the watchdog only has to
    outlast one slow step: 120 s leaves room for a slow SD card and still restarts a hung agent the same
    night."""
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


@pytest.mark.parametrize(
    ("hour", "agent_active", "runs"),
    [
        ("00", False, False),
        ("01", False, True),
        ("03", False, True),
        ("06", False, True),
        ("07", False, False),
        ("08", False, False),
        ("09", False, False),  # leading zero: must not be read as octal
        ("13", False, False),
        ("03", True, False),  # the always-on agent owns the queue
    ],
)
def test_sweep_exec_conditions(
    units: dict[str, Unit], tmp_path: Path, hour: str, agent_active: bool, runs: bool
) -> None:
    sh = shutil.which("sh")
    if sh is None:
        pytest.skip("no sh")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "date").write_text(f"#!/bin/sh\necho {hour}\n")
    # is-active exits 0 when active, 3 when not; anything but the expected query is a test error (99)
    check = f'[ "$1 $2 $3" = "is-active --quiet {AGENT}" ] || exit 99'
    (fake / "systemctl").write_text(f"#!/bin/sh\n{check}\nexit {0 if agent_active else 3}\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    codes = []
    for value in units[SWEEP]["Service"]["ExecCondition"]:
        argv = exec_argv(value)
        assert argv[0] == "/bin/sh"
        result = subprocess.run([sh, *argv[1:]], env=env, capture_output=True, text=True, timeout=10)
        assert result.stderr == "", result.stderr
        codes.append(result.returncode)
    # systemd: 0 -> go on; 1..254 -> skip the unit (not a failure); 255 or a signal -> failure
    assert all(0 <= c <= 254 for c in codes), codes
    assert all(c == 0 for c in codes) == runs, codes


# -- install script ---------------------------------------------------------------------------------------


def _script(
    *args: str, env: dict[str, str] | None = None, user: int | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = ["bash", str(SCRIPT), *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=False)


def test_install_script_syntax() -> None:
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_install_script_help() -> None:
    result = _script("--help")
    assert result.returncode == 0
    assert "--timer" in result.stdout and "--dry-run" in result.stdout and "set -euo" not in result.stdout


def _our_installed_units() -> dict[str, float | None]:
    out = {}
    for name in UNITS:
        p = Path("/etc/systemd/system") / name
        out[name] = p.stat().st_mtime if p.exists() else None
    return out


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@pytest.fixture
def fake_prefix(tmp_path: Path) -> Path:
    """A checkout with an executable .venv/bin/edgeprof, so --prefix passes its check."""
    exe = tmp_path / "checkout" / ".venv" / "bin" / "edgeprof"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return tmp_path / "checkout"


def test_install_dry_run_agent(fake_prefix: Path) -> None:
    before = _our_installed_units()
    result = _script("--dry-run", "--prefix", str(fake_prefix))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    if not _user_exists("edgeprof"):
        assert "+ useradd --system" in out and "--home-dir /var/lib/edgeprof" in out
        assert "--shell /usr/sbin/nologin" in out or "--shell /sbin/nologin" in out
    for d in ("queue", "queue/done", "queue/failed"):
        assert f"{STATE}/{d}" in out
    assert "+ systemctl daemon-reload" in out
    assert f"+ systemctl enable {AGENT}" in out
    assert f"+ systemctl enable {TIMER}" not in out and "+ systemctl start" not in out
    # the units are rendered for the other checkout
    assert f"s#/opt/edgeprof/#{fake_prefix}/#g" in out
    assert "not found or not executable" not in result.stderr
    assert "dry run done: nothing was changed" in out
    assert _our_installed_units() == before


def test_install_dry_run_timer_start(fake_prefix: Path) -> None:
    result = _script("--dry-run", "--timer", "--start", "--prefix", str(fake_prefix))
    assert result.returncode == 0, result.stderr
    assert f"+ systemctl enable {TIMER}" in result.stdout
    assert f"+ systemctl start {TIMER}" in result.stdout
    assert f"enable {AGENT}" not in result.stdout


def test_install_dry_run_reports_missing_pieces(tmp_path: Path) -> None:
    import grp

    result = _script("--dry-run", "--prefix", str(tmp_path / "nowhere"))
    assert result.returncode == 0  # a dry run reports and goes on
    assert "nowhere/.venv/bin/edgeprof not found" in result.stderr
    try:
        grp.getgrnam("jtop")
    except KeyError:
        assert "group jtop does not exist" in result.stderr
        # dropped from the installed copies, or systemd would refuse to start them (216/GROUP)
        assert "SupplementaryGroups=jtop" not in result.stdout


@pytest.mark.parametrize("prefix", ["relative/dir", "/opt/with space", "/opt/100%"])
def test_install_rejects_bad_prefix(prefix: str) -> None:
    result = _script("--dry-run", "--prefix", prefix)
    assert result.returncode != 0
    assert "--prefix" in result.stderr


def test_install_needs_root_without_dry_run() -> None:
    user = None
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root and no setpriv to drop privileges")
        user = 65534  # nobody
        if not os.access(SCRIPT, os.R_OK) or (SCRIPT.stat().st_mode & 0o004) == 0:
            pytest.skip("the script is not readable by other users here")
    result = _script(env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, user=user)
    assert result.returncode != 0
    assert "must run as root" in result.stderr


@pytest.mark.parametrize("name", SERVICES)
def test_issue_11_hardening_lines(units: dict[str, Unit], name: str) -> None:
    """UMask, no capabilities, address families, a syscall filter; DB and queue not world-readable."""
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
