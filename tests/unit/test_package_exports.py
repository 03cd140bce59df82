"""Every package's public names: what ``__all__`` promises resolves to the object of the module that defines
it, the three lists of a lazy package (``TYPE_CHECKING`` imports, ``_HOMES``, ``__all__``) agree, and
importing a module pays only for what it imports (``import edgeprof.report.speed_ratio`` loads the speed
ratio and the statistics it uses, not the report's renderers, SQLAlchemy or numpy)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(120)

ROOTS = {"edgeprof": REPO_ROOT / "agent", "edgeprof.collectors": REPO_ROOT / "collectors",
         "edgeprof.runners": REPO_ROOT / "runners"}


def packages() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package, root in ROOTS.items():
        for init in sorted(root.rglob("__init__.py")):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(root).parts
            out[".".join([package, *rel])] = init
    return out


PACKAGES = packages()


def declared_imports(init: Path, package: str) -> dict[str, str]:
    """Public name -> the module it is imported from, as the ``__init__`` says (eagerly or for mypy)."""
    out: dict[str, str] = {}
    tree = ast.parse(init.read_text(encoding="utf-8"))
    for node in tree.body:
        body = [node]
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            body = node.body
        for stmt in body:
            if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith(package + "."):
                for alias in stmt.names:
                    out[alias.asname or alias.name] = stmt.module or ""
    return out


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_public_name_is_the_object_of_its_module(package: str) -> None:
    module = importlib.import_module(package)
    declared = declared_imports(PACKAGES[package], package)
    for name in getattr(module, "__all__", ()):
        if name in declared:  # else defined by the __init__ itself (llama-bench's FORMATS)
            home = importlib.import_module(declared[name])
            assert getattr(module, name) is getattr(home, name), f"{package}.{name}"
        else:
            assert getattr(module, name) is not None
    with pytest.raises(AttributeError, match=f"{package}' has no attribute 'nonesuch'"):
        _ = module.nonesuch


@pytest.mark.parametrize("package", sorted(p for p in PACKAGES if p.startswith("edgeprof.")))
def test_a_lazy_package_says_each_home_once(package: str) -> None:
    """``_HOMES`` lists exactly the names imported under TYPE_CHECKING, each under its own module; and no
    lazily loaded name is also a module of the package (importing that module first would leave the
    module where the function should be: such a name is imported eagerly)."""
    module = importlib.import_module(package)
    homes = getattr(module, "_HOMES", None)
    if homes is None:
        return  # an eager package (the CLI, whose app every command loads anyway)
    declared = declared_imports(PACKAGES[package], package)
    lazy = {name: f"{package}.{mod}" for mod, names in homes.items() for name in names}
    assert lazy == {n: m for n, m in declared.items() if n in lazy}, package
    assert set(module.__all__) == set(declared), f"{package}: {sorted(set(module.__all__) ^ set(declared))}"
    folder = PACKAGES[package].parent
    submodules = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
    assert not set(lazy) & submodules, f"{package}: a lazy name is also a module: {set(lazy) & submodules}"


def loaded_after(statement: str) -> tuple[set[str], set[str]]:
    """The edgeprof modules, and every module, that one import statement loads in a fresh interpreter."""
    code = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        f"{statement}\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    new = set(json.loads(out.stdout))
    return {m for m in new if m.split(".")[0] == "edgeprof"}, new


def test_the_speed_ratio_loads_only_what_it_uses() -> None:
    ours, every = loaded_after("import edgeprof.report.speed_ratio")
    assert ours == {"edgeprof", "edgeprof.lazy", "edgeprof.report", "edgeprof.report.speed_ratio",
                    "edgeprof.stats"}
    assert not {"sqlalchemy", "numpy", "typer", "rich"} & every


@pytest.mark.parametrize("package", sorted(p for p in PACKAGES if p.startswith("edgeprof.")))
def test_importing_a_package_loads_only_what_it_imports_eagerly(package: str) -> None:
    tree = ast.parse(PACKAGES[package].read_text(encoding="utf-8"))
    eager = sorted(
        stmt.module or ""
        for stmt in tree.body
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("edgeprof")
    )
    ours, _ = loaded_after(f"import {package}")
    parent = package.rpartition(".")[0]  # its own __init__ runs first, and pays for itself
    allowed, _ = loaded_after("\n".join([f"import {parent}", *(f"import {m}" for m in eager)]))
    assert ours - {package} <= allowed, f"{package} loads {sorted(ours - allowed - {package})}"


def _callers_names() -> set[tuple[str, str, str]]:
    """(file, package, name) for every name a module of the repository takes from a package: ``from
    edgeprof.x import name`` and ``x.name`` where ``x`` is bound to the package."""
    out: set[tuple[str, str, str]] = set()
    for top in ("agent", "collectors", "runners", "storage", "tests", "benchmarks", "scripts"):
        for path in (REPO_ROOT / top).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            where = str(path.relative_to(REPO_ROOT))
            bound: dict[str, str] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    bound.update({a.asname: a.name for a in node.names if a.name in PACKAGES and a.asname})
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in PACKAGES:
                    for a in node.names:
                        if f"{node.module}.{a.name}" in PACKAGES:
                            bound[a.asname or a.name] = f"{node.module}.{a.name}"
                        else:
                            out.add((where, node.module, a.name))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.value.id in bound):  # fmt: skip
                    out.add((where, bound[node.value.id], node.attr))
    return out


def test_every_name_a_caller_takes_from_a_package_is_one_it_exports() -> None:
    """The packages re-export only what callers use: a caller taking a name the package does not export
    (and that is not one of its modules) would fail on first use, perhaps inside a broad ``except``."""
    missing = []
    for where, package, name in sorted(_callers_names()):
        module = importlib.import_module(package)
        folder = PACKAGES[package].parent
        is_module = (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()
        if name.startswith("__") or is_module or name in getattr(module, "__all__", ()):
            continue
        if name in vars(module) and not name.startswith("_"):
            continue  # defined by the __init__ itself
        missing.append(f"{where}: {package}.{name}")
    assert not missing, "names callers take that their package does not export:\n" + "\n".join(missing)
