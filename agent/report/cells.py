"""How a report value reads in a table cell, shared by every printer (terminal, Markdown, HTML).

'—' is "not measured" and never 0; floats get a fixed number of places per column; composite cells put a
median beside its spread (``median [min–max] n=N``), a prediction beside the measured peak, or a share
beside the figure it divides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from edgeprof.plan.bounds import MAX_NGL as NGL_ALL
from edgeprof.runners.registry import kind_of
from edgeprof.safetext import safe_text

Row = Mapping[str, Any]

EMPTY = "—"


def fmt_value(value: Any, digits: int = 1) -> str:
    """A report cell: '—' for not measured, floats to ``digits`` places."""
    if value is None:
        return EMPTY
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_spread(row: Row, prefix: str) -> str:
    """'median [min–max] n=N' of a metric's steady reps, '—' when not measured."""
    if row[f"{prefix}_median"] is None:
        return EMPTY
    return (
        f"{row[prefix + '_median']:.1f} [{row[prefix + '_min']:.1f}–{row[prefix + '_max']:.1f}] "
        f"n={row[prefix + '_n']}"
    )


def fmt_both(row: Row, first: str, second: str, digits: int = 1) -> str:
    """'a/b' of two fields, each '—' when not measured (start/max °C: either may be missing)."""
    return f"{fmt_value(row.get(first), digits)}/{fmt_value(row.get(second), digits)}"


def fmt_pair(row: Row, first: str, second: str) -> str:
    """'a/b' of two percentiles of one distribution, '—' when the first is not measured (p50/p99)."""
    return EMPTY if row[first] is None else f"{fmt_value(row[first])}/{fmt_value(row[second])}"


def fmt_ttft(row: Row) -> str:
    """'p50/p95' of the steady reps' time to first token."""
    if row.get("ttft_ms_p50") is None:
        return EMPTY
    return f"{row['ttft_ms_p50']:.1f}/{row['ttft_ms_p95']:.1f}"


# a setting that is not the plan's to give (a server edgeprof did not start keeps its own)
NOT_APPLICABLE = "–"


def fmt_ngl(ngl: Any) -> str:
    """-ngl as a cell: 'all (999)' for edgeprof's "every layer" (the default), '–' where the plan set none
    (a server edgeprof did not start), else the number of layers."""
    if ngl is None:
        return NOT_APPLICABLE
    return f"all ({ngl})" if ngl >= NGL_ALL else str(ngl)


RUNNING = "running"  # a config still being measured: not finished, so neither ok nor failed


def fmt_status(row: Row) -> str:
    """'ok', 'running', or the failure in capitals so that it stands out in a column of 'ok'."""
    return str(row["status"]) if row["status"] in ("ok", RUNNING) else str(row["status"]).upper()


def fmt_watts(row: Row) -> str:
    """Decode power in W (stored in mW)."""
    mw = row.get("decode_power_mw_median")
    return fmt_value(mw / 1000.0 if mw is not None else None, 2)


def fmt_agreement(row: Row, suffix: str = "") -> str:
    """'reference', or the share of tokens agreeing with the reference and the identical prefix."""
    if row.get("agree_share") is None:
        return EMPTY
    if row["model_label"] == row["reference_label"]:
        return "reference"
    share = row["agree_share"] * 100
    return f"{share:.0f}% ({row['agree_prefix_tokens']}/{row['agree_n_tokens']}{suffix})"


def fmt_memory(row: Row) -> str:
    """'pred/peak' MiB: the prediction beside the measured peak RSS ('—' for either not there)."""
    pred, peak = row.get("mem_predicted_mb"), row.get("peak_rss_mb")
    if pred is None and peak is None:
        return EMPTY
    left = f"{pred:.0f}" if pred is not None else EMPTY
    right = f"{peak:.0f}" if peak is not None else EMPTY
    return f"{left}/{right}"


def fmt_bandwidth(row: Row) -> str:
    """'12.3 (25%)': achieved GB/s and its share of the measured bandwidth."""
    if row.get("bw_gbps") is None:
        return EMPTY
    pct = f" ({row['bw_pct']:.0f}%)" if row.get("bw_pct") is not None else ""
    return f"{row['bw_gbps']:.1f}{pct}"


def quality_at(row: Row) -> str:
    """' @ctx 128' when the row's quality figures were measured at another ctx than the row's own (a speed
    row carries its model's quality run, which may have scored at another ctx), '' when they are its own."""
    measured_at = row.get("quality_ctx")
    if measured_at is None or measured_at == row.get("ctx"):
        return ""
    return f" @ctx {measured_at}"


FOREIGN_QUALITY = "not measured: foreign server"


def fmt_quality(row: Row) -> str:
    """'KLD 0.0312 / 92.1 %' for a table cell, with '@ctx N' where it was measured at another ctx;
    'reference' for the reference itself; '—' when none. A foreign server's logits are out of reach: its
    row says so rather than leave a blank that reads as "not run yet"."""
    if kind_of(row.get("runner")).foreign:
        return FOREIGN_QUALITY
    if row.get("kld_mean") is None:
        return EMPTY
    if row.get("quality_reference_label") == row.get("model_label"):
        return "reference"
    return f"{row['kld_mean']:.4f} / {row['same_top_pct']:.1f}%{quality_at(row)}"


