"""Stored text made safe to show: the one sanitiser every terminal and Markdown printer applies, and the one
escaping function every HTML writer applies.

A model label defaults to the GGUF's file name, and names, prompts, reasons and log tails come from plans,
files and child processes: any of them may hold a control sequence (clear the screen, write the clipboard
with OSC 52, retitle the window, move the cursor back with CR) or markup (a file named
``<img src=x onerror=...>.gguf``). Printed raw, a report would act on the reader's terminal or browser
instead of showing what was stored. Here every control or format character is written as a visible escape
(``\\x1b``, ``\\r``, ``\\u202e``), so the text reads as it was stored and does nothing.
"""

from __future__ import annotations

import html
import logging
import re
import unicodedata
import warnings
from typing import Any

NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# control (C0, DEL, C1), format (bidi overrides, zero-width), line/paragraph separators, lone surrogates
# (which cannot even be encoded for the terminal)
HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
# and, for text that must read unambiguously (generated text): private-use and unassigned code points too
HIDDEN_STRICT = HIDDEN | {"Co", "Cn"}


def escape_char(ch: str) -> str:
    """One character as its visible escape: ``\\n``, ``\\x1b``, ``\\u202e``, ``\\U000e0001``."""
    if ch in NAMED_ESCAPES:
        return NAMED_ESCAPES[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def safe_text(value: Any, keep: str = "", *, strict: bool = False) -> str:
    """``value`` as text with every control or format character escaped, except the characters in ``keep``
    (``"\\n"`` for a whole report, whose lines are its own). Text without such characters is returned as it
    is, so ordinary labels print unchanged. ``strict``: private-use and unassigned code points too."""
    text = "" if value is None else str(value)
    if text.isprintable():  # the common case: nothing to escape (a space is printable, a newline is not)
        return text
    hidden = HIDDEN_STRICT if strict else HIDDEN
    return "".join(
        escape_char(ch) if ch not in keep and unicodedata.category(ch) in hidden else ch for ch in text
    )


def safe_lines(text: str) -> str:
    """A whole printout: every line kept, everything else in it made safe (``safe_text`` keeping ``\\n``)."""
    return safe_text(text, keep="\n")


def esc(value: Any) -> str:
    """Any text written into HTML: control characters made visible (newlines and tabs kept, for ``<pre>``),
    then ``<``, ``>``, ``&`` and both quotes escaped, so it is shown, never parsed as markup or an
    attribute's end. ``None`` is the empty string."""
    return html.escape(safe_text(value, keep="\n\t"), quote=True)


# A cell a spreadsheet would run as a formula (OWASP "CSV injection"): text starting with one of these.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A value for the csv module: text that a spreadsheet would take for a formula gets a leading ``'``
    (OWASP's advice; numbers are left as numbers), and a bare CR is written ``\\r``: the writer (line
    terminator ``\\n``) quotes a newline but not a CR, which split the row in a spreadsheet."""
    if not isinstance(value, str):
        return value
    if value.startswith(_FORMULA_START):
        value = "'" + value
    return value.replace("\r", "\\r")


# What turns text into Markdown markup: a tag's start (``<script``, ``</x``, ``<!--``, an autolink
# ``<http:``), a link's or image's middle ``](`` and an image's start ``![``, and a backslash that would
# undo an escape of one of them. Only these are escaped, so ranges (``[1–2]``), ``< 5`` and code spans
# print as before.
_MD_MARKUP = re.compile(r"\\(?=[<\[\]!])|<(?=[A-Za-z/!?])|\]\(|!\[")


def md_text(value: Any) -> str:
    """A label in Markdown: control characters escaped (one line), a table cell's ``|`` escaped, and
    nothing from data becomes markup (raw HTML, ``[x](javascript:…)``, a remote image)."""
    text = safe_text(value)
    if not (len(text) > 1 and text[0] == text[-1] == "`"):  # a code span shows what it holds literally
        text = _MD_MARKUP.sub(lambda m: "\\" + m.group(0), text)
    return text.replace("|", "\\|")


class SafeLogFormatter(logging.Formatter):
    """A log line whose message (plan and file names, labels, reasons, anything a record quotes) has every
    control character escaped, its newlines too: no record can forge another line or act on the terminal
    reading the journal. A traceback appended to the record keeps its own lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return safe_text(super().formatMessage(record))


def install_warning_sanitiser() -> None:
    """Warnings printed to stderr (matplotlib's "Glyph 27 missing" quotes a label's ESC) go through
    ``safe_text``: a warning line never carries a control sequence to the terminal."""
    original = warnings.formatwarning

    def formatwarning(
        message: Any, category: Any, filename: str, lineno: int, line: str | None = None
    ) -> str:
        return safe_text(original(message, category, filename, lineno, line), keep="\n")

    warnings.formatwarning = formatwarning
