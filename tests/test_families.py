"""A model family is its registry entry: what the config, the log, the model card, the lab, ONNX
export and tune read of it is the entry's, never a branch on its name (tests/test_docs.py trains,
packages and refuses a plugin family from the architecture page's recipe)."""

from __future__ import annotations

import ast

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
