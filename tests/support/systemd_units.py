"""The systemd units in ``systemd/`` as data: their paths and names, a parser that keeps repeated keys, and
systemd's time spans and Exec*= quoting (shared by the unit tests of the files and the tests that run them).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

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
