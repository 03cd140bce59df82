"""The stability verdict (agent/verdicts/stability.py): pyperf-style spread of the steady repetitions."""

from __future__ import annotations

import pytest

from edgeprof.verdicts import stability


def test_stability() -> None:
    value, ev = stability([100.0, 101.0, 99.0, 100.0, 102.0])
    assert value == "stable" and ev["n"] == 5 and ev["cv"] < 0.02
    spike = stability([100.0, 130.0, 100.0, 100.0, 100.0])
    assert spike.value == "unstable" and spike.evidence["max_over_median"] == pytest.approx(1.3)
    slow = stability([100.0, 100.0, 100.0, 70.0, 100.0])
    assert slow.value == "unstable" and any("min is 0.70x" in r for r in slow.evidence["reasons"])
    noisy = stability([80.0, 120.0, 80.0, 120.0, 100.0])
    assert noisy.value == "unstable" and noisy.evidence["cv"] == pytest.approx(0.2, abs=1e-3)
    assert any("stdev is 20.0% of the mean" in r for r in noisy.evidence["reasons"])
    assert stability([100.0, 50.0]).value == "inconclusive"
    assert stability([100.0, None, 101.0, None]).value == "inconclusive"  # None is not a value
    assert stability([]).evidence["n"] == 0
