"""The package as other software meets it: a wheel that builds cleanly and carries its units, import names
that cannot clash with another distribution's top-level packages, and a service install that points at the
executable actually installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.paths import REPO_ROOT
from support.plans import plan_toml

pytestmark = pytest.mark.timeout(300)

ROOT = REPO_ROOT
PIP_INSTALL = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("wheel")
    # From a copy without build/: setuptools reuses build/lib, so a module left there by an earlier build
    # would be shipped even when pyproject no longer lists its package.
    src = tmp_path_factory.mktemp("src") / "edgeprof"
    skip = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT, src, ignore=skip)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = out.glob("edgeprof-*.whl")
    return path, proc.stdout + proc.stderr


def test_the_wheel_builds_without_deprecation_warnings(wheel: tuple[Path, str]) -> None:
    _path, log = wheel
    lowered = log.lower()
    assert "deprecat" not in lowered and "warning" not in lowered, log


def test_the_wheel_ships_units_install_script_license_and_data(wheel: tuple[Path, str]) -> None:
    path, _log = wheel
    names = set(zipfile.ZipFile(path).namelist())
    for name in (
        "edgeprof/__main__.py",
        "edgeprof/cli/app.py",
        "edgeprof/collectors/base.py",
        "edgeprof/runners/llama_worker.py",
        "edgeprof/storage/models.py",
        "edgeprof/systemd/edgeprof-agent.service",
        "edgeprof/systemd/edgeprof-sweep.service",
        "edgeprof/systemd/edgeprof-sweep.timer",
        "edgeprof/scripts/install-service.sh",
        "edgeprof/data/grafana/edgeprof.json",
    ):
        assert name in names, name
    # Every module of every subpackage: a subpackage missing from pyproject's list would install without it.
    root = REPO_ROOT
    for folder, package in (
        ("agent", "edgeprof"),
        ("collectors", "edgeprof/collectors"),
        ("runners", "edgeprof/runners"),
        ("storage", "edgeprof/storage"),
    ):
        for module in (root / folder).rglob("*.py"):
            name = f"{package}/{module.relative_to(root / folder).as_posix()}"
            assert name in names, name
    assert any(n.endswith("licenses/LICENSE") for n in names)
    # Only one top-level import name: nothing another distribution could shadow or be shadowed by.
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith((".dist-info", ".data"))}
    assert tops == {"edgeprof"}
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(path).read(meta).decode()
    assert "License-Expression: Apache-2.0" in text


def _dummy_distribution(tmp_path: Path) -> Path:
    """A distribution that ships a top-level ``storage`` package (and ``agent``), installed with pip."""
    src = tmp_path / "dummy-src"
    for pkg in ("storage", "agent"):
        (src / pkg).mkdir(parents=True)
        (src / pkg / "__init__.py").write_text("CLASH = True\n")
    (src / "storage" / "models.py").write_text("class Other:\n    pass\n")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "dummy-clash"\nversion = "1.0"\n'
        '[tool.setuptools]\npackages = ["storage", "agent"]\n'
    )
    target = tmp_path / "dummy-site"
    proc = subprocess.run(
        [*PIP_INSTALL, "--no-build-isolation", "--target", str(target), str(src)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    return target


@pytest.mark.llama
def test_a_sweep_runs_beside_a_distribution_with_a_top_level_storage_package(
    tmp_path: Path, wheel: tuple[Path, str], tiny_models
) -> None:
    path, _log = wheel
    site = tmp_path / "edgeprof-site"
    proc = subprocess.run(
        [*PIP_INSTALL, "--target", str(site), str(path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    dummy = _dummy_distribution(tmp_path)
    # The user's folder also holds a storage.py and an agent.py: neither may be picked up.
    work = tmp_path / "work"
    work.mkdir()
    for name in ("storage", "agent"):
        (work / f"{name}.py").write_text(f"raise SystemExit('{name}.py from the working folder ran')\n")
    plan = work / "plan.toml"
    plan.write_text(
        plan_toml(
            {"q4": tiny_models["Q4_K_M"]},
            name="clash",
            workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 4}],
            repeat={"warmup": 0, "steady": 1},
            run={"timeout_s": 120},
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(dummy), str(site)])}
    where = subprocess.run(
        [sys.executable, "-c", "import edgeprof, storage; print(edgeprof.__file__); print(storage.CLASH)"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,  # `python -c` puts its folder first on sys.path: not the one with storage.py
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.splitlines()[0].startswith(str(site))  # the wheel's copy, not the checkout
    assert where.stdout.splitlines()[1] == "True"  # the dummy's storage really is importable as `storage`
    run = subprocess.run(
        [sys.executable, "-m", "edgeprof", "run", plan, "--db", work / "r.db", "--no-telemetry"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=work,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 ok" in run.stdout
    report = subprocess.run(
        [sys.executable, "-m", "edgeprof", "report", "--db", str(work / "r.db"), "--format", "csv"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=work,
    )
    assert report.returncode == 0, report.stderr
    assert "q4" in report.stdout


def test_service_install_points_the_units_at_the_running_installation() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "edgeprof", "service", "install", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    exe = Path(sys.executable).parent / "edgeprof"
    assert f"s#/opt/edgeprof/.venv/bin/edgeprof#{exe}#g" in out
    assert "systemctl enable edgeprof-agent.service" in out
    timer = subprocess.run(
        [sys.executable, "-m", "edgeprof", "service", "install", "--timer", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert timer.returncode == 0
    assert "systemctl enable edgeprof-sweep.timer" in timer.stdout


def test_rendered_units_run_the_installed_executable(tmp_path: Path) -> None:
    """Render the units the way the install script does (its own sed expressions) and read ExecStart."""
    exe = tmp_path / "venv" / "bin" / "edgeprof"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    script = ROOT / "scripts" / "install-service.sh"
    proc = subprocess.run(
        ["bash", str(script), "--exe", str(exe), "--dry-run"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    sed_line = next(line for line in proc.stdout.splitlines() if line.startswith("+ sed") and "agent" in line)
    expressions = [part.split("'")[0] for part in sed_line.split("-e '")[1:]]
    unit = (ROOT / "systemd" / "edgeprof-agent.service").read_text()
    rendered = subprocess.run(
        ["sed", *[a for e in expressions for a in ("-e", e)]], input=unit, capture_output=True, text=True
    ).stdout
    exec_start = next(line for line in rendered.splitlines() if line.startswith("ExecStart="))
    assert exec_start.startswith(f"ExecStart={exe} agent ")
    settings = [line for line in rendered.splitlines() if not line.startswith("#")]
    assert not [line for line in settings if "/opt/edgeprof" in line]
