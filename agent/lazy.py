"""A package's public names, each imported from its module on first use (PEP 562's module ``__getattr__``).

Every package ``__init__`` of the agent says its public names three times, on purpose: under
``TYPE_CHECKING`` (so mypy and a reader see where each comes from), in ``_HOMES`` (where this function
finds it at run time) and in ``__all__``; tests/unit/test_package_exports.py checks that the three agree.
Importing a package therefore costs nothing beyond its ``__init__``: ``import edgeprof.report.speed_ratio``
loads the speed ratio and the statistics it uses, not the renderers, SQLAlchemy and numpy, and
``edgeprof status`` does not pay for a sweep's executors.

The child-process side, the collectors and storage may not import the agent (the architecture map), so
``edgeprof.runners`` and ``edgeprof.collectors`` keep a few lines of the same kind of their own.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``homes`` maps a module of the package (relative, dotted
    for a subpackage's module) to the public names it defines. A name is looked up once, then it is an
    ordinary attribute of the package."""
    module_of = {name: module for module, names in homes.items() for name in names}

    def package_getattr(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return package_getattr
