"""The timeline figure draws a long series through ``storage.samples.envelope``: at most ~MAX_PLOT_POINTS
points per line, every bucket's minimum and maximum kept, so a throttling dip or a temperature peak of a
whole night stays visible; and its panels follow the roles stored with the sweep (synthetic readings)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from support import dbbuild

from edgeprof.collectors.roles import MetricRole
from edgeprof.report.figures import MAX_LINES, MAX_PLOT_POINTS, load_samples, plot_lines, timeline_figure
from edgeprof.report.figures.canvas import new_figure
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import CollectorStatus, Measurement, Phase
from edgeprof.storage.samples import envelope, write_batch
from edgeprof.telemetry import SampleRow
from edgeprof.verdicts import stored_roles

METRIC = "temp.soc_c"
N = 3 * MAX_PLOT_POINTS
PEAK_AT, PEAK = 5003, 97.5  # one reading each: a decimation that keeps every k-th reading loses them
DIP_AT, DIP = 9001, 12.5
T0 = 1000.0


def _readings() -> list[tuple[float, float]]:
    """A night at 1 Hz: 50 °C with a small saw-tooth, one peak and one dip (values exact in float32)."""
    out = []
    for i in range(N):
        value = PEAK if i == PEAK_AT else DIP if i == DIP_AT else 50.0 + 0.25 * (i % 4)
        out.append((T0 + i, value))
    return out


def _sweep(tmp_path: Path, store_roles: bool = True) -> tuple[Any, int]:
    engine = open_engine(tmp_path / "night.db")
    with new_session(engine) as s:
        sweep = dbbuild.add_sweep(s, name="night")
        run = dbbuild.add_run(s, sweep, 1, t_start_mono=T0, t_end_mono=T0 + N)
        s.add(
            Measurement(run_id=run.id, kind="steady", rep=0, tg_tps=20.0, t_start_mono=T0, t_end_mono=T0 + 9)
        )
        role = MetricRole("temperature", "C", "soc").as_json()
        metrics = [{"name": METRIC, "unit": "C", "kind": "gauge", "role": role}]
        if store_roles:
            s.add(
                CollectorStatus(
                    sweep_id=sweep.id, name="synthetic", ok=True, reason="", metrics_json=json.dumps(metrics)
                )
            )
        rows = [SampleRow(t, t, "synthetic", METRIC, v, run.id) for t, v in _readings()]
        write_batch(s, sweep.id, rows)
        s.commit()
        return engine, sweep.id


def test_a_long_series_is_drawn_as_its_envelope_with_peak_and_dip(tmp_path: Path) -> None:
    engine, sweep_id = _sweep(tmp_path)
    stored = dict(_readings())
    with new_session(engine) as s:
        roles = stored_roles(s, sweep_id)
        points = load_samples(s, sweep_id, roles)[METRIC]
        drawn = timeline_figure(s, sweep_id)
    # bounded, yet detailed: more than the figure's pixel width, far fewer than the readings
    assert MAX_PLOT_POINTS // 2 <= len(points) <= MAX_PLOT_POINTS < N
    values = [v for _t, v in points]
    assert max(values) == PEAK and min(values) == DIP  # the extremes of the night survive
    times = [t for t, _v in points]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert all(stored[t] == v for t, v in points)  # every drawn point is a stored reading, in its place
    # exactly the envelope of the stored readings (not a decimation, not another bucket count)
    t = np.array([t for t, _ in _readings()])
    v = np.array([v for _, v in _readings()])
    tt, vv = envelope(t, v, MAX_PLOT_POINTS)
    assert points == list(zip(tt.tolist(), vv.tolist(), strict=True))
    # and the figure draws that series in the temperature panel
    assert isinstance(drawn, Figure)
    (line,) = [ln for ln in drawn.axes[0].get_lines() if ln.get_label() == METRIC]
    ys = [y for y in line.get_ydata() if not math.isnan(y)]
    assert ys == values


def test_the_panels_follow_the_stored_roles(tmp_path: Path) -> None:
    engine, sweep_id = _sweep(tmp_path)
    with new_session(engine) as s:
        assert set(load_samples(s, sweep_id, {})) == set()  # no role stored for it: not a panel's metric
        assert set(load_samples(s, sweep_id, stored_roles(s, sweep_id))) == {METRIC}


def test_a_sweep_stored_without_roles_is_drawn_by_metric_name(tmp_path: Path) -> None:
    """Sweeps recorded before the roles were stored with them keep their temperature panel."""
    engine, sweep_id = _sweep(tmp_path, store_roles=False)
    with new_session(engine) as s:
        assert stored_roles(s, sweep_id) == {}
        drawn = timeline_figure(s, sweep_id)
    assert isinstance(drawn, Figure)
    assert [ln for ln in drawn.axes[0].get_lines() if ln.get_label() == METRIC]


def test_more_lines_than_a_panel_shows_become_their_pointwise_max_and_min() -> None:
    fig = new_figure(6, 3)
    ax = fig.add_subplot(1, 1, 1)
    n = MAX_LINES + 1
    lines = {f"temp.zone{i}_c": [(0.0, 40.0 + i), (1.0, 60.0 - i)] for i in range(n)}
    assert plot_lines(ax, lines, t0=0.0, scale_t=1.0, group_label="temp") == 2
    drawn = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert drawn == {f"temp max of {n}": [40.0 + n - 1, 60.0], f"temp min of {n}": [40.0, 60.0 - n + 1]}


def test_only_measured_panels_are_drawn_and_the_others_named_in_one_line(tmp_path: Path) -> None:
    """A sweep with a temperature and steady reps but no clocks or power: two panels, not four of which two
    say "not measured"; the missing ones named under the title."""
    engine, sweep_id = _sweep(tmp_path)
    with new_session(engine) as s:
        drawn = timeline_figure(s, sweep_id)
    assert isinstance(drawn, Figure)
    panels = [ax for ax in drawn.axes if ax.axison]
    assert [ax.get_ylabel() for ax in panels] == ["temperature (°C)", "decode tokens/s\n(steady reps)"]
    title = drawn._suptitle.get_text() if drawn._suptitle is not None else ""
    assert title.endswith("\nnot measured: CPU/GPU clocks, power")
    assert not any("not measured" in t.get_text() for ax in drawn.axes for t in ax.texts)


def test_a_sweep_with_nothing_measured_says_so_instead_of_empty_panels(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "bare.db")
    with new_session(engine) as s:
        sweep = dbbuild.add_sweep(s, name="bare")
        run = dbbuild.add_run(s, sweep, 1, status="crashed", t_start_mono=T0, t_end_mono=T0 + 5)
        s.add(Phase(run_id=run.id, name="load", t_start_mono=T0, t_end_mono=T0 + 5))  # it crashed loading
        s.commit()
        drawn = timeline_figure(s, sweep.id)
    missing = "temperature, CPU/GPU clocks, power, steady decode tokens/s"
    assert drawn == f"sweep {sweep.id} (bare): not measured: {missing}"
