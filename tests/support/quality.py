"""The quality plan the quality tests share: the tiny F16 model twice (the reference and a copy of it under
another label) and the Q4_K_M one, scored on 2 chunks of 64 tokens.

- ``quality_plan(tmp_path, models, **workload)``: that plan, parsed; ``workload`` adds keys to its workload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgeprof.plan import Plan, parse_plan
from support.plans import plan_toml


def quality_plan_toml(models: dict[str, Path], **workload: Any) -> str:
    entries = [
        {"path": str(models["F16"]), "label": "f16"},
        {"path": str(models["F16"]), "label": "f16-copy"},
        {"path": str(models["Q4_K_M"]), "label": "q4"},
    ]
    kld = {"name": "kld", "kind": "quality", "ctx": 64, "chunks": 2, **workload}
    return plan_toml(entries, name="quality", workloads=[kld], repeat={"warmup": 0, "steady": 1})


def quality_plan(tmp_path: Path, models: dict[str, Path], **workload: Any) -> Plan:
    return parse_plan(
        quality_plan_toml(models, **workload), source=str(tmp_path / "plan.toml"), base=tmp_path
    )
