"""Every file a plan names is read with bounds (agent/plan/parse.py, quality.py, chat.py): a plan, a
quality text or a chat template that never ends, blocks, or nests without limit is one plan error, never a
hang, a MemoryError or a traceback. No model is loaded: the checks refuse before anything runs."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from pathlib import Path

import pytest
from support.hostile_cases import case
from support.plans import plan_toml

from edgeprof.plan import PlanError, load_plan, parse_plan
from edgeprof.plan.chat import ChatTemplateError, render_chat


def quality_plan(text_file: str) -> str:
    workload = {"name": "q", "kind": "quality", "text_file": text_file}
    return plan_toml(["/no/such/model.gguf"], workloads=[workload])


def problems(text: str, base: Path) -> str:
    with pytest.raises(PlanError) as err:
        parse_plan(text, source="plan.toml", base=base)
    return "\n".join(err.value.problems)


@pytest.mark.parametrize("hostile", [case("quality-text-dev-zero")], ids=lambda c: c.id)
def test_a_quality_text_file_that_never_ends_is_refused_unread(tmp_path: Path, hostile: object) -> None:
    said = problems(quality_plan("/dev/zero"), tmp_path)  # read whole, it was a MemoryError
    assert "text_file: /dev/zero is a device, not a regular file" in said
    assert "a folder, not a regular file" in problems(quality_plan(str(tmp_path)), tmp_path)


@pytest.mark.parametrize("hostile", [case("quality-text-fifo")], ids=lambda c: c.id)
def test_a_quality_text_file_that_is_a_fifo_is_refused_without_blocking(
    tmp_path: Path, hostile: object
) -> None:
    fifo = tmp_path / "text.fifo"
    os.mkfifo(fifo)
    assert "is a FIFO, not a regular file" in problems(quality_plan(str(fifo)), tmp_path)


@pytest.mark.parametrize("hostile", [case("quality-text-huge")], ids=lambda c: c.id)
def test_a_quality_text_file_over_the_ceiling_is_refused_by_its_size(tmp_path: Path, hostile: object) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as fh:
        fh.truncate((64 << 20) + 1)
    before = (big.stat().st_size, big.stat().st_mtime_ns)
    assert f"has {(64 << 20) + 1} bytes, more than the {64 << 20} allowed" in problems(
        quality_plan(str(big)), tmp_path
    )
    assert (big.stat().st_size, big.stat().st_mtime_ns) == before  # refused by its size, never written


@pytest.mark.parametrize("hostile", [case("queue-nested-arrays")], ids=lambda c: c.id)
def test_run_check_of_2000_nested_arrays_is_a_plan_error(tmp_path: Path, hostile: object) -> None:
    plan = tmp_path / "deep.toml"
    plan.write_text("x = " + "[" * 2000 + "]" * 2000 + "\n")  # 4 KB: once a RecursionError traceback
    before = hashlib.sha256(plan.read_bytes()).hexdigest()
    with pytest.raises(PlanError, match="nested 2000 levels deep"):
        load_plan(plan)
    assert hashlib.sha256(plan.read_bytes()).hexdigest() == before
    inline = "x = " + "{a = " * 40 + "1" + "}" * 40 + "\n"
    with pytest.raises(PlanError, match="nested 40 levels deep"):
        load_plan(_write(tmp_path / "inline.toml", inline))


def test_brackets_inside_strings_and_comments_are_not_nesting(tmp_path: Path) -> None:
    text = plan_toml(["/no/such/model.gguf"], name="[[[[" * 20) + "# " + "[" * 100 + "\n"
    text += 's = """' + "{" * 100 + '"""\n' + "l = '" + "[" * 100 + "'\n"
    with pytest.raises(PlanError) as err:
        load_plan(_write(tmp_path / "p.toml", text))
    assert not any("nested" in p for p in err.value.problems)


def test_run_check_of_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.toml"
    os.mkfifo(fifo)
    with pytest.raises(PlanError, match="is a FIFO, not a regular file"):
        load_plan(fifo)


@pytest.mark.parametrize("hostile", [case("chat-template-loops")], ids=lambda c: c.id)
@pytest.mark.parametrize(
    "template",
    [
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        # the same loops without a call inside: only the line tracer sees them turn
        "{% set xs = range(100000)|list %}{% for a in xs %}{% for b in xs %}{% endfor %}{% endfor %}",
    ],
    ids=["range", "list"],
)
def test_a_chat_template_of_nested_loops_is_refused_after_its_render_time(
    template: str, hostile: object
) -> None:
    with pytest.raises(ChatTemplateError, match=r"took more than 0\.2 s to render"):
        render_chat(template, [("user", "hi")], bos_token="", eos_token="", add_bos=False, max_s=0.2)


@pytest.mark.parametrize(
    "template",
    ["{{ 'x' * 100000 * 100000 }}", "{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}"],
    ids=["product", "output"],
)
def test_a_chat_template_that_builds_a_huge_text_is_refused_before_it_is_built(template: str) -> None:
    with pytest.raises(ChatTemplateError, match=r"too large to render|renders more than"):
        render_chat(template, [("user", "hi")], bos_token="", eos_token="", add_bos=False)


@pytest.mark.parametrize("hostile", [case("chat-template-one-wide-call")], ids=lambda c: c.id)
@pytest.mark.parametrize(
    "template",
    [
        "{{ 'x'|center(10**9) }}",
        "{{ 'x'.ljust(10**9) }}",
        "{{ 'x'|indent(10**9) }}",
        "{{ '%*s' % (10**9, 'x') }}",
        "{{ '{:>{w}}'.format('x', w=10**9) }}",
        "{{ '{:>999999999}'.format('x') }}",
        "{{ '%999999999s'|format('x') }}",
    ],
    ids=["center", "ljust", "indent", "percent-star", "format-kwarg", "format-spec", "format-filter"],
)
def test_one_call_asking_for_a_gigabyte_of_text_is_refused_before_it_allocates(
    template: str, hostile: object
) -> None:
    # One C-level call builds its whole result at once: neither the deadline nor the output ceiling can
    # stop it once it runs (a 1 GB center() took 7 s and 1 GB of memory before the ceiling refused it).
    tracemalloc.start()
    try:
        with pytest.raises(ChatTemplateError, match=r"asks for a text of|width of ten million"):
            render_chat(template, [("user", "hi")], bos_token="", eos_token="", add_bos=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak


def test_widths_and_long_numbers_a_template_really_uses_still_render() -> None:
    template = (
        "{{ 'a b'|center(9) }}|{{ '%5s' % 'ab' }}|{{ '{:>4}'.format('x') }}"
        "|{{ messages[0].content|indent(2) }}|{{ 'id 12345678: %s' % 'a' }}"
        "|{{ 'n={} 12345678'.format(1) }}|{{ 123456789012 }}"
    )
    text = render_chat(template, [("user", "hi")], bos_token="", eos_token="", add_bos=False)
    assert text == "   a b   |   ab|   x|hi|id 12345678: a|n=1 12345678|123456789012"


def test_a_normal_chat_template_renders_as_before() -> None:
    template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"
    text = render_chat(template, [("user", "hi")], bos_token="<s>", eos_token="</s>", add_bos=True)
    assert text == "<|user|>hi<|assistant|>"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
