"""``matrix.models``: the GGUF files a plan measures, as paths, globs or ``{ path, label, ... }`` tables.

Each file is read (header, metadata, tensor table) while the plan is validated: a typo in a path, a
half-downloaded file or a text file named .gguf is a plan problem, not a failed run at 3 a.m.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.gguf import GGUFError, GGUFInfo, read_gguf_info, read_model_shape
from edgeprof.gguf.shape import GGUFRangeError
from edgeprof.plan.checker import Checker, as_list
from edgeprof.plan.model import ModelEntry

MODEL_KEYS = {"path", "label", "group", "chat_template", "prompt"}


@dataclass(frozen=True)
class _Given:
    """What one item of ``matrix.models`` says, before its files are read."""

    path: str | None
    label: str | None = None
    group: str | None = None
    chat_template: str | None = None
    prompt: str | None = None


def expand_model_paths(raw: str, base: Path) -> list[Path]:
    """``~`` and ``$VARS`` expanded, relative to the plan's folder; a glob gives its matches, sorted."""
    expanded = os.path.expandvars(os.path.expanduser(raw))
    path = Path(expanded)
    if not path.is_absolute():
        path = base / path
    if any(ch in expanded for ch in "*?["):
        return sorted(Path(p) for p in glob.glob(str(path)))
    return [path]


def parse_models(chk: Checker, raw: Any, base: Path) -> tuple[list[ModelEntry], dict[str, GGUFInfo]]:
    """The model entries in plan order, and what each file says about itself (by path)."""
    entries: list[ModelEntry] = []
    infos: dict[str, GGUFInfo] = {}
    if raw is None:
        chk.add("matrix.models", "missing: list the GGUF files (paths or globs) to measure")
        return entries, infos
    items = as_list(raw)
    if not items:
        chk.add("matrix.models", "empty list: give at least one GGUF file")
    labels: dict[str, str] = {}  # label -> the place that took it
    for i, item in enumerate(items):
        place = f"matrix.models[{i}]"
        given = _given(chk, item, place)
        if given.path is None:
            continue
        paths = expand_model_paths(given.path, base)
        if not paths:
            chk.add(place, f"no file matches {given.path!r}")
            continue
        if given.label is not None and len(paths) > 1:
            chk.add(f"{place}.label", f"one label for a glob matching {len(paths)} files")
            continue
        for path in paths:
            entry = _entry(chk, given, path, place, labels, infos)
            if entry is not None:
                entries.append(entry)
    return entries, infos


def _given(chk: Checker, item: Any, place: str) -> _Given:
    if not isinstance(item, dict):
        return _Given(path=chk.string(item, place))
    chk.unknown_keys(item, MODEL_KEYS, place)
    path = chk.string(item.get("path"), f"{place}.path") if "path" in item else None
    if "path" not in item:
        chk.add(place, "missing 'path'")
    optional = {
        key: chk.string(item[key], f"{place}.{key}") if key in item else None
        for key in ("label", "group", "chat_template", "prompt")
    }
    return _Given(path=path, **optional)


def checked_model_info(path: Path) -> GGUFInfo:
    """A model file as ``run`` and ``bench`` take it: its header read, and every count of its shape in the
    range llama.cpp holds (GGUFError naming the key otherwise: a ``head_count_kv`` given as text once ended
    in ``load_failed`` instead of a refusal)."""
    info = read_gguf_info(path)
    try:
        read_model_shape(path)  # what run reads of it: every count in range, or the model is refused now
    except GGUFRangeError:
        raise
    except GGUFError:
        pass  # a shape edgeprof cannot predict from still runs (unpredicted), as before
    return info


def _entry(
    chk: Checker, given: _Given, path: Path, place: str, labels: dict[str, str], infos: dict[str, GGUFInfo]
) -> ModelEntry | None:
    """One file's entry, its GGUF read; None (with the problem added) for an unreadable file or a label
    another entry took already."""
    try:
        info = checked_model_info(path)
    except GGUFError as exc:
        chk.add(place, str(exc))
        return None
    label = given.label or path.stem
    if label in labels:
        chk.add(place, f"duplicate label {label!r} (also {labels[label]}); set 'label'")
        return None
    labels[label] = place
    infos[str(path)] = info
    return ModelEntry(
        path=str(path), label=label, group=given.group, chat_template=given.chat_template, prompt=given.prompt
    )
