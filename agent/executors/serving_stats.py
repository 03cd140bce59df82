"""A serving level's figures from its request records: counts, throughput, goodput under the plan's SLOs and
the latency distributions (nearest rank, always with n; docs/measurements.md, serving rows).

The agent's side of the serving runner: ``runners.loadgen`` measures each request, this module summarises a
level, with the one nearest-rank implementation the rest of the agent uses (``edgeprof.stats``).
"""

from __future__ import annotations

from typing import Any

from edgeprof.runners.loadgen import RequestRecord
from edgeprof.stats import median, nearest_rank

PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.50), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99))


def distribution(values: list[float]) -> dict[str, float | int | None]:
    """min / median / max and nearest-rank p50/p90/p95/p99, with n."""
    xs = [v for v in values if v is not None]
    out: dict[str, float | int | None] = {
        "n": len(xs),
        "min": min(xs) if xs else None,
        "median": median(xs),
        "max": max(xs) if xs else None,
    }
    for name, q in PERCENTILES:
        out[name] = nearest_rank(xs, q)
    return out


def meets_slo(rec: RequestRecord, slo: dict[str, float]) -> bool:
    """All SLOs must hold (vLLM / DistServe goodput); a TPOT that is undefined (n <= 1) passes its SLO."""
    if rec.status != "ok":
        return False
    checks = {"ttft_ms": rec.ttft_ms, "tpot_ms": rec.tpot_ms, "e2el_ms": rec.e2el_ms}
    for key, limit in slo.items():
        value = checks.get(key)
        if value is None:
            if key == "tpot_ms":
                continue
            return False
        if value > limit:
            return False
    return True


def summarize_level(records: list[RequestRecord], duration_s: float, slo: dict[str, float]) -> dict[str, Any]:
    """The per-level figures from the measured requests of a level (``duration_s``: first send → last end)."""
    measured = [r for r in records if r.kind == "measured"]
    ok = [r for r in measured if r.status == "ok"]
    return {**level_counts(measured, ok, duration_s, slo), **latency_distributions(measured, ok)}


def level_counts(
    measured: list[RequestRecord], ok: list[RequestRecord], duration_s: float, slo: dict[str, float]
) -> dict[str, Any]:
    """How many requests ended how, and what the level sustained per second (goodput: those meeting SLOs)."""
    n = len(measured)
    out_tokens = [r.output_tokens for r in ok if r.output_tokens is not None]
    in_tokens = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    dur = duration_s if duration_s > 0 else None
    good = [r for r in ok if meets_slo(r, slo)] if slo else None
    return {
        "n_requests": n,
        "n_ok": len(ok),
        "n_errors": sum(1 for r in measured if r.status == "error"),
        "n_timeouts": sum(1 for r in measured if r.status == "timeout"),
        "n_rejected": sum(1 for r in measured if r.status == "rejected"),
        "error_rate": (n - len(ok)) / n if n else None,
        "duration_s": duration_s,
        "request_throughput_rps": len(ok) / dur if dur else None,
        "output_tps": sum(out_tokens) / dur if dur and out_tokens else None,
        "total_tps": (sum(out_tokens) + sum(in_tokens)) / dur if dur and out_tokens else None,
        "goodput_rps": len(good) / dur if dur and good is not None else None,
        "n_good": len(good) if good is not None else None,
        "slo": slo or None,
        "token_sources": token_sources(ok),
    }


def token_sources(ok: list[RequestRecord]) -> dict[str, int]:
    """Where the successful requests' token counts came from, with how many: "server" (llama-server's own
    count), "usage" (an OpenAI-compatible server's), "chunks" (none offered: one token per text chunk)."""
    out: dict[str, int] = {}
    for r in ok:
        key = r.token_source or "none"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def latency_distributions(measured: list[RequestRecord], ok: list[RequestRecord]) -> dict[str, Any]:
    """Every per-request figure's distribution over the level's successful requests, client beside server."""
    itl = [g for r in ok for g in r.itl_ms]
    out_tokens = [r.output_tokens for r in ok if r.output_tokens is not None]
    return {
        "ttft_ms": distribution([v for r in ok if (v := r.ttft_ms) is not None]),
        "tpot_ms": distribution([v for r in ok if (v := r.tpot_ms) is not None]),
        "tpot_e2e_ms": distribution([v for r in ok if (v := r.tpot_e2e_ms) is not None]),
        "itl_ms": distribution(itl),
        "e2el_ms": distribution([v for r in ok if (v := r.e2el_ms) is not None]),
        "output_tokens": distribution([float(v) for v in out_tokens]),
        "server_prompt_ms": distribution([v for r in ok if (v := r.server_prompt_ms) is not None]),
        "server_predicted_ms": distribution([v for r in ok if (v := r.server_predicted_ms) is not None]),
        "server_ms_per_token": distribution(
            [
                r.server_predicted_ms / (r.output_tokens - 1)
                for r in ok
                if r.server_predicted_ms is not None and r.output_tokens and r.output_tokens > 1
            ]
        ),
        # client minus server: HTTP, queueing and our own client; a few ms on loopback at concurrency 1
        "ttft_minus_server_prompt_ms": distribution(
            [
                v - r.server_prompt_ms
                for r in ok
                if (v := r.ttft_ms) is not None and r.server_prompt_ms is not None
            ]
        ),
        "e2el_minus_server_ms": distribution(
            [
                v - (r.server_prompt_ms + r.server_predicted_ms)
                for r in ok
                if (v := r.e2el_ms) is not None
                and r.server_prompt_ms is not None
                and r.server_predicted_ms is not None
            ]
        ),
        "client_overhead_ms": distribution([r.client_overhead_ms for r in measured]),
        "n_chunk_token_mismatch": sum(
            1 for r in ok if r.output_tokens is not None and len(r.chunk_times) != r.output_tokens
        ),
    }


def counter_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """after − before for the counters (``*_total``) present in both: the level's own share of them."""
    return {k: after[k] - before[k] for k in after if k.endswith("_total") and k in before}
