"""What ``edgeprof service install`` runs: the systemd units shipped inside the package, pointed at this
installation.

The units and the install script travel as package data (``edgeprof/systemd``, ``edgeprof/scripts``), so a
wheel installed anywhere (a venv under /opt, ``pip install --user``, a container) can install its service
without a checkout; the units get the path of the ``edgeprof`` executable that is actually running.
"""

from __future__ import annotations

import shutil
import sys
from importlib import resources
from pathlib import Path


def packaged_file(folder: str, name: str) -> Path:
    """``folder/name`` from an installed wheel (``edgeprof/<folder>/``) or a checkout (``<repo>/<folder>/``).

    Found by path rather than imported: the data folders hold no Python, and an editable install maps
    only importable packages."""
    package_dir = Path(str(resources.files("edgeprof")))
    for candidate in (package_dir / folder / name, package_dir.parent / folder / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{folder}/{name} is missing from this edgeprof installation ({package_dir})")


def installed_executable() -> Path | None:
    """The ``edgeprof`` console script of the interpreter running now (a venv's bin/, or ~/.local/bin)."""
    beside = Path(sys.executable).parent / "edgeprof"
    if beside.is_file():
        return beside.absolute()
    found = shutil.which("edgeprof")
    return Path(found).absolute() if found else None


def install_command(*, timer: bool, start: bool, dry_run: bool) -> list[str]:
    """The install script's command line for this installation; FileNotFoundError when a piece is missing."""
    script = packaged_file("scripts", "install-service.sh")
    exe = installed_executable()
    if exe is None:
        raise FileNotFoundError(
            "no edgeprof executable next to this Python; install edgeprof with pip (it creates one)"
        )
    cmd = ["bash", str(script), "--exe", str(exe)]
    cmd += ["--timer"] if timer else []
    cmd += ["--start"] if start else []
    cmd += ["--dry-run"] if dry_run else []
    return cmd
