"""Three real agents (three processes, each its own SQLite file and its own synthetic device tree: board
model, L4T release, RAM, hostname) join one real PostgreSQL on loopback and run what is submitted there with
tiny demo models: 2 ``--each`` plans and 4 ``--any`` plans run exactly once, on matching boards only; a
kill -9 mid-job sends the ``--any`` job elsewhere after the lease, and the ``--each`` job resumes its sweep
on the same board when its agent restarts; every result lands once centrally, none is lost. A model no
board has fails that job alone; a model the job says where to fetch is fetched and checked by sha256.

A board whose health plan fails (its own history says it decoded far faster: a fake slow device, the
history rows SYNTHETIC) takes no job and ``fleet boards`` says why; it takes the job once a check passes.

Leases are short (5 s) so the test does not wait long; nothing asserts on wall-clock speed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from support.fakes import FakeRoot
from support.plans import plan_toml

from edgeprof.fleet.jobfiles import identify_plan
from edgeprof.fleet.queue import register_board

pytestmark = [pytest.mark.llama, pytest.mark.timeout(900)]

LEASE_S = "5"
# Four configs per plan: long enough that a kill after the first one lands mid-job.
CTX = (256, 320, 384, 512)
REPEAT = {"cold": 1, "warmup": 0, "steady": 2}
# Synthetic device trees: board model, L4T header line (R36.4.4 = JetPack 6.2.1, R36.3.0 = 6.0, R36.4.0 =
# 6.1), MemTotal in kB, labels.
BOARDS = {
    "nano-1": ("NVIDIA Jetson Orin Nano Developer Kit", "# R36 (release), REVISION: 4.4", 7803289, "lab=1"),
    "nano-2": ("NVIDIA Jetson Orin Nano Developer Kit", "# R36 (release), REVISION: 3.0", 7803289, "lab=2"),
    "agx-1": ("NVIDIA Jetson AGX Orin Developer Kit", "# R36 (release), REVISION: 4.0", 64306380, "lab=2"),
}


def fake_root(base: Path, name: str, n: int) -> Path:
    model, l4t, mem_kb, _label = BOARDS[name]
    fake = FakeRoot(base / f"root-{name}")
    fake.host_identity(name, machine_id=f"{n:032x}")
    fake.device_tree(model)
    fake.l4t_release(l4t)
    fake.write(
        "proc/meminfo", f"MemTotal: {mem_kb} kB\nMemFree: {mem_kb // 2} kB\nMemAvailable: {mem_kb // 2} kB\n"
    )
    return fake.root


def edgeprof(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args], capture_output=True, text=True, timeout=timeout
    )


class Fleet:
    def __init__(self, url: str, base: Path) -> None:
        self.url, self.base = url, base
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.engine = create_engine(url)

    def start(self, name: str) -> None:
        n = list(BOARDS).index(name) + 1
        root = fake_root(self.base, name, n)
        log = open(self.base / f"{name}.log", "ab")  # noqa: SIM115 - the child writes it until it ends
        self.procs[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edgeprof",
                "agent",
                "--fleet",
                self.url,
                "--device-name",
                name,
                "--label",
                BOARDS[name][3],
                "--label",
                f"name={name}",
                "--db",
                str(self.base / f"{name}.db"),
                "--no-telemetry",
                "--poll-s",
                "0.5",
                "--lease-s",
                LEASE_S,
                "--models-dir",
                str(self.base / f"models-{name}"),
            ],
            stdout=log,
            stderr=log,
            env={**os.environ, "EDGEPROF_DEVICE_ROOT": str(root)},
        )

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(timeout=30)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in self.base.glob("*.log"))

    def jobs(self) -> dict[int, dict[str, Any]]:
        out = edgeprof("fleet", "jobs", "--db", self.url, "--format", "json")
        assert out.returncode == 0, out.stderr
        return {j["job"]: j for j in json.loads(out.stdout)}

    def row(self, job_id: int) -> dict[str, Any]:
        """One job as the table holds it (polled often: SQL, not a CLI start each time)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT j.state, j.attempts, j.configs_done, j.sweep_uid, "
                    "COALESCE(b.name, t.name) AS board FROM fleet_job j "
                    "LEFT JOIN fleet_board b ON b.id = j.board_id "
                    "LEFT JOIN fleet_board t ON t.id = j.target_board_id WHERE j.id = :j"
                ),
                {"j": job_id},
            ).one()
        return dict(row._mapping)

    def boards(self) -> dict[str, dict[str, Any]]:
        out = edgeprof("fleet", "boards", "--db", self.url, "--format", "json")
        assert out.returncode == 0, out.stderr
        return {b["board"]: b for b in json.loads(out.stdout)}

    def submit(self, plan: Path, select: str, kind: str, *extra: str) -> list[int]:
        out = edgeprof(
            "fleet",
            "submit",
            str(plan),
            "--to",
            self.url,
            "--select",
            select,
            kind,
            "--format",
            "json",
            *extra,
        )
        assert out.returncode == 0, out.stderr
        return list(json.loads(out.stdout)["jobs"])

    def until(self, what: str, check: Callable[[], Any], timeout_s: float = 400) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            got = check()
            if got:
                return got
            time.sleep(0.3)
        pytest.fail(f"timed out waiting for {what}\n{self.logs()}")


