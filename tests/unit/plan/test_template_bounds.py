"""Chat templates that would outlive their budget in one step (a big-integer power, one ``replace``, ``~``
doubling, ``indent``) are refused from their arguments before the result is built, and every render runs in a
child whose CPU time and memory are limited: what no check foresaw ends there, in one line."""

from __future__ import annotations

import time

import pytest
from support.hostile_cases import case

from edgeprof.plan.chat import ChatTemplateError, render_chat

pytestmark = pytest.mark.timeout(120)


def render(template: str) -> str:
    return render_chat(template, [("user", "hi")], bos_token="", eos_token="", add_bos=False)


@pytest.mark.parametrize("hostile", [case("chat-template-big-numbers")], ids=lambda c: c.id)
@pytest.mark.parametrize(
    "template",
    [
        "{{ ((99 ** 1024) ** 1024) ** 1024 }}",
        "{% set n = 7 ** 1024 %}{% set m = n * n * n * n * n * n * n * n %}{{ m * m * m * m }}",
    ],
    ids=["power", "product"],
)
def test_a_number_too_large_to_compute_is_refused_before_it_is_computed(
    template: str, hostile: object
) -> None:
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError, match="a number too large to render"):
        render(template)
    assert time.monotonic() - t0 < 60  # not minutes at 100 % CPU (no speed asserted: a loose bound)


@pytest.mark.parametrize("hostile", [case("chat-template-large-results")], ids=lambda c: c.id)
@pytest.mark.parametrize(
    "template",
    [
        "{% set a = 'x' * 4000000 %}{{ ('x' * 300).replace('x', a) }}",
        "{% set a = 'x' * 4000000 %}{{ ('x' * 300)|replace('x', a) }}",
        "{% set ns = namespace(x='xx') %}{% for i in range(40) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}",
        "{% set a = 'x\\n' * 1000000 %}{{ a|indent(3000000) }}",
        "{{ (',' * 4000000).join(['a'] * 100) }}",
    ],
    ids=["str-replace", "replace-filter", "tilde", "indent", "join"],
)
def test_a_text_too_large_is_refused_from_the_arguments(template: str, hostile: object) -> None:
    with pytest.raises(ChatTemplateError, match=r"builds a text"):
        render(template)


def test_what_no_check_foresees_ends_at_the_childs_memory_limit() -> None:
    template = (
        "{% set ns = namespace(xs=[]) %}{% for i in range(400) %}"
        "{% set ns.xs = ns.xs + [('x' * 3000000) ~ i] %}{% endfor %}{{ ns.xs|length }}"
    )
    with pytest.raises(ChatTemplateError, match=r"needs more than 512 MiB|MemoryError"):
        render(template)


@pytest.mark.parametrize("hostile", [case("chat-template-surrogate")], ids=lambda c: c.id)
def test_a_lone_surrogate_is_a_template_error(hostile: object) -> None:
    with pytest.raises(ChatTemplateError, match="not valid Unicode"):
        render("{{ '\\ud800' }}")


def test_ordinary_templates_still_render_in_the_child() -> None:
    template = "{{ 2 ** 64 }}|{{ 'a-b'.replace('-', '+') }}|{{ 'x' ~ 'y' }}|{{ ['a', 'b']|join(',') }}"
    assert render(template) == "18446744073709551616|a+b|xy|a,b"
