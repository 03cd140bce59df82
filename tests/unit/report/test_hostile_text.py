"""Every text a report prints comes from a file, a plan or a child process: a database with markup and
terminal control sequences in every label, name, prompt, reason and log (tests/support/hostile.py) is
printed, never obeyed. The HTML page is walked section by section; the terminal and Markdown reports are
checked for every control character."""

from __future__ import annotations

import html.parser
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from support.hostile import CONTROL, PAGE_TAGS, TAG, build_hostile_db

from edgeprof.report import build_rows, render_html, render_markdown, render_table
from edgeprof.safetext import safe_text
from edgeprof.storage.db import new_session, open_engine

# The fields each section shows (as stored in the hostile database).
SECTION_FIELDS = {
    "Summary": {"sweep_name", "plan_path"},
    "Configs": {"model_label", "workload", "prompt", "reason"},
    "HTTP API (llama-server, streamed)": {"model_label", "workload"},
    "Verdicts": {"model_label", "workload", "throttle_reason", "throttle_note", "stability_reason"},
    "Failed runs": {"model_label", "workload", "reason", "log_tail"},
    "Device, build and power mode": {"hostname", "board", "cpu", "gpu", "facts", "power_mode", "system_info",
                                     "build_flags", "model_label"},
    "Telemetry collectors": {"collector_reason", "collector_error"},
    "Plan": {"plan_text"},
}  # fmt: skip
RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x7f", "\x9b")


class Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    engine = open_engine(tmp_path_factory.mktemp("hostile") / "hostile.db")
    with new_session(engine) as s, warnings.catch_warnings(record=True) as drawn:
        warnings.simplefilter("always")
        sweep_id = build_hostile_db(s)
        page = render_html(s, sweep_id)
        # a figure's texts reach its font with their controls escaped: no glyph is missing for them
        missing = [str(w.message) for w in drawn if "missing from font" in str(w.message)]
        assert not missing, missing
        return page, build_rows(s, sweep_id, include_serving=True)


def sections(page: str) -> dict[str, str]:
    parts = re.split(r"<h2>(.*?)</h2>", page)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def shown_fields(text: str) -> set[str]:
    """The hostile fields whose text is in ``text``, escaped (in a JSON block, with its quotes escaped)."""
    return set(re.findall(rf"&lt;{TAG} data-f=\\?&quot;(\w+)\\?&quot;&gt;&lt;img src=x", text))


def test_no_markup_from_data_reaches_the_page(hostile: tuple[str, list[dict[str, Any]]]) -> None:
    page, _rows = hostile
    parser = Tags()
    parser.feed(page)
    assert {tag for tag, _attrs in parser.tags} <= PAGE_TAGS
    assert not [a for _t, attrs in parser.tags for a, _v in attrs if a.startswith("on")]
    images = [dict(attrs).get("src") or "" for tag, attrs in parser.tags if tag == "img"]
    assert images and all(src.startswith("data:image/png;base64,") for src in images)  # the figures only
    assert f"<{TAG}" not in page and "<img src=x" not in page
    assert not [c for c in RAW_CONTROLS if c in page]


def test_every_section_shows_its_hostile_texts_escaped(hostile: tuple[str, list[dict[str, Any]]]) -> None:
    page, _rows = hostile
    found = sections(page)
    assert set(SECTION_FIELDS) <= set(found), sorted(found)
    for title, fields in SECTION_FIELDS.items():
        assert fields <= shown_fields(found[title]), (title, fields - shown_fields(found[title]))
    # and the page's title, heading and the echo note under the configs table
    head = page.split("<h2>", 1)[0]
    assert {"sweep_name"} <= shown_fields(head)
    assert "\\x1b]52;c;aGk=\\x07" in found["Configs"]  # the controls are shown as what they are


@pytest.mark.parametrize("width", [None, 100])
def test_the_terminal_report_never_prints_a_control_character(
    hostile: tuple[str, list[dict[str, Any]]], width: int | None
) -> None:
    _page, rows = hostile
    for text in (
        render_table(rows, width=width),
        render_table(rows, width=width, wide=True),
        render_table(rows, width=width, show_output=True),
    ):
        assert not [c for c in RAW_CONTROLS if c in text], repr(text)
        assert safe_text(CONTROL) in text  # shown, as escapes
        assert "<x-evil" in text  # markup is only text in a terminal: shown as it was stored
        for line in text.splitlines():  # no label breaks a table's line or another's
            assert line.isprintable(), repr(line)


def test_the_markdown_report_never_prints_a_control_character(
    hostile: tuple[str, list[dict[str, Any]]],
) -> None:
    _page, rows = hostile
    md = render_markdown(rows)
    assert not [c for c in RAW_CONTROLS if c in md], repr(md)
    assert safe_text(CONTROL) in md
    assert all(line.isprintable() for line in md.splitlines())


def test_the_hostile_database_is_what_the_tests_think(tmp_path: Path) -> None:
    """The fixture itself: its texts really hold the markup and the controls (a test of nothing otherwise)."""
    engine = open_engine(tmp_path / "h.db")
    with new_session(engine) as s:
        rows = build_rows(s, build_hostile_db(s), include_serving=True)
    labels = {r["model_label"] for r in rows}
    assert len(labels) == 1 and CONTROL in next(iter(labels)) and "<img src=x" in next(iter(labels))
    # a speed run that echoes its hostile prompt, a crashed run, a llama-server level
    assert [(r["runner"], r["status"]) for r in rows] == [
        ("llama-cpp", "ok"), ("llama-cpp", "crashed"), ("llama-server", "ok"),
    ]  # fmt: skip
    assert rows[0]["_output_echo"] is True
