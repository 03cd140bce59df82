"""PNG figures of a sweep: a telemetry timeline and a per-config comparison.

Drawn with matplotlib's object API on an Agg canvas (no pyplot, no global backend switch, no display), so it
works headless, from threads, and inside a test run. Missing data never breaks a figure: a panel with nothing
to show says "not measured", and a sweep without telemetry still gets its tokens/s panel.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.collectors import MetricRole, role_of
from edgeprof.storage.models import Measurement, Phase, Run, Sweep, Verdict
from edgeprof.storage.samples import envelope, read_series

PHASE_COLORS: dict[str, str] = {
    "load": "#9e9e9e",
    "prefill": "#ffb74d",
    "decode": "#81c784",
    "idle": "#90caf9",
    "cooldown": "#b3e5fc",
}
THROTTLED_COLOR = "#d32f2f"
SLOWDOWN_COLOR = "#f57c00"
# More lines than this in one panel are unreadable: beyond it the panel shows the pointwise max and min.
MAX_LINES = 8
NOT_MEASURED = "not measured"

Points = list[tuple[float, float]]
# Per plotted series; more than the figure's pixel width, so nothing visible is lost (issue 12).
MAX_PLOT_POINTS = 4000
_PANEL_ROLES = frozenset({"temperature", "clock", "clock_cap", "power"})


def timeline_panels(
    samples: Mapping[str, Points], roles: Mapping[str, MetricRole] | None = None
) -> dict[str, dict[str, Points]]:
    """The timeline's series per panel (``temp``, ``cpu``, ``cap``, ``gpu``, ``power``), chosen by each
    metric's role as its collector declares it (``roles`` first, e.g. as stored with the sweep)."""
    panels: dict[str, dict[str, Points]] = {k: {} for k in ("temp", "cpu", "cpu_core", "cap", "gpu", "power")}
    for metric, points in samples.items():
        role = (roles or {}).get(metric) or role_of(metric)
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
    # Per-cluster clocks where sysfs has them; single cores' clocks otherwise.
    panels["cpu"] = panels["cpu"] or panels.pop("cpu_core")
    panels.pop("cpu_core", None)
    return panels


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, constrained_layout=True)
    FigureCanvasAgg(fig)
    return fig


def _panels(fig: Figure, n: int, legend_height: float, height: float = 3.0) -> tuple[list[Axes], Axes]:
    """``n`` stacked panels sharing x (tick labels on the bottom one only) and, below them, an empty strip
    for the figure's legend, so the legend never covers the x tick labels (works on matplotlib 3.5)."""
    grid = fig.add_gridspec(n + 1, 1, height_ratios=[height] * n + [legend_height])
    axes: list[Axes] = []
    for i in range(n):
        ax = fig.add_subplot(grid[i, 0], sharex=axes[0] if axes else None)
        if i < n - 1:
            ax.tick_params(labelbottom=False)
        axes.append(ax)
    strip = fig.add_subplot(grid[n, 0])
    strip.axis("off")
    return axes, strip


def _save(fig: Figure, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


def _not_measured(ax: Axes, text: str = NOT_MEASURED) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#757575", fontsize=11)
    ax.set_yticks([])


def _message_png(out: Path, text: str) -> Path:
    fig = _new_figure(8, 2)
    ax = fig.add_subplot(1, 1, 1)
    ax.axis("off")
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=12)
    return _save(fig, out)


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


# -- timeline --------------------------------------------------------------------------------------------
def _load_samples(session: Session, sweep_id: int) -> dict[str, Points]:
    seen: dict[str, bool] = {}

    def plotted(metric: str) -> bool:
        # Only what a panel shows, by the role its collector declares (not by the metric's name).
        if metric not in seen:
            role = role_of(metric)
            seen[metric] = role is not None and role.role in _PANEL_ROLES
        return seen[metric]

    out: dict[str, Points] = {}
    first_t: dict[str, float] = {}
    # Columnar (storage.samples.read_series): a night is ~10 M readings; rows of them would take minutes.
    for (_source, metric), (t, v) in sorted(read_series(session, sweep_id, plotted).items()):
        # one source per metric (tegrastats and jtop both report temp.* on a Jetson), as Telemetry does:
        # the one whose readings start first
        if not len(t) or (metric in first_t and first_t[metric] <= float(t[0])):
            continue
        first_t[metric] = float(t[0])
        # a 13-inch figure shows a few thousand points per line: keep each bucket's min and max
        tt, vv = envelope(t, v, MAX_PLOT_POINTS)
        out[metric] = list(zip(tt.tolist(), vv.tolist(), strict=True))
    return out


