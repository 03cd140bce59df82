"""Compare two sweeps config by config: ratio of medians (B / A) and whether the difference is within noise.

Configs match on the model (label and quant), ctx, ngl, threads, n_batch, flash_attn, type_k/type_v and the
workload. A difference is "within noise" when the rank interval of the ratio of the two sets of steady reps
(agent/report/speed_ratio.py, at 95 %: the same interval the recommendation decides with) holds 1, or when
the reps are too few for any interval at that level: then no claim of a change can be made. Rows without
their reps (``compare_rows`` on bare report rows) fall back to the min–max ranges: within noise when they
overlap.

The output opens by naming A and B (sweep, plan, device, build, start), so a pasted comparison says what it
compares. On a terminal the table fits its width as the report's does: constant columns said once, then
each row's caveats said once in a column of their own (in short letters if need be), then the least telling
columns left out and named, and every line wrapped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.device import comparable_state
from edgeprof.report.accuracy import COMPARE_TASK_FIELDS, compare_accuracy, compare_lines, task_items_of
from edgeprof.report.llamabench.identity import ngl_key
from edgeprof.report.render.text import wrap_line
from edgeprof.report.rows import ReportError, build_rows
from edgeprof.report.speed_ratio import speed_ratio
from edgeprof.report.tables import drop_constant_columns, fit_table, grid_width, md_table
from edgeprof.stats import Summary
from edgeprof.storage.models import Build, Device, Measurement, Run, Sweep

MATCH_KEYS = (
    "model_label",
    "quant",
    "ctx",
    "ngl",
    "threads",
    "n_batch",
    "flash_attn",
    "type_k",
    "type_v",
    "workload",
)
# metric -> (median field, min field, max field) in the rows compare works on; higher is better for t/s,
# lower for TTFT (the ratio is always B / A: > 1 is faster for t/s, slower for TTFT).
METRICS: dict[str, tuple[str, str, str]] = {
    "tg_tps": ("tg_tps_median", "tg_tps_min", "tg_tps_max"),
    "pp_tps": ("pp_tps_median", "pp_tps_min", "pp_tps_max"),
    "ttft_ms": ("ttft_ms_p50", "ttft_ms_min", "ttft_ms_max"),
}
COMPARE_FIELDS: tuple[str, ...] = (
    *MATCH_KEYS,
    "match",
    "a_run_id",
    "b_run_id",
    "a_status",
    "b_status",
    *(f"{m}_{suffix}" for m in METRICS for suffix in ("a", "b", "ratio", "within_noise")),
    "a_caveat",
    "b_caveat",
    *COMPARE_TASK_FIELDS,  # a task workload's accuracy in A and B, and B - A paired on the same tasks
)

# Verdict values that make one side's figure a poor base for a ratio: the report's own judgement of the
# run (agent/verdicts/throttle.py, store.py). A ratio between a quiet sweep and a busy one measures the
# machine, not the change.
CAVEAT_VERDICTS: dict[str, tuple[str, ...]] = {
    "stability_verdict": ("unstable",),
    "interference_verdict": ("contended",),
    "throttle_verdict": ("throttled",),
}


def caveat_of(row: Mapping[str, Any] | None) -> str | None:
    """'unstable', 'contended', 'throttled' (joined with '+') when the row's verdicts say so, else None."""
    if row is None:
        return None
    found = [str(row.get(field)) for field, bad in CAVEAT_VERDICTS.items() if row.get(field) in bad]
    return "+".join(found) or None


def key_of(row: Mapping[str, Any]) -> tuple[Any, ...]:
    # rows at another context depth are other configs; a row from before the depth axis ran at depth 0;
    # -ngl as llama.cpp applies it (-1 and 999 are both "every layer")
    values = {k: row.get(k) for k in MATCH_KEYS}
    values["ngl"] = ngl_key(row.get("ngl"), row.get("_n_layers"))
    return (*values.values(), row.get("depth") or 0)


def ratio(a: float | None, b: float | None) -> float | None:
    """b / a; None when either is missing or a is 0."""
    if a is None or b is None or a == 0:
        return None
    return b / a


