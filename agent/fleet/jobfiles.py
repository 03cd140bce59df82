"""A job's files: the plan and its models identified by sha256 at submit, found again (or fetched) on the
board that runs it.

At submit the plan is checked as ``edgeprof run`` would check it, and every model it names is hashed; the
job stores the plan's text and, per model, the path as the plan writes it, its file name, size and sha256.
A board looks for each model by content, never by path alone: the plan's own path, then its models folder
(``<name>``); a file there whose sha256 differs is not the model. Failing that it fetches ``<name>`` from
the job's stated location (a folder every board mounts, or an http(s) URL), checks the sha256, and keeps
the file in its models folder. A model found nowhere fails that job, with a line saying where the board
looked; no other job is touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from edgeprof.gguf import sha256_file
from edgeprof.plan import parse_plan

FETCH_TIMEOUT_S = 60.0


class JobFileError(RuntimeError):
    """A plan that cannot be submitted, or a model a board cannot find; one line."""


@dataclass(frozen=True)
class SubmittedPlan:
    name: str
    text: str
    sha256: str
    models: list[dict[str, Any]]  # {"given", "name", "size_bytes", "sha256"}


def _given_paths(text: str) -> list[str]:
    """The model paths as the plan writes them (strings or ``{ path = ... }`` tables)."""
    doc = tomllib.loads(text)
    raw = doc.get("matrix", {}).get("models", [])
    items = raw if isinstance(raw, list) else [raw]
    given = [item.get("path") if isinstance(item, dict) else item for item in items]
    return [g for g in given if isinstance(g, str)]


def identify_plan(path: Path) -> SubmittedPlan:
    """The plan at ``path`` checked, its models hashed; raises JobFileError (plan problems in one line)."""
    from edgeprof.plan import PlanError

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise JobFileError(f"cannot read plan {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        plan = parse_plan(text, source=str(path), base=path.resolve().parent)
    except PlanError as exc:
        raise JobFileError(f"plan {path}: {'; '.join(exc.problems)}") from None
    models = []
    for given in _given_paths(text):
        if any(ch in given for ch in "*?["):
            raise JobFileError(f"plan {path}: model {given!r} is a glob; a fleet plan names each model file")
        local = Path(os.path.expandvars(os.path.expanduser(given)))
        local = local if local.is_absolute() else path.resolve().parent / local
        models.append(
            {
                "given": given,
                "name": local.name,
                "size_bytes": local.stat().st_size,
                "sha256": sha256_file(local),
            }
        )
    return SubmittedPlan(plan.name, text, hashlib.sha256(text.encode()).hexdigest(), models)


class ModelFinder:
    """Finds a job's models on this board by sha256 (hashes cached by path, size and mtime)."""

    def __init__(self, models_dir: Path) -> None:
        self.models_dir = models_dir
        self._hashes: dict[tuple[str, int, int], str] = {}

    def _sha(self, path: Path) -> str | None:
        try:
            st = path.stat()
        except OSError:
            return None
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in self._hashes:
            self._hashes[key] = sha256_file(path)
        return self._hashes[key]

    def find(self, model: dict[str, Any], source: str | None) -> Path:
        """The local file holding ``model``; raises JobFileError saying where it looked."""
        given = Path(os.path.expanduser(model["given"]))
        candidates = [given] if given.is_absolute() else []
        candidates.append(self.models_dir / model["name"])
        for candidate in candidates:
            if candidate.is_file() and self._sha(candidate) == model["sha256"]:
                return candidate
        looked = ", ".join(str(c) for c in candidates)
        if not source:
            raise JobFileError(
                f"model {model['name']} (sha256 {model['sha256'][:12]}) not found in {looked} "
                "and the job names no location to fetch it from"
            )
        return self._fetch(model, source, looked)

    def _fetch(self, model: dict[str, Any], source: str, looked: str) -> Path:
        target = self.models_dir / model["name"]
        partial = target.with_name(f".{target.name}.part")
        url = f"{source.rstrip('/')}/{model['name']}"
        try:
            self.models_dir.mkdir(parents=True, exist_ok=True)
            if "://" in source:
                with (
                    urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response,
                    open(partial, "wb") as out,
                ):
                    shutil.copyfileobj(response, out)
            else:
                shutil.copyfile(Path(source).expanduser() / model["name"], partial)
        except (OSError, ValueError) as exc:
            partial.unlink(missing_ok=True)
            raise JobFileError(
                f"model {model['name']} (sha256 {model['sha256'][:12]}) not found in {looked}; "
                f"fetching {url} failed: {exc}"
            ) from None
        got = sha256_file(partial)
        if got != model["sha256"]:
            partial.unlink(missing_ok=True)
            raise JobFileError(
                f"model {model['name']} fetched from {url} has sha256 {got[:12]}, "
                f"the job wants {model['sha256'][:12]}"
            )
        os.replace(partial, target)
        return target


def board_plan_text(text: str, header: str, local: dict[str, Path]) -> str:
    """The job's plan as this board runs it: each model path replaced by where the file is here, and a header
    comment naming the job (so every job is a sweep of its own, and a job run again resumes its own sweep)."""
    for given, path in local.items():
        new = json.dumps(str(path))  # a TOML basic string: the same escapes as JSON for a path
        for quoted in (json.dumps(given), f"'{given}'"):  # as a basic or as a literal string
            text = text.replace(quoted, new)
    return f"# {header}\n{text}"