def _envelope(series: Iterable[Points]) -> tuple[Points, Points]:
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


def _plot_lines(
    ax: Axes,
    lines: Mapping[str, Points],
    t0: float,
    scale_t: float,
    *,
    scale_v: float = 1.0,
    group_label: str = "",
    linestyle: str = "-",
) -> int:
    """Plot each series (or max/min envelopes when there are too many); returns how many were drawn."""
    if not lines:
        return 0

    def xs(points: Points) -> list[float]:
        return [(t - t0) / scale_t for t, _ in _with_breaks(points)]

    def ys(points: Points) -> list[float]:
        return [v * scale_v for _, v in _with_breaks(points)]

    if len(lines) > MAX_LINES:
        hi, lo = _envelope(lines.values())
        ax.plot(xs(hi), ys(hi), linestyle, lw=1.0, label=f"{group_label} max of {len(lines)}")
        ax.plot(xs(lo), ys(lo), linestyle, lw=1.0, label=f"{group_label} min of {len(lines)}")
        return 2
    for name, points in sorted(lines.items()):
        ax.plot(xs(points), ys(points), linestyle, lw=1.0, label=name)
    return len(lines)


def _shade_phases(ax: Axes, phases: Sequence[Phase], t0: float, scale_t: float) -> None:
    by_name: dict[str, list[tuple[float, float]]] = {}
    for ph in phases:
        if ph.t_end_mono >= ph.t_start_mono:
            by_name.setdefault(ph.name, []).append(
                ((ph.t_start_mono - t0) / scale_t, (ph.t_end_mono - ph.t_start_mono) / scale_t)
            )
    for name, spans in by_name.items():
        color = PHASE_COLORS.get(name, "#e0e0e0")
        ax.broken_barh(
            spans, (0, 1), transform=ax.get_xaxis_transform(), facecolors=color, alpha=0.35, lw=0, zorder=0
        )


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
        try:
            evidence = json.loads(verdict.evidence_json)
            firsts = [
                float(d["first_below_t"])
                for d in evidence.get("clocks", {}).get("domains", {}).values()
                if isinstance(d, dict) and d.get("first_below_t") is not None
            ]
            if firsts:
                start = max(start, min(firsts))
        except (ValueError, TypeError, AttributeError):
            pass
        out.append((run, start, end, verdict.value))
    return out


