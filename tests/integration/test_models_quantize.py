"""``edgeprof models quantize`` (agent/gguf/quantizer.py) on a generated F16 model: the three quants made by
llama.cpp's quantizer; an already-quantized source refused in one line; with ``--allow-requantize`` the files
marked in their own metadata, and every report format marks them; the tensor-type mix in ``report --wide``,
JSON and HTML, with its warning where most matrices are not the named type.

Mutant seen failing: the mark not read back (``REQUANT_KEY`` misspelt in ``tensor_mix``)."""

from __future__ import annotations

import json
from pathlib import Path

from support.plans import plan_toml
from support.runs import edgeprof, one_line_error

from edgeprof.gguf import read_gguf_info, write_f16_gguf
from edgeprof.gguf.quantizer import REQUANT_KEY, TensorMix, tensor_mix


def test_quantize_makes_the_three_and_refuses_or_marks_a_requantization(tmp_path: Path) -> None:
    src = write_f16_gguf(tmp_path / "m-f16.gguf", "tiny")
    out = tmp_path / "q"
    done = edgeprof("models", "quantize", str(src), "--types", "Q8_0,Q5_K_M,Q4_K_M", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    made = {q: out / f"m-f16-{q.lower()}.gguf" for q in ("Q8_0", "Q5_K_M", "Q4_K_M")}
    for quant, path in made.items():
        assert f"{quant:7s} {path}" in done.stdout
        assert read_gguf_info(path).quant_type == quant
        assert tensor_mix(path).requantized_from is None
    assert "requantized" not in done.stdout

    line = one_line_error(edgeprof("models", "quantize", str(made["Q8_0"]), "--types", "Q4_K_M"))
    assert line.startswith(f"edgeprof: error: {made['Q8_0']} is already quantized (Q8_0: Q8_0 ")
    assert "--allow-requantize" in line
    assert not (made["Q8_0"].parent / "m-f16-q8_0-q4_k_m.gguf").exists()

    again = edgeprof(
        "models", "quantize", str(made["Q8_0"]), "--types", "Q4_K_M", "--out", str(tmp_path / "r"),
        "--allow-requantize",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    requant = tmp_path / "r" / "m-f16-q8_0-q4_k_m.gguf"
    mark = tensor_mix(requant).requantized_from
    assert mark is not None and mark.startswith("Q8_0 (sha256 ") and REQUANT_KEY
    assert read_gguf_info(requant).quant_type == "Q4_K_M"
    assert "note: requantized from Q8_0" in again.stdout

    plan = tmp_path / "plan.toml"
    plan.write_text(
        plan_toml(
            {"q8": made["Q8_0"], "rq4": requant},
            workloads=[{"name": "w", "prompt_tokens": 8, "n_predict": 4}],
            repeat={"cold": 1, "warmup": 0, "steady": 1},
            run={"timeout_s": 60, "cold_cache": "keep"},
        )
    )
    db = tmp_path / "e.db"
    ran = edgeprof("run", str(plan), "--db", str(db))
    assert ran.returncode == 0, ran.stderr[-2000:]
    rows = json.loads(edgeprof("report", "--db", str(db), "--format", "json").stdout)
    by = {r["model_label"]: r for r in rows}
    assert by["rq4"]["requantized_from"] == mark and by["q8"]["requantized_from"] is None
    assert by["q8"]["tensor_mix"].startswith("Q8_0 ") and by["q8"]["tensor_mix_warning"] is None
    assert "Q4_K" in by["rq4"]["tensor_mix"]
    for fmt in ("table", "md"):
        text = edgeprof("report", "--db", str(db), "--format", fmt, "--wide").stdout
        assert "requantized from Q8_0" in text, fmt
    assert mark in edgeprof("report", "--db", str(db), "--format", "csv").stdout  # its requantized_from
    wide = edgeprof("report", "--db", str(db), "--wide").stdout
    assert "tensor types" in wide and "Q8_0 " in wide
    html = tmp_path / "r.html"
    assert edgeprof("report", "--db", str(db), "--html", str(html), "--wide").returncode == 0
    page = html.read_text()
    assert "tensor types" in page and "requantized from Q8_0" in page


def test_a_mix_mostly_of_other_types_is_warned() -> None:
    # a "Q5_K_M" whose row lengths are no multiple of 256: llama.cpp fell back for 180 of 272 matrices
    mix = TensorMix({"Q5_0": 0.6, "Q5_K": 0.38, "F32": 0.02}, "Q5_K", 92 / 272, 272)
    assert mix.warning == "only 92 of 272 weight matrices are Q5_K: the rest fell back to other types"
    assert mix.describe() == "Q5_0 60 %, Q5_K 38 %, F32 2 %"
    assert TensorMix({"Q5_K": 1.0}, "Q5_K", 0.5, 10).warning is None  # half is not "most are not"
    assert TensorMix({"Q5_K": 1.0}, "Q5_K", 0.49, 100).warning is not None
