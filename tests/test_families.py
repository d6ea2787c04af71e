"""A model family is its registry entry: what the config, the log, the model card, the lab, ONNX
export and tune read of it is the entry's, never a branch on its name (tests/test_docs.py trains,
packages and refuses a plugin family from the architecture page's recipe)."""

from __future__ import annotations

import ast
import dataclasses

import pytest
import torch

from nmt.config.schema import ModelConfig
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES
from nmt.export.onnx_graphs import export_graphs
from nmt.export.package import _architecture
from nmt.model.base import TranslationModel
from nmt.pipelines.tune import default_space

from .helpers import TINY_TRANSFORMER, model_config
from .test_code_shape import MODULES

FAMILY_CLASSES = {"Seq2Seq", "Transformer"}


def family_branches(tree: ast.Module) -> list[int]:
    """Lines that ask a family by name: ``x.arch == "..."`` (or !=, in), ``isinstance(m, Transformer)``
    or ``isinstance(m, Seq2Seq)``, ``hasattr(m, "every_head")``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(
                (isinstance(s, ast.Attribute) and s.attr == "arch") or (isinstance(s, ast.Name) and s.id == "arch")
                for s in sides
            )
            if named and any(isinstance(s, ast.Constant | ast.Tuple | ast.List | ast.Set) for s in sides):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2:
            if node.func.id == "isinstance" and FAMILY_CLASSES & {
                n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)
            }:
                lines.append(node.lineno)
            if (
                node.func.id == "hasattr"
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "every_head"
            ):
                lines.append(node.lineno)
    return lines


def test_nothing_branches_on_a_family_name():
    """Before: 22 places in 9 modules outside nmt/model (the ONNX export, init, the lab, the
    trainer, the config's checks, tune, the model card, the timeline, the lab's sizes) and 5
    inside it (the graphs, the graph buckets); now none anywhere."""
    found = {name: family_branches(tree) for name, tree in MODULES.items()}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_branch_finder_sees_each_kind_of_branch():
    code = (
        'if config.arch == "transformer": pass\nisinstance(model, (Seq2Seq, Transformer))\nhasattr(m, "every_head")\n'
    )
    assert family_branches(ast.parse(code)) == [1, 2, 3]


# What the exports of the built-in families were before their facts moved into their entries (the
# same packages and graphs byte for byte on a tiny trained model of each, checked when they moved).
RNN_LAYOUT = {
    "memory": ["enc_outputs", "keys", "mask"],
    "state": ["h_0"],
    "decoder_step": ["logits", "attention", "next_h_0"],
}
TRANSFORMER_LAYOUT = {
    "memory": ["mask", "cross_k_0", "cross_v_0", "cross_k_1", "cross_v_1"],
    "state": ["self_k_0", "self_v_0", "self_k_1", "self_v_1"],
    "decoder_step": [
        "logits",
        "attention",
        "next_self_k_0",
        "next_self_v_0",
        "next_self_k_1",
        "next_self_v_1",
        "heads",
    ],
}


@pytest.mark.parametrize(
    ("model", "layout", "card"),
    [
        (
            {},
            RNN_LAYOUT,
            (
                "attention-based RNN translation model",
                "embeddings 16, bidirectional GRU 16 per direction × 1 layer(s), GRU decoder 16 × 1 layer(s), "
                "attention `bahdanau` (window `global`, input feeding False)",
            ),
        ),
        (
            TINY_TRANSFORMER,
            TRANSFORMER_LAYOUT,
            (
                "Transformer translation model",
                "pre-norm Transformer, 2 encoder and 2 decoder layer(s), width 32, 4 heads, feed-forward 64, "
                "sinusoidal positions",
            ),
        ),
    ],
)
def test_each_family_exports_the_layout_and_card_it_had(tmp_path, model, layout, card):
    pytest.importorskip("onnxruntime")
    config = model_config(**model)
    torch.manual_seed(0)
    built = ARCHITECTURES[config.arch](config, 20, 20)
    manifest = export_graphs(built, tmp_path)
    assert {key: manifest[key] for key in ("memory", "state")} == {k: layout[k] for k in ("memory", "state")}
    assert manifest["decoder_step"]["outputs"] == layout["decoder_step"]
    assert _architecture(config) == card


class NoFacts(TranslationModel):
    """A family that declares nothing beyond the protocol."""


def test_a_family_without_graphs_heads_or_a_space_is_refused_by_its_name(tmp_path, monkeypatch):
    monkeypatch.setitem(ARCHITECTURES, "plain", NoFacts)
    config = ModelConfig(arch="plain")
    with pytest.raises(NmtError, match="'plain' has no default search space"):
        default_space("plain")
    with pytest.raises(NmtError, match=r"\(plain: NoFacts \(model.arch: plain\)\) cannot be exported to ONNX"):
        model = NoFacts()
        model.config = config
        export_graphs(model, tmp_path)
    assert not NoFacts.has_heads and not NoFacts.recurrent and _architecture(config)[0] == "translation model"


# ---- a family's settings are its own: read inside its folder (and its lab view), nowhere else ----


def family_owners() -> dict[str, tuple[str, ...]]:
    """Each built-in family's own keys, by the module prefixes that may read them: its folder
    (nmt/model/<family>/) and the lab view it names (``lab_view``)."""
    owners = {}
    for arch in ARCHITECTURES:
        family = ARCHITECTURES[arch]
        folder = family.settings.__module__.rpartition(".")[0]  # nmt.model.rnn
        view = family.lab_view.partition(":")[0]
        for key in {f.name for f in dataclasses.fields(family.settings)} - SHARED:
            owners[key] = (folder, view) if view else (folder,)
    return owners


SHARED = {f.name for f in dataclasses.fields(ModelConfig)}


def settings_reads(tree: ast.Module, owners: dict[str, tuple[str, ...]], module: str) -> list[str]:
    """Where ``module`` reads a family's settings it does not own: ``<x>.model.<key>`` or
    ``getattr(x, "<key>")`` of a family's own key, or an import of a family's settings module."""
    found = []

    def owned(key: str) -> bool:
        return key not in owners or module.startswith(owners[key])

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "model":
            if not owned(node.attr):
                found.append(f"{module}:{node.lineno} .model.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and not owned(name.value):
                found.append(f"{module}:{node.lineno} getattr {name.value!r}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith(".settings"):
            folder = (node.module or "").rpartition(".")[0]
            allowed = {prefix for prefixes in owners.values() for prefix in prefixes if prefixes[0] == folder}
            if not module.startswith(tuple(allowed)):
                found.append(f"{module}:{node.lineno} imports {node.module}")
    return found


def test_no_module_reads_a_familys_settings_outside_the_family():
    """Before: the Transformer's heads read by the lab's sizes, the CTranslate2 folder check and the
    heads view; the RNN's keys by the parent's transfer (ADDABLE, FREEZE_PARTS), the checkpoints'
    free keys, the config's checks and the recipes (their widths), the ONNX layout, the lab's
    registry of views. Now a family's own keys are read in its folder and the lab view it names;
    mypy refuses ``config.model.heads`` on the shared ``ModelConfig`` besides."""
    owners = family_owners()
    assert owners["heads"] == ("nmt.model.transformer", "nmt.pipelines.heads")
    assert owners["attention"] == ("nmt.model.rnn", "nmt.pipelines.rnn_lab")
    found = [read for name, tree in MODULES.items() for read in settings_reads(tree, owners, name)]
    assert found == []


def test_the_settings_guard_sees_each_kind_of_read():
    owners = {"heads": ("nmt.model.transformer",)}
    code = (
        "config.model.heads\n"
        'getattr(config.model, "heads")\n'
        "from nmt.model.transformer.settings import transformer_settings\n"
        "config.model.embed_dim\n"
    )
    found = settings_reads(ast.parse(code), owners, "nmt.pipelines.lab_size")
    assert sorted(line.split(" ", 1)[0] for line in found) == [f"nmt.pipelines.lab_size:{n}" for n in (1, 2, 3)]
    assert settings_reads(ast.parse(code), owners, "nmt.model.transformer.model") == []
