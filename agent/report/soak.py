"""A soak's figures where the report reads them: its verdict's evidence as row fields, and its windows for
the chart and the sparkline (drawn by ``render/soak.py`` and ``figures/soak.py``).

The figures were computed once, when the soak ended (``agent/verdicts/soak.py``, stored as the run's
``soak`` verdict and its ``soak_window`` rows); the report only reads them back, so a report of an old
sweep says what the sweep said.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import object_session

from edgeprof.stats import median
from edgeprof.storage.models import Run, SoakWindow, Verdict

SOAK_KIND = "soak"

# report field -> where it sits in the soak verdict's evidence
_EVIDENCE_PATHS: dict[str, tuple[str, ...]] = {
    "soak_burst_tps": ("burst_tps",),
    "soak_sustained_tps": ("sustained_tps",),
    "soak_sustained_ratio": ("sustained_ratio",),
    "soak_stability_ratio": ("stability_ratio",),
    "soak_first_throttle_s": ("first_throttle", "s"),
    "soak_first_throttle_what": ("first_throttle", "what"),
    "soak_steady_state_s": ("thermal", "steady_state_s"),
    "soak_steady_temp_c": ("thermal", "steady_temp_c"),
    "soak_end_slope_c_per_min": ("thermal", "end_slope_c_per_min"),
}
# read from the windows themselves: their energy is the run's energy source's, set after the verdict
_ENERGY_FIELDS = ("soak_burst_j_per_token", "soak_sustained_j_per_token")
SOAK_FIELDS = ("soak_verdict", *_EVIDENCE_PATHS, *_ENERGY_FIELDS)
BURST_WINDOWS = 3  # as the soak verdict's burst: the first three windows; sustained: the last third


def burst_and_sustained(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Median of the first three measured windows' values and of the last third's, as the soak verdict takes
    burst and sustained speed (None where no window was measured)."""

    known = [v for v in values if v is not None]
    if not known:
        return None, None
    return median(known[:BURST_WINDOWS]), median(known[-max(1, len(known) // 3) :])


def _dig(evidence: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = evidence
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def soak_fields(run: Run) -> dict[str, Any]:
    """The soak's figures for its row (every field None where it was never judged), and its windows under
    ``_soak_windows`` for the chart and the sparkline (not a schema field)."""
    out: dict[str, Any] = dict.fromkeys(SOAK_FIELDS)
    windows: list[SoakWindow] = list(run.soak_windows)
    session = object_session(run)
    verdict = (
        session.scalar(select(Verdict).where(Verdict.run_id == run.id, Verdict.kind == SOAK_KIND))
        if session is not None
        else None
    )
    if verdict is None and not windows:
        return out
    if verdict is not None:
        evidence = json.loads(verdict.evidence_json or "{}")
        out["soak_verdict"] = verdict.value
        out.update({name: _dig(evidence, path) for name, path in _EVIDENCE_PATHS.items()})
        out["_soak_reasons"] = list(evidence.get("reasons") or [])
    ordered = sorted(windows, key=lambda w: w.idx)
    out["soak_burst_j_per_token"], out["soak_sustained_j_per_token"] = burst_and_sustained(
        [w.j_per_token for w in ordered]
    )
    t0 = min((w.t_start_mono for w in windows), default=0.0)
    out["_soak_windows"] = [
        {
            "t_mid_s": (w.t_start_mono + w.t_end_mono) / 2 - t0,
            "tg_tps": w.tg_tps,
            "temp_max_c": w.temp_max_c,
            "cpu_mhz": w.cpu_mhz,
            "gpu_mhz": w.gpu_mhz,
            "j_per_token": w.j_per_token,
            "other_cores": w.other_cores,
        }
        for w in ordered
    ]
    return out


def soak_rows(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("_soak_windows") or r.get("soak_verdict")]
