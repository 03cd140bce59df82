"""One self-contained HTML report of a sweep: every figure embedded as a base64 data URI, CSS inline, no
script and nothing fetched from anywhere, so the file can be mailed, archived or opened offline on a Jetson.

Sections: the recommendation, summary, configs (the ``build_rows`` rows with their verdicts, from the column
registry), the serving levels, figures, verdicts with their evidence, failed runs with reasons and log
tails, device / build / power mode, collectors, the plan.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.plan import budget_from_plan_text
from edgeprof.report.accuracy import accuracy_lines
from edgeprof.report.cells import output_head
from edgeprof.report.render.html_parts import (
    FIT_CHARS,
    SCREEN_PX,
    kv_table,
    png_data_uri,
    registry_table,
    table_columns,
)
from edgeprof.report.render.html_sections import (
    collectors_section,
    device_section,
    failures_section,
    recommendation_section,
    serving_section,
    verdict_section,
)
from edgeprof.report.render.notes import ECHO_TITLE, config_name
from edgeprof.report.render.soak import soak_chart_input, soak_lines
from edgeprof.report.rows import build_rows
from edgeprof.report.serving import is_serving_row
from edgeprof.report.workload import depth_curves
from edgeprof.safefs import replace_report
from edgeprof.safetext import esc
from edgeprof.storage.models import Run, Sweep

Row = Mapping[str, Any]
TripPoints = Mapping[str, Sequence[tuple[str, float]]]

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px;
       color: #212121; max-width: 1600px; overflow-wrap: anywhere; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; border-bottom: 1px solid #ccc; padding-bottom: 3px; margin-top: 28px; }
h3 { font-size: 14px; margin: 14px 0 4px; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
div.table { max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top;
         overflow-wrap: normal; }
th { background: #f5f5f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.failed td { background: #fff3f3; }
pre { background: #f7f7f7; border: 1px solid #e0e0e0; padding: 6px; font-size: 11px; overflow-x: auto;
      white-space: pre-wrap; }
.muted { color: #757575; }
.badge { display: inline-block; padding: 1px 6px; border-radius: 8px; font-size: 11px; font-weight: 600;
         white-space: nowrap; }
.v-throttled, .v-unstable, .v-contended, .v-failed { background: #ffcdd2; color: #b71c1c; }
.v-slowdown_not_thermal { background: #ffe0b2; color: #e65100; }
.v-inconclusive, .v-none { background: #eeeeee; color: #616161; }
.v-not_throttled, .v-stable, .v-ok { background: #c8e6c9; color: #1b5e20; }
img { max-width: 100%; height: auto; border: 1px solid #e0e0e0; }
details summary { cursor: pointer; color: #1565c0; font-size: 12px; }
ul.recommendation { font-size: 13px; } li.rec { font-weight: 600; margin-top: 6px; }
li.sub { list-style: none; color: #424242; }
div.figure { max-width: 100%; }
/* A phone: each table row becomes a card of "column: value" lines, so no table is wider than the screen
   and no cell is squeezed to a few characters; a figure is drawn at the screen's width, its legend on
   screen (pinch to zoom into it). */
@media (max-width: 640px) {
  body { margin: 10px; }
  div.table table, div.table thead, div.table tbody, div.table tr, div.table td { display: block; }
  div.table thead { display: none; }
  div.table tr { border: 1px solid #ddd; margin: 0 0 8px; }
  div.table td { border: none; border-bottom: 1px solid #eee; text-align: left; white-space: normal; }
  div.table td[data-label]::before { content: attr(data-label) ": "; font-weight: 600; color: #424242; }
  div.table td.num { text-align: left; }
  div.table th { display: inline-block; border: none; }
  div.figure img { width: 100%; }
}
"""


def _figure(title: str, path: Path | None, error: str | None) -> str:
    if path is None:
        return f'<h3>{esc(title)}</h3><p class="muted">figure not drawn: {esc(error)}</p>'
    img = f'<img alt="{esc(title)}" src="{png_data_uri(path)}">'
    return f'<h3>{esc(title)}</h3><div class="figure">{img}</div>'


