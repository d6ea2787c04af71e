"""The package keeps its shape: short functions, and folders whose imports only point down.

The folders, lowest first (docs/explanation/architecture.md draws them):

    core       errors, files, devices, progress, plots, registries, plugins
    config     the schema, a run's paths, the reference
    data       sources, split, tokenizers, batching
    model      cells, encoder, attention, decoders, ensembles
    decoding   search, top-k, forced decoding, MBR, scores
    runtime    checkpoints, loading, parents, engines
    training   the Trainer and what it holds
    pipelines  prepare, distill, translate, evaluate, lab, tune
    export     packages, ONNX, the offline page   |  serve   the page and the JSON API (siblings)
    cli        nmt.cli, nmt.__main__              |  api     nmt.load and the notebook's views (siblings)

A module imports modules of its own folder and of folders below its own, never above nor
beside (export and serve know nothing of each other). Every import counts, including those
inside functions and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nmt"
MAX_FUNCTION_LINES = 60
FOLDER_RANK = {
    "core": 0,
    "config": 1,
    "data": 2,
    "model": 3,
    "decoding": 4,
    "runtime": 5,
    "training": 6,
    "pipelines": 7,
    "export": 8,
    "serve": 8,
    "cli": 9,
    "api": 9,
}


def modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return found


def folder(module: str) -> str:
    """The folder a module lives in: ``nmt.decoding.search`` -> decoding; the package's own
    ``__init__`` (its version) counts as core, the command line as cli."""
    parts = module.split(".")
    if module in ("nmt.cli", "nmt.__main__"):
        return "cli"
    return parts[1] if len(parts) > 1 else "core"


def imported(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from nmt.training import trainer`
    return {name for name in names if name == "nmt" or name.startswith("nmt.")}


MODULES = modules()


def test_no_function_is_longer_than_60_lines():
    long = [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for name, tree in MODULES.items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, long


def allowed(module: str, other: str) -> bool:
    return folder(other) == folder(module) or FOLDER_RANK[folder(other)] < FOLDER_RANK[folder(module)]


def test_every_module_lives_in_a_known_folder():
    assert not [m for m in MODULES if folder(m) not in FOLDER_RANK]
    top_level = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top_level == ["__init__.py", "__main__.py"], top_level  # the commands: nmt/cli/


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_point_down(module):
    wrong = [other for other in imported(MODULES[module]) if other in MODULES and not allowed(module, other)]
    assert not wrong, f"{module} ({folder(module)}) imports {wrong}"


def test_the_checker_sees_a_violation():
    """The rules above would catch an upward or a sideways import (the checker itself is not blind)."""
    tree = ast.parse("def f():\n    from nmt.pipelines.translate import Translator\n")
    assert "nmt.pipelines.translate" in imported(tree)
    assert not allowed("nmt.decoding.search", "nmt.pipelines.translate")
    assert not allowed("nmt.export.package", "nmt.serve.app") and not allowed("nmt.serve.app", "nmt.export.package")
    assert allowed("nmt.serve.app", "nmt.pipelines.translate") and allowed(
        "nmt.model.rnn.decoder", "nmt.model.rnn.cells"
    )


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of ``graph`` (module -> modules it imports) closes."""
    found, state, path = [], {}, []

    def visit(module: str) -> None:
        state[module] = "open"
        path.append(module)
        for other in sorted(graph.get(module, ())):
            if state.get(other) == "open":
                found.append(path[path.index(other) :] + [other])
            elif other not in state:
                visit(other)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_no_two_modules_import_each_other_through_any_path():
    """No import circle anywhere, TYPE_CHECKING and in-function imports included: the config
    reads the registries in core, which the model fills, so the config never imports the model."""
    graph = {m: {o for o in imported(tree) if o in MODULES and o != m} for m, tree in MODULES.items()}
    assert import_cycles(graph) == []
    assert "nmt.core.registry" in graph["nmt.config.schema"]
    assert not [m for m in graph["nmt.config.schema"] if m.startswith("nmt.model")]


def test_the_cycle_finder_sees_a_circle():
    graph = {
        "nmt.config.schema": {"nmt.model.rnn.attention"},
        "nmt.model.rnn.attention": {"nmt.model.x"},
        "nmt.model.x": {"nmt.config.schema"},
    }
    assert import_cycles(graph) == [
        ["nmt.config.schema", "nmt.model.rnn.attention", "nmt.model.x", "nmt.config.schema"]
    ]
