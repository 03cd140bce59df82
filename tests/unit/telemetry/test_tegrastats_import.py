"""Tests for ``edgeprof import-tegrastats``: JSON lines, summary, SQLite import and bad input.

Logs are the real captures (``tests/fixtures/captures/tegrastats``) or small files written here from their
lines; the values checked for the first Orin Nano line were transcribed by hand from the capture text.
"""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path

import pytest
import typer
from sqlalchemy import func, select
from support.captures import TEGRASTATS_CAPTURES, capture_path
from typer.testing import CliRunner

from edgeprof.cli.tegrastats import register
from edgeprof.collectors import parse_line, record_to_json, record_to_metrics
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Device, Sweep
from edgeprof.storage.samples import count_samples, read_samples
from edgeprof.telemetry.tegrastats_import import (
    SOURCE,
    TegrastatsImportError,
    import_log,
    parse_timestamp,
)

TEGRASTATS_DIR = TEGRASTATS_CAPTURES
SCHEMA_KEYS = set(record_to_json(parse_line("")))
ORIN_NANO = "orin-nano-8gb_jp6_1.txt"
AGX_ORIN = "agx-orin-32gb_jp6_1.txt"


def captures() -> list[Path]:
    files = sorted(TEGRASTATS_DIR.glob("*.txt"))
    if not files:
        pytest.fail(f"no tegrastats captures under {TEGRASTATS_DIR}")
    return files


def capture(name: str) -> Path:
    return capture_path(name, TEGRASTATS_DIR)


def data_lines(path: Path) -> list[str]:
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def run_json(path: Path) -> tuple[list[dict[str, object]], str]:
    out, err = io.StringIO(), io.StringIO()
    n = import_log(path, True, None, out, err=err)
    objects = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(objects) == n
    return objects, err.getvalue()


def test_every_capture_imports_as_json_with_exactly_the_schema() -> None:
    files = captures()
    for path in files:
        objects, _notes = run_json(path)
        assert len(objects) == len(data_lines(path)), path.name
        for obj, line in zip(objects, data_lines(path), strict=True):
            assert set(obj) == SCHEMA_KEYS, path.name
            assert obj == json.loads(json.dumps(record_to_json(parse_line(line))))


def test_every_capture_summarises_and_stores(tmp_path: Path) -> None:
    db = tmp_path / "all.db"
    total_rows = 0
    for path in captures():
        out = io.StringIO()
        n = import_log(path, False, None, out)
        assert out.getvalue().startswith(f"{path.name}: {n} records\n")
        stored = io.StringIO()
        assert import_log(path, False, str(db), stored) == n
        assert "into sweep" in stored.getvalue()
        total_rows += sum(len(record_to_metrics(parse_line(ln))) for ln in data_lines(path))
    engine = open_engine(db)
    with new_session(engine) as session:
        assert count_samples(session) == total_rows == len(read_samples(session))
        assert session.scalar(select(func.count()).select_from(Sweep)) == len(captures())
        assert {r.source for r in read_samples(session)} == {SOURCE}
    engine.dispose()


