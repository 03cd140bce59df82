"""The HTML report in a real headless Chromium (Debian's ``chromium``, driven over the DevTools protocol):
at 1366 × 768, a laptop's screen, the page never scrolls sideways, no table, figure or text runs past the
window, nothing fails to load and the console stays free of errors; with ``--wide`` every column is there
and still only its own box scrolls; and a database hostile in every text puts no element of its own on the
page. The pages are written by the command, as a user gets them, from the golden sweep (both runners, a
quality workload, two depths) and from tests/support/hostile.py."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from support.browser import Browser, Page, chromium_path
from support.golden import load_db
from support.hostile import PAGE_TAGS, build_hostile_db

from edgeprof.storage.db import new_session, open_engine

WIDTH, HEIGHT = 1366, 768


@pytest.fixture(scope="module")
def browser() -> Browser:
    if chromium_path() is None:
        why = "Chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the browser check must run under CI: {why}")
        pytest.skip(why)
    with Browser() as opened:
        yield opened


def write_report(db: Path, out: Path, *args: str) -> Path:
    env = dict(os.environ, TZ="UTC", NO_COLOR="1")
    env.pop("EDGEPROF_DB", None)
    result = subprocess.run(
        [sys.executable, "-m", "edgeprof", "report", "--db", str(db), "--html", str(out), "--format", "csv",
         *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def golden_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = load_db(tmp_path_factory.mktemp("golden") / "golden.db")
    env = dict(os.environ)
    env.pop("EDGEPROF_DB", None)
    upgrade = [sys.executable, "-m", "edgeprof", "db", "upgrade", "--db", str(db)]
    upgraded = subprocess.run(upgrade, env=env, capture_output=True, text=True, timeout=300)
    assert upgraded.returncode == 0, upgraded.stderr
    return db


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def assert_fits(page: Page) -> None:
    assert page.errors == []
    assert page.inner_width == WIDTH
    assert page.scroll_width <= page.client_width <= page.inner_width, page  # no sideways scrolling
    assert page.overflowing == []
    assert page.images_broken == 0


def test_the_report_fits_a_laptop_screen_with_no_console_error(
    browser: Browser, golden_db: Path, tmp_path: Path
) -> None:
    html = write_report(golden_db, tmp_path / "report.html", "--sweep", "1")
    shot = tmp_path / "report.png"
    page = browser.open(html, width=WIDTH, height=HEIGHT, screenshot=shot)
    assert_fits(page)
    assert page.tables_scrolling == []  # the columns chosen fit: no table needs its own scroll bar
    assert png_size(shot) == (WIDTH, HEIGHT)
    assert page.tables >= 5 and page.images >= 2  # summary, configs, serving, versus, device...; figures
    text = html.read_text(encoding="utf-8")
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    # the columns the page had no room for are named under the table, as the terminal names them
    assert re.search(r"Left out to fit a 1366-px window: [a-z_]+(, [a-z_]+)*", text)


def test_wide_shows_every_column_and_only_the_table_scrolls(
    browser: Browser, golden_db: Path, tmp_path: Path
) -> None:
    fitted = write_report(golden_db, tmp_path / "fitted.html", "--sweep", "1")
    wide = write_report(golden_db, tmp_path / "wide.html", "--sweep", "1", "--wide")
    page = browser.open(wide, width=WIDTH, height=HEIGHT)
    assert_fits(page)  # the page itself never scrolls sideways
    assert page.tables_scrolling  # the configs table with every column does, in its own box
    assert "Left out to fit" not in wide.read_text(encoding="utf-8")

    def configs_headers(path: Path) -> list[str]:
        configs = path.read_text(encoding="utf-8").split("<h2>Configs</h2>", 1)[1].split("</thead>", 1)[0]
        return re.findall(r"<th>(.*?)</th>", configs)

    assert set(configs_headers(fitted)) < set(configs_headers(wide))


def test_a_hostile_database_puts_no_element_of_its_own_on_the_page(
    browser: Browser, tmp_path: Path
) -> None:
    db = tmp_path / "hostile.db"
    with new_session(open_engine(db)) as s:
        build_hostile_db(s)
    page = browser.open(write_report(db, tmp_path / "hostile.html"), width=WIDTH, height=HEIGHT)
    assert_fits(page)  # a table with a long unbroken hostile name may scroll in its box, never the page
    assert set(page.elements) <= PAGE_TAGS, sorted(set(page.elements) - PAGE_TAGS)


PHONE_WIDTH, PHONE_HEIGHT = 390, 844  # a phone's screen in CSS pixels


def test_on_a_phone_every_figure_and_its_legend_fit_the_screen(
    browser: Browser, golden_db: Path, tmp_path: Path
) -> None:
    html = write_report(golden_db, tmp_path / "report.html", "--sweep", "1")
    shot = tmp_path / "phone.png"
    page = browser.open(html, width=PHONE_WIDTH, height=PHONE_HEIGHT, screenshot=shot)
    assert page.errors == [] and page.images_broken == 0 and page.images >= 2
    assert page.inner_width == PHONE_WIDTH
    # no figure runs past the right edge (its right half and legend would start off-screen), and the page
    # itself never scrolls sideways
    assert [e for e in page.overflowing if e.startswith("IMG")] == []
    assert page.scroll_width <= page.client_width
