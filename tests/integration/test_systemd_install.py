"""The systemd units and the install script, run: ``systemd-analyze verify`` on copies of the three units
(skipped where systemd-analyze is missing; it checks that every Exec*= command exists, and
/opt/edgeprof/.venv/bin/edgeprof does not exist on a test machine, so the copies run ``true`` instead;
everything else is verified as installed), the nightly service's ExecCondition= shell lines with a fake
``date`` and ``systemctl``, and the install script: ``bash -n``, ``--dry-run`` (needs no root, changes
nothing) and its refusals.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.systemd_units import (
    AGENT,
    EXE,
    SCRIPT,
    STATE,
    SWEEP,
    TIMER,
    UNIT_DIR,
    UNITS,
    Unit,
    exec_argv,
    parse_unit,
)


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
        # a checkout under a private folder (mktemp -d is 0700) cannot be reached by another user at all
        if any(folder.stat().st_mode & 0o001 == 0 for folder in SCRIPT.parents):
            pytest.skip("a folder above the script is not searchable by other users here")
    result = _script(env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, user=user)
    assert result.returncode != 0
    assert "must run as root" in result.stderr


