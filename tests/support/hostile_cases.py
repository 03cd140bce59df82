"""Hostile and careless inputs, as data: what is given, and what edgeprof does with it.

The tests take their cases from here (``case(id)`` or ``in_area(area)`` in a ``parametrize``), so the
docs/hostile-input.md table is the list the tests actually run. Print that table with

    python tests/support/hostile_cases.py          # markdown, one table, grouped by area

A case is one row: ``given`` says what a user or an attacker does (a command line, a file dropped
somewhere), ``does`` says what edgeprof does about it, in the words of the docs. ``argv`` is optional:
where a case is one command line, the test runs exactly that, with ``{db}``, ``{out}``, ``{foreign}``,
``{link}`` and ``{log}`` filled in with the test's own temporary files.

Each helper adds cases to its own tuple below (files and databases; queue and plan inputs), so that two
branches adding rows do not touch the same lines.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    area: str
    given: str
    does: str
    argv: tuple[str, ...] = ()

    def args(self, **paths: object) -> list[str]:
        """``argv`` with the placeholders filled in."""
        return [part.format(**{k: str(v) for k, v in paths.items()}) for part in self.argv]


# Files edgeprof writes by name, databases it opens, numbers and URLs from the command line and plans.
FILES_AND_DATABASES: tuple[Case, ...] = (
    Case(
        "export-onto-own-db",
        "files written",
        "`edgeprof export --sweep 1 -o self.db --db self.db`",
        "refused before anything is written: the output is the open database; the DB is unchanged",
        ("export", "--sweep", "1", "-o", "{db}", "--db", "{db}"),
    ),
    Case(
        "export-onto-own-wal",
        "files written",
        "`edgeprof export -o self.db-wal --db self.db` (its `-wal` or `-shm`)",
        "refused: that file belongs to the open database",
        ("export", "--sweep", "1", "-o", "{db}-wal", "--db", "{db}"),
    ),
    Case(
        "export-onto-other-db",
        "files written",
        "`edgeprof export -o other.db` where other.db is an SQLite database",
        "refused: an existing file that is not an earlier export is never replaced",
        ("export", "--sweep", "1", "-o", "{foreign}", "--db", "{db}"),
    ),
    Case(
        "export-onto-foreign-file",
        "files written",
        "`edgeprof export -o notes.txt` where notes.txt is someone's file",
        "refused: an existing file that is not an earlier export is never replaced",
        ("export", "--sweep", "1", "-o", "{foreign}", "--db", "{db}"),
    ),
    Case(
        "export-through-symlink",
        "files written",
        "`edgeprof export -o link` where link is a symbolic link (to a DB or any file)",
        "refused: a symbolic link is never followed or replaced; its target is unchanged",
        ("export", "--sweep", "1", "-o", "{link}", "--db", "{db}"),
    ),
    Case(
        "export-over-earlier-export",
        "files written",
        "`edgeprof export -o sweep.jsonl` twice",
        "the second export replaces the first (a new file renamed over it; never half-written)",
        ("export", "--sweep", "1", "-o", "{out}", "--db", "{db}"),
    ),
    Case(
        "report-html-onto-own-db",
        "files written",
        "`edgeprof report --html self.db --db self.db`",
        "refused: the output is the open database",
        ("report", "--html", "{db}", "--db", "{db}"),
    ),
    Case(
        "db-mode-under-umask",
        "files written",
        "a new database or quality cache created under `umask 022`",
        "created 0600 whatever the umask (0640 under the systemd units, whose `Group=edgeprof` reads "
        "results); its -wal/-shm follow the database",
    ),
    Case(
        "analyse-foreign-sqlite",
        "databases opened",
        "`edgeprof analyse --db app.db`, app.db another application's SQLite file",
        "refused in one line (\"not an edgeprof one\"); no table added, journal mode unchanged (sha256 "
        "equal)",
        ("analyse", "--db", "{foreign}"),
    ),
    Case(
        "report-foreign-sqlite",
        "databases opened",
        "`edgeprof report --db app.db`",
        "refused in one line; the file is unchanged",
        ("report", "--db", "{foreign}"),
    ),
    Case(
        "status-foreign-sqlite",
        "databases opened",
        "`edgeprof status --db app.db`",
        "refused in one line; the file is unchanged",
        ("status", "--db", "{foreign}"),
    ),
    Case(
        "sweeps-foreign-sqlite",
        "databases opened",
        "`edgeprof sweeps --db app.db`",
        "refused in one line; the file is unchanged",
        ("sweeps", "--db", "{foreign}"),
    ),
    Case(
        "db-version-foreign-sqlite",
        "databases opened",
        "`edgeprof db version --db app.db`",
        "refused in one line; the journal mode is never changed",
        ("db", "version", "--db", "{foreign}"),
    ),
    Case(
        "tegrastats-import-foreign-sqlite",
        "databases opened",
        "`edgeprof import-tegrastats log --db app.db`",
        "refused in one line; nothing stored, the file is unchanged",
        ("import-tegrastats", "{log}", "--db", "{foreign}"),
    ),
    Case(
        "tegrastats-import-damaged-db",
        "databases opened",
        "`edgeprof import-tegrastats log --db bad.db`, bad.db failing `integrity_check`",
        "refused in one line (how to recover); nothing written",
        ("import-tegrastats", "{log}", "--db", "{db}"),
    ),
    Case(
        "reader-damaged-db",
        "databases opened",
        "`edgeprof report`, `status`, `sweeps` or `analyse` on a damaged database",
        "one line: damaged, with the `sqlite3 .recover` recipe; the file is unchanged",
    ),
    Case(
        "db-version-wal-unchanged",
        "databases opened",
        "`edgeprof db version` on an edgeprof DB in rollback-journal mode",
        "reads it read-only: the journal mode stays as it was",
        ("db", "version", "--db", "{db}"),
    ),
    Case(
        "dangling-symlink-db",
        "databases opened",
        "`--db link.db`, a symbolic link to a file that does not exist",
        "refused: the link is not followed and nothing is created at its target",
        ("db", "upgrade", "--db", "{link}"),
    ),
    Case(
        "report-sweep-huge",
        "numbers",
        "`edgeprof report --sweep 99999999999999999999`",
        "one line: --sweep must be between 1 and 2^63-1",
        ("report", "--sweep", "99999999999999999999", "--db", "{db}"),
    ),
    Case(
        "analyse-sweep-huge",
        "numbers",
        "`edgeprof analyse --sweep 99999999999999999999`",
        "one line: --sweep must be between 1 and 2^63-1",
        ("analyse", "--sweep", "99999999999999999999", "--db", "{db}"),
    ),
    Case(
        "compact-keep-raw-huge",
        "numbers",
        "`edgeprof db compact --keep-raw 99999999999999d`",
        "one line: --keep-raw longer than 100 years; the DB is unchanged",
        ("db", "compact", "--keep-raw", "99999999999999d", "--db", "{db}"),
    ),
    Case(
        "poll-negative",
        "numbers",
        "`edgeprof agent --poll-s -5` (or `nan`, `inf`)",
        "one line: --poll-s must be a finite number of seconds above 0 and at most 86400; no busy poll",
        ("agent", "--poll-s", "-5", "--db", "{db}"),
    ),
    Case(
        "plan-n-seq-max-huge",
        "numbers",
        "a plan with `n_seq_max = 4294967297` (with `kv_unified`)",
        "refused: above the limit 256 (llama.cpp's LLAMA_MAX_SEQ; it wrapped to 1 and was stored as asked)",
    ),
    Case(
        "plan-top-k-huge",
        "numbers",
        "a plan with `top_k = 9223372036854775807`",
        "refused: above the limit 1000000 (llama.cpp's top_k is a 32-bit int; it wrapped to 1)",
    ),
    Case(
        "plan-temperature-huge",
        "numbers",
        "a plan with `temperature = 1e308` (or `nan`)",
        "refused: above the limit 100 (`nan`, `inf`: must be a finite number)",
    ),
    Case(
        "plan-serving-huge",
        "numbers",
        "a plan with `concurrency = [100000]`, `request_rate = 1e9` or `requests = 10^12`",
        "the plan is refused, each field with its ceiling (llama-server's slots, a night's run)",
    ),
    Case(
        "url-unparseable",
        "URLs",
        "`--db 'postgresql://u:pw@[::1/db'`",
        "one line: not a database path or URL (its host or port cannot be read); no part of the "
        "password shown",
        ("sweeps", "--db", "postgresql://u:pw@[::1/db"),
    ),
    Case(
        "url-password-with-at",
        "URLs",
        "`--db`, `--to` or `--push-to postgresql://u:my@Pass@127.0.0.1:1/db` (an unencoded `@` in the "
        "password)",
        "one line: the password contains an unencoded `@`, write it as `%40`; shown as `u:***@127.0.0.1`",
        ("sweeps", "--db", "postgresql://u:my@Pass@127.0.0.1:1/db"),
    ),
    Case(
        "import-corrupt-gz",
        "files read",
        "`edgeprof import broken.jsonl.gz` (gzip of bytes that are not UTF-8)",
        "one line naming the file and line: not an edgeprof export (not UTF-8, or damaged gzip); DB "
        "unchanged",
        ("import", "{foreign}", "--db", "{db}"),
    ),
    Case(
        "import-fifo",
        "files read",
        "`edgeprof import queue.fifo` (a FIFO, a device or a folder)",
        "one line: not a regular file; refused from its type, never waiting on a read",
    ),
    Case(
        "tegrastats-huge-line",
        "files read",
        "`edgeprof import-tegrastats` of a log with a line of many megabytes and no newline",
        "the line is skipped as longer than 64 KiB, read in 64 KiB pieces, never whole (only such "
        "lines: one line)",
        ("import-tegrastats", "{log}"),
    ),
)

# Plans and files dropped into the agent's queue.
QUEUE_AND_INPUTS: tuple[Case, ...] = (
    Case(
        "queue-half-written",
        "agent queue",
        "a plan copied into the queue with `cp` and read while it is still being written",
        "taken only once complete: renamed in (`mv`), or unchanged for `--settle-s` seconds (default 3); "
        "a plan that changes while it is read is read again later",
    ),
    Case(
        "queue-failed-symlink",
        "agent queue",
        "`failed/` (or `done/`) replaced by a symbolic link, or made unwritable",
        "nothing is written through the link; the plan is set aside as `NAME.toml.held` (never deleted), "
        "archiving is retried after 30 s, doubling to 1 h (by a restarted agent too), and the next plan runs",
    ),
    Case(
        "queue-long-name",
        "agent queue",
        "a plan whose file name is 245 characters long",
        "archived under a shortened name that fits (with its `.error.txt`); the agent goes on",
    ),
    Case(
        "queue-nested-arrays",
        "agent queue",
        "a 4 KB plan of 2000 nested arrays (also `edgeprof run --check`)",
        "refused in one line: TOML nested more than 32 levels; the plan is moved to `failed/` whole",
    ),
    Case(
        "queue-check-crash",
        "agent queue",
        "a plan that makes a check fail in a way edgeprof did not foresee",
        "that plan is refused into `failed/` with the error; the agent never exits on it",
    ),
    Case(
        "queue-watchdog",
        "agent queue",
        "a plan whose checks take longer than half of `WatchdogSec` (many models, a slow card)",
        "the watchdog is fed through every step that is bounded in time (validating, archiving, "
        "compacting), up to its bound; past it the agent counts as hung and systemd restarts it",
    ),
    Case(
        "quality-text-dev-zero",
        "plan inputs",
        "a quality workload with `text_file = \"/dev/zero\"` (or a folder, a socket)",
        "refused in one line: not a regular file; nothing is read",
    ),
    Case(
        "quality-text-fifo",
        "plan inputs",
        "a quality workload whose `text_file` is a FIFO",
        "refused at once (opened without blocking): not a regular file",
    ),
    Case(
        "quality-text-huge",
        "plan inputs",
        "a quality `text_file` of more than 64 MiB",
        "refused with its size; never read whole",
    ),
    Case(
        "chat-template-loops",
        "plan inputs",
        "a chat template (in the GGUF or the plan) with nested 100 000-step loops",
        "refused after 5 s of rendering; output over 4 M characters, or a `*` that would build one, is "
        "refused too",
    ),
    Case(
        "chat-template-one-wide-call",
        "plan inputs",
        "a chat template with one call that asks for a gigabyte of text (`'x'|center(10**9)`, `'%*s' % "
        "(10**9, x)`, `'{:>999999999}'.format(x)`)",
        "refused before the call allocates: a width, count or format width of more than 4 M characters is "
        "a template error",
    ),
    Case(
        "gguf-nested-arrays",
        "plan inputs",
        "a 2 GB sparse GGUF of nested empty arrays",
        "refused in milliseconds: the header walk is bounded (256 MiB of header, 4 M string items, 65 536 "
        "items in arrays of arrays), not by the counts the file declares",
    ),
    Case(
        "gguf-fifo",
        "plan inputs",
        "a model path that is a FIFO or a device",
        "refused at once: not a regular file",
    ),
)

CASES: tuple[Case, ...] = FILES_AND_DATABASES + QUEUE_AND_INPUTS


def case(case_id: str) -> Case:
    for c in CASES:
        if c.id == case_id:
            return c
    raise KeyError(case_id)


def in_area(area: str) -> list[Case]:
    return [c for c in CASES if c.area == area]


def markdown(cases: tuple[Case, ...] = CASES) -> str:
    """The docs/hostile-input.md table: one row per case, grouped by area in the order areas first appear."""
    lines = ["| Input | What edgeprof does |", "|---|---|"]
    areas = list(dict.fromkeys(c.area for c in cases))
    for area in areas:
        lines.append(f"| **{area}** | |")
        # a pipe inside a cell (a Jinja filter) would end the cell: escaped as GFM tables want
        lines.extend(
            f"| {c.given.replace('|', chr(92) + '|')} | {c.does.replace('|', chr(92) + '|')} |"
            for c in cases
            if c.area == area
        )
    return "\n".join(lines) + "\n"


def _check_unique() -> None:
    ids = [c.id for c in CASES]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"duplicate hostile case ids: {sorted(dup)}")


_check_unique()

if __name__ == "__main__":
    sys.stdout.write(markdown())
