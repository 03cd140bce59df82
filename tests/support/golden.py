"""Golden outputs: what edgeprof's readers print for one fixed database, frozen so a refactoring can be
checked byte for byte.

The database is a real sweep recorded once on the development VM (tiny demo models, both runners, a
quality workload, two depths), then kept as an SQL dump in ``tests/fixtures/golden/sweeps.sql.gz``. Every
output is produced by the installed ``edgeprof`` command in a subprocess, as a user would get it, with the
terminal width, colours and time zone pinned.

    python tests/support/golden.py record-db DIR   # run the fixture sweeps (needs llama.cpp + llama-server)
    python tests/support/golden.py freeze          # write the golden files from the stored database
"""

from __future__ import annotations

import gzip
import html.parser
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
DUMP = GOLDEN_DIR / "sweeps.sql.gz"
EDGEPROF = [sys.executable, "-m", "edgeprof"]

FIXTURE_PLAN = """\
name = "golden"

[matrix]
models = [
  {{ path = "{f16}", label = "tiny-f16" }},
  {{ path = "{q8}", label = "tiny-q8_0" }},
  {{ path = "{q4}", label = "tiny-q4_k_m" }},
]
ctx = [512]
ngl = [0]
threads = [1]
depth = [0, 64]
runner = ["llama-cpp", "llama-server"]
concurrency = [1, 2]

[[workload]]
name = "gen"
prompt_tokens = 32
n_predict = 16

[[workload]]
name = "kld"
kind = "quality"
ctx = 128
chunks = 2

[serving]
requests = 4

[repeat]
cold = 1
warmup = 1
steady = 3

[run]
timeout_s = 120
"""

# Plans ``run --check`` must refuse, each with its own kind of mistake; the messages are the golden.
_WORKLOAD = '[[workload]]\nname = "w"\nprompt = "hi"\nn_predict = 8\n'
BAD_PLANS: dict[str, str] = {
    "unknown-key": 'name = "x"\nbogus = 1\n[matrix]\nmodels = ["{q8}"]\n' + _WORKLOAD,
    "wrong-types": (
        'name = 3\n[matrix]\nmodels = ["{q8}"]\nctx = ["big"]\nngl = [-1]\nthreads = [0]\n'
        '[[workload]]\nname = "w"\nprompt = "hi"\nn_predict = "many"\n'
    ),
    "missing-model": '[matrix]\nmodels = ["does-not-exist.gguf"]\n' + _WORKLOAD,
    "not-gguf": '[matrix]\nmodels = ["{not_gguf}"]\n' + _WORKLOAD,
    "ctx-too-small": (
        '[matrix]\nmodels = ["{q8}"]\nctx = [32]\n'
        '[[workload]]\nname = "w"\nprompt_tokens = 64\nn_predict = 64\n'
    ),
    "duplicates": (
        '[matrix]\nmodels = [{{ path = "{q8}", label = "a" }}, {{ path = "{q4}", label = "a" }}]\n'
        + _WORKLOAD
        + _WORKLOAD.replace('"hi"', '"ho"')
    ),
    "bounds": (
        '[matrix]\nmodels = ["{q8}"]\nctx = [1e999]\nn_batch = [100000]\n[repeat]\nsteady = 5000\n'
        '[run]\ntimeout_s = 999999\n' + _WORKLOAD + "seed = -1\n"
    ),
    "serving": (
        '[matrix]\nmodels = ["{q8}"]\nrunner = ["nope"]\nconcurrency = [0]\n'
        "[serving]\nrequests = 0\nwhat = 1\n" + _WORKLOAD
    ),
    "quality": (
        '[matrix]\nmodels = ["{q8}"]\n[[workload]]\nname = "q"\nkind = "quality"\nctx = 1\nchunks = 0\n'
        'reference = "missing"\n'
    ),
    "chat-without-template": (
        '[matrix]\nmodels = ["{q8}"]\n[[workload]]\nname = "c"\n'
        'messages = [{{ role = "user", content = "hi" }}]\nn_predict = 8\n'
    ),
    "toml-syntax": "[matrix\nmodels = 1\n",
}


def env_for(db: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"EDGEPROF_DB": str(db), "COLUMNS": "120", "NO_COLOR": "1", "TZ": "UTC", "LC_ALL": "C.UTF-8"})
    env.pop("FORCE_COLOR", None)
    return env


def cli(args: list[str], db: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EDGEPROF, *args], env=env_for(db), cwd=cwd, capture_output=True, text=True, timeout=300
    )


def load_db(target: Path) -> Path:
    """The fixture database, restored from its dump into ``target`` (a new file)."""
    con = sqlite3.connect(target)
    with gzip.open(DUMP, "rt", encoding="utf-8") as f:
        con.executescript(f.read())
    con.close()
    return target


