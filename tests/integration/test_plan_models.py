"""Plan validation with real model files (the tiny demo models, quantized by llama.cpp): every problem named
with its place, defaults and aliases, matrix expansion order and spec ids. Validation that needs no model
file is in tests/unit/plan/test_parse.py."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from support.plan_problems import only_problem, problems
from support.plans import DEFAULT_WORKLOAD, plan_toml

from edgeprof.gguf import sha256_file
from edgeprof.plan import AXES, Plan, PlanError, RunSpec, default_threads, expand, load_plan, parse_plan

WORKLOAD = '[[workload]]\nname = "w"\nprompt_tokens = 8\nn_predict = 8\n'


def q(path: Path | str) -> str:
    """A path as a TOML basic string."""
    return json.dumps(str(path))


def plan_text(model: Path, matrix: str = "", workloads: str = WORKLOAD, top: str = "") -> str:
    """Only what the test gives (not tests/support/plans.py's small fast defaults): the parser's own
    defaults are part of what these tests check."""
    return f"{top}\n[matrix]\nmodels = [{q(model)}]\n{matrix}\n{workloads}"


@pytest.fixture
def q4(tiny_models: dict[str, Path]) -> Path:
    return tiny_models["Q4_K_M"]


@pytest.fixture(scope="module")
def sha_of(tiny_models: dict[str, Path]) -> dict[str, str]:
    return {str(p): sha256_file(p) for p in tiny_models.values()}


# --- validation: one problem each, named with its place -------------------------------------------------


def test_unknown_top_level_key_with_hint(q4: Path) -> None:
    msg = only_problem(plan_text(q4, top='nmae = "x"'))
    assert msg.startswith("nmae: unknown key")
    assert "did you mean 'name'?" in msg


def test_unknown_matrix_key_with_hint(q4: Path) -> None:
    msg = only_problem(plan_text(q4, "ngls = [0]"))
    assert msg.startswith("matrix.ngls: unknown key")
    assert "did you mean 'ngl'?" in msg


def test_unknown_key_without_close_match_has_no_hint(q4: Path) -> None:
    msg = only_problem(plan_text(q4, top="zzzzqqq = 1"))
    assert msg == "zzzzqqq: unknown key"


@pytest.mark.parametrize(
    ("line", "place", "expected"),
    [
        ('ctx = "big"', "matrix.ctx", "expected an integer, got string 'big'"),
        ("ngl = 1.5", "matrix.ngl", "expected an integer, got number 1.5"),
        ('mmap = "yes"', "matrix.mmap", "expected true or false, got string 'yes'"),
        ('ctx = [512, "big"]', "matrix.ctx[1]", "expected an integer, got string 'big'"),
        ('threads = "many"', "matrix.threads", "expected an integer"),
        ('fa = "yes"', "matrix.flash_attn", "expected true, false"),
    ],
)
def test_wrong_axis_types(q4: Path, line: str, place: str, expected: str) -> None:
    msg = only_problem(plan_text(q4, line))
    assert msg.startswith(f"{place}: ")
    assert expected in msg


def test_wrong_workload_type_n_predict_string(q4: Path) -> None:
    wl = '[[workload]]\nname = "w"\nprompt_tokens = 8\nn_predict = "10"\n'
    msg = only_problem(plan_text(q4, workloads=wl))
    assert msg == "workload[0].n_predict: expected an integer, got string '10'"


def test_ctx_too_small_for_prompt_tokens_is_exact(q4: Path) -> None:
    wl = '[[workload]]\nname = "long"\nprompt_tokens = 100\nn_predict = 28\n'
    # 100 + 28 - 1 = 127 cells (the last token is sampled, never decoded) fit exactly in ctx 127 ...
    parse_plan(plan_text(q4, "ctx = 127", wl))
    # ... and one less does not.
    msg = only_problem(plan_text(q4, "ctx = 126", wl))
    assert msg == "workload 'long': ctx 126 < prompt tokens (100) + n_predict (28) - 1 = 127"


def test_a_served_request_needs_the_cell_llama_server_keeps_free(q4: Path) -> None:
    wl = '[[workload]]\nname = "long"\nprompt_tokens = 100\nn_predict = 28\n'
    served = 'runner = ["llama-cpp", "llama-server"]\nctx = '
    parse_plan(plan_text(q4, served + "128", wl))
    msg = only_problem(plan_text(q4, served + "127", wl))
    assert msg == "workload 'long': ctx 127 < prompt tokens (100) + n_predict (28) = 128"


def test_ctx_too_small_for_text_prompt_uses_utf8_byte_bound(q4: Path) -> None:
    prompt = "héllo wörld €"  # 13 characters, 17 UTF-8 bytes; + BOS = 18 tokens at most
    assert len(prompt) == 13 and len(prompt.encode()) == 17
    wl = f'[[workload]]\nname = "text"\nprompt = {q(prompt)}\nn_predict = 10\n'
    parse_plan(plan_text(q4, "ctx = 27", wl))
    msg = only_problem(plan_text(q4, "ctx = 26", wl))
    assert msg.startswith("workload 'text': ctx 26 < prompt tokens (at most 18) + n_predict (10) - 1 = 27")


def test_ctx_check_names_each_too_small_ctx(q4: Path) -> None:
    found = problems(plan_text(q4, "ctx = [8, 12, 15]"))
    assert found == [
        "workload 'w': ctx 8 < prompt tokens (8) + n_predict (8) - 1 = 15",
        "workload 'w': ctx 12 < prompt tokens (8) + n_predict (8) - 1 = 15",
    ]


def test_negative_ngl(q4: Path) -> None:
    msg = only_problem(plan_text(q4, "ngl = [0, -1]"))
    assert msg.startswith("matrix.ngl[1]: negative -ngl (-1)")


def test_duplicate_labels_two_entries(q4: Path, tiny_models: dict[str, Path]) -> None:
    q8 = tiny_models["Q8_0"]
    matrix_models = f'models = [{{ path = {q(q4)}, label = "same" }}, {{ path = {q(q8)}, label = "same" }}]'
    msg = only_problem(f"[matrix]\n{matrix_models}\n{WORKLOAD}")
    assert msg.startswith("matrix.models[1]: duplicate label 'same' (also matrix.models[0])")


def test_duplicate_labels_same_stem_in_two_folders(tmp_path: Path, q4: Path) -> None:
    a, b = tmp_path / "a" / "model.gguf", tmp_path / "b" / "model.gguf"
    for p in (a, b):
        p.parent.mkdir()
        shutil.copy(q4, p)
    msg = only_problem(f"[matrix]\nmodels = [{q(a)}, {q(b)}]\n{WORKLOAD}")
    assert msg.startswith("matrix.models[1]: duplicate label 'model' (also matrix.models[0])")
    # A label resolves it.
    parse_plan(f'[matrix]\nmodels = [{q(a)}, {{ path = {q(b)}, label = "model-b" }}]\n{WORKLOAD}')


def test_truncated_gguf(tmp_path: Path, q4: Path) -> None:
    data = q4.read_bytes()
    cut = tmp_path / "half.gguf"
    cut.write_bytes(data[: len(data) // 2])
    msg = only_problem(plan_text(cut))
    assert msg.startswith(f"matrix.models[0]: {cut}: truncated")


def test_missing_workload(q4: Path) -> None:
    msg = only_problem(plan_text(q4, workloads=""))
    assert msg.startswith("workload: missing")


def test_missing_n_predict(q4: Path) -> None:
    msg = only_problem(plan_text(q4, workloads='[[workload]]\nname = "w"\nprompt_tokens = 8\n'))
    assert msg == "workload[0]: missing 'n_predict'"


def test_duplicate_workload_names(q4: Path) -> None:
    msg = only_problem(plan_text(q4, workloads=WORKLOAD + WORKLOAD))
    assert msg == "workload[1].name: duplicate workload name 'w'"


def test_n_ubatch_larger_than_n_batch(q4: Path) -> None:
    msg = only_problem(plan_text(q4, "n_batch = 256\nn_ubatch = [128, 512]"))
    assert msg.startswith("matrix.n_ubatch[1]: 512 is larger than an n_batch value")


def test_n_batch_alone_below_the_default_ubatch_is_valid(q4: Path, sha_of: dict[str, str]) -> None:
    # The plan never mentions n_ubatch, so it must not be told its n_ubatch is wrong; llama.cpp itself
    # clamps n_ubatch to n_batch (llama-context.cpp: n_ubatch = min(n_batch, n_ubatch)), and so should the
    # default here: every expanded spec must have n_ubatch <= n_batch.
    plan = parse_plan(plan_text(q4, "n_batch = [128, 256, 512]"))
    specs = expand(plan, sha_of)
    assert sorted(s.params.n_batch for s in specs) == [128, 256, 512]
    assert all(s.params.n_ubatch <= s.params.n_batch for s in specs)


def test_quantized_type_v_needs_flash_attn(q4: Path) -> None:
    msg = only_problem(plan_text(q4, 'type_v = "q8_0"\nflash_attn = "off"'))
    assert msg.startswith("matrix.type_v: a quantized V cache needs flash_attn")
    parse_plan(plan_text(q4, 'type_v = "q8_0"\nflash_attn = "on"'))
    # The default flash_attn is llama-bench's "auto", which llama.cpp turns on for a quantized V cache.
    plan = parse_plan(plan_text(q4, 'type_v = "q8_0"'))
    assert plan.axes["flash_attn"] == ("auto",)


@pytest.mark.parametrize("axis", ["type_k", "type_v"])
def test_unknown_kv_type(q4: Path, axis: str) -> None:
    msg = only_problem(plan_text(q4, f'{axis} = "q9_9"\nflash_attn = "on"'))
    assert msg.startswith(f"matrix.{axis}: unknown KV cache type 'q9_9'")


# --- a valid plan: defaults, aliases, shorthand ---------------------------------------------------------


def test_defaults_filled(q4: Path) -> None:
    plan = parse_plan(plan_text(q4), source="my-plan.toml")
    assert plan.name == "my-plan"
    expected_defaults = {axis: (default,) for axis, (_field, default) in AXES.items() if axis != "threads"}
    assert {a: v for a, v in plan.axes.items() if a != "threads"} == expected_defaults
    physical = psutil.cpu_count(logical=False)
    assert plan.axes["threads"] == (default_threads(),)
    if physical:
        assert plan.axes["threads"] == (physical,)
    assert (plan.repeat.cold, plan.repeat.warmup, plan.repeat.steady) == (1, 1, 5)
    assert plan.timeout_s == 600.0
    assert plan.cold_cache == "drop"
    wl = plan.workloads[0]
    assert (wl.temperature, wl.top_k, wl.top_p, wl.seed, wl.ignore_eos) == (0.0, 40, 0.95, 42, True)
    assert plan.n_specs() == 1


def test_aliases_and_shorthands(q4: Path) -> None:
    plan = parse_plan(plan_text(q4, 'batch = 256\nubatch = 128\nfa = true\nngl = "all"\nn_ctx = 1024\n'))
    assert plan.axes["n_batch"] == (256,)
    assert plan.axes["n_ubatch"] == (128,)
    assert plan.axes["flash_attn"] == ("on",)
    assert plan.axes["ngl"] == (999,)
    assert plan.axes["ctx"] == (1024,)
    # A list with "all" in it, and threads = "auto".
    plan = parse_plan(plan_text(q4, 'ngl = [0, "all"]\nthreads = "auto"\nfa = false'))
    assert plan.axes["ngl"] == (0, 999)
    assert plan.axes["threads"] == (default_threads(),)
    assert plan.axes["flash_attn"] == ("off",)


def test_alias_and_canonical_name_together_is_an_error(q4: Path) -> None:
    msg = only_problem(plan_text(q4, "batch = 256\nn_batch = 512"))
    assert "given twice" in msg


def test_scalar_instead_of_list(q4: Path) -> None:
    scalar = parse_plan(plan_text(q4, "ctx = 512\nngl = 0\nmmap = false\nthreads = 2"))
    listed = parse_plan(plan_text(q4, "ctx = [512]\nngl = [0]\nmmap = [false]\nthreads = [2]"))
    assert scalar.axes == listed.axes
    assert scalar.axes["ctx"] == (512,) and scalar.axes["mmap"] == (False,)
    # models as a scalar string, too
    one = parse_plan(f"[matrix]\nmodels = {q(q4)}\n{WORKLOAD}")
    assert [m.path for m in one.models] == [str(q4)]


# --- expansion ------------------------------------------------------------------------------------------


def _two_workloads() -> str:
    return (
        '[[workload]]\nname = "a"\nprompt_tokens = 8\nn_predict = 8\n'
        '[[workload]]\nname = "b"\nprompt_tokens = 16\nn_predict = 4\n'
    )


def test_expansion_order_2x2x2(q4: Path, sha_of: dict[str, str]) -> None:
    plan = parse_plan(plan_text(q4, "ngl = [0, 1]\nctx = [256, 512]", _two_workloads()))
    specs = expand(plan, sha_of)
    got = [(s.params.n_gpu_layers, s.params.n_ctx, s.workload.name) for s in specs]
    assert got == [
        (0, 256, "a"),
        (0, 256, "b"),
        (0, 512, "a"),
        (0, 512, "b"),
        (1, 256, "a"),
        (1, 256, "b"),
        (1, 512, "a"),
        (1, 512, "b"),
    ]


def test_expansion_count_and_full_order(tiny_models: dict[str, Path], sha_of: dict[str, str]) -> None:
    # Models deliberately not in alphabetical order: plan order must be kept.
    models = [tiny_models["Q8_0"], tiny_models["F16"]]
    axes_toml = {
        "ngl": "[0, 1]",
        "mmap": "[true, false]",
        "ctx": "[256, 512]",
        "n_batch": "[512, 1024]",
        "n_ubatch": "[128, 256]",
        "flash_attn": '["on", "auto"]',
        "type_k": '["f16", "q8_0"]',
        "type_v": '["f16", "q8_0"]',
        "threads": "[1, 2]",
    }
    matrix = "\n".join(f"{k} = {v}" for k, v in axes_toml.items())
    text = f"[matrix]\nmodels = [{', '.join(q(m) for m in models)}]\n{matrix}\n{_two_workloads()}"
    plan = parse_plan(text)
    specs = expand(plan, sha_of)
    assert len(specs) == plan.n_specs() == 2 * 2**9 * 2

    axis_values = [plan.axes[a] for a in AXES]
    expected = [
        (str(m), *combo, wl) for m in models for combo in itertools.product(*axis_values) for wl in ("a", "b")
    ]
    fields = [field for field, _default in AXES.values()]
    got = [(s.model.path, *(getattr(s.params, f) for f in fields), s.workload.name) for s in specs]
    assert got == expected
    assert [s.model_sha256 for s in specs[:2]] == [sha_of[str(models[0])]] * 2
    assert len({s.spec_id for s in specs}) == len(specs)


def _spec_ids(text: str, sha_of: dict[str, str]) -> list[str]:
    return [s.spec_id for s in expand(parse_plan(text), sha_of)]


def test_spec_id_stable_across_parses(q4: Path, sha_of: dict[str, str]) -> None:
    text = plan_text(q4, "ctx = [256, 512]", _two_workloads())
    first, second = _spec_ids(text, sha_of), _spec_ids(text, sha_of)
    assert first == second
    assert all(len(s) == 16 for s in first)


def _one_spec(
    q4: Path, sha_of: dict[str, str], matrix: str = "", wl: str = WORKLOAD, top: str = ""
) -> RunSpec:
    specs = expand(parse_plan(plan_text(q4, matrix, wl, top)), sha_of)
    assert len(specs) == 1
    return specs[0]


@pytest.mark.parametrize(
    ("matrix", "wl", "top"),
    [
        ("ctx = 1024", WORKLOAD, ""),
        ("ngl = 1", WORKLOAD, ""),
        ("threads = 7", WORKLOAD, ""),
        ("n_batch = 256\nn_ubatch = 256", WORKLOAD, ""),
        ("n_ubatch = 256", WORKLOAD, ""),
        ('flash_attn = "on"', WORKLOAD, ""),
        ('type_k = "q8_0"', WORKLOAD, ""),
        ('type_v = "q8_0"\nflash_attn = "on"', WORKLOAD, ""),
        ("mmap = false", WORKLOAD, ""),
        ("", WORKLOAD.replace("n_predict = 8", "n_predict = 9"), ""),
        ("", WORKLOAD.replace("prompt_tokens = 8", "prompt_tokens = 9"), ""),
        ("", WORKLOAD + "seed = 1\n", ""),
        ("", WORKLOAD + "temperature = 0.5\n", ""),
        ("", WORKLOAD.replace('"w"', '"w2"'), ""),
        ("", WORKLOAD, "[repeat]\nsteady = 6\n"),
        ("", WORKLOAD, "[repeat]\nwarmup = 0\n"),
        ("", WORKLOAD, "[repeat]\ncold = 2\n"),
    ],
)
def test_spec_id_changes_with_params_workload_repeat(
    q4: Path, sha_of: dict[str, str], matrix: str, wl: str, top: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # threads are bounded by this machine's logical CPUs (more only oversubscribes); the spec id is what
    # is tested here
    monkeypatch.setattr("edgeprof.plan.bounds.logical_cpus", lambda: 64)
    base = _one_spec(q4, sha_of, "threads = 2")
    changed = _one_spec(q4, sha_of, matrix if "threads" in matrix else "threads = 2\n" + matrix, wl, top)
    assert changed.spec_id != base.spec_id


def test_spec_id_changes_with_model(tiny_models: dict[str, Path], sha_of: dict[str, str]) -> None:
    a = _one_spec(tiny_models["Q4_K_M"], sha_of, "threads = 2")
    b = _one_spec(tiny_models["Q8_0"], sha_of, "threads = 2")
    assert a.spec_id != b.spec_id


def test_spec_ids_unique_within_a_plan_for_one_file_at_two_paths(tmp_path: Path, q4: Path) -> None:
    # The same GGUF on two storage devices (say NVMe vs SD card, to compare cold loads) under two labels:
    # either the plan is refused, or its specs get distinct ids. Equal ids make the second entry a
    # "repeat" of the first: a resumed sweep skips it and the report folds both into one row.
    paths = [tmp_path / "nvme" / "m.gguf", tmp_path / "sd" / "m.gguf"]
    for p in paths:
        p.parent.mkdir()
        shutil.copy(q4, p)
    text = (
        f'[matrix]\nmodels = [{{ path = {q(paths[0])}, label = "nvme" }}, '
        f'{{ path = {q(paths[1])}, label = "sd" }}]\n{WORKLOAD}'
    )
    try:
        plan = parse_plan(text)
    except PlanError as exc:
        assert any(p.startswith("matrix.models[1]") for p in exc.problems), exc.problems
        return
    specs = expand(plan, {str(p): sha256_file(p) for p in paths})
    assert len(specs) == 2
    assert specs[0].spec_id != specs[1].spec_id


def test_spec_id_same_when_only_name_or_timeout_changes(q4: Path, sha_of: dict[str, str]) -> None:
    base = _one_spec(q4, sha_of, "threads = 2")
    renamed = _one_spec(q4, sha_of, "threads = 2", top='name = "other"\ndescription = "again"')
    timeout = _one_spec(q4, sha_of, "threads = 2", top="[run]\ntimeout_s = 30\n")
    assert renamed.spec_id == base.spec_id
    assert timeout.spec_id == base.spec_id
    assert timeout.timeout_s == 30.0


def test_a_workload_naming_its_models_keeps_the_plan_name(q4: Path) -> None:
    # The check of a workload's models list runs beside the plan's name: it must not rename the plan, nor
    # the sweep stored under that name.
    text = plan_toml({"a": q4}, name="mine", workloads=[{**DEFAULT_WORKLOAD, "models": ["a"]}])
    assert parse_plan(text).name == "mine"


def test_glob_expands_sorted(tmp_path: Path, q4: Path, write_plan: Callable[..., Path]) -> None:
    models = tmp_path / "models"
    models.mkdir()
    for stem in ("c-model", "a-model", "b-model"):
        shutil.copy(q4, models / f"{stem}.gguf")
    (models / "readme.txt").write_text("not a model")
    plan = load_plan(write_plan(f'[matrix]\nmodels = ["models/*.gguf"]\n{WORKLOAD}'))
    assert [m.label for m in plan.models] == ["a-model", "b-model", "c-model"]
    assert [Path(m.path).name for m in plan.models] == ["a-model.gguf", "b-model.gguf", "c-model.gguf"]


def test_relative_model_paths_resolve_against_plan_folder(
    tmp_path: Path, q4: Path, write_plan: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plans" / "models").mkdir(parents=True)
    shutil.copy(q4, tmp_path / "plans" / "models" / "m.gguf")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    plan_path = write_plan(f'[matrix]\nmodels = ["models/m.gguf"]\n{WORKLOAD}', name="plans/p.toml")
    plan = load_plan(plan_path)
    assert isinstance(plan, Plan)
    assert Path(plan.models[0].path).resolve() == (tmp_path / "plans" / "models" / "m.gguf").resolve()
    assert plan.models[0].label == "m"
    # and load_plan with a relative path to the plan
    monkeypatch.chdir(tmp_path)
    again = load_plan(Path("plans/p.toml"))
    assert Path(again.models[0].path).resolve() == Path(plan.models[0].path).resolve()