def timeline_png(
    session: Session,
    sweep_id: int,
    out: Path,
    trip_points: Mapping[str, Sequence[tuple[str, float]]] | None = None,
) -> Path:
    """Temperatures, clocks, power and per-rep decode tokens/s of a sweep against time, phases shaded,
    throttled spans marked (red; a non-thermal slowdown in orange). ``trip_points`` (optional, as
    ``ThermalZonesCollector.trip_points``) draws each zone's passive/hot trips. Returns ``out``."""
    out = Path(out)
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        return _message_png(out, f"no sweep with id {sweep_id}")
    runs = list(session.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)))
    run_ids = [r.id for r in runs]
    phases = list(session.scalars(select(Phase).where(Phase.run_id.in_(run_ids)))) if run_ids else []
    phases_by_run: dict[int, list[Phase]] = {}
    for ph in phases:
        phases_by_run.setdefault(ph.run_id, []).append(ph)
    steady = (
        list(
            session.scalars(
                select(Measurement).where(Measurement.run_id.in_(run_ids), Measurement.kind == "steady")
            )
        )
        if run_ids
        else []
    )
    verdicts: dict[int, Verdict] = {}
    if run_ids:
        for v in session.scalars(
            select(Verdict)
            .where(Verdict.run_id.in_(run_ids), Verdict.kind == "throttle")
            .order_by(Verdict.id)
        ):
            verdicts[v.run_id] = v
    samples = _load_samples(session, sweep_id)

    times = [t for pts in samples.values() for t, _ in pts]
    times += [p.t_start_mono for p in phases] + [p.t_end_mono for p in phases]
    times += [m.t_start_mono for m in steady if m.t_start_mono is not None]
    if not times:
        return _message_png(out, f"sweep {sweep_id} ({sweep.name}): no telemetry, phases or measurements")
    t0, t1 = min(times), max(times)
    span = max(t1 - t0, 1e-6)
    scale_t, unit = (60.0, "min") if span > 900 else (1.0, "s")

    panels = timeline_panels(samples)
    temps, cpu, caps, gpu, power = (panels[k] for k in ("temp", "cpu", "cap", "gpu", "power"))

    fig = _new_figure(13, 11.5)
    axes, strip = _panels(fig, 4, legend_height=0.35)
    ax_temp, ax_clk, ax_pow, ax_tps = (axes[0], axes[1], axes[2], axes[3])
    fig.suptitle(f"sweep {sweep_id}: {sweep.name} — {len(runs)} run(s), telemetry against time", fontsize=13)

    if _plot_lines(ax_temp, temps, t0, scale_t):
        for metric, trips in (trip_points or {}).items():
            if metric not in temps:
                continue
            for kind, temp_c in trips:
                if kind in ("passive", "hot"):
                    ax_temp.axhline(temp_c, color=THROTTLED_COLOR, ls="--", lw=0.8, alpha=0.7)
                    ax_temp.text(
                        0.995,
                        temp_c,
                        f"{metric} {kind} trip {temp_c:g} °C",
                        transform=ax_temp.get_yaxis_transform(),
                        ha="right",
                        va="bottom",
                        fontsize=7,
                        color=THROTTLED_COLOR,
                    )
        ax_temp.legend(loc="upper left", fontsize=7, ncol=2)
    else:
        _not_measured(ax_temp, "temperature not measured")
    ax_temp.set_ylabel("temperature (°C)")

    n_clk = _plot_lines(ax_clk, cpu, t0, scale_t, group_label="cpu")
    n_clk += _plot_lines(ax_clk, caps, t0, scale_t, group_label="cap", linestyle="--")
    n_clk += _plot_lines(ax_clk, gpu, t0, scale_t, group_label="gpu")
    if n_clk:
        ax_clk.legend(loc="upper left", fontsize=7, ncol=2)
    else:
        _not_measured(ax_clk, "CPU/GPU clocks not measured")
    ax_clk.set_ylabel("clock (MHz)")

    if _plot_lines(ax_pow, power, t0, scale_t, scale_v=1e-3, group_label="power"):
        ax_pow.legend(loc="upper left", fontsize=7, ncol=2)
    else:
        _not_measured(ax_pow, "power not measured")
    ax_pow.set_ylabel("power (W)")

    label_of = {r.id: r.model_label for r in runs}
    points_by_run: dict[int, Points] = {}
    for m in steady:
        tps = _finite(m.tg_tps)
        if tps is None or m.t_start_mono is None:
            continue
        mid = m.t_start_mono if m.t_end_mono is None else (m.t_start_mono + m.t_end_mono) / 2.0
        points_by_run.setdefault(m.run_id, []).append(((mid - t0) / scale_t, tps))
    if points_by_run:
        seen_labels: set[str] = set()
        colors = [f"C{i}" for i in range(10)]
        label_color: dict[str, str] = {}
        for run_id in sorted(points_by_run):
            label = label_of.get(run_id, str(run_id))
            color = label_color.setdefault(label, colors[len(label_color) % len(colors)])
            pts = sorted(points_by_run[run_id])
            ax_tps.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                "o-",
                ms=3,
                lw=0.8,
                color=color,
                label=label if label not in seen_labels else None,
            )
            seen_labels.add(label)
        ax_tps.legend(loc="upper left", fontsize=7, ncol=3)
        ax_tps.set_ylim(bottom=0)
    else:
        _not_measured(ax_tps, "no steady tokens/s (failed or not run)")
    ax_tps.set_ylabel("decode tokens/s\n(steady reps)")
    ax_tps.set_xlabel(f"time since sweep start ({unit})")

    marked = _run_spans(runs, phases_by_run, verdicts)
    for ax in axes:
        _shade_phases(ax, phases, t0, scale_t)
        for _run, start, end, value in marked:
            color = THROTTLED_COLOR if value == "throttled" else SLOWDOWN_COLOR
            ax.axvspan(
                (start - t0) / scale_t,
                (end - t0) / scale_t,
                ymin=0.94,
                ymax=1.0,
                color=color,
                alpha=0.8,
                lw=0,
            )
        ax.grid(True, alpha=0.3)
    for run, start, _end, value in marked:
        ax_temp.text(
            (start - t0) / scale_t,
            1.0,
            f" {value} #{run.seq}",
            transform=ax_temp.get_xaxis_transform(),
            va="bottom",
            fontsize=7,
            color=THROTTLED_COLOR if value == "throttled" else SLOWDOWN_COLOR,
        )
    if len(runs) <= 40:
        for run in runs:
            own = phases_by_run.get(run.id)
            run_start = min(p.t_start_mono for p in own) if own else run.t_start_mono
            if run_start is None:
                continue
            for ax in axes:
                ax.axvline((run_start - t0) / scale_t, color="#616161", lw=0.6, ls=":")
            ax_tps.text(
                (run_start - t0) / scale_t,
                0.02,
                f" #{run.seq} {run.model_label} ctx={run.n_ctx} ngl={run.n_gpu_layers}"
                + ("" if run.status == "ok" else f" [{run.status}]"),
                transform=ax_tps.get_xaxis_transform(),
                rotation=90,
                va="bottom",
                fontsize=6,
                color="#424242",
            )
    handles = [Patch(facecolor=c, alpha=0.5, label=n) for n, c in PHASE_COLORS.items()]
    handles += [
        Patch(facecolor=THROTTLED_COLOR, label="throttled"),
        Patch(facecolor=SLOWDOWN_COLOR, label="slowdown, not thermal"),
    ]
    strip.legend(handles=handles, loc="center", ncol=len(handles), fontsize=8, frameon=False)
    return _save(fig, out)


