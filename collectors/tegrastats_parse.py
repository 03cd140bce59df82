"""Parse one line of NVIDIA ``tegrastats`` output into a typed record.

tegrastats has no documented, versioned grammar: every JetPack (3 to 7) and every board prints a slightly
different line (see ``tests/fixtures/captures/tegrastats``). The parser therefore scans the line field by
field with small anchored patterns and keeps whatever it cannot place in ``unknown`` instead of guessing or
raising, so a benchmark sampling thread survives a board or release it has never seen.

Pure: no I/O besides logging, no process or file handling (the collector that runs ``tegrastats`` lives
elsewhere).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from edgeprof.collectors.base import numbered_names
from edgeprof.collectors.evidence import celsius_or_none

log = logging.getLogger(__name__)

__all__ = [
    "TEGRASTATS_METRIC_UNITS",
    "CpuCore",
    "EmcInfo",
    "GpuEntry",
    "IramInfo",
    "MetricUnit",
    "Rail",
    "RamInfo",
    "SwapInfo",
    "TegrastatsRecord",
    "parse_line",
    "parse_log",
    "record_to_json",
    "record_to_metrics",
]

# JetPack 7 prints some temperatures as ``name@a/bC``. NVIDIA does not say what ``b`` is, so it is kept
# under its own metric name (``temp.<name>_2nd_c``) and never taken for the zone's temperature.
SECOND_TEMP_SUFFIX = "_2nd"


@dataclass(frozen=True)
class RamInfo:
    """``RAM used/totalMB (lfb NxSMB)``: lfb, the largest free block, is N blocks of S MB."""

    used_mb: float
    total_mb: float
    lfb_blocks: int | None = None
    lfb_block_mb: float | None = None


@dataclass(frozen=True)
class SwapInfo:
    used_mb: float
    total_mb: float
    cached_mb: float | None = None


@dataclass(frozen=True)
class IramInfo:
    """``IRAM used/totalkB(lfb SkB)`` on TX1/Nano; kept in kB because the whole IRAM is 252 kB."""

    used_kb: float
    total_kb: float
    lfb_kb: float | None = None


@dataclass(frozen=True)
class CpuCore:
    """An online core; an offline (``off``) core is ``None`` in ``TegrastatsRecord.cpus``, never zeros."""

    load_pct: float | None
    freq_mhz: int | None


@dataclass(frozen=True)
class EmcInfo:
    load_pct: float | None
    freq_mhz: int | None


@dataclass(frozen=True)
class GpuEntry:
    """One ``GR3D*``/``GPC*`` field; ``freq_mhz`` has one value per GPC on boards that print ``@[f0,f1]``."""

    name: str
    load_pct: float | None
    freq_mhz: tuple[int, ...] = ()


@dataclass(frozen=True)
class Rail:
    """A power rail reading; values printed without a unit (older L4T) are milliwatts too. JetPack 7.2
    prints a third value (``cur/avg/x``) that NVIDIA's tool does not name: kept as ``third_mw``, never
    read as anything."""

    name: str
    cur_mw: int
    avg_mw: int
    third_mw: int | None = None


def _empty_str_map() -> Mapping[str, str]:
    return MappingProxyType({})


def _empty_temp_map() -> Mapping[str, float | None]:
    return MappingProxyType({})


@dataclass(frozen=True)
class TegrastatsRecord:
    """Everything one tegrastats line said. Absent fields are ``None`` or empty, never invented zeros.

    ``rails`` keeps every occurrence in line order because rail names repeat (``NC`` on AGX Orin).
    ``unknown`` holds the raw text of anything not recognised (also duplicates of single-valued fields).
    """

    timestamp: str | None = None
    ram: RamInfo | None = None
    swap: SwapInfo | None = None
    iram: IramInfo | None = None
    cpus: tuple[CpuCore | None, ...] = ()
    emc: EmcInfo | None = None
    gpu: tuple[GpuEntry, ...] = ()
    temps_c: Mapping[str, float | None] = field(default_factory=_empty_temp_map)
    # JetPack 7's ``name@a/bC``: ``b`` per zone, under the zone's name (its meaning is not documented)
    temps_second_c: Mapping[str, float | None] = field(default_factory=_empty_temp_map)
    rails: tuple[Rail, ...] = ()
    engines: Mapping[str, str] = field(default_factory=_empty_str_map)
    unknown: tuple[str, ...] = ()


# Digit runs are bounded so int() never meets Python's 4300-digit conversion limit on garbage input.
_INT = r"\d{1,12}"
_NUM = r"\d{1,12}(?:\.\d{1,12})?"
_END = r"(?=\s|\Z)"
_NAME = r"[A-Za-z][A-Za-z0-9_]{0,63}"
_UNIT = r"([kKMG]?B)"
# A frequency is a bare number or, where a unit has several clusters (GPCs on Orin/Thor), a list.
_FREQ = rf"(\[(?:{_INT}(?:,{_INT})*)?\]|{_INT})"

_TIMESTAMP_RE = re.compile(
    rf"(\d{{1,4}}[-/]\d{{1,2}}[-/]\d{{1,4}}[ T]\d{{1,2}}:\d{{2}}:\d{{2}}(?:\.\d{{1,9}})?){_END}"
)
_RAM_RE = re.compile(rf"RAM\s+({_NUM})/({_NUM}){_UNIT}(?:\s*\(lfb\s+({_INT})x({_NUM}){_UNIT}\))?{_END}")
_SWAP_RE = re.compile(rf"SWAP\s+({_NUM})/({_NUM}){_UNIT}(?:\s*\(cached\s+({_NUM}){_UNIT}\))?{_END}")
_IRAM_RE = re.compile(rf"IRAM\s+({_NUM})/({_NUM}){_UNIT}(?:\s*\(lfb\s+({_NUM}){_UNIT}\))?{_END}")
# Newer releases print per-core clocks; the lower-case L4T 28.1 form shares one clock: 'cpu [a%,b%]@f'.
_CPU_RE = re.compile(rf"(?:CPU|cpu)\s*\[([^\]\n]{{0,4000}})\](?:@({_INT}))?{_END}")
_CORE_RE = re.compile(rf"\s*(?:(off)|({_NUM})%(?:@({_INT}))?|@({_INT}))\s*")
_EMC_RE = re.compile(rf"(EMC(?:_FREQ)?)\s+(?:({_NUM})%(?:@{_FREQ})?|@{_FREQ}){_END}")
_GPU_RE = re.compile(rf"((?:GR3D|GPC)\d{{0,3}}(?:_FREQ)?)\s+(?:({_NUM})%(?:@{_FREQ})?|@{_FREQ}){_END}")
# Denver cores' 'MTS fg x% bg y%' (Xavier, TX2): no better home than a raw engine entry.
_MTS_RE = re.compile(rf"(MTS)\s+(fg\s+{_NUM}%\s+bg\s+{_NUM}%){_END}")
_RAIL_RE = re.compile(rf"({_NAME})\s+({_INT})(?:mW)?/({_INT})(?:mW)?(?:/({_INT})(?:mW)?)?{_END}")
# ``name@x.yC``, or JetPack 7's ``name@x.yC/u.vC``
_TEMP_RE = re.compile(rf"({_NAME})@(-?{_NUM})C(?:/(-?{_NUM})C)?{_END}")
# Excludes the names of structured fields so that an odd value for them is reported as unknown rather
# than silently filed as an engine.
_ENGINE_RE = re.compile(
    rf"(?!(?:GR3D|GPC)\d*(?:_FREQ)?\s|EMC(?:_FREQ)?\s|I?RAM\s|SWAP\s)"
    rf"([A-Z][A-Z0-9_]{{0,63}})\s+(off|{_NUM}%@{_INT}|{_NUM}%|@{_INT}|{_INT}){_END}"
)
_TOKEN_RE = re.compile(r"\S+")

_TO_MB = {"B": 1.0 / (1024 * 1024), "kB": 1.0 / 1024, "KB": 1.0 / 1024, "MB": 1.0, "GB": 1024.0}

# Bounded so a stream of garbage cannot grow memory or flood the log without end.
_MAX_LOGGED_KINDS = 256
_logged_kinds: set[str] = set()


def _log_unknown_once(kind: str, raw: str) -> None:
    if kind in _logged_kinds or len(_logged_kinds) > _MAX_LOGGED_KINDS:
        return
    _logged_kinds.add(kind)
    if len(_logged_kinds) > _MAX_LOGGED_KINDS:
        log.warning("tegrastats: too many distinct unrecognised token kinds; no longer logging new ones")
        return
    log.warning("tegrastats: unrecognised token kind %r, e.g. %r (kept in record.unknown)", kind, raw[:80])


def _token_kind(raw: str) -> str:
    """Group unknown tokens so that one new field logs once, not once per value it takes."""
    name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", raw)
    if name:
        return name.group(0)[:32]
    return re.sub(r"\d+", "9", raw)[:32]


def _mb(value: str, unit: str) -> float:
    return float(value) * _TO_MB[unit]


def _freqs(text: str | None) -> tuple[int, ...]:
    if text is None:
        return ()
    return tuple(int(part) for part in text.strip("[]").split(",") if part)


def _parse_cores(body: str, shared_freq: str | None) -> tuple[CpuCore | None, ...] | None:
    cores: list[CpuCore | None] = []
    for entry in body.split(","):
        m = _CORE_RE.fullmatch(entry)
        if m is None:
            return None
        off, load, own_freq, bare_freq = m.groups()
        if off:
            cores.append(None)
            continue
        freq = own_freq or bare_freq or shared_freq
        cores.append(CpuCore(float(load) if load is not None else None, int(freq) if freq else None))
    return tuple(cores)


class _Builder:
    """Mutable accumulator for one line; frozen into a ``TegrastatsRecord`` at the end."""

    def __init__(self) -> None:
        self.timestamp: str | None = None
        self.ram: RamInfo | None = None
        self.swap: SwapInfo | None = None
        self.iram: IramInfo | None = None
        self.cpus: tuple[CpuCore | None, ...] | None = None
        self.emc: EmcInfo | None = None
        self.gpu: list[GpuEntry] = []
        self.temps: dict[str, float | None] = {}
        self.temps_second: dict[str, float | None] = {}
        self.rails: list[Rail] = []
        self.engines: dict[str, str] = {}
        self.unknown: list[str] = []

    def reject(self, kind: str, raw: str) -> None:
        self.unknown.append(raw)
        _log_unknown_once(kind, raw)

    def build(self) -> TegrastatsRecord:
        return TegrastatsRecord(
            timestamp=self.timestamp,
            ram=self.ram,
            swap=self.swap,
            iram=self.iram,
            cpus=self.cpus or (),
            emc=self.emc,
            gpu=tuple(self.gpu),
            temps_c=MappingProxyType(self.temps),
            temps_second_c=MappingProxyType(self.temps_second),
            rails=tuple(self.rails),
            engines=MappingProxyType(self.engines),
            unknown=tuple(self.unknown),
        )


def _take_ram(b: _Builder, m: re.Match[str]) -> None:
    if b.ram is not None:
        b.reject("duplicate:RAM", m.group(0))
        return
    used, total, unit, blocks, size, size_unit = m.groups()
    b.ram = RamInfo(
        _mb(used, unit),
        _mb(total, unit),
        int(blocks) if blocks is not None else None,
        _mb(size, size_unit) if size is not None else None,
    )


def _take_swap(b: _Builder, m: re.Match[str]) -> None:
    if b.swap is not None:
        b.reject("duplicate:SWAP", m.group(0))
        return
    used, total, unit, cached, cached_unit = m.groups()
    cached_mb = _mb(cached, cached_unit) if cached is not None else None
    b.swap = SwapInfo(_mb(used, unit), _mb(total, unit), cached_mb)


def _take_iram(b: _Builder, m: re.Match[str]) -> None:
    if b.iram is not None:
        b.reject("duplicate:IRAM", m.group(0))
        return
    used, total, unit, lfb, lfb_unit = m.groups()
    lfb_kb = _mb(lfb, lfb_unit) * 1024 if lfb is not None else None
    b.iram = IramInfo(_mb(used, unit) * 1024, _mb(total, unit) * 1024, lfb_kb)


def _take_cpu(b: _Builder, m: re.Match[str]) -> None:
    cores = _parse_cores(m.group(1), m.group(2))
    if cores is None:
        b.reject("CPU:unparsed", m.group(0))
    elif b.cpus is not None:
        b.reject("duplicate:CPU", m.group(0))
    else:
        b.cpus = cores


def _take_emc(b: _Builder, m: re.Match[str]) -> None:
    _, load, freq, bare_freq = m.groups()
    freqs = _freqs(freq or bare_freq)
    if b.emc is not None or len(freqs) > 1:
        b.reject("EMC:unexpected", m.group(0))
    else:
        b.emc = EmcInfo(float(load) if load is not None else None, freqs[0] if freqs else None)


def _take_gpu(b: _Builder, m: re.Match[str]) -> None:
    name, load, freq, bare_freq = m.groups()
    load_pct = float(load) if load is not None else None
    b.gpu.append(GpuEntry(name, load_pct, _freqs(freq or bare_freq)))


def _take_engine(b: _Builder, m: re.Match[str]) -> None:
    name, value = m.groups()
    if name in b.engines:
        b.reject(f"duplicate:{name}", m.group(0))
    else:
        b.engines[name] = value


def _take_rail(b: _Builder, m: re.Match[str]) -> None:
    name, cur, avg, third = m.groups()
    b.rails.append(Rail(name, int(cur), int(avg), int(third) if third is not None else None))


def _take_temp(b: _Builder, m: re.Match[str]) -> None:
    name, value, second = m.groups()
    if name in b.temps:
        b.reject(f"duplicate:{name}@", m.group(0))
        return
    celsius = float(value)
    b.temps[name] = celsius_or_none(celsius)
    if second is not None:
        other = float(second)
        b.temps_second[name] = celsius_or_none(other)


# Each field's pattern and what to do with a match, tried in this order at every token.
_FIELDS: tuple[tuple[re.Pattern[str], Callable[[_Builder, re.Match[str]], None]], ...] = (
    (_RAM_RE, _take_ram),
    (_SWAP_RE, _take_swap),
    (_IRAM_RE, _take_iram),
    (_CPU_RE, _take_cpu),
    (_EMC_RE, _take_emc),
    (_GPU_RE, _take_gpu),
    (_MTS_RE, _take_engine),
    (_ENGINE_RE, _take_engine),
    (_RAIL_RE, _take_rail),
    (_TEMP_RE, _take_temp),
)


def _take_field(b: _Builder, line: str, pos: int) -> int | None:
    """Consume one recognised field at ``pos``; return the position after it, or None if none matched."""
    for pattern, take in _FIELDS:
        if (m := pattern.match(line, pos)) is not None:
            take(b, m)
            return m.end()
    return None


def _parse(line: str) -> TegrastatsRecord:
    b = _Builder()
    text = line.strip()
    pos = 0
    if (m := _TIMESTAMP_RE.match(text)) is not None:
        b.timestamp = m.group(1)
        pos = m.end()
    while (token := _TOKEN_RE.search(text, pos)) is not None:
        end = _take_field(b, text, token.start())
        if end is None:
            b.reject(_token_kind(token.group(0)), token.group(0))
            end = token.end()
        pos = end
    return b.build()


def parse_line(line: str) -> TegrastatsRecord:
    """Parse one tegrastats line. Never raises: what is not understood is kept in ``unknown``."""
    try:
        return _parse(line)
    except Exception:  # a sampler thread must outlive any parser bug
        log.exception("tegrastats: parser failed on %r", line)
        return TegrastatsRecord(unknown=(line if isinstance(line, str) else repr(line),))


def parse_log(lines: Iterable[str]) -> Iterator[TegrastatsRecord]:
    """Parse a capture or log, skipping blank lines and ``#`` comments."""
    for line in lines:
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            yield parse_line(stripped)


