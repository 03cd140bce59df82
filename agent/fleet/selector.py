"""Which boards a job runs on: a board's selector facts, and the selector language over them and its labels.

A selector is terms joined by commas (all must hold): ``board=orin-nano``, ``jetpack>=6.1``,
``ram_mb>=7000``, ``label:lab=2``, ``gpu!=none``. Operators ``= != >= <= > <``. A number or a version
(``6.1``, ``R36.4.4``) compares as one, part by part; text compares for (in)equality only, without regard
to case. A fact the board does not have (no L4T off a Jetson) matches nothing but ``!=``. A bad selector is
one ``SelectorError`` line, naming the term and what is wrong with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from edgeprof.device.facts import device_fingerprint

# L4T release -> JetPack, from NVIDIA's JetPack archive; an L4T not listed has no jetpack fact.
L4T_JETPACK = {
    "36.4.4": "6.2.1",
    "36.4.3": "6.2",
    "36.4.0": "6.1",
    "36.4": "6.1",
    "36.3.0": "6.0",
    "36.3": "6.0",
    "36.2.0": "6.0",
    "35.6.0": "5.1.4",
    "35.5.0": "5.1.3",
    "35.4.1": "5.1.2",
    "35.3.1": "5.1.1",
    "35.2.1": "5.1",
    "35.1.0": "5.0.2",
}
# What a selector may name (and ``label:KEY``); the fingerprint's facts under short names.
FACT_KEYS = (
    "name",
    "board",
    "board_model",
    "module",
    "ram_mb",
    "jetpack",
    "l4t",
    "cores",
    "gpu",
    "arch",
    "llama_cpp",
)
_OPS = ("!=", ">=", "<=", "=", ">", "<")
_TERM = re.compile(r"^\s*(label:[A-Za-z0-9_.\-]+|[A-Za-z_][A-Za-z0-9_]*)\s*(!=|>=|<=|=|>|<)\s*(.*?)\s*$")
_VERSION = re.compile(r"^[Rv]?(\d+(?:\.\d+)*)$")


class SelectorError(ValueError):
    """A selector that cannot be read; its message is one line."""


@dataclass(frozen=True)
class Term:
    key: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.key}{self.op}{self.value}"


def board_slug(board_model: str | None) -> str | None:
    """'NVIDIA Jetson Orin Nano Developer Kit' -> 'orin-nano'; another board's model, lowercased, dashed."""
    if not board_model:
        return None
    text = board_model.lower()
    for noise in ("nvidia", "jetson", "developer kit", "engineering reference", "devkit"):
        text = text.replace(noise, " ")
    slug = re.sub(r"[^a-z0-9.]+", "-", text).strip("-")
    return slug or None


def selector_facts(facts: Mapping[str, Any], name: str, llama_cpp: str | None) -> dict[str, Any]:
    """The facts a selector names, from ``collect_device_facts``' dict (and the board's name, build)."""
    l4t = facts.get("l4t_release")
    l4t_num = _VERSION.match(str(l4t)) if l4t else None
    version = l4t_num.group(1) if l4t_num else None
    jetpack = None
    if version is not None:
        jetpack = L4T_JETPACK.get(version) or L4T_JETPACK.get(".".join(version.split(".")[:2]))
    ram = facts.get("ram_total_mb")
    return {
        "name": name,
        "board": board_slug(facts.get("board_model")),
        "board_model": facts.get("board_model"),
        "module": facts.get("module"),
        "ram_mb": round(ram) if isinstance(ram, (int, float)) else None,
        "jetpack": jetpack,
        "l4t": version,
        "cores": facts.get("cpu_count"),
        "gpu": facts.get("gpu"),
        "arch": facts.get("arch"),
        "llama_cpp": llama_cpp,
        "fingerprint": device_fingerprint(dict(facts)),
    }


def parse_selector(text: str) -> tuple[Term, ...]:
    """The terms of ``text``; raises SelectorError (one line) on the first bad one."""
    if not text.strip():
        raise SelectorError("empty selector: give terms such as board=orin-nano,jetpack>=6.1")
    terms = []
    for raw in text.split(","):
        found = _TERM.match(raw)
        if not found or not found.group(3):
            raise SelectorError(
                f"selector term {raw.strip()!r}: expected KEY OP VALUE (OP one of "
                f"{' '.join(_OPS)}), e.g. ram_mb>=7000"
            )
        key, op, value = found.groups()
        if not key.startswith("label:") and key not in FACT_KEYS:
            raise SelectorError(
                f"selector term {raw.strip()!r}: unknown fact {key!r} (known: "
                f"{', '.join(FACT_KEYS)}, label:KEY)"
            )
        if op not in ("=", "!=") and _as_version(value) is None:
            raise SelectorError(f"selector term {raw.strip()!r}: {op} needs a number or a version")
        terms.append(Term(key, op, value))
    return tuple(terms)


def _as_version(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return (int(value),) if float(value).is_integer() else _as_version(str(value))
    found = _VERSION.match(str(value).strip())
    return tuple(int(p) for p in found.group(1).split(".")) if found else None


def _compare(have: Any, op: str, want: str) -> bool:
    if have is None:
        return op == "!="
    a, b = _as_version(have), _as_version(want)
    if a is not None and b is not None:
        width = max(len(a), len(b))  # 6.1 == 6.1.0
        a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
        return {"=": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b}[op]
    if op not in ("=", "!="):
        return False  # an ordering of text: a board whose fact is not a number does not match
    same = str(have).strip().lower() == want.strip().lower()
    return same if op == "=" else not same


def matches(terms: tuple[Term, ...], facts: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a board with these selector facts and labels satisfies every term."""
    for term in terms:
        have = labels.get(term.key[6:]) if term.key.startswith("label:") else facts.get(term.key)
        if not _compare(have, term.op, term.value):
            return False
    return True


def parse_labels(pairs: list[str]) -> dict[str, str]:
    """``--label KEY=VALUE`` options as a dict; raises SelectorError on one without ``=``."""
    labels: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z0-9_.\-]+", key.strip()) or not value.strip():
            raise SelectorError(f"--label {pair!r}: expected KEY=VALUE (KEY letters, digits, _ . -)")
        labels[key.strip()] = value.strip()
    return labels
