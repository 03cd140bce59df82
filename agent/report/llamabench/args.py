"""llama-bench's command line, read as llama-bench reads it: the same flags and long names, comma lists,
ranges ``first-last``, ``first-last+step`` and ``first-last*factor``, a flag given twice adds its values,
a flag not given takes llama-bench's default.

Only the flags that edgeprof can honour are accepted; any other is refused, never silently ignored, since a
number measured under another setting than the one asked for would be wrong without saying so. ``-embd``
is accepted at llama-bench's default (0) only and refused, with the reason, at 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

OUTPUT_FORMATS = ("md", "csv", "json", "jsonl", "sql")
# llama-bench's -r default; its -p/-n defaults are 512 and 128 (cmd_params_defaults)
DEFAULT_REPS = 5
# Ceilings for one command line: a range like 1-1000000 must be refused, never expanded
MAX_VALUES_PER_FLAG = 256
MAX_REPS = 1000
MAX_TOKENS = 1_048_576

_RANGE = re.compile(r"(-?\d+)(?:-(\d+)(?:([+*])(\d+))?)?")
# llama.cpp's common_arg_utils::is_truthy / is_falsey / is_autoy
_FA_WORDS = {
    "on": "on", "enabled": "on", "true": "on", "1": "on",
    "off": "off", "disabled": "off", "false": "off", "0": "off",
    "auto": "auto", "-1": "auto",
}  # fmt: skip


class BenchArgsError(ValueError):
    """A flag edgeprof bench cannot take, or a value it cannot read; one line for the user."""


@dataclass(frozen=True)
class BenchArgs:
    """What a llama-bench command line asks for, defaults filled in as llama-bench fills them."""

    models: tuple[str, ...]
    n_prompt: tuple[int, ...] = (512,)
    n_gen: tuple[int, ...] = (128,)
    n_pg: tuple[tuple[int, int], ...] = ()
    n_depth: tuple[int, ...] = (0,)
    n_batch: tuple[int, ...] = (2048,)
    n_ubatch: tuple[int, ...] = (512,)
    type_k: tuple[str, ...] = ("f16",)
    type_v: tuple[str, ...] = ("f16",)
    n_threads: tuple[int, ...] = ()  # empty: the physical cores, llama-bench's default
    n_gpu_layers: tuple[int, ...] = (-1,)
    flash_attn: tuple[str, ...] = ("auto",)
    no_kv_offload: tuple[bool, ...] = (False,)
    no_op_offload: tuple[bool, ...] = (False,)
    poll: tuple[int, ...] = (50,)
    cpu_mask: tuple[str, ...] = ("0x0",)
    cpu_strict: tuple[bool, ...] = (False,)
    prio: int = 0
    reps: int = DEFAULT_REPS
    output: str = "md"
    output_err: str | None = None  # -oe: a second copy of the output, on stderr
    delay_s: int = 0  # --delay: seconds between tests
    warmup: bool = True  # --no-warmup: no warm-up run before the timed ones
    progress: bool = False
    verbose: bool = False
    argv: tuple[str, ...] = field(default=(), compare=False)

    def tests(self) -> list[tuple[int, int]]:
        """(n_prompt, n_gen) of each test, in llama-bench's order: pp, then tg, then pp+tg; a 0 is skipped."""
        out = [(p, 0) for p in self.n_prompt if p > 0]
        out += [(0, n) for n in self.n_gen if n > 0]
        out += [pg for pg in self.n_pg if pg != (0, 0)]
        return out


def parse_int_range(text: str, *, allow_negative: bool = False) -> list[int]:
    """llama-bench's ``first[-last[(+|*)step]]``, comma-separated: "128", "1,2,4", "1-4", "64-512*2"."""
    out: list[int] = []
    for part in text.split(","):
        m = _RANGE.fullmatch(part.strip())
        if m is None or (not allow_negative and part.strip().startswith("-")):
            raise BenchArgsError(f"{text!r} is not a list of integers or ranges (first-last+step)")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        op, step = m.group(3) or "+", int(m.group(4)) if m.group(4) is not None else 1
        value = first
        while value <= last:
            out.append(value)
            if len(out) > MAX_VALUES_PER_FLAG:
                raise BenchArgsError(f"{text!r} gives more than {MAX_VALUES_PER_FLAG} values")
            nxt = value + step if op == "+" else value * step
            if nxt <= value:
                raise BenchArgsError(f"{text!r}: the range never reaches {last} (step {op}{step})")
            value = nxt
    return out


