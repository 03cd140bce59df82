"""The README and docs/ as a reader meets them: every link resolves, every ``edgeprof`` command shown parses
(its subcommand exists, its ``--help`` works, every flag it uses is one of that command's options), the
README stays one screen of a new user's first look, and the hostile-input page is the table the tests run."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from support.hostile_cases import markdown
from support.paths import REPO_ROOT
from typer.testing import CliRunner

from edgeprof.cli import app

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
README_MAX_LINES = 250

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```(\w*)\n(.*?)```", flags=re.S)


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _page_id(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", _prose(text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def _prose(text: str) -> str:
    """The page without its code blocks (a ``#`` comment in a TOML block is not a heading)."""
    return FENCE.sub("", text)


def test_the_readme_is_one_screen_and_links_every_docs_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < README_MAX_LINES
    linked = {Path(target).name for target in LINK.findall(text) if target.startswith("docs/")}
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages - linked == set(), "docs pages the README does not link"


@pytest.mark.parametrize("page", _pages(), ids=_page_id)
def test_every_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(_prose(text)):
        if re.match(r"[a-z]+:", target):
            continue  # an outside address: not reachable from here, and not ours to keep
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        anchored = anchor and dest.exists() and dest.suffix == ".md"
        if not dest.exists() or (anchored and anchor not in _anchors(dest.read_text(encoding="utf-8"))):
            broken.append(target)
    assert broken == [], f"{_page_id(page)}: links that lead nowhere"


def _shown_commands(text: str) -> Iterator[list[str]]:
    """Each ``edgeprof ...`` line of a shell block, as argv after ``edgeprof`` (comments and pipes cut)."""
    for lang, body in FENCE.findall(text):
        if lang not in {"bash", "sh", "console", "shell"}:
            continue
        for raw in body.splitlines():
            line = raw.split(" # ", 1)[0].split(" | ", 1)[0].split(" && ", 1)[0].strip()
            line = re.sub(r"^(\$ |sudo |\.venv/bin/)", "", line)
            if not line.startswith("edgeprof "):
                continue
            try:
                words = shlex.split(line)
            except ValueError:
                words = line.split()
            yield words[1:]


def _subcommands(cmd: Any) -> dict[str, Any]:
    """A group's commands by name (Typer's own click, so read by duck typing), {} for a command."""
    return dict(getattr(cmd, "commands", {}) or {})


def _resolve(root: Any, words: list[str]) -> tuple[Any, list[str], list[str]]:
    """The subcommand a command line names, the path to it, and the words after it."""
    cmd, path, rest = root, [], list(words)
    while _subcommands(cmd) and rest and not rest[0].startswith("-"):
        sub = _subcommands(cmd).get(rest[0])
        if sub is None:
            break
        cmd, path, rest = sub, [*path, rest[0]], rest[1:]
    return cmd, path, rest


def _commands_of(page: Path) -> list[list[str]]:
    return list(_shown_commands(page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", _pages(), ids=_page_id)
def test_every_command_shown_parses(page: Path) -> None:
    root = typer.main.get_command(app)
    runner = CliRunner()
    problems = []
    for words in _commands_of(page):
        cmd, path, rest = _resolve(root, words)
        if _subcommands(cmd) and rest and not rest[0].startswith("-"):
            problems.append(f"edgeprof {' '.join(words)}: no command {rest[0]!r}")
            continue
        known = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)} | {"--help"}
        # a command that takes another tool's flags as they are (bench: llama-bench's) checks them itself
        passthrough = bool((getattr(cmd, "context_settings", None) or {}).get("ignore_unknown_options"))
        for word in [] if passthrough else rest:
            flag = word.split("=", 1)[0]
            is_flag = flag.startswith("-") and flag not in {"-", "--"} and not re.fullmatch(r"-\d.*", flag)
            if is_flag and flag not in known:
                problems.append(f"edgeprof {' '.join(words)}: {' '.join(path)} has no option {flag}")
        result = runner.invoke(app, [*path, "--help"])
        if result.exit_code != 0:
            problems.append(f"edgeprof {' '.join(path)} --help exited {result.exit_code}")
    assert problems == []


def test_the_docs_show_commands() -> None:
    """The command check above reads what it should: the command list alone shows a dozen and more."""
    assert len(_commands_of(DOCS / "commands.md")) >= 12


def test_the_hostile_input_page_is_the_table_the_tests_run() -> None:
    """``python tests/support/hostile_cases.py`` prints the table; the page holds it as printed."""
    text = (DOCS / "hostile-input.md").read_text(encoding="utf-8")
    assert markdown() in text, "re-print the table: python tests/support/hostile_cases.py"
