"""Series arithmetic of the verdicts (agent/verdicts/series.py): rank correlation and interpolation."""

from __future__ import annotations

import pytest

from edgeprof.verdicts import spearman, value_at


def test_spearman_and_value_at() -> None:
    assert spearman([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 1, 2, 2]) == pytest.approx(0.894, abs=1e-3)  # ties share ranks
    assert spearman([1, 2], [2, 1]) is None
    assert spearman([1, 2, 3], [5, 5, 5]) is None
    pts = [(0.0, 10.0), (2.0, 20.0), (3.0, None)]
    assert value_at(pts, 1.0) == 15.0
    assert value_at(pts, 3.5) == 20.0  # beyond the readings: the nearest one, if close
    assert value_at(pts, 10.0) is None
