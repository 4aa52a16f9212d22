"""The package's shape: each public namespace's ``__all__`` is exactly what it exports (as
httpx and trio check theirs), every ``__all__`` names something real, and no module is part
of an import cycle, checked both statically (the import graph) and by importing each module
alone in a fresh interpreter."""

from __future__ import annotations

import __future__
import ast
import importlib
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

import pressure

PACKAGE_DIR = Path(pressure.__file__).resolve().parent
#: The namespaces users import from: their __all__ must be exactly their public names.
PUBLIC_NAMESPACES = ["pressure", "pressure.aio", "pressure.multiprocessing", "pressure.testing", "pressure.bench"]
#: Names a module may bind without exporting them.
NOT_EXPORTS = {"TYPE_CHECKING"}
#: Modules that run something when imported (``python -m`` entry points).
RUN_ON_IMPORT = {"pressure.bench.__main__"}
#: Third-party packages some modules need that the core install lacks (the ``spark`` and
#: ``metrics`` extras).
OPTIONAL = ("pyspark", "pyarrow", "prometheus_client")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _foreign(value: object) -> bool:
    """Defined outside pressure (an import such as typing.Any), so never an export."""
    home = getattr(value, "__module__", None)
    return isinstance(home, str) and home != "pressure" and not home.startswith("pressure.")


def public_names(module: types.ModuleType) -> set[str]:
    """What ``module`` binds for its users: no private names, submodules, ``from __future__``
    flags, type variables, or objects imported from outside pressure."""
    return {name for name, value in vars(module).items()
            if not name.startswith("_") and name not in NOT_EXPORTS
            and not isinstance(value, (types.ModuleType, __future__._Feature, typing.TypeVar))
            and not _foreign(value)}


@pytest.mark.parametrize("name", PUBLIC_NAMESPACES)
def test_all_is_exactly_the_public_names(name: str) -> None:
    """Every public name is in __all__ and every name in __all__ is public: bound in the
    module, or (the lazy ones) served by its module-level __getattr__."""
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), "__all__ lists a name twice"
    bound = public_names(module)
    lazy = set(exported) - bound
    assert bound - set(exported) == set(), "public names missing from __all__"
    assert lazy == {n for n in lazy if n not in vars(module)}, "private names in __all__"
    if lazy:
        assert hasattr(module, "__getattr__"), f"{sorted(lazy)} in __all__ but not in the module"
    for attribute in exported:
        getattr(module, attribute)


def _importable(name: str) -> types.ModuleType:
    if name in RUN_ON_IMPORT:
        pytest.skip(f"{name} runs the program when imported")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in OPTIONAL:
            pytest.skip(f"{name} needs {exc.name}, not installed")
        raise


@pytest.mark.parametrize("name", [n for n in MODULES if n not in RUN_ON_IMPORT])
def test_every_all_names_something_real(name: str) -> None:
    module = _importable(name)
    exported = getattr(module, "__all__", [])
    assert len(exported) == len(set(exported)), "__all__ lists a name twice"
    for attribute in exported:
        assert hasattr(module, attribute), f"{name}.__all__ names {attribute!r}, which it lacks"


# -- import cycles -------------------------------------------------------------------------


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _statements(node: ast.AST) -> Iterator[ast.stmt]:
    """Every statement under ``node``, functions included (a lazy import is still an import),
    except the bodies of ``if TYPE_CHECKING:``, which never run."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _statements(other)
            continue
        if isinstance(child, ast.stmt):
            yield child
        yield from _statements(child)


def imported_modules(name: str, path: Path) -> set[str]:
    """The pressure modules ``name`` imports at run time: ``from . import x`` counts as the
    submodule x if there is one, else as the package; the implicit import of a module's own
    parent packages does not count."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _statements(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "pressure")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[:len(parts) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "pressure":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    found.discard(name)
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), i.e. the cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_import_graph_has_no_cycle() -> None:
    graph = {name: imported_modules(name, path) for name, path in MODULES.items()}
    assert {n for targets in graph.values() for n in targets} <= set(MODULES)
    assert import_cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    """The check itself: a two-module and a three-module cycle are reported, a chain is not."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(import_cycles(graph)) == [["a", "b"], ["c", "d", "e"]]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


@pytest.mark.parametrize("name", [n for n in MODULES if n not in RUN_ON_IMPORT])
def test_each_module_imports_alone_in_a_fresh_interpreter(name: str) -> None:
    """Imported first, on its own, every module loads: no order-dependent cycle hides
    behind the order in which the rest of the suite happened to import things."""
    out = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                         timeout=120, cwd=PACKAGE_DIR.parent)
    missing = [dep for dep in OPTIONAL if f"No module named '{dep}" in out.stderr]
    if out.returncode and missing:
        pytest.skip(f"{name} needs {missing[0]}, not installed")
    assert out.returncode == 0, out.stderr
