"""The package's shape, checked from its source: the import map of docs/architecture.md, no
import cycles (imports inside functions included), no private names imported across modules, modules and
functions that fit a reader's screen, and comments that give reasons instead of tracker numbers.

Each check prints every violation with its place, so a failure is a to-do list, not a riddle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

# Where each import package lives in the repository (pyproject's package-dir).
SOURCE_ROOTS = {
    "edgeprof": REPO_ROOT / "agent",
    "edgeprof.collectors": REPO_ROOT / "collectors",
    "edgeprof.runners": REPO_ROOT / "runners",
    "edgeprof.storage": REPO_ROOT / "storage",
}

# The layers, top to bottom, as docs/architecture.md gives them: a module may import its own
# package and the layers below its own, never a layer above it or a sibling on its own level.
LAYERS: list[tuple[float, tuple[str, ...]]] = [
    (11, ("edgeprof.__main__",)),
    (10, ("edgeprof.cli",)),
    (9, ("edgeprof.daemon",)),
    (8, ("edgeprof.report",)),
    (7, ("edgeprof.sweep",)),
    (6, ("edgeprof.executors",)),
    (5, ("edgeprof.verdicts",)),
    (4, ("edgeprof.telemetry", "edgeprof.fleet")),
    (3, ("edgeprof.plan",)),
    (2, ("edgeprof.gguf", "edgeprof.device")),
    (1, ("edgeprof.stats", "edgeprof.safefs", "edgeprof.safetext", "edgeprof.run_states", "edgeprof.lazy",
         "edgeprof.version")),
    (0.5, ("edgeprof",)),  # the root __init__: the version string, nothing else
    # The child-process side, the collectors and storage import nothing of the agent, nor each other.
    (0, ("edgeprof.runners",)),
    (0, ("edgeprof.collectors",)),
    (0, ("edgeprof.storage",)),
]

MAX_MODULE_LINES = 600
MODULE_LINE_EXCEPTIONS = {"edgeprof.storage.migrations"}  # the frozen steps of every schema version
MAX_FUNCTION_LINES = 60
MAX_MODULES_PER_FOLDER = 15
ISSUE_NUMBER = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # a module of the package
    names: tuple[str, ...]
    line: int
    in_function: bool


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out: dict[str, Path] = {}
    for package, root in SOURCE_ROOTS.items():
        for path in root.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            # agent/collectors does not exist: the other roots are separate folders, never nested in agent/.
            out[name] = path
    return out


MODULES = modules()


def _resolve(module: str, level: int, importer: str, is_package: bool) -> str:
    if level == 0:
        return module
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _module_of(dotted: str) -> str | None:
    """The package module a dotted name refers to (a module, or an attribute of one)."""
    while dotted:
        if dotted in MODULES:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return None


def imports_of(name: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    functions: list[tuple[int, int]] = [
        (n.lineno, n.end_lineno or n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]

    def in_function(line: int) -> bool:
        return any(a < line <= b for a, b in functions)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _module_of(alias.name)
                if target is not None:
                    yield Import(name, target, (), node.lineno, in_function(node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module or "", node.level, name, is_package)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:  # ``from edgeprof.x import y`` where y is a module
                    yield Import(name, sub, (), node.lineno, in_function(node.lineno))
                    continue
                target = _module_of(base)
                if target is not None:
                    yield Import(name, target, (alias.name,), node.lineno, in_function(node.lineno))


ALL_IMPORTS = [imp for name, path in MODULES.items() for imp in imports_of(name, path)]


def _in(module: str, prefix: str) -> bool:
    # The root package holds only itself; every other entry holds its submodules too.
    return module == prefix or (prefix != "edgeprof" and module.startswith(prefix + "."))


def layer_of(module: str) -> tuple[float, str]:
    best: tuple[float, str] | None = None
    for rank, prefixes in LAYERS:
        for prefix in prefixes:
            if _in(module, prefix) and (best is None or len(prefix) > len(best[1])):
                best = (rank, prefix)
    assert best is not None, f"{module} is in no layer of the map"
    return best


def where(imp: Import) -> str:
    path = MODULES[imp.importer].relative_to(REPO_ROOT)
    return f"{path}:{imp.line}"


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        layer_of(name)


def test_imports_point_down_the_map() -> None:
    bad = []
    for imp in ALL_IMPORTS:
        (rank_a, pkg_a), (rank_b, pkg_b) = layer_of(imp.importer), layer_of(imp.target)
        if pkg_a == pkg_b:
            continue
        if rank_b >= rank_a:
            bad.append(f"{where(imp)}: {imp.importer} ({pkg_a}) imports {imp.target} ({pkg_b})")
    assert not bad, "imports against the layer map:\n" + "\n".join(sorted(bad))


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _import_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for imp in ALL_IMPORTS:
        if imp.target != imp.importer:
            edges[imp.importer].add(imp.target)
    # Importing a module runs its packages' __init__ first.
    for name in MODULES:
        parent = name.rpartition(".")[0]
        while parent:
            if parent in MODULES and parent != name:
                edges[name].add(parent)
            parent = parent.rpartition(".")[0]
    return edges


def test_no_import_cycles() -> None:
    edges = _import_edges()
    # A package's __init__ importing its own submodules is the public-API pattern, not a cycle of design:
    # drop the submodule -> own-package-__init__ edges, keep every other.
    for name in MODULES:
        parent = name.rpartition(".")[0]
        while parent:
            edges[name].discard(parent)
            parent = parent.rpartition(".")[0]
    cycles = _cycles(edges)
    assert not cycles, "import cycles (function-level imports included):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_private_names_imported_across_modules() -> None:
    bad = [
        f"{where(imp)}: {imp.importer} imports {name} from {imp.target}"
        for imp in ALL_IMPORTS
        for name in imp.names
        if name.startswith("_") and not name.startswith("__") and imp.target != imp.importer
    ]
    assert not bad, "private names imported from another module:\n" + "\n".join(sorted(bad))


def test_modules_fit_a_reader() -> None:
    bad = []
    for name, path in MODULES.items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_MODULE_LINES and name not in MODULE_LINE_EXCEPTIONS:
            bad.append(f"{path.relative_to(REPO_ROOT)}: {n} lines (> {MAX_MODULE_LINES})")
    assert not bad, "\n".join(sorted(bad))


def _is_declared_table(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose body is a docstring and one ``return`` of a literal: a table, not logic."""
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return (
        len(body) == 1
        and isinstance(body[0], ast.Return)
        and isinstance(body[0].value, ast.Dict | ast.List | ast.Tuple | ast.Set)
    )


