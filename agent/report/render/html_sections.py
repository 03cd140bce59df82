"""The sections of the HTML report after the configs: the serving levels, the verdicts with their evidence,
failed runs with reasons and log tails, device / build / power mode, the telemetry collectors."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.report.cells import RUNNING, fmt_value
from edgeprof.report.fit import recommendation_lines
from edgeprof.report.render.html_parts import (
    FIT_CHARS,
    SCREEN_PX,
    badge,
    json_block,
    kv_table,
    registry_table,
    table,
    table_columns,
    td,
)
from edgeprof.report.serving import serving_title, token_count_note, versus_rows
from edgeprof.safetext import esc
from edgeprof.storage.models import Build, CollectorStatus, Run, Sweep
from edgeprof.verdicts import verdicts_by_run


def recommendation_section(rows: Sequence[Mapping[str, Any]]) -> str:
    """The report opens with the answer (agent/report/recommend.py), one paragraph per config group."""
    lines = recommendation_lines([dict(r) for r in rows])
    if not lines:
        return ""
    items = "".join(
        f'<li class="{"sub" if line.startswith("  ") else "rec"}">{esc(line.strip())}</li>' for line in lines
    )
    return f'<h2>Recommendation</h2><ul class="recommendation">{items}</ul>'


def serving_section(
    serving: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], wide: bool = False
) -> str:
    """The HTTP API levels and the in-process vs API table, from the same columns as the terminal's;
    ``wide``: every column with data, however wide."""
    if not serving:
        return ""
    # columns without data (no request rate, nothing deferred) left out, as in the configs table, and the
    # least telling ones until it fits a laptop screen
    fit = None if wide else FIT_CHARS
    columns, left_out = table_columns("serving", serving, drop_empty=True, fit_chars=fit)
    out = f"<h2>{esc(serving_title(serving))}</h2>" + registry_table("serving", serving, columns=columns)
    if left_out:
        out += (
            f'<p class="muted">Left out to fit a {SCREEN_PX}-px window: {esc(", ".join(left_out))} '
            "(<code>edgeprof report</code> in a wide terminal, or <code>--format json</code>, has them).</p>"
        )
    versus = versus_rows([*rows, *serving])
    if versus:
        out += "<h3>In-process (CLI) vs HTTP API, same model/ctx/ngl/workload</h3>"
        out += registry_table("versus", versus)
    return out + (
        '<p class="muted">TTFT/ITL/E2EL: client-side over every measured request, nearest rank; TPOT = '
        f"(E2EL − TTFT)/(n − 1); {esc(token_count_note(serving))}.</p>"
    )


def _evidence_html(kind: str, value: str, evidence_json: str) -> str:
    try:
        evidence = json.loads(evidence_json)
    except ValueError:
        evidence = {"raw": evidence_json}
    reasons = evidence.get("reasons", []) if isinstance(evidence, dict) else []
    notes = evidence.get("notes", []) if isinstance(evidence, dict) else []
    items = "".join(f"<li>{esc(r)}</li>" for r in reasons)
    items += "".join(f"<li class='muted'>note: {esc(n)}</li>" for n in notes)
    return (
        f"<p><b>{esc(kind)}</b> {badge(value)}</p>"
        + (f"<ul>{items}</ul>" if items else "")
        + f"<details><summary>evidence ({esc(kind)})</summary>"
        + f"<pre>{esc(json.dumps(evidence, indent=2, sort_keys=True))}</pre></details>"
    )


def verdict_section(session: Session, runs: Sequence[Run]) -> str:
    found = verdicts_by_run(session, [r.id for r in runs])
    if not found:
        return (
            '<p class="muted">No verdicts stored for this sweep (run analysis with '
            "<code>edgeprof.verdicts.analyse_sweep</code>).</p>"
        )
    parts = []
    for run in runs:
        mine = found.get(run.id)
        if not mine:
            continue
        parts.append(
            f"<h3>#{run.seq} {esc(run.model_label)} ctx={run.n_ctx} ngl={run.n_gpu_layers} "
            f"t={run.n_threads} wl={esc(run.workload_name)} <span class='muted'>(run {run.id})</span></h3>"
        )
        # a soak's own verdict judges throttling window by window; its five-rep throttle check has no reps
        kinds = (
            ("soak", "stability", "interference")
            if "soak" in mine
            else ("throttle", "stability", "interference")
        )
        for kind in kinds:
            v = mine.get(kind)
            if v is not None:
                parts.append(_evidence_html(kind, v.value, v.evidence_json))
    return "".join(parts)


def failures_section(runs: Sequence[Run], latest_ids: set[int]) -> str:
    failed = [r for r in runs if r.status not in ("ok", RUNNING)]  # one still running has not failed
    if not failed:
        return '<p class="muted">No failed runs.</p>'
    body = [
        [
            td(r.seq, num=True),
            td(r.model_label),
            td(f"ctx={r.n_ctx} ngl={r.n_gpu_layers} t={r.n_threads} wl={r.workload_name}"),
            td(r.status),
            td(r.reason or "(no reason recorded)"),
            td(fmt_value(r.exit_code)),
            td(fmt_value(r.signal_name)),
            td("latest attempt" if r.id in latest_ids else "superseded by a later attempt"),
        ]
        for r in failed
    ]
    headers = ("#", "model", "params", "status", "reason", "exit", "signal", "attempt")
    out = table(headers, body, ["failed"] * len(failed))
    for r in failed:
        if r.log_tail:
            out += (
                f"<details><summary>log tail of #{r.seq} {esc(r.model_label)} ({esc(r.status)})</summary>"
                f"<pre>{esc(r.log_tail)}</pre></details>"
            )
    return out


def _builds_html(session: Session, runs: Sequence[Run]) -> str:
    build_ids = sorted({r.build_id for r in runs if r.build_id is not None})
    builds = list(session.scalars(select(Build).where(Build.id.in_(build_ids)))) if build_ids else []
    out = "<h3>llama.cpp build</h3>"
    if not builds:
        out += '<p class="muted">no build recorded (no run got as far as loading llama.cpp)</p>'
    for b in builds:
        out += kv_table(
            [
                ("llama-cpp-python", b.llama_cpp_python_version),
                ("backend", b.backend),
                ("GPU offload", str(b.gpu_offload)),
                ("build flags", b.build_flags or "—"),
                ("fingerprint", b.fingerprint),
            ]
        )
        out += f"<details><summary>system info</summary><pre>{esc(b.system_info)}</pre></details>"
    return out


def device_section(session: Session, sweep: Sweep, runs: Sequence[Run]) -> str:
    dev = sweep.device
    out = "<h3>Device</h3>" + kv_table(
        [
            ("hostname", dev.hostname),
            ("board", dev.board_model or "—"),
            ("L4T", dev.l4t_release or "—"),
            ("arch", dev.arch),
            ("CPU", dev.cpu_model or "—"),
            ("CPUs", dev.cpu_count),
            ("RAM MiB", dev.ram_total_mb),
            ("GPU", dev.gpu or "—"),
            ("kernel", dev.kernel or "—"),
            ("OS", dev.os_release or "—"),
            ("fingerprint", dev.fingerprint),
        ]
    )
    out += "<details><summary>all device facts</summary>" + json_block(dev.facts_json) + "</details>"
    out += "<h3>Power mode and clocks at sweep start</h3>" + json_block(sweep.device_state_json)
    changed = [r for r in runs if r.device_state_changed]
    if changed:
        out += (
            "<p><b>Device state changed before:</b> "
            + ", ".join(f"#{r.seq} {esc(r.model_label)}" for r in changed)
            + " — those rows are not comparable with earlier ones.</p>"
        )
    return out + _builds_html(session, runs)


def collectors_section(session: Session, sweep: Sweep) -> str:
    query = select(CollectorStatus).where(CollectorStatus.sweep_id == sweep.id).order_by(CollectorStatus.id)
    rows = list(session.scalars(query))
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
                td(c.name),
                f"<td>{badge('ok' if c.ok else 'unavailable', None if c.ok else 'inconclusive')}</td>",
                td(c.reason),
                td(n_metrics, num=True),
                td(c.disabled_reason or c.last_error or ""),
            ]
        )
    out = table(("collector", "ok", "reason", "metrics", "disabled / last error"), body)
    if sweep.sampler_json:
        out += (
            "<details><summary>sampler statistics</summary>" + json_block(sweep.sampler_json) + "</details>"
        )
    return out
