"""Stored sweeps as llama-bench records, the printers every format shares, and the import round trip, on
hand-built databases (no llama.cpp here; tests/integration/test_llama_bench.py runs the real llama-bench)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from support import dbbuild

from edgeprof.report.llamabench import (
    BENCH_MARK,
    FIELD_NAMES,
    SAMPLE_FIELDS,
    import_llama_bench,
    read_records,
    stdev_ns,
    stdev_ts,
    sweep_records,
)
from edgeprof.report.llamabench.importer import LlamaBenchImportError
from edgeprof.report.render.llama_bench import FORMATS
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, ModelFile, Run, SampleBlock, Sweep

# samples_ns and llama-bench's own avg/stddev for them, from a llama-bench -o json run of the tiny demo
# model on the development machine (2 cores, loaded): the uint64 arithmetic must give the same numbers
LLAMA_BENCH_PRINTED = [
    ([1146851, 1065209, 19508808], 7240289, 10624927),
    ([1162454, 1043065, 1025639], 1077052, 74485),
]


@pytest.mark.parametrize(("samples", "avg", "stddev"), LLAMA_BENCH_PRINTED)
def test_stdev_ns_is_llama_benchs_own(samples: list[int], avg: int, stddev: int) -> None:
    assert sum(samples) // len(samples) == avg
    assert stdev_ns(samples) == stddev


def test_stdev_of_one_sample_is_zero() -> None:
    assert stdev_ns([5]) == 0 and stdev_ts([5.0]) == 0.0
    assert stdev_ts([1.0, 2.0, 3.0]) == pytest.approx(1.0)


def _bench_sweep(s: Any, plan_text: str) -> int:
    sweep = dbbuild.add_sweep(s, name="llama-bench", plan_text=plan_text)
    model = ModelFile(
        path="/m/tiny.gguf", sha256="a" * 64, size_bytes=3000, mtime_ns=1, n_params=2_229_504, arch="llama",
        quant_type="Q8_0", file_type=7, tensor_bytes=2_372_608,
    )  # fmt: skip
    s.add(model)
    s.flush()
    pp = dbbuild.add_run(s, sweep, 0, workload_name="pp64", model_file_id=model.id, model_label="tiny.gguf",
                         n_gpu_layers=999, n_threads=2, n_batch=2048, depth=0)  # fmt: skip
    tg = dbbuild.add_run(s, sweep, 1, workload_name="tg16", model_file_id=model.id, model_label="tiny.gguf",
                         n_gpu_layers=999, n_threads=2, n_batch=2048, depth=0)  # fmt: skip
    s.add_all(
        [
            Measurement(run_id=pp.id, kind="cold", rep=0, n_prompt=64, prefill_ms=50.0),
            Measurement(run_id=pp.id, kind="warmup", rep=0, n_prompt=64, prefill_ms=40.0),
            *[Measurement(run_id=pp.id, kind="steady", rep=i, n_prompt=64, prefill_ms=ms, n_gen=0)
              for i, ms in enumerate([2.0, 4.0])],
            # tg16: a one-token prefill, then 15 decode steps
            *[Measurement(run_id=tg.id, kind="steady", rep=i, n_prompt=1, prefill_ms=0.1, n_gen=15,
                          decode_ms=ms) for i, ms in enumerate([1.9, 3.9])],
        ]
    )  # fmt: skip
    s.flush()
    return sweep.id


def test_a_bench_sweep_gives_one_record_per_test(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "r.db")
    with new_session(engine) as s:
        sweep_id = _bench_sweep(s, f"{BENCH_MARK} -m tiny.gguf -p 64 -n 16\n")
        records = sweep_records(s, sweep_id)
    assert [list(r) for r in records] == [[*FIELD_NAMES, *SAMPLE_FIELDS]] * 2
    pp, tg = records
    assert (pp["n_prompt"], pp["n_gen"], tg["n_prompt"], tg["n_gen"]) == (64, 0, 0, 16)
    assert pp["samples_ns"] == [2_000_000, 4_000_000]  # steady only: the cold and warm-up reps stay out
    assert pp["avg_ns"] == 3_000_000 and pp["samples_ts"] == [32000.0, 16000.0]
    assert tg["samples_ns"] == [2_000_000, 4_000_000]  # the one-token prefill counts: 16 single-token steps
    assert tg["avg_ts"] == pytest.approx(6000.0)
    assert pp["n_gpu_layers"] == -1  # every layer, as llama-bench prints it
    assert pp["model_size"] == 2_372_608 and pp["model_n_params"] == 2_229_504
    assert pp["model_type"] == "llama ?B Q8_0" and pp["backends"] == "CPU" and pp["gpu_info"] == ""
    assert pp["model_filename"] == "tiny.gguf"  # as typed after -m


def test_any_other_sweep_gives_a_pp_and_a_tg_record_per_config(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "r.db")
    with new_session(engine) as s:
        sweep_id = _bench_sweep(s, "")  # a plan's sweep: workload names mean nothing to llama-bench
        records = sweep_records(s, sweep_id)
    tests = [(r["n_prompt"], r["n_gen"], r["samples_ns"]) for r in records]
    assert tests == [
        (64, 0, [2_000_000, 4_000_000]),
        (1, 0, [100_000, 100_000]),
        (0, 15, [1_900_000, 3_900_000]),
    ]
    assert records[0]["model_filename"] == "/m.gguf"  # a plan's model: its file


def test_printers_share_the_field_list(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "r.db")
    with new_session(engine) as s:
        records = sweep_records(s, _bench_sweep(s, f"{BENCH_MARK} x\n"))
    assert FORMATS["csv"](records).splitlines()[0] == ",".join(FIELD_NAMES)
    assert [list(o) for o in json.loads(FORMATS["json"](records))] == [[*FIELD_NAMES, *SAMPLE_FIELDS]] * 2
    lines = FORMATS["jsonl"](records).splitlines()
    assert len(lines) == 2 and json.loads(lines[1]) == json.loads(FORMATS["json"](records))[1]
    db = sqlite3.connect(":memory:")
    db.executescript(FORMATS["sql"](records))  # sqlite3 reads it as llama-bench's own -o sql
    assert db.execute("SELECT n_prompt, n_gen, avg_ns FROM llama_bench").fetchall() == [
        (64, 0, 3_000_000),
        (0, 16, 3_000_000),
    ]
    md = FORMATS["md"](records).splitlines()
    # llama-bench's own header for a CPU build at its defaults (-o md of the same test, same machine)
    assert md[0] == (
        "| model                          |       size |     params | backend    | threads |"
        "            test |                  t/s |"
    )
    assert md[2].startswith(
        "| llama ?B Q8_0                  |   2.26 MiB |     2.23 M | CPU        |       2 |"
    )
    assert md[-1] == "build: unknown (0)"


def _llama_bench_like(n_prompt: int, n_gen: int, samples: list[int]) -> dict[str, Any]:
    """A synthetic record with llama-bench's fields (the real one's round trip: the integration test)."""
    rec: dict[str, Any] = {name: 0 for name in FIELD_NAMES}
    rec.update(
        build_commit="abc1234", build_number=7001, cpu_info="Some CPU", gpu_info="Some GPU", backends="CUDA",
        model_filename="m.gguf", model_type="llama 8B Q4_K - Medium", cpu_mask="0x0", split_mode="layer",
        type_k="q8_0", type_v="f16", devices="auto", tensor_split="0.00", tensor_buft_overrides="none",
        load_mode="auto", lazy_mode="auto", cpu_strict=False, no_kv_offload=False, embeddings=False,
        no_host=False, repack=True, flash_attn=1, n_gpu_layers=99, n_threads=8, n_batch=2048, n_ubatch=512,
        poll=50, n_prompt=n_prompt, n_gen=n_gen, n_depth=512, test_time="2025-01-02T03:04:05Z",
    )  # fmt: skip
    ts = [1e9 * (n_prompt + n_gen) / v for v in samples]
    rec.update(
        avg_ns=sum(samples) // len(samples), stddev_ns=stdev_ns(samples), avg_ts=sum(ts) / len(ts),
        stddev_ts=stdev_ts(ts), samples_ns=samples, samples_ts=ts,
    )  # fmt: skip
    return rec


@pytest.mark.parametrize("kind", ["json", "jsonl"])
def test_import_round_trips_and_has_no_telemetry(tmp_path: Path, kind: str) -> None:
    given = [
        _llama_bench_like(512, 0, [101_000_000, 99_000_000, 100_500_000]),
        _llama_bench_like(0, 128, [2_000_000_000, 2_100_000_000]),
        _llama_bench_like(512, 128, [2_500_000_000]),
    ]
    path = tmp_path / f"bench.{kind}"
    text = json.dumps(given) if kind == "json" else "".join(json.dumps(r) + "\n" for r in given)
    path.write_text(text)
    engine = open_engine(tmp_path / "i.db")
    with new_session(engine) as s:
        result = import_llama_bench(s, path)
        s.commit()
        assert (result.n_records, result.n_samples) == (3, 6)
        sweep = s.get(Sweep, result.sweep_id)
        assert sweep is not None and sweep.status == "imported" and sweep.device.hostname == "imported"
        assert s.scalar(select(func.count()).select_from(SampleBlock)) == 0  # nothing was observed here
        energy = s.scalars(select(Measurement.decode_j_per_token).distinct()).all()
        temps = s.scalars(select(Measurement.temp_max_c).distinct()).all()
        assert energy == [None] and temps == [None]  # NULL, never 0
        runs = s.scalars(select(Run).order_by(Run.seq)).all()
        assert [r.workload_name for r in runs] == ["pp512", "tg128", "pp512+tg128"]
        back = json.loads(FORMATS["json"](sweep_records(s, result.sweep_id)))
    assert back == json.loads(json.dumps(given))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no llama-bench records"),
        ("[]", "no llama-bench records"),
        ('[{"model_filename": "m"}]', "no 'n_prompt'"),
        ('[{"model_filename": "m", "n_prompt": 1, "n_gen": 0, "samples_ns": [0]}]', "positive integers"),
        ('{"a": 1}\n{"b"', "not llama-bench json"),
    ],
)
def test_import_refuses_what_is_not_llama_bench_output(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(LlamaBenchImportError, match=message):
        read_records(path)
