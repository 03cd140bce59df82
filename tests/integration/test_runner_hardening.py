"""The worker process (runners/): it never imports from the working directory, and the test-only fault
injection does nothing unless the suite armed it. Real tiny models, real workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.runs import clean_env, two_quant_plan

from edgeprof.plan import expand, parse_plan
from edgeprof.runners import run_child


def test_a_json_py_in_the_working_directory_never_runs_inside_a_worker(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "hijacked"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit(9)\n")
    plan = parse_plan(two_quant_plan(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    spec = expand(plan, {m.path: "0" * 64 for m in plan.models})[0]
    monkeypatch.chdir(tmp_path)
    result = run_child(spec.job(), 120, env=clean_env())
    assert result.status == "ok", result.reason
    assert not marker.exists()


def test_fault_injection_without_the_suite_arming_it_has_no_effect(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    plan = parse_plan(two_quant_plan(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    spec = expand(plan, {m.path: "0" * 64 for m in plan.models})[0]
    unarmed = run_child(spec.job(), 120, env=clean_env("kill@load", armed=False))
    assert unarmed.status == "ok", unarmed.reason
    armed = run_child(spec.job(), 120, env=clean_env("kill@load"))
    assert armed.status == "crashed" and armed.injected_fault == "kill@load"
    assert (armed.reason or "").startswith("injected by the test suite (kill@load)")
