"""One self-contained HTML report of a sweep: every figure embedded as a base64 data URI, CSS inline, no
script and nothing fetched from anywhere, so the file can be mailed, archived or opened offline on a Jetson.

Sections: summary, configs (the ``report.build_rows`` rows with their verdicts), figures, verdicts with
their evidence, failed runs with reasons and log tails, device / build / power mode, collectors, the plan.
"""

from __future__ import annotations

import base64
import html
import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.plan import budget_from_plan_text
from edgeprof.report.figures.depth import depth_png
from edgeprof.report.figures.pareto import has_speed_vs_kld, speed_vs_kld_png
from edgeprof.report.figures.plots import comparison_png, timeline_png
from edgeprof.report.figures.serving import has_serving_curves, serving_png
from edgeprof.report.fit import fmt_bandwidth, fmt_memory, recommendation_lines
from edgeprof.report.rows import build_rows, fmt_agreement, fmt_spread, fmt_value
from edgeprof.report.workload import depth_curves, fmt_tokens_out
from edgeprof.storage.models import Build, CollectorStatus, Run, Sweep
from edgeprof.verdicts.judge import attach_verdicts, verdicts_by_run

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px;
       color: #212121; max-width: 1600px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; border-bottom: 1px solid #ccc; padding-bottom: 3px; margin-top: 28px; }
