"""scripts/cuda_arch.sh: the one CUDA architecture setup builds for, from the board's device tree.

The device-tree model and compatible strings come from the real captures in
tests/fixtures/captures/sysfs (each names its public source). The `nvcc` here is a synthetic stand-in that
prints the version line format of a real nvcc (``Cuda compilation tools, release X.Y, VX.Y.Z``); no CUDA
toolkit is on this machine.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.captures import read_capture
from support.fakes import FakeRoot
from support.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(60)

SCRIPT = REPO_ROOT / "scripts" / "cuda_arch.sh"


def fake_nvcc(tmp_path: Path, release: str) -> Path:
    """Synthetic: prints what `nvcc --version` prints, for CUDA ``release``."""
    path = tmp_path / f"nvcc-{release}"
    path.write_text(
        "#!/bin/sh\n"
        "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.68'\n"
    )
    path.chmod(0o755)
    return path


def board_root(tmp_path: Path, model: str, compatible: list[str]) -> Path:
    """A root whose device tree holds ``model`` and ``compatible``, NUL-terminated as the kernel has them."""
    fake = FakeRoot(tmp_path / "root")
    fake.device_tree(model, compatible)
    return fake.root


def run_script(*args: str | Path, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "EDGEPROF_CUDA_ARCH"}
    env.update(env_extra or {})
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=30, env=env
    )


def _model_and_compatible(name: str) -> tuple[str, list[str]]:
    """Captures laid out as: nv_tegra_release lines (starting with '#'), the model, the compatible values."""
    lines = [line for line in read_capture(name) if not line.startswith("#")]
    return lines[0], lines[1:]


def _thor() -> tuple[str, list[str]]:
    return _model_and_compatible("nv_tegra_release_thor_r38.2.txt")


def _agx_orin_jp72() -> tuple[str, list[str]]:
    return _model_and_compatible("nv_tegra_release_agx-orin_r39.2.txt")


def test_agx_orin_on_jetpack_7_builds_for_87(tmp_path: Path) -> None:
    model, compatible = _agx_orin_jp72()
    assert model == "NVIDIA Jetson AGX Orin Developer Kit"
    root = board_root(tmp_path, model, compatible)
    proc = run_script("--root", root, "--nvcc", fake_nvcc(tmp_path, "13.0"))
    assert proc.returncode == 0, proc.stderr
    arch, how = proc.stdout.rstrip("\n").split("\t")
    assert arch == "87"
    assert "AGX Orin" in how


@pytest.mark.parametrize(("release", "arch"), [("12.8", "101"), ("13.0", "110")])
def test_thor_follows_the_cuda_renaming_of_its_architecture(tmp_path: Path, release: str, arch: str) -> None:
    model, compatible = _thor()
    root = board_root(tmp_path, model, compatible)
    proc = run_script("--root", root, "--nvcc", fake_nvcc(tmp_path, release))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\t")[0] == arch


def test_nano_and_tx1_model_strings_build_for_53(tmp_path: Path) -> None:
    models = [
        line.split(" = ", 1)[1]
        for line in read_capture("device-tree-model_tx1-nano_jp3-jp4.txt")
        if line.startswith("- cat /proc/device-tree/model = ")
    ]
    assert models == ["jetson_tx1", "NVIDIA Jetson Nano Developer Kit"]
    root = board_root(tmp_path, models[1], [])
    proc = run_script("--root", root, "--nvcc", fake_nvcc(tmp_path, "11.4"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\t")[0] == "53"
    tx1_root = board_root(tmp_path / "tx1", models[0], [])
    tx1 = run_script("--root", tx1_root, "--nvcc", fake_nvcc(tmp_path, "11.4"))
    assert tx1.stdout.split("\t")[0] == "53"


def test_jetpack_4_cuda_is_refused_in_one_line(tmp_path: Path) -> None:
    root = board_root(tmp_path, "NVIDIA Jetson Nano Developer Kit", [])
    proc = run_script("--root", root, "--nvcc", fake_nvcc(tmp_path, "10.2"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "CUDA 10.2" in lines[0] and "too old" in lines[0]


def test_the_override_wins_and_is_checked(tmp_path: Path) -> None:
    root = board_root(tmp_path, "NVIDIA Jetson AGX Orin Developer Kit", [])
    ok = run_script("--root", root, env_extra={"EDGEPROF_CUDA_ARCH": "72"})
    assert ok.returncode == 0 and ok.stdout.split("\t")[0] == "72"
    bad = run_script("--root", root, env_extra={"EDGEPROF_CUDA_ARCH": "orin"})
    assert bad.returncode == 2 and "EDGEPROF_CUDA_ARCH" in bad.stderr


def test_an_unknown_board_says_what_to_set(tmp_path: Path) -> None:
    root = board_root(tmp_path, "Some Other Board", ["vendor,unknown"])
    proc = run_script("--root", root)
    assert proc.returncode == 2
    assert "EDGEPROF_CUDA_ARCH" in proc.stderr
