"""Workloads as users run them, on real tiny generated GGUFs (all synthetic): chat templates, EOS, depth,
llama.cpp parity, per-model workloads. Every model here is written by edgeprof.gguf.demo with random
weights and a synthetic label. The report of a depth sweep: tests/integration/test_report_depth.py."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from edgeprof.gguf import CHATML_TEMPLATE, write_f16_gguf
from edgeprof.plan import NGL_ALL, PARITY_DEFAULTS, PlanError, expand, parse_plan, read_chat_meta, render_chat
from edgeprof.report import build_rows, fmt_tokens_out, render_table
from edgeprof.runners import run_child
from edgeprof.runners.llama_context import flash_attn_effective, kv_cache_from_log
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run
from edgeprof.sweep import env_without_fault, run_plan
from edgeprof.verdicts import gpu_in_use

pytestmark = [pytest.mark.llama, pytest.mark.timeout(300)]

SWA_WINDOW = 128
SWA_LAYERS = 6  # gemma3 pattern 6: layers 0-4 sliding-window, layer 5 global


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("workload-models")
    paths = {
        "plain": write_f16_gguf(out / "plain-synthetic.gguf"),
        "chat": write_f16_gguf(out / "chat-synthetic.gguf", chat_template=CHATML_TEMPLATE),
        "swa": write_f16_gguf(out / "swa-synthetic.gguf", sliding_window=SWA_WINDOW, n_layer=SWA_LAYERS),
    }
    return paths


def _job(path: Path, *, params: dict[str, Any] | None = None, **workload: Any) -> dict[str, Any]:
    p = {
        "n_ctx": 512,
        "n_gpu_layers": 0,
        "n_threads": 1,
        "n_batch": 512,
        "n_ubatch": 512,
        "flash_attn": "off",
        "type_k": "f16",
        "type_v": "f16",
        "use_mmap": True,
        **(params or {}),
    }
    rendered = workload.pop("rendered_prompt", None)
    wl = {"name": "w", "prompt": "the model token speed", "prompt_tokens": None, "n_predict": 12}
    wl.update(workload)
    return {
        "model_path": str(path),
        "params": p,
        "workload": wl,
        "repeat": {"cold": 1, "warmup": 0, "steady": 1},
        "cold_only": False,
        "cold_rep": 0,
        "pause_between_reps": False,
        "rendered_prompt": rendered,
    }


def _run(job: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    child = run_child(job, 120, env=env_without_fault())
    assert child.status == "ok", (child.reason, child.log_tail[-1500:])
    assert child.loaded is not None
    return child.loaded["effective"], child.measurements


def _plan(text: str, tmp_path: Path):
    return parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)


# --- 1. parity with llama-bench ---------------------------------------------------------------------------


def _kv_mib(cells: int, layers: int, n_embd_kv: int, bytes_per: int = 2) -> float:
    # llama.cpp's KV size: cells x layers x (K row + V row), f16 = 2 bytes per element
    return cells * layers * 2 * n_embd_kv * bytes_per / (1024 * 1024)


def _pad(x: int, n: int = 256) -> int:
    return (x + n - 1) // n * n


def test_axes_a_plan_leaves_out_take_llama_bench_defaults(models, tmp_path: Path) -> None:
    # tools/llama-bench/llama-bench.cpp, cmd_params_defaults: -ngl -1 (all layers), -b 2048, -ub 512,
    # -fa auto, -ctk/-ctv f16, mmap on, --poll 50 (and -d 0)
    plan = _plan(
        f"""
