"""``edgeprof report --show-output``: the start of each config's generated text below the terminal table,
escaped, and only when asked (a hand-built database, the Typer app in-process)."""

from __future__ import annotations

import json
from pathlib import Path

from support import dbbuild
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement

TEXT = "Paris is \x1b[2Jsunny\ntoday"


def _db(path: Path) -> Path:
    engine = open_engine(path)
    with new_session(engine) as s:
        sweep = dbbuild.add_sweep(s)
        run = dbbuild.add_run(
            s, sweep, 0, workload_json=json.dumps({"name": "w", "prompt": "Weather?", "n_predict": 8})
        )
        s.add(Measurement(run_id=run.id, kind="steady", rep=0, tg_tps=10.0, output_text=TEXT))
        s.commit()
    engine.dispose()
    return path


def test_show_output_prints_each_configs_text_escaped_and_only_when_asked(tmp_path: Path) -> None:
    db = str(_db(tmp_path / "out.db"))
    plain = CliRunner().invoke(app, ["report", "--db", db])
    assert plain.exit_code == 0, plain.output
    assert "Generated text" not in plain.output and "sunny" not in plain.output
    shown = CliRunner().invoke(app, ["report", "--db", db, "--show-output"])
    assert shown.exit_code == 0, shown.output
    assert '  m ctx=512 ngl=0 thr=4 wl=w: "Paris is \\x1b[2Jsunny\\ntoday"' in shown.output.splitlines()
    assert "\x1b" not in shown.output
