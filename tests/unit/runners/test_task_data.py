"""Task files in llama-perplexity's three layouts (the shipped subsets, tests/fixtures/tasks/SOURCES.md),
every malformed or truncated file refused with its place, and the seeded subset drawn as llama-perplexity
draws it (the expected positions were printed by a C++ program with libstdc++'s std::mt19937 and
std::uniform_int_distribution, g++ 12)."""

from __future__ import annotations

import pytest
from support.paths import FIXTURES

from edgeprof.runners.tasks.data import (
    MT19937,
    TaskFileError,
    encode_multiple_choice,
    parse_tasks,
    select,
    uniform_below,
)

TASKS = FIXTURES / "tasks"
pytestmark = pytest.mark.timeout(30)


def test_the_shipped_sets_parse() -> None:
    hs = parse_tasks("hellaswag", (TASKS / "hellaswag_val_first24.txt").read_bytes(), "hs")
    assert len(hs) == 24 and hs[0].gold == (3,) and len(hs[0].endings) == 4
    assert (
        hs[0].sequence(3)
        == "Roof shingle removal: A man is sitting on a roof. he starts pulling up roofing on a roof."
    )
    wg = parse_tasks("winogrande", (TASKS / "winogrande_edgeprof_tiny.csv").read_bytes(), "wg")
    assert len(wg) == 20  # the header line is not a task
    # a quoted sentence keeps its commas; the blank splits it; the choice goes in with no space added
    assert wg[3].sequence(1) == "Tom lent Bill his ladder, since Bill needed to reach the roof gutters."
    assert wg[3].gold == (1,)
    mc = parse_tasks("multiple-choice", (TASKS / "multiple_choice_edgeprof_tiny.bin").read_bytes(), "mc")
    assert len(mc) == 16 and mc[7].gold == (2, 3) and mc[2].endings == ("six", "ten", "eight")


@pytest.mark.parametrize(
    ("kind", "data", "expect"),
    [
        ("hellaswag", b"ctx\n0\na\nb\nc\n", "line 1: 5 lines, not a multiple of 6"),
        (
            "hellaswag",
            b"ctx\n0\na\nb\nc\nd\nctx2\nx\na\nb\nc\nd\n",
            "line 8: expected the right ending's index",
        ),
        ("hellaswag", b"ctx\n0\na\nb\nc\n\xff\n", "line 6: not UTF-8"),
        ("hellaswag", b"", "empty"),
        ("winogrande", b"0,The _ fell.,cat,dog,1\n1,No blank here.,a,b,2\n", "line 2: no '_'"),
        ("winogrande", b"0,The _ fell.,cat,dog,3\n", "line 1: expected answer 1 or 2"),
        ("winogrande", b"0,The _ fell.,cat\n", "line 1: expected 5 comma-separated fields, found 3"),
        ("winogrande", b"0,The _ fell.,cat,dog,1\n1,The _ rose.,cat,dog,2", "line 2: no newline at the end"),
        ("multiple-choice", b"\x02\x00\x00\x00", "byte 4: truncated in the offset of task 0"),
        ("multiple-choice", b"", "byte 0: truncated in the task count"),
    ],
)
def test_a_malformed_file_is_refused_with_its_place(kind: str, data: bytes, expect: str) -> None:
    with pytest.raises(TaskFileError, match=r"^bad\.file: ") as err:
        parse_tasks(kind, data, "bad.file")
    assert expect in str(err.value)
    assert "\n" not in str(err.value)  # one line


def test_a_truncated_multiple_choice_file_names_the_byte() -> None:
    data = encode_multiple_choice([("Q one?", ["a", "b"], [1, 0]), ("Q two?", ["c", "d"], [0, 1])])
    assert len(parse_tasks("multiple-choice", data, "mc")) == 2
    with pytest.raises(TaskFileError, match="task 1"):
        parse_tasks("multiple-choice", data[:-6], "mc")
    no_right = encode_multiple_choice([("Q?", ["a", "b"], [0, 0])])
    with pytest.raises(TaskFileError, match="no answer labelled 1"):
        parse_tasks("multiple-choice", no_right, "mc")


def test_mt19937_and_the_draws_match_libstdcxx() -> None:
    rng = MT19937(1)
    assert [rng() for _ in range(3)] == [1791095845, 4282876139, 3093770124]
    # std::uniform_int_distribution<size_t>(0, n - 1) with n = 10042, 10041, ... (the raw draws)
    rng = MT19937(1)
    assert [uniform_below(rng, 10042 - i) for i in range(8)] == [
        4187,
        10012,
        7232,
        9361,
        1,
        1285,
        3034,
        10025,
    ]
    # HellaSwag's subset: each draw indexes the tasks left, so later positions shift past the ones taken
    assert select("hellaswag", 10042, 8, 1) == [4187, 10013, 7233, 9363, 1, 1286, 3036, 10032]
    # Winogrande and multiple choice: int(2^-32 * (float) rng() * n) in float32, then swap-remove
    assert select("winogrande", 1267, 8, 1) == [528, 1262, 911, 1178, 0, 161, 381, 1258]
    assert select("multiple-choice", 1267, 8, 1) == [528, 1262, 911, 1178, 0, 161, 381, 1258]


def test_subset_sizes_and_seeds() -> None:
    assert select("winogrande", 20, None, 1) == list(range(20))  # no subset asked: every task in file order
    assert select("winogrande", 20, 400, 1) == list(range(20))
    hs = select("hellaswag", 24, 400, 1)
    assert sorted(hs) == list(range(24)) and hs != list(range(24))  # HellaSwag always shuffles
    assert select("hellaswag", 24, 10, 2) != select("hellaswag", 24, 10, 1)
