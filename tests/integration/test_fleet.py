"""The fleet (agent/fleet/, storage/transfer.py): three simulated devices (distinct device identities, each
its own SQLite file) run a real sweep, push concurrently into one PostgreSQL database, then push again; the
central DB lists exactly their sweeps, report and compare work across devices, and nothing is added twice.
The counts push prints are the rows that arrived, on both backends. Every panel of the shipped Grafana
dashboard returns rows on the central DB. Export/import follow the same identity rules, and so does a
concurrent find-or-create.

The simulated devices' GPU is the suite's fake NVML module (tests/support/fakes.FakeNvml: fixed synthetic
temperature and power readings), beside this machine's real collectors, so every run has a temperature and
a power curve to chart whatever sensors the test machine has."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, func, select, text
from support.fakes import FakeNvml, FakeRoot
from support.plans import plan_toml

from edgeprof.collectors import NvmlCollector, build_collectors
from edgeprof.fleet import grafana_dashboard
from edgeprof.plan import parse_plan
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.identity import DERIVED_TABLES, LOCAL_ONLY_TABLES
from edgeprof.storage.models import Base, Device, Sweep
from edgeprof.sweep import Telemetry, run_plan

pytestmark = [pytest.mark.llama, pytest.mark.timeout(600)]

def fleet_plan(model: Path, name: str = "fleet") -> str:
    """One config of one model, two steady reps, telemetry every 50 ms (so samples travel too)."""
    return plan_toml(
        [model],
        name=name,
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 6}],
        repeat={"warmup": 0, "steady": 2},
        run={"timeout_s": 600},  # the parser's default: this plan once had no [run] table
        tables={"collect": {"interval_ms": 50, "idle_s": 0.2}},
    )

# Synthetic device identities: a fake root per device (hostname, machine id, board model).
DEVICES = {
    "orin-nano-1": "NVIDIA Jetson Orin Nano Developer Kit",
    "agx-orin-1": "NVIDIA Jetson AGX Orin Developer Kit",
    "orin-nx-1": "NVIDIA Jetson Orin NX",
}


def edgeprof(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args], capture_output=True, text=True, timeout=timeout
    )


def row_counts(url: str) -> dict[str, int]:
    from sqlalchemy import inspect

    engine = create_engine(url)
    with engine.connect() as conn:
        present = set(inspect(conn).get_table_names())  # a push killed early may have created nothing yet
        counts = {
            t.name: int(conn.execute(select(func.count()).select_from(t)).scalar() or 0)
            for t in Base.metadata.sorted_tables
            if t.name in present
        }
        counts.update({t.name: 0 for t in Base.metadata.sorted_tables if t.name not in present})
    engine.dispose()
    return counts


NOT_PUSHED = DERIVED_TABLES | LOCAL_ONLY_TABLES  # built where a push lands, or never leaving the device


def printed_counts(line: str) -> dict[str, int]:
    """table -> rows of a push's "sweep N: +T rows (n table, ...)" line (T checked against their sum)."""
    found = re.search(r": \+(\d+) rows(?: \(([^)]*)\))?", line)
    assert found, line
    parts = dict((t, int(n)) for n, t in (p.split(" ") for p in (found.group(2) or "").split(", ") if p))
    assert sum(parts.values()) == int(found.group(1)), line
    return parts


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> dict[str, Path]:
    """hostname -> its own SQLite DB holding one real sweep (telemetry on, so there are samples)."""
    base = tmp_path_factory.mktemp("fleet")
    dbs = {}
    for n, (hostname, board) in enumerate(DEVICES.items(), start=1):
        fake = FakeRoot(base / f"root-{hostname}")
        fake.host_identity(hostname, machine_id=f"{n:032x}")
        fake.device_tree(board)
        root = fake.root
        db = base / f"{hostname}.db"
        engine = open_engine(db)
        plan = parse_plan(fleet_plan(tiny_models["Q4_K_M"]), source="fleet.toml", base=base)

        def telemetry(sweep_id: int, _engine: Any = engine, _plan: Any = plan) -> Telemetry:
            collectors = [c for c in build_collectors(Path("/")) if c.name != NvmlCollector.name]
            collectors.append(NvmlCollector(nvml=FakeNvml()))
            return Telemetry(_engine, sweep_id, _plan.collect, _plan.cooldown, collectors=collectors)

        outcome = run_plan(engine, plan, out=io.StringIO(), device_root=root, telemetry=telemetry)
        assert outcome.counts == {"ok": 1}
        engine.dispose()
        dbs[hostname] = db
    return dbs