def _ints(minimum: int) -> Callable[[str, str], list[Any]]:
    def read(flag: str, text: str) -> list[Any]:
        values = parse_int_range(text, allow_negative=minimum < 0)
        for v in values:
            if v < minimum or v > MAX_TOKENS:
                raise BenchArgsError(f"{flag} {text}: {v} is out of range ({minimum}..{MAX_TOKENS})")
        return values

    return read


def _strings(flag: str, text: str) -> list[Any]:
    values = [v for v in text.split(",") if v]
    if not values:
        raise BenchArgsError(f"{flag}: empty value")
    return values


def _kv_types(flag: str, text: str) -> list[Any]:
    from edgeprof.runners import KV_CACHE_TYPES

    values = [v.lower() for v in _strings(flag, text)]
    for v in values:
        if v not in KV_CACHE_TYPES:
            raise BenchArgsError(f"{flag}: unknown cache type {v!r} (one of {', '.join(KV_CACHE_TYPES)})")
    return values


def _flash_attn(flag: str, text: str) -> list[Any]:
    values = []
    for v in _strings(flag, text):
        if v.lower() not in _FA_WORDS:
            raise BenchArgsError(f"{flag}: {v!r} is not on, off or auto")
        values.append(_FA_WORDS[v.lower()])
    return values


def _bools(flag: str, text: str) -> list[Any]:
    values = []
    for v in _strings(flag, text):
        if v not in ("0", "1"):
            raise BenchArgsError(f"{flag}: {v!r} is not 0 or 1")
        values.append(v == "1")
    return values


def _cpu_masks(flag: str, text: str) -> list[Any]:
    from edgeprof.plan.matrix import cpu_mask_ok

    values = _strings(flag, text)
    for v in values:
        if not cpu_mask_ok(v):
            raise BenchArgsError(f"{flag} {v}: a CPU mask is hex, e.g. 0x3 for CPUs 0 and 1")
    return values


def _only_default(default: str, why: str) -> Callable[[str, str], list[Any]]:
    """A flag edgeprof runs at llama-bench's default only: that value is accepted, any other refused."""

    def read(flag: str, text: str) -> list[Any]:
        for v in _strings(flag, text):
            if v.lower() != default:
                raise BenchArgsError(f"{flag} {v}: {why}; only {default} (llama-bench's default)")
        return []

    return read


def _pg(flag: str, text: str) -> list[Any]:
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise BenchArgsError(f"{flag} {text}: expected <pp,tg>, e.g. -pg 512,128")
    return [(int(parts[0]), int(parts[1]))]


# flag names -> (BenchArgs field, reader); llama-bench's short and long names
_LIST_FLAGS: dict[str, tuple[str, Callable[[str, str], list[Any]]]] = {
    "-m": ("models", _strings), "--model": ("models", _strings),
    "-p": ("n_prompt", _ints(0)), "--n-prompt": ("n_prompt", _ints(0)),
    "-n": ("n_gen", _ints(0)), "--n-gen": ("n_gen", _ints(0)),
    "-pg": ("n_pg", _pg),
    "-d": ("n_depth", _ints(0)), "--n-depth": ("n_depth", _ints(0)),
    "-b": ("n_batch", _ints(1)), "--batch-size": ("n_batch", _ints(1)),
    "-ub": ("n_ubatch", _ints(1)), "--ubatch-size": ("n_ubatch", _ints(1)),
    "-ctk": ("type_k", _kv_types), "--cache-type-k": ("type_k", _kv_types),
    "-ctv": ("type_v", _kv_types), "--cache-type-v": ("type_v", _kv_types),
    "-t": ("n_threads", _ints(1)), "--threads": ("n_threads", _ints(1)),
    "-ngl": ("n_gpu_layers", _ints(-1)), "--n-gpu-layers": ("n_gpu_layers", _ints(-1)),
    "-fa": ("flash_attn", _flash_attn), "--flash-attn": ("flash_attn", _flash_attn),
    "-nkvo": ("no_kv_offload", _bools), "--no-kv-offload": ("no_kv_offload", _bools),
    "-nopo": ("no_op_offload", _bools), "--no-op-offload": ("no_op_offload", _bools),
    "--poll": ("poll", _ints(0)),
    "-C": ("cpu_mask", _cpu_masks), "--cpu-mask": ("cpu_mask", _cpu_masks),
    "--cpu-strict": ("cpu_strict", _bools),
    "-embd": ("embeddings", _only_default("0", "edgeprof measures generation, not embeddings")),
    "--embeddings": ("embeddings", _only_default("0", "edgeprof measures generation, not embeddings")),
}  # fmt: skip
_SCALAR_FLAGS = {
    "-r": "reps", "--repetitions": "reps", "-o": "output", "--output": "output",
    "-oe": "output_err", "--output-err": "output_err", "--delay": "delay_s", "--prio": "prio",
}  # fmt: skip
# flags without a value
_SWITCHES = {"--no-warmup": "no_warmup", "--progress": "progress", "-v": "verbose", "--verbose": "verbose"}
MAX_DELAY_S = 3600
MAX_POLL = 100


