"""The shipped configs: every one loads, and each measured recipe is what the recipes file
(nmt/recipes.yaml, which `nmt init` writes from) says was measured, so a config and the figure
quoted for it cannot drift apart. Pinned against data, not against the studies that measured it."""

import dataclasses
from pathlib import Path

import pytest

from nmt.config.files import load_config
from nmt.config.parsing import config_from_dict
from nmt.config.recipes import recipes
from nmt.config.schema import Config
from nmt.runtime.parent import architecture_differences

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").rglob("*.yaml"))
MACHINE = ("max_minutes", "epochs", "threads", "seed")  # the budget and the machine: init writes its own
SECTIONS = ("tokenizer", "model", "train", "decode")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    assert load_config(path).model.embed_dim > 0


def merged(*parts: dict) -> dict:
    out: dict = {}
    for part in parts:
        for section, values in part.items():
            out[section] = {**out.get(section, {}), **values}
    return out


def recipe_config(shipped: Config, *settings: dict) -> Config:
    """``shipped``'s run and data with the recipe ``settings`` (over the defaults) and its budget."""
    raw = merged({"run_dir": {}}, *settings)
    raw.pop("run_dir")
    raw = {"run_dir": shipped.run_dir, "init_from": shipped.init_from, "data": dataclasses.asdict(shipped.data), **raw}
    raw["train"] = {**raw.get("train", {}), **{key: getattr(shipped.train, key) for key in MACHINE}}
    return config_from_dict(raw)


def same_recipe(shipped: Config, measured: Config) -> None:
    for section in SECTIONS:
        assert getattr(shipped, section) == getattr(measured, section), section


def test_the_cpu_config_is_nmt_inits_recipe_for_its_corpus():
    """configs/eng-mar-cpu.yaml (33,725 pairs) is the CPU recipe with guided alignment, key for key,
    reading the corpus's shipped links (nmt init writes it so where eflomal makes them)."""
    book = recipes()
    shipped = load_config(ROOT / "configs/eng-mar-cpu.yaml")
    recipe = book.for_pairs(33_725)
    assert recipe.name == "CPU" and "configs/eng-mar-cpu.yaml" in recipe.measured
    guided = book.guided_for(recipe, book.default_family)
    assert guided is not None and "configs/eng-mar-cpu.yaml" in guided.measured
    same_recipe(shipped, recipe_config(shipped, book.common, recipe.settings, guided.settings))
    assert shipped.data.links == "data/eng-mar/mar.links"


def test_the_eng_hin_config_is_nmt_inits_transfer_recipe():
    """configs/eng-hin.yaml: the parent's model with what the small-corpus recipe adds to a child,
    its training settings, and children side by side (2,549 pairs: within children_up_to_pairs)."""
    book = recipes()
    shipped = load_config(ROOT / "configs/eng-hin.yaml")
    parent = load_config(ROOT / "configs/eng-mar-cpu.yaml")
    recipe = book.for_pairs(2_549)
    assert recipe.name == "small-corpus" and book.children_up_to_pairs >= 2_549
    assert shipped.init_from == parent.run_dir
    child_model = {"model": {**dataclasses.asdict(parent.model), **recipe.child_adds["model"]}}
    training = {section: values for section, values in recipe.settings.items() if section != "model"}
    measured = recipe_config(shipped, book.common, training, book.children.settings, child_model)
    same_recipe(shipped, measured)


def test_the_25_minute_eng_hin_config_is_plain_children_for_longer():
    """configs/eng-hin-25min.yaml: the 5-minute recipe's children without the lexical model, 25
    minutes (docs/small-data.md)."""
    five, twenty_five = load_config(ROOT / "configs/eng-hin.yaml"), load_config(ROOT / "configs/eng-hin-25min.yaml")
    assert twenty_five.train.max_minutes == 25 and not twenty_five.model.lexical
    assert dataclasses.replace(five.model, lexical=False) == twenty_five.model
    assert dataclasses.replace(five.train, max_minutes=25) == twenty_five.train
    assert five.decode == twenty_five.decode


def test_the_related_keys_nmt_init_offers_are_the_mixed_configs():
    """configs/eng-hin-mixed.yaml trains the parent's corpus beside the pairs with the settings
    nmt init offers for it (related_to_parent)."""
    shipped = load_config(ROOT / "configs/eng-hin-mixed.yaml")
    offered = recipes().related_to_parent.settings
    assert shipped.data.related == {"mr": "data/eng-mar/mar.txt"}
    assert {key: getattr(shipped.data, key) for key in offered["data"]} == offered["data"]
    assert {key: getattr(shipped.train, key) for key in offered["train"]} == offered["train"]


@pytest.mark.parametrize("path", [p for p in CONFIGS if load_config(p).init_from], ids=lambda p: p.name)
def test_a_config_with_a_parent_has_its_parents_architecture(path):
    """A child's init_from names the run of another shipped config (what `bash scripts/main.sh`
    trains): the child's model section must be that config's, or the transfer is refused after
    the parent's minutes are spent."""
    child = load_config(path)
    parents = [p for p in CONFIGS if load_config(p).run_dir == child.init_from]
    assert parents, f"{path.name}: init_from {child.init_from} is no shipped config's run_dir"
    assert architecture_differences(load_config(parents[0]), child) == [], parents[0].name


