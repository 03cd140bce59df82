"""What the recommendation says of a sequential decision, of reps taken in another device state, and of a
tie no measured figure breaks. Synthetic rows (as agent/report/fit.py attaches them).

Mutants seen failing: the throttled block kept in the comparison (``keep_aside`` not called), a tie broken
on bits per weight or on the first-listed file, the reference named without a quality run."""

from __future__ import annotations

import math
from typing import Any

from edgeprof.collectors.roles import MetricRole
from edgeprof.plan import Decide
from edgeprof.report.compare import state_difference
from edgeprof.report.fit import throttle_reasons
from edgeprof.report.recommend import mark_rows, recommend
from edgeprof.report.reference import attach_reference, threads_notes
from edgeprof.report.speed_ratio import set_aside


def _row(run_id: int, label: str, blocks: dict[int, list[float]], **extra: Any) -> dict[str, Any]:
    reps = sorted(x for v in blocks.values() for x in v)
    row = {
        "run_id": run_id, "model_label": label, "model_group": "g", "quant": "Q4_K_M", "workload": "w",
        "runner": "llama-cpp", "status": "ok", "reason": None, "bits_per_weight": 4.9,
        "tg_tps_median": reps[(len(reps) - 1) // 2], "tg_tps_min": reps[0], "tg_tps_max": reps[-1],
        "tg_tps_n": len(reps), "_tg_tps_reps": reps, "_tg_tps_blocks": blocks, "kld_mean": None,
        "same_top_pct": None, "ctx": 512, "depth": 0, "ngl": 0, "threads": 1, "flash_attn": "off",
        "_decision": {"stopped": "settled", "rounds": len(blocks), "budget": "sequential, from 5 to 20 reps"},
    }  # fmt: skip
    return row | extra


def wobble(i: int) -> float:
    return 1.0 + 0.004 * math.sin(1.7 * i)


def test_a_throttled_rep_is_marked_left_out_and_the_report_says_so() -> None:
    fast = {i: [30.0 * wobble(i)] for i in range(8)}
    slow = {i: [15.0 * wobble(i + 3)] for i in range(8)}
    fast[3] = [12.0]  # the one rep the device throttled: alone it would make "fast" the slower here
    flags = {3: ["throttle flags gpu0.throttle_reasons 0x4"]}
    rows = [_row(1, "fast", fast, _block_flags=flags), _row(2, "slow", slow)]
    (rec,) = recommend(rows)
    assert rec.decision == "faster" and rec.best is not None and rec.best.label == "fast"
    ratio = rec.ratios[2]
    assert ratio.n_pairs == 7  # type: ignore[union-attr]
    lines = "\n".join(rec.lines())
    assert "fast: 1 rep set aside: block 4 (1 rep: throttle flags gpu0.throttle_reasons 0x4)" in lines
    assert "left out of the comparison" in lines
    kept = recommend(rows, rule=Decide(off_state="keep"))[0]
    assert kept.ratios[2].n_pairs == 8  # type: ignore[union-attr]
    assert "kept in the comparison" in "\n".join(kept.lines())


def test_a_block_in_another_device_state_is_set_aside() -> None:
    blocks = {"a": {0: [10.0], 1: [10.0], 2: [10.0]}, "b": {0: [9.0], 1: [9.0], 2: [9.0]}}
    usual = {"policy0.governor": "performance"}
    other = {"policy0.governor": "powersave"}
    states = {"a": {0: usual, 1: usual, 2: other}, "b": {0: usual, 1: usual, 2: usual}}
    kept, lines = set_aside(blocks, states, {}, {"a": "A", "b": "B"})
    assert sorted(kept["a"]) == [0, 1] and sorted(kept["b"]) == [0, 1, 2]
    why = "device state: policy0.governor powersave, not performance"
    assert lines == [f"A: 1 rep set aside: block 3 (1 rep: {why})"]


def test_throttle_flags_counters_and_caps_at_a_reps_start() -> None:
    roles = {
        "nvml.gpu0.throttle_reasons": MetricRole("throttle_flags"),
        "thermal_throttle.cpu0": MetricRole("throttle_counter"),
        "cpufreq.policy0.max_mhz": MetricRole("clock_cap", clock_max="cpufreq.policy0.hw_max_mhz"),
        "cpufreq.policy0.hw_max_mhz": MetricRole("clock_limit"),
    }
    quiet = [(9.0, "nvml.gpu0.throttle_reasons", 0.0), (9.0, "cpufreq.policy0.max_mhz", 1500.0),
             (9.0, "cpufreq.policy0.hw_max_mhz", 1500.0), (9.0, "thermal_throttle.cpu0", 4.0),
             (11.0, "thermal_throttle.cpu0", 4.0)]  # fmt: skip
    assert throttle_reasons(quiet, roles, 10.0, 12.0) == []
    capped = [*quiet[:1], (9.0, "cpufreq.policy0.max_mhz", 1100.0), *quiet[2:4],
              (11.0, "thermal_throttle.cpu0", 6.0), (11.5, "nvml.gpu0.throttle_reasons", 4.0)]  # fmt: skip
    assert sorted(throttle_reasons(capped, roles, 10.0, 12.0)) == [
        "clock cap 1100 of 1500 MHz", "thermal_throttle.cpu0 +2 throttle events",
        "throttle flags nvml.gpu0.throttle_reasons 0x4 (SwPowerCap)",
    ]
    # exactly 75 % of the maximum: not capped; just under it: capped
    at_the_line = [*quiet[:1], (9.0, "cpufreq.policy0.max_mhz", 1125.0), *quiet[2:]]
    assert throttle_reasons(at_the_line, roles, 10.0, 12.0) == []
    under = [*quiet[:1], (9.0, "cpufreq.policy0.max_mhz", 1124.0), *quiet[2:]]
    assert throttle_reasons(under, roles, 10.0, 12.0) == ["clock cap 1124 of 1500 MHz"]


def test_a_pi_flag_word_marks_a_rep_only_for_bits_that_hold_the_clock_down_now() -> None:
    """Decoded by the word's own source: a Pi's sticky "since boot" bits (0x50000) or its under-voltage bit
    alone (0x1) are no throttled rep; the frequency-capped bit now (0x2) is."""
    roles = {"rpi.throttled": MetricRole("throttle_flags", flags="rpi_firmware")}
    for word, marked in ((0x50000, False), (0x1, False), (0x2, True)):
        why = throttle_reasons([(10.5, "rpi.throttled", float(word))], roles, 10.0, 12.0)
        assert bool(why) is marked, (hex(word), why)


def test_identical_files_without_quality_name_no_reference_and_pick_nothing() -> None:
    alpha = {i: [20.0 * wobble(i)] for i in range(12)}
    beta = {i: [20.0 * wobble(i + 1)] for i in range(12)}
    rows = [_row(1, "alpha", alpha, peak_rss_mb=410.0), _row(2, "beta", beta, peak_rss_mb=412.0)]
    for row in rows:
        row.update({k: None for k in ("reference_label", "quality_reference_label", "pp_tps_median")})
        row.update({k: row[k] for k in ("ctx",)} | {"type_k": "f16", "type_v": "f16", "n_batch": 512})
    attach_reference(rows, {})
    assert all(row.get("reference_label") is None for row in rows)  # two files alike in bits: no reference
    (rec,) = recommend(rows)
    assert rec.decision == "tie" and rec.best is None
    text = "\n".join(rec.lines())
    assert "none picked — tie within ±" in text
    assert 'quality not measured (add a kind = "quality" workload)' in text
    assert "memory alike (410 and 412 MiB peak RSS)" in text
    assert "energy not measured" in text
    assert "KLD 0" not in text and "reference" not in text and "chose" not in text
    mark_rows(rows, [rec])
    assert {r["recommendation"] for r in rows} == {None}
    assert {r["decision_state"] for r in rows} == {None, "tie"}


def test_a_tie_goes_to_a_measured_figure_that_sets_one_apart() -> None:
    alpha = {i: [20.0 * wobble(i)] for i in range(12)}
    beta = {i: [20.0 * wobble(i + 1)] for i in range(12)}
    rows = [_row(1, "alpha", alpha, peak_rss_mb=800.0), _row(2, "beta", beta, peak_rss_mb=410.0)]
    (rec,) = recommend(rows)
    assert rec.best is not None and rec.best.label == "beta"
    assert "chose beta for memory (800 and 410 MiB peak RSS)" in rec.lines()[0]


def test_contended_at_all_cores_offers_fewer_threads() -> None:
    rows = [_row(1, "a", {0: [5.0]}, threads=2, _cpu_count=2, interference_verdict="contended")]
    (note,) = threads_notes(rows)
    assert "fewer threads may be faster here; compare with [matrix] threads = [1, 2]" in note
    assert threads_notes([rows[0] | {"threads": 1}]) == []


def test_compare_names_the_states_that_differ_before_any_ratio() -> None:
    a = {"device_state": {"power_mode": "MAXN", "policy0.governor": "schedutil"}}
    b = {"device_state": {"power_mode": "15W", "policy0.governor": "schedutil"}}
    assert state_difference([a, b]) == (
        "device state differs: power_mode MAXN (A) vs 15W (B); the ratios below compare two states, not only "
        "the runs"
    )
    assert state_difference([a, a]) is None


def test_a_measured_figure_breaks_a_tie_only_beyond_10_percent() -> None:
    from edgeprof.report.speed_ratio import TIE_BREAK_SHARE, tie_breakers

    assert TIE_BREAK_SHARE == 0.10
    inside = [{"peak_rss_mb": 1000.0}, {"peak_rss_mb": 901.0}]  # 9.9 % less: alike
    assert tie_breakers(inside, False)[0] is None
    outside = [{"peak_rss_mb": 1000.0}, {"peak_rss_mb": 899.0}]  # 10.1 % less: breaks it
    assert tie_breakers(outside, False)[0] is outside[1]


def test_the_default_budget_is_4_times_steady_and_a_plan_can_turn_it_off() -> None:
    from edgeprof.plan.budget import DEFAULT_BUDGET_FACTOR, decide_from_plan_text

    assert DEFAULT_BUDGET_FACTOR == 4 and Decide().max_reps(5) == 20
    assert Decide(max_steady=7).max_reps(5) == 7 and Decide(max_steady=3).max_reps(5) == 5
    assert decide_from_plan_text("[decide]\nsequential = false\n").sequential is False
    assert decide_from_plan_text("[decide]\noff_state = 'bogus'\n") == Decide()  # invalid: the default
