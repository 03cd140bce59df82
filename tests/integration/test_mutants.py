"""Tests that kill mutants which survived the suite before issue 11: each breaks one line of the code on
purpose (named in the test's docstring) and would pass unnoticed without the test. Real tiny models."""

from __future__ import annotations

import ctypes
import io
import mmap
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from edgeprof.executors import store_child as _store_child
from edgeprof.gguf.info import drop_page_cache, read_gguf_info
from edgeprof.plan.parse import expand, parse_plan
from edgeprof.runners.llama import ChildResult
from edgeprof.runners.protocol import FAULT_ENV
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Phase, Run
from edgeprof.sweep import model_group, run_plan

PLAN = """
name = "mut"
[matrix]
models = [{{ path = "{a}", label = "q8" }}, {{ path = "{b}", label = "q4" }}]
ctx = [256]
threads = [1]
[[workload]]
name = "w"
prompt_tokens = 16
n_predict = 4
[repeat]
cold = {cold}
warmup = 0
steady = 1
[run]
timeout_s = {timeout}
cold_cache = "keep"
"""


def make_plan(tmp_path: Path, models: dict[str, Path], cold: int = 1, timeout: float = 60) -> Any:
    text = PLAN.format(a=models["Q8_0"], b=models["Q4_K_M"], cold=cold, timeout=timeout)
    return parse_plan(text, source=str(tmp_path / "p.toml"), base=tmp_path)


def env_with(fault: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    if fault:
        env[FAULT_ENV] = fault
    return env


def resident_share(path: Path) -> float:
    """Share of the file's pages in the page cache (mincore on a fresh mapping faults nothing in)."""
    size = path.stat().st_size
    page = mmap.PAGESIZE
    n = (size + page - 1) // page
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value)
        try:
            vec = (ctypes.c_ubyte * n)()
            assert libc.mincore(ctypes.c_void_p(addr), size, vec) == 0
            return sum(v & 1 for v in vec) / n
        finally:
            libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)