# -- comparison ------------------------------------------------------------------------------------------
# (median field, min field, max field, title) of each comparison panel; None: no whisker for that metric.
COMPARISON_PANELS: tuple[tuple[str, str | None, str | None, str], ...] = (
    ("tg_tps_median", "tg_tps_min", "tg_tps_max", "decode tokens/s (median, min–max)"),
    ("pp_tps_median", "pp_tps_min", "pp_tps_max", "prefill tokens/s (median, min–max)"),
    ("ttft_ms_p50", None, None, "TTFT p50 (ms)"),
    ("peak_rss_mb", None, None, "peak RSS (MB)"),
    ("decode_j_per_token_median", None, None, "decode energy (J/token)"),
)
# Params besides ctx/ngl that go into a group's label when they vary across the rows.
_EXTRA_GROUP_KEYS = ("threads", "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v", "workload")


def _series_name(row: Mapping[str, Any]) -> str:
    label = str(row.get("model_label") or "?")
    quant = row.get("quant")
    return f"{label} ({quant})" if quant and str(quant).lower() not in label.lower() else label


def _group_key(row: Mapping[str, Any], extra: Sequence[str]) -> tuple[Any, ...]:
    return (row.get("ctx"), row.get("ngl"), *(row.get(k) for k in extra))


def _group_label(key: tuple[Any, ...], extra: Sequence[str]) -> str:
    parts = [f"ctx {key[0]}", f"ngl {key[1]}"]
    parts += [f"{name} {value}" for name, value in zip(extra, key[2:], strict=True)]
    return "\n".join(parts)