def _figures_to_draw(
    session: Session,
    sweep: Sweep,
    rows: list[dict[str, Any]],
    serving: list[dict[str, Any]],
    trip_points: TripPoints | None,
    log: bool = False,
) -> list[tuple[str, Callable[[Path], Path]]]:
    """(title, draw) of each figure this sweep has data for (an imported log: its timeline alone)."""
    # matplotlib only here: a report without --html never loads it
    from edgeprof.report.figures import (
        comparison_png,
        depth_png,
        has_serving_curves,
        has_speed_vs_kld,
        serving_png,
        soak_png,
        speed_vs_kld_png,
        timeline_png,
    )

    budget = budget_from_plan_text(sweep.plan_text)
    figures: list[tuple[str, Callable[[Path], Path]]] = [
        (
            "Timeline: temperature, clocks, power, tokens/s",
            lambda p: timeline_png(session, sweep.id, p, trip_points),
        ),
    ]
    if (rows or not serving) and not log:  # serving levels only, or a log: no in-process config to compare
        figures.append(("Configs compared", lambda p: comparison_png(rows, p)))
    if depth_curves(rows):  # only for sweeps with a depth axis
        figures.append(("tg t/s and TTFT against depth", lambda p: depth_png(rows, p)))
    if has_speed_vs_kld(rows):  # only with a quality workload
        figures.append(
            ("Speed against KLD per ctx (Pareto front)", lambda p: speed_vs_kld_png(rows, p, budget))
        )
    soaks = soak_chart_input(rows)
    if soaks:  # only with a soak workload
        figures.append(("Soak: tg t/s per window, temperature and clocks", lambda p: soak_png(soaks, p)))
    if has_serving_curves(serving):  # only with the llama-server runner
        figures.append(
            ("HTTP API: latency and throughput against concurrency", lambda p: serving_png(serving, p))
        )
    return figures


def _log_verdict(session: Session, sweep: Sweep) -> dict[str, Any] | None:
    """The verdict on an imported log, per session; None for a sweep of runs."""
    from edgeprof.verdicts.log_store import is_imported, log_verdict_of

    return log_verdict_of(session, sweep.id, store=False) if is_imported(sweep) else None


def _figures_html(figures: list[tuple[str, Callable[[Path], Path]]]) -> str:
    from edgeprof.report.figures import plain_text

    parts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="edgeprof-html-") as tmp:
        for title, draw in figures:
            target = Path(tmp) / f"{len(parts)}.png"
            try:
                with plain_text():  # labels are the user's text, never math
                    drawn = draw(target)
                parts.append(_figure(title, drawn, None))
            except Exception as exc:  # noqa: BLE001 - a broken figure must not cost the user the report
                parts.append(_figure(title, None, f"{type(exc).__name__}: {exc}"))
    return "".join(parts)


def _summary(sweep: Sweep, rows: Sequence[Row], log: dict[str, Any] | None = None) -> str:
    """``rows``: every config and serving level (each is one of the plan's specs, as the terminal counts);
    ``log``: an imported log's verdict, whose sessions stand where a sweep's configs would."""
    counts: dict[str, int] = {}
    verdict_counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        key = row.get("throttle_verdict") or "not judged"
        verdict_counts[key] = verdict_counts.get(key, 0) + 1
    by_status = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return kv_table(
        [
            ("sweep", f"{sweep.id}: {sweep.name}"),
            ("status", sweep.status),
            ("started", str(sweep.started_at)),
            ("ended", str(sweep.ended_at) if sweep.ended_at else "—"),
            ("edgeprof", sweep.edgeprof_version),
            ("plan", sweep.plan_path or "—"),
            *_counted(sweep, rows, by_status, verdict_counts, log),
        ]
    )


def _counted(
    sweep: Sweep,
    rows: Sequence[Row],
    by_status: str,
    verdict_counts: dict[str, int],
    log: dict[str, Any] | None,
) -> list[tuple[str, str]]:
    """The summary's counts: a sweep's configs and throttle verdicts, or an imported log's sessions."""
    if log is not None:
        verdicts = ", ".join(f"{i}: {s['verdict']}" for i, s in enumerate(log["sessions"], 1))
        return [("log sessions", verdicts or "—")]
    throttle = ", ".join(f"{n} {v}" for v, n in sorted(verdict_counts.items()))
    configs = f"{len(rows)} of {sweep.n_specs} ({by_status})"
    return [("configs", configs), ("throttle verdicts", throttle or "—")]


NOTES = (
    '<p class="muted">pp/tg: steady reps only (llama.cpp counters); load: first start of a fresh '
    "process; throttle/stability: see Verdicts below.</p>"
)


def _soak_section(rows: Sequence[Row]) -> str:
    """Each soak's verdict, figures and sparkline as text (the chart is with the figures)."""
    lines = soak_lines(rows)
    if not lines:
        return ""
    return f"<h3>{esc(lines[0].rstrip(':'))}</h3><pre>{esc(chr(10).join(x.strip() for x in lines[1:]))}</pre>"


