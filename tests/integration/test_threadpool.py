"""The worker attaches a persistent CPU threadpool (runners/threadpool.py), as llama-bench does, and a pool
changes no output: the same greedy tokens with and without it. Runs llama.cpp in a child process (a wrong
ctypes layout would crash it, and must fail the test rather than the test runner)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.plans import plan_toml

pytestmark = [pytest.mark.llama, pytest.mark.timeout(300)]

SCRIPT = r"""
import ctypes, json, sys
import llama_cpp as ll
from edgeprof.runners import threadpool as tp

ll.llama_backend_init()
cb = ll.llama_log_callback(lambda *_: None)
ll.llama_log_set(cb, ctypes.c_void_p(0))
mp = ll.llama_model_default_params()
model = ll.llama_model_load_from_file(sys.argv[1].encode(), mp)
cp = ll.llama_context_default_params()
cp.n_ctx, cp.n_threads, cp.n_threads_batch = 128, 2, 2
ctx = ll.llama_init_from_model(model, cp)
mem = ll.llama_get_memory(ctx)

def greedy(n):
    ll.llama_memory_clear(mem, True)
    s = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    ll.llama_sampler_chain_add(s, ll.llama_sampler_init_greedy())
    toks = [1, 5, 9, 13, 17]
    arr = (ll.llama_token * len(toks))(*toks)
    assert ll.llama_decode(ctx, ll.llama_batch_get_one(arr, len(toks))) == 0
    out = []
    for _ in range(n):
        t = ll.llama_sampler_sample(s, ctx, -1)
        out.append(int(t))
        one = (ll.llama_token * 1)(t)
        assert ll.llama_decode(ctx, ll.llama_batch_get_one(one, 1)) == 0
    ll.llama_sampler_free(s)
    return out

plain = greedy(12)
pool, why = tp.attach(ll, ctx, 2, poll=50)
assert pool is not None, why
pooled = greedy(12)
tp.detach(ll, ctx)
pool.free()
again = greedy(12)
ll.llama_free(ctx)
ll.llama_model_free(model)
print(json.dumps({"plain": plain, "pooled": pooled, "again": again, "desc": pool.describe()}))
"""


def test_a_pool_attaches_detaches_and_changes_no_output(tiny_models: dict[str, Path]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tiny_models["Q8_0"])],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["plain"] == out["pooled"] == out["again"]
    assert out["desc"] == {"n_threads": 2, "poll": 50}


def test_the_worker_reports_its_attached_pool(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    import io

    from sqlalchemy import select

    from edgeprof.plan import parse_plan
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.models import Run
    from edgeprof.sweep import run_plan

    text = plan_toml(
        {"q8": tiny_models["Q8_0"]},
        name="threadpool",
        ctx=[128],
        threads=[2],
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 4}],
        repeat={"cold": 1, "warmup": 0, "steady": 1},
        run={"timeout_s": 120, "cold_cache": "keep"},
    )
    plan = parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)
    engine = open_engine(tmp_path / "t.db")
    outcome = run_plan(engine, plan, out=io.StringIO())
    assert outcome.counts == {"ok": 1}
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        effective = json.loads(run.effective_json or "{}")
    assert effective["threadpool"] == "attached (n_threads 2, poll 50)"