def parse_bench_args(argv: Sequence[str]) -> BenchArgs:
    """The llama-bench flags of ``argv``; raises BenchArgsError naming the first flag it cannot take."""
    lists: dict[str, list[Any]] = {}
    scalars: dict[str, str] = {}
    i = 0
    while i < len(argv):
        flag = argv[i]
        # llama-bench spells long flags with '-' or '_' (--n_prompt = --n-prompt)
        if flag.startswith("--"):
            flag = "--" + flag[2:].replace("_", "-")
        if flag in _SWITCHES:
            scalars[_SWITCHES[flag]] = "1"
            i += 1
            continue
        if flag not in _LIST_FLAGS and flag not in _SCALAR_FLAGS:
            raise BenchArgsError(f"unknown or unsupported llama-bench flag {argv[i]!r}")
        if i + 1 >= len(argv):
            raise BenchArgsError(f"{argv[i]} needs a value")
        value = argv[i + 1]
        if flag in _LIST_FLAGS:
            name, read = _LIST_FLAGS[flag]
            lists.setdefault(name, []).extend(read(argv[i], value))
        else:
            scalars[_SCALAR_FLAGS[flag]] = value
        i += 2
    return _bench_args(lists, scalars, tuple(argv))


def _whole(scalars: dict[str, str], name: str, flag: str, default: int, lo: int, hi: int) -> int:
    text = scalars.get(name, str(default))
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise BenchArgsError(f"{flag} {text}: expected a whole number {lo}..{hi}")
    return int(text)


def _output(scalars: dict[str, str], name: str, flag: str, default: str | None) -> str | None:
    output = scalars.get(name, default)
    if output is not None and output not in OUTPUT_FORMATS:
        raise BenchArgsError(f"{flag} {output}: expected one of {', '.join(OUTPUT_FORMATS)}")
    return output


def _check_lists(lists: dict[str, list[Any]]) -> None:
    from edgeprof.plan.bounds import logical_cpus

    for name, values in lists.items():
        if len(values) > MAX_VALUES_PER_FLAG:
            raise BenchArgsError(f"more than {MAX_VALUES_PER_FLAG} values for {name}")
        if name != "models" and len(set(values)) != len(values):
            raise BenchArgsError(f"duplicate values for {name}: {values}")
    # the same ceiling as a plan's threads axis (plan/bounds.py)
    cpus = logical_cpus()
    for n in lists.get("n_threads", []):
        if n > cpus:
            raise BenchArgsError(f"-t {n}: this machine has {cpus} logical CPUs; more only oversubscribes")
    for n in lists.get("poll", []):
        if n > MAX_POLL:
            raise BenchArgsError(f"--poll {n}: expected 0..{MAX_POLL}")


def _bench_args(lists: dict[str, list[Any]], scalars: dict[str, str], argv: tuple[str, ...]) -> BenchArgs:
    if not lists.get("models"):
        raise BenchArgsError("-m MODEL is required (a GGUF file; comma-separated for several)")
    output = _output(scalars, "output", "-o", "md")
    output_err = _output(scalars, "output_err", "-oe", None)
    reps = _whole(scalars, "reps", "-r", DEFAULT_REPS, 1, MAX_REPS)
    delay_s = _whole(scalars, "delay_s", "--delay", 0, 0, MAX_DELAY_S)
    prio_text = scalars.get("prio", "0")
    if prio_text not in ("-1", "0", "1", "2", "3"):
        raise BenchArgsError(f"--prio {prio_text}: expected -1..3 (low, normal, medium, high, realtime)")
    lists.pop("embeddings", None)  # llama-bench's default, which edgeprof runs
    _check_lists(lists)
    # negative -ngl means every layer to llama.cpp: one value, as llama-bench's default prints it
    if "n_gpu_layers" in lists:
        lists["n_gpu_layers"] = list(dict.fromkeys(-1 if v < 0 else v for v in lists["n_gpu_layers"]))
    given = {name: tuple(values) for name, values in lists.items()}
    args = BenchArgs(
        **given,
        reps=reps,
        output=output or "md",
        output_err=output_err,
        delay_s=delay_s,
        prio=int(prio_text),
        warmup="no_warmup" not in scalars,
        progress="progress" in scalars,
        verbose="verbose" in scalars,
        argv=argv,
    )
    if not args.tests():
        raise BenchArgsError("no test to run: every -p, -n and -pg value is 0")
    return args