def _accuracy_section(rows: Sequence[Row]) -> str:
    """Each task run's accuracy and its paired difference against the reference, one item each."""
    lines = accuracy_lines(list(rows))
    if not lines:
        return ""
    items = "".join(f"<li>{esc(x)}</li>" for x in lines)
    return f"<h3>Task accuracy (each variant against its reference, on the same tasks)</h3><ul>{items}</ul>"


def _echo_warning(rows: Sequence[Row]) -> str:
    """The configs whose output repeats the prompt, named below the table (their rows read 'ok')."""
    echoes = [r for r in rows if r.get("_output_echo")]
    if not echoes:
        return ""
    items = "".join(f"<li>{esc(config_name(r))}: <code>{esc(output_head(r))}</code></li>" for r in echoes)
    return f"<h3>{esc(len(echoes))} config(s) with {esc(ECHO_TITLE)}</h3><ul>{items}</ul>"


def configs_section(rows: Sequence[Row], wide: bool = False) -> str:
    """The configs table: columns without data left out, as the terminal leaves them out, and (unless
    ``wide``) the least telling ones too until it fits a laptop screen, each one named below it."""
    columns, left_out = table_columns("configs", rows, drop_empty=True, fit_chars=None if wide else FIT_CHARS)
    out = registry_table("configs", rows, numbered=True, columns=columns)
    if left_out:
        out += (
            f'<p class="muted">Left out to fit a {SCREEN_PX}-px window: {esc(", ".join(left_out))} '
            "(<code>edgeprof report --html FILE --wide</code> shows every column).</p>"
        )
    return out


def _configs_part(rows: Sequence[Row], serving: Sequence[Row], wide: bool) -> str:
    """The in-process configs; a sweep of serving levels only has none, and no empty table for them."""
    if not rows and serving:
        return ""
    return (
        f"<h2>Configs</h2>{configs_section(rows, wide)}{NOTES}{_accuracy_section(rows)}{_echo_warning(rows)}"
        f"{_soak_section(rows)}"
    )


def render_html(
    session: Session, sweep_id: int, trip_points: TripPoints | None = None, wide: bool = False
) -> str:
    """The whole report as one HTML string (raises ``ReportError`` for an unknown sweep); ``wide``: every
    column with data in the configs table, however wide it gets."""
    everything = build_rows(session, sweep_id, include_serving=True)
    # the serving levels, a scenario of their own (never in the in-process config table)
    rows = [r for r in everything if not is_serving_row(r)]
    serving = [r for r in everything if is_serving_row(r)]
    sweep = session.get(Sweep, sweep_id)
    assert sweep is not None  # build_rows raised otherwise
    runs = list(session.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)))
    latest_ids = {int(r["run_id"]) for r in rows}
    log = _log_verdict(session, sweep)
    figures = _figures_html(_figures_to_draw(session, sweep, rows, serving, trip_points, log is not None))
    if log is not None:  # a log: its verdict per session first, then the timeline it was read from
        from edgeprof.report.render.log import render_log_html

        middle = f"{render_log_html(log)}<h2>Figures</h2>{figures}"
    else:
        middle = (
            f"{_configs_part(rows, serving, wide)}{serving_section(serving, rows, wide)}"
            f"<h2>Figures</h2>{figures}<h2>Verdicts</h2>{verdict_section(session, runs)}"
        )
    body = (
        f"<h1>edgeprof report — sweep {sweep.id}: {esc(sweep.name)}</h1>"
        f"{recommendation_section(rows)}"
        f"<h2>Summary</h2>{_summary(sweep, everything, log)}"
        f"{middle}"
        f"<h2>Failed runs</h2>{failures_section(runs, latest_ids)}"
        f"<h2>Device, build and power mode</h2>{device_section(session, sweep, runs)}"
        f"<h2>Telemetry collectors</h2>{collectors_section(session, sweep)}"
        f"<h2>Plan</h2><details><summary>plan text</summary><pre>{esc(sweep.plan_text)}</pre></details>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="edgeprof">'
        f"<title>edgeprof sweep {sweep.id}: {esc(sweep.name)}</title>"
        f"<style>{CSS}</style></head><body>{body}</body></html>\n"
    )


def write_html(
    session: Session, sweep_id: int, out: Path, protect: tuple[Path, ...] = (), **kwargs: Any
) -> Path:
    """``render_html`` written to ``out`` (UTF-8); returns ``out``.

    Replaces only an earlier edgeprof report, never ``protect`` (the database) or any other file, and never
    writes through a symlink (temp file + rename in the same folder): see agent/safefs.py.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    replace_report(out, render_html(session, sweep_id, **kwargs).encode("utf-8"), protect)
    return out
