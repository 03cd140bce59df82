"""Small things a report reader sees: the CPU-only note counts every in-process config of the build (a
quality run's child does not say what the build can do), a config with no decode says why in the
recommendation's exclusion, and Pareto labels of nearby points do not print over each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgeprof.plan import QualityBudget
from edgeprof.report.figures.canvas import POINT_LABEL, spread_point_labels
from edgeprof.report.figures.pareto import speed_vs_kld_figure
from edgeprof.report.recommend import Candidate, exclusion
from edgeprof.report.render.notes import failure_notes

pytestmark = pytest.mark.timeout(120)


def _row(**fields: Any) -> dict[str, Any]:
    base = {"model_label": "q4", "ctx": 512, "ngl": 999, "workload": "w", "status": "ok", "reason": None,
            "device_state_changed": False, "stability_verdict": None,
            "_gpu_offload_supported": False}  # fmt: skip
    return {**base, **fields}


def test_the_cpu_only_note_counts_every_in_process_config_of_the_build() -> None:
    rows = [_row(model_label=f"m{i}") for i in range(8)]
    rows.append(_row(model_label="kld", workload="kld", _gpu_offload_supported=None))  # a quality run
    [note] = [n for n in failure_notes(rows) if "cannot offload" in n]
    assert note.startswith("9 config(s) asked for -ngl all")
    # a build that can offload, or one that never said: no note
    assert not [n for n in failure_notes([_row(_gpu_offload_supported=None)]) if "cannot offload" in n]
    assert not [n for n in failure_notes([_row(_gpu_offload_supported=True)]) if "cannot offload" in n]
    # a serving row (no in-process child) is not counted
    serving = {k: v for k, v in _row(model_label="srv").items() if k != "_gpu_offload_supported"}
    [note] = [n for n in failure_notes([_row(), serving]) if "cannot offload" in n]
    assert note.startswith("1 config(s)")


def test_no_decode_says_the_model_ended_at_its_first_token_and_how_to_measure_anyway() -> None:
    row = _row(tg_tps_median=None, tokens_out_median=1, n_predict=128, eos_count=5,
               finish_reasons="eos:5", ignore_eos=False)  # fmt: skip
    why = exclusion(Candidate(row, None, None, False), QualityBudget(), False)
    assert why == (
        "no steady decode measured: the model emitted end-of-sequence as its first token (1/128 eos 5/5); "
        "set ignore_eos = true in the workload to measure decode anyway"
    )
    other = _row(tg_tps_median=None, tokens_out_median=None, eos_count=0)
    why = exclusion(Candidate(other, None, None, False), QualityBudget(), False)
    assert why == "no steady decode measured"


def test_labels_of_nearby_pareto_points_do_not_overlap(tmp_path: Path) -> None:
    rows = [
        _row(model_label=f"model-{q}", quant=q, tg_tps_median=50.0 + i * 0.02, tg_tps_min=49.0,
             tg_tps_max=52.0, kld_mean=0.010 + i * 0.00005, same_top_pct=95.0 - i * 0.1)
        for i, q in enumerate(("Q4_K_M", "Q4_K_S", "Q4_0", "IQ4_XS"))
    ]  # fmt: skip
    fig = speed_vs_kld_figure(rows, QualityBudget())
    assert fig is not None
    spread_point_labels(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [a.get_window_extent(renderer) for a in fig.findobj() if getattr(a, "get_gid", None)
             and a.get_gid() == POINT_LABEL]  # fmt: skip
    assert len(boxes) == 4
    overlapping = [(i, j) for i in range(4) for j in range(i + 1, 4) if boxes[i].overlaps(boxes[j])]
    assert overlapping == []
