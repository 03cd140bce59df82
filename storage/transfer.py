"""Copy sweeps between databases by global identity: ``push``, ``export`` and ``import``.

Written over the mapped tables generically, so a table someone adds later is carried without code here:

* what belongs to a sweep: the sweep row, every table with a foreign key path down from it (runs, then
  measurements, phases, samples/sample blocks, verdicts, ...), and the rows those reference upwards (device,
  build, model file). Local-only tables (the agent's heartbeat, write leases) stay home.
* identity: a row is matched by its ``uid``; a foreign key travels as the referenced row's ``uid``, and is
  turned back into the target's own integer id there, so local ids never collide. A table without a ``uid``
  column is matched by a content key (a hash of all its values, foreign keys as uids), counted per key so
  that two identical rows stay two.
* one target transaction per sweep: the central DB never shows half a sweep; a push killed or cut off
  midway is resumed by pushing again (finished sweeps are found and skipped, nothing is added twice).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Connection, Table, and_, or_, select, update

from edgeprof.storage.identity import DERIVED_TABLES, LOCAL_ONLY_TABLES, content_uid, insert_ignore
from edgeprof.storage.log_verdicts import LogVerdict  # noqa: F401 - its table is in the schema too
from edgeprof.storage.models import Base

BATCH_ROWS = 500
# Rows that change after they are first written (a sweep or run finishing, resumed, retried): pushed again,
# they update the central copy instead of being skipped.
MUTABLE_TABLES = frozenset({"sweep", "run", "collector_status", "soak_window"})
NOT_COPIED = LOCAL_ONLY_TABLES | DERIVED_TABLES
ROOT = "sweep"


@dataclass
class TransferCounts:
    added: Counter[str] = field(default_factory=Counter)
    updated: Counter[str] = field(default_factory=Counter)
    skipped_sweeps: int = 0
    # The target's id of the sweep applied, and of every run that gained or changed a row: what the derived
    # tables (the per-second series) are rebuilt for.
    sweep_id: int | None = None
    changed_runs: set[int] = field(default_factory=set)
    series: int = 0  # derived rows written (not counted in ``added``: nothing was copied)

    def merge(self, other: TransferCounts) -> None:
        self.added.update(other.added)
        self.updated.update(other.updated)
        self.skipped_sweeps += other.skipped_sweeps
        self.changed_runs |= other.changed_runs
        self.series += other.series

    @property
    def n_added(self) -> int:
        return sum(self.added.values())

    def summary(self) -> str:
        parts = [f"{n} {t}" for t, n in sorted(self.added.items()) if n]
        text = f"+{self.n_added} rows" + (f" ({', '.join(parts)})" if parts else "")
        if self.updated:
            text += f", {sum(self.updated.values())} updated"
        if self.series:
            text += f", {self.series} series rows"
        return text


# --- the shape of a sweep ----------------------------------------------------------------------------------


def _tables() -> list[Table]:
    return [t for t in Base.metadata.sorted_tables if t.name not in NOT_COPIED]


def _fk_columns(table: Table) -> list[tuple[Column[Any], Table]]:
    return [(fk.parent, fk.column.table) for fk in table.foreign_keys]


def _descendants() -> list[Table]:
    """Tables below the sweep (parents first): each has a foreign key to the sweep or to one of these."""
    below: list[Table] = []
    names = {ROOT}
    for table in _tables():
        if table.name != ROOT and any(parent.name in names for _c, parent in _fk_columns(table)):
            below.append(table)
            names.add(table.name)
    return below


def _has_uid(table: Table) -> bool:
    return "uid" in table.c


# --- values on the wire (JSON-safe) ---------------------------------------------------------------------


def _encode(col: Column[Any], value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def _decode(col: Column[Any], value: Any) -> Any:
    if value is None:
        return None
    try:
        kind = col.type.python_type
    except NotImplementedError:
        return value
    if kind is datetime and isinstance(value, str):
        return datetime.fromisoformat(value)
    if kind is bytes and isinstance(value, str):
        return base64.b64decode(value)
    if kind is bool:
        return bool(value)
    return value


def _content_key(table: str, record: dict[str, Any]) -> str:
    blob = json.dumps([table, sorted(record.items())], default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


# --- reading a sweep from the source ------------------------------------------------------------------


def _chunks(seq: Sequence[Any], n: int = BATCH_ROWS) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def _select_where_in(
    conn: Connection, table: Table, cols: list[Column[Any]], ids: list[set[int]]
) -> list[Any]:
    """Rows of ``table`` whose any of ``cols`` is in the matching id set (chunked IN lists), by id."""
    seen: dict[int, Any] = {}
    for col, wanted in zip(cols, ids, strict=True):
        for chunk in _chunks(sorted(wanted)):
            for row in conn.execute(select(table).where(col.in_(chunk))).mappings():
                seen[row["id"]] = row
    return [seen[k] for k in sorted(seen)]


def iter_sweep_records(conn: Connection, sweep_id: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(table, record) of everything a sweep consists of, parents before children; foreign keys as refs.

    A record holds every column but the local ``id``; a foreign key column holds the referenced row's
    ``uid`` (or content key, for a table without one).
    """
    sweep_table = Base.metadata.tables[ROOT]
    rows: dict[str, list[Any]] = {}
    root = conn.execute(select(sweep_table).where(sweep_table.c.id == sweep_id)).mappings().all()
    if not root:
        raise LookupError(f"no sweep {sweep_id}")
    rows[ROOT] = list(root)
    for table in _descendants():
        links = [(c, p) for c, p in _fk_columns(table) if p.name in rows]
        cols = [c for c, _p in links]
        ids = [{r["id"] for r in rows[p.name]} for _c, p in links]
        rows[table.name] = _select_where_in(conn, table, cols, ids)
    # Upwards: the rows the sweep's rows point at that are not part of it (device, build, model file).
    parents: dict[str, set[int]] = {}
    for name, found in list(rows.items()):
        for col, parent in _fk_columns(Base.metadata.tables[name]):
            if parent.name not in rows:
                parents.setdefault(parent.name, set()).update(r[col.name] for r in found if r[col.name])
    refs: dict[str, dict[int, str]] = {}
    for table in _tables():
        if table.name in parents and table.name not in rows:
            rows[table.name] = _select_where_in(conn, table, [table.c.id], [parents[table.name]])
    for table in _tables():
        if table.name not in rows:
            continue
        table_refs = refs.setdefault(table.name, {})
        fks = _fk_columns(table)
        for row in rows[table.name]:
            record = {c.name: _encode(c, row[c.name]) for c in table.columns if c.name != "id"}
            for col, parent in fks:
                local = row[col.name]
                record[col.name] = None if local is None else refs[parent.name][local]
            table_refs[row["id"]] = record["uid"] if _has_uid(table) else _content_key(table.name, record)
            yield table.name, record