def test_first_orin_nano_line_by_hand() -> None:
    objects, notes = run_json(capture(ORIN_NANO))
    first = objects[0]
    # 11-15-2024 08:38:09 RAM 6185/7620MB (lfb 8x2MB) SWAP 851/3810MB (cached 1MB)
    # CPU [15%@729,11%@729,14%@729,13%@729,11%@729,8%@729] EMC_FREQ 43%@2133 GR3D_FREQ 63%@[621] ...
    # APE 200 cpu@53.968C ... tj@53.968C soc1@51.656C VDD_IN 12479mW/12479mW ...
    assert first["timestamp"] == "11-15-2024 08:38:09"
    assert first["ram"] == {"used_mb": 6185, "total_mb": 7620, "lfb_blocks": 8, "lfb_block_mb": 2}
    assert first["swap"] == {"used_mb": 851, "total_mb": 3810, "cached_mb": 1}
    assert first["cpus"] == [{"load_pct": load, "freq_mhz": 729} for load in (15, 11, 14, 13, 11, 8)]
    assert first["emc"] == {"load_pct": 43, "freq_mhz": 2133}
    assert first["gpu"] == [{"name": "GR3D_FREQ", "load_pct": 63, "freq_mhz": [621]}]
    temps = first["temps_c"]
    assert isinstance(temps, dict) and temps["tj"] == 53.968 and temps["soc1"] == 51.656
    rails = first["rails_mw"]
    assert isinstance(rails, list) and rails[0] == {"name": "VDD_IN", "cur": 12479, "avg": 12479}
    engines = first["engines"]
    assert isinstance(engines, dict) and engines["APE"] == "200" and engines["NVDEC"] == "off"
    assert first["unknown"] == []
    # Absent fields are null, not missing: the second line has no EMC_FREQ.
    assert objects[1]["emc"] is None
    assert notes == ""


def test_summary_of_orin_nano() -> None:
    out = io.StringIO()
    assert import_log(capture(ORIN_NANO), False, None, out) == 2
    text = out.getvalue()
    assert "orin-nano-8gb_jp6_1.txt: 2 records" in text
    assert "11-15-2024 08:38:09 .. 06-18-2025 11:25:24" in text
    assert "tj 53.968" in text  # max over 53.968 and 50.25
    vdd_in = next(line for line in text.splitlines() if line.strip().startswith("vdd_in "))
    assert vdd_in.split()[1:] == ["8651.5", "/", "12479"]  # mean of 12479 and 4824, max


def test_db_import_of_orin_nano(tmp_path: Path) -> None:
    path = capture(ORIN_NANO)
    db = tmp_path / "x.db"
    out = io.StringIO()
    assert import_log(path, False, str(db), out) == 2
    assert "imported 2 records (60 samples)" in out.getvalue()
    engine = open_engine(db)
    with new_session(engine) as session:
        sweep = session.scalars(select(Sweep)).one()
        assert sweep.name == f"import:{path.name}"
        assert sweep.status == "imported"
        assert sweep.n_specs == 0
        device = session.get(Device, sweep.device_id)
        assert device is not None and device.hostname == "imported"
        assert device.cpu_count == 6 and device.ram_total_mb == 7620
        # 4 mem + 6 cores x 2 + cpu + 2 emc + 2 gpu + 6 temps + 3 rails = 30 metrics per line
        assert count_samples(session, sweep.id) == 60
        rows = read_samples(session, sweep.id, metrics={"power.vdd_in_mw"})
        assert [r.value for r in rows] == [12479, 4824]
        first_wall = datetime(2024, 11, 15, 8, 38, 9).timestamp()
        assert rows[0].t_wall == first_wall and rows[0].t_mono == 0.0
        assert rows[1].t_mono == datetime(2025, 6, 18, 11, 25, 24).timestamp() - first_wall
        assert rows[0].source == SOURCE and rows[0].run_id is None
        emc = [r.value for r in read_samples(session, sweep.id, metrics={"emc.freq_mhz"})]
        assert sorted(emc, key=lambda v: v is None) == [2133, None]
        assert json.loads(sweep.sampler_json or "{}")["clock"] == "timestamps"
    engine.dispose()


def test_db_import_without_timestamps_uses_record_index(tmp_path: Path) -> None:
    lines = data_lines(capture(AGX_ORIN))
    log = tmp_path / "agx.log"
    log.write_text("\n".join([lines[0], "", "# a comment", lines[0]]) + "\n", encoding="utf-8")
    db = tmp_path / "x.db"
    assert import_log(log, False, str(db), io.StringIO()) == 2
    engine = open_engine(db)
    with new_session(engine) as session:
        rows = read_samples(session, metrics={"temp.tj_c"})
        assert [(r.t_mono, r.t_wall, r.value) for r in rows] == [(0.0, 0.0, 53.062), (1.0, 1.0, 53.062)]
        sweep = session.scalars(select(Sweep)).one()
        assert json.loads(sweep.sampler_json or "{}")["clock"] == "record_index"
    engine.dispose()