def record_to_json(rec: TegrastatsRecord) -> dict[str, Any]:
    """The record as plain JSON-able data, with ``None`` for everything absent (IRAM is not exported)."""
    ram = rec.ram
    swap = rec.swap
    emc = rec.emc
    return {
        "timestamp": rec.timestamp,
        "ram": None
        if ram is None
        else {
            "used_mb": ram.used_mb,
            "total_mb": ram.total_mb,
            "lfb_blocks": ram.lfb_blocks,
            "lfb_block_mb": ram.lfb_block_mb,
        },
        "swap": None
        if swap is None
        else {"used_mb": swap.used_mb, "total_mb": swap.total_mb, "cached_mb": swap.cached_mb},
        "cpus": [None if c is None else {"load_pct": c.load_pct, "freq_mhz": c.freq_mhz} for c in rec.cpus],
        "emc": None if emc is None else {"load_pct": emc.load_pct, "freq_mhz": emc.freq_mhz},
        "gpu": [{"name": g.name, "load_pct": g.load_pct, "freq_mhz": list(g.freq_mhz)} for g in rec.gpu],
        "temps_c": dict(rec.temps_c),
        "temps_second_c": dict(rec.temps_second_c),
        # ``third`` only where the line has one (JetPack 7.2), so older lines keep their exact shape
        "rails_mw": [
            {"name": r.name, "cur": r.cur_mw, "avg": r.avg_mw}
            | ({"third": r.third_mw} if r.third_mw is not None else {})
            for r in rec.rails
        ],
        "engines": dict(rec.engines),
        "unknown": list(rec.unknown),
    }


