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

# The newer surfaces: the metrics textfile, the openai target, llama-bench import, templates, labels.
NEW_SURFACES: tuple[Case, ...] = (
    Case(
        "textfile-onto-own-db",
        "files written",
        "`edgeprof metrics --db r.prom --textfile r.prom` (the database named like a textfile)",
        "refused before the database is opened: the output is the database; the DB is unchanged",
        ("metrics", "--db", "{db}", "--textfile", "{db}"),
    ),
    Case(
        "textfile-foreign-or-fifo",
        "files written",
        "`edgeprof metrics --textfile other.prom` where other.prom is another exporter's file, a FIFO, a "
        "symbolic link or a hard link to the database",
        "refused in one line; only a textfile edgeprof wrote (its `# HELP edgeprof_` start) is replaced, "
        "through a new file renamed over it",
        ("metrics", "--db", "{db}", "--textfile", "{foreign}"),
    ),
    Case(
        "foreign-sqlite-own-schema-version",
        "databases opened",
        "`--db app.db` where app.db is another application's SQLite file with a `schema_version(version "
        "INTEGER, description TEXT, applied_at TEXT)` table, to any command (`run`, `import`, `push --to`, "
        "`db upgrade`, `agent`, ...)",
        "refused in one line: edgeprof's database is known by its mark (`PRAGMA application_id` "
        "0x45646750), not by a table name; journal mode, tables and rows unchanged (sha256 equal)",
        ("db", "upgrade", "--db", "{foreign}"),
    ),
    Case(
        "foreign-sqlite-flyway",
        "databases opened",
        "`--db app.db` with Flyway's `schema_version(version VARCHAR)` holding `'1.1'`",
        "refused in one line by every command, no traceback; never told to `db upgrade` it",
        ("report", "--db", "{foreign}"),
    ),
    Case(
        "foreign-postgresql",
        "databases opened",
        "`--db postgresql://…/appdb`, another application's PostgreSQL database with a `schema_version` "
        "table (ours in shape, or Flyway's)",
        "refused in one line by readers and writers: edgeprof's database is known by its `edgeprof_meta` "
        "row; no table or row added",
    ),
    Case(
        "edgeprof-db-before-the-mark",
        "databases opened",
        "an edgeprof database written before the mark existed (no `application_id`)",
        "recognised by edgeprof's own first schema step on record with its tables; a writer adds the mark "
        "when it next opens it, a reader changes nothing",
    ),
    Case(
        "url-password-parameter",
        "URLs",
        "`--db 'postgresql://u@127.0.0.1:1/db?password=pw&sslpassword=pw2'` (or `passfile=`)",
        "every message, `push` line and `compare` header shows `password=***`; no part of a secret shown "
        "(a URL in `$EDGEPROF_DB` too: used as a URL, never as a file name)",
        ("sweeps", "--db", "postgresql://u@127.0.0.1:1/db?password=hunter2&sslpassword=hunter3"),
    ),
    Case(
        "url-libpq-conninfo",
        "URLs",
        "`--db 'host=127.0.0.1 password=pw dbname=x'` (a libpq connection string)",
        "one line: a libpq connection string, not a path; give a postgresql:// URL; the password masked; "
        "no file created",
        ("sweeps", "--db", "host=127.0.0.1 password=hunter2 dbname=x"),
    ),
    Case(
        "target-drips",
        "serving targets",
        "an OpenAI-compatible target that sends `/v1/models`, `/props` or `/metrics` one byte at a time",
        "each control reply is bounded whole (connect, first byte, body) by 5 s and by what is left of "
        "`timeout_s`: a failed run, kept and counted, never `running`; the next config runs",
    ),
    Case(
        "target-gzip-bomb",
        "serving targets",
        "a target whose `/v1/models` is a gzip bomb",
        "asked for no encoding, read raw, decoded only up to 1 MiB: a failed run naming the size cap",
    ),
    Case(
        "target-malformed-json",
        "serving targets",
        "replies like `{\"choices\": 5}`, `{\"data\": 5}`, JSON nested 100 000 deep, `completion_tokens` "
        "of 2^63, `n_ctx` of 10^30",
        "every field checked for type and range before use: a field that fails is not offered (counted "
        "from chunks, left NULL); a reply that fails is a failed request or run, never an exception",
    ),
    Case(
        "queue-name-not-utf8",
        "agent queue",
        "a plan whose file name is not UTF-8 (`b'\\xff\\xfe-bad-utf8.toml'`)",
        "archived by a safe name (each byte that is not UTF-8 becomes `_`) and reported; the agent goes on "
        "and the next plan runs (it once exited, and crashed again at every restart)",
    ),
    Case(
        "labels-raw-to-readers",
        "labels",
        "a model label (a GGUF's file name, a plan's label) holding OSC 52, CR, a C1 CSI or a newline, "
        "`=cmd|...` or `<script>`, `[x](javascript:...)`",
        "shown as its escapes (`\\x1b]52...`) on one line by `compare`, the progress lines, the agent's "
        "log and `bench`; CSV neutralises a formula with a leading `'` and writes a CR as `\\r`; Markdown "
        "escapes what would be markup",
    ),
    Case(
        "llama-bench-import-malformed",
        "files read",
        "`edgeprof import-llama-bench` of records with `\"build_number\": \"abc\"`, "
        "`\"flash_attn\": \"on\"`, "
        "`n_threads 1e400`, `n_prompt 10**30`, samples of 10^30 ns or a million samples, deep JSON",
        "one line naming the record and the field (every field of llama-bench's list with its type and "
        "range; at most 10 000 samples a record, 200 000 a file, each at most 10^15 ns); nothing stored",
    ),
    Case(
        "llama-bench-import-fifo",
        "files read",
        "`edgeprof import-llama-bench` of a FIFO or `/dev/zero`",
        "refused at once from its type (never waiting on a read); at most 64 MiB is ever read",
    ),
    Case(
        "gguf-counts-out-of-range",
        "plan inputs",
        "a GGUF with `context_length` 2^64-1, `block_count` 2^63 or `head_count_kv = [\"a\", \"b\"]`",
        "refused by `run --check` (and `run`, `bench`) in one line naming the key: every count of the "
        "model's shape must be a whole number in 0..2^31-1, at most 65 536 layers",
    ),
    Case(
        "collector-name-typo",
        "plan inputs",
        "`[collect] collectors = [\"psutil\"]` (a collector that does not exist)",
        "refused by `run --check`: unknown collector, with the list of known ones",
    ),
    Case(
        "metrics-half-open",
        "serving targets",
        "400 half-open connections to the agent's `/metrics` (`--metrics-port`)",
        "served by 4 pooled threads, each connection closed after 5 s without a request; past 16 at once a "
        "new one is closed at once (it once made 403 threads, with no timeout)",
    ),
    Case(
        "model-replaced-mid-sweep",
        "plan inputs",
        "a model file replaced by another quant after the sweep hashed it",
        "the run fails with the reason (size and mtime changed since the hash; or llama.cpp's own size of "
        "what it loaded differs from the hashed file's tensor bytes): never stored under the old identity",
    ),
    Case(
        "small-hostile-options",
        "numbers",
        "`agent --until 99999999999999999999:00`, `agent --queue link` (a symlinked folder), `--db c#1.db` "
        "(or `?`, `%41`), `kld_mean = nan` or `inf`, `bench -t 1000`",
        "one line each (exit 2): HH:MM expected; the queue is never followed through a link; a file name "
        "SQLite would read as a URL; a finite number; more threads than this machine's CPUs",
    ),
    Case(
        "agent-killed-status",
        "agent queue",
        "`edgeprof status` after `kill -9` of the agent on this machine",
        "says `died` at once (its pid is gone without a stop), not `not responding`",
    ),
    Case(
        "chat-template-over-1-mib",
        "plan inputs",
        "a GGUF whose `tokenizer.chat_template` is longer than 1 MiB",
        "refused by `run --check` as too long (its size and the limit), not reported as missing",
    ),
    Case(
        "chat-template-big-numbers",
        "plan inputs",
        "a chat template `{{ ((99 ** 1024) ** 1024) ** 1024 }}` (one big-integer operation)",
        "refused before it is computed: an integer result past 65 536 bits is a template error; every "
        "render runs in a child with its CPU time and memory limited (RLIMIT_CPU, RLIMIT_AS +512 MiB)",
    ),
    Case(
        "chat-template-large-results",
        "plan inputs",
        "a chat template using `x.replace('x', a)`, `~` doubling in a loop, `|indent(n)` or `join` to "
        "build gigabytes",
        "refused from the arguments before the text is built (over 4 M characters); what no check "
        "foresees ends at the child's memory limit, in one line",
    ),
    Case(
        "chat-template-surrogate",
        "plan inputs",
        "a chat template rendering `'\\ud800'` (a lone surrogate)",
        "refused in `run --check`: the text is not valid Unicode",
    ),
)

