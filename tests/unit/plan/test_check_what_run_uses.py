"""``run --check`` validates what ``run`` will use: a GGUF whose counts llama.cpp cannot hold
(``context_length`` 2^64-1, ``block_count`` 2^63, ``head_count_kv`` given as text) and a collector name
that does not exist are plan errors, one line each, before anything runs (they once passed the check and
crashed ``run`` and ``bench``). SYNTHETIC GGUF files, written with gguf-py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.hostile_cases import case
from support.plans import plan_toml
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.gguf import GGUFError, read_model_shape


def synthetic_gguf(path: Path, **keys: Any) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_name("synthetic-hostile-counts")
    values = {"context_length": 4096, "embedding_length": 8, "block_count": 1, "attention.head_count": 1}
    values |= keys
    for key, value in values.items():
        full = f"llama.{key}"
        if isinstance(value, list):
            writer.add_array(full, value)
        elif value >= 1 << 32:
            writer.add_uint64(full, value)
        else:
            writer.add_uint32(full, value)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("hostile", [case("gguf-counts-out-of-range")], ids=lambda c: c.id)
@pytest.mark.parametrize(
    ("keys", "word"),
    [
        ({"context_length": (1 << 64) - 1}, "context_length"),
        ({"block_count": 1 << 63}, "block_count"),
        ({"attention.head_count_kv": ["a", "b"]}, "head_count_kv"),
    ],
    ids=["ctx-2^64", "layers-2^63", "kv-heads-text"],
)
def test_a_gguf_with_counts_llama_cpp_cannot_hold_fails_the_check(
    tmp_path: Path, keys: dict[str, Any], word: str, hostile: object
) -> None:
    model = synthetic_gguf(tmp_path / "synthetic.gguf", **keys)
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_toml({"m": model}))
    result = CliRunner().invoke(app, ["run", "--check", str(plan), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2, result.output
    assert word in result.output and "Traceback" not in result.output
    if word != "context_length":
        with pytest.raises(GGUFError, match=word):
            read_model_shape(model)


@pytest.mark.parametrize("hostile", [case("collector-name-typo")], ids=lambda c: c.id)
def test_an_unknown_collector_name_fails_the_check(tmp_path: Path, hostile: object) -> None:
    model = synthetic_gguf(tmp_path / "synthetic.gguf")
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_toml({"m": model}, tables={"collect": {"collectors": ["psutil"]}}))
    result = CliRunner().invoke(app, ["run", "--check", str(plan), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2, result.output
    assert "unknown collector(s) 'psutil'" in result.output and "psutil_host" in result.output


def test_an_ordinary_synthetic_gguf_passes(tmp_path: Path) -> None:
    model = synthetic_gguf(tmp_path / "synthetic.gguf", **{"attention.head_count_kv": 1})
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_toml({"m": model}, tables={"collect": {"collectors": ["psutil_host"]}}))
    result = CliRunner().invoke(app, ["run", "--check", str(plan), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("hostile", [case("chat-template-over-1-mib")], ids=lambda c: c.id)
def test_a_template_over_the_read_limit_is_said_too_long_not_missing(tmp_path: Path, hostile: object) -> None:
    import gguf

    from edgeprof.gguf.bounded import MAX_TEMPLATE_BYTES

    path = tmp_path / "synthetic-long-template.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    for key, value in {"context_length": 4096, "embedding_length": 8, "block_count": 1}.items():
        writer.add_uint32(f"llama.{key}", value)
    writer.add_chat_template("x" * (MAX_TEMPLATE_BYTES + 1))
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    workload = {"name": "c", "messages": [{"role": "user", "content": "hi"}], "n_predict": 4}
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_toml({"m": path}, workloads=[workload]))
    result = CliRunner().invoke(app, ["run", "--check", str(plan), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2, result.output
    assert f"more than the {MAX_TEMPLATE_BYTES} read" in result.output
    assert "no chat template" not in result.output
