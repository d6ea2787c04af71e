"""What ``nmt init`` chooses, read from data: the recipes measured here (``nmt/recipes.yaml``) and
the example corpora and configs the package ships (``nmt/examples``).

No measured figure lives in Python: each recipe carries its settings, what was measured and
the page that measured it, and a new measurement edits the YAML file. The examples are the
checkout's ``configs/`` and ``data/eng-mar/`` (``nmt/examples`` links to them; a wheel holds
copies), found where the package is installed, never relative to the working folder.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nmt.core.errors import NmtError
from nmt.core.fileio import create_new, refuse_links_under
from nmt.core.registry import ARCHITECTURES

PACKAGE = Path(__file__).resolve().parents[1]
RECIPES_FILE = PACKAGE / "recipes.yaml"
EXAMPLES = PACKAGE / "examples"


Sections = dict[str, dict[str, Any]]  # {section: {key: value}}, as in a config file


@dataclass(frozen=True)
class Recipe:
    """Settings measured together for corpora of up to ``max_pairs`` pairs."""

    name: str
    max_pairs: int
    settings: Sections  # the recipe's own keys, over the common ones
    measured: str  # what it gave, as the config's comments quote it
    page: str  # where it was measured
    child_adds: Sections = field(default_factory=dict)  # a child of a parent adds these (--init-from)
    on_gpu: Measured | None = None  # over ``settings`` where PyTorch sees a CUDA GPU


@dataclass(frozen=True)
class FamilyRule:
    """Where a family measured ahead of the default one on a CPU: corpora of up to ``up_to_pairs``
    pairs, given ``from_minutes`` of training or more."""

    up_to_pairs: int
    from_minutes: float
    measured: str
    page: str


@dataclass(frozen=True)
class Guided:
    """Guided alignment as a family measured it: its keys (over the recipe's) with the recipes
    (by name) whose model it was measured with, on a CPU."""

    recipes: tuple[str, ...]
    settings: Sections
    measured: str
    page: str


@dataclass(frozen=True)
class FamilyRecipe:
    """A model family as ``nmt init`` writes it (``families`` in the recipes file)."""

    arch: str  # model.arch
    name: str  # "Transformer", as the comments name it
    title: str  # "a Transformer"
    settings: Sections  # the default family's: under a recipe's; another's: its model whole, its training keys
    page: str
    measured: str = ""  # why the default family is the default
    default: bool = False
    rules: list[FamilyRule] = field(default_factory=list)  # where it is written instead of the default
    related_measured: str = ""  # its model beside a related corpus from scratch
    child_schedule: list[str] = field(default_factory=list)  # training keys a child takes from its parent
    recipe_children: bool = False  # a child adds the recipe's child_adds; children of a small corpus ensemble
    guided: Guided | None = None  # guided alignment, where the links can be had (eflomal, or data.links)

    def rule_for(self, pairs: int, minutes: float) -> FamilyRule | None:
        """The first rule that holds a corpus of ``pairs`` pairs trained for ``minutes`` on a CPU."""
        fits = (rule for rule in self.rules if pairs <= rule.up_to_pairs and minutes >= rule.from_minutes)
        return next(fits, None)

    def nearest_rule(self, pairs: int) -> FamilyRule | None:
        """The rule nearest a corpus of ``pairs`` pairs (the family asked for by name)."""
        return min(self.rules, key=lambda rule: abs(rule.up_to_pairs - pairs), default=None)


@dataclass(frozen=True)
class Measured:
    """Settings offered or used together, with what they gave."""

    settings: Sections
    measured: str
    page: str = ""


@dataclass(frozen=True)
class Measurement:
    """One line of the recipes' table (``table``): a recipe measured on a shipped corpus, and
    where the model it trains runs."""

    corpus: str  # e.g. "eng-hin (2,549 pairs)"
    recipe: str  # what it trains, and its config
    minutes: float  # the training budget
    bleu: float  # test BLEU, all references
    runs_on: str  # the exports its model takes
    page: str  # where it was measured, with the hardware


@dataclass(frozen=True)
class Recipes:
    common: Sections
    families: dict[str, FamilyRecipe]  # by model.arch
    by_size: list[Recipe]
    split: dict[str, float]
    transfer: Measured
    lexical_measured: str
    children: Measured
    children_up_to_pairs: int
    related_to_parent: Measured
    related_from_scratch: Measured  # its settings (what it gave: each family's related_measured)
    table: tuple[Measurement, ...]  # the recipes side by side, as init's comments and docs/small-data.md list them
    table_intro: tuple[str, ...]  # the lines above its rows: what the table is, and its columns

    @staticmethod
    def guided_for(recipe: Recipe, family: FamilyRecipe) -> Guided | None:
        """Guided alignment, where ``family`` measured it with ``recipe``'s model (on a CPU)."""
        return family.guided if family.guided and recipe.name in family.guided.recipes else None

    def for_pairs(self, pairs: int) -> Recipe:
        """The first recipe whose size holds a corpus of ``pairs`` pairs."""
        return next(recipe for recipe in self.by_size if pairs <= recipe.max_pairs)

    @property
    def default_family(self) -> FamilyRecipe:
        return next(family for family in self.families.values() if family.default)

    def family_for(self, pairs: int, minutes: float, asked: str = "") -> tuple[FamilyRecipe, FamilyRule | None]:
        """The family to write on a CPU for a corpus of ``pairs`` pairs and ``minutes`` of training,
        and the rule that chose it: the first family with a rule that holds them, else the default;
        ``asked`` (--arch) names one, then written by its rule nearest the corpus."""
        if asked:
            family = self.families[asked]
            return family, family.rule_for(pairs, minutes) or family.nearest_rule(pairs)
        for family in self.families.values():
            rule = family.rule_for(pairs, minutes)
            if rule is not None:
                return family, rule
        return self.default_family, None

    def family_of(self, arch: str) -> FamilyRecipe:
        """A parent's family: the recipes' entry, or for a family they do not know (a plugin's), one
        that takes nothing from the recipes for its children."""
        return self.families.get(arch) or FamilyRecipe(arch, arch, f"a model of model.arch {arch}", {}, "")


def _recipe(raw: dict, widths: tuple[str, ...]) -> Recipe:
    """A recipe of the default family, its ``width`` written as each of that family's ``widths``."""
    settings = {section: dict(values) for section, values in raw["settings"].items()}
    settings["model"] = {**dict.fromkeys(widths, raw["width"]), **settings.get("model", {})}
    on_gpu = _measured(raw["on_gpu"]) if "on_gpu" in raw else None
    child_adds = raw.get("child_adds", {})
    return Recipe(raw["name"], raw["max_pairs"], settings, raw["measured"], raw["page"], child_adds, on_gpu)


def _family(arch: str, raw: dict) -> FamilyRecipe:
    rules = [FamilyRule(**rule) for rule in raw.get("rules", [])]
    guided = raw.get("guided")
    if guided is not None:
        guided = Guided(**{**guided, "recipes": tuple(guided["recipes"])})
    return FamilyRecipe(arch, **{**raw, "rules": rules, "guided": guided})


def _measured(raw: dict, page: str = "") -> Measured:
    return Measured(raw.get("settings", {}), raw["measured"], raw.get("page", page))


@functools.cache
def recipes(path: Path = RECIPES_FILE) -> Recipes:
    """The recipes file, read once."""
    with open(path, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    transfer = raw["transfer"]
    families = {arch: _family(arch, entry) for arch, entry in raw["families"].items()}
    default = next(family.arch for family in families.values() if family.default)
    widths = ARCHITECTURES[default].settings.widths  # the keys `width` sets (the default family's)
    return Recipes(
        common=raw["common"],
        families=families,
        by_size=[_recipe(entry, widths) for entry in raw["by_size"]],
        split=raw["split"],
        transfer=_measured(transfer),
        lexical_measured=transfer["lexical_measured"],
        children=_measured(transfer["children"], transfer["page"]),
        children_up_to_pairs=transfer["children"]["up_to_pairs"],
        related_to_parent=_measured(raw["related_to_parent"]),
        related_from_scratch=Measured(raw["related_from_scratch"]["settings"], "", raw["related_from_scratch"]["page"]),
        table=tuple(Measurement(**row) for row in raw["table"]["rows"]),
        table_intro=tuple(raw["table"]["intro"]),
    )


@dataclass(frozen=True)
class ExampleCorpus:
    """A corpus the package ships: its pair, its target's script, the config that trains on it
    and the run that config trains; ``files`` are what ``nmt init --example`` copies (paths
    relative to the examples' root, as a checkout has them)."""

    name: str  # e.g. eng-mar
    src_lang: str
    tgt_lang: str
    script: str
    corpus: str
    config: str
    run_dir: str
    files: tuple[str, ...]
    parent: bool = True  # offered by nmt init as a model to start a corpus of its target's script from

    @property
    def path(self) -> Path:
        """The corpus where this installation holds it."""
        return EXAMPLES / self.corpus


EXAMPLE_CORPORA = (
    ExampleCorpus(
        name="eng-mar",
        src_lang="en",
        tgt_lang="mr",
        script="DEVANAGARI",
        corpus="data/eng-mar/mar.txt",
        config="configs/eng-mar-cpu.yaml",
        run_dir="runs/eng-mar-cpu",
        files=(
            "data/eng-mar/mar.txt",
            "data/eng-mar/mar.links",  # its word links (data.links: guided alignment without eflomal)
            "data/eng-mar/sample.en",
            "data/eng-mar/README.md",
            "configs/eng-mar-cpu.yaml",
            "configs/eng-mar.yaml",
            "configs/eng-mar-gpu.yaml",
            "configs/eng-mar-transformer.yaml",
            "configs/eng-mar-transformer-gpu.yaml",
            "configs/eng-mar-distilled.yaml",  # the side-by-side pair (docs/transformer.md) as one Transformer
            "configs/tiny.yaml",  # the notebook's and the smoke test's
            "notebooks/attention_lab.ipynb",
            "notebooks/does_attention_align.ipynb",
            "notebooks/bahdanau_to_transformer.ipynb",
        ),
    ),
    ExampleCorpus(  # a small corpus, to try the small-data recipes (docs/small-data.md)
        name="eng-hin",
        src_lang="en",
        tgt_lang="hi",
        script="DEVANAGARI",
        corpus="data/eng-hin/hin.txt",
        config="configs/eng-hin-scratch.yaml",
        run_dir="runs/eng-hin-scratch",
        files=(
            "data/eng-hin/hin.txt",
            "data/eng-hin/README.md",
            "configs/eng-hin-scratch.yaml",
            "configs/eng-hin.yaml",
            "configs/eng-hin-mixed.yaml",
            "configs/eng-hin-distilled.yaml",  # the ensemble of eng-hin.yaml as one Transformer
        ),
        parent=False,
    ),
)


def example_corpora() -> list[ExampleCorpus]:
    """The example corpora this installation holds (a package built without them holds none)."""
    return [corpus for corpus in EXAMPLE_CORPORA if corpus.path.is_file()]


def copy_example(name: str, into: Path) -> list[Path]:
    """Copy example ``name``'s corpus and configs into the folder ``into``, as a checkout lays them
    out (their configs' relative paths then work from there); refused, before anything is
    copied, where a file would be overwritten. Returns the files written."""
    found = {corpus.name: corpus for corpus in EXAMPLE_CORPORA}
    if name not in found:
        raise NmtError(f"--example {name!r}: the examples are {', '.join(found)}.")
    example = found[name]
    missing = [file for file in example.files if not (EXAMPLES / file).is_file()]
    if missing:
        raise NmtError(f"This installation of nmt holds no {', '.join(missing)} (a package built without examples).")
    taken = [into / file for file in example.files if (into / file).exists() or (into / file).is_symlink()]
    if taken:
        what = "is a symbolic link" if taken[0].is_symlink() else "exists"
        raise NmtError(
            f"{taken[0]} {what}: nmt init --example never writes over or through a file. Nothing was copied."
        )
    for file in example.files:  # a folder on the way that is a link would take the files elsewhere
        refuse_links_under(into, into / file)
    written = []
    for file in example.files:
        (into / file).parent.mkdir(parents=True, exist_ok=True)
        create_new(into / file, (EXAMPLES / file).read_bytes())
        written.append(into / file)
    return written