def test_functions_fit_a_screen() -> None:
    bad = []
    for path in MODULES.values():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES and not _is_declared_table(node):
                    bad.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {node.name} is {n} lines")
    assert not bad, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(sorted(bad))


def defines_a_collector(path: Path) -> bool:
    """The module defines a ``Collector`` subclass: one telemetry source, as the house style wants."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "Collector" for b in node.bases)
        for node in tree.body
    )


def counted_modules(folder: Path) -> list[Path]:
    """The modules a folder's cap counts. A source module of collectors/ (one per telemetry source, each
    a ``Collector`` subclass) is not counted: that folder grows by one module per source by design, and
    the cap guards what it must, the shared contract beside the sources (base, roles, evidence ...)."""
    found = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
    if folder == SOURCE_ROOTS["edgeprof.collectors"]:
        found = [p for p in found if not defines_a_collector(p)]
    return found


def test_folders_stay_small() -> None:
    folders = {path.parent for path in MODULES.values()}
    bad = []
    for folder in sorted(folders):
        n = len(counted_modules(folder))
        if n > MAX_MODULES_PER_FOLDER:
            bad.append(f"{folder.relative_to(REPO_ROOT)}: {n} modules (> {MAX_MODULES_PER_FOLDER})")
    assert not bad, "\n".join(bad)


def _project_text_files() -> Iterator[Path]:
    tops = ("agent", "collectors", "runners", "storage", "tests", "benchmarks", "scripts", "systemd", ".ci")
    for top in tops:
        for path in (REPO_ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".md", ".sh", ".toml", ".service", ".timer", ""}:
                if "fixtures" in path.relative_to(REPO_ROOT).parts or "__pycache__" in path.parts:
                    continue
                yield path
    yield REPO_ROOT / "README.md"
    yield from sorted((REPO_ROOT / "docs").glob("*.md"))
    yield REPO_ROOT / "pyproject.toml"


def test_comments_give_reasons_not_tracker_numbers() -> None:
    bad = []
    for path in _project_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if ISSUE_NUMBER.search(line):
                bad.append(f"{path.relative_to(REPO_ROOT)}:{i}: {line.strip()[:100]}")
    assert not bad, f"{len(bad)} places cite a tracker number instead of the reason:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # split literals, so this file does not cite what it checks for
        ("see iss" "ue 12 for why", True),
        ("Iss" "ues 9 and 10", True),
        ("iss" "ue #3", True),
        ("an issue of scale", False),
    ],
)
def test_the_tracker_check_reads_what_it_should(text: str, found: bool) -> None:
    assert bool(ISSUE_NUMBER.search(text)) is found
