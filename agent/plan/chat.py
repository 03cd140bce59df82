"""Chat workloads: a model's own chat template (GGUF ``tokenizer.chat_template``), rendered as llama.cpp does.

llama.cpp's chat handling (common/chat.cpp, and llama-cpp-python's Jinja2 formatter) renders the Jinja
template with ``messages``, ``add_generation_prompt = true`` and the model's ``bos_token``/``eos_token``
strings, drops a leading BOS text when the tokenizer adds BOS itself (otherwise the prompt would start with
two BOS tokens), and tokenizes the result with special tokens parsed. We render in the agent, before the
sweep, so that a chat workload on a model without a template is refused before anything runs and the
rendered prompt (hash, size) is part of the config.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from edgeprof.gguf import read_chat_fields


class ChatTemplateError(ValueError):
    """The template cannot be rendered; the message says why in one line."""


@dataclass(frozen=True)
class ChatMeta:
    """What a GGUF says about chatting with it."""

    template: str | None
    bos_token: str
    eos_token: str
    add_bos: bool


def read_chat_meta(path: str | Path) -> ChatMeta:
    """The chat template and BOS/EOS token texts of a GGUF (template None when it has none).

    Read with edgeprof.gguf.bounded, not ``gguf.GGUFReader``: the reader would build an object per
    vocabulary entry (seconds and hundreds of MB on a 262k vocabulary) to look up two of them.
    """
    got = read_chat_fields(path)
    template = got.chat_template
    return ChatMeta(
        template=template if template is not None and template.strip() else None,
        bos_token=got.bos_text or "",
        eos_token=got.eos_text or "",
        # llama.cpp's default for SPM vocabularies when the key is missing is to add BOS; BPE models that need
        # it say so in the key. Missing key = false here errs toward keeping a BOS the template wrote.
        add_bos=bool(got.add_bos),
    )


def _raise_exception(message: str) -> None:
    # templates call raise_exception("...") to refuse a conversation shape (e.g. no system role)
    raise ChatTemplateError(f"the chat template refused these messages: {message}")


def _tojson(value: Any, indent: int | None = None, **_kwargs: Any) -> str:
    # Transformers renders tojson without ASCII escapes; templates that embed tool schemas depend on it
    return json.dumps(value, ensure_ascii=False, indent=indent)


# A template is unattended input too (a dropped plan, a downloaded GGUF): nested 100 000-step loops once
# hung validation. Rendering is bounded in wall time (checked on every line the template's code runs, and
# in every call it makes), in output size, and in what one ``*`` or ``**`` may build before it is built.
MAX_RENDER_S = 5.0
MAX_PROMPT_CHARS = 4 << 20  # far above any context edgeprof measures (~4 bytes a token)
# One big-integer operation cannot be interrupted by the deadline (``((99 ** 1024) ** 1024) ** 1024`` ran for
# minutes at 100 % CPU): an integer result is refused past this many bits before it is computed.
MAX_INT_BITS = 1 << 16
# The render runs in a child process whose address space may grow this much beyond what its imports took,
# and whose CPU time is capped at the render's bound: whatever a template finds that no check here foresaw,
# it ends there, not in the agent.
RENDER_MEMORY_BYTES = 512 << 20


class _RenderBudget:
    """The deadline and the output ceiling of one render; ``check`` raises ChatTemplateError past them."""

    def __init__(self, max_s: float) -> None:
        self.max_s = max_s
        self.deadline = time.monotonic() + max_s

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise ChatTemplateError(f"the chat template took more than {self.max_s:g} s to render")

    def trace(self, _frame: FrameType, _event: str, _arg: Any) -> Any:
        # A line tracer on the rendering thread: every loop turn of the compiled template passes here, so a
        # loop with an empty body is stopped too (an exception raised here ends the render).
        self.check()
        return self.trace


def _size_of_product(left: Any, right: Any) -> int | None:
    """How many items ``left * right`` makes when one side is a sequence and the other an int."""
    for seq, times in ((left, right), (right, left)):
        if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
            return len(seq) * max(times, 0)
    return None


# A width or precision of 8 digits (10 M and up) in a %-conversion or a {...:spec} field asks for a text past
# MAX_PROMPT_CHARS; an 8-digit number elsewhere in the format string is only text.
_LONG_NUMBER = re.compile(r"%[#0 +\-]*\d*\.?\d{8,}|\{[^{}]*:[^{}]*\d{8,}[^{}]*\}")


def _refuse_wide(args: Sequence[Any], kwargs: Mapping[str, Any], text: Any = None) -> None:
    """Refuse a call that asks one C-level string method or filter for more than MAX_PROMPT_CHARS
    (``'x'.center(10**9)``, ``|indent(10**9)``, ``'%*s' % (10**9, x)``, ``'{:>999999999}'.format(x)``):
    it would allocate the whole text in one step, before the output ceiling or the deadline can act."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_PROMPT_CHARS:
            raise ChatTemplateError(f"the chat template asks for a text of {value} characters")
    if isinstance(text, str) and _LONG_NUMBER.search(text):
        raise ChatTemplateError("the chat template formats with a width of ten million characters or more")


