"""The fleet's rules without a database: the selector language over a board's facts and labels, and the
health band (median - k·MAD, never narrower than a tenth of the median), each threshold just inside and
just outside."""

from __future__ import annotations

import pytest

from edgeprof.fleet.health import K_MAD, MAD_SCALE, MIN_HISTORY, judge, lower_edge
from edgeprof.fleet.selector import (
    SelectorError,
    board_slug,
    matches,
    parse_labels,
    parse_selector,
    selector_facts,
)

pytestmark = pytest.mark.timeout(30)

NANO = selector_facts(
    {
        "board_model": "NVIDIA Jetson Orin Nano Developer Kit",
        "l4t_release": "R36.4.4",
        "ram_total_mb": 7620.4,
        "cpu_count": 6,
        "gpu": None,
        "arch": "aarch64",
        "hostname": "nano-1",
    },
    "nano-1",
    "0.3.16",
)
CPU_BOX = selector_facts(
    {
        "board_model": None,
        "l4t_release": None,
        "ram_total_mb": 16000.0,
        "cpu_count": 8,
        "arch": "x86_64",
        "hostname": "mini",
    },
    "mini",
    None,
)


def sel(text: str, facts: dict[str, object] = NANO, labels: dict[str, str] | None = None) -> bool:
    return matches(parse_selector(text), facts, labels or {"lab": "2"})


def test_facts_name_the_board_jetpack_and_ram_as_a_selector_writes_them() -> None:
    assert NANO["board"] == "orin-nano" and NANO["jetpack"] == "6.2.1" and NANO["ram_mb"] == 7620
    assert board_slug("NVIDIA Jetson AGX Orin Developer Kit") == "agx-orin"
    assert CPU_BOX["jetpack"] is None and CPU_BOX["board"] is None


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("board=orin-nano", True),
        ("board=ORIN-NANO", True),  # text compares without regard to case
        ("board=agx-orin", False),
        ("jetpack>=6.1", True),
        ("jetpack>=6.2.1", True),  # just inside: equal
        ("jetpack>6.2.1", False),  # just outside
        ("jetpack=6.2.1.0", True),  # 6.2.1 == 6.2.1.0
        ("ram_mb>=7620", True),
        ("ram_mb>=7621", False),
        ("label:lab=2", True),
        ("label:lab=1", False),
        ("label:rack=1", False),  # a label the board lacks matches nothing but !=
        ("label:rack!=1", True),
        ("board=orin-nano,jetpack>=6.1,ram_mb>=7000,label:lab=2", True),
        ("board=orin-nano,ram_mb>=8000", False),  # every term must hold
        ("l4t>=36.4", True),
        ("cores<6", False),
    ],
)
def test_selector_terms_match_as_documented(selector: str, expected: bool) -> None:
    assert sel(selector) is expected


def test_a_fact_a_board_lacks_never_matches_an_ordering() -> None:
    assert not sel("jetpack>=5", CPU_BOX) and sel("jetpack!=6.1", CPU_BOX) and sel("ram_mb>=7000", CPU_BOX)


@pytest.mark.parametrize(
    ("selector", "says"),
    [
        ("", "empty selector"),
        ("board", "expected KEY OP VALUE"),
        ("rammb>=7000", "unknown fact 'rammb'"),
        ("board>=orin", ">= needs a number or a version"),
        ("board=", "expected KEY OP VALUE"),
        ("board=orin-nano,,jetpack>=6", "expected KEY OP VALUE"),
    ],
)
def test_a_bad_selector_is_one_line_naming_the_term(selector: str, says: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_selector(selector)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_labels_parse_and_a_bad_one_is_refused() -> None:
    assert parse_labels(["lab=2", "rack = a1"]) == {"lab": "2", "rack": "a1"}
    for bad in ("lab", "=2", "lab=", "la b=2"):
        with pytest.raises(SelectorError):
            parse_labels([bad])


def test_the_health_band_with_no_spread_is_a_tenth_of_the_median() -> None:
    history = [100.0] * 5
    assert lower_edge(history) == pytest.approx(90.0)
    assert judge(90.0, [], history).passed  # just inside (the edge itself passes)
    outside = judge(89.99, [], history)
    assert not outside.passed and "below its band" in outside.reason


def test_the_health_band_widens_with_the_boards_own_spread() -> None:
    history = [100.0, 120.0, 80.0, 110.0, 90.0]  # median 100, MAD 10
    edge = 100.0 - K_MAD * MAD_SCALE * 10.0
    assert lower_edge(history) == pytest.approx(edge)
    assert judge(edge + 0.01, [], history).passed
    assert not judge(edge - 0.01, [], history).passed


def test_a_short_history_passes_and_an_error_always_fails() -> None:
    short = [100.0] * (MIN_HISTORY - 1)
    assert lower_edge(short) is None
    verdict = judge(1.0, [], short)
    assert verdict.passed and "baseline" in verdict.reason
    failed = judge(500.0, ["q4 ctx 256: crashed"], [100.0] * 5)
    assert not failed.passed and "crashed" in failed.reason
    assert not judge(None, [], [100.0] * 5).passed
