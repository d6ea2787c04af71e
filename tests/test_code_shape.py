"""The package keeps its shape: short functions, and layers that only point down.

    CLI         nmt.cli, nmt.__main__
    pipelines   nmt.prepare, nmt.distill, nmt.train.*, nmt.tune, nmt.translate, nmt.lab, nmt.evaluate,
                nmt.export, nmt.serve.*
    core        everything else: config, tokenizer, paths, data, model, search, checkpoint, loading, ...

Every import counts, including those inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nmt"
MAX_FUNCTION_LINES = 60
CLI = {"nmt.cli", "nmt.__main__"}
PIPELINES = {
    "nmt.prepare",
    "nmt.distill",
    "nmt.train",
    "nmt.tune",
    "nmt.translate",
    "nmt.lab",
    "nmt.evaluate",
    "nmt.export",
    "nmt.serve",
}


def modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return found


def layer(module: str) -> int:
    """0 core, 1 pipelines, 2 CLI."""
    if module in CLI:
        return 2
    if any(module == p or module.startswith(p + ".") for p in PIPELINES):
        return 1
    return 0


def imported(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from nmt.train import trainer`
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


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_point_down(module):
    upward = [other for other in imported(MODULES[module]) if other in MODULES and layer(other) > layer(module)]
    assert not upward, f"{module} (layer {layer(module)}) imports {upward}"


def test_training_depends_on_neither_translation_nor_the_cli():
    for module, tree in MODULES.items():
        if module.startswith("nmt.train"):
            forbidden = {m for m in imported(tree) if m.split(".")[:2] in (["nmt", "translate"], ["nmt", "cli"])}
            assert not forbidden, f"{module} imports {forbidden}"


def test_the_checker_sees_a_violation():
    """The rules above would catch an upward import (the checker itself is not blind)."""
    tree = ast.parse("def f():\n    from nmt.translate import Translator\n")
    assert "nmt.translate" in imported(tree) and layer("nmt.translate") > layer("nmt.search")


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
    """No import circle anywhere, TYPE_CHECKING and in-function imports included: config reads
    the registries of attentions and cells, so the model may import the config, never the
    reverse way round."""
    graph = {m: {o for o in imported(tree) if o in MODULES and o != m} for m, tree in MODULES.items()}
    assert import_cycles(graph) == []
    assert {"nmt.model.attention", "nmt.model.cells"} <= graph["nmt.config"]
    assert "nmt.config" not in graph["nmt.model.attention"] | graph["nmt.model.cells"]


def test_the_cycle_finder_sees_a_circle():
    graph = {
        "nmt.config": {"nmt.model.attention"},
        "nmt.model.attention": {"nmt.model.x"},
        "nmt.model.x": {"nmt.config"},
    }
    assert import_cycles(graph) == [["nmt.config", "nmt.model.attention", "nmt.model.x", "nmt.config"]]
