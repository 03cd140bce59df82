"""The block codec of telemetry: consecutive ticks of one source, encoded column by column, losslessly.

The payload (``CODEC = 1``):

* a tick grid: ``t_mono`` and ``t_wall`` of every tick (float64, XOR with the previous value, byte-shuffled);
* per metric, a state byte per tick (``ST_VALUE`` 0 value, ``ST_NULL`` 1 = source could not be read,
  ``ST_ABSENT`` 2 = metric absent from that tick) stored only when not all 0, so NULL stays NULL and "not
  sampled" stays distinct from it;
* per metric, the values: when every value is an exact decimal with <= 6 digits after the point (what sysfs,
  tegrastats, NVML give: integer mW/MHz/uJ, temperatures in 0.1 or 0.001 C) as zigzag int64 deltas of
  ``round(v * 10**k)``, checked to decode to the very same float; otherwise float64 XOR deltas. Counters
  (RAPL uJ, throttle counts) are integers and round-trip bit-exactly through a wrap: the delta is just a
  large negative number. NaN/inf fall back to float64 and are kept bit for bit.
* everything byte-shuffled (the high bytes of small deltas are zeros) and zlib-compressed.

Pure numpy: nothing here touches a database (``storage.samples`` stores and reads the blocks).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CODEC = 1
# A block is closed at this many ticks; the sampler's flushes are far smaller, imports and compaction use it.
MAX_TICKS_PER_BLOCK = 3000
# The state of a metric at one tick (one byte per tick in the payload): a value, NULL (the source could not
# be read), or absent (the metric was not sampled at that tick).
ST_VALUE, ST_NULL, ST_ABSENT = 0, 1, 2
_MAX_DECIMALS = 6
_EXACT_INT = float(2**53)


@dataclass(frozen=True)
class Tick:
    """One collector tick: the time it was taken and the readings it gave (None = unreadable)."""

    t_mono: float
    t_wall: float
    values: dict[str, float | None]


def _shuffle(a: np.ndarray) -> bytes:
    """Byte-transpose 8-byte words: the i-th bytes of every word become contiguous (zeros compress)."""
    return np.ascontiguousarray(a.view(np.uint8).reshape(-1, 8).T).tobytes()


def _unshuffle(buf: bytes, n: int) -> np.ndarray:
    return np.ascontiguousarray(np.frombuffer(buf, dtype=np.uint8).reshape(8, n).T).view(np.uint64).ravel()


def _xor_f64(v: np.ndarray) -> bytes:
    u = np.ascontiguousarray(v, dtype=np.float64).view(np.uint64)
    d = u.copy()
    d[1:] ^= u[:-1]
    return _shuffle(d)


def _unxor_f64(buf: bytes, n: int) -> np.ndarray:
    d = _unshuffle(buf, n)
    return np.bitwise_xor.accumulate(d).view(np.float64)


def _decimal_scale(v: np.ndarray) -> int | None:
    """The smallest k with v == round(v * 10**k) / 10**k exactly, or None (then float64 XOR is used)."""
    if not np.all(np.isfinite(v)):
        return None
    for k in range(_MAX_DECIMALS + 1):
        scale = 10.0**k
        ints = np.rint(v * scale)
        if np.any(np.abs(ints) >= _EXACT_INT):
            return None
        if np.array_equal(ints / scale, v) and not np.any(np.signbit(v) & (v == 0)):
            return k
    return None


def _zigzag(d: np.ndarray) -> np.ndarray:
    return ((d << 1) ^ (d >> 63)).view(np.uint64)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    return ((z >> np.uint64(1)).view(np.int64)) ^ -((z & np.uint64(1)).view(np.int64))


def encode_block(ticks: Sequence[Tick]) -> tuple[bytes, int]:
    """Encode ticks (in time order) into a payload; returns (payload, number of readings stored)."""
    n = len(ticks)
    names: list[str] = []
    seen: set[str] = set()
    for tk in ticks:
        for name in tk.values:
            if name not in seen:
                seen.add(name)
                names.append(name)
    cols: list[tuple[str, np.ndarray, np.ndarray]] = []
    for name in names:
        states = np.zeros(n, dtype=np.uint8)
        vals: list[float] = []
        for i, tk in enumerate(ticks):
            v = tk.values.get(name, _ABSENT)
            if v is None:
                states[i] = ST_NULL
            elif v is _ABSENT:
                states[i] = ST_ABSENT
            else:
                vals.append(float(v))  # type: ignore[arg-type]
        cols.append((name, states, np.asarray(vals, dtype=np.float64)))
    t_mono = np.fromiter((tk.t_mono for tk in ticks), np.float64, n)
    t_wall = np.fromiter((tk.t_wall for tk in ticks), np.float64, n)
    return encode_arrays(t_mono, t_wall, cols)


_ABSENT = object()


def encode_arrays(
    t_mono: np.ndarray, t_wall: np.ndarray, cols: Sequence[tuple[str, np.ndarray, np.ndarray]]
) -> tuple[bytes, int]:
    """The columnar encoder: per metric (name, state per tick [0 value, 1 NULL, 2 absent], the values of
    the state-0 ticks in order). Returns (payload, number of readings = ticks not absent)."""
    n = len(t_mono)
    parts: list[bytes] = [_xor_f64(t_mono), _xor_f64(t_wall)]
    header_cols: list[list[Any]] = []
    n_values = 0
    for name, states, arr in cols:
        n_values += int(np.count_nonzero(states != ST_ABSENT))
        has_states = bool(states.any())
        if has_states:
            parts.append(np.ascontiguousarray(states, dtype=np.uint8).tobytes())
        k = _decimal_scale(arr) if len(arr) else 0
        if k is None:
            parts.append(_xor_f64(arr))
            header_cols.append([name, int(has_states), len(arr), -1])
        else:
            ints = np.rint(arr * 10.0**k).astype(np.int64)
            d = ints.copy()
            d[1:] -= ints[:-1]
            parts.append(_shuffle(_zigzag(d)))
            header_cols.append([name, int(has_states), len(arr), k])
    header = json.dumps({"n": n, "cols": header_cols}, separators=(",", ":")).encode()
    raw = struct.pack("<I", len(header)) + header + b"".join(parts)
    return zlib.compress(raw, 6), n_values


Column = tuple[str, np.ndarray, np.ndarray, np.ndarray]


def decode_block(payload: bytes) -> tuple[np.ndarray, np.ndarray, list[Column]]:
    """Payload -> (t_mono[n], t_wall[n], [(metric, tick indices, values, is_null)]).

    NULL entries hold NaN in ``values`` and True in ``is_null``; a stored NaN (float64 path) is told apart by
    ``is_null``, so it is returned as NaN, not as NULL.
    """
    raw = zlib.decompress(payload)
    (hlen,) = struct.unpack_from("<I", raw, 0)
    header = json.loads(raw[4 : 4 + hlen])
    n = int(header["n"])
    pos = 4 + hlen

    def take(nbytes: int) -> bytes:
        nonlocal pos
        out = raw[pos : pos + nbytes]
        pos += nbytes
        return out

    t_mono = _unxor_f64(take(8 * n), n)
    t_wall = _unxor_f64(take(8 * n), n)
    out: list[Column] = []
    for name, has_states, n_vals, k in header["cols"]:
        states = np.frombuffer(take(n), dtype=np.uint8) if has_states else np.zeros(n, dtype=np.uint8)
        if k < 0:
            vals = _unxor_f64(take(8 * n_vals), n_vals)
        else:
            ints = np.cumsum(_unzigzag(_unshuffle(take(8 * n_vals), n_vals)))
            vals = ints.astype(np.float64) / 10.0**k
        present = np.nonzero(states != ST_ABSENT)[0]
        full = np.full(len(present), np.nan)
        is_value = states[present] == ST_VALUE
        full[is_value] = vals
        out.append((name, present, full, ~is_value))
    return t_mono, t_wall, out


def block_metrics(payload: bytes) -> list[str]:
    """The metric names of a block, read from its header alone (no column is decoded)."""
    raw = zlib.decompress(payload)
    (hlen,) = struct.unpack_from("<I", raw, 0)
    return [str(c[0]) for c in json.loads(raw[4 : 4 + hlen])["cols"]]


def merge_payloads(payloads: Sequence[bytes]) -> tuple[bytes, int, float, float, int]:
    """Decode blocks of one source (in time order) and re-encode them as one, columnwise with numpy.

    Returns (payload, n_values, t_start, t_end, n_ticks).
    """
    decoded = [decode_block(p) for p in payloads]
    t_mono = np.concatenate([d[0] for d in decoded])
    t_wall = np.concatenate([d[1] for d in decoded])
    order = np.argsort(t_mono, kind="stable")
    names: list[str] = []
    seen: set[str] = set()
    for _tm, _tw, cols in decoded:
        for c in cols:
            if c[0] not in seen:
                seen.add(c[0])
                names.append(c[0])
    n = len(t_mono)
    out_cols: list[tuple[str, np.ndarray, np.ndarray]] = []
    for name in names:
        states = np.full(n, ST_ABSENT, dtype=np.uint8)
        values = np.full(n, np.nan)
        offset = 0
        for tm, _tw, cols in decoded:
            for cname, idx, vals, nulls in cols:
                if cname == name:
                    states[offset + idx] = np.where(nulls, ST_NULL, ST_VALUE)
                    values[offset + idx] = vals
                    break
            offset += len(tm)
        states, values = states[order], values[order]
        out_cols.append((name, states, values[states == ST_VALUE]))
    tm_sorted, tw_sorted = t_mono[order], t_wall[order]
    payload, n_values = encode_arrays(tm_sorted, tw_sorted, out_cols)
    return payload, n_values, float(tm_sorted[0]), float(tm_sorted[-1]), n
