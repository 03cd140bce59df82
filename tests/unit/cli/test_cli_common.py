"""What the command modules share: the exit status of a sweep (0, 1, 130) and its one stderr line, and the
wrapping of line-by-line output (doctor, status) to the terminal's width."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import typer

from edgeprof.cli.common import (
    EXIT_CONFIGS_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    failed_configs_line,
    fit_text,
    sweep_exit_code,
)
from edgeprof.cli.run import exit_as_sweep
from edgeprof.run_states import FINISHED_STATUSES


@pytest.mark.parametrize(
    ("counts", "interrupted", "code"),
    [
        ({}, False, EXIT_OK),  # nothing to do: a resumed sweep already measured
        ({"ok": 4}, False, EXIT_OK),
        ({"ok": 1, "skipped_memory": 2}, False, EXIT_OK),  # refused up front, said so: not a failure
        ({"ok": 3, "crashed": 1}, False, EXIT_CONFIGS_FAILED),
        ({"timeout": 1}, False, EXIT_CONFIGS_FAILED),
        ({"ok": 2, "load_failed": 1}, False, EXIT_CONFIGS_FAILED),
        ({"error": 1}, False, EXIT_CONFIGS_FAILED),
        ({"some_new_status": 1}, False, EXIT_CONFIGS_FAILED),  # unknown: never mistaken for ok
        ({"crashed": 0, "ok": 1}, False, EXIT_OK),
        ({"ok": 1, "crashed": 1, "interrupted": 1}, True, EXIT_INTERRUPTED),  # a stop wins
        ({"ok": 1}, True, EXIT_INTERRUPTED),
        ({"interrupted": 1}, False, EXIT_INTERRUPTED),
    ],
)
def test_sweep_exit_code(counts: dict[str, int], interrupted: bool, code: int) -> None:
    assert sweep_exit_code(counts, interrupted=interrupted) == code


def test_every_finished_failure_status_exits_1() -> None:
    failures = [s for s in FINISHED_STATUSES if s not in ("ok", "skipped_memory")]
    assert sorted(failures) == ["crashed", "error", "load_failed", "timeout"]
    assert all(sweep_exit_code({"ok": 5, s: 1}) == EXIT_CONFIGS_FAILED for s in failures)


def test_failed_configs_line() -> None:
    assert failed_configs_line({"ok": 3, "skipped_memory": 1}) is None
    assert failed_configs_line({"timeout": 1, "ok": 4, "crashed": 1}) == (
        "2 of 6 configs did not end ok (1 crashed, 1 timeout)"
    )


@dataclass
class Outcome:
    counts: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    sweep_id: int = 7


def test_exit_as_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    exit_as_sweep(Outcome({"ok": 2}))  # returns: the command ends with 0
    assert capsys.readouterr().err == ""
    with pytest.raises(typer.Exit) as failed:
        exit_as_sweep(Outcome({"ok": 2, "crashed": 1}))
    assert failed.value.exit_code == EXIT_CONFIGS_FAILED
    assert capsys.readouterr().err == (
        "edgeprof: sweep 7: 1 of 3 configs did not end ok (1 crashed); `edgeprof report` says why\n"
    )
    with pytest.raises(typer.Exit) as stopped:
        exit_as_sweep(Outcome({"ok": 1, "crashed": 1, "interrupted": 1}, interrupted=True))
    assert stopped.value.exit_code == EXIT_INTERRUPTED
    assert capsys.readouterr().err == ""  # the stop said so already


def test_fit_text_wraps_every_line_under_its_value() -> None:
    text = "\n".join(
        [
            "device",
            "  hostname       vm",
            "  build flags    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON",
            "  collector rapl: unavailable (no RAPL zones under /sys/class/powercap (not an x86 host))",
            "  path           /a/very/long/path/that/is/one/word/with/no/space/at/all/to/break/it/at.gguf",
        ]
    )
    assert fit_text(text, None) == text
    lines = fit_text(text, 60).splitlines()
    assert all(len(line) <= 60 for line in lines), lines
    assert lines[:2] == ["device", "  hostname       vm"]
    assert lines[2] == "  build flags    -DGGML_NATIVE=OFF -DGGML_AVX=ON"
    assert lines[3] == "                 -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"  # under the value
    assert lines[4] == "  collector rapl: unavailable (no RAPL zones under"
    assert lines[5] == "    /sys/class/powercap (not an x86 host))"  # no key column: two more than its start
    # a word longer than the line is broken: every line fits, and nothing of it is lost
    assert lines[6:] == [
        "  path           /a/very/long/path/that/is/one/word/with/no/",
        "                 space/at/all/to/break/it/at.gguf",
    ]