h3 { font-size: 14px; margin: 14px 0 4px; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.failed td { background: #fff3f3; }
pre { background: #f7f7f7; border: 1px solid #e0e0e0; padding: 6px; font-size: 11px; overflow-x: auto;
      white-space: pre-wrap; }
.muted { color: #757575; }
.badge { display: inline-block; padding: 1px 6px; border-radius: 8px; font-size: 11px; font-weight: 600; }
.v-throttled, .v-unstable, .v-contended, .v-failed { background: #ffcdd2; color: #b71c1c; }
.v-slowdown_not_thermal { background: #ffe0b2; color: #e65100; }
.v-inconclusive, .v-none { background: #eeeeee; color: #616161; }
.v-not_throttled, .v-stable, .v-ok { background: #c8e6c9; color: #1b5e20; }
img { max-width: 100%; border: 1px solid #e0e0e0; }
details summary { cursor: pointer; color: #1565c0; font-size: 12px; }
ul.recommendation { font-size: 13px; } li.rec { font-weight: 600; margin-top: 6px; }
li.sub { list-style: none; color: #424242; }
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _badge(value: str | None, css_value: str | None = None) -> str:
    text = value or "not judged"
    key = css_value or value
    css = f"v-{key}" if key else "v-none"
    return f'<span class="badge {_e(css)}">{_e(text)}</span>'


def _table(headers: Sequence[str], body: Sequence[Sequence[str]], row_classes: Sequence[str] = ()) -> str:
    """``body`` cells are HTML already (escape before)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    rows = []
    for i, cells in enumerate(body):
        css = f' class="{_e(row_classes[i])}"' if i < len(row_classes) and row_classes[i] else ""
        rows.append(f"<tr{css}>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _td(text: Any, num: bool = False) -> str:
    return f'<td class="num">{_e(text)}</td>' if num else f"<td>{_e(text)}</td>"


def _kv_table(pairs: Sequence[tuple[str, Any]]) -> str:
    body = [[f"<th>{_e(k)}</th>", _td(fmt_value(v, 2) if not isinstance(v, str) else v)] for k, v in pairs]
    return "<table><tbody>" + "".join("<tr>" + "".join(c) + "</tr>" for c in body) + "</tbody></table>"


def _json_block(text: str | None) -> str:
    if not text:
        return '<p class="muted">not recorded</p>'
    try:
        pretty = json.dumps(json.loads(text), indent=2, sort_keys=True)
    except ValueError:
        pretty = text
    return f"<pre>{_e(pretty)}</pre>"


def png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


CONFIG_HEADERS = (
    "#",
    "model",
    "quant",
    "ctx",
    "depth",
    "ngl",
    "thr",
    "workload",
    "tok out/n_pred",
    "status",
    "load ms",
    "pp t/s med [min–max]",
    "tg t/s med [min–max]",
    "TTFT p50/p95 ms",
    "RSS MiB",
    "mem pred/peak MB",
    "BW GB/s (%)",
    "shared/GPU MB",
    "agree vs ref",
    "tg×ref",
    "start/max °C",
    "W decode",
    "J/tok net",
    "throttle",
    "stability",
    "interference",
)


def _config_cells(i: int, row: Mapping[str, Any]) -> list[str]:
    agree = fmt_agreement(row)
    ttft = "—" if row.get("ttft_ms_p50") is None else f"{row['ttft_ms_p50']:.1f}/{row['ttft_ms_p95']:.1f}"
    watts = row.get("decode_power_mw_median")
    ok = row["status"] == "ok"
    status_cell = _badge(row["status"], None if ok else "failed") + (
        "" if ok else f" {_e(row.get('reason'))}"
    )
    return [
        _td(i, num=True),
        _td(row["model_label"]),
        _td(fmt_value(row.get("quant"))),
        _td(row["ctx"], num=True),
        _td(fmt_value(row.get("depth")), num=True),
        _td(row["ngl"], num=True),
        _td(row["threads"], num=True),
        _td(row["workload"]),
        _td(fmt_tokens_out(row), num=True),  # issue 10: an early EOS is visible beside n_predict
        f"<td>{status_cell}</td>",
        _td(fmt_value(row.get("cold_load_ms")), num=True),
        _td(fmt_spread(row, "pp_tps"), num=True),
        _td(fmt_spread(row, "tg_tps"), num=True),
        _td(ttft, num=True),
        _td(fmt_value(row.get("peak_rss_mb")), num=True),
        _td(fmt_memory(dict(row)), num=True),  # issue 9: predicted before the run vs measured peak
        _td(fmt_bandwidth(dict(row)), num=True),
        _td(f"{fmt_value(row.get('peak_shared_mb'))}/{fmt_value(row.get('peak_gpu_mem_mb'))}", num=True),
        _td(agree),
        _td(fmt_value(row.get("tg_ratio_vs_ref"), 2), num=True),
        _td(f"{fmt_value(row.get('start_temp_c'))}/{fmt_value(row.get('temp_max_c'))}", num=True),
        _td(fmt_value(watts / 1000.0 if watts is not None else None, 2), num=True),
        _td(fmt_value(row.get("decode_j_per_token_net_median"), 4), num=True),
        f"<td>{_badge(row.get('throttle_verdict'))}</td>",
        f"<td>{_badge(row.get('stability_verdict'))}</td>",
        f"<td>{_badge(row.get('interference_verdict'))}</td>",
    ]


def _verdict_section(session: Session, runs: Sequence[Run]) -> str:
    found = verdicts_by_run(session, [r.id for r in runs])
    if not found:
        return (
            '<p class="muted">No verdicts stored for this sweep (run analysis with '
            "<code>edgeprof.verdicts.judge.analyse_sweep</code>).</p>"
        )
    parts = []
    for run in runs:
        mine = found.get(run.id)
        if not mine:
            continue
        parts.append(
            f"<h3>#{run.seq} {_e(run.model_label)} ctx={run.n_ctx} ngl={run.n_gpu_layers} "
            f"t={run.n_threads} wl={_e(run.workload_name)} <span class='muted'>(run {run.id})</span></h3>"
        )
        for kind in ("throttle", "stability", "interference"):
            v = mine.get(kind)
            if v is None:
                continue
            try:
                evidence = json.loads(v.evidence_json)
            except ValueError:
                evidence = {"raw": v.evidence_json}
            reasons = evidence.get("reasons", []) if isinstance(evidence, dict) else []
            notes = evidence.get("notes", []) if isinstance(evidence, dict) else []
            items = "".join(f"<li>{_e(r)}</li>" for r in reasons)
            items += "".join(f"<li class='muted'>note: {_e(n)}</li>" for n in notes)
            parts.append(
                f"<p><b>{_e(kind)}</b> {_badge(v.value)}</p>"
                + (f"<ul>{items}</ul>" if items else "")
                + f"<details><summary>evidence ({_e(kind)})</summary>"
                + f"<pre>{_e(json.dumps(evidence, indent=2, sort_keys=True))}</pre></details>"
            )
    return "".join(parts)


def _failures_section(runs: Sequence[Run], latest_ids: set[int]) -> str:
    failed = [r for r in runs if r.status != "ok"]
    if not failed:
        return '<p class="muted">No failed runs.</p>'
    body, classes = [], []
    for r in failed:
        body.append(
            [
                _td(r.seq, num=True),
                _td(r.model_label),
                _td(f"ctx={r.n_ctx} ngl={r.n_gpu_layers} t={r.n_threads} wl={r.workload_name}"),
                _td(r.status),
                _td(r.reason or "(no reason recorded)"),
                _td(fmt_value(r.exit_code)),
                _td(fmt_value(r.signal_name)),
                _td("latest attempt" if r.id in latest_ids else "superseded by a later attempt"),
            ]
        )
        classes.append("failed")
    out = _table(("#", "model", "params", "status", "reason", "exit", "signal", "attempt"), body, classes)
    for r in failed:
        if r.log_tail:
            out += (
                f"<details><summary>log tail of #{r.seq} {_e(r.model_label)} ({_e(r.status)})</summary>"
                f"<pre>{_e(r.log_tail)}</pre></details>"
            )
    return out


def _device_section(session: Session, sweep: Sweep, runs: Sequence[Run]) -> str:
    dev = sweep.device
    out = "<h3>Device</h3>" + _kv_table(
        [
            ("hostname", dev.hostname),
            ("board", dev.board_model or "—"),
            ("L4T", dev.l4t_release or "—"),
            ("arch", dev.arch),
            ("CPU", dev.cpu_model or "—"),
            ("CPUs", dev.cpu_count),
            ("RAM MB", dev.ram_total_mb),
            ("GPU", dev.gpu or "—"),
            ("kernel", dev.kernel or "—"),
            ("OS", dev.os_release or "—"),
            ("fingerprint", dev.fingerprint),
        ]
    )
    out += "<details><summary>all device facts</summary>" + _json_block(dev.facts_json) + "</details>"
    out += "<h3>Power mode and clocks at sweep start</h3>" + _json_block(sweep.device_state_json)
    changed = [r for r in runs if r.device_state_changed]
    if changed:
        out += (
            "<p><b>Device state changed before:</b> "
            + ", ".join(f"#{r.seq} {_e(r.model_label)}" for r in changed)
            + " — those rows are not comparable with earlier ones.</p>"
        )
    build_ids = sorted({r.build_id for r in runs if r.build_id is not None})
    builds = list(session.scalars(select(Build).where(Build.id.in_(build_ids)))) if build_ids else []
    out += "<h3>llama.cpp build</h3>"
    if not builds:
        out += '<p class="muted">no build recorded (no run got as far as loading llama.cpp)</p>'
    for b in builds:
        out += _kv_table(
            [
                ("llama-cpp-python", b.llama_cpp_python_version),
                ("backend", b.backend),
                ("GPU offload", str(b.gpu_offload)),
                ("build flags", b.build_flags or "—"),
                ("fingerprint", b.fingerprint),
            ]
        )
        out += f"<details><summary>system info</summary><pre>{_e(b.system_info)}</pre></details>"
    return out


def _collectors_section(session: Session, sweep: Sweep) -> str:
    rows = list(
        session.scalars(
            select(CollectorStatus).where(CollectorStatus.sweep_id == sweep.id).order_by(CollectorStatus.id)
        )
    )
    if not rows:
        return '<p class="muted">No telemetry collectors recorded (sweep run without telemetry).</p>'
    body = []
    for c in rows:
        try:
            n_metrics = len(json.loads(c.metrics_json))
        except ValueError:
            n_metrics = 0
        body.append(
            [
                _td(c.name),
                f"<td>{_badge('ok' if c.ok else 'unavailable', None if c.ok else 'inconclusive')}</td>",
                _td(c.reason),
                _td(n_metrics, num=True),
                _td(c.disabled_reason or c.last_error or ""),
            ]
        )
    out = _table(("collector", "ok", "reason", "metrics", "disabled / last error"), body)
    if sweep.sampler_json:
        out += (
            "<details><summary>sampler statistics</summary>" + _json_block(sweep.sampler_json) + "</details>"
        )
    return out


def _recommendation_section(rows: Sequence[Mapping[str, Any]]) -> str:
    """The report opens with the answer (agent/report/recommend.py), one paragraph per config group."""
    lines = recommendation_lines([dict(r) for r in rows])
    if not lines:
        return ""
    items = "".join(
        f'<li class="{"sub" if line.startswith("  ") else "rec"}">{_e(line.strip())}</li>' for line in lines
    )
    return f'<h2>Recommendation</h2><ul class="recommendation">{items}</ul>'


def _figure(title: str, path: Path | None, error: str | None) -> str:
    if path is None:
        return f'<h3>{_e(title)}</h3><p class="muted">figure not drawn: {_e(error)}</p>'
    return f'<h3>{_e(title)}</h3><img alt="{_e(title)}" src="{png_data_uri(path)}">'


def _serving_section(serving: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> str:
    """issue 14: the HTTP API levels and the in-process vs API table (agent/report/serving.py)."""
    if not serving:
        return ""
    from edgeprof.report.serving import SERVING_COLUMNS, SIDE_COLUMNS, _serving_cells, side_by_side

    body = [_serving_cells(dict(r)) for r in serving]
    html = "<h2>HTTP API (llama-server, streamed)</h2>" + _table(
        SERVING_COLUMNS, body, ["failed" if r["status"] != "ok" else "" for r in serving]
    )
    side = side_by_side([*(dict(r) for r in rows), *(dict(r) for r in serving)])
    if side:
        html += "<h3>In-process (CLI) vs HTTP API, same model/ctx/ngl/workload</h3>"
        html += _table(SIDE_COLUMNS, side)
    return html + (
        '<p class="muted">TTFT/ITL/E2EL: client-side over every measured request, nearest rank; TPOT = '
        "(E2EL − TTFT)/(n − 1); output tokens counted by the server.</p>"
    )


def render_html(
    session: Session,
    sweep_id: int,
    trip_points: Mapping[str, Sequence[tuple[str, float]]] | None = None,
) -> str:
    """The whole report as one HTML string (raises ``ReportError`` for an unknown sweep)."""
    rows = attach_verdicts(session, build_rows(session, sweep_id))
    # issue 14: the serving levels, a scenario of their own (never in the in-process config table)
    serving = [r for r in build_rows(session, sweep_id, include_serving=True) if r["runner"] != "llama-cpp"]
    sweep = session.get(Sweep, sweep_id)
    assert sweep is not None  # build_rows raised otherwise
    runs = list(session.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)))
    latest_ids = {int(r["run_id"]) for r in rows}

    figures: list[str] = []
    budget = budget_from_plan_text(sweep.plan_text)
    with tempfile.TemporaryDirectory(prefix="edgeprof-html-") as tmp:
        for title, draw in (
            (
                "Timeline: temperature, clocks, power, tokens/s",
                lambda p: timeline_png(session, sweep_id, p, trip_points),
            ),
            ("Configs compared", lambda p: comparison_png(rows, p)),
            *(
                [("tg t/s and TTFT against depth", lambda p: depth_png(rows, p))]
                if depth_curves(rows)  # issue 10: only for sweeps with a depth axis
                else []
            ),
            *(
                [("Speed against KLD per ctx (Pareto front)", lambda p: speed_vs_kld_png(rows, p, budget))]
                if has_speed_vs_kld(rows)  # issue 9: only with a quality workload
                else []
            ),
            *(
                [("HTTP API: latency and throughput against concurrency", lambda p: serving_png(serving, p))]
                if has_serving_curves(serving)  # issue 14: only with the llama-server runner
                else []
            ),
        ):
            target = Path(tmp) / f"{len(figures)}.png"
            try:
                figures.append(_figure(title, draw(target), None))
            except Exception as exc:  # noqa: BLE001 - a broken figure must not cost the user the report
                figures.append(_figure(title, None, f"{type(exc).__name__}: {exc}"))

    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    verdict_counts: dict[str, int] = {}
    for row in rows:
        key = row.get("throttle_verdict") or "not judged"
        verdict_counts[key] = verdict_counts.get(key, 0) + 1

    by_status = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    summary = _kv_table(
        [
            ("sweep", f"{sweep.id}: {sweep.name}"),
            ("status", sweep.status),
            ("started", str(sweep.started_at)),
            ("ended", str(sweep.ended_at) if sweep.ended_at else "—"),
            ("edgeprof", sweep.edgeprof_version),
            ("plan", sweep.plan_path or "—"),
            ("configs", f"{len(rows)} of {sweep.n_specs} ({by_status})"),
            ("throttle verdicts", ", ".join(f"{n} {v}" for v, n in sorted(verdict_counts.items())) or "—"),
        ]
    )
    config_table = _table(
        CONFIG_HEADERS,
        [_config_cells(i + 1, r) for i, r in enumerate(rows)],
        ["failed" if r["status"] != "ok" else "" for r in rows],
    )
    notes = (
        '<p class="muted">pp/tg: steady reps only (llama.cpp counters); load: first start of a fresh '
        "process; throttle/stability: see Verdicts below.</p>"
    )
    body = (
        f"<h1>edgeprof report — sweep {sweep.id}: {_e(sweep.name)}</h1>"
        f"{_recommendation_section(rows)}"
        f"<h2>Summary</h2>{summary}"
        f"<h2>Configs</h2>{config_table}{notes}"
        f"{_serving_section(serving, rows)}"
        f"<h2>Figures</h2>{''.join(figures)}"
        f"<h2>Verdicts</h2>{_verdict_section(session, runs)}"
        f"<h2>Failed runs</h2>{_failures_section(runs, latest_ids)}"
        f"<h2>Device, build and power mode</h2>{_device_section(session, sweep, runs)}"
        f"<h2>Telemetry collectors</h2>{_collectors_section(session, sweep)}"
        f"<h2>Plan</h2><details><summary>plan text</summary><pre>{_e(sweep.plan_text)}</pre></details>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="generator" content="edgeprof">'
        f"<title>edgeprof sweep {sweep.id}: {_e(sweep.name)}</title>"
        f"<style>{CSS}</style></head><body>{body}</body></html>\n"
    )


def write_html(
    session: Session, sweep_id: int, out: Path, protect: tuple[Path, ...] = (), **kwargs: Any
) -> Path:
    """``render_html`` written to ``out`` (UTF-8); returns ``out``.

    Replaces only an earlier edgeprof report, never ``protect`` (the database) or any other file, and never
    writes through a symlink (temp file + rename in the same folder): see agent/safefs.py.
    """
    from edgeprof.safefs import replace_report

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    replace_report(out, render_html(session, sweep_id, **kwargs).encode("utf-8"), protect)
    return out
