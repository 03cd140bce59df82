"""PostgreSQL for the tests: a server URL from ``$EDGEPROF_TEST_PG_URL`` (what .ci/run exports), else a
throwaway server started here with scripts/pg_test_server.sh when the binaries are installed.

Each test that uses ``pg_db_url`` gets its own fresh database on that server, dropped afterwards. Without a
server the PostgreSQL half of the parametrised tests is skipped, except under ``CI=true``, where a missing
server is a failure (CI must run them).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg_test_server.sh"


def _require_or_skip(why: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL tests must run under CI: {why}")
    pytest.skip(f"no PostgreSQL for the tests: {why}")


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str | None]:
    """The admin URL of a PostgreSQL server (None when there is none: the PostgreSQL tests then skip)."""
    url = os.environ.get("EDGEPROF_TEST_PG_URL")
    if url:
        yield url
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        yield None
        return
    try:
        out = subprocess.run(
            ["bash", str(SCRIPT), "start", "--owner", str(os.getpid())],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        yield None
        return
    env = dict(
        line.removeprefix("export ").split("=", 1) for line in out.splitlines() if line.startswith("export ")
    )
    env = {k: shlex.split(v)[0] for k, v in env.items()}
    try:
        yield env["EDGEPROF_TEST_PG_URL"]
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", env["EDGEPROF_TEST_PG_DIR"]], timeout=60, check=False)


def create_database(server_url: str) -> str:
    """A new empty database on the server; returns its URL."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"ep_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_database(server_url: str, url: str) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def pg_db_url(pg_server_url: str | None) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (skipped without a server, failed under CI)."""
    if pg_server_url is None:
        _require_or_skip("set EDGEPROF_TEST_PG_URL or install PostgreSQL and psycopg ('edgeprof[postgres]')")
    try:
        url = create_database(pg_server_url)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the server means the same thing here
        _require_or_skip(f"cannot create a database: {str(exc).splitlines()[0]}")
    yield url
    drop_database(pg_server_url, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A DB target on each backend: a fresh SQLite file path, then a fresh PostgreSQL database URL."""
    if request.param == "sqlite":
        return str(tmp_path / "edgeprof.db")
    return str(request.getfixturevalue("pg_db_url"))