def test_three_devices_push_concurrently_then_again_adds_nothing(
    devices: dict[str, Path], pg_db_url: str, tmp_path: Path
) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "edgeprof", "push", "--to", pg_db_url, "--db", str(db), "--all"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for db in devices.values()
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "1 sweep(s) sent" in out
    first = row_counts(pg_db_url)
    assert first["device"] == 3 and first["sweep"] == 3 and first["run"] == 3
    assert first["build"] == 1 and first["model_file"] == 1  # shared content merged, not duplicated
    local_rows = sum(row_counts(f"sqlite:///{db}")["measurement"] for db in devices.values())
    assert first["measurement"] == local_rows
    telemetry_tables = ("sample", "sample_block")
    assert sum(first.get(t, 0) for t in telemetry_tables) > 0  # the telemetry travelled too

    listed = json.loads(edgeprof("sweeps", "--db", pg_db_url, "--json").stdout)
    assert sorted(r["device_hostname"] for r in listed) == sorted(DEVICES)
    local_uids = set()
    for db in devices.values():
        with new_session(open_engine(db, read_only=True)) as s:
            local_uids |= set(s.scalars(select(Sweep.uid)))
    assert {r["sweep_uid"] for r in listed} == local_uids
    assert {r["device_board_model"] for r in listed} == set(DEVICES.values())
    one = json.loads(edgeprof("sweeps", "--db", pg_db_url, "--json", "--device", "agx-orin-1").stdout)
    assert [r["device_hostname"] for r in one] == ["agx-orin-1"]

    # Report and compare across two devices, on the central DB.
    by_host = {r["device_hostname"]: r["sweep_id"] for r in listed}
    rep = edgeprof("report", "--db", pg_db_url, "--sweep", str(by_host["orin-nano-1"]), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    rows = json.loads(rep.stdout)
    assert rows and rows[0]["device_hostname"] == "orin-nano-1"
    nano, agx = str(by_host["orin-nano-1"]), str(by_host["agx-orin-1"])
    cmp = edgeprof("compare", nano, agx, "--db", pg_db_url, "--format", "json")
    assert cmp.returncode == 0, cmp.stderr
    pairs = json.loads(cmp.stdout)
    assert [p["match"] for p in pairs] == ["both"]

    by_device = edgeprof(
        "compare", "--device", "orin-nano-1", "--device", "agx-orin-1", "--db", pg_db_url, "--format", "json"
    )
    assert by_device.returncode == 0, by_device.stderr
    assert json.loads(by_device.stdout) == pairs
    st = edgeprof("status", "--db", pg_db_url, "--json", "--device", "orin-nx-1")
    assert st.returncode == 0, st.stderr
    assert json.loads(st.stdout)["sweep"]["id"] == by_host["orin-nx-1"]

    # Again: nothing added, even when every row is compared.
    for extra in ([], ["--recheck"]):
        for db in devices.values():
            again = edgeprof("push", "--to", pg_db_url, "--db", str(db), "--all", *extra)
            assert again.returncode == 0, again.stderr
            assert "0 rows added" in again.stdout
    assert row_counts(pg_db_url) == first


def test_device_aware_reading_and_compare_across_two_database_files(devices: dict[str, Path]) -> None:
    nano, agx = str(devices["orin-nano-1"]), str(devices["agx-orin-1"])
    cmp = edgeprof("compare", "1", "1", "--db", nano, "--db-b", agx, "--format", "json")
    assert cmp.returncode == 0, cmp.stderr
    pairs = json.loads(cmp.stdout)
    assert [p["match"] for p in pairs] == ["both"] and pairs[0]["tg_tps_ratio"] is not None
    rep = edgeprof("report", "--db", nano, "--device", "orin-nano-1", "--format", "csv")
    assert rep.returncode == 0, rep.stderr
    header, first = rep.stdout.splitlines()[:2]
    assert "device_hostname" in header.split(",") and "orin-nano-1" in first.split(",")
    wrong = edgeprof("report", "--db", nano, "--device", "agx-orin-1")
    assert wrong.returncode == 2 and "agx-orin-1" in wrong.stderr and "Traceback" not in wrong.stderr
    listed = edgeprof("sweeps", "--db", agx)
    assert listed.returncode == 0 and "agx-orin-1" in listed.stdout and "AGX Orin" in listed.stdout


def test_export_then_import_twice_adds_each_row_once(devices: dict[str, Path], tmp_path: Path) -> None:
    src = devices["orin-nano-1"]
    dump = tmp_path / "sweep.jsonl.gz"
    done = edgeprof("export", "--db", str(src), "--all", "-o", str(dump))
    assert done.returncode == 0, done.stderr
    central = tmp_path / "central.db"
    first = edgeprof("import", str(dump), "--db", str(central))
    assert first.returncode == 0, first.stderr
    assert row_counts(f"sqlite:///{central}")["run"] == 1
    counts = row_counts(f"sqlite:///{central}")
    line = next(x for x in first.stdout.splitlines() if x.startswith("sweep "))
    assert printed_counts(line) == {t: n for t, n in counts.items() if n and t not in NOT_PUSHED}
    assert counts["run_series"] > 0  # an import builds the series where it lands, as a push does
    second = edgeprof("import", str(dump), "--db", str(central))
    assert second.returncode == 0 and "0 rows added" in second.stdout
    assert row_counts(f"sqlite:///{central}") == counts
    local = row_counts(f"sqlite:///{src}")
    for table in ("sweep", "run", "measurement", "phase", "verdict", "collector_status"):
        assert counts[table] == local[table], table

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"edgeprof_export": 1, "schema_version": 1}\n{"sweep": "x"}\n{not json\n')
    bad = edgeprof("import", str(broken), "--db", str(central))
    assert bad.returncode == 2 and "broken.jsonl:3" in bad.stderr and "Traceback" not in bad.stderr


def test_concurrent_find_or_create_gives_one_row_and_no_error(any_db: str) -> None:
    """N writers creating the same device at once (the central-DB case): one row, zero errors."""
    open_engine(any_db).dispose()
    code = (
        "import sys\n"
        "from edgeprof.storage.db import open_engine, new_session\n"
        "from edgeprof.device import get_or_create_device\n"
        "e = open_engine(sys.argv[1])\n"
        "facts = {'hostname': 'same', 'machine_id': 'm', 'arch': 'aarch64'}\n"
        "for _ in range(20):\n"
        "    with new_session(e) as s:\n"
        "        get_or_create_device(s, facts)\n"
        "        s.commit()\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, any_db], stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    engine = open_engine(any_db, read_only=True)
    with new_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Device)) == 1


