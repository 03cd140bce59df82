"""The generated text of every request is stored (the worker decodes its tokens, the executor keeps it on the
measurement), and the report shows its start: on a real tiny generated GGUF (synthetic weights and label)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import select
from support.plans import plan_toml

from edgeprof.gguf import write_f16_gguf
from edgeprof.plan import parse_plan
from edgeprof.report import build_rows, render_markdown, render_table
from edgeprof.report.cells import OUTPUT_CHARS, md_code, visible
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement
from edgeprof.sweep import env_without_fault, run_plan

pytestmark = [pytest.mark.llama, pytest.mark.timeout(300)]


def test_every_request_stores_its_text_and_the_report_shows_its_start(tmp_path: Path) -> None:
    import llama_cpp

    model = write_f16_gguf(tmp_path / "plain-synthetic.gguf")
    text = plan_toml(
        {"plain-synth": model},
        ctx=[256],
        workloads=[{"name": "ask", "prompt": "the model token speed", "n_predict": 12, "ignore_eos": True}],
        repeat={"cold": 1, "warmup": 0, "steady": 2},
        run={"timeout_s": 120},
    )
    plan = parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)
    engine = open_engine(f"sqlite:///{tmp_path / 'text.db'}")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_without_fault())
    assert outcome.counts == {"ok": 1}
    with new_session(engine) as s:
        stored = [
            (m.kind, m.output_text, json.loads(m.output_tokens_json)) for m in s.scalars(select(Measurement))
        ]
        rows = build_rows(s, outcome.sweep_id)
    assert sorted(kind for kind, _, _ in stored) == ["cold", "steady", "steady"]
    # the text is what the tokens say (the model's own vocabulary decodes them), the same in every greedy rep
    vocab = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)
    for _, output_text, tokens in stored:
        assert len(tokens) == 12 and output_text
        assert output_text == vocab.detokenize(tokens).decode("utf-8", errors="replace")
    assert len({t for _, t, _ in stored}) == 1
    first = stored[0][1]
    head = visible(first[:OUTPUT_CHARS]) + ("…" if len(first) > OUTPUT_CHARS else "")
    assert md_code(head).replace("|", "\\|") in render_markdown(rows)
    assert f'wl=ask: "{head}"' in render_table(rows, show_output=True)
