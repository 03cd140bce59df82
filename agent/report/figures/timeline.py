"""The timeline figure of a sweep: temperatures, clocks, power and per-rep decode tokens/s against time,
phases shaded, throttled spans marked.

Missing data never breaks it: only the panels with data are drawn, the others are named in one line under
the title ("not measured: power"), so a sweep without telemetry gets its tokens/s panel alone. Which metric
goes into which panel is the role its collector declared, as stored with the sweep (never guessed from the
metric's name, and never asked of collector drivers this installation may lack).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.collectors.evidence import judge_evidence
from edgeprof.collectors.roles import MetricRole
from edgeprof.report.figures.canvas import (
    COLORS,
    SLOWDOWN_COLOR,
    THROTTLED_COLOR,
    finite,
    message_png,
    new_figure,
    save,
    stacked_panels,
)
from edgeprof.storage.models import Measurement, Phase, Run, Sweep, Verdict
from edgeprof.storage.samples import envelope, read_series
from edgeprof.verdicts import stored_roles

PHASE_COLORS: dict[str, str] = {
    "load": "#9e9e9e",
    "prefill": "#ffb74d",
    "decode": "#81c784",
    "idle": "#90caf9",
    "cooldown": "#b3e5fc",
}
# More lines than this in one panel are unreadable: beyond it the panel shows the pointwise max and min.
MAX_LINES = 8

Points = list[tuple[float, float]]
TripPoints = Mapping[str, Sequence[tuple[str, float]]]
# Per plotted series; more than the figure's pixel width, so nothing visible is lost when a night's
# readings are reduced to each bucket's minimum and maximum.
MAX_PLOT_POINTS = 4000
PANEL_ROLES = frozenset({"temperature", "clock", "clock_cap", "power"})


def timeline_panels(
    samples: Mapping[str, Points], roles: Mapping[str, MetricRole]
) -> dict[str, dict[str, Points]]:
    """The timeline's series per panel (``temp``, ``cpu``, ``cap``, ``gpu``, ``power``), chosen by each
    metric's role as its collector declared it (``roles``: as stored with the sweep)."""
    kinds = ("temp", "cpu", "cpu_core", "cap", "gpu", "gpu_load", "power")
    panels: dict[str, dict[str, Points]] = {k: {} for k in kinds}
    roles = judge_evidence(samples, roles).apply(roles)  # fixed zones drawn as no thermometer
    for metric, points in samples.items():
        role = roles.get(metric)
        if role is None:
            continue
        if role.role == "temperature" and role.thermometer:  # no fixed PMIC 100 °C
            panels["temp"][metric] = points
        elif role.role == "clock" and role.domain == "cpu":
            panels["cpu_core" if role.per_core else "cpu"][metric] = points
        elif role.role == "clock" and role.domain == "gpu":
            panels["gpu"][metric] = points
        elif role.role == "clock_cap" and len({v for _, v in points}) > 1:  # a cap that never moved: clutter
            panels["cap"][metric] = points
        elif role.role == "power":
            panels["power"][metric] = points
        elif _is_gpu_load(role):
            panels["gpu_load"][metric] = points
    # Per-cluster clocks where sysfs has them; single cores' clocks otherwise.
    panels["cpu"] = panels["cpu"] or panels.pop("cpu_core")
    panels.pop("cpu_core", None)
    return panels


def _is_gpu_load(role: MetricRole) -> bool:
    return role.role == "utilization" and role.component == "gpu"


def _on_a_panel(role: MetricRole | None) -> bool:
    return role is not None and (role.role in PANEL_ROLES or _is_gpu_load(role))


# A panel's value axis spans at least 10 % of its values: a clock flat at 1189-1190 MHz (0.08 % jitter)
# drawn on a 1188-1190 axis looks like deep throttling dips. With this floor a change under 2 % of the
# value fills at most a fifth of the panel, and a real throttle step (15 % and more) still fills it.
MIN_AXIS_SPAN_FRACTION = 0.10


def keep_in_proportion(ax: Axes) -> None:
    """Widen ``ax``'s value axis around its data to ``MIN_AXIS_SPAN_FRACTION`` of the values' size."""
    lo, hi = ax.get_ylim()
    size = max(abs(lo), abs(hi))
    floor = MIN_AXIS_SPAN_FRACTION * size
    if size > 0 and hi - lo < floor:
        mid = (lo + hi) / 2.0
        ax.set_ylim(mid - floor / 2.0, mid + floor / 2.0)