class MetricUnit(NamedTuple):
    """A family of metric names: those starting with ``prefix`` and ending with ``suffix``."""

    prefix: str
    suffix: str
    unit: str
    meaning: str


TEGRASTATS_METRIC_UNITS: tuple[MetricUnit, ...] = (
    MetricUnit("mem.", "_mb", "MB", "RAM/swap in use, RAM total; lfb = largest free block (blocks x size)"),
    MetricUnit("cpu", ".util_pct", "pct", "cpuN: one core (None when offline); cpu: mean over online cores"),
    MetricUnit("cpu", ".freq_mhz", "MHz", "cpuN: one core's clock (None when offline)"),
    MetricUnit("emc.", "_pct", "pct", "memory controller load"),
    MetricUnit("emc.", "_mhz", "MHz", "memory controller clock"),
    MetricUnit("gpu.", "_pct", "pct", "first GR3D entry's load"),
    MetricUnit("gpu.", "_mhz", "MHz", "first GR3D entry's first GPC clock"),
    MetricUnit("temp.", SECOND_TEMP_SUFFIX + "_c", "C", "JetPack 7 second value of a zone (undocumented)"),
    MetricUnit("temp.", "_c", "C", "one thermal zone, name lower-cased; None when the sensor is off"),
    MetricUnit("power.", "_mw", "mW", "one rail's current draw, name lower-cased; repeats get _2, _3, ..."),
)