def ranges_overlap(
    a_lo: float | None, a_hi: float | None, b_lo: float | None, b_hi: float | None
) -> bool | None:
    """True when [a_lo, a_hi] and [b_lo, b_hi] share a point; None when a range is unknown."""
    if a_lo is None or a_hi is None or b_lo is None or b_hi is None:
        return None
    return max(a_lo, b_lo) <= min(a_hi, b_hi)


def _with_ttft_range(session: Session, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add ``ttft_ms_min``/``ttft_ms_max`` over the steady reps (the report keeps p50/p95 only), and each
    metric's steady reps (``_reps_<metric>``) for the rank interval."""
    ids = [int(r["run_id"]) for r in rows]
    by_run: dict[int, list[tuple[float | None, float | None, float | None]]] = {}
    if ids:
        for run_id, tg, pp, ttft in session.execute(
            select(Measurement.run_id, Measurement.tg_tps, Measurement.pp_tps, Measurement.ttft_ms).where(
                Measurement.run_id.in_(ids), Measurement.kind == "steady"
            )
        ):
            by_run.setdefault(run_id, []).append((tg, pp, ttft))
    for row in rows:
        reps = by_run.get(int(row["run_id"]), [])
        summary = Summary.of(r[2] for r in reps)
        row["ttft_ms_min"], row["ttft_ms_max"] = summary.min, summary.max
        for i, metric in enumerate(METRICS):
            values = (r[i] for r in reps)
            row[f"_reps_{metric}"] = [float(v) for v in values if v is not None and v > 0]
    return rows


# The level of the interval that says "within noise", as the recommendation's default.
NOISE_CONFIDENCE_PCT = 95.0


def within_noise(a: Mapping[str, Any], b: Mapping[str, Any], metric: str) -> bool | None:
    """Whether the two sides' figures of ``metric`` are within noise of each other (module docstring)."""
    a_reps, b_reps = a.get(f"_reps_{metric}"), b.get(f"_reps_{metric}")
    if a_reps and b_reps:
        return not speed_ratio(b_reps, a_reps, NOISE_CONFIDENCE_PCT).decided
    _med, lo, hi = METRICS[metric]
    return ranges_overlap(a.get(lo), a.get(hi), b.get(lo), b.get(hi))


def compare_rows(
    a_rows: Sequence[Mapping[str, Any]], b_rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Pure form of ``compare_sweeps`` on report rows (with ``ttft_ms_min/max`` where known).

    One output row per config: ``match`` is "both", "only_a" or "only_b". Configs appearing twice in one
    sweep (same key, e.g. different n_ubatch) are paired in order.
    """
    b_by_key: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in b_rows:
        b_by_key.setdefault(key_of(row), []).append(row)
    out: list[dict[str, Any]] = []
    for a in a_rows:
        candidates = b_by_key.get(key_of(a))
        b = candidates.pop(0) if candidates else None
        out.append(_pair(a, b))
    for rest in b_by_key.values():
        out.extend(_pair(None, b) for b in rest)
    return out


def _pair(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any]:
    src = a if a is not None else b
    assert src is not None
    row: dict[str, Any] = {k: src.get(k) for k in MATCH_KEYS}
    row["depth"] = src.get("depth") or 0  # part of the key: the same config at another context depth
    row["match"] = "both" if a is not None and b is not None else "only_a" if a is not None else "only_b"
    row["a_run_id"] = a.get("run_id") if a is not None else None
    row["b_run_id"] = b.get("run_id") if b is not None else None
    row["a_status"] = a.get("status") if a is not None else None
    row["b_status"] = b.get("status") if b is not None else None
    row["a_caveat"], row["b_caveat"] = caveat_of(a), caveat_of(b)
    for metric, (med, _lo, _hi) in METRICS.items():
        va = a.get(med) if a is not None else None
        vb = b.get(med) if b is not None else None
        row[f"{metric}_a"], row[f"{metric}_b"] = va, vb
        r = ratio(va, vb)
        row[f"{metric}_ratio"] = round(r, 4) if r is not None else None
        row[f"{metric}_within_noise"] = (
            within_noise(a, b, metric)
            if a is not None and b is not None and va is not None and vb is not None
            else None
        )
    row.update(compare_accuracy(a, b))
    return row


def compare_sweeps(
    session: Session, a_id: int, b_id: int, session_b: Session | None = None
) -> list[dict[str, Any]]:
    """Match the configs of sweeps ``a_id`` and ``b_id``; see the module docstring. Raises
    ``edgeprof.report.rows.ReportError`` for an unknown sweep. ``session_b``: B lives in another database
    (two devices' files, or a device's file against the central DB)."""
    other = session_b if session_b is not None else session
    a_rows = _with_ttft_range(session, build_rows(session, a_id))
    b_rows = _with_ttft_range(other, build_rows(other, b_id))
    for rows, sess in ((a_rows, session), (b_rows, other)):
        for row in rows:
            row["_task_items"] = task_items_of(sess, row)  # for the pairing of a task run across sweeps
    return compare_rows(a_rows, b_rows)


def describe_sweep(session: Session, sweep_id: int) -> dict[str, Any]:
    """What names a side of a comparison: the sweep's id, plan name, status and start, its device
    (hostname, board, L4T) and the builds its runs used, worded as ``edgeprof sweeps`` words them."""
    found = session.execute(
        select(Sweep, Device).join(Device, Sweep.device_id == Device.id).where(Sweep.id == sweep_id)
    ).first()
    if found is None:
        raise ReportError(f"no sweep with id {sweep_id} in this database")
    sweep, device = found
    builds = session.execute(
        select(Build.llama_cpp_python_version, Build.backend)
        .join(Run, Run.build_id == Build.id)
        .where(Run.sweep_id == sweep_id)
        .distinct()
    ).all()
    return {
        "sweep_id": sweep.id,
        "name": sweep.name,
        "status": sweep.status,
        "started_at": sweep.started_at.isoformat(sep=" ", timespec="minutes") if sweep.started_at else None,
        "device_hostname": device.hostname,
        "device_board_model": device.board_model,
        "device_l4t_release": device.l4t_release,
        "builds": sorted({f"llama-cpp-python {version} ({backend})" for version, backend in builds}),
        "device_state": sweep_state(session, sweep),
    }


def sweep_state(session: Session, sweep: Sweep) -> dict[str, Any] | None:
    """The device state most of the sweep's blocks of steady reps started in (governor, clock caps, power
    mode, jetson_clocks: ``run.block_states_json``); else its power mode and jetson_clocks at its start."""
    stored = session.scalars(
        select(Run.block_states_json).where(Run.sweep_id == sweep.id, Run.block_states_json.is_not(None))
    ).all()
    states = [st for text in stored if text for st in json.loads(text).values()]
    counts = Counter(json.dumps(st, sort_keys=True) for st in states)
    if counts:
        return dict(json.loads(counts.most_common(1)[0][0]))
    return comparable_state(json.loads(sweep.device_state_json)) if sweep.device_state_json else None


def state_difference(sides: Sequence[Mapping[str, Any]]) -> str | None:
    """"device state differs: …" where A's and B's states are both known and differ, said before any
    ratio: a ratio across two states measures the state as much as the change."""
    if len(sides) != 2 or not sides[0].get("device_state") or not sides[1].get("device_state"):
        return None
    a, b = sides[0]["device_state"], sides[1]["device_state"]
    diffs = [f"{k} {a.get(k)} (A) vs {b.get(k)} (B)" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    if not diffs:
        return None
    return f"device state differs: {'; '.join(diffs)}; the ratios below compare two states, not only the runs"


def side_line(side: str, about: Mapping[str, Any]) -> str:
    """One side's line: "A: sweep 1 'plan' on vm (Jetson Orin Nano, L4T 36.4), llama-cpp-python 0.3.8 (cuda),
    started …"."""
    l4t = about.get("device_l4t_release")
    board = ", ".join(v for v in (about.get("device_board_model"), f"L4T {l4t}" if l4t else None) if v)
    device = str(about["device_hostname"]) + (f" ({board})" if board else "")
    builds = "; ".join(about.get("builds") or []) or "no build recorded"
    where = f" in {about['database']}" if about.get("database") else ""
    started = f", started {about['started_at']}" if about.get("started_at") else ""
    return f"{side}: sweep {about['sweep_id']} {about['name']!r}{where} on {device}, {builds}{started}"


# -- rendering ---------------------------------------------------------------------------------------------
_HEADERS = (
    "model",
    "quant",
    "ctx",
    "depth",
    "ngl",
    "thr",
    "batch",
    "fa",
    "kv",
    "workload",
    "tg t/s",
    "pp t/s",
    "TTFT",
)


# Each verdict of a caveat in one letter, for a table that has to fit a narrow terminal.
_CAVEAT_LETTERS = {"unstable": "u", "contended": "c", "throttled": "t"}


def caveats_text(row: Mapping[str, Any], short: bool = False) -> str:
    """Both sides' caveats: "A unstable+contended, B contended" (``short``: "A u+c, B c"); "" when neither
    side has one."""
    parts = []
    for side in ("A", "B"):
        caveat = row.get(f"{side.lower()}_caveat")
        if caveat:
            words = str(caveat).split("+")
            parts.append(f"{side} " + "+".join(_CAVEAT_LETTERS.get(w, w) if short else w for w in words))
    return ", ".join(parts)


def _metric_cell(row: Mapping[str, Any], metric: str, digits: int = 1, with_caveats: bool = True) -> str:
    a, b, r, noise = (row[f"{metric}_{s}"] for s in ("a", "b", "ratio", "within_noise"))
    if row["match"] != "both":
        return "—"
    if a is None or b is None:
        return f"{'—' if a is None else f'{a:.{digits}f}'}→{'—' if b is None else f'{b:.{digits}f}'}"
    tag = " (noise)" if noise else "" if noise is False else " (?)"
    caveats = caveats_text(row)
    if caveats and with_caveats:  # say why the ratio cannot be trusted instead of printing it as a finding
        tag += f" ({caveats})"
    ratio_text = f"×{r:.2f}" if r is not None else "×—"
    return f"{a:.{digits}f}→{b:.{digits}f} {ratio_text}{tag}"


def _cells(row: Mapping[str, Any], with_caveats: bool = True) -> list[str]:
    return [
        str(row["model_label"]),
        str(row["quant"] or "—"),
        str(row["ctx"]),
        str(row.get("depth") or 0),
        str(row["ngl"]),
        str(row["threads"]),
        str(row["n_batch"]),
        str(row["flash_attn"]),
        f"{row['type_k']}/{row['type_v']}",
        str(row["workload"]),
        _metric_cell(row, "tg_tps", with_caveats=with_caveats),
        _metric_cell(row, "pp_tps", with_caveats=with_caveats),
        _metric_cell(row, "ttft_ms", 2, with_caveats),
    ]


def _unmatched(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for row in rows:
        if row["match"] == "both":
            continue
        side = "A" if row["match"] == "only_a" else "B"
        depth = f" depth={row['depth']}" if row.get("depth") else ""
        lines.append(
            f"only in {side}: {row['model_label']} ctx={row['ctx']}{depth} ngl={row['ngl']} "
            f"t={row['threads']} b={row['n_batch']} fa={row['flash_attn']} "
            f"kv={row['type_k']}/{row['type_v']} wl={row['workload']}"
        )
    return lines


LEGEND = (
    "a→b ×ratio (B/A; >1 is faster for t/s, slower for TTFT); (noise): the min–max ranges of the steady "
    "reps overlap, so the difference is within noise; (?): a range is unknown; (A unstable), (B contended), "
    "(… throttled): that side's verdict says its figure is not a fair base for a ratio"
)
_METRIC_LEGEND = LEGEND.split("; (A unstable)")[0]
CAVEAT_LEGEND = _METRIC_LEGEND + "; caveat: A's or B's verdict says its figure is not a fair base for a ratio"
SHORT_CAVEAT_LEGEND = CAVEAT_LEGEND + " (u unstable, c contended, t throttled)"
# Never left out: what the row is and how fast it ran, and why that ratio may not be trusted.
COMPARE_ESSENTIAL = ("model", "workload", "tg t/s", "caveat")
# Left out first when the table is wider than the terminal (the least telling first); each one is named.
COMPARE_DROP_ORDER = ("kv", "fa", "thr", "ngl", "quant", "batch", "TTFT", "pp t/s", "ctx", "depth")


def _layouts(matched: Sequence[Mapping[str, Any]]) -> list[tuple[list[str], list[list[str]], str]]:
    """The table's ways of saying the caveats, widest first: in every metric cell, once per row in a
    column, once per row in letters. Each is (headers, cells, legend); the caveat column only when a row
    has a caveat."""
    layouts = [(list(_HEADERS), [_cells(r) for r in matched], LEGEND)]
    if not any(caveats_text(r) for r in matched):
        return layouts
    for short, legend in ((False, CAVEAT_LEGEND), (True, SHORT_CAVEAT_LEGEND)):
        cells = [[*_cells(r, with_caveats=False), caveats_text(r, short) or "—"] for r in matched]
        layouts.append(([*_HEADERS, "caveat"], cells, legend))
    return layouts


def _table_lines(matched: Sequence[Mapping[str, Any]], width: int | None) -> list[str]:
    """The table of matched configs with its "every row" line and legend, fitted to ``width`` (see the
    module docstring); None: as wide as its cells."""
    fitted: tuple[list[str], list[list[str]], list[tuple[str, str]], str] | None = None
    for headers, cells, legend in _layouts(matched):
        shown_h, shown_c, common = drop_constant_columns(headers, cells, keep=COMPARE_ESSENTIAL)
        fitted = (shown_h, shown_c, common, legend)
        if width is None or not matched or grid_width(shown_h, shown_c) <= width:
            break
    assert fitted is not None
    headers, cells, common, legend = fitted
    lines = []
    if common:
        lines += ["every row: " + "  ".join(f"{h}={v}" for h, v in common), ""]
    lines += fit_table(headers, cells, width, COMPARE_DROP_ORDER)
    if not matched:
        lines.append("(no config appears in both sweeps)")
    return [*lines, "", legend]


def render_compare(
    rows: Sequence[Mapping[str, Any]],
    fmt: str = "table",
    *,
    sides: Sequence[Mapping[str, Any]] = (),
    width: int | None = None,
) -> str:
    """``table`` (aligned text), ``md`` (Markdown) or ``json`` (a list of objects with ``COMPARE_FIELDS``).
    ``sides``: A's and B's ``describe_sweep``, named above the table; ``width``: the terminal's, which the
    table fits (None: as wide as its cells)."""
    if fmt == "json":
        return json.dumps(
            [{k: row.get(k) for k in COMPARE_FIELDS} for row in rows], indent=2, allow_nan=False
        )
    matched = [r for r in rows if r["match"] == "both"]
    unmatched = _unmatched(rows)
    named = [side_line(side, about) for side, about in zip("AB", sides, strict=False)]
    differs = state_difference(sides)
    named += [differs] if differs else []
    if fmt == "md":
        lines = [*(f"**{n[:1]}**{n[1:]}  " for n in named), *([""] if named else [])]
        lines += md_table(_HEADERS, [_cells(r) for r in matched])
        lines += ["", f"_{LEGEND}_"]
        accuracy = compare_lines(list(matched))
        if accuracy:
            lines += ["", "**Task accuracy, B against A on the same tasks:**", ""]
            lines += [f"- {x}" for x in accuracy]
        if unmatched:
            lines += ["", "**Unmatched configs:**", ""] + [f"- {u}" for u in unmatched]
        return "\n".join(lines)
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}; use table, md or json")
    lines = [*named, *([""] if named else []), *_table_lines(matched, width)]
    accuracy = compare_lines(list(matched))
    if accuracy:
        lines += ["", "Task accuracy, B against A on the same tasks:", *(f"  {x}" for x in accuracy)]
    if unmatched:
        lines += ["", f"{len(unmatched)} unmatched config(s):"] + [f"  {u}" for u in unmatched]
    if width is not None:
        lines = [part for line in lines for part in wrap_line(line, width)]
    return "\n".join(lines)