def load_samples(
    session: Session, sweep_id: int, roles: Mapping[str, MetricRole] | None = None
) -> dict[str, Points]:
    """Each metric's readings as drawn: one source per metric, reduced to at most ~``MAX_PLOT_POINTS``
    points that keep every bucket's minimum and maximum. With ``roles``, only the metrics a panel shows."""

    def plotted(metric: str) -> bool:
        return roles is None or _on_a_panel(roles.get(metric))

    out: dict[str, Points] = {}
    first_t: dict[str, float] = {}
    # Columnar (storage.samples.read_series): a night is ~10 M readings; rows of them would take minutes.
    for (_source, metric), (t, v) in sorted(read_series(session, sweep_id, plotted).items()):
        # one source per metric (tegrastats and jtop both report temp.* on a Jetson), as Telemetry does:
        # the one whose readings start first
        if not len(t) or (metric in first_t and first_t[metric] <= float(t[0])):
            continue
        first_t[metric] = float(t[0])
        # a 13-inch figure shows a few thousand points per line: keep each bucket's min and max, so a
        # throttling dip or a temperature peak stays visible
        tt, vv = envelope(t, v, MAX_PLOT_POINTS)
        out[metric] = list(zip(tt.tolist(), vv.tolist(), strict=True))
    return out


def pointwise_extremes(series: Iterable[Points]) -> tuple[Points, Points]:
    """The pointwise max and min over many series (a panel with more lines than it can show)."""
    hi: dict[float, float] = {}
    lo: dict[float, float] = {}
    for points in series:
        for t, v in points:
            hi[t] = max(hi.get(t, v), v)
            lo[t] = min(lo.get(t, v), v)
    return sorted(hi.items()), sorted(lo.items())