def record_to_metrics(rec: TegrastatsRecord) -> dict[str, float | None]:
    """Flatten to ``<domain>[.<instance>].<name>_<unit>`` metrics (units: ``TEGRASTATS_METRIC_UNITS``).

    The fixed names are always present (None when the line lacks them) so every sample has the same
    columns on a given board; per-core, per-sensor and per-rail names follow what the line contains.
    """
    ram = rec.ram
    lfb_mb = None
    if ram is not None and ram.lfb_blocks is not None and ram.lfb_block_mb is not None:
        lfb_mb = ram.lfb_blocks * ram.lfb_block_mb
    out: dict[str, float | None] = {
        "mem.ram_used_mb": ram.used_mb if ram else None,
        "mem.ram_total_mb": ram.total_mb if ram else None,
        "mem.swap_used_mb": rec.swap.used_mb if rec.swap else None,
        "mem.lfb_mb": lfb_mb,
    }
    loads: list[float] = []
    for i, core in enumerate(rec.cpus):
        out[f"cpu{i}.util_pct"] = core.load_pct if core is not None else None
        out[f"cpu{i}.freq_mhz"] = core.freq_mhz if core is not None else None
        if core is not None and core.load_pct is not None:
            loads.append(core.load_pct)
    out["cpu.util_pct"] = sum(loads) / len(loads) if loads else None
    out["emc.util_pct"] = rec.emc.load_pct if rec.emc else None
    out["emc.freq_mhz"] = rec.emc.freq_mhz if rec.emc else None
    gpu = rec.gpu[0] if rec.gpu else None
    out["gpu.util_pct"] = gpu.load_pct if gpu else None
    out["gpu.freq_mhz"] = gpu.freq_mhz[0] if gpu and gpu.freq_mhz else None
    temp_keys = numbered_names([name.lower() for name in rec.temps_c])
    for key, (name, celsius) in zip(temp_keys, rec.temps_c.items(), strict=True):
        out[f"temp.{key}_c"] = celsius
        if name in rec.temps_second_c:
            out[f"temp.{key}{SECOND_TEMP_SUFFIX}_c"] = rec.temps_second_c[name]
    for key, rail in zip(numbered_names([r.name.lower() for r in rec.rails]), rec.rails, strict=True):
        out[f"power.{key}_mw"] = rail.cur_mw
    return out