def comparison_png(rows: Sequence[Mapping[str, Any]], out: Path) -> Path:
    """Bars per model/quant, grouped by ctx and ngl (and any other param that varies), one panel per
    metric, min–max whiskers where the rows have them; failed configs are marked, absent metrics say so."""
    out = Path(out)
    if not rows:
        return _message_png(out, "no configs to compare")
    extra = [k for k in _EXTRA_GROUP_KEYS if len({repr(r.get(k)) for r in rows}) > 1]
    groups: list[tuple[Any, ...]] = []
    series: list[str] = []
    cell: dict[tuple[tuple[Any, ...], str], Mapping[str, Any]] = {}
    for row in rows:
        key, name = _group_key(row, extra), _series_name(row)
        if key not in groups:
            groups.append(key)
        if name not in series:
            series.append(name)
        cell[(key, name)] = row  # a config redone later in the list replaces the earlier one
    n_groups, n_series = len(groups), len(series)
    width = 0.8 / n_series
    fig_w = min(max(9.0, 1.0 + n_groups * (0.5 + 0.35 * n_series)), 40.0)
    legend_rows = math.ceil(n_series / 4)
    fig = _new_figure(fig_w, 3.0 * len(COMPARISON_PANELS) + 1.0 + 0.3 * legend_rows)
    axes, strip = _panels(fig, len(COMPARISON_PANELS), legend_height=0.3 * legend_rows + 0.2)
    fig.suptitle(f"{len(rows)} config(s): {n_series} model(s) × {n_groups} group(s)", fontsize=13)
    colors = [f"C{i}" for i in range(10)]
    for ax, (field, lo_field, hi_field, title) in zip(axes, COMPARISON_PANELS, strict=True):
        ax.set_title(title, fontsize=10, loc="left")
        drawn = 0
        top = 0.0
        failed_slots: list[float] = []
        for si, name in enumerate(series):
            xs: list[float] = []
            hs: list[float] = []
            err_lo: list[float] = []
            err_hi: list[float] = []
            for gi, key in enumerate(groups):
                found = cell.get((key, name))
                if found is None:
                    continue
                row = found
                x = gi + (si - (n_series - 1) / 2.0) * width
                value = _finite(row.get(field))
                if row.get("status") not in (None, "ok") and value is None:
                    failed_slots.append(x)
                    continue
                if value is None:
                    continue
                lo = _finite(row.get(lo_field)) if lo_field else None
                hi = _finite(row.get(hi_field)) if hi_field else None
                xs.append(x)
                hs.append(value)
                err_lo.append(max(value - lo, 0.0) if lo is not None else 0.0)
                err_hi.append(max(hi - value, 0.0) if hi is not None else 0.0)
                top = max(top, value + (err_hi[-1] if err_hi else 0.0))
            if not xs:
                continue
            has_err = any(err_lo) or any(err_hi)
            ax.bar(
                xs,
                hs,
                width=width * 0.92,
                color=colors[si % len(colors)],
                label=name,
                yerr=[err_lo, err_hi] if has_err else None,
                capsize=3 if has_err else 0,
                error_kw={"elinewidth": 0.9, "ecolor": "#212121"},
            )
            drawn += len(xs)
        for x in failed_slots:
            ax.text(
                x,
                0.02,
                "failed",
                transform=ax.get_xaxis_transform(),
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=7,
                color=THROTTLED_COLOR,
            )
        if drawn == 0:
            _not_measured(ax)
        else:
            ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)
            ax.grid(True, axis="y", alpha=0.3)
    axes[-1].set_xticks(range(n_groups))
    axes[-1].set_xticklabels([_group_label(k, extra) for k in groups], fontsize=8)
    axes[-1].set_xlim(-0.6, n_groups - 0.4)
    handles = [Patch(facecolor=colors[i % len(colors)], label=name) for i, name in enumerate(series)]
    strip.legend(handles=handles, loc="center", ncol=min(n_series, 4), fontsize=8, frameon=False)
    return _save(fig, out)
