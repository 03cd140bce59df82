"""Every third-party module the package imports is declared in pyproject.toml: a dependency, or an optional
extra for what is imported only when that extra is there. An import that works only because another
package happens to pull it in (jinja2 came with llama-cpp-python, rich with typer) breaks the day that
package drops it."""

from __future__ import annotations

import ast
import re
import sys

from support.paths import REPO_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 CI leg
    import tomli as tomllib

# The package's source folders (pyproject's package-dir) and its own top-level import name.
SOURCES = ("agent", "collectors", "runners", "storage")
FIRST_PARTY = {"edgeprof"}
# Where an import name is not its distribution's name.
DISTRIBUTION_OF = {
    "llama_cpp": "llama-cpp-python",
    "pynvml": "nvidia-ml-py",
    "jtop": "jetson-stats",
}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normalized(re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0])


def declared() -> tuple[set[str], set[str]]:
    """(the dependencies, the optional extras' packages), by normalized distribution name."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    required = {_requirement_name(r) for r in project["dependencies"]}
    extras = project.get("optional-dependencies", {}).values()
    optional = {_requirement_name(r) for reqs in extras for r in reqs}
    return required, optional


def imported_modules(text: str) -> set[str]:
    """Top-level names of every absolute import in ``text``, function-level imports and
    ``importlib.import_module("name")`` included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value.split(".")[0])
    return found


def third_party_imports() -> dict[str, list[str]]:
    """Module name -> the files importing it, for every module neither standard library nor edgeprof's."""
    where: dict[str, list[str]] = {}
    for folder in SOURCES:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            for name in imported_modules(path.read_text(encoding="utf-8")):
                if name in sys.stdlib_module_names or name in FIRST_PARTY or name == "__future__":
                    continue
                where.setdefault(name, []).append(str(path.relative_to(REPO_ROOT)))
    return where


def undeclared(where: dict[str, list[str]], required: set[str], optional: set[str]) -> list[str]:
    return [
        f"{name} (imported by {', '.join(files)}): "
        f"declare {DISTRIBUTION_OF.get(name, name)} in pyproject.toml"
        for name, files in sorted(where.items())
        if _normalized(DISTRIBUTION_OF.get(name, name)) not in required | optional
    ]


def test_every_imported_package_is_declared() -> None:
    required, optional = declared()
    where = third_party_imports()
    assert {"jinja2", "rich", "typer", "sqlalchemy"} <= set(where)  # the walk sees what the package uses
    assert undeclared(where, required, optional) == []


def test_the_check_names_an_undeclared_import() -> None:
    required, optional = declared()
    where = {"jinja2": ["agent/plan/chat.py"], "llama_cpp": ["runners/llama.py"]}
    assert undeclared(where, required - {"jinja2"}, optional) == [
        "jinja2 (imported by agent/plan/chat.py): declare jinja2 in pyproject.toml"
    ]
    assert undeclared(where, required, optional) == []
    assert imported_modules("def f():\n    import rich.text\n    importlib.import_module('jtop')\n") == {
        "rich",
        "jtop",
    }
