"""The one sanitiser of terminal text and the one escaping function of HTML (agent/safetext.py): every
control or format character shown as an escape, ordinary text unchanged, markup never parsed."""

from __future__ import annotations

import pytest

from edgeprof.safetext import esc, escape_char, safe_lines, safe_text

CONTROLS = {
    "clear screen": "\x1b[2J",
    "OSC 52 clipboard write": "\x1b]52;c;aGk=\x07",
    "window title": "\x1b]0;pwned\x07",
    "8-bit CSI": "\x9b31m",
    "carriage return": "\r",
    "bell": "\x07",
    "backspace": "\x08",
    "DEL": "\x7f",
    "right-to-left override": "\u202e",
    "zero-width space": "\u200b",
    "line separator": "\u2028",
    "lone surrogate": "\ud800",
}


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_no_control_or_format_character_survives(name: str) -> None:
    out = safe_text(f"label{CONTROLS[name]}end")
    assert out.isprintable(), repr(out)
    assert out.startswith("label") and out.endswith("end")
    out.encode("utf-8")  # a lone surrogate could not even be printed


def test_the_escapes_read_as_what_was_stored() -> None:
    assert safe_text("a\x1b[2Jb\rc\nd\te\u202e") == "a\\x1b[2Jb\\rc\\nd\\te\\u202e"
    assert escape_char("\U000e0001") == "\\U000e0001"


def test_ordinary_text_is_unchanged() -> None:
    ordinary = ("tiny-q4_k_m", "héllo ünïcode — ok", "日本語 λ 🙂", "a  b", "",
                "C:\\models\\x.gguf", "\xa0nbsp")
    for text in ordinary:
        assert safe_text(text) == text
    assert safe_text(None) == "" and safe_text(3.5) == "3.5"


def test_a_printout_keeps_its_lines_and_nothing_else() -> None:
    assert safe_lines("row 1\nrow\x1b]0;t\x07 2\r\n") == "row 1\nrow\\x1b]0;t\\x07 2\\r\n"


def test_strict_also_escapes_private_use_and_unassigned() -> None:
    assert safe_text("\ue000") == "\ue000"
    assert safe_text("\ue000", strict=True) == "\\ue000"


def test_html_escaping_escapes_markup_and_quotes_and_shows_controls() -> None:
    assert esc('<img src=x onerror="alert(1)">') == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
    assert esc("it's & <b>") == "it&#x27;s &amp; &lt;b&gt;"
    # a log tail keeps its lines and tabs for <pre>; an escape sequence in it is shown, not kept raw
    assert esc("line 1\n\tline\x1b[31m 2") == "line 1\n\tline\\x1b[31m 2"
    assert esc(None) == ""
