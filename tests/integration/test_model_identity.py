"""The model loaded is the model hashed: a model file replaced after the sweep hashed it (here, the Q4_K_M
file overwritten by the Q8_0 one) fails its run with the reason, never stored as measured under the
hashed file's sha256, quant and bits per weight: in the worker, in the quality worker (reference and
variant) and under llama-server."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.hostile_cases import case
from support.plans import plan_toml
from support.serving import needs_server

import edgeprof.executors.serving as serving_executor
import edgeprof.sweep.loop as loop
from edgeprof.plan import parse_plan
from edgeprof.runners.protocol import check_loaded_size, check_model_file
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Run
from edgeprof.sweep import run_plan

pytestmark = [pytest.mark.llama, pytest.mark.timeout(300)]


def replace_after_hashing(monkeypatch: pytest.MonkeyPatch, target: Path, by: Path) -> None:
    """The sweep hashes its models, then ``target`` is overwritten with ``by`` before any config runs."""
    hashed = loop.hash_models

    def hash_then_replace(*args: Any, **kwargs: Any) -> Any:
        rows = hashed(*args, **kwargs)
        shutil.copy(by, target)
        return rows

    monkeypatch.setattr(loop, "hash_models", hash_then_replace)


@pytest.mark.parametrize("hostile", [case("model-replaced-mid-sweep")], ids=lambda c: c.id)
def test_a_model_replaced_after_it_was_hashed_fails_its_run(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, hostile: object
) -> None:
    model = tmp_path / "model.gguf"
    shutil.copy(tiny_models["Q4_K_M"], model)
    replace_after_hashing(monkeypatch, model, tiny_models["Q8_0"])  # another quant under the same name
    engine = open_engine(tmp_path / "s.db")
    plan = parse_plan(plan_toml({"q4": model}), base=tmp_path)
    run_plan(engine, plan, out=io.StringIO())
    with new_session(engine) as s:
        runs = list(s.scalars(select(Run)))
        assert len(runs) == 1 and runs[0].status != "ok"
        assert "changed after it was hashed" in (runs[0].reason or ""), runs[0].reason
        assert not list(s.scalars(select(Measurement).where(Measurement.kind == "steady")))
    engine.dispose()


def test_the_checks_pass_the_file_that_was_hashed_and_name_what_differs(tiny_models: dict[str, Path]) -> None:
    path = tiny_models["Q4_K_M"]
    st = path.stat()
    check_model_file(str(path), {"size_bytes": st.st_size, "mtime_ns": st.st_mtime_ns})
    with pytest.raises(RuntimeError, match="changed after it was hashed"):
        check_model_file(str(path), {"size_bytes": st.st_size + 1, "mtime_ns": st.st_mtime_ns})
    check_loaded_size(1000, {"tensor_bytes": 1000})
    with pytest.raises(RuntimeError, match="not the model hashed"):
        check_loaded_size(1000, {"tensor_bytes": 999})


@pytest.mark.parametrize("replaced", ["variant", "reference"])
def test_a_quality_model_replaced_after_it_was_hashed_is_never_scored_under_the_old_sha256(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, replaced: str
) -> None:
    """The quality worker checks the file it loads too, the reference's (whose log-probs are cached under its
    sha256) as well as the variant's."""
    ref, variant = tmp_path / "ref.gguf", tmp_path / "variant.gguf"
    shutil.copy(tiny_models["F16"], ref)
    shutil.copy(tiny_models["Q4_K_M"], variant)
    replace_after_hashing(monkeypatch, variant if replaced == "variant" else ref, tiny_models["Q8_0"])
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    kld = {"name": "kld", "kind": "quality", "ctx": 64, "chunks": 2}
    text = plan_toml({"f16": ref, "q4": variant}, workloads=[kld], repeat={"warmup": 0, "steady": 1})
    engine = open_engine(tmp_path / "q.db")
    run_plan(engine, parse_plan(text, base=tmp_path), out=io.StringIO())
    with new_session(engine) as s:
        runs = {r.model_label: r for r in s.scalars(select(Run))}
        scored = {r.model_label for r in runs.values() if r.status == "ok"}
    # the reference's own run loads the reference; the variant's loads both
    assert scored == ({"f16"} if replaced == "variant" else set()), {k: r.reason for k, r in runs.items()}
    assert "changed after it was hashed" in (runs["q4"].reason or ""), runs["q4"].reason
    engine.dispose()


def _served(tmp_path: Path, model: Path) -> Run:
    from support.serving import serving_plan_toml

    engine = open_engine(tmp_path / "srv.db")
    text = serving_plan_toml(model, conc=(1,), requests=2, repeat={"steady": 1})
    run_plan(engine, parse_plan(text, base=tmp_path), out=io.StringIO())
    with new_session(engine) as s:
        [run] = list(s.scalars(select(Run)))
        s.expunge(run)
    engine.dispose()
    return run


@needs_server
def test_llama_server_on_a_model_replaced_after_it_was_hashed_fails_its_level(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "model.gguf"
    shutil.copy(tiny_models["Q4_K_M"], model)
    replace_after_hashing(monkeypatch, model, tiny_models["Q8_0"])
    run = _served(tmp_path, model)
    assert run.status == "load_failed" and "changed after it was hashed" in (run.reason or ""), run.reason


@needs_server
def test_llama_servers_own_size_of_what_it_loaded_is_checked_against_the_hashed_tensor_bytes(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the server says it loaded (/v1/models meta.size) must be the hashed file's tensor bytes: here the
    hashed figure is made one byte off, which only that check can see."""
    real = serving_executor.file_identity

    def one_byte_off(mf: Any) -> dict[str, Any] | None:
        identity = real(mf)
        assert identity is not None and identity["tensor_bytes"]
        return {**identity, "tensor_bytes": identity["tensor_bytes"] + 1}

    monkeypatch.setattr(serving_executor, "file_identity", one_byte_off)
    run = _served(tmp_path, tiny_models["Q4_K_M"])
    assert run.status == "load_failed" and "not the model hashed" in (run.reason or ""), run.reason