def test_drop_page_cache_really_evicts_the_file(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """Mutant: posix_fadvise removed while drop_page_cache still returns True (the run says "dropped")."""
    copy = tmp_path / "m.gguf"
    shutil.copyfile(tiny_models["Q4_K_M"], copy)
    with copy.open("rb+") as fh:
        os.fsync(fh.fileno())  # clean pages: only clean pages can be dropped
        fh.read()
    if resident_share(copy) < 0.9:
        pytest.skip("this filesystem does not keep the file in the page cache (tmpfs/overlay?)")
    assert drop_page_cache(copy)
    assert resident_share(copy) < 0.5


def test_cold_start_counts_from_spawn_and_timeouts_are_finished(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """Mutants: cold_start_ms measured from the load instead of the spawn; "timeout" missing from the
    finished statuses (the hung config would be re-run by every resume)."""
    engine = open_engine(tmp_path / "c.db")
    plan = make_plan(tmp_path, tiny_models, timeout=6)
    first = run_plan(engine, plan, out=io.StringIO(), env=env_with("hang@decode:q8_0"))
    with new_session(engine) as s:
        runs = {r.model_label: r for r in s.scalars(select(Run))}
        assert runs["q8"].status == "timeout" and runs["q4"].status == "ok"
        q4 = runs["q4"].id
        cold = s.scalars(
            select(Measurement).where(Measurement.run_id == q4, Measurement.kind == "cold")
        ).one()
        load = s.scalars(select(Phase).where(Phase.run_id == runs["q4"].id, Phase.name == "load")).one()
        assert cold.cold_start_ms is not None and cold.load_ms is not None and cold.ttft_ms is not None
        assert cold.cold_start_ms >= cold.load_ms + cold.ttft_ms
        # From the spawn: process start and the llama.cpp import come before the load, so the cold start is
        # strictly longer than load start -> first token (an ordering of monotonic stamps, not a duration).
        assert cold.t_start_mono is not None
        from_load_ms = (cold.t_start_mono - load.t_start_mono) * 1000.0 + cold.ttft_ms
        assert cold.cold_start_ms > from_load_ms + 1.0  # 1 ms: float noise, far below any process start
    again = run_plan(engine, plan, out=io.StringIO(), env=env_with(None))
    assert again.sweep_id == first.sweep_id and again.n_skipped == 2 and not again.counts


class CountStarts:
    def __init__(self, _sweep_id: int) -> None:
        self.starts: dict[int, int] = {}

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def before_run(self, *_a: Any) -> None:
        pass

    def on_child_event(self, run: Run, event: dict[str, Any]) -> None:
        if event.get("event") == "start":
            self.starts[run.id] = self.starts.get(run.id, 0) + 1

    def after_run(self, *_a: Any) -> None:
        pass


def test_a_failed_cold_start_stops_further_cold_starts(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """Mutant: the loop over cold starts goes on after a child failed (cold = 2 would crash twice)."""
    engine = open_engine(tmp_path / "k.db")
    plan = make_plan(tmp_path, tiny_models, cold=2)
    made: list[CountStarts] = []

    def telemetry(sweep_id: int) -> CountStarts:
        made.append(CountStarts(sweep_id))
        return made[0]

    run_plan(engine, plan, out=io.StringIO(), env=env_with("exit@load:q8_0"), telemetry=telemetry)
    with new_session(engine) as s:
        runs = {r.model_label: r for r in s.scalars(select(Run))}
    assert runs["q8"].status == "error" and runs["q4"].status == "ok"
    assert made[0].starts == {runs["q8"].id: 1, runs["q4"].id: 2}


def _child(peak: float | None) -> ChildResult:
    return ChildResult(
        status="ok", reason=None, exit_code=0, signal_name=None, t_spawn=0.0, t_exit=0.0, peak_rss_mb=peak
    )


def test_peak_rss_of_a_run_is_the_maximum_over_its_children(tmp_path: Path) -> None:
    """Mutant: the merge of the children's peaks keeps the minimum."""
    engine = open_engine(tmp_path / "p.db")
    with new_session(engine) as session:
        run = Run()
        for peak in (120.0, None, 80.0):
            _store_child(session, run, _child(peak), is_main=False)
        assert run.peak_rss_mb == 120.0


def test_quants_of_one_model_form_one_group(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """Mutant: the model group keyed on the file type, so every quant became its own reference."""
    plan = make_plan(tmp_path, tiny_models)
    specs = expand(plan, {m.path: "0" * 64 for m in plan.models})
    groups = {model_group(s, read_gguf_info(s.model.path)) for s in specs}
    assert len(groups) == 1
    f16 = read_gguf_info(tiny_models["F16"])
    assert model_group(specs[0], f16) in groups


def test_one_x86_throttle_event_is_enough() -> None:
    """Mutant: the x86 thermal_throttle counter flag needing more than one event during the load."""
    from test_verdicts import STEADY_TPS, cool_metrics, inputs, series

    from edgeprof.verdicts.judge import throttle_verdict

    metrics = cool_metrics()
    metrics["throttle.package0.count"] = series(lambda t: 10.0 if t < 40 else 11.0)
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "throttled"
    assert result.evidence["hardware"]["detail"]["throttle.package0.count"]["delta"] == 1.0


def _db_with_two_sources(tmp_path: Path) -> tuple[Any, int, int]:
    """A sweep and run whose temp.cpu_c comes from two collectors, interleaved in time (synthetic)."""
    from datetime import datetime

    from edgeprof.storage.models import Device, Sweep
    from edgeprof.storage.samples import write_batch
    from edgeprof.telemetry.sampler import SampleRow

    engine = open_engine(tmp_path / "two.db")
    now = datetime(2026, 1, 1)
    with new_session(engine) as s:
        device = Device(fingerprint="d" * 64, hostname="h", arch="x86_64", facts_json="{}", first_seen=now)
        s.add(device)
        s.flush()
        sweep = Sweep(
            name="s", plan_text="", plan_hash="h", device_id=device.id, edgeprof_version="t", started_at=now,
            status="completed", n_specs=1,
        )
        s.add(sweep)
        s.flush()
        run = Run(
            sweep_id=sweep.id, spec_id="a", seq=1, model_label="m", model_group="g", model_path="/m",
            workload_name="w", workload_hash="h", workload_json="{}", params_json="{}", repeat_json="{}",
            n_ctx=1, n_gpu_layers=0, n_threads=1, n_batch=1, n_ubatch=1, flash_attn="off", type_k="f16",
            type_v="f16", use_mmap=True, status="ok", started_at=now,
        )
        s.add(run)
        s.flush()
        rows = [SampleRow(float(t), float(t), "first", "temp.cpu_c", 40.0, run.id) for t in range(0, 20, 2)]
        rows += [SampleRow(float(t), float(t), "second", "temp.cpu_c", 90.0, run.id) for t in range(1, 20, 2)]
        write_batch(s, sweep.id, rows)
        s.commit()
        return engine, sweep.id, run.id


def test_two_collectors_of_one_metric_are_never_interleaved(tmp_path: Path) -> None:
    """Mutant: the one-source-per-metric rule removed, so 40 °C and 90 °C readings alternate in one series."""
    from edgeprof.report.figures.plots import _load_samples
    from edgeprof.verdicts.judge import _series_of

    engine, sweep_id, run_id = _db_with_two_sources(tmp_path)
    with new_session(engine) as s:
        values = {v for _t, v in _series_of(s, [run_id])[run_id]["temp.cpu_c"]}
        plotted = {v for _t, v in _load_samples(s, sweep_id)["temp.cpu_c"]}
    assert len(values) == 1 and len(plotted) == 1 and values == plotted


def test_the_timeline_draws_every_series_with_its_data() -> None:
    """Mutant: a series dropped from the plot (the PNG's size would hardly change: check the drawn data)."""
    from edgeprof.report.figures.plots import MAX_LINES, _new_figure, _plot_lines

    fig = _new_figure(6, 3)
    ax = fig.add_subplot(1, 1, 1)
    lines = {f"temp.zone{i}_c": [(0.0, 40.0 + i), (1.0, 41.0 + i), (2.0, 42.0 + i)] for i in range(MAX_LINES)}
    assert _plot_lines(ax, lines, t0=0.0, scale_t=1.0) == MAX_LINES
    drawn = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert drawn == {name: [v for _t, v in pts] for name, pts in lines.items()}