def _ppl_number(value: float, signed: bool = False) -> str:
    # a random-weight model's perplexity is astronomical (1e43): three significant digits there
    sign = "+" if signed else ""
    return f"{value:{sign}.3f}" if abs(value) < 1e4 else f"{value:{sign}.3g}"


def fmt_ppl(row: Row) -> str:
    """'10.123 / +0.045': the variant's perplexity and its difference from the reference's on the same
    text ('ref' for the reference itself), with '@ctx N' where it was measured at another ctx."""
    if row.get("ppl") is None:
        return EMPTY
    if row.get("quality_reference_label") == row.get("model_label"):
        delta = "ref"
    elif row.get("delta_ppl") is None:
        delta = EMPTY
    else:
        delta = _ppl_number(row["delta_ppl"], signed=True)
    return f"{_ppl_number(row['ppl'])} / {delta}{quality_at(row)}"


def fmt_tokens_out(row: Row) -> str:
    """'64/64', or '20/64 eos 5/5' when reps stopped at EOS; '(eos ignored)' marks synthetic runs.

    A row that stopped at EOS after 20 of 64 tokens must not read like the others: its speed is over fewer
    tokens, and its output is shorter than the plan asked for."""
    if row.get("tokens_out_median") is None:
        return EMPTY
    med = row["tokens_out_median"]
    text = f"{med:g}/{row['n_predict']}"
    if row.get("eos_count"):
        total = sum(int(p.split(":")[1]) for p in (row.get("finish_reasons") or "").split(",") if ":" in p)
        text += f" eos {row['eos_count']}/{total}"
    if row.get("ignore_eos"):
        text += " (eos ignored)"
    return text


def fmt_served(row: Row) -> str:
    """'ok/n' requests of a serving level."""
    if row["serving_requests"] is None:
        return EMPTY
    return f"{row['serving_ok']}/{row['serving_requests']}"


def fmt_goodput(row: Row) -> str:
    """'5.91 (1/8)': goodput per second of the level, with the requests that met every SLO of all it sent
    (a level that dropped seven of eight requests must not read like one that served them)."""
    rps = row.get("serving_goodput_rps")
    if rps is None:
        return EMPTY
    good, sent = row.get("serving_good"), row.get("serving_requests")
    return f"{rps:.2f} ({fmt_value(good)}/{fmt_value(sent)})"


def fmt_prompt_cache(row: Row) -> str:
    """'0/1024': the prompt tokens the server's cache served over a level, of those sent; 'UNASKED' after
    it where the cache served some although the plan did not turn it on, 'cache on' where it did; '—' where
    the server gave no count."""
    cached = row.get("serving_cached_prompt_tokens")
    if cached is None:
        return EMPTY
    text = f"{cached}/{fmt_value(row.get('serving_cached_prompt_tokens_of'))}"
    mark = {"unasked": " UNASKED", "on": " (cache on)"}.get(str(row.get("serving_prompt_cache")), "")
    return text + mark


# -- generated text: the first characters of a config's output, never able to reach a terminal as control --
OUTPUT_CHARS = 120


def visible(text: str) -> str:
    """``text`` with every control or format character written as an escape (``\\n``, ``\\x1b``,
    ``\\u202e``): generated text can then never start an escape sequence in a terminal, break a table's
    line or reorder what is shown. A backslash is doubled, so an escape reads unambiguously."""
    return safe_text(text.replace("\\", "\\\\"), strict=True)


def output_head(row: Row) -> str | None:
    """The first ``OUTPUT_CHARS`` characters of the row's generated text, made visible, '…' where it goes
    on; '(empty)' for an output with no text; None where no text was stored (quality runs, older DBs)."""
    text = row.get("_output_text")
    if text is None:
        return None
    if text == "":
        return "(empty)"
    return visible(text[:OUTPUT_CHARS]) + ("…" if len(text) > OUTPUT_CHARS else "")


def md_code(text: str) -> str:
    """``text`` as a Markdown code span, so nothing in it is read as Markdown or HTML (CommonMark: a fence
    longer than any backtick run inside, padded where the text starts or ends with a backtick or a space)."""
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = text[:1] in ("`", " ") or text[-1:] in ("`", " ")
    return f"{fence} {text} {fence}" if pad else f"{fence}{text}{fence}"


ECHO_MARK = "echoes the prompt: "


def fmt_output(row: Row) -> str:
    """The Markdown cell of the generated text: a code span, marked where the output repeats the prompt."""
    head = output_head(row)
    if head is None:
        return EMPTY
    return (ECHO_MARK if row.get("_output_echo") else "") + md_code(head)


def fmt_output_html(row: Row) -> str:
    """The HTML cell of the generated text (escaped by the page), marked where it repeats the prompt."""
    head = output_head(row)
    if head is None:
        return EMPTY
    return (ECHO_MARK if row.get("_output_echo") else "") + head


def no_decode_why(row: Mapping[str, Any]) -> str:
    """Why a finished row has no decode speed, where its reps say: the model emitted end-of-sequence as its
    first token (a prompt it answers with nothing), so there was nothing to decode; "" otherwise."""
    if not row.get("eos_count") or (row.get("tokens_out_median") or 0) > 1:
        return ""
    return (
        f": the model emitted end-of-sequence as its first token ({fmt_tokens_out(row)}); "
        "set ignore_eos = true in the workload to measure decode anyway"
    )
