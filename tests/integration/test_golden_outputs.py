"""The readers' outputs on one fixed database are byte-identical to the frozen golden files.

The database is a real recorded sweep (``tests/fixtures/golden/sweeps.sql.gz``, see ``support/golden.py``):
report (table at 120 columns, wide, md, csv, json), the HTML report's tables as text, compare, status,
sweeps and the ``run --check`` messages for a set of bad plans. A change to any of them is either a bug or
a deliberate change of output, made by re-freezing (``python tests/support/golden.py freeze``) in the same
commit as the code that explains it.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from support import golden


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    work = tmp_path_factory.mktemp("golden")
    return golden.outputs(golden.load_db(work / "golden.db"), work)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(p.name for p in golden.GOLDEN_DIR.iterdir() if p.suffix != ".gz"))
def test_output_matches_golden(produced: dict[str, str], name: str) -> None:
    expected = (golden.GOLDEN_DIR / name).read_text(encoding="utf-8")
    got = produced[name]
    if got != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True), got.splitlines(keepends=True), "golden", "now", n=1
            )
        )
        pytest.fail(f"{name} differs from its golden file:\n{diff[:6000]}")


def test_every_output_has_a_golden_file(produced: dict[str, str]) -> None:
    frozen = {p.name for p in Path(golden.GOLDEN_DIR).iterdir() if p.suffix != ".gz"}
    assert set(produced) == frozen
