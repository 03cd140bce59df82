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


def _command_paths(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command a user can type, as its words: the app's commands and each group's (hidden ones not)."""
    for name, sub in sorted(_subcommands(cmd).items()):
        if getattr(sub, "hidden", False):
            continue
        if _subcommands(sub):
            yield from _command_paths(sub, (*path, name))
        else:
            yield (*path, name)


def test_the_command_list_names_every_command_of_the_app() -> None:
    """docs/commands.md is "every command, in one list": the list is read from the Typer app, so a command
    added to the CLI and not to the page fails here."""
    root = typer.main.get_command(app)
    shown = {tuple(_resolve(root, words)[1]) for words in _commands_of(DOCS / "commands.md")}
    missing = [" ".join(p) for p in _command_paths(root) if p not in shown]
    assert missing == [], "commands docs/commands.md does not show"


TIME_TO_ANSWER = REPO_ROOT / "benchmarks" / "self" / "time_to_answer.py"
TIME_TO_ANSWER_RECORD = REPO_ROOT / "benchmarks" / "recorded" / "time-to-answer.json"


def _flat(page: Path) -> str:
    """A page's text with its line breaks and runs of spaces as one space (a sentence wraps anywhere)."""
    return re.sub(r"\s+", " ", page.read_text(encoding="utf-8"))


def test_bench_timings_are_the_benchmarks_recorded_figures() -> None:
    """The README's and docs/interop.md's time to an answer are what ``benchmarks/self/time_to_answer.py
    --record`` last wrote (as its ``doc_figures`` words them): a re-run that changes them fails here until
    the pages say the new figures."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("time_to_answer", TIME_TO_ANSWER)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    f = bench.doc_figures(json.loads(TIME_TO_ANSWER_RECORD.read_text(encoding="utf-8")))
    expected = {
        README: [
            f"command took {f['bench']} where llama-bench took {f['llama_bench']} "
            f"({f['telemetry']} with telemetry; {f['when']}): {f['startup']} to start and create the "
            f"database, {f['preflight']} to look for busy processes, {f['per_test']} per test",
            f"and {f['tail']} to read the rows back",
        ],
        DOCS / "interop.md": [
            f"the start of the CLI and its database ({f['startup']}), the busy-process check "
            f"({f['preflight']}), {f['per_test']} per test for its child process to start and load the "
            f"model, and {f['tail']} to read the records back",
            f"that made {f['bench']} against llama-bench's {f['llama_bench']} ({f['ratio']}; "
            f"{f['telemetry']}, {f['ratio_telemetry']}, with telemetry; {f['when']})",
        ],
    }
    missing = [f"{_page_id(page)}: {phrase}" for page, phrases in expected.items() for phrase in phrases
               if phrase not in _flat(page)]  # fmt: skip
    assert missing == [], "figures not the benchmark's record (rerun it with --record, or fix the page)"


def test_no_docstring_cites_a_design_section_the_repository_does_not_have() -> None:
    """The design document the project started from is not in the repository: a "DESIGN §3" leads nowhere,
    so a docstring says the thing itself."""
    cited = [
        f"{path.relative_to(REPO_ROOT)}:{n}"
        for folder in ("agent", "collectors", "runners", "storage")
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"DESIGN\s*§", line)
    ]
    assert cited == []


# shared modules with no command line of their own (faults_queue.py is the queue half faults.py runs)
BENCHMARK_HELPERS = {"bracketing.py", "common.py", "probe_build.py", "diag_context.py", "faults_queue.py"}


def test_every_benchmark_script_has_its_line_in_the_benchmarks_readme() -> None:
    """Each script under benchmarks/ is named, with how to run it, in benchmarks/README.md."""
    readme = (REPO_ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    scripts = sorted(
        p.relative_to(REPO_ROOT / "benchmarks").as_posix()
        for folder in ("fidelity", "self", "diagnostics")
        for p in (REPO_ROOT / "benchmarks" / folder).glob("*.py")
        if p.name not in BENCHMARK_HELPERS
    )
    assert scripts
    missing = [s for s in scripts if f"python benchmarks/{s}" not in readme]
    assert not missing, f"benchmarks/README.md has no run line for {missing}"
