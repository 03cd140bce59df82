"""llama-bench's command line read as llama-bench reads it: lists, ranges, repeated flags, defaults, and a
one-line refusal of anything else (no llama.cpp here)."""

from __future__ import annotations

import pytest

from edgeprof.report.llamabench import BenchArgsError, parse_bench_args, parse_int_range


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("128", [128]),
        ("1,2,4", [1, 2, 4]),
        ("1-4", [1, 2, 3, 4]),
        ("1-8+3", [1, 4, 7]),
        ("64-512*2", [64, 128, 256, 512]),
        ("16,64-256*4,1000", [16, 64, 256, 1000]),
        ("0", [0]),
        ("5-5", [5]),
        ("4-1", []),  # first past last: nothing, as llama-bench
    ],
)
def test_int_ranges_as_llama_bench_expands_them(text: str, values: list[int]) -> None:
    assert parse_int_range(text) == values


@pytest.mark.parametrize("text", ["", "a", "1-", "1,,2", "1-4+", "1-4/2", "-3", "1.5", "1-9*1", "2-9*0"])
def test_bad_ranges_are_refused(text: str) -> None:
    with pytest.raises(BenchArgsError):
        parse_int_range(text)


def test_negative_only_where_allowed() -> None:
    assert parse_int_range("-1,0,99", allow_negative=True) == [-1, 0, 99]


def test_a_huge_range_is_refused_not_expanded() -> None:
    with pytest.raises(BenchArgsError, match="more than"):
        parse_int_range("1-100000000")


def test_defaults_are_llama_benchs() -> None:
    args = parse_bench_args(["-m", "x.gguf"])
    assert args.n_prompt == (512,) and args.n_gen == (128,) and args.reps == 5 and args.output == "md"
    assert args.n_gpu_layers == (-1,) and args.n_batch == (2048,) and args.n_ubatch == (512,)
    assert args.flash_attn == ("auto",) and args.type_k == ("f16",) and args.n_depth == (0,)
    assert args.tests() == [(512, 0), (0, 128)]


def test_lists_repeated_flags_long_names_and_tests_in_llama_bench_order() -> None:
    args = parse_bench_args(
        ["--model", "a.gguf,b.gguf", "-p", "0", "-n", "16", "-n", "32", "-pg", "64,8", "--n_depth", "0,128",
         "-t", "1-2", "-ngl", "-1", "-fa", "on,0", "-ctk", "q8_0", "-r", "3", "-o", "jsonl"]
    )  # fmt: skip
    assert args.models == ("a.gguf", "b.gguf")
    assert args.tests() == [(0, 16), (0, 32), (64, 8)]  # -p 0: no pp test, as llama-bench skips it
    assert args.n_depth == (0, 128) and args.n_threads == (1, 2)
    assert args.flash_attn == ("on", "off") and args.type_k == ("q8_0",)
    assert args.reps == 3 and args.output == "jsonl"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "-m MODEL is required"),
        (["-m", "x", "--mmap", "0"], "unknown or unsupported llama-bench flag '--mmap'"),
        (["-m", "x", "-p"], "-p needs a value"),
        (["-m", "x", "-o", "xml"], "-o xml"),
        (["-m", "x", "-r", "0"], "-r 0"),
        (["-m", "x", "-fa", "maybe"], "not on, off or auto"),
        (["-m", "x", "-ctk", "q9"], "unknown cache type"),
        (["-m", "x", "-pg", "512"], "expected <pp,tg>"),
        (["-m", "x", "-t", "0"], "out of range"),
        (["-m", "x", "-t", "2,2"], "duplicate"),
        (["-m", "x", "-p", "0", "-n", "0"], "no test to run"),
    ],
)
def test_bad_flags_are_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(BenchArgsError) as exc:
        parse_bench_args(argv)
    assert message in str(exc.value) and "\n" not in str(exc.value)
