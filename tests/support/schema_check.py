"""The migrated schema against the ORM models (storage/models.py): same columns, nullability, kinds of
value, 64-bit integers on PostgreSQL, indexes and their uniqueness. Shared by the SQLite-only upgrade tests
and the tests that run on every backend."""

from __future__ import annotations

from sqlalchemy import BigInteger, inspect

from edgeprof.storage.log_verdicts import LogVerdict  # noqa: F401 - its table is in the schema too
from edgeprof.storage.models import Base


def assert_schema_matches_models(engine: object) -> None:
    insp = inspect(engine)  # type: ignore[call-overload]
    for table in Base.metadata.sorted_tables:
        db_cols = {c["name"]: c for c in insp.get_columns(table.name)}
        assert set(db_cols) == {c.name for c in table.columns}, table.name
        for col in table.columns:
            where = f"{table.name}.{col.name}"
            assert bool(db_cols[col.name]["nullable"]) == bool(col.nullable), where
            # Same kind of value on both sides (an int column is an int column, on every backend).
            assert db_cols[col.name]["type"].python_type is col.type.python_type, where
            if isinstance(col.type, BigInteger) and engine.dialect.name == "postgresql":  # type: ignore[attr-defined]
                assert "BIGINT" in str(db_cols[col.name]["type"]).upper(), f"{where} must be 64-bit"
        db_indexes = {ix["name"]: ix for ix in insp.get_indexes(table.name)}
        for ix in table.indexes:
            assert ix.name in db_indexes, f"{table.name}: index {ix.name} missing"
            assert bool(db_indexes[ix.name]["unique"]) == bool(ix.unique), f"{table.name}: {ix.name} unique"
