"""The throttle verdict on x86 (agent/verdicts/judge.py): one thermal_throttle event during the load is
enough to call a run throttled. Synthetic series (the helpers of test_verdicts.py)."""

from __future__ import annotations

from support.throttle_runs import STEADY_TPS, cool_metrics, inputs, series

from edgeprof.verdicts import throttle_verdict


def test_one_x86_throttle_event_is_enough() -> None:
    """Mutant: the x86 thermal_throttle counter flag needing more than one event during the load."""
    metrics = cool_metrics()
    metrics["throttle.package0.count"] = series(lambda t: 10.0 if t < 40 else 11.0)
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "throttled"
    assert result.evidence["hardware"]["detail"]["throttle.package0.count"]["delta"] == 1.0