def _refuse_large_result(name: str, value: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Refuse ``replace``, ``indent`` and ``join`` (filter or str method) whose result would pass
    MAX_PROMPT_CHARS, computed from the arguments before the call builds it: each is one C-level step."""
    size = _result_size(name, value, args, kwargs)
    if size is not None and size > MAX_PROMPT_CHARS:
        raise ChatTemplateError(f"the chat template builds a text of {size} characters with {name}")


def _result_size(name: str, value: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> int | None:
    name = name.removeprefix("do_")
    if name == "replace" and isinstance(value, str) and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        limit = args[2] if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0 else None
        n = value.count(old) if old else len(value) + 1
        n = min(n, limit) if limit is not None else n
        return len(value) + n * (len(new) - len(old))
    if name == "indent" and isinstance(value, str):
        width = args[0] if args else kwargs.get("width", 4)
        per_line = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        return len(value) + per_line * (value.count("\n") + 1)
    if name in ("join", "str.join"):  # the filter joins its value; the str method joins its argument
        if name == "str.join":
            items, sep = (args[0] if args else ()), value
        else:
            items, sep = value, (args[0] if args else "")
        if isinstance(items, (str, list, tuple)) and isinstance(sep, str):
            pieces = sum(len(x) if isinstance(x, str) else 24 for x in items)
            return pieces + len(sep) * max(len(items) - 1, 0)
    return None


def _bounded_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)  # keeps jinja's pass_context / pass_environment marks
    def bounded(*args: Any, **kwargs: Any) -> Any:
        # the filtered value comes after the context or environment a marked filter is passed first
        values = args[1:] if getattr(fn, "jinja_pass_arg", None) is not None else args
        value, rest = (values[0], values[1:]) if values else (None, ())
        _refuse_wide(rest, kwargs, value if fn.__name__ == "do_format" else None)
        _refuse_large_result(fn.__name__, value, rest, kwargs)
        return fn(*args, **kwargs)

    return bounded


def _refuse_big_int(operator: str, left: Any, right: Any) -> None:
    """An integer ``*`` or ``**`` whose result would pass MAX_INT_BITS, refused before it is computed."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right)):
        return
    if operator == "**" and right > 0:
        bits = max(left.bit_length() - 1, 0) * right
    elif operator == "*":
        bits = left.bit_length() + right.bit_length()
    else:
        return
    if bits > MAX_INT_BITS:
        raise ChatTemplateError("the chat template computes a number too large to render")


def _sandbox(budget: _RenderBudget) -> Any:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "%"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            budget.check()
            if operator == "%" and isinstance(left, str):
                _refuse_wide(right if isinstance(right, tuple) else (right,), {}, left)
            if operator == "*" and (_size_of_product(left, right) or 0) > MAX_PROMPT_CHARS:
                raise ChatTemplateError("the chat template builds a text or list too large to render")
            if operator == "**" and isinstance(right, int) and abs(right) > 1024:
                raise ChatTemplateError("the chat template raises a number to too large a power")
            _refuse_big_int(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            budget.check()
            # the sandbox hands str.format over wrapped; the string it formats is the wrapped method's owner
            method = getattr(__obj, "__wrapped__", __obj)
            owner = getattr(method, "__self__", None)
            fmt = owner if getattr(method, "__name__", "") in ("format", "format_map") else None
            _refuse_wide(args, kwargs, fmt)
            if isinstance(owner, str):
                name = getattr(method, "__name__", "")
                _refuse_large_result("str.join" if name == "join" else name, owner, args, kwargs)
            return super().call(__context, __obj, *args, **kwargs)

    env = BoundedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[jinja2.ext.loopcontrols],
        undefined=jinja2.Undefined,
    )
    env.filters.update({name: _bounded_filter(fn) for name, fn in env.filters.items()})
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def render_chat(
    template: str,
    messages: Sequence[tuple[str, str]],
    *,
    bos_token: str,
    eos_token: str,
    add_bos: bool,
    add_generation_prompt: bool = True,
    max_s: float = MAX_RENDER_S,
) -> str:
    """The prompt text a chat becomes, ready to tokenize with ``parse_special = true``; rendered in a child
    process with its memory and CPU time limited (``render_child``), so that nothing a template does can
    outlive its bound or take the caller's memory."""
    job = {
        "template": template,
        "messages": [list(m) for m in messages],
        "bos_token": bos_token,
        "eos_token": eos_token,
        "add_bos": add_bos,
        "add_generation_prompt": add_generation_prompt,
        "max_s": max_s,
    }
    try:
        done = subprocess.run(
            [sys.executable, "-c", "from edgeprof.plan.chat import render_child; render_child()"],
            input=json.dumps(job).encode(),
            capture_output=True,
            timeout=max_s + 60,  # the child's CPU limit ends it first; this only covers a stalled start
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ChatTemplateError(f"the chat template took more than {max_s:g} s to render") from None
    try:
        reply = json.loads(done.stdout)
    except ValueError:
        reply = None
    if isinstance(reply, dict) and isinstance(reply.get("text"), str):
        return str(reply["text"])
    if isinstance(reply, dict) and isinstance(reply.get("error"), str):
        raise ChatTemplateError(reply["error"])
    if done.returncode in (-24, -9):  # SIGXCPU, then SIGKILL at the hard limit
        raise ChatTemplateError(f"the chat template took more than {max_s:g} s of CPU to render")
    tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
    raise ChatTemplateError(f"the chat template failed to render ({tail[0][:200]})")


def render_child() -> None:
    """The child of ``render_chat``: limits itself (address space grown by at most RENDER_MEMORY_BYTES past
    its imports, CPU time the render's bound plus a second), renders, and answers one JSON line."""
    import resource

    import jinja2.runtime

    job = json.loads(sys.stdin.buffer.read())
    max_s = float(job["max_s"])
    with open("/proc/self/statm") as fh:  # pages of address space the imports took
        size = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (size + RENDER_MEMORY_BYTES, size + RENDER_MEMORY_BYTES))
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(used.ru_utime + used.ru_stime + max_s) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
    jinja2.runtime.str_join = _bounded_join  # the ``~`` operator: a text refused before it is joined
    try:
        text = render_in_process(
            job["template"],
            [tuple(m) for m in job["messages"]],
            bos_token=job["bos_token"],
            eos_token=job["eos_token"],
            add_bos=job["add_bos"],
            add_generation_prompt=job["add_generation_prompt"],
            max_s=max_s,
        )
        reply = {"text": text}
    except ChatTemplateError as exc:
        reply = {"error": str(exc)}
    except MemoryError:
        reply = {"error": f"the chat template needs more than {RENDER_MEMORY_BYTES >> 20} MiB to render"}
    sys.stdout.write(json.dumps(reply))
    sys.stdout.flush()


def _bounded_join(seq: Any) -> str:
    parts = [str(x) for x in seq]
    if sum(len(p) for p in parts) > MAX_PROMPT_CHARS:
        raise ChatTemplateError("the chat template builds a text too large to render with ~")
    return "".join(parts)


def render_in_process(
    template: str,
    messages: Sequence[tuple[str, str]],
    *,
    bos_token: str,
    eos_token: str,
    add_bos: bool,
    add_generation_prompt: bool = True,
    max_s: float = MAX_RENDER_S,
) -> str:
    """The render itself, in this process: bounded in time, output and what one step may build, but not in
    memory or CPU (``render_chat`` runs it in a child that is)."""
    import jinja2

    budget = _RenderBudget(max_s)
    env = _sandbox(budget)
    previous = sys.gettrace()
    try:
        compiled = env.from_string(template)
        sys.settrace(budget.trace)
        try:
            text = _bounded_text(
                compiled.generate(
                    messages=[{"role": role, "content": content} for role, content in messages],
                    add_generation_prompt=add_generation_prompt,
                    bos_token=bos_token,
                    eos_token=eos_token,
                )
            )
        finally:
            sys.settrace(previous)
    except ChatTemplateError:
        raise
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(f"the chat template does not render: {type(exc).__name__}: {exc}") from None
    except MemoryError:
        raise ChatTemplateError(
            f"the chat template needs more than {RENDER_MEMORY_BYTES >> 20} MiB to render"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a template can fail in many ways inside the sandbox
        raise ChatTemplateError(f"the chat template failed: {type(exc).__name__}: {exc}") from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ChatTemplateError(
            "the chat template renders text that is not valid Unicode (a lone surrogate)"
        ) from None
    # llama.cpp strips a BOS the template wrote when the tokenizer adds one (common/chat.cpp)
    if add_bos and bos_token and text.startswith(bos_token):
        text = text[len(bos_token) :]
    return text


def _bounded_text(pieces: Iterator[str]) -> str:
    """The rendered pieces joined, refused once they pass MAX_PROMPT_CHARS (never built whole first)."""
    out: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_PROMPT_CHARS:
            raise ChatTemplateError(f"the chat template renders more than {MAX_PROMPT_CHARS} characters")
        out.append(piece)
    return "".join(out)


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
