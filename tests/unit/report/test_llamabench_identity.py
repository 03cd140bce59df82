"""llama-bench's identity of a test as edgeprof writes and reads it (agent/report/llamabench/identity.py,
model_desc.py): llama.cpp's model description and file-type names, the build that ran, the context one
command line gives every test, and "every layer" as llama.cpp applies -ngl."""

from __future__ import annotations

import json

import pytest

from edgeprof.report.llamabench.identity import (
    bench_ngl,
    build_identity,
    ctx_of_test,
    imported_quant,
    ngl_key,
)
from edgeprof.report.llamabench.model_desc import (
    FTYPE_NAMES,
    QUANT_FTYPES,
    ftype_name,
    model_desc,
    quant_of_desc,
)

pytestmark = pytest.mark.timeout(30)


def test_file_types_are_named_as_llama_cpp_names_them() -> None:
    # llama_ftype_name (src/llama-model-loader.cpp): what llama-bench prints inside model_type
    assert ftype_name(15, None) == "Q4_K - Medium"
    assert ftype_name(17, "Q5_K_M") == "Q5_K - Medium"
    assert ftype_name(7, None) == "Q8_0" and ftype_name(1, None) == "F16" and ftype_name(0, None) == "all F32"
    assert ftype_name(None, "Q4_K_M") == "(guessed) Q4_K - Medium"  # no general.file_type in the file
    assert ftype_name(9999, None) == "unknown, may not work"
    assert model_desc("qwen2", 15, "Q4_K_M") == "qwen2 ?B Q4_K - Medium"


def test_every_quant_name_maps_back_from_its_description() -> None:
    for quant, ftype in QUANT_FTYPES.items():
        assert quant_of_desc(f"llama 1.5B {FTYPE_NAMES[ftype]}") == quant, quant
    assert quant_of_desc("llama ?B Q2_K - Small") == "Q2_K_S"  # not Q2_K: the longer name wins
    assert quant_of_desc("llama ?B (guessed) Q4_K - Medium") == "Q4_K_M"
    assert quant_of_desc("llama ?B something else") is None and quant_of_desc(None) is None
    record = {"llama_bench": {"model_type": "llama 8B Q4_K - Medium"}}
    assert imported_quant(json.dumps(record)) == "Q4_K_M"
    assert imported_quant(None) is None and imported_quant("{}") is None


def test_the_build_that_ran() -> None:
    # an import keeps what llama-bench printed
    assert build_identity('{"commit": "abc1234", "build_number": 6000}', None) == ("abc1234", 6000)
    # in-process: ggml's commit of the loaded library, without git's -dirty (llama.cpp's build-info has none)
    assert build_identity("{}", "ggml 0.25.3 (commit 0c1e570-dirty)") == ("0c1e570", 0)
    assert build_identity(None, "ggml 0.25.3 (commit unknown)") == ("unknown", 0)
    # llama-server says both
    assert build_identity(None, "version: 6123 (d0c2b35)\nbuilt with cc") == ("d0c2b35", 6123)
    assert build_identity(None, None) == ("unknown", 0)


def test_each_test_has_its_own_context() -> None:
    # llama-bench's p + n + d per test: pp512 at 512, tg128 at 128 (llama.cpp pads both to 256 or more)
    assert ctx_of_test(512, 0, 0) == 512 and ctx_of_test(0, 128, 0) == 128
    assert ctx_of_test(512, 128, 4096) == 4096 + 640


def test_every_layer_is_one_setting() -> None:
    assert ngl_key(-1) == ngl_key(999) == ngl_key(99, n_layers=28) == "all"
    assert ngl_key(28, n_layers=28) == 28  # 28 of 28 repeating layers leaves the output layer on the CPU
    assert ngl_key(99) == 99 and ngl_key(0) == 0 and ngl_key(None) is None
    assert bench_ngl(999) == bench_ngl(-1) == -1 and bench_ngl(12) == 12


def test_compare_pairs_every_spelling_of_every_layer() -> None:
    from edgeprof.report.compare import compare_rows

    def row(ngl: int, run_id: int, n_layers: int | None = 2) -> dict:
        return {"model_label": "m", "quant": "Q8_0", "ctx": 65, "ngl": ngl, "threads": 1, "n_batch": 2048,
                "flash_attn": "auto", "type_k": "f16", "type_v": "f16", "workload": "tg16", "run_id": run_id,
                "status": "ok", "_n_layers": n_layers}  # fmt: skip

    paired = compare_rows([row(999, 1)], [row(99, 2)])  # a plan's "all" and llama-bench's README 99
    assert [r["match"] for r in paired] == ["both"]
    assert [r["match"] for r in compare_rows([row(-1, 1)], [row(999, 2)])] == ["both"]
    apart = compare_rows([row(2, 1)], [row(999, 2)])  # 2 of 2 layers leaves the output layer on the CPU
    assert [r["match"] for r in apart] == ["only_a", "only_b"]
    unknown = compare_rows([row(99, 1, None)], [row(999, 2, None)])  # no layer count: 99 is a number
    assert [r["match"] for r in unknown] == ["only_a", "only_b"]


def test_a_foreign_servers_reported_file_type_is_its_quant() -> None:
    # llama-server's /v1/models "meta" as the openai runner stores it with the run (seen on this build)
    meta = {"n_params": 2229504, "ftype": "Q4_K - Medium"}
    effective = {"server": {"endpoint": "chat", "model_meta": meta}}
    assert imported_quant(json.dumps(effective)) == "Q4_K_M"
    assert imported_quant(json.dumps({"server": {"model_meta": None}})) is None