# --- writing into the target ------------------------------------------------------------------------------


class _Target:
    """Maps refs (uids / content keys) to the target's ids while records are applied."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.ids: dict[str, dict[str, int]] = {}

    def resolve(self, table: Table, record: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for col in table.columns:
            if col.name == "id" or col.name not in record:
                continue
            out[col.name] = _decode(col, record[col.name])
        for col, parent in _fk_columns(table):
            ref = record.get(col.name)
            if ref is not None:
                target_id = self.ids.get(parent.name, {}).get(ref)
                if target_id is None:
                    raise LookupError(f"{table.name}.{col.name}: {parent.name} {ref} not sent before it")
                out[col.name] = target_id
        return out

    def apply(self, table: Table, records: list[dict[str, Any]], counts: TransferCounts) -> None:
        if _has_uid(table):
            self._apply_by_uid(table, records, counts)
        else:
            self._apply_by_content(table, records, counts)
        if table.name == ROOT and counts.sweep_id is None and records:
            counts.sweep_id = self.ids[ROOT].get(records[0]["uid"])

    @staticmethod
    def _note_runs(table: Table, rows: Iterable[dict[str, Any]], counts: TransferCounts) -> None:
        """Remember the target runs these new or changed rows belong to."""
        if table.name == "run":
            counts.changed_runs.update(int(r["id"]) for r in rows if r.get("id") is not None)
        elif "run_id" in table.c:
            counts.changed_runs.update(int(r["run_id"]) for r in rows if r.get("run_id") is not None)

    def _ids_by_uid(self, table: Table, uids: Iterable[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for chunk in _chunks(sorted(set(uids))):
            for uid, id_ in self.conn.execute(select(table.c.uid, table.c.id).where(table.c.uid.in_(chunk))):
                found[uid] = id_
        return found

    def _apply_by_uid(self, table: Table, records: list[dict[str, Any]], counts: TransferCounts) -> None:
        known = self.ids.setdefault(table.name, {})
        existing = self._ids_by_uid(table, (r["uid"] for r in records))
        known.update(existing)
        fresh = [self.resolve(table, r) for r in records if r["uid"] not in existing]
        counts.added[table.name] += insert_ignore(self.conn, table, fresh)
        if fresh:
            known.update(self._ids_by_uid(table, (r["uid"] for r in fresh)))
        for values in fresh:
            if values["uid"] not in known:
                # Skipped for another unique key (the same device/build/model file under an older uid).
                known[values["uid"]] = self._by_unique_key(table, values)
        self._note_runs(table, ({**v, "id": known[v["uid"]]} for v in fresh), counts)
        if table.name in MUTABLE_TABLES:
            for record in records:
                if record["uid"] in existing:
                    values = self.resolve(table, record)
                    self._update_if_changed(table, existing[record["uid"]], values, counts)

    def _by_unique_key(self, table: Table, values: dict[str, Any]) -> int:
        for constraint in table.constraints:
            cols = [c for c in getattr(constraint, "columns", []) if c.name not in ("id", "uid")]
            if not cols or constraint.__class__.__name__ != "UniqueConstraint":
                continue
            where = and_(*(c == values[c.name] for c in cols))
            found = self.conn.execute(select(table.c.id).where(where)).scalar()
            if found is not None:
                return int(found)
        raise LookupError(f"{table.name} {values['uid']}: neither inserted nor found")

    def _update_if_changed(
        self, table: Table, id_: int, values: dict[str, Any], counts: TransferCounts
    ) -> None:
        current = self.conn.execute(select(table).where(table.c.id == id_)).mappings().one()
        changed = {k: v for k, v in values.items() if k != "uid" and current[k] != v}
        if changed:
            self.conn.execute(update(table).where(table.c.id == id_).values(**changed))
            counts.updated[table.name] += 1
            self._note_runs(table, [{**current, **values}], counts)

    def _apply_by_content(self, table: Table, records: list[dict[str, Any]], counts: TransferCounts) -> None:
        known = self.ids.setdefault(table.name, {})
        incoming = [(_content_key(table.name, r), r) for r in records]
        # What the target already holds under the same parents, keyed the same way (ids turned back to refs).
        links = _fk_columns(table)
        back = {p.name: {v: k for k, v in self.ids.get(p.name, {}).items()} for _c, p in links}
        conds = []
        for col, parent in links:
            parent_ids = {self.ids.get(parent.name, {}).get(r[col.name]) for r in records if r.get(col.name)}
            parent_ids.discard(None)
            for chunk in _chunks(sorted(parent_ids)):
                conds.append(col.in_(chunk))
        have: Counter[str] = Counter()
        if conds:
            for row in self.conn.execute(select(table).where(or_(*conds))).mappings():
                record = {c.name: _encode(c, row[c.name]) for c in table.columns if c.name != "id"}
                for col, parent in links:
                    if row[col.name] is not None:
                        record[col.name] = back[parent.name].get(row[col.name])
                key = _content_key(table.name, record)
                have[key] += 1
                known.setdefault(key, row["id"])
        fresh = []
        for key, record in incoming:
            if have[key] > 0:
                have[key] -= 1
                continue
            fresh.append((key, self.resolve(table, record)))
        for key, values in fresh:
            result = self.conn.execute(table.insert().values(**values))
            pk = result.inserted_primary_key
            if pk is not None:
                known.setdefault(key, int(pk[0]))
        counts.added[table.name] += len(fresh)
        self._note_runs(table, (values for _key, values in fresh), counts)


def with_soak_window_uid(record: dict[str, Any]) -> dict[str, Any]:
    """A soak window exported before windows had a uid (schema 16-17): the identity migration 18 gives
    such a window, (its run's uid, its index), so it meets its copy in a DB that already has it."""
    return {**record, "uid": content_uid("soak_window", record["run_id"], record["idx"])}


def apply_sweep(conn: Connection, records: Iterable[tuple[str, dict[str, Any]]]) -> TransferCounts:
    """Apply one sweep's records (from ``iter_sweep_records`` or an export) on ``conn``, in batches."""
    counts = TransferCounts()
    target = _Target(conn)
    tables = Base.metadata.tables
    batch: list[dict[str, Any]] = []
    current: str | None = None
    for name, record in records:
        if name in NOT_COPIED:
            continue
        if name not in tables:
            raise LookupError(f"table {name!r} is not in this edgeprof's schema (upgrade edgeprof)")
        if name == "soak_window" and "uid" not in record:
            record = with_soak_window_uid(record)
        if name != current or len(batch) >= BATCH_ROWS:
            if batch and current is not None:
                target.apply(tables[current], batch, counts)
            batch, current = [], name
        batch.append(record)
    if batch and current is not None:
        target.apply(tables[current], batch, counts)
    return counts


def sweep_is_current(source: Connection, target: Connection, sweep_id: int) -> bool:
    """True when the target already has this sweep, finished and equal: pushing it again would add nothing."""
    table = Base.metadata.tables[ROOT]
    mine = source.execute(select(table).where(table.c.id == sweep_id)).mappings().one()
    if mine["status"] == "running":
        return False
    theirs = target.execute(select(table).where(table.c.uid == mine["uid"])).mappings().first()
    if theirs is None:
        return False
    same = ("status", "ended_at", "n_specs", "plan_hash")
    return all(mine[c] == theirs[c] for c in same)