def test_a_missing_driver_and_a_password_are_one_masked_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"  # as if edgeprof[postgres] were not installed
        "from edgeprof.cli import main; sys.argv = ['edgeprof', 'report', '--db', sys.argv[1]]; main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "postgresql://fleet:s3cret@127.0.0.1:1/central"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "edgeprof[postgres]" in done.stderr and "s3cret" not in done.stderr
    refused = edgeprof("status", "--db", "postgresql://fleet:s3cret@127.0.0.1:1/central")
    assert refused.returncode == 2 and "s3cret" not in refused.stderr and "***" in refused.stderr


def test_a_select_only_role_can_read(pg_db_url: str, devices: dict[str, Path]) -> None:
    assert edgeprof("push", "--to", pg_db_url, "--db", str(devices["orin-nx-1"]), "--all").returncode == 0
    engine = create_engine(pg_db_url)
    with engine.begin() as conn:
        conn.execute(text("DROP ROLE IF EXISTS edgeprof_reader_t"))
        conn.execute(text("CREATE ROLE edgeprof_reader_t LOGIN"))
        conn.execute(text("GRANT SELECT ON ALL TABLES IN SCHEMA public TO edgeprof_reader_t"))
    engine.dispose()
    from sqlalchemy.engine import make_url

    reader = make_url(pg_db_url).set(username="edgeprof_reader_t").render_as_string(hide_password=False)
    try:
        for args in (["report", "--format", "json"], ["status", "--json"], ["sweeps", "--json"]):
            done = edgeprof(*args, "--db", reader)
            assert done.returncode == 0, (args, done.stderr)
        refused = edgeprof("push", "--to", reader, "--db", str(devices["orin-nx-1"]), "--all", "--recheck")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
    finally:
        engine = create_engine(pg_db_url)
        with engine.begin() as conn:
            conn.execute(text("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM edgeprof_reader_t"))
            conn.execute(text("DROP ROLE edgeprof_reader_t"))
        engine.dispose()