@pytest.fixture
def fleet(pg_db_url: str, tmp_path: Path) -> Iterator[Fleet]:
    assert edgeprof("db", "upgrade", "--db", pg_db_url).returncode == 0
    f = Fleet(pg_db_url, tmp_path)
    yield f
    f.stop_all()
    f.engine.dispose()


def two_config_plan(base: Path, model: Path, name: str) -> Path:
    path = base / f"{name}.toml"
    path.write_text(plan_toml([model], name=name, ctx=CTX, repeat=REPEAT))
    return path


def running_with_progress(fleet: Fleet, job_id: int, board: str) -> bool:
    job = fleet.row(job_id)
    return job["state"] == "running" and job["board"] == board and (job["configs_done"] or 0) >= 1


def test_three_agents_run_each_plan_once_where_it_matches_and_survive_kills(
    fleet: Fleet, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    model = tiny_models["Q4_K_M"]
    plans = {
        n: two_config_plan(tmp_path, model, n) for n in ("any1", "any2", "any3", "any4", "each1", "each2")
    }
    # any4's model is not where the plan says: the boards fetch it from a shared folder, by sha256
    shared, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    shared.mkdir(), elsewhere.mkdir()
    moved = shutil.copy(model, elsewhere / "moved.gguf")
    plans["any4"].write_text(plan_toml([moved], name="any4", ctx=CTX, repeat=REPEAT))
    # a model nobody has: that job fails alone
    lost = shutil.copy(model, elsewhere / "lost.gguf")
    plans["lost"] = tmp_path / "lost.toml"
    plans["lost"].write_text(plan_toml([lost], name="lost", repeat={"cold": 1, "warmup": 0, "steady": 1}))

    fleet.start("nano-1")
    fleet.until("nano-1 registered", lambda: "nano-1" in fleet.boards(), 120)
    (any1,) = fleet.submit(plans["any1"], "ram_mb>=7000", "--any")
    fleet.start("nano-2")
    fleet.start("agx-1")
    fleet.until("nano-1 mid-way through any1", lambda: running_with_progress(fleet, any1, "nano-1"))
    fleet.kill("nano-1")  # kill -9 mid-job
    fleet.until("the other boards registered", lambda: len(fleet.boards()) == 3, 120)
    each1 = fleet.submit(plans["each1"], "board=orin-nano", "--each")
    each2 = fleet.submit(plans["each2"], "jetpack>=6.1", "--each")
    (any2,) = fleet.submit(plans["any2"], "label:lab=2", "--any")
    (any3,) = fleet.submit(plans["any3"], "board=agx-orin", "--any")
    # only nano-1 (JetPack 6.2.1) matches, and it is dead: nobody takes the job before the file is moved
    (any4,) = fleet.submit(
        plans["any4"], "board=orin-nano,jetpack>=6.2", "--any", "--models-from", str(shared)
    )
    shutil.move(moved, shared / "moved.gguf")
    (lost_job,) = fleet.submit(plans["lost"], "label:name=nano-1", "--any")  # dead nano-1 only, as any4
    Path(lost).unlink()

    # any1 finishes elsewhere once nano-1's lease has run out; nano-1 stays dead until then
    fleet.until("any1 done elsewhere", lambda: fleet.row(any1)["state"] == "done", 600)
    assert fleet.jobs()[any1]["board"] in ("nano-2", "agx-1")
    assert "lease expired" in fleet.jobs()[any1]["reasons"][0]

    # nano-1 comes back: its --each jobs waited for it; kill it again mid-sweep, restart it, it resumes
    fleet.start("nano-1")
    mine = [j for j in each1 + each2 if fleet.row(j)["board"] == "nano-1"]
    assert len(mine) == 2
    first = fleet.until(
        "nano-1 mid-way through an --each job",
        lambda: next((j for j in mine if running_with_progress(fleet, j, "nano-1")), None),
    )
    sweep_before = fleet.row(first)["sweep_uid"]
    fleet.kill("nano-1")
    ok_before = local_ok_runs(tmp_path / "nano-1.db", sweep_before)
    assert len(ok_before) >= 1
    fleet.start("nano-1")

    everything = [any1, any2, any3, any4, lost_job, *each1, *each2]
    fleet.until(
        "every job ended",
        lambda: all(fleet.row(j)["state"] in ("done", "failed") for j in everything),
        600,
    )
    jobs = fleet.jobs()
    # the resumed --each job: the same sweep, its finished configs not measured again
    assert jobs[first]["sweep_uid"] == sweep_before and jobs[first]["attempts"] == 2
    # put back by its restarted agent, or reaped first by another board's claim if the restart took longer
    assert "restarted mid-job" in jobs[first]["reasons"][0] or "lease expired" in jobs[first]["reasons"][0]
    assert set(ok_before) <= set(local_ok_runs(tmp_path / "nano-1.db", sweep_before))
    assert len(local_ok_runs(tmp_path / "nano-1.db", sweep_before)) == len(CTX)
    # where each job ran: matching boards only, --each once per board
    assert sorted(jobs[j]["board"] for j in each1) == ["nano-1", "nano-2"]
    assert sorted(jobs[j]["board"] for j in each2) == ["agx-1", "nano-1"]
    assert jobs[any2]["board"] in ("nano-2", "agx-1") and jobs[any3]["board"] == "agx-1"
    assert jobs[lost_job]["state"] == "failed" and "lost.gguf" in jobs[lost_job]["reasons"][-1]
    assert "not found" in jobs[lost_job]["reasons"][-1] and jobs[lost_job]["attempts"] == 1
    done = [j for j in everything if j != lost_job]
    assert all(jobs[j]["state"] == "done" for j in done), jobs
    assert jobs[any4]["board"] == "nano-1"
    assert (tmp_path / "models-nano-1" / "moved.gguf").is_file()  # fetched from --models-from, checked
    check_central(fleet, jobs, done, tmp_path)
    boards = fleet.boards()
    assert set(boards) == set(BOARDS)
    assert boards["nano-2"]["facts"]["jetpack"] == "6.0" and boards["agx-1"]["labels"]["lab"] == "2"


def local_ok_runs(db: Path, sweep_uid: str) -> list[str]:
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT r.uid FROM run r JOIN sweep s ON s.id = r.sweep_id "
                "WHERE s.uid = :u AND r.status = 'ok'"
            ),
            {"u": sweep_uid},
        ).all()
    engine.dispose()
    return [r[0] for r in rows]


