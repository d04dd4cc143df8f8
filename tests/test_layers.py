"""The package's modules import one way: each imports only its own layer or lower, and
no import cycle (the design's "Architecture": helpers -> mechanisms -> capabilities ->
application; evaluation apart, not loaded by ``import dpstream``).

The graph is read from the source with :mod:`ast`: every import statement of the
package's own modules, those inside functions included; only ``if TYPE_CHECKING:``
blocks are left out (they never run). ``from P import X`` is an import of the module
``P.X`` when that is a module, else of ``P`` (its ``__init__``); relative imports are
resolved.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "dpstream"

HELPERS, MECHANISMS, CAPABILITIES, EVALUATION, APPLICATION = range(5)
NAMES = ["helpers", "mechanisms", "capabilities", "evaluation", "application"]

#: The layer of every module, by name prefix (``P`` covers ``P`` and ``P.*``; the
#: longest prefix wins). A module may import its own layer or a lower one.
LAYERS: dict[str, int] = {
    # helpers: no model, no mechanism; arrays, parameters, rng, files, the Dask helper,
    # and the save/load registry (each capability registers its own loader).
    "dpstream._arrays": HELPERS,
    "dpstream._core": HELPERS,  # the Rust extension
    "dpstream._dask": HELPERS,
    "dpstream._digest": HELPERS,
    "dpstream._files": HELPERS,
    "dpstream._params": HELPERS,
    "dpstream._rng": HELPERS,
    "dpstream.persistence": HELPERS,
    # mechanisms
    "dpstream.budget": MECHANISMS,
    "dpstream.counters": MECHANISMS,
    "dpstream.noise": MECHANISMS,
    "dpstream.partition": MECHANISMS,
    "dpstream.sketch": MECHANISMS,
    # capabilities, each with its Dask ingestion
    "dpstream.online": CAPABILITIES,
    "dpstream.online_dask": CAPABILITIES,
    "dpstream.privhp": CAPABILITIES,
    "dpstream.privhp_dask": CAPABILITIES,
    "dpstream.tabular": CAPABILITIES,
    # evaluation: not loaded by ``import dpstream``
    "dpstream.audit": EVALUATION,
    "dpstream.datasets": EVALUATION,
    "dpstream.metrics": EVALUATION,
    "dpstream.streams": EVALUATION,
    # application
    "dpstream": APPLICATION,  # the package's front: imports every capability
    "dpstream.cli": APPLICATION,
    "dpstream.demo": APPLICATION,
    "dpstream.distributed": APPLICATION,  # re-exports the capabilities' Dask functions
    "dpstream.inputs": APPLICATION,
    "dpstream.io": APPLICATION,
    "dpstream.runs": APPLICATION,
    "dpstream.schedule": APPLICATION,
}


def layer(module: str) -> int:
    """The layer of ``module`` (the longest matching prefix of :data:`LAYERS`)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS and (n > 1 or module == "dpstream"):
            return LAYERS[prefix]
    raise KeyError(f"{module} has no layer: add it to LAYERS in tests/test_layers.py")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["dpstream", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()
KNOWN = {*MODULES, "dpstream._core"}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` except those under ``if TYPE_CHECKING:`` (its ``else``
    runs, so it counts)."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def imports_of(module: str, path: Path) -> set[str]:
    """The package's modules that ``module`` imports (see the module docstring)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in _nodes(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "dpstream")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source.split(".")[0] != "dpstream":
                continue
            for a in node.names:
                name = f"{source}.{a.name}"
                out.add(name if name in KNOWN else source)
    return out


GRAPH = {m: imports_of(m, p) for m, p in MODULES.items()}


def test_every_import_is_a_module_of_the_package() -> None:
    unknown = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() for t in ts if t not in KNOWN)
    assert not unknown, unknown


def test_every_module_has_a_layer() -> None:
    for m in KNOWN:
        layer(m)


def test_no_import_runs_up_a_layer() -> None:
    up = sorted(
        f"{m} ({NAMES[layer(m)]}) imports {t} ({NAMES[layer(t)]})"
        for m, targets in GRAPH.items()
        for t in targets
        if layer(t) > layer(m)
    )
    assert not up, "\n".join(up)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, and modules that
    import themselves (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert not _cycles(GRAPH), _cycles(GRAPH)


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"], ["d"]]


def test_relative_and_type_checking_imports_are_read(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import domain\n"
        "from .. import persistence\n"
        "from dpstream.tabular import Domain\n"
        "if TYPE_CHECKING:\n"
        "    from dpstream import metrics\n"
        "def f():\n"
        "    import dpstream.online\n"
    )
    path = tmp_path / "stream.py"
    path.write_text(source)
    assert imports_of("dpstream.tabular.stream", path) == {
        "dpstream.tabular.domain",
        "dpstream.persistence",
        "dpstream.tabular",
        "dpstream.online",
    }


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("dpstream.cli.table", APPLICATION),
        ("dpstream.tabular.model.junction", CAPABILITIES),
        ("dpstream.counters.sparse", MECHANISMS),
        ("dpstream.audit.harness", EVALUATION),
        ("dpstream", APPLICATION),
    ],
)
def test_layers_match_by_prefix(module: str, expected: int) -> None:
    assert layer(module) == expected


def test_import_dpstream_loads_no_evaluation_module_and_no_dask() -> None:
    code = "import sys, dpstream; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    loaded = [m for m in out if m.split(".")[0] == "dpstream" and m in KNOWN]
    assert not [m for m in loaded if layer(m) == EVALUATION], loaded
    assert "dask" not in out
    # The capabilities are loaded, so that every kind of state is registered for load().
    assert {"dpstream.online", "dpstream.privhp", "dpstream.tabular"} <= set(loaded)


def test_evaluation_modules_are_attributes_of_the_package() -> None:
    code = "import dpstream; print(dpstream.metrics.__name__, dpstream.audit.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["dpstream.metrics", "dpstream.audit"]