# The surfaces added since: logs users have (import-log), models quantize, --device-name, PostgreSQL URLs.
LOGS_QUANTIZE_URLS: tuple[Case, ...] = (
    Case(
        "log-line-shapes",
        "files read",
        "`edgeprof import-log` of a log with a CR inside a line, CR LF or lone-CR line ends, or a UTF-8 BOM "
        "(tegrastats, jtop or nvidia-smi)",
        "read line by line: LF, CR LF and a lone CR each end a line, a BOM is dropped; the same records "
        "and timestamps as the LF file (a CR once ended in an internal error, a BOM lost every timestamp)",
    ),
    Case(
        "log-nvidia-smi-odd-cells",
        "files read",
        "an nvidia-smi CSV with `clocks_event_reasons.active` of `0xZZ` (or wider than 64 bits) or a "
        "400-digit GPU index",
        "the reason mask read as not logged (the row kept); the index one line naming the record: a whole "
        "number 0..1023",
    ),
    Case(
        "log-interval-not-finite",
        "numbers",
        "`--interval-ms inf` (or `nan`, `1e308`, `0`) to `import-log`, `import-tegrastats` or `analyse`",
        "one line: --interval-ms must be a finite number from 1 to 86400000 ms",
        ("import-log", "{log}", "--interval-ms", "inf"),
    ),
    Case(
        "log-kernel-file-or-fifo",
        "files read",
        "`edgeprof import-log /proc/kmsg` (or a FIFO, a device, a folder)",
        "refused at once: opened without blocking, a non-regular file refused by its type and a file of "
        "size 0 (a kernel file) as empty; only the bytes a file held when opened are read",
    ),
    Case(
        "log-not-a-log-never-echoed",
        "files read",
        "`edgeprof import-tegrastats link` (or `import-log`), link a symbolic link to a password file",
        "one line: no tegrastats lines; no byte of the file is printed (the parser's notes on unknown "
        "tokens are counted, never quoted)",
    ),
    Case(
        "log-device-name-checked",
        "numbers",
        "`edgeprof import-log log --device-name` holding a newline, ESC or 10 kB",
        "refused in one line as the global `--device-name` is (empty, control characters, over 64 "
        "characters); nothing stored",
        ("import-log", "{log}", "--device-name", "rig\nforged", "--db", "{db}"),
    ),
    Case(
        "log-memory-bounded",
        "files read",
        "a 7 000-column x 1 000-row jtop CSV, or 300 000 tegrastats lines (SYNTHETIC, 21 MB and 94 MB)",
        "read in 64 KiB blocks, stored block by block: peak RSS 78 MiB and 174 MiB (was 1 989 and 1 340); "
        "more than 512 reading columns refused; the verdict holds at most 500 000 readings (a longer log "
        "judged on 1 line in 2, 4, ..., said)",
    ),
    Case(
        "quantize-planted-link",
        "files written",
        "`edgeprof models quantize` with `out/m-q8_0.gguf.tmp` (or `.meta.tmp`) a symbolic link to another "
        "file, or a FIFO",
        "never used: each output is written into a new file of a random name (O_CREAT, O_EXCL, O_NOFOLLOW) "
        "handed to llama.cpp as /proc/self/fd/N, then renamed; the link and its target unchanged",
    ),
    Case(
        "quantize-onto-foreign-file",
        "files written",
        "`edgeprof models quantize` where an output's name is someone's file, an SQLite database, a "
        "symbolic link or a FIFO",
        "refused in one line before any quant is made: only an earlier GGUF is replaced; the file unchanged",
    ),
    Case(
        "quantize-controls-in-names",
        "files written",
        "`edgeprof models quantize` with ESC, CR or a newline in `--out` or `--types`",
        "every path and type shown as its escapes: one line per output, none forged",
    ),
    Case(
        "pg-silent-server",
        "URLs",
        "`--db postgresql://u@127.0.0.1:PORT/db` to a server that accepts TCP and never answers (`report`, "
        "`sweeps`, `push --to`)",
        "one line within 15 s: every connection has connect_timeout 5 s, TCP keepalives, and a "
        "statement_timeout of 300 s (a URL's own value is kept)",
    ),
    Case(
        "url-password-key-encoded",
        "URLs",
        "`--db 'postgresql://u@127.0.0.1:1/db?%70assword=pw'` (the key percent-encoded)",
        "masked like `password=`: shown as `%70assword=***`",
        ("sweeps", "--db", "postgresql://u@127.0.0.1:1/db?%70assword=hunter2"),
    ),
    Case(
        "sqlite-url-with-query",
        "URLs",
        "`push --to 'sqlite:///dir/x.db?mode=ro&uri=true'` (or `--db`)",
        "one line: an sqlite URL with a query is not supported; no file (`x.db?mode=ro`) created",
    ),
    Case(
        "db-damaged-one-line",
        "databases opened",
        "a database whose `quick_check` answers with a newline of its own",
        "one line: damaged (quick_check's text joined), the `.recover` recipe",
    ),
    Case(
        "bench-gguf-counts",
        "plan inputs",
        "`edgeprof bench -m m.gguf` where `head_count_kv = [\"a\", \"b\"]`",
        "refused in one line naming the key, as `run --check` does (it ended `load_failed`)",
    ),
    Case(
        "poll-tiny",
        "numbers",
        "`edgeprof agent --poll-s 1e-300`",
        "one line: --poll-s must be at least 0.1 s (ten scans a second), no busy poll",
        ("agent", "--poll-s", "1e-300", "--db", "{db}"),
    ),
    Case(
        "agent-state-after-exit",
        "agent queue",
        "`edgeprof status` after the agent exited, or after it ran a plan whose name is not UTF-8",
        "says `stopped`, never the last state it had (`idle`); the state is recorded with the name made "
        "UTF-8",
    ),
)

CASES: tuple[Case, ...] = FILES_AND_DATABASES + QUEUE_AND_INPUTS + NEW_SURFACES + LOGS_QUANTIZE_URLS


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