def test_the_agent_pushes_finished_sweeps_and_a_dead_central_db_stops_nothing(
    tmp_path: Path, tiny_models: dict[str, Path], pg_db_url: str
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(fleet_plan(tiny_models["Q4_K_M"]))
    dead = "postgresql://fleet:s3cret@127.0.0.1:1/central"  # nothing listens on port 1
    for target, db in ((dead, tmp_path / "dead.db"), (pg_db_url, tmp_path / "live.db")):
        done = edgeprof(
            "agent", "--plan", str(plan), "--once", "--no-telemetry", "--db", str(db), "--push-to", target,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr and "s3cret" not in done.stderr
        local = row_counts(f"sqlite:///{db}")
        assert local["run"] == 1 and local["sweep"] == 1  # the sweep ran whatever the central DB did
        if target == dead:
            assert "push to" in done.stderr and "failed" in done.stderr and "retried" in done.stderr
    central = row_counts(pg_db_url)
    assert central["sweep"] == 1 and central["run"] == 1
    # The agent's log counts the rows that arrived (it said "2 rows added" for ~350 on PostgreSQL).
    logged = re.search(r"pushed 1 sweep\(s\) to .*: (\d+) rows added", done.stderr)
    assert logged, done.stderr
    assert int(logged.group(1)) == sum(n for t, n in central.items() if t not in NOT_PUSHED)


def test_a_push_killed_midway_is_completed_by_pushing_again(devices: dict[str, Path], pg_db_url: str) -> None:
    """kill -9 of a push at several moments (a dropped network looks the same to the central DB)."""
    import signal
    import time

    src = devices["agx-orin-1"]
    local = row_counts(f"sqlite:///{src}")
    for delay_s in (0.5, 1.5, 3.0):
        proc = subprocess.Popen(
            [sys.executable, "-m", "edgeprof", "push", "--to", pg_db_url, "--db", str(src), "--all"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay_s)  # a moment during the push; where exactly does not matter, only that it is cut
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        central = row_counts(pg_db_url)
        assert central["sweep"] in (0, 1)  # a sweep is there whole or not at all
        if central["sweep"] == 1:
            assert central["run"] == local["run"] and central["measurement"] == local["measurement"]
    done = edgeprof("push", "--to", pg_db_url, "--db", str(src), "--all")
    assert done.returncode == 0, done.stderr
    central = row_counts(pg_db_url)
    for table in ("sweep", "run", "measurement", "phase", "verdict", "collector_status", "sample_block"):
        assert central.get(table) == local.get(table), table
    since = edgeprof("push", "--to", pg_db_url, "--db", str(src), "--since", "2000-01-01")
    assert since.returncode == 0 and "0 rows added" in since.stdout
    neither = edgeprof("push", "--to", pg_db_url, "--db", str(src))
    assert neither.returncode == 2 and "--all" in neither.stderr


def test_three_writers_at_once_into_one_postgresql_db(
    tmp_path: Path, tiny_models: dict[str, Path], pg_db_url: str
) -> None:
    """The issue's crash: three `run`s at once on a fresh central DB (same device, build and model file)."""
    procs = []
    for i in range(3):
        plan = tmp_path / f"plan{i}.toml"
        plan.write_text(fleet_plan(tiny_models["Q4_K_M"], name=f"w{i}"))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "edgeprof", "run", str(plan), "--db", pg_db_url, "--no-telemetry"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "Traceback" not in err and "duplicate key" not in err
    counts = row_counts(pg_db_url)
    assert counts["sweep"] == 3 and counts["run"] == 3
    assert counts["device"] == 1 and counts["build"] == 1 and counts["model_file"] == 1
    engine = create_engine(pg_db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT DISTINCT status FROM run")).all() == [("ok",)]
    engine.dispose()


def test_push_prints_the_rows_that_arrived_then_zero(devices: dict[str, Path], any_db: str) -> None:
    """Counted from what the target inserted (PostgreSQL's rowcount of a multi-row insert is -1)."""
    src = devices["orin-nano-1"]
    first = edgeprof("push", "--to", any_db, "--db", str(src), "--all")
    assert first.returncode == 0, first.stderr
    # no count of -1 anywhere: checked on the output with its paths taken out, as pytest's temporary
    # directory (``pytest-10/``) may itself hold "-1"
    shown = first.stdout.replace(str(src), "<src>").replace(any_db, "<target>")
    assert "-1" not in shown, shown
    line = next(x for x in first.stdout.splitlines() if x.startswith("sweep "))
    assert all(n >= 0 for n in printed_counts(line).values()), line
    url = any_db if "://" in any_db else f"sqlite:///{any_db}"
    central = {t: n for t, n in row_counts(url).items() if n and t not in NOT_PUSHED}
    assert printed_counts(line) == central
    assert central["sample_block"] > 0 and central["run"] == 1
    assert f"{sum(central.values())} rows added" in first.stdout
    assert row_counts(url)["run_series"] > 0 and "series rows" in line  # built where the push landed
    for extra in ([], ["--recheck"]):
        again = edgeprof("push", "--to", any_db, "--db", str(src), "--all", *extra)
        assert again.returncode == 0, again.stderr
        assert "0 rows added" in again.stdout and "series rows" not in again.stdout
        assert all(printed_counts(x) == {} for x in again.stdout.splitlines() if ": +" in x)


def _concrete(sql: str, values: dict[str, str]) -> str:
    """A panel's SQL as Grafana sends it: the time macro over all time, the variables as chosen."""
    sql = re.sub(r"\$__timeFilter\(([^)]+)\)", r"\1 BETWEEN '1970-01-01' AND '2100-01-01'", sql)
    for name, value in values.items():
        sql = sql.replace(f"${name}", value)
    assert "$" not in sql, sql
    return sql


def test_every_grafana_panel_returns_rows_on_the_fleet_db(devices: dict[str, Path], pg_db_url: str) -> None:
    for db in devices.values():
        done = edgeprof("push", "--to", pg_db_url, "--db", str(db), "--all")
        assert done.returncode == 0, done.stderr
    dashboard = json.loads(grafana_dashboard().read_text())
    engine = create_engine(pg_db_url)
    with engine.connect() as conn:
        hosts = [h for (h,) in conn.execute(text("SELECT DISTINCT device FROM run_context ORDER BY 1"))]
        assert hosts == sorted(DEVICES)
        run_uid = conn.execute(text("SELECT run_uid FROM run_context ORDER BY started_at LIMIT 1")).scalar()
        values = {"device": ", ".join(f"'{h}'" for h in hosts), "run_uid": str(run_uid)}
        variables = [v for v in dashboard["templating"]["list"] if v["type"] == "query"]
        assert {v["name"] for v in variables} == {"device", "run_uid"}
        for var in variables:
            assert conn.execute(text(_concrete(var["query"], values))).all(), var["name"]
        titles = []
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                rows = conn.execute(text(_concrete(target["rawSql"], values))).mappings().all()
                assert rows, panel["title"]
                titles.append(panel["title"])
        # Both curves of the run: one point per second, and per metric no second twice.
        curves = conn.execute(
            text(
                "SELECT role, COUNT(*), COUNT(DISTINCT t) FROM series WHERE run_uid = :u AND metric = "
                "'gpu0.' || CASE role WHEN 'power' THEN 'power_mw' ELSE 'temp_c' END GROUP BY role"
            ),
            {"u": run_uid},
        ).all()
        throttled = _throttled_panel(conn, dashboard, values)
    engine.dispose()
    assert {role for role, _n, _s in curves} == {"temperature", "power"}
    assert all(n == seconds > 0 for _role, n, seconds in curves)
    assert any("tg t/s" in t for t in titles) and any("Throttled" in t for t in titles)
    # a run's CPU (and the fake GPU's) utilisation, its clocks and its memory each have a panel with rows
    for curve in ("utilisation", "Clocks", "Memory"):
        assert any(curve in t for t in titles), (curve, titles)
    # The throttle panel's filter and order, with two synthetic verdicts (a later row of a kind wins): a
    # cleared config leaves it, a throttled one comes first.
    cleared, after = throttled
    assert cleared not in after


def _throttled_panel(conn: Any, dashboard: dict[str, Any], values: dict[str, str]) -> tuple[str, list[str]]:
    panel = next(p for p in dashboard["panels"] if p["title"].startswith("Throttled configs"))
    sql = _concrete(panel["targets"][0]["rawSql"], values)
    uids = [r.run_uid for r in conn.execute(text(sql))]
    assert len(uids) >= 2
    cleared, hot = uids[0], uids[-1]
    for uid, value in ((cleared, "not_throttled"), (hot, "throttled")):
        conn.execute(
            text(
                "INSERT INTO verdict (uid, run_id, kind, value, evidence_json) "
                "SELECT :v || run_uid, run_id, 'throttle', :v, '{\"synthetic\": true}' FROM run_context "
                "WHERE run_uid = :u"
            ),
            {"u": uid, "v": value},
        )
    after = [r.run_uid for r in conn.execute(text(sql))]
    conn.rollback()
    assert cleared not in after and after[0] == hot
    return cleared, after
