"""The README's hostile-input table is printed from support/hostile_cases.py: every row there must be a
case some test runs (its id named in a test file), and the table must print as valid markdown rows."""

from __future__ import annotations

from support.hostile_cases import CASES, markdown
from support.paths import REPO_ROOT


def test_every_hostile_case_is_run_by_a_test() -> None:
    texts = [p.read_text(encoding="utf-8") for p in (REPO_ROOT / "tests").rglob("test_*.py")]
    unused = [c.id for c in CASES if not any(f'"{c.id}"' in text for text in texts)]
    assert unused == [], f"cases in the README table that no test runs: {unused}"


def test_the_table_has_one_row_per_case_and_no_broken_cell() -> None:
    rows = markdown().splitlines()
    assert rows[:2] == ["| Input | What edgeprof does |", "|---|---|"]
    areas = {c.area for c in CASES}
    assert len(rows) == 2 + len(areas) + len(CASES)
    for row in rows[:1] + rows[2:]:
        assert row.startswith("| ") and row.endswith(" |") and row.count(" | ") == 1, row
