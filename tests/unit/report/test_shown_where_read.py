"""What was measured is shown where it is read, on a hand-built (synthetic) fixture DB: PPL and ΔPPL in the
terminal table, Markdown and HTML, KLD in the HTML configs table, "@ctx N" where a quality figure scored at
one ctx sits on a row of another, the start of each config's generated text (escaped: nothing a model
writes can reach a terminal as a control sequence or a page as markup), and a note where the output only
repeats the prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session
from support import dbbuild, golden

from edgeprof.report import build_rows, render_csv, render_html, render_json, render_markdown, render_table
from edgeprof.report.cells import OUTPUT_CHARS, md_code, visible
from edgeprof.report.run_row import echoes_prompt, prompt_texts
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, ModelFile, QualityResult, Run

pytestmark = pytest.mark.timeout(120)

PROMPT = "Tell me about the weather in Paris today."
ECHO = f"{PROMPT}\n{PROMPT}\n{PROMPT}"
ANSWER = "It is sunny and mild, around 18 degrees, with a light wind from the west."
# What a hostile or broken model could print: a colour escape, a C1 CSI, a bidi override, markup, a
# table's pipe, backticks, a newline; and more than OUTPUT_CHARS characters.
NASTY = "\x1b[31mred\x1b[0m \x9b2J <script>alert(1)</script> a|b ``code`` \u202eevil\nnext " + "x" * 200


def _quality(run_id: int, ctx: int, kld: float, ppl: float, *, ref: bool) -> QualityResult:
    return dbbuild.quality_result(
        run_id, kld, reference_label="f16", is_reference=ref, ctx=ctx, n_chunks=2, n_tokens=126,
        same_top_pct=100.0 if ref else 92.1, ppl=ppl, ppl_se=0.1, ppl_ref=10.25, ppl_ref_se=0.1,
        delta_ppl=ppl - 10.25, delta_ppl_se=0.01, ln_ppl_ratio_se=0.0,
    )  # fmt: skip


def _gen(s: Session, sweep: Any, seq: int, mf: ModelFile, label: str, ctx: int, text: str | None,
         workload: dict[str, Any]) -> Run:  # fmt: skip
    run = dbbuild.add_run(
        s, sweep, seq, model_label=label, model_file_id=mf.id, n_ctx=ctx, workload_name=workload["name"],
        workload_json=json.dumps(workload), runner="llama-cpp",
    )  # fmt: skip
    s.add_all(
        Measurement(run_id=run.id, kind="steady", rep=i, tg_tps=50.0 + i, pp_tps=400.0, ttft_ms=10.0,
                    output_tokens_json=json.dumps([1, 2, 3]), output_text=text, tokens_out=3)
        for i in range(3)
    )  # fmt: skip
    return run


def _quality_run(s: Session, sweep: Any, seq: int, mf: ModelFile, label: str, ctx: int, kld: float,
                 ppl: float) -> None:  # fmt: skip
    run = dbbuild.add_run(
        s, sweep, seq, model_label=label, model_file_id=mf.id, n_ctx=ctx, workload_name="kld",
        workload_json=json.dumps({"name": "kld", "kind": "quality", "n_predict": 0}), runner="llama-cpp",
    )  # fmt: skip
    s.add(_quality(run.id, ctx, kld, ppl, ref=label == "f16"))


def build_db(db: Path, *, q4_quality_at_2048: bool = False) -> Any:
    """f16 (the reference) and q4, speed at ctx 512 and 2048, quality scored at ctx 512 (and, asked for,
    q4's at 2048 too). q4 at 512 echoes its text prompt; q4 at 2048 prints hostile text; f16 answers."""
    engine = open_engine(db)
    with new_session(engine) as s:
        sweep = dbbuild.add_sweep(s)
        f16 = ModelFile(
            path="/m/f16.gguf", sha256="1" * 64, size_bytes=4_000_000, mtime_ns=1, n_params=2_000_000
        )
        q4 = ModelFile(
            path="/m/q4.gguf", sha256="4" * 64, size_bytes=1_125_000, mtime_ns=1, n_params=2_000_000
        )
        f16.quant_type, q4.quant_type = "F16", "Q4_K_M"
        s.add_all([f16, q4])
        s.flush()
        chat = {"name": "ask", "prompt": PROMPT, "prompt_tokens": None, "n_predict": 48}
        _gen(s, sweep, 0, f16, "f16", 512, ANSWER, chat)
        _quality_run(s, sweep, 1, f16, "f16", 512, 0.0, 10.25)
        _gen(s, sweep, 2, q4, "q4", 512, ECHO, chat)
        _gen(s, sweep, 3, q4, "q4", 2048, NASTY, chat)
        _quality_run(s, sweep, 4, q4, "q4", 512, 0.0312, 10.5)
        if q4_quality_at_2048:
            _quality_run(s, sweep, 5, q4, "q4", 2048, 0.0456, 10.75)
        s.commit()
    return engine


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_db(tmp_path_factory.mktemp("shown") / "shown.db")


@pytest.fixture(scope="module")
def rows(engine: Any) -> list[dict[str, Any]]:
    with new_session(engine) as s:
        return build_rows(s)


def _row(rows: list[dict[str, Any]], label: str, ctx: int, workload: str = "ask") -> dict[str, Any]:
    return next(
        r for r in rows if r["model_label"] == label and r["ctx"] == ctx and r["workload"] == workload
    )


def _cell_of(lines: list[str], header: str, label: str, ctx: int) -> str:
    """The cell under ``header`` of the terminal table's generation row of ``label`` at ``ctx``."""
    head = next(x for x in lines if header in x)
    line = next(
        x for x in lines[lines.index(head) + 2 :] if x.split()[:3:2] == [label, str(ctx)] and " ask " in x
    )
    start = head.index(header)
    rest = line[start:]
    return rest[: rest.find("  ")] if "  " in rest else rest


# -- PPL, ΔPPL and KLD where they are read -----------------------------------------------------------------


def test_ppl_and_delta_ppl_are_in_the_table_markdown_and_html(
    engine: Any, rows: list[dict[str, Any]]
) -> None:
    table = render_table(rows, wide=True)
    assert "PPL / ΔPPL" in table
    assert "10.500 / +0.250" in table  # q4 at ctx 512: its own quality run's ctx
    assert "10.250 / ref" in table  # the reference's perplexity, and no difference from itself
    md = render_markdown(rows)
    assert "| PPL / ΔPPL |" in md and "| 10.500 / +0.250 |" in md
    with new_session(engine) as s:
        page = golden.html_tables_text(render_html(s, 1))
    configs = page.split("## table ")[2].splitlines()
    header = configs[1].split(" | ")
    assert "PPL / ΔPPL" in header and "KLD / same-top" in header  # KLD in the page's configs table too
    q4_512 = next(line.split(" | ") for line in configs if "| q4 | Q4_K_M | 512 |" in f"| {line} |")
    assert q4_512[header.index("KLD / same-top")] == "0.0312 / 92.1%"
    assert q4_512[header.index("PPL / ΔPPL")] == "10.500 / +0.250"
    # JSON and CSV had the figures already; they stay the same numbers
    data = json.loads(render_json(rows))
    assert [d["ppl"] for d in data if d["model_label"] == "q4" and d["ctx"] == 512] == [10.5, 10.5]
    assert "10.5" in render_csv(rows)


def test_a_quality_figure_from_another_ctx_says_at_which_ctx_it_was_measured(
    rows: list[dict[str, Any]],
) -> None:
    lines = render_table(rows, wide=True).splitlines()
    # q4 at ctx 2048 carries the quality run that scored at 512: both cells say so
    assert _cell_of(lines, "KLD / same-top", "q4", 2048) == "0.0312 / 92.1% @ctx 512"
    assert _cell_of(lines, "PPL / ΔPPL", "q4", 2048) == "10.500 / +0.250 @ctx 512"
    # where the ctx is the row's own, no marker
    assert _cell_of(lines, "KLD / same-top", "q4", 512) == "0.0312 / 92.1%"
    assert "0.0312 / 92.1% @ctx 512" in render_markdown(rows)
    assert _row(rows, "q4", 2048)["quality_ctx"] == 512


def test_a_speed_row_carries_the_quality_run_of_its_own_ctx_where_there_is_one(tmp_path: Path) -> None:
    engine = build_db(tmp_path / "two-ctx.db", q4_quality_at_2048=True)
    with new_session(engine) as s:
        rows = build_rows(s)
    assert (_row(rows, "q4", 512)["kld_mean"], _row(rows, "q4", 512)["quality_ctx"]) == (0.0312, 512)
    assert (_row(rows, "q4", 2048)["kld_mean"], _row(rows, "q4", 2048)["quality_ctx"]) == (0.0456, 2048)
    assert "@ctx" not in render_table(rows, wide=True)  # every figure is from the row's own ctx


# -- the generated text, escaped -------------------------------------------------------------------------


def test_visible_makes_every_control_and_format_character_an_escape() -> None:
    assert visible("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert visible("\x1b[31m\x9b\x7f") == "\\x1b[31m\\x9b\\x7f"
    assert visible("\u202eevil\u2028\u200b") == "\\u202eevil\\u2028\\u200b"
    assert visible("C:\\n") == "C:\\\\n"  # a real backslash reads apart from an escaped newline
    assert visible("héllo ünïcode — ok") == "héllo ünïcode — ok"


def _no_control(text: str) -> None:
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text


def test_markdown_shows_the_start_of_each_output_in_a_code_span(rows: list[dict[str, Any]]) -> None:
    md = render_markdown(rows)
    header = next(x for x in md.splitlines() if x.startswith("| model"))
    assert f"output (first {OUTPUT_CHARS} chars)" in header
    assert f"| `{ANSWER}` |" in md
    _no_control(md)
    nasty = next(x for x in md.splitlines() if "<script>" in x)
    cell = nasty.rsplit(" | ", 1)[1]
    # one line, a fence longer than the backtick run inside, the table's pipe escaped, cut at 120
    head = visible(NASTY[:OUTPUT_CHARS]).replace("|", "\\|")
    assert cell == f"```{head}…``` |"
    assert "\\x1b[31mred" in cell and "\\u202eevil\\nnext" in cell
    # a quality run generates nothing: its cell is "not measured"
    assert next(x for x in md.splitlines() if "| kld |" in x).endswith("| — |")


def test_html_shows_the_start_of_each_output_escaped(engine: Any) -> None:
    with new_session(engine) as s:
        page = render_html(s, 1)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    _no_control(page)
    tables = golden.html_tables_text(page)
    assert f"| {ANSWER} |" in tables.replace("\n", " |\n")  # the answer, whole (it is under 120 characters)
    assert "\\x1b[31mred" in tables


def test_the_terminal_shows_outputs_only_when_asked(rows: list[dict[str, Any]]) -> None:
    plain = render_table(rows, wide=True)
    assert ANSWER not in plain and "Generated text" not in plain
    shown = render_table(rows, wide=True, show_output=True)
    _no_control(shown)
    lines = shown.splitlines()
    start = lines.index(next(x for x in lines if x.startswith("Generated text (first 120 characters")))
    block = lines[start + 1 : start + 4]
    assert block[0] == f'  f16 ctx=512 ngl=0 thr=4 wl=ask: "{ANSWER}"'
    assert block[1].startswith('  q4 ctx=512 ngl=0 thr=4 wl=ask: echoes the prompt: "Tell me about')
    assert block[2] == f'  q4 ctx=2048 ngl=0 thr=4 wl=ask: "{visible(NASTY[:OUTPUT_CHARS])}…"'
    assert all("kld" not in x for x in block)  # quality runs generate nothing


# -- a model that only echoes its prompt ------------------------------------------------------------------


def test_an_output_that_repeats_its_prompt_is_noted_in_every_format(
    engine: Any, rows: list[dict[str, Any]]
) -> None:
    assert _row(rows, "q4", 512)["_output_echo"] is True
    assert _row(rows, "f16", 512)["_output_echo"] is False and _row(rows, "q4", 2048)["_output_echo"] is False
    table = render_table(rows, wide=True)
    assert "1 config(s) with output that repeats the prompt" in table
    assert '  q4 ctx=512 ngl=0 thr=4 wl=ask: "Tell me about the weather in Paris today.\\nTell me' in table
    md = render_markdown(rows)
    assert "**Configs with output that repeats the prompt" in md
    assert "- q4 ctx=512 ngl=0 thr=4 wl=ask: `Tell me about" in md
    assert "| echoes the prompt: `Tell me about" in md  # and in its row's own output cell
    with new_session(engine) as s:
        page = render_html(s, 1)
    assert "1 config(s) with output that repeats the prompt" in page
    assert "echoes the prompt: Tell me about" in golden.html_tables_text(page)


def test_echo_is_judged_on_the_prompt_the_user_wrote() -> None:
    assert echoes_prompt("  TELL me about the   weather in Paris", [PROMPT])  # case and whitespace aside
    assert echoes_prompt("hello hello hello hello hello", ["hello"])  # a short prompt said again and again
    assert not echoes_prompt(ANSWER, [PROMPT])
    assert not echoes_prompt(f"{PROMPT} {ANSWER}", [PROMPT])  # restated, then answered: no echo
    assert not echoes_prompt("Tell me.", [PROMPT])  # too short to judge: may be an answer
    assert not echoes_prompt(None, [PROMPT]) and not echoes_prompt(ECHO, [])
    chat = {"name": "c", "messages": [["system", "Be brief."], ["user", PROMPT]], "n_predict": 8}
    assert prompt_texts(chat) == ["Be brief.", PROMPT] and echoes_prompt(ECHO, prompt_texts(chat))
    # a synthetic prompt is a filler repeated to length: continuing it is no echo
    assert prompt_texts({"name": "s", "prompt": "filler", "prompt_tokens": 32, "n_predict": 8}) == []


def test_a_code_span_survives_backticks_and_spaces_at_its_ends() -> None:
    assert md_code("plain") == "`plain`"
    assert md_code("a `tick` b") == "``a `tick` b``"
    assert md_code("`x`") == "`` `x` ``"  # CommonMark strips one space each side: the backticks stay
    assert md_code(" both ") == "`  both  `"