def test_no_measured_figure_lives_in_nmt_inits_code():
    """The figures init quotes come from nmt/recipes.yaml: no string literal of its module names
    BLEU or chrF (before: TRANSFER_MEASURED and four more, edited by every measurement)."""
    import ast

    source = (ROOT / "nmt" / "pipelines" / "init.py").read_text(encoding="utf-8")
    strings = [node.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)]
    quoted = [text for text in strings if isinstance(text, str) and ("BLEU" in text or "chrF" in text)]
    assert quoted == []
    every = recipes()
    assert all(recipe.measured and recipe.page.startswith("docs/") for recipe in every.by_size)


def test_the_transformer_config_is_nmt_inits_recipe_for_a_long_cpu_budget():
    """configs/eng-mar-transformer.yaml is what the Transformer's rule for a long budget writes for
    its corpus, key for key (the tokenizer and training settings of the CPU recipe, the
    Transformer's model whole and its training keys over them, its guided alignment over those),
    reading the corpus's shipped links."""
    book = recipes()
    shipped = load_config(ROOT / "configs/eng-mar-transformer.yaml")
    recipe = book.for_pairs(33_725)
    transformer, long = book.family_for(33_725, 25)
    assert (
        transformer.arch == "transformer" and long is not None and "configs/eng-mar-transformer.yaml" in long.measured
    )
    assert book.family_for(33_725, shipped.train.max_minutes)[1] is None  # at 5 minutes the RNN led
    common, training = (
        {section: values for section, values in settings.items() if section != "model"}
        for settings in (book.common, recipe.settings)
    )
    guided = book.guided_for(recipe, transformer)
    assert guided is not None and "configs/eng-mar-transformer.yaml" in guided.measured
    same_recipe(shipped, recipe_config(shipped, common, training, transformer.settings, guided.settings))
    assert shipped.data.links == "data/eng-mar/mar.links"


def test_the_distilled_eng_hin_config_is_nmt_inits_transformer_taught_by_the_shipped_ensemble(tmp_path):
    """configs/eng-hin-distilled.yaml: the model, tokenizer, training and search `nmt init` writes
    for the eng-hin file (its Transformer at 5 minutes), the teacher configs/eng-hin.yaml's run, its
    split, and the eng-mar corpus's English for the teacher to translate (docs/small-data.md)."""
    from nmt.pipelines.init import init_config

    path, _ = init_config([ROOT / "data/eng-hin/hin.txt"], tmp_path / "hin.yaml")
    written, shipped = load_config(path), load_config(ROOT / "configs/eng-hin-distilled.yaml")
    teacher = load_config(ROOT / "configs/eng-hin.yaml")
    assert written.model.arch == "transformer"
    same_recipe(shipped, recipe_config(shipped, {s: dataclasses.asdict(getattr(written, s)) for s in SECTIONS}))
    assert (shipped.data.distill_from, shipped.data.distill) == (teacher.run_dir, "add")
    assert (shipped.data.dev_size, shipped.data.test_size) == (teacher.data.dev_size, teacher.data.test_size)
    assert (ROOT / shipped.data.synthetic_from).is_file()


def test_the_distilled_eng_mar_config_is_the_transformer_recipe_taught_by_the_pair_the_docs_train():
    """configs/eng-mar-distilled.yaml: configs/eng-mar-transformer.yaml key for key but its run,
    its 25-minute budget and the teacher (the two packages docs/transformer.md's side-by-side pair
    exports, beside the human pairs) in place of the shipped links, which hold the human pairs only."""
    shipped = load_config(ROOT / "configs/eng-mar-distilled.yaml")
    recipe = load_config(ROOT / "configs/eng-mar-transformer.yaml")
    assert (shipped.model, shipped.tokenizer, shipped.decode) == (recipe.model, recipe.tokenizer, recipe.decode)
    assert dataclasses.replace(shipped.train, max_minutes=recipe.train.max_minutes) == recipe.train
    assert shipped.train.max_minutes == 25 and shipped.train.guided_alignment == recipe.train.guided_alignment
    teachers = ["runs/pair-rnn-package", "runs/pair-transformer-package"]
    assert (shipped.data.distill_from, shipped.data.distill, shipped.data.links) == (teachers, "add", "")
    assert dataclasses.replace(shipped.data, distill_from="", distill="replace", links=recipe.data.links) == recipe.data
    page = (ROOT / "docs/transformer.md").read_text(encoding="utf-8")
    assert all(f"nmt export {package.removesuffix('-package')} {package}" in page for package in teachers)


@pytest.mark.parametrize("name", ["eng-mar-transformer.yaml", "eng-hin-distilled.yaml", "eng-mar-transformer-gpu.yaml"])
def test_the_shipped_transformer_recipes_export_to_transformers(name):
    """Measured in Marian's shape (docs/transformer.md, "In Marian's shape" and "On a GPU"), the
    Transformer that `nmt init` writes — configs/eng-hin-distilled.yaml is it, key for key (above) —
    the 25-minute eng-mar one and the GPU one are models `nmt export --hf` takes to MarianMTModel."""
    from nmt.core.registry import ARCHITECTURES

    config = load_config(ROOT / "configs" / name)
    assert ARCHITECTURES["transformer"].hf_problems(config.model)["marian"] == []
