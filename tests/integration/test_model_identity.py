"""The model loaded is the model hashed: a model file replaced after the sweep hashed it (here, the Q4_K_M
file overwritten by the Q8_0 one) fails its run with the reason, never stored as measured under the
hashed file's sha256, quant and bits per weight."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.hostile_cases import case
from support.plans import plan_toml

import edgeprof.sweep.loop as loop
from edgeprof.plan import parse_plan
from edgeprof.runners.llama_context import check_loaded_size, check_model_file
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Run
from edgeprof.sweep import run_plan

pytestmark = [pytest.mark.llama, pytest.mark.timeout(300)]


@pytest.mark.parametrize("hostile", [case("model-replaced-mid-sweep")], ids=lambda c: c.id)
def test_a_model_replaced_after_it_was_hashed_fails_its_run(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, hostile: object
) -> None:
    model = tmp_path / "model.gguf"
    shutil.copy(tiny_models["Q4_K_M"], model)
    hashed = loop.hash_models

    def hash_then_replace(*args: Any, **kwargs: Any) -> Any:
        rows = hashed(*args, **kwargs)
        shutil.copy(tiny_models["Q8_0"], model)  # another quant under the same name, after the hash
        return rows

    monkeypatch.setattr(loop, "hash_models", hash_then_replace)
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
