"""The verdict on an imported log (``edgeprof.verdicts.log_verdict``) as text, Markdown, JSON and an HTML
section: per session its span, the verdict with its reason, the hottest thermometer, the zones left out and
why, each clock domain, heating and steady state, power."""

from __future__ import annotations

import json
from typing import Any

from edgeprof.safetext import esc as escape_html


def _short(metric: str) -> str:
    for prefix, suffix in (("temp.", "_c"), ("power.", "_mw")):
        if metric.startswith(prefix) and metric.endswith(suffix):
            return metric[len(prefix) : len(metric) - len(suffix)]
    return metric


def spacing_line(result: dict[str, Any]) -> str:
    spacing = f"{result['spacing_s']:g} s"
    if result["spacing_assumed"]:
        return f"spacing assumed {spacing} (the log has no timestamps; --interval-ms states it)"
    return f"spacing {spacing}"


def _clock_text(name: str, d: dict[str, Any]) -> str:
    status = d["status"]
    if status == "held_light_load":
        return f"{name} max {d['max_mhz']:g} MHz, held within 15 % of it (never at 90 %+ load)"
    if status == "not_loaded":
        return f"{name} max {d['max_mhz']:g} MHz (never at {90:g} %+ load: not judged)"
    held = f"held {d['held_mhz']:g} MHz under load" if d.get("held_mhz") is not None else ""
    text = f"{name} max {d['max_mhz']:g} MHz, {held}"
    if d.get("while_hot_mhz") is not None:
        text += f", {d['while_hot_mhz']:g} MHz while hottest"
    if status == "dropped":
        drop = d["drop"]
        if drop["to_mhz"] < drop["from_mhz"]:
            text += f", dropped {drop['from_mhz']:g} -> {drop['to_mhz']:g} MHz (-{drop['depth_pct']:g} %)"
        else:
            # a clock that dips and recovers keeps its median: "2000 -> 2000 MHz" would read as no drop
            text += f", dropped below {drop['from_mhz']:g} MHz at times (-{drop['depth_pct']:g} % on average)"
        if drop.get("lowest_mhz") is not None and drop["lowest_mhz"] < drop["to_mhz"]:
            text += f", lowest {drop['lowest_mhz']:g} MHz"
    if d.get("requested"):
        asked = d["requested"]
        text += f"; {', '.join(asked['metrics'])} (requested, not what ran) {asked['max_mhz']:g} MHz max"
    elif status == "capped":
        text += ", capped (flat)"
    return text


def session_lines(s: dict[str, Any]) -> list[str]:
    """One session in plain lines (the first one carries the verdict)."""
    hottest = (
        f"{_short(s['hottest_zone'])} {s['hottest_max_c']:g} °C" if s["hottest_zone"] else "no thermometer"
    )
    out = [
        f"session {s['session']}: {s['start']} .. {s['end']}, {s['lines']} lines — "
        f"{s['verdict']}: {s['reason']}",
        f"  hottest: {hottest}" + (f"; throttle trips on {s['trip_zone']}" if s.get("trip_zone") else ""),
    ]
    for metric, reason in s["excluded_zones"].items():
        out.append(f"  excluded: {_short(metric)} ({reason})")
    zones = [
        f"{_short(m)} {z['start_c']:g}/{z['max_c']:g}/{z['end_c']:g}" for m, z in s["thermometers"].items()
    ]
    if zones:
        out.append("  °C start/max/end: " + ", ".join(zones))
    steady = (
        f"steady at {s['steady_temp_c']:g} °C after {s['steady_state_s']:g} s"
        if s["steady_state_s"] is not None
        else "no thermal steady state"
        + (
            f" ({s['end_slope_c_per_min']:+g} °C/min at the end)"
            if s["end_slope_c_per_min"] is not None
            else ""
        )
    )
    if s["heating_c_per_min"] is not None:
        out.append(f"  heating {s['heating_c_per_min']:+g} °C/min over the session; {steady}")
    for name, d in s["clocks"].items():
        out.append("  clock: " + _clock_text(name, d))
    for reason in s["clocks_not_observable"].values():
        out.append(f"  clock not observable: {reason}")
    power = s.get("power")
    if power:
        budget = f" of a {power['budget_mw']:g} mW budget" if power.get("budget_mw") else ""
        out.append(
            f"  power {_short(power['metric'])}: mean {power['mean_mw']:g} / max {power['max_mw']:g} mW"
            + budget
        )
    out.extend(f"  note: {n}" for n in s["notes"])
    return out


def render_log_text(result: dict[str, Any]) -> str:
    head = f"log {result.get('file') or ''} (sweep {result.get('sweep_id')}, {result.get('format')}): "
    head += f"{result['lines']} lines, {len(result['sessions'])} session(s), {spacing_line(result)}"
    lines = [head]
    for s in result["sessions"]:
        lines.extend(session_lines(s))
    return "\n".join(lines)


def render_log_markdown(result: dict[str, Any]) -> str:
    out = [
        f"## Log {result.get('file') or ''} (sweep {result.get('sweep_id')})",
        "",
        spacing_line(result),
        "",
    ]
    out.append("| session | start | end | lines | verdict | reason | hottest | excluded zones |")
    out.append("|---|---|---|---|---|---|---|---|")
    for s in result["sessions"]:
        hottest = f"{_short(s['hottest_zone'])} {s['hottest_max_c']:g} °C" if s["hottest_zone"] else "–"
        excluded = ", ".join(f"{_short(m)}: {r}" for m, r in s["excluded_zones"].items()) or "–"
        cells = [str(s["session"]), s["start"], s["end"], str(s["lines"]), s["verdict"], s["reason"], hottest]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in [*cells, excluded]) + " |")
    return "\n".join(out)


def render_log_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, allow_nan=False, default=str)


def render_log_html(result: dict[str, Any]) -> str:
    """The log section of the HTML report: the verdict per session, its evidence and the zones left out."""
    parts = [f"<section id='log'><h2>Log verdict</h2><p>{escape_html(spacing_line(result))}</p>"]
    for s in result["sessions"]:
        lines = session_lines(s)
        parts.append(f"<h3 class='verdict-{escape_html(s['verdict'])}'>{escape_html(lines[0])}</h3><ul>")
        parts.extend(f"<li>{escape_html(line.strip())}</li>" for line in lines[1:])
        parts.append("</ul>")
    parts.append("</section>")
    return "".join(parts)
