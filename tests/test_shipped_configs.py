"""The shipped configs: every one loads, and the eng-mar ones are the recipe docs/quality.md measured."""

import dataclasses
from pathlib import Path

import pytest

from nmt.config.schema import load_config
from nmt.runtime.parent import architecture_differences

from .helpers import script_module

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "configs").rglob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    assert load_config(path).model.embed_dim > 0


@pytest.mark.parametrize("config", sorted(script_module("quality").RECIPES))
def test_eng_mar_configs_are_the_measured_recipe(config):
    """What scripts/quality.py trained (its base file plus the recipe's overrides) is what the
    config file says, except the settings the driver sets itself for every run."""
    quality = script_module("quality")
    base, variant = quality.RECIPES[config]
    train_overrides, decode_overrides = quality.VARIANTS[variant]
    measured = dataclasses.asdict(load_config(ROOT / base, [*train_overrides, *decode_overrides]))
    shipped = dataclasses.asdict(load_config(ROOT / config))
    for values in (measured, shipped):
        values.pop("run_dir")
        for key in ("epochs", "max_minutes", "seed"):  # the driver's: a budget per run, seeds 1 and 2
            values["train"].pop(key)
    assert shipped == measured


@pytest.mark.parametrize(
    "path",
    [p for p in sorted((ROOT / "configs").rglob("*.yaml")) if load_config(p).init_from],
    ids=lambda p: p.name,
)
def test_a_config_with_a_parent_has_its_parents_architecture(path):
    """A child's init_from names the run of another shipped config (what `bash scripts/main.sh`
    trains): the child's model section must be that config's, or the transfer is refused after
    the parent's minutes are spent."""
    child = load_config(path)
    parents = [p for p in sorted((ROOT / "configs").rglob("*.yaml")) if load_config(p).run_dir == child.init_from]
    assert parents, f"{path.name}: init_from {child.init_from} is no shipped config's run_dir"
    assert architecture_differences(load_config(parents[0]), child) == [], parents[0].name


@pytest.mark.parametrize("config", sorted(script_module("small_data").RECIPES))
def test_eng_hin_configs_are_the_measured_variant(config):
    """What scripts/small_data.py trained (configs/eng-hin.yaml plus the variant's overrides, from
    runs/eng-mar-cpu) is what the config file says, except the driver's run settings."""
    study = script_module("small_data")
    variant = study.VARIANTS[study.RECIPES[config]]
    overrides = [*variant.config_overrides, "init_from=runs/eng-mar-cpu"]
    measured = dataclasses.asdict(load_config(ROOT / study.CONFIG, overrides))
    shipped = dataclasses.asdict(load_config(ROOT / config))
    assert shipped["train"]["max_minutes"] == variant.minutes
    for values in (measured, shipped):
        values.pop("run_dir")
        for key in ("epochs", "max_minutes", "seed"):
            values["train"].pop(key)
    assert shipped == measured


def test_the_related_keys_nmt_init_offers_are_the_learning_curves_recipe():
    """Without a parent, nmt init offers a shipped corpus of the target's script as a related one
    with the settings whose figures it quotes: the related-language line of the learning curve."""
    from nmt.pipelines.init import RELATED_TRAIN, SCRATCH_RELATED_DATA

    curve = script_module("learning_curve")
    base, overrides = curve.RECIPES[curve.RELATED_RECIPE]
    measured = load_config(ROOT / base, [*overrides, *curve.HINDI, curve.RELATED["eng-hin"]])
    offered = load_config(
        ROOT / base,
        [*curve.HINDI, "data.related={mr: data/eng-mar/mar.txt}"]
        + [f"data.{key}={value}" for key, value in SCRATCH_RELATED_DATA.items()]
        + [f"train.{key}={value}" for key, value in RELATED_TRAIN.items()],
    )
    assert measured.data == offered.data and measured.train == offered.train


def test_the_small_data_study_refuses_a_variant_whose_own_parent_is_missing(tmp_path, monkeypatch, capsys):
    """A variant may name its own parent (the seventh measurement's stronger parents): the study
    starts it from that parent, not --parent's, and without it says which parent is missing
    before training anything."""
    study = script_module("small_data")
    name = next(name for name, variant in study.VARIANTS.items() if variant.parent)
    monkeypatch.chdir(tmp_path)  # no runs/ here: neither parent exists
    args = ["--variants", name, "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]
    assert study.main([*args, "--parent", "runs/eng-mar-cpu"]) == 1
    missing = capsys.readouterr().err.split(":")[0]  # the parents listed as missing, not the advice after
    assert missing == f"No parent at {study.VARIANTS[name].parent}"
    assert not (tmp_path / "runs").exists()


def test_a_variant_scored_on_another_split_reuses_the_runs_of_its_recipe(tmp_path):
    """The ninth measurement scores the eighth's runs on its own 200 test sources: such a variant
    trains nothing of its own (its runs are those of the variant that trains the same way), and
    the split it is scored on is another variant's, with another test size."""
    study = script_module("small_data")
    args = type("Args", (), {"runs": str(tmp_path / "runs"), "parent": "runs/eng-mar-cpu"})
    rescored = [name for name, variant in study.VARIANTS.items() if variant.scored_on]
    assert rescored
    for name in rescored:
        variant = study.VARIANTS[name]
        runs, overrides = study.training_of(name, args)
        trainers = [
            other
            for other, trained in study.VARIANTS.items()
            if not trained.scored_on and study.training_of(other, args) == (runs, overrides)
        ]
        assert len(trainers) == 1, name  # one recipe's runs, in the folder of the variant that trains them
        assert runs == tmp_path / "runs" / str(list(study.VARIANTS).index(trainers[0]))
        assert study.VARIANTS[variant.scored_on].test_size < variant.test_size
        assert study.training_of(variant.scored_on, args)[0] != runs