[matrix]
models = ["{models['plain']}"]
threads = [1]
[[workload]]
name = "w"
prompt_tokens = 16
n_predict = 4
""",
        tmp_path,
    )
    (spec,) = expand(plan, {str(models["plain"]): "0" * 64})
    p = spec.params
    assert (p.n_gpu_layers, p.n_batch, p.n_ubatch, p.flash_attn) == (NGL_ALL, 2048, 512, "auto")
    assert (p.type_k, p.type_v, p.use_mmap, p.poll, p.depth) == ("f16", "f16", True, 50, 0)


def test_auto_flash_attn_records_what_llama_cpp_chose(models) -> None:
    eff, _ = _run(_job(models["plain"], params={"flash_attn": "auto", "n_gpu_layers": NGL_ALL}))
    assert eff["flash_attn"] == "auto"
    # the CPU backend has the kernel: llama.cpp's probe logs "Flash Attention enabled"
    assert eff["flash_attn_effective"] == "on"
    explicit, _ = _run(_job(models["plain"], params={"flash_attn": "off"}))
    assert explicit["flash_attn_effective"] == "off"


def test_flash_attn_effective_reads_llama_cpp_log_lines() -> None:
    assert flash_attn_effective("auto", ["resolve_fused_ops: Flash Attention enabled\n"]) == "on"
    off = "resolve_fused_ops: Flash Attention not supported, set to disabled\n"
    assert flash_attn_effective("auto", [off]) == "off"
    assert flash_attn_effective("auto", []) is None  # not said, so not guessed
    assert flash_attn_effective("on", []) == "on"


def test_gpu_in_use_needs_a_build_that_can_offload() -> None:
    def run(ngl: int, effective: dict[str, Any] | None) -> Run:
        return Run(n_gpu_layers=ngl, effective_json=json.dumps(effective) if effective is not None else None)

    assert not gpu_in_use(run(NGL_ALL, {"gpu_offload_supported": False}))  # CPU-only build ignores -ngl
    assert gpu_in_use(run(NGL_ALL, {"gpu_offload_supported": True}))
    assert not gpu_in_use(run(0, {"gpu_offload_supported": True}))
    assert gpu_in_use(run(20, None))  # a run from before the field: as before, -ngl decides


def test_parameters_in_effect_match_llama_bench_and_swa_cache_follows_its_formula(models) -> None:
    n_ctx, n_ubatch = 2048, 512
    eff, _ = _run(_job(models["swa"], params={"n_ctx": n_ctx, "n_ubatch": n_ubatch}))
    # llama-bench's to_llama_cparams: swa_full = false, offload_kqv, op_offload; one sequence, not unified
    keys = ("swa_full", "kv_unified", "offload_kqv", "op_offload", "n_seq_max", "poll")
    assert {k: eff[k] for k in keys} == {
        "swa_full": False,
        "kv_unified": False,
        "offload_kqv": True,
        "op_offload": True,
        "n_seq_max": 1,
        "poll": 50,
    }
    assert {k: v for k, v in PARITY_DEFAULTS.items() if k != "depth"} == {
        k: eff[k] for k in PARITY_DEFAULTS if k != "depth"
    }
    assert eff["n_swa"] == SWA_WINDOW and eff["n_ctx"] == n_ctx
    assert eff["load_mode_effective"] == "mmap"  # as llama.cpp resolved it (llama-bench AUTO: mmap on CPU)
    n_embd_kv = 256  # tiny: 4 KV heads x 64
    # llama-kv-cache-iswa.cpp: size_swa = GGML_PAD(min(n_ctx, n_swa * 1 + n_ubatch), 256); global layers n_ctx
    swa_cells = _pad(min(n_ctx, SWA_WINDOW + n_ubatch))
    caches = sorted(eff["kv_caches"], key=lambda c: c["cells"])
    assert caches == sorted(
        [
            {"cells": n_ctx, "layers": 1, "size_mib": _kv_mib(n_ctx, 1, n_embd_kv)},
            {"cells": swa_cells, "layers": 5, "size_mib": _kv_mib(swa_cells, 5, n_embd_kv)},
        ],
        key=lambda c: c["cells"],
    )
    expected = _kv_mib(n_ctx, 1, n_embd_kv) + _kv_mib(swa_cells, 5, n_embd_kv)
    assert eff["kv_cache_mib"] == pytest.approx(expected)

    # a unified cache shared by 3 sequences keeps 3 windows: GGML_PAD(min(n_ctx, n_swa * 3 + n_ubatch), 256)
    uni, _ = _run(
        _job(models["swa"], params={"n_ctx": n_ctx, "n_ubatch": 256, "kv_unified": True, "n_seq_max": 3})
    )
    assert uni["kv_unified"] is True and uni["n_seq_max"] == 3
    assert sorted(c["cells"] for c in uni["kv_caches"]) == [_pad(SWA_WINDOW * 3 + 256), n_ctx]  # 768
    one, _ = _run(_job(models["swa"], params={"n_ctx": n_ctx, "n_ubatch": 256}))
    assert sorted(c["cells"] for c in one["kv_caches"]) == [_pad(SWA_WINDOW + 256), n_ctx]  # 512

    # swa_full = true (llama_context_default_params()'s value) sizes every layer for the whole context
    full, _ = _run(_job(models["swa"], params={"n_ctx": n_ctx, "n_ubatch": n_ubatch, "swa_full": True}))
    assert full["swa_full"] is True
    assert {c["cells"] for c in full["kv_caches"]} == {n_ctx}
    assert full["kv_cache_mib"] == pytest.approx(_kv_mib(n_ctx, SWA_LAYERS, n_embd_kv))


def test_kv_log_parser_reads_llama_cpp_lines() -> None:
    line = (
        "llama_kv_cache: size =   36.00 MiB (  2048 cells,  18 layers,  1/1 seqs), K (f16):   18.00 MiB, "
        "V (f16):   18.00 MiB\n"
    )
    assert kv_cache_from_log(["other line\n", line]) == {
        "kv_caches": [{"size_mib": 36.0, "cells": 2048, "layers": 18}],
        "kv_cache_mib": 36.0,
    }
    assert kv_cache_from_log([]) == {"kv_caches": None, "kv_cache_mib": None}


def test_parity_axes_validate_and_only_move_spec_ids_off_their_defaults(models, tmp_path: Path) -> None:
    base = f'[matrix]\nmodels = ["{models["plain"]}"]\nctx = [512]\n'
    wl = '[[workload]]\nname = "w"\nprompt_tokens = 16\nn_predict = 4\n'
    plain = _plan(base + wl, tmp_path)
    explicit = _plan(
        base + "swa_full = [false]\nkv_unified = [false]\noffload_kqv = [true]\nop_offload = [true]\n"
        "poll = [50]\nn_seq_max = [1]\ndepth = [0]\n" + wl,
        tmp_path,
    )
    from edgeprof.plan import expand

    sha = {str(models["plain"]): "x" * 64}
    assert [s.spec_id for s in expand(plain, sha)] == [s.spec_id for s in expand(explicit, sha)]
    moved = _plan(base + "swa_full = [false, true]\n" + wl, tmp_path)
    ids = [s.spec_id for s in expand(moved, sha)]
    assert len(set(ids)) == 2 and ids[0] == expand(plain, sha)[0].spec_id
    with pytest.raises(PlanError) as exc:
        _plan(base + 'poll = [101]\nswa_full = ["no"]\nn_seq_max = [0]\n' + wl, tmp_path)
    text = "\n".join(exc.value.problems)
    assert "matrix.poll[0]" in text and "matrix.swa_full[0]" in text and "matrix.n_seq_max[0]" in text


# --- 2. chat workloads ------------------------------------------------------------------------------------

MESSAGES = (
    '[{ role = "system", content = "Be brief." }, { role = "user", content = "the model token speed" }]'
)


def test_chat_is_rendered_with_the_models_template_and_tokenized_with_specials(
    models, tmp_path: Path
) -> None:
    plan = _plan(
        f'[matrix]\nmodels = [{{ path = "{models["chat"]}", label = "chat-synth" }}]\nctx = [512]\n'
        f'[[workload]]\nname = "chat"\nmessages = {MESSAGES}\nn_predict = 8\n'
        "[repeat]\ncold = 1\nwarmup = 0\nsteady = 1\n",
        tmp_path,
    )
    rendered = plan.rendered[("chat-synth", "chat")]
    assert rendered == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nthe model token speed<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    wl = plan.workloads[0]
    assert wl.ignore_eos is False and wl.parse_special is True  # a chat stops at EOS by default

    engine = open_engine(f"sqlite:///{tmp_path / 'chat.db'}")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_without_fault())
    assert outcome.counts == {"ok": 1}
    rows = build_rows(new_session(engine), outcome.sweep_id)
    row = rows[0]
    assert row["parse_special"] is True
    assert row["prompt_sha256"] == hashlib.sha256(rendered.encode()).hexdigest()
    # the plan left flash_attn out: llama-bench's "auto", and the report says what llama.cpp chose on the CPU
    assert (row["flash_attn"], row["flash_attn_effective"]) == ("auto", "on")

    # the same text tokenized without specials is much longer: each '<|im_start|>' becomes many pieces
    with_specials = _run(_job(models["chat"], rendered_prompt=rendered))[1][0]
    as_text = _run(_job(models["chat"], prompt=rendered, parse_special=False))[1][0]
    assert row["prompt_n_tokens"] == with_specials["prompt_n_tokens"] == with_specials["n_prompt"]
    # 5 specials: one token each when parsed, several pieces each as text
    assert as_text["prompt_n_tokens"] >= with_specials["prompt_n_tokens"] + 5 * 3
    assert as_text["parse_special"] is False and with_specials["parse_special"] is True


def test_chat_on_a_model_without_template_is_refused_before_anything_runs(models, tmp_path: Path) -> None:
    text = (
        f'[matrix]\nmodels = [{{ path = "{models["plain"]}", label = "plain-synth" }}]\nctx = [512]\n'
        f'[[workload]]\nname = "chat"\nmessages = {MESSAGES}\nn_predict = 8\n'
    )
    with pytest.raises(PlanError) as exc:
        _plan(text, tmp_path)
    assert any("plain-synth has no chat template" in p for p in exc.value.problems)
    assert not list(tmp_path.glob("*.db"))
    # the plan may give the template itself (here, in the workload)
    template_line = f"chat_template = {json.dumps(CHATML_TEMPLATE)}\n"
    with_template = text.replace("n_predict = 8\n", "n_predict = 8\n" + template_line)
    plan = _plan(with_template, tmp_path)
    assert plan.rendered[("plain-synth", "chat")].startswith("<|im_start|>system\n")


def test_render_strips_a_bos_the_tokenizer_adds_itself(models) -> None:
    meta = read_chat_meta(models["chat"])
    assert meta.bos_token == "<s>" and meta.add_bos is True
    out = render_chat("{{ bos_token }}{{ messages[0]['content'] }}", [("user", "hi")], bos_token="<s>",
                      eos_token="</s>", add_bos=True)
    assert out == "hi"
    kept = render_chat("{{ bos_token }}hi", [("user", "x")], bos_token="<s>", eos_token="</s>", add_bos=False)
    assert kept == "<s>hi"


def test_chat_meta_is_read_bounded_and_matches_the_gguf_reader(models, tmp_path: Path) -> None:
    import gguf

    # a long template (tool-calling templates run to tens of KB) is kept whole, not dropped as "too long"
    long_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}" + "{# padding #}" * 1200
    path = tmp_path / "long-template-synthetic.gguf"
    write_f16_gguf(path, chat_template=long_template, eos_token_id=7)
    meta = read_chat_meta(path)
    assert len(long_template) > 4096 and meta.template == long_template
    reader = gguf.GGUFReader(str(path), "r")
    tokens = reader.fields["tokenizer.ggml.tokens"]
    assert meta.bos_token == bytes(tokens.parts[tokens.data[1]]).decode()
    assert meta.eos_token == bytes(tokens.parts[tokens.data[7]]).decode()  # a token deep in the array
    assert meta.add_bos is True
    assert read_chat_meta(models["plain"]).template is None


# --- 3. EOS, visible and honest ---------------------------------------------------------------------------


def test_early_eos_shows_tokens_out_eos_and_tg_over_decoded_tokens(models, tmp_path: Path) -> None:
    # Make the greedy chain's 5th token the EOS of a copy of the model: the run must stop right there.
    _, ms = _run(_job(models["plain"], ignore_eos=True, n_predict=12))
    chain = ms[0]["output_tokens"]
    k = next(i for i in range(3, len(chain)) if chain[i] not in chain[:i] and chain[i] > 3)
    eos_model = write_f16_gguf(tmp_path / "eos-synthetic.gguf", eos_token_id=chain[k])

    plan = _plan(
        f'[matrix]\nmodels = [{{ path = "{eos_model}", label = "eos-synth" }}]\nctx = [512]\n'
        '[[workload]]\nname = "text"\nprompt = "the model token speed"\nn_predict = 12\n'
        "[repeat]\ncold = 1\nwarmup = 0\nsteady = 2\n",
        tmp_path,
    )
    assert plan.workloads[0].ignore_eos is False  # text prompts stop at EOS by default
    engine = open_engine(f"sqlite:///{tmp_path / 'eos.db'}")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_without_fault())
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        steady = [m for m in run.measurements if m.kind == "steady"]
        for m in steady:
            assert m.finish_reason == "eos" and m.tokens_out == k + 1 < 12
            assert m.first_eos_index == k
            assert m.n_gen == k  # decode steps actually run (the first token came from the prefill)
            assert m.tg_tps == pytest.approx(m.n_gen / (m.decode_ms / 1000.0))
        rows = build_rows(s, outcome.sweep_id)
    row = rows[0]
    assert row["tokens_out_median"] == k + 1 and row["eos_count"] == 2 and row["ignore_eos"] is False
    assert fmt_tokens_out(row) == f"{k + 1}/12 eos 2/2"
    assert f"{k + 1}/12 eos 2/2" in render_table(rows)

    # ignore_eos = true: the length is reached, but the first EOS is still noted for the quality column
    _, ignored = _run(_job(eos_model, ignore_eos=True, n_predict=12))
    assert ignored[0]["finish_reason"] == "length" and ignored[0]["tokens_out"] == 12
    assert ignored[0]["first_eos_index"] == k


def test_tg_is_null_below_two_decode_steps_and_synthetic_prompts_ignore_eos(
    models, tmp_path: Path
) -> None:
    _, ms = _run(_job(models["plain"], n_predict=2, ignore_eos=True))
    assert ms[0]["n_gen"] == 1 and ms[0]["tg_tps"] is None
    plan = _plan(
        f'[matrix]\nmodels = ["{models["plain"]}"]\nctx = [512]\n'
        '[[workload]]\nname = "s"\nprompt_tokens = 16\nn_predict = 4\n'
        '[[workload]]\nname = "t"\nprompt = "x"\nn_predict = 4\n',
        tmp_path,
    )
    assert [w.ignore_eos for w in plan.workloads] == [True, False]


def test_stop_strings_end_with_finish_reason_stop(models) -> None:
    _, ms = _run(_job(models["plain"], ignore_eos=True, n_predict=12))
    text = ms[0]["output_text"]
    stop = text[len(text) // 3 : len(text) // 3 + 2]
    _, stopped = _run(_job(models["plain"], ignore_eos=True, n_predict=12, stop=[stop]))
    assert stopped[0]["finish_reason"] == "stop" and stopped[0]["tokens_out"] < 12


# --- 4. depth ---------------------------------------------------------------------------------------------


def test_depth_fills_the_kv_cache_before_the_request(models) -> None:
    _, at0 = _run(_job(models["plain"], n_predict=6, ignore_eos=True))
    job = _job(models["plain"], params={"depth": 200}, n_predict=6, ignore_eos=True)
    job["repeat"]["steady"] = 2
    eff, at200 = _run(job)
    assert eff["depth"] == 200
    assert at0[0]["kv_used_cells"] == at0[0]["prompt_n_tokens"] + 5  # last token sampled, not decoded
    for m in at200:
        assert m["kv_used_cells"] == at0[0]["kv_used_cells"] + 200
        assert m["n_prompt"] == at0[0]["n_prompt"]  # the fill is not the request's prefill
    # the first request fills (timed apart), later ones restore the saved state
    assert at200[0]["depth_fill_ms"] is not None and at200[-1]["depth_fill_ms"] is None


def test_depth_validation_needs_room_for_depth_prompt_and_output(models, tmp_path: Path) -> None:
    with pytest.raises(PlanError) as exc:
        _plan(
            f'[matrix]\nmodels = ["{models["plain"]}"]\nctx = [512]\ndepth = [0, 500]\n'
            '[[workload]]\nname = "w"\nprompt_tokens = 16\nn_predict = 8\n',
            tmp_path,
        )
    assert exc.value.problems == [
        "workload 'w': ctx 512 < depth (500) + prompt tokens (16) + n_predict (8) - 1 = 523"
    ]


# --- 5. per-model workloads -------------------------------------------------------------------------------


def test_workload_applies_only_to_its_models_and_check_counts_per_model(models, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from edgeprof.cli import app

    text = (
        f'[matrix]\nmodels = [{{ path = "{models["plain"]}", label = "plain-synth" }}, '
        f'{{ path = "{models["chat"]}", label = "chat-synth", prompt = "edge device" }}]\nctx = [512, 256]\n'
        f'[[workload]]\nname = "chat"\nmessages = {MESSAGES}\nn_predict = 8\nmodels = ["chat-synth"]\n'
        '[[workload]]\nname = "text"\nprompt = "the model token speed"\nn_predict = 8\n'
    )
    plan = _plan(text, tmp_path)
    assert plan.specs_per_model() == {"plain-synth": 2, "chat-synth": 4}
    from edgeprof.plan import expand

    specs = expand(plan, {str(models["plain"]): "a" * 64, str(models["chat"]): "b" * 64})
    assert sorted((s.model.label, s.workload.name) for s in specs).count(("plain-synth", "chat")) == 0
    # a model's own prompt replaces a text workload's prompt on that model only
    prompts = {(s.model.label, s.workload.name): s.workload.prompt for s in specs}
    assert prompts[("chat-synth", "text")] == "edge device"
    assert prompts[("plain-synth", "text")] == "the model token speed"

    plan_path = tmp_path / "p.toml"
    plan_path.write_text(text)
    result = CliRunner().invoke(app, ["run", str(plan_path), "--check"])
    assert result.exit_code == 0, result.output
    assert "plain-synth: 2 configs" in result.output and "chat-synth: 4 configs" in result.output

    bad = text.replace('models = ["chat-synth"]', 'models = ["nope"]')
    with pytest.raises(PlanError) as exc:
        _plan(bad, tmp_path)
    assert any("no model labelled or grouped 'nope'" in p for p in exc.value.problems)
