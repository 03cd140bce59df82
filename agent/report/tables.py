"""Plain-text tables that fit a terminal: columns without data dropped, constant columns said once, the
least important columns left out when the table is wider than the screen (and named, so nothing is hidden
silently)."""

from __future__ import annotations

from collections.abc import Sequence

from edgeprof.safetext import md_text

EMPTY = "—"
SEP = "  "


def _is_empty(cell: str) -> bool:
    return cell.strip() in ("", EMPTY, f"{EMPTY}/{EMPTY}")


def drop_empty_columns(
    headers: list[str], rows: list[list[str]], keep: Sequence[str] = ()
) -> tuple[list[str], list[list[str]], list[str]]:
    """Drop every column whose cells are all '—' (not measured on this machine); returns the names dropped."""
    keep_idx = [
        i for i, h in enumerate(headers) if h in keep or not rows or not all(_is_empty(r[i]) for r in rows)
    ]
    dropped = [h for i, h in enumerate(headers) if i not in keep_idx]
    return [headers[i] for i in keep_idx], [[r[i] for i in keep_idx] for r in rows], dropped


def drop_constant_columns(
    headers: list[str], rows: list[list[str]], keep: Sequence[str] = ()
) -> tuple[list[str], list[list[str]], list[tuple[str, str]]]:
    """With two rows or more, a column with one value in every row is said once (returned as (header, value))
    instead of repeated; columns without data are dropped."""
    headers, rows, _ = drop_empty_columns(headers, rows, keep)
    if len(rows) < 2:
        return headers, rows, []
    keep_idx = [i for i, h in enumerate(headers) if h in keep or len({r[i] for r in rows}) > 1]
    common = [(h, rows[0][i]) for i, h in enumerate(headers) if i not in keep_idx]
    return [headers[i] for i in keep_idx], [[r[i] for i in keep_idx] for r in rows], common


def grid_width(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    widths = [max(len(c[i]) for c in [headers, *rows]) for i in range(len(headers))]
    return sum(widths) + len(SEP) * max(len(widths) - 1, 0)


def fit_columns(
    headers: list[str], rows: list[list[str]], width: int, drop_order: Sequence[str]
) -> tuple[list[str], list[list[str]], list[str]]:
    """Leave out columns in ``drop_order`` (least important first) until the table fits ``width``."""
    dropped: list[str] = []
    for name in drop_order:
        if grid_width(headers, rows) <= width:
            break
        if name in headers:
            i = headers.index(name)
            headers = headers[:i] + headers[i + 1 :]
            rows = [r[:i] + r[i + 1 :] for r in rows]
            dropped.append(name)
    return headers, rows, dropped


def fit_table(
    headers: list[str], rows: list[list[str]], width: int | None, drop_order: Sequence[str]
) -> list[str]:
    """The grid of ``headers`` and ``rows`` fitted to ``width`` as the report's table is: the columns of
    ``drop_order`` left out, least telling first, until it fits, and named in a line below it (None: every
    column). A grid that still does not fit is for the caller to wrap."""
    dropped: list[str] = []
    if width is not None and rows:
        headers, rows, dropped = fit_columns(headers, rows, width, drop_order)
    lines = render_grid(headers, rows)
    if dropped:
        lines.append(f"(left out to fit {width} columns: {', '.join(dropped)}; --wide shows every column)")
    return lines


def render_grid(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    grid = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in grid) for i in range(len(headers))]
    lines = [SEP.join(r[i].ljust(widths[i]) for i in range(len(widths))).rstrip() for r in grid]
    lines.insert(1, SEP.join("-" * w for w in widths))
    return lines


def md_escape(text: str) -> str:
    """A cell or label in Markdown: one line, and never markup (safetext.md_text)."""
    return md_text(text)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table: headers as given, every cell's '|' escaped."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
