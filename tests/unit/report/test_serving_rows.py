"""A serving level's report row from a hand-built database (agent/report/serving.py): the level judged by
``analyse_run`` like any run (stability over its requests, interference over its window), its prompt and
output token counts from the stored requests, and both verdicts, TTFT p90 and E2EL per token shown in
every format."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from support import dbbuild

from edgeprof.report import build_rows, render_csv, render_json, render_markdown, render_table
from edgeprof.report.render.html_sections import serving_section
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Sample, ServingLevel, ServingRequest, Verdict
from edgeprof.verdicts import analyse_run

N_REQUESTS = 12


def add_level(
    s: Session, *, other_cores: float, slow_half: bool = False, runner: str = "llama-server",
    slot_n_ctx: int | None = None,
) -> int:  # fmt: skip
    """One llama-server level at c = 1: 12 requests over 2 s (8 tokens each, a 16-token prompt but one of
    17), the server busy on one core, ``other_cores`` of other work in the proc_stat counters."""
    sweep = dbbuild.add_sweep(s)
    run = dbbuild.add_run(
        s, sweep, 1, runner=runner, concurrency=1, n_threads=1, workload_json='{"n_predict": 8}'
    )
    stats = {"error_rate": 0.0, "ttft_ms": {"p90": 31.5}, "tpot_e2e_ms": {"p50": 5.25}}
    s.add(
        ServingLevel(
            run_id=run.id, concurrency=1, t_start_mono=100.0, t_end_mono=102.0, n_requests=N_REQUESTS,
            n_ok=N_REQUESTS, ttft_p50_ms=30.0, ttft_p99_ms=33.0, stats_json=json.dumps(stats),
            slot_n_ctx=slot_n_ctx,
        )
    )  # fmt: skip
    for i in range(N_REQUESTS):
        per_token = 2 * 5.25 if slow_half and i >= N_REQUESTS // 2 else 5.25
        s.add(
            ServingRequest(
                run_id=run.id, kind="measured", idx=i + 2, client=0, status="ok", t_send_mono=100.0 + i / 6,
                ttft_ms=30.0, tpot_ms=(8 * per_token - 30.0) / 7, e2el_ms=8 * per_token, output_tokens=8,
                prompt_tokens=17 if i == 3 else 16, itl_json="[]", n_chunks=8,
            )
        )  # fmt: skip
    s.add(ServingRequest(run_id=run.id, kind="cold", idx=0, client=0, status="ok", t_send_mono=99.0,
                         prompt_tokens=99, output_tokens=1, itl_json="[]", n_chunks=1))  # fmt: skip
    for k in range(11):
        t = 99.9 + 0.2 * k
        for metric, value in (
            ("host.cpu_total_s", 2.0 * t),
            ("host.cpu_steal_s", 0.0),
            ("host.cpu_busy_s", (1.1 + other_cores) * t),
            ("proc.cpu_s", 1.0 * t),
            ("self.cpu_s", 0.1 * t),
            ("host.procs_running", 2.0),
        ):
            s.add(Sample(sweep_id=sweep.id, run_id=run.id, t_mono=t, t_wall=t, source="proc_stat",
                         metric=metric, value=value))  # fmt: skip
    s.commit()
    return run.id


def serving_row(db: Path, *, other_cores: float, slow_half: bool = False, **level: Any) -> dict:
    with new_session(open_engine(db)) as s:
        run_id = add_level(s, other_cores=other_cores, slow_half=slow_half, **level)
        analyse_run(s, run_id)
        (row,) = build_rows(s, None, include_serving=True)
        stored = {v.kind: v for v in s.scalars(select(Verdict).where(Verdict.run_id == run_id))}
        row["_evidence"] = {k: json.loads(v.evidence_json) for k, v in stored.items()}
    return row


def test_a_level_is_judged_over_its_requests_and_window_and_carries_its_token_counts(tmp_path: Path) -> None:
    row = serving_row(tmp_path / "quiet.db", other_cores=0.0)
    assert (row["stability_verdict"], row["interference_verdict"]) == ("stable", "quiet")
    evidence = row["_evidence"]
    assert evidence["stability"]["metric"] == "e2el_per_token_ms" and evidence["stability"]["n"] == 4
    assert evidence["interference"]["level"]["child_cores"] == 1.0  # the server, followed by its pid
    assert row["throttle_verdict"] is None  # judged over the server's load phase, not the level: not shown
    # the measured requests only (the cold one's 99-token prompt is not among them)
    assert (row["prompt_n_tokens"], row["tokens_out_median"], row["tokens_out_min"]) == (16, 8, 8)


def test_a_contended_or_unstable_level_says_so_in_every_format(tmp_path: Path) -> None:
    contended = serving_row(tmp_path / "hog.db", other_cores=0.9)
    assert contended["interference_verdict"] == "contended"
    unstable = serving_row(tmp_path / "slow.db", other_cores=0.0, slow_half=True)
    assert unstable["stability_verdict"] == "unstable"
    rows = [contended, unstable]
    table = render_table(rows)
    md = render_markdown(rows)
    html = serving_section(rows, [])
    for text in (table, md, html):
        assert "contended" in text and "unstable" in text and "quiet" in text
        assert "TTFT p50/p90/p99 ms" in text and "30.0/31.5/33.0" in text
        assert "E2EL/tok p50 ms" in text and "5.25" in text
    by_json = json.loads(render_json(rows))
    assert [r["interference_verdict"] for r in by_json] == ["contended", "quiet"]
    assert [r["stability_verdict"] for r in by_json] == ["stable", "unstable"]
    assert all(r["prompt_n_tokens"] == 16 and r["tokens_out_median"] == 8 for r in by_json)
    by_csv = list(csv.DictReader(io.StringIO(render_csv(rows))))
    assert [r["interference_verdict"] for r in by_csv] == ["contended", "quiet"]
    assert [r["stability_verdict"] for r in by_csv] == ["stable", "unstable"]


def test_a_server_edgeprof_did_not_start_shows_its_own_settings_not_the_plans(tmp_path: Path) -> None:
    # The plan's ctx, ngl and threads were never sent to that server: its row keeps what the server said
    # (its slot's ctx) and NULL for the rest, and the section is titled by what was measured.
    foreign = serving_row(tmp_path / "foreign.db", other_cores=0.0, runner="openai", slot_n_ctx=4096)
    assert foreign["ctx"] == 4096
    assert all(foreign[k] is None for k in ("ngl", "threads", "n_batch", "n_ubatch", "flash_attn", "mmap"))
    unsaid = serving_row(tmp_path / "unsaid.db", other_cores=0.0, runner="openai")
    assert unsaid["ctx"] is None
    own = serving_row(tmp_path / "own.db", other_cores=0.0)
    assert (own["ctx"], own["ngl"], own["threads"]) == (512, 0, 1)
    for text in (render_table([foreign]), render_markdown([foreign]), serving_section([foreign], [])):
        assert "HTTP API (an OpenAI-compatible server, streamed)" in text and "llama-server" not in text
        assert "usage where the server gives it" in text
    for text in (render_table([own]), render_markdown([own]), serving_section([own], [])):
        assert "HTTP API (llama-server, streamed)" in text and "own count" in text
    assert "HTTP API (llama-server and an OpenAI-compatible server, streamed)" in render_table([own, foreign])