def test_unknown_fields_and_foreign_lines_are_counted(tmp_path: Path) -> None:
    line = data_lines(capture(AGX_ORIN))[0]
    log = tmp_path / "odd.log"
    log.write_text(f"{line} WEIRD?field\nnot tegrastats at all\n{line}\n", encoding="utf-8")
    out = io.StringIO()
    assert import_log(log, False, None, out) == 2
    assert "1 lines had unknown fields" in out.getvalue()
    assert "1 lines were not tegrastats output (skipped)" in out.getvalue()

    objects, notes = run_json(log)
    assert objects[0]["unknown"] == ["WEIRD?field"]
    assert "1 lines had unknown fields" in notes  # notes stay off the JSON stream


def test_parse_timestamp() -> None:
    assert parse_timestamp("11-15-2024 08:38:09") == datetime(2024, 11, 15, 8, 38, 9)
    assert parse_timestamp("2024-11-15T08:38:09.5") == datetime(2024, 11, 15, 8, 38, 9, 500000)
    assert parse_timestamp("13-45-2024 08:38:09") is None
    assert parse_timestamp(None) is None


@pytest.mark.parametrize("kind", ["missing", "directory", "binary", "latin1", "no_lines", "empty"])
def test_bad_input_raises(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "log.txt"
    if kind == "directory":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00RAM 1/2MB\n" + bytes(range(256)))
    elif kind == "latin1":
        path.write_bytes(b"RAM 1/2MB caf\xe9\n")
    elif kind == "no_lines":
        path.write_text("hello\nworld\n", encoding="utf-8")
    elif kind == "empty":
        path.write_text("# nothing\n\n", encoding="utf-8")
    for as_json, db in ((True, None), (False, None), (False, str(tmp_path / "x.db"))):
        out = io.StringIO()
        with pytest.raises(TegrastatsImportError) as info:
            import_log(path, as_json, db, out, err=io.StringIO())
        assert "\n" not in str(info.value)
        assert str(path) in str(info.value)
        assert out.getvalue() == ""  # rejected before any output
    if (tmp_path / "x.db").exists():
        engine = open_engine(tmp_path / "x.db")
        with new_session(engine) as session:
            assert session.scalar(select(func.count()).select_from(Sweep)) == 0
        engine.dispose()


def test_unopenable_database(tmp_path: Path) -> None:
    (tmp_path / "db_is_a_dir").mkdir()
    with pytest.raises(TegrastatsImportError, match="cannot open database"):
        import_log(capture(AGX_ORIN), False, str(tmp_path / "db_is_a_dir"), io.StringIO())


def make_app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)

    @app.callback()
    def main() -> None:
        """A group, so that the command is invoked by its name as under edgeprof."""

    register(app)
    return app


@pytest.mark.parametrize("kind", ["missing", "directory", "binary"])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "log.txt"
    if kind == "directory":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    result = CliRunner().invoke(make_app(), ["import-tegrastats", str(path), "--json"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgeprof: error: "), result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_cli_json_and_db(tmp_path: Path) -> None:
    path = capture(ORIN_NANO)
    app = make_app()
    result = CliRunner().invoke(app, ["import-tegrastats", str(path), "--json"])
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(objects) == 2 and all(set(o) == SCHEMA_KEYS for o in objects)

    db = tmp_path / "cli.db"
    result = CliRunner().invoke(app, ["import-tegrastats", str(path), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "imported 2 records" in result.stdout
    engine = open_engine(db)
    with new_session(engine) as session:
        assert count_samples(session) == 60
    engine.dispose()