def check_central(fleet: Fleet, jobs: dict[int, dict[str, Any]], done: list[int], base: Path) -> None:
    """One central sweep per done job, on the board that ran it, with every run its board has: 0 lost, 0
    twice (a board's partial sweep of a job that finished elsewhere never leaves the board)."""
    with fleet.engine.connect() as conn:
        central = conn.execute(
            text("SELECT s.uid, d.hostname FROM sweep s JOIN device d ON d.id = s.device_id")
        )
        sweeps = {uid: host for uid, host in central}
        runs = conn.execute(
            text("SELECT s.uid, r.uid, r.status FROM run r JOIN sweep s ON s.id = r.sweep_id")
        )
        central_runs: dict[str, set[str]] = {}
        for sweep_uid, run_uid, _status in runs:
            central_runs.setdefault(sweep_uid, set()).add(run_uid)
        dup = conn.execute(text("SELECT count(*) - count(DISTINCT uid) FROM run")).scalar()
    assert dup == 0
    assert len(sweeps) == len(done)
    for j in done:
        uid = jobs[j]["sweep_uid"]
        assert sweeps.get(uid) == jobs[j]["board"], (j, jobs[j])
        local = create_engine(f"sqlite:///{base / (jobs[j]['board'] + '.db')}")
        with local.connect() as conn:
            local_runs = {
                r[0]
                for r in conn.execute(
                    text("SELECT r.uid FROM run r JOIN sweep s ON s.id = r.sweep_id WHERE s.uid = :u"),
                    {"u": uid},
                )
            }
        local.dispose()
        assert local_runs == central_runs[uid]  # 0 rows lost
        ok = [r for r in central_runs[uid] if r in set(local_ok_runs(base / (jobs[j]["board"] + ".db"), uid))]
        assert len(ok) == len(CTX)  # each config once


