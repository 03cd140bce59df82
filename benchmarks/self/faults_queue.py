"""The queue half of benchmarks/self/faults.py: files dropped into the queue of a real, long-running
``edgeprof agent``, one at a time, each waited for until the agent has dealt with it.

- half-written: a good plan written into the queue in pieces, as a slow ``cp`` does (pauses shorter than
  ``--settle-s``), and one renamed in (``mv``): each must run whole and land in ``done/``;
- unarchivable: ``failed/`` replaced by a symlink, then a refused plan; a refused plan with a 245-character
  name; ``done/`` replaced by a symlink, then a good plan: each must be set aside or archived, never
  deleted, never read twice, and the next plan must still run;
- hostile: 2000 nested arrays, a quality ``text_file`` of ``/dev/zero`` and of a FIFO, a chat template of
  nested 100 000-step loops, a 2 GB sparse GGUF of nested empty arrays: each refused into ``failed/``.

Counted: plans lost (a dropped plan found nowhere whole: not in done/, failed/, set aside or the queue),
spins (a plan read more than once, or the idle agent using more than a tenth of a core), tracebacks in the
agent's log, and whether the agent was still alive before its SIGTERM and exited 0 on it.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

NESTED_LOOPS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


def good_plan(model: Path, name: str) -> str:
    return (
        f'name = "{name}"\n[matrix]\nmodels = [{{ path = "{model}", label = "q4" }}]\nctx = [256]\n'
        'threads = [1]\n[[workload]]\nname = "w"\nprompt_tokens = 16\nn_predict = 4\n'
        "[repeat]\ncold = 1\nwarmup = 0\nsteady = 1\n[run]\ntimeout_s = 120\n"
    )


def sparse_nested_gguf(path: Path) -> Path:
    key = b"x"
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
    head += struct.pack("<IIQ", 9, 9, 1 << 24)  # an array of 2^24 arrays, each 12 zero bytes: empty
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(2 << 30)
    return path


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class QueueRig:
    """One agent on one queue, its log collected in a file; each drop waits for the agent to act."""

    def __init__(self, out: Path, settle_s: float) -> None:
        self.queue = out / "queue"
        self.queue.mkdir(parents=True)
        self.log = (out / "agent.log").open("w+")
        self.settle_s = settle_s
        cmd = [sys.executable, "-m", "edgeprof", "agent", "--queue", str(self.queue), "--db",
               str(out / "queue.db"), "--no-telemetry", "--poll-s", "0.5", "--settle-s", str(settle_s)]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EDGEPROF_TEST", "NOTIFY_SOCKET"))}
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, text=True, env=env)
        self.dropped: dict[str, str] = {}  # plan name -> its full text
        self.places = [self.queue, self.queue / "done", self.queue / "failed"]  # + folders moved away

    def text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def handled(self, name: str) -> bool:
        stem = Path(name[:200]).stem
        for sub in ("done", "failed"):
            folder = self.queue / sub
            if folder.is_dir() and not folder.is_symlink() and any(folder.glob(f"{stem}*.toml")):
                return True
        return (self.queue / f"{name}.held").exists()

    def where(self, name: str) -> str:
        stem = Path(name[:200]).stem
        if (self.queue / f"{name}.held").exists():
            return "held"
        for sub in ("done", "failed"):
            folder = self.queue / sub
            if folder.is_dir() and not folder.is_symlink() and any(folder.glob(f"{stem}-*.toml")):
                return sub
        return "nowhere"

    def wait(self, name: str, timeout_s: float = 300.0) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and self.proc.poll() is None:
            if self.handled(name):
                return True
            time.sleep(0.2)
        return False

    def drop(self, name: str, text: str, write: Callable[[Path, str], None] | None = None) -> bool:
        self.dropped[name] = text
        target = self.queue / name
        if write is not None:
            write(target, text)
        else:  # the documented way: written elsewhere, renamed in
            tmp = self.queue.parent / f".{name[:200]}.tmp"
            tmp.write_text(text)
            os.replace(tmp, target)
        return self.wait(name)

    def lost(self) -> list[str]:
        """Dropped plans found nowhere whole."""
        texts = []
        for folder in self.places:
            if folder.is_dir() and not folder.is_symlink():
                texts += [p.read_text(errors="replace") for p in folder.iterdir() if p.is_file()]
        return [n for n, t in self.dropped.items() if t not in texts]

    def reads_of(self, name: str) -> int:
        log = self.text()
        return log.count(f"ERROR plan {name} rejected") + log.count(f" of {name} finished")

    def idle_cpu_share(self, window_s: float = 5.0) -> float:
        c0 = cpu_s(self.proc.pid)
        time.sleep(window_s)
        return (cpu_s(self.proc.pid) - c0) / window_s

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -9


def slow_cp(pause_s: float) -> Callable[[Path, str], None]:
    def write(target: Path, text: str) -> None:
        third = max(1, len(text) // 3)
        with target.open("w") as fh:
            for i in range(0, len(text), third):
                fh.write(text[i : i + third])
                fh.flush()
                time.sleep(pause_s)

    return write


def queue_trials(out: Path, models: dict[str, Path], settle_s: float = 2.0) -> dict[str, int]:
    rig = QueueRig(out / "queue-trials", settle_s)
    model = models["Q4_K_M"]
    fifo = out / "queue-trials" / "text.fifo"
    os.mkfifo(fifo)
    gguf = sparse_nested_gguf(out / "queue-trials" / "nested.gguf")
    bad = good_plan(Path("/no/such/model.gguf"), "refused")
    cases: list[tuple[str, str, str, str, Callable[[Path, str], None] | None]] = [
        ("half-written", "cp-slow.toml", good_plan(model, "cp-slow"), "done", slow_cp(settle_s / 4)),
        ("half-written", "mv.toml", good_plan(model, "mv"), "done", None),
        ("unarchivable", "failed-link.toml", bad, "held", None),
        ("unarchivable", "n" * 240 + ".toml", bad.replace("refused", "long"), "failed", None),
        ("unarchivable", "done-link.toml", good_plan(model, "done-link"), "held", None),
        ("unarchivable", "after.toml", good_plan(model, "after"), "done", None),
        ("hostile", "nested.toml", "x = " + "[" * 2000 + "]" * 2000 + "\n", "failed", None),
        ("hostile", "dev-zero.toml", quality_plan(model, "/dev/zero"), "failed", None),
        ("hostile", "fifo.toml", quality_plan(model, str(fifo)), "failed", None),
        ("hostile", "loops.toml", chat_plan(model, NESTED_LOOPS), "failed", None),
        ("hostile", "gguf.toml", good_plan(gguf, "gguf"), "failed", None),
    ]
    missed = 0
    for kind, name, text, expect, write in cases:
        rig.places += prepare_folders(rig.queue, name, out)
        t0 = time.monotonic()
        handled = rig.drop(name, text, write)
        where = rig.where(name)
        missed += not handled or where != expect
        print(f"queue {kind:<12} {name[:40]:<40} {where:<7} (expected {expect}) "
              f"in {time.monotonic() - t0:.1f} s, read {rig.reads_of(name)}x", flush=True)
    share = rig.idle_cpu_share()
    alive = rig.proc.poll() is None
    rc = rig.stop()
    log = rig.text()
    spins = sum(1 for n in rig.dropped if rig.reads_of(n) > 1) + int(share > 0.1)
    print(f"queue: idle agent CPU {share:.1%} of a core; alive before SIGTERM: {alive}; exit {rc}")
    return {
        "queue_plans": len(cases),
        "queue_lost": len(rig.lost()),
        "queue_spins": spins,
        "queue_tracebacks": log.count("Traceback"),
        "queue_missed": missed,
        "queue_agent_died": int(not alive or rc != 0),
    }


def prepare_folders(queue: Path, name: str, out: Path) -> list[Path]:
    """Before the unarchivable cases: failed/ or done/ replaced by a symlink (the real folder moved away,
    returned); back to folders after."""
    moved = []
    for sub in ("failed", "done"):
        link = queue / sub
        want_link = name == f"{sub}-link.toml"
        if want_link and not link.is_symlink():
            if link.is_dir():
                moved.append(out / f"{sub}-moved-{time.monotonic_ns()}")
                link.rename(moved[-1])
            elsewhere = out / f"{sub}-elsewhere"
            elsewhere.mkdir(exist_ok=True)
            link.symlink_to(elsewhere)
        elif not want_link and link.is_symlink():
            link.unlink()
    return moved


def quality_plan(model: Path, text_file: str) -> str:
    return good_plan(model, "quality").replace(
        '[[workload]]\nname = "w"\nprompt_tokens = 16\nn_predict = 4\n',
        f'[[workload]]\nname = "q"\nkind = "quality"\ntext_file = "{text_file}"\n',
    )


def chat_plan(model: Path, template: str) -> str:
    return good_plan(model, "chat").replace(
        '[[workload]]\nname = "w"\nprompt_tokens = 16\nn_predict = 4\n',
        '[[workload]]\nname = "c"\nmessages = [{ role = "user", content = "hi" }]\nn_predict = 4\n'
        f"chat_template = {json.dumps(template)}\n",
    )
