"""A database whose every stored text is hostile: markup for the HTML report and terminal control
sequences (clear-screen, OSC 52 clipboard write, a title change, BEL, CR) for the terminal and Markdown.

``hostile(where)`` is one such text, tagged with the field it was stored in, so a test that finds it raw on a
page can name the field. ``build_hostile_db`` writes a sweep with a speed run that echoes its prompt, a
failed run with a log tail, a llama-server level, verdicts, a collector and a plan, all of them hostile
(the model label is what a GGUF named ``<img src=x onerror=...>.gguf`` gets by default).
"""

from __future__ import annotations

import json

from sqlalchemy.orm import Session

from edgeprof.storage.models import Build, CollectorStatus, Measurement, ServingLevel, ServingRequest, Verdict
from support import dbbuild

# What a terminal must never receive raw: clear screen + home, OSC 52 (write "hi" to the clipboard), OSC 0
# (window title) ended by BEL, a carriage return that would overwrite the start of the line, DEL.
CONTROL = "\x1b[2J\x1b[H\x1b]52;c;aGk=\x07\x1b]0;pwned\x07\r\x7f"
TAG = "x-evil"
# What the HTML report is made of: any other element on the page is markup that came from data.
PAGE_TAGS = frozenset({
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "ul", "li", "div", "table",
    "thead", "tbody", "tr", "th", "td", "span", "details", "summary", "pre", "code", "img", "b",
})  # fmt: skip


def hostile(where: str) -> str:
    """Markup and control characters, tagged with ``where`` (the field they were stored in)."""
    return f'<{TAG} data-f="{where}"><img src=x onerror=alert(1)>{CONTROL}{where}'


def build_hostile_db(s: Session) -> int:
    """The sweep described in the module docstring; committed; returns its id."""
    device = dbbuild.add_device(
        s, hostname=hostile("hostname"), cpu_model=hostile("cpu"), board_model=hostile("board"),
        gpu=hostile("gpu"), facts_json=json.dumps({"kernel": hostile("facts")}),
    )  # fmt: skip
    sweep = dbbuild.add_sweep(
        s, device, name=hostile("sweep_name"), plan_path=hostile("plan_path"), plan_text=hostile("plan_text"),
        n_specs=3, device_state_json=json.dumps({"nvpmodel": {"name": hostile("power_mode")}}),
    )  # fmt: skip
    build = Build(
        fingerprint="b", llama_cpp_python_version="0.3", backend="cpu", gpu_offload=False,
        system_info=hostile("system_info"), build_flags=hostile("build_flags"), first_seen=dbbuild.T0,
    )  # fmt: skip
    s.add(build)
    s.flush()
    prompt = hostile("prompt")
    workload = {"n_predict": 8, "prompt": prompt}
    common = {
        "model_label": hostile("model_label"), "model_group": hostile("model_group"),
        "workload_name": hostile("workload"), "workload_json": json.dumps(workload), "build_id": build.id,
    }  # fmt: skip
    ok = dbbuild.add_run(s, sweep, 1, **common, t_start_mono=0.0, t_end_mono=20.0)
    for rep in range(3):
        s.add(
            Measurement(
                run_id=ok.id, kind="steady", rep=rep, n_prompt=16, pp_tps=100.0 + rep, n_gen=8,
                tg_tps=10.0 + rep, ttft_ms=50.0, t_start_mono=2.0 + 5 * rep, t_end_mono=6.0 + 5 * rep,
                output_text=prompt,  # the output repeats the prompt: the echo note names it
            )
        )  # fmt: skip
    failed = dbbuild.add_run(
        s, sweep, 2, **common, status="crashed", reason=hostile("reason"), log_tail=hostile("log_tail"),
        device_state_changed=True, signal_name="SIGSEGV",
    )  # fmt: skip
    for run_id, kind in ((ok.id, "throttle"), (ok.id, "stability"), (failed.id, "throttle")):
        evidence = {"reasons": [hostile(f"{kind}_reason")], "notes": [hostile(f"{kind}_note")]}
        s.add(Verdict(run_id=run_id, kind=kind, value="inconclusive", evidence_json=json.dumps(evidence)))
    _add_serving_level(s, sweep.id, common)
    s.add(
        CollectorStatus(
            sweep_id=sweep.id, name="evil", ok=False, reason=hostile("collector_reason"), metrics_json="[]",
            last_error=hostile("collector_error"),
        )
    )  # fmt: skip
    s.commit()
    return sweep.id


def _add_serving_level(s: Session, sweep_id: int, common: dict[str, object]) -> None:
    """A llama-server level at c = 1 (the table where the label and workload once went unescaped)."""
    run = dbbuild.add_run(s, sweep_id, 3, **common, runner="llama-server", concurrency=1, n_threads=1)
    s.add(
        ServingLevel(
            run_id=run.id, concurrency=1, t_start_mono=100.0, t_end_mono=102.0, n_requests=2, n_ok=1,
            ttft_p50_ms=30.0, ttft_p99_ms=33.0, server_command=hostile("server_command"),
            stats_json=json.dumps({"error_rate": 0.5}),
        )
    )  # fmt: skip
    for i, status in enumerate(("ok", "error")):
        s.add(
            ServingRequest(
                run_id=run.id, kind="measured", idx=i, client=0, status=status, t_send_mono=100.0 + i,
                ttft_ms=30.0, e2el_ms=80.0, output_tokens=8, prompt_tokens=16, itl_json="[]", n_chunks=8,
            )
        )  # fmt: skip