def test_a_board_that_fails_its_health_plan_takes_no_job_and_says_why(
    fleet: Fleet, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    health = tmp_path / "health.toml"
    health.write_text(
        plan_toml([tiny_models["Q4_K_M"]], name="health", repeat={"cold": 1, "warmup": 0, "steady": 2})
    )
    out = edgeprof(
        "fleet",
        "submit",
        str(health),
        "--to",
        fleet.url,
        "--select",
        "board=orin-nano",
        "--health",
        "--every",
        "3s",
    )
    assert out.returncode == 0, out.stderr
    # A fake slow device: SYNTHETIC history says this board decoded at 10^6 t/s, so its real result falls
    # below the band (median - 3 x 1.4826 x MAD, at least 10 % under the median)
    board = register_board(fleet.engine, "nano-1", {"board": "orin-nano"}, {}, 2.0)
    sha = identify_plan(health).sha256
    with fleet.engine.begin() as conn:
        for _ in range(5):
            conn.execute(
                text(
                    "INSERT INTO fleet_health (board_id, plan_sha256, passed, tg_tps, reason) "
                    "VALUES (:b, :s, true, 1000000, 'synthetic history')"
                ),
                {"b": board, "s": sha},
            )
    plan = two_config_plan(tmp_path, tiny_models["Q4_K_M"], "work")
    (job,) = fleet.submit(plan, "board=orin-nano", "--any")
    fleet.start("nano-1")
    state = fleet.until(
        "nano-1 unhealthy",
        lambda: (s := fleet.boards().get("nano-1", {}).get("state", "")).startswith("unhealthy") and s,
    )
    assert "below its band" in state and "median 1000000.0" in state
    table = edgeprof("fleet", "boards", "--db", fleet.url).stdout
    assert "unhealthy (tg" in table
    # a further failed check (every 3 s): still no claim
    fleet.until("a second failed check", lambda: health_checks(fleet, board) >= 2)
    assert fleet.row(job)["state"] == "queued" and fleet.row(job)["attempts"] == 0
    with fleet.engine.begin() as conn:  # the board's history is its real one again: the next check passes
        conn.execute(text("DELETE FROM fleet_health WHERE reason = 'synthetic history'"))
    fleet.until("the job done once the board passes", lambda: fleet.row(job)["state"] == "done")
    assert fleet.jobs()[job]["board"] == "nano-1"


def health_checks(fleet: Fleet, board: int) -> int:
    with fleet.engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM fleet_health WHERE board_id = :b AND NOT passed"), {"b": board}
            ).scalar()
            or 0
        )