def _with_breaks(points: Points, min_gap_s: float = 5.0) -> Points:
    """``points`` with a NaN inserted in every gap much longer than the sampling interval (a sweep resumed
    the next day, a sampler that stalled), so a line is broken there instead of bridging it."""
    if len(points) < 3:
        return points
    steps = sorted(b[0] - a[0] for a, b in pairwise(points) if b[0] > a[0])
    typical = steps[len(steps) // 2] if steps else 0.0
    limit = max(min_gap_s, 10.0 * typical)
    out: Points = [points[0]]
    for a, b in pairwise(points):
        if b[0] - a[0] > limit:
            out.append(((a[0] + b[0]) / 2.0, math.nan))
        out.append(b)
    return out


# A pause of more than 5 minutes and 20 sampling intervals (a log with two sessions 20 h apart, a sweep
# resumed the next day) is cut out of the time axis and marked, so the sessions are drawn side by side
# instead of as two slivers at the ends of a day.
AXIS_GAP_MIN_S = 300.0
AXIS_GAP_STEPS = 20.0


def _cut_gaps(times: Sequence[float]) -> tuple[tuple[float, float], ...]:
    """(where, seconds removed) of each gap cut out of the axis; each keeps 2 % of the remaining span."""
    ts = sorted(set(times))
    steps = sorted(b - a for a, b in pairwise(ts))
    if not steps:
        return ()
    limit = max(AXIS_GAP_MIN_S, AXIS_GAP_STEPS * steps[len(steps) // 2])
    gaps = [(a, b - a) for a, b in pairwise(ts) if b - a > limit]
    kept = (ts[-1] - ts[0]) - sum(g for _, g in gaps)
    shown = max(0.02 * kept, 1e-6)
    return tuple((a, g - shown) for a, g in gaps)


@dataclass(frozen=True)
class TimeAxis:
    """Seconds since the sweep's first event, in minutes past a quarter of an hour, with long pauses cut
    out (``cuts``: where, and how many seconds removed)."""

    t0: float
    scale: float
    unit: str
    cuts: tuple[tuple[float, float], ...] = ()

    @classmethod
    def over(cls, times: Sequence[float]) -> TimeAxis:
        t0, t1 = min(times), max(times)
        cuts = _cut_gaps(times)
        span = max(t1 - t0 - sum(removed for _, removed in cuts), 1e-6)
        scale, unit = (60.0, "min") if span > 900 else (1.0, "s")
        return cls(t0, scale, unit, cuts)

    def x(self, t: float) -> float:
        removed = sum(r for at, r in self.cuts if t > at)
        return (t - self.t0 - removed) / self.scale

    def mark_cuts(self, ax: Axes) -> None:
        """A dashed line and the length of the pause where the axis was cut."""
        for at, removed in self.cuts:
            x = self.x(at) + 0.5 * (self.x(at + removed + 1e-9) - self.x(at))
            ax.axvline(x, color="#9e9e9e", lw=1.0, ls=(0, (4, 3)))
            hours = removed / 3600.0
            label = f"{hours:.1f} h gap" if hours >= 1 else f"{removed / 60.0:.0f} min gap"
            ax.text(x, 0.5, f" {label}", transform=ax.get_xaxis_transform(), fontsize=7, color="#616161")


def plot_lines(
    ax: Axes,
    lines: Mapping[str, Points],
    t0: float,
    scale_t: float,
    *,
    scale_v: float = 1.0,
    group_label: str = "",
    linestyle: str = "-",
    x: Callable[[float], float] | None = None,
) -> int:
    """Plot each series (or max/min envelopes when there are too many); returns how many were drawn.
    ``x``: time -> axis position (a ``TimeAxis`` with pauses cut out); default ``(t - t0) / scale_t``."""
    if not lines:
        return 0

    def xs(points: Points) -> list[float]:
        if x is not None:
            return [x(t) for t, _ in _with_breaks(points)]
        return [(t - t0) / scale_t for t, _ in _with_breaks(points)]

    def ys(points: Points) -> list[float]:
        return [v * scale_v for _, v in _with_breaks(points)]

    if len(lines) > MAX_LINES:
        hi, lo = pointwise_extremes(lines.values())
        ax.plot(xs(hi), ys(hi), linestyle, lw=1.0, label=f"{group_label} max of {len(lines)}")
        ax.plot(xs(lo), ys(lo), linestyle, lw=1.0, label=f"{group_label} min of {len(lines)}")
        return 2
    for name, points in sorted(lines.items()):
        ax.plot(xs(points), ys(points), linestyle, lw=1.0, label=name)
    return len(lines)


def _shade_phases(ax: Axes, phases: Sequence[Phase], axis: TimeAxis) -> None:
    by_name: dict[str, list[tuple[float, float]]] = {}
    for ph in phases:
        if ph.t_end_mono >= ph.t_start_mono:
            by_name.setdefault(ph.name, []).append(
                (axis.x(ph.t_start_mono), (ph.t_end_mono - ph.t_start_mono) / axis.scale)
            )
    for name, spans in by_name.items():
        color = PHASE_COLORS.get(name, "#e0e0e0")
        ax.broken_barh(
            spans, (0, 1), transform=ax.get_xaxis_transform(), facecolors=color, alpha=0.35, lw=0, zorder=0
        )


def _first_below(verdict: Verdict, start: float) -> float:
    """The marked span starts where a clock first fell below its cap, when the evidence says so."""
    try:
        evidence = json.loads(verdict.evidence_json)
        firsts = [
            float(d["first_below_t"])
            for d in evidence.get("clocks", {}).get("domains", {}).values()
            if isinstance(d, dict) and d.get("first_below_t") is not None
        ]
        if firsts:
            return max(start, min(firsts))
    except (ValueError, TypeError, AttributeError):
        pass
    return start


def _run_spans(
    runs: Sequence[Run], phases_by_run: Mapping[int, Sequence[Phase]], verdicts: Mapping[int, Verdict]
) -> list[tuple[Run, float, float, str]]:
    """(run, start, end, verdict value) of each throttled or non-thermal-slowdown run's marked span."""
    out = []
    for run in runs:
        verdict = verdicts.get(run.id)
        if verdict is None or verdict.value not in ("throttled", "slowdown_not_thermal"):
            continue
        working = [p for p in phases_by_run.get(run.id, ()) if p.name in ("load", "prefill", "decode")]
        if working:
            start, end = min(p.t_start_mono for p in working), max(p.t_end_mono for p in working)
        elif run.t_start_mono is not None and run.t_end_mono is not None:
            start, end = run.t_start_mono, run.t_end_mono
        else:
            continue
        out.append((run, _first_below(verdict, start), end, verdict.value))
    return out


@dataclass
class SweepTimeline:
    """What the timeline draws of one sweep, read once."""

    sweep: Sweep
    runs: list[Run]
    phases: list[Phase] = field(default_factory=list)
    steady: list[Measurement] = field(default_factory=list)
    verdicts: dict[int, Verdict] = field(default_factory=dict)
    samples: dict[str, Points] = field(default_factory=dict)
    roles: dict[str, MetricRole] = field(default_factory=dict)

    @property
    def phases_by_run(self) -> dict[int, list[Phase]]:
        out: dict[int, list[Phase]] = {}
        for ph in self.phases:
            out.setdefault(ph.run_id, []).append(ph)
        return out

    def times(self) -> list[float]:
        times = [t for pts in self.samples.values() for t, _ in pts]
        times += [p.t_start_mono for p in self.phases] + [p.t_end_mono for p in self.phases]
        return times + [m.t_start_mono for m in self.steady if m.t_start_mono is not None]


def read_timeline(session: Session, sweep: Sweep) -> SweepTimeline:
    runs = list(session.scalars(select(Run).where(Run.sweep_id == sweep.id).order_by(Run.id)))
    data = SweepTimeline(sweep, runs)
    run_ids = [r.id for r in runs]
    if run_ids:
        data.phases = list(session.scalars(select(Phase).where(Phase.run_id.in_(run_ids))))
        data.steady = list(
            session.scalars(
                select(Measurement).where(Measurement.run_id.in_(run_ids), Measurement.kind == "steady")
            )
        )
        query = select(Verdict).where(Verdict.run_id.in_(run_ids), Verdict.kind == "throttle")
        for v in session.scalars(query.order_by(Verdict.id)):
            data.verdicts[v.run_id] = v
    data.roles = stored_roles(session, sweep.id)
    if data.roles:
        data.samples = load_samples(session, sweep.id, data.roles)
    else:
        # A sweep recorded before the roles were stored with it: classify its metrics by name, as the
        # collector classes declare them (this loads the collector registry, for such sweeps only).
        from edgeprof.collectors import roles_for

        data.samples = load_samples(session, sweep.id)
        data.roles = roles_for(data.samples)
        data.samples = {m: pts for m, pts in data.samples.items() if _on_a_panel(data.roles.get(m))}
    return data


def _draw_temperatures(ax: Axes, temps: Mapping[str, Points], axis: TimeAxis, trips: TripPoints) -> None:
    """Each zone's temperature, and its passive/hot trip points (as ``ThermalZonesCollector.trip_points``)."""
    plot_lines(ax, temps, axis.t0, axis.scale, x=axis.x)
    for metric, zone_trips in trips.items():
        if metric not in temps:
            continue
        for kind, temp_c in zone_trips:
            if kind in ("passive", "hot"):
                ax.axhline(temp_c, color=THROTTLED_COLOR, ls="--", lw=0.8, alpha=0.7)
                ax.text(
                    0.995,
                    temp_c,
                    f"{metric} {kind} trip {temp_c:g} °C",
                    transform=ax.get_yaxis_transform(),
                    ha="right",
                    va="bottom",
                    fontsize=7,
                    color=THROTTLED_COLOR,
                )
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    ax.set_ylabel("temperature (°C)")


def _draw_clocks(ax: Axes, panels: Mapping[str, Mapping[str, Points]], axis: TimeAxis) -> None:
    plot_lines(ax, panels["cpu"], axis.t0, axis.scale, group_label="cpu", x=axis.x)
    plot_lines(ax, panels["cap"], axis.t0, axis.scale, group_label="cap", linestyle="--", x=axis.x)
    plot_lines(ax, panels["gpu"], axis.t0, axis.scale, group_label="gpu", x=axis.x)
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    ax.set_ylabel("clock (MHz)")


def _draw_gpu_load(ax: Axes, load: Mapping[str, Points], axis: TimeAxis) -> None:
    plot_lines(ax, load, axis.t0, axis.scale, group_label="gpu load", x=axis.x)
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    ax.set_ylim(0, 105)
    ax.set_ylabel("GPU load (%)")


def _draw_power(ax: Axes, power: Mapping[str, Points], axis: TimeAxis) -> None:
    plot_lines(ax, power, axis.t0, axis.scale, scale_v=1e-3, group_label="power", x=axis.x)
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    ax.set_ylabel("power (W)")


def _token_points(data: SweepTimeline, axis: TimeAxis) -> dict[int, Points]:
    """Each run's steady reps as (x, decode tokens/s) at the middle of the rep."""
    points_by_run: dict[int, Points] = {}
    for m in data.steady:
        tps = finite(m.tg_tps)
        if tps is None or m.t_start_mono is None:
            continue
        mid = m.t_start_mono if m.t_end_mono is None else (m.t_start_mono + m.t_end_mono) / 2.0
        points_by_run.setdefault(m.run_id, []).append((axis.x(mid), tps))
    return points_by_run


def _draw_tokens(ax: Axes, data: SweepTimeline, points_by_run: Mapping[int, Points]) -> None:
    """Each steady rep's decode tokens/s at its middle, one colour per model label."""
    label_of = {r.id: r.model_label for r in data.runs}
    seen_labels: set[str] = set()
    label_color: dict[str, str] = {}
    for run_id in sorted(points_by_run):
        label = label_of.get(run_id, str(run_id))
        color = label_color.setdefault(label, COLORS[len(label_color) % len(COLORS)])
        pts = sorted(points_by_run[run_id])
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            "o-",
            ms=3,
            lw=0.8,
            color=color,
            label=label if label not in seen_labels else None,
        )
        seen_labels.add(label)
    ax.legend(loc="upper left", fontsize=7, ncol=3)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("decode tokens/s\n(steady reps)")


def _mark_throttled(axes: Sequence[Axes], ax_temp: Axes, data: SweepTimeline, axis: TimeAxis) -> None:
    """Phases shaded on every panel; throttled spans red (a non-thermal slowdown orange), named on top."""
    marked = _run_spans(data.runs, data.phases_by_run, data.verdicts)
    for ax in axes:
        _shade_phases(ax, data.phases, axis)
        for _run, start, end, value in marked:
            color = THROTTLED_COLOR if value == "throttled" else SLOWDOWN_COLOR
            ax.axvspan(axis.x(start), axis.x(end), ymin=0.94, ymax=1.0, color=color, alpha=0.8, lw=0)
        ax.grid(True, alpha=0.3)
    for run, start, _end, value in marked:
        ax_temp.text(
            axis.x(start),
            1.0,
            f" {value} #{run.seq}",
            transform=ax_temp.get_xaxis_transform(),
            va="bottom",
            fontsize=7,
            color=THROTTLED_COLOR if value == "throttled" else SLOWDOWN_COLOR,
        )


def _mark_run_starts(axes: Sequence[Axes], ax_tps: Axes, data: SweepTimeline, axis: TimeAxis) -> None:
    """A dotted line where each run starts, named on the tokens/s panel (up to 40 runs stay readable)."""
    if len(data.runs) > 40:
        return
    phases_by_run = data.phases_by_run
    for run in data.runs:
        own = phases_by_run.get(run.id)
        run_start = min(p.t_start_mono for p in own) if own else run.t_start_mono
        if run_start is None:
            continue
        for ax in axes:
            ax.axvline(axis.x(run_start), color="#616161", lw=0.6, ls=":")
        ax_tps.text(
            axis.x(run_start),
            0.02,
            f" #{run.seq} {run.model_label} ctx={run.n_ctx} ngl={run.n_gpu_layers}"
            + ("" if run.status == "ok" else f" [{run.status}]"),
            transform=ax_tps.get_xaxis_transform(),
            rotation=90,
            va="bottom",
            fontsize=6,
            color="#424242",
        )


def _mark_log_throttles(session: Session, sweep: Sweep, axes: Sequence[Axes], axis: TimeAxis) -> None:
    """An imported log has no runs: its verdict's throttle points (when, which clock, how deep) are drawn."""
    from edgeprof.verdicts.log_store import is_imported, log_verdict_of

    if not is_imported(sweep):
        return
    for s in log_verdict_of(session, sweep.id, store=False)["sessions"]:
        for name, clock in s["clocks"].items():
            drop = clock.get("drop")
            if s["verdict"] != "throttled" or not drop:
                continue
            x = axis.x(drop["t_s"])
            for ax in axes:
                ax.axvline(x, color=THROTTLED_COLOR, lw=1.2)
            axes[0].text(
                x,
                1.0,
                f" throttled: {name} {drop['from_mhz']:g} -> {drop['to_mhz']:g} MHz at {drop['temp_c']:g} °C",
                transform=axes[0].get_xaxis_transform(),
                va="bottom",
                fontsize=7,
                color=THROTTLED_COLOR,
            )


def _legend(strip: Axes) -> None:
    handles = [Patch(facecolor=c, alpha=0.5, label=n) for n, c in PHASE_COLORS.items()]
    handles += [
        Patch(facecolor=THROTTLED_COLOR, label="throttled"),
        Patch(facecolor=SLOWDOWN_COLOR, label="slowdown, not thermal"),
    ]
    strip.legend(handles=handles, loc="center", ncol=len(handles), fontsize=8, frameon=False)


Draw = Callable[[Axes], None]


def measured_panels(
    data: SweepTimeline, axis: TimeAxis, trip_points: TripPoints
) -> tuple[list[tuple[str, Draw]], list[str]]:
    """(name, draw) of each panel with data, top to bottom, and the names of those without: a panel that
    would only say "not measured" costs the figure a quarter of its height, a list of names costs a line."""
    panels = timeline_panels(data.samples, data.roles)
    tokens = _token_points(data, axis)
    candidates: list[tuple[str, bool, Draw]] = [
        ("temperature", bool(panels["temp"]),
         lambda ax: _draw_temperatures(ax, panels["temp"], axis, trip_points)),
        ("CPU/GPU clocks", bool(panels["cpu"] or panels["cap"] or panels["gpu"]),
         lambda ax: _draw_clocks(ax, panels, axis)),
        ("GPU load", bool(panels["gpu_load"]), lambda ax: _draw_gpu_load(ax, panels["gpu_load"], axis)),
        ("power", bool(panels["power"]), lambda ax: _draw_power(ax, panels["power"], axis)),
        ("steady decode tokens/s", bool(tokens), lambda ax: _draw_tokens(ax, data, tokens)),
    ]  # fmt: skip
    drawn = [(name, draw) for name, measured, draw in candidates if measured]
    # GPU load is context where a source reports it (tegrastats, jtop), never missed where none does
    return drawn, [name for name, measured, _draw in candidates if not measured and name != "GPU load"]


def timeline_figure(session: Session, sweep_id: int, trip_points: TripPoints | None = None) -> Figure | str:
    """The timeline of a sweep, one panel per measured kind of metric (the others named in one line), or
    why there is none (an unknown sweep, nothing recorded)."""
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        return f"no sweep with id {sweep_id}"
    data = read_timeline(session, sweep)
    times = data.times()
    if not times:
        return f"sweep {sweep_id} ({sweep.name}): no telemetry, phases or measurements"
    axis = TimeAxis.over(times)
    drawn, missing = measured_panels(data, axis, trip_points or {})
    if not drawn:
        return f"sweep {sweep_id} ({sweep.name}): not measured: " + ", ".join(missing)
    fig = new_figure(13, 1.2 + 2.6 * len(drawn))
    axes, strip = stacked_panels(fig, len(drawn), legend_height=0.35)
    title = f"sweep {sweep_id}: {sweep.name} — {len(data.runs)} run(s), telemetry against time"
    fig.suptitle(title + (f"\nnot measured: {', '.join(missing)}" if missing else ""), fontsize=12)
    for ax, (_name, draw) in zip(axes, drawn, strict=True):
        draw(ax)
        keep_in_proportion(ax)
        axis.mark_cuts(ax)
    cut = ", long pauses cut out" if axis.cuts else ""
    axes[-1].set_xlabel(f"time since sweep start ({axis.unit}{cut})")
    _mark_throttled(axes, axes[0], data, axis)
    _mark_run_starts(axes, axes[-1], data, axis)
    _mark_log_throttles(session, sweep, axes, axis)
    _legend(strip)
    return fig


def timeline_png(session: Session, sweep_id: int, out: Path, trip_points: TripPoints | None = None) -> Path:
    """Temperatures, clocks, power and per-rep decode tokens/s of a sweep against time, phases shaded,
    throttled spans marked (red; a non-thermal slowdown in orange). ``trip_points`` (optional, as
    ``ThermalZonesCollector.trip_points``) draws each zone's passive/hot trips. Returns ``out``."""
    drawn = timeline_figure(session, sweep_id, trip_points)
    if isinstance(drawn, str):
        return message_png(Path(out), drawn)
    return save(drawn, Path(out))
