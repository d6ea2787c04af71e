"""The package keeps its shape: short functions, and layers that only point down.

    CLI         nmt.cli, nmt.__main__
    pipelines   nmt.prepare, nmt.train.*, nmt.translate, nmt.lab, nmt.evaluate, nmt.export, nmt.serve.*
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
PIPELINES = {"nmt.prepare", "nmt.train", "nmt.translate", "nmt.lab", "nmt.evaluate", "nmt.export", "nmt.serve"}


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
