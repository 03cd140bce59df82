"""The lines around the configs table that the terminal and Markdown share: failed configs, a CPU-only
build asked to offload, device state changes, why an unstable row is unstable, outputs that repeat their
prompt, and (``report --show-output``) the start of each config's generated text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from edgeprof.report.cells import ECHO_MARK, EMPTY, OUTPUT_CHARS, RUNNING, fmt_ngl, output_head
from edgeprof.report.columns import row_kind


def failure_notes(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        f"{r['model_label']} ctx={r['ctx']} ngl={r['ngl']} wl={r['workload']}: {r['status']}: {r['reason']}"
        for r in rows
        if r["status"] not in ("ok", RUNNING)  # one still running has not failed
    ]
    # One line, not one per row: the default (-ngl all, as llama-bench) asks for offload on every config,
    # and on a CPU-only build every one of them measured the CPU. A sweep's in-process configs share one
    # build, but not every child reports what it can do (a quality run's does not): one that says it cannot
    # offload speaks for all of them.
    cannot_offload = any(r.get("_gpu_offload_supported") is False for r in rows)
    cpu_only = [r for r in rows if cannot_offload and r["ngl"] > 0 and "_gpu_offload_supported" in r]
    if cpu_only:
        ngls = ", ".join(fmt_ngl(n) for n in sorted({r["ngl"] for r in cpu_only}))
        out.append(
            f"{len(cpu_only)} config(s) asked for -ngl {ngls}, but this llama.cpp build cannot offload to "
            "a GPU: those runs measured the CPU"
        )
    out += [
        f"{r['model_label']} ctx={r['ctx']} ngl={r['ngl']}: device state changed before this config "
        f"(power mode {r['power_mode']}, clocks locked {r['clocks_locked']}): "
        "not comparable with earlier rows"
        for r in rows
        if r["device_state_changed"]
    ]
    out += [stability_note(r) for r in rows if stability_note(r)]
    return out


def stability_note(row: Mapping[str, Any]) -> str:
    """Why an ``unstable`` row is unstable, as far as the interference verdict tells: other processes
    competing for the CPU during its steady reps, or not (then the cause is in the device or the model)."""
    if row.get("stability_verdict") != "unstable":
        return ""
    where = f"{row['model_label']} ctx={row['ctx']} ngl={row['ngl']}"
    interference = row.get("interference_verdict")
    if interference == "contended":
        return (
            f"{where}: unstable while other processes competed for the CPU (interference: contended): "
            "rerun on a quiet machine before trusting its median"
        )
    if interference == "quiet":
        return f"{where}: unstable on a quiet machine (no competing CPU work): look at thermals and clocks"
    return f"{where}: unstable; whether other work competed for the CPU was not measured"


def config_name(row: Mapping[str, Any]) -> str:
    """A config as the notes name it: model, ctx, depth (where set), ngl, threads and workload."""
    depth = f" depth={row['depth']}" if row.get("depth") else ""
    return (
        f"{row['model_label']} ctx={row['ctx']}{depth} ngl={row['ngl']} thr={row['threads']} "
        f"wl={row['workload']}"
    )


ECHO_TITLE = (
    "output that repeats the prompt (the model echoed instead of answering: 'ok' and its token count say "
    "that it ran, not that it answered; look at the chat template and the file)"
)


def echo_notes(rows: list[dict[str, Any]]) -> list[str]:
    """One line per config whose generated text repeats its prompt, with the text's start."""
    return [f'{config_name(r)}: "{output_head(r)}"' for r in rows if r.get("_output_echo")]


OUTPUT_TITLE = (
    f"Generated text (first {OUTPUT_CHARS} characters of the first steady rep; control characters shown "
    "as escapes):"
)


def output_lines(rows: list[dict[str, Any]]) -> list[str]:
    """``report --show-output``: what each generation config produced, one line each, made visible."""
    lines = []
    for r in rows:
        if row_kind(r) != "inprocess":
            continue  # a quality run scores a text, it generates nothing
        head = output_head(r)
        text = EMPTY + " (no text stored)" if head is None else f'"{head}"'
        lines.append(f"{config_name(r)}: {ECHO_MARK if r.get('_output_echo') else ''}{text}")
    return lines