class _TableText(html.parser.HTMLParser):
    """Every <table>'s cells, one line per row, cells joined by " | "."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        elif self._row is not None and data.strip():
            self._row.append(f"<text outside a cell: {data.strip()}>")


def html_tables_text(html_text: str) -> str:
    parser = _TableText()
    parser.feed(html_text)
    out: list[str] = []
    for i, table in enumerate(parser.tables):
        out.append(f"## table {i + 1}")
        out.extend(" | ".join(row) for row in table)
    return "\n".join(out) + "\n"


def check_fixture_files(work: Path) -> dict[str, str]:
    """The files the bad plans name: two tiny demo GGUFs and a file that is not GGUF (format fields)."""
    from edgeprof.gguf import build_demo_models


    models = build_demo_models(work / "models", "tiny")
    not_gguf = work / "models" / "notes.gguf"
    not_gguf.write_text("not a gguf file\n")
    return {"q8": str(models["Q8_0"]), "q4": str(models["Q4_K_M"]), "not_gguf": str(not_gguf)}


def outputs(db: Path, work: Path) -> dict[str, str]:
    """name -> exact text, for every golden output."""
    out: dict[str, str] = {}
    # Readers never migrate a database themselves; a dump recorded at an older schema is brought up first.
    upgraded = cli(["db", "upgrade"], db)
    if upgraded.returncode != 0:
        raise RuntimeError(f"db upgrade of the fixture failed: {upgraded.stderr}")

    def take(name: str, args: list[str], cwd: Path | None = None) -> None:
        r = cli(args, db, cwd)
        out[name] = f"rc={r.returncode}\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}"

    take("report_table.txt", ["report", "--sweep", "1"])
    take("report_wide.txt", ["report", "--sweep", "1", "--wide"])
    for fmt in ("md", "csv", "json"):
        take(f"report.{fmt}", ["report", "--sweep", "1", "--format", fmt])
    take("report_sweep2_table.txt", ["report", "--sweep", "2"])
    take("compare.txt", ["compare", "1", "2"])
    take("compare.md", ["compare", "1", "2", "--format", "md"])
    take("compare.json", ["compare", "1", "2", "--format", "json"])
    take("status.json", ["status", "--json"])
    take("status.txt", ["status"])
    take("sweeps.txt", ["sweeps"])
    html_path = work / "report.html"
    r = cli(["report", "--sweep", "1", "--format", "csv", "--html", str(html_path)], db)
    out["html_tables.txt"] = f"rc={r.returncode}\n" + html_tables_text(html_path.read_text(encoding="utf-8"))
    fields = check_fixture_files(work)
    plans = work / "plans"
    plans.mkdir()
    lines: list[str] = []
    for name, text in BAD_PLANS.items():
        path = plans / f"{name}.toml"
        path.write_text(text.format(**fields), encoding="utf-8")
        r = cli(["run", f"plans/{name}.toml", "--check"], db, cwd=work)
        msg = (r.stdout + r.stderr).replace(str(work), "<work>")
        lines.append(f"### {name}: rc={r.returncode}\n{msg}")
    out["run_check.txt"] = "\n".join(lines)
    return out


def freeze() -> None:
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        db = load_db(work / "golden.db")
        for name, text in outputs(db, work).items():
            (GOLDEN_DIR / name).write_text(text, encoding="utf-8")
            print(f"wrote {GOLDEN_DIR / name}")


def record_db(work: Path) -> None:
    """Run the fixture plan twice (sweeps 1 and 2) into a new database and store its dump."""
    from edgeprof.gguf import build_demo_models


    work.mkdir(parents=True, exist_ok=True)
    models = build_demo_models(work / "models", "tiny")
    plan = work / "golden.toml"
    plan.write_text(
        FIXTURE_PLAN.format(f16=models["F16"], q8=models["Q8_0"], q4=models["Q4_K_M"]), encoding="utf-8"
    )
    db = work / "golden.db"
    if db.exists():
        db.unlink()
    for args in (["run", str(plan)], ["run", str(plan), "--new"]):
        r = cli(args, db)
        print(r.stdout[-2000:], r.stderr[-2000:])
        if r.returncode != 0:
            raise SystemExit(f"fixture sweep failed: rc={r.returncode}")
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    with gzip.open(DUMP, "wt", encoding="utf-8", compresslevel=9) as f:
        for line in con.iterdump():
            f.write(line + "\n")
    con.close()
    print(f"wrote {DUMP} ({DUMP.stat().st_size} bytes)")


COMMANDS: dict[str, Callable[..., None]] = {"freeze": freeze, "record-db": record_db}

if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "record-db" and len(sys.argv) == 3:
        record_db(Path(sys.argv[2]))
    elif sys.argv[1:] == ["freeze"]:
        freeze()
    else:
        raise SystemExit(__doc__)
