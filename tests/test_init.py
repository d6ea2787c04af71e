"""``nmt init``: a first config written from the corpus (nmt/pipelines/init.py). Each written config
is one `nmt prepare` and `nmt train` accept (here shrunk with --set to a seconds-long run)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from nmt.config.files import load_config
from nmt.config.recipes import recipes
from nmt.core.errors import NmtError
from nmt.data.profile import guess_languages
from nmt.pipelines.init import init_config, split_sizes
from nmt.pipelines.prepare import prepare
from nmt.training.trainer import build_trainer

from .helpers import synthetic_pairs, tiny_config, write_anki

ROOT = Path(__file__).resolve().parents[1]
SHARED_HINDI = ROOT / "data" / "eng-hin" / "hin.txt"  # shipped, as the example eng-hin
SHRINK = [  # the written recipe, shrunk to seconds: the keys are the config's own
    "data.max_pairs=300",
    "data.dev_size=10",
    "data.test_size=10",
    "tokenizer.src_vocab_size=600",
    "tokenizer.tgt_vocab_size=600",
    *(f"model.{key}=32" for key in ("embed_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "output_dim")),
    "train.epochs=1",
    "train.max_minutes=0",
    "train.probes=0",
]


def prepares_and_trains(path: Path, tmp_path: Path) -> None:
    config = load_config(path, [*SHRINK, f"run_dir={tmp_path / 'run'}"])
    prepare(config, log=lambda _: None, show_bar=False)
    progress = build_trainer(config, torch.device("cpu"), show_bar=False, echo=False).run()
    assert progress.epoch == 1


def with_offered_keys(text: str) -> dict:
    """A written config with the keys its comments offer (``#   data: {...}``) added to their sections."""
    raw = yaml.safe_load(text)
    for line in text.splitlines():
        if line.startswith(("#   data: ", "#   train: ")):
            for section, values in yaml.safe_load(line.removeprefix("#   ")).items():
                raw[section].update(values)
    return raw


def test_the_shipped_eng_mar_file_gets_the_cpu_recipe(tmp_path):
    path, text = init_config([ROOT / "data" / "eng-mar" / "mar.txt"], tmp_path / "mar.yaml")
    config = load_config(path)
    assert (config.data.src_lang, config.data.tgt_lang) == ("en", "mr")
    assert config.data.dev_size == config.data.test_size == 1111  # 5 % of 22,211 distinct sources
    assert not config.model.input_feeding and config.tokenizer.src_vocab_size == 2000
    assert "33,725 pairs, 22,211 distinct en sentences" in text and "init_from" not in text  # no other corpus
    family = "".join(recipes().default_family.measured.split())  # the comments wrap it at spaces and hyphens
    assert config.model.arch == "rnn" and family in "".join(text.replace("\n#", "").split())
    prepares_and_trains(path, tmp_path)


def test_the_shared_eng_hin_file_gets_the_small_corpus_transformer_and_the_related_corpus(tmp_path):
    """At the default 5 minutes on a CPU, 2,549 pairs get the Transformer over the small-corpus
    recipe's tokenizer and batches (nmt/recipes.yaml's first Transformer rule), and the comments offer
    the Marathi corpus beside them with what it measured beside a Transformer."""
    done = subprocess.run(
        [sys.executable, "-m", "nmt", "init", str(SHARED_HINDI), "--to", str(tmp_path / "hin.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "hin.yaml").read_text(encoding="utf-8")
    config = load_config(tmp_path / "hin.yaml")
    assert (config.data.tgt_lang, config.model.arch) == ("hi", "transformer")
    beside = "".join(recipes().families["transformer"].related_measured.split())
    assert beside in "".join(text.replace("\n#", "").split())  # the comments wrap it at spaces
    assert (config.data.dev_size, config.data.test_size) == (50, 353)  # of 2,353 distinct sources
    assert "the header row 'Eng\\tHin\\tOth'" in text and "devanagari" in text
    assert "--init-from runs/eng-mar-cpu" in text  # the shipped Marathi corpus shares the script
    prepares_and_trains(tmp_path / "hin.yaml", tmp_path)
    # without that model: the Marathi corpus trained beside the pairs from scratch, keys offered in comments
    raw = with_offered_keys(text)
    (language, path), *others = raw["data"]["related"].items()  # the shipped file of the nmt that wrote it
    assert (language, Path(path).parts[-3:], others) == ("mr", ("data", "eng-mar", "mar.txt"), [])
    assert raw["data"]["oversample"] == 2
    assert (raw["train"]["related_per_epoch"], raw["train"]["related_until"]) == (3000, 0.6)
    raw["data"]["related_pairs"] = 300  # a seconds-long run
    (tmp_path / "related.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    prepares_and_trains(tmp_path / "related.yaml", tmp_path / "related")


def flat(text: str) -> str:
    """A config's text without its comments' wrapping (they wrap at spaces and hyphens)."""
    return "".join(text.replace("\n#", "").split())


def test_guided_alignment_is_written_where_eflomal_is_installed_and_offered_where_not(tmp_path, monkeypatch):
    """The CPU recipe with the default family gets guided alignment (its family's ``guided`` in nmt/recipes.yaml)
    where eflomal can make the links; where it cannot, the comments say what it gave and offer the
    keys, and the config written trains without it."""
    pytest.importorskip("eflomal")
    book = recipes()
    guided = book.guided_for(book.for_pairs(33_725), book.default_family)
    assert guided is not None
    path, text = init_config([ROOT / "data" / "eng-mar" / "mar.txt"], tmp_path / "with.yaml")
    config = load_config(path)
    assert (config.train.guided_alignment, config.train.probe_alignment) == (0.1, 200)
    assert "".join(guided.measured.split()) in flat(text) and "left out" not in text
    monkeypatch.setitem(sys.modules, "eflomal", None)  # `import eflomal` raises ImportError
    path, text = init_config([ROOT / "data" / "eng-mar" / "mar.txt"], tmp_path / "without.yaml")
    assert load_config(path).train.guided_alignment == 0 and "Guided alignment is left out" in text
    assert "pip install eflomal" in text and "".join(guided.measured.split()) in flat(text)
    offered = with_offered_keys(text)["train"]
    assert (offered["guided_alignment"], offered["probe_alignment"]) == (0.1, 200)


def test_each_family_writes_the_guided_alignment_it_measured(tmp_path):
    """eng-mar in 25 minutes is the Transformer's (configs/eng-mar-transformer.yaml): its guided
    alignment, at its own weight, with its own figures; in 5 minutes the RNN's, at the RNN's."""
    pytest.importorskip("eflomal")
    book = recipes()
    recipe = book.for_pairs(33_725)
    for minutes, arch in ((25, "transformer"), (5, "rnn")):
        guided = book.guided_for(recipe, book.families[arch])
        assert guided is not None
        path, text = init_config([ROOT / "data" / "eng-mar" / "mar.txt"], tmp_path / f"{arch}.yaml", minutes)
        config = load_config(path)
        assert config.model.arch == arch
        assert config.train.guided_alignment == guided.settings["train"]["guided_alignment"]
        assert "".join(guided.measured.split()) in flat(text)
    transformer, rnn = (book.guided_for(recipe, book.families[arch]) for arch in ("transformer", "rnn"))
    assert transformer and rnn and transformer.settings != rnn.settings  # each family its own weight


def test_guided_alignment_only_where_it_was_measured(tmp_path, monkeypatch):
    """Not for a small corpus (its recipe was not measured with it), nor on a GPU; where a related
    corpus is offered beside a guided config, its keys turn guidance off (the two do not combine)."""
    import nmt.pipelines.init as init_module

    pytest.importorskip("eflomal")
    path, text = init_config([SHARED_HINDI], tmp_path / "small.yaml")
    assert load_config(path).train.guided_alignment == 0 and "Guided alignment" not in text
    monkeypatch.setattr(init_module, "select_device", lambda name: torch.device("cuda"))
    path, text = init_config([ROOT / "data" / "eng-mar" / "mar.txt"], tmp_path / "gpu.yaml")
    assert load_config(path).train.guided_alignment == 0 and "Guided alignment" not in text
    monkeypatch.setattr(init_module, "select_device", lambda name: torch.device("cpu"))
    rows = [(f"we see the {i} house", f"हम {i} घर देखते हैं") for i in range(12_000)]  # the CPU recipe, its RNN
    path, text = init_config([write_anki(tmp_path / "eng-hin.tsv", rows)], tmp_path / "hin.yaml")
    assert load_config(path).train.guided_alignment == 0.1 and "data/eng-mar/mar.txt" in text
    raw = with_offered_keys(text)  # the related corpus's keys, as a reader adds them
    assert raw["data"]["related"] and raw["train"]["guided_alignment"] == 0
    (tmp_path / "related.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    assert load_config(tmp_path / "related.yaml").train.guided_alignment == 0  # check_guided_alignment passes


def test_a_small_corpus_holds_back_few_dev_sources_and_a_large_one_five_percent():
    # dev only watches a small corpus's run (its last checkpoint scores as its best), so it keeps
    # at most 50 sources for training (docs/small-data.md, eighth measurement); test keeps 15 %
    assert split_sizes(100) == (20, 20)
    assert split_sizes(400) == (32, 60)
    assert split_sizes(2_353) == (50, 353)
    assert split_sizes(9_999) == (50, 1500)
    assert split_sizes(22_211) == (1111, 1111)
    assert split_sizes(100_000) == (2000, 2000)


def test_an_anki_zip_and_aligned_files(tmp_path):
    archive = tmp_path / "hin-eng.zip"
    with zipfile.ZipFile(archive, "w") as packed:
        packed.writestr("hin.txt", "".join(f"{s}\t{t}\n" for s, t in synthetic_pairs()))
    path, _ = init_config([archive], tmp_path / "zip.yaml")
    assert load_config(path).data.tgt_lang == "hi"
    prepares_and_trains(path, tmp_path / "zip")
    (tmp_path / "train.en").write_text("".join(f"{s}\n" for s, _ in synthetic_pairs()), encoding="utf-8")
    (tmp_path / "train.mr").write_text("".join(f"{t}\n" for _, t in synthetic_pairs()), encoding="utf-8")
    path, text = init_config([tmp_path / "train.en", tmp_path / "train.mr"], tmp_path / "aligned.yaml")
    config = load_config(path)
    assert config.data.train == {"en": str(tmp_path / "train.en"), "mr": str(tmp_path / "train.mr")}
    assert config.model.arch == "transformer" and "small-corpus recipe" in text
    prepares_and_trains(path, tmp_path / "aligned")


def test_a_bad_file_is_named_with_its_line_and_nothing_is_overwritten(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("a sentence without a tab\nanother one\nok\tठीक\n", encoding="utf-8")
    with pytest.raises(
        NmtError,
        match=r"(?s)bad\.txt does not look like an Anki/Tatoeba TSV file.*2 of 3 lines are malformed.*bad\.txt:1",
    ):
        init_config([bad], tmp_path / "bad.yaml")
    assert not (tmp_path / "bad.yaml").exists()
    good = write_anki(tmp_path / "mar.txt", synthetic_pairs())
    (tmp_path / "taken.yaml").write_text("mine\n", encoding="utf-8")
    with pytest.raises(NmtError, match=r"taken\.yaml exists"):
        init_config([good], tmp_path / "taken.yaml")
    assert (tmp_path / "taken.yaml").read_text(encoding="utf-8") == "mine\n"


def test_recipes_by_size():
    assert [recipes().for_pairs(n).name for n in (2_549, 33_725, 500_000)] == ["small-corpus", "CPU", "large-corpus"]


def test_on_a_cuda_machine_init_writes_token_batches_except_for_a_small_corpus(tmp_path, monkeypatch):
    import nmt.pipelines.init as init_module

    monkeypatch.setattr(init_module, "select_device", lambda name: torch.device("cuda"))
    path, text = init_config([ROOT / "data" / "eng-mar" / "mar.txt"], tmp_path / "mar.yaml")
    config = load_config(path)
    assert (config.train.batch_tokens, config.train.batch_size, config.train.learning_rate) == (8000, 4000, 0.004)
    assert "On this machine's CUDA GPU: batches by tokens" in text and "46.48 and 45.46" in text
    write_anki(tmp_path / "eng-hin.tsv", synthetic_pairs())
    path, text = init_config([tmp_path / "eng-hin.tsv"], tmp_path / "small.yaml")
    assert load_config(path).train.batch_tokens == 0 and "CUDA" not in text
    monkeypatch.setattr(init_module, "select_device", lambda name: torch.device("cpu"))
    path, text = init_config([ROOT / "data" / "eng-mar" / "mar.txt"], tmp_path / "cpu.yaml")
    assert load_config(path).train.batch_tokens == 0 and "CUDA" not in text


LATIN, DEVANAGARI, TAMIL = "LATIN", "DEVANAGARI", "TAMIL"
LANGUAGE_TABLE = [  # file name(s), the sides' scripts, what init may write (None: it must ask)
    (["hin.txt"], LATIN, DEVANAGARI, ("en", "hi")),  # an Anki export: named after the other language
    (["hin-eng.zip"], LATIN, DEVANAGARI, ("en", "hi")),
    (["mar.txt"], LATIN, DEVANAGARI, ("en", "mr")),
    (["eng-hin.tsv"], LATIN, DEVANAGARI, ("en", "hi")),  # before: en -> en, which prepare refused
    (["hin-eng.tsv"], DEVANAGARI, LATIN, ("hi", "en")),  # its columns say Hindi first
    (["eng-hin.tsv"], DEVANAGARI, LATIN, ("hi", "en")),  # named in the other order than its columns
    (["en-es.tsv"], LATIN, LATIN, ("en", "es")),
    (["spa-eng.tsv"], LATIN, LATIN, ("en", "es")),  # Anki's LANG-eng: English first
    (["english_german.tsv"], LATIN, LATIN, ("en", "de")),
    (["train.en", "train.es"], LATIN, LATIN, ("en", "es")),
    (["corpus.mr", "corpus.en"], DEVANAGARI, LATIN, ("mr", "en")),
    (["pairs.tsv"], LATIN, TAMIL, None),  # English is a guess: it asks (before: tgt_lang: tgt)
    (["mypairs.tsv"], LATIN, LATIN, None),  # before: tgt_lang: tgt, the card read "English -> tgt"
    (["eng-hin.tsv"], LATIN, LATIN, None),  # the names and the scripts disagree: it asks
    (["notes.txt"], DEVANAGARI, DEVANAGARI, None),
    (["eng.txt"], LATIN, DEVANAGARI, None),  # English named alone: the other side unknown
]


@pytest.mark.parametrize("names, src_script, tgt_script, expected", LANGUAGE_TABLE)
def test_languages_from_file_names_checked_against_the_scripts(names, src_script, tgt_script, expected):
    assert guess_languages([Path(n) for n in names], src_script, tgt_script) == expected


@pytest.mark.parametrize("names, src_script, tgt_script, expected", LANGUAGE_TABLE)
def test_init_writes_only_configs_prepare_accepts_or_asks_for_the_languages(
    tmp_path, names, src_script, tgt_script, expected
):
    """Over the table, on real text in those scripts: the config init writes is one prepare
    accepts, or init refuses saying which options to give."""
    text = {LATIN: "we see the {} house", DEVANAGARI: "हम {} घर देखते हैं", TAMIL: "நாங்கள் {} வீட்டைப் பார்க்கிறோம்"}
    rows = [(text[src_script].format(i), text[tgt_script].format(i)) for i in range(60)]
    files = [tmp_path / name for name in names]
    if len(files) == 1 and files[0].suffix == ".zip":
        with zipfile.ZipFile(files[0], "w") as packed:
            packed.writestr("hin.txt", "".join(f"{s}\t{t}\n" for s, t in rows))
    elif len(files) == 1:
        write_anki(files[0], rows)
    else:
        files[0].write_text("".join(f"{s}\n" for s, _ in rows), encoding="utf-8")
        files[1].write_text("".join(f"{t}\n" for _, t in rows), encoding="utf-8")
    if expected is None:
        with pytest.raises(NmtError, match=r"--src-lang .* --tgt-lang"):
            init_config(files, tmp_path / "c.yaml")
        return
    path, _ = init_config(files, tmp_path / "c.yaml")
    config = load_config(path, [f"run_dir={tmp_path / 'run'}"])
    assert (config.data.src_lang, config.data.tgt_lang) == expected
    prepare(config, log=lambda _: None, show_bar=False)


def unwrapped(text: str) -> str:
    """A written config's comments as one line (init wraps them at 98 columns)."""
    return " ".join(line.lstrip("# ") for line in text.splitlines())


def test_init_from_a_parent_writes_the_transfer_recipe_and_offers_its_own_corpus(tmp_path):
    """--init-from: the parent's model settings (the transfer recipe), and, its target being
    another language in the target's script, its own corpus as a related one in comments whose
    keys, added to their sections, give a config that prepares and trains as the parent's child."""
    from nmt.config.parsing import config_from_dict

    parent_data = write_anki(tmp_path / "mar.txt", synthetic_pairs(seed=0))
    # a folder whose path is longer than a comment's line: its comment still names it whole
    parent_dir = tmp_path / ("a-folder-of-parents-" * 5) / "parent"
    parent_raw = tiny_config(tmp_path, parent_data, run_dir=str(parent_dir))
    parent_raw["data"]["tgt_lang"] = "mr"
    parent = config_from_dict(parent_raw)
    prepare(parent, log=lambda _: None, show_bar=False)
    build_trainer(parent, torch.device("cpu"), show_bar=False, echo=False).run()
    hindi = write_anki(tmp_path / "hin.txt", [(s, t.replace("पाणी", "पानी")) for s, t in synthetic_pairs(seed=1)])
    path, text = init_config([hindi], tmp_path / "hin.yaml", init_from=str(parent_dir))
    config = load_config(path)
    # the parent's settings, and on a corpus this small the lexical model (its term starts at zero)
    assert config.init_from == str(parent_dir) and config.model == replace(parent.model, lexical=True)
    assert config.data.related == {} and f"Started from {parent_dir} (en-mr)" in unwrapped(text)
    assert "plus the lexical model" in text
    # and on a corpus this small, four children ensembled with MBR
    assert (config.train.members, config.decode.mbr) == (4, 8) and "four children side by side" in unwrapped(text)
    raw = with_offered_keys(text)
    raw |= {"run_dir": str(tmp_path / "child")}
    raw["data"] |= {"max_pairs": 300, "dev_size": 10, "test_size": 10}
    raw["train"] |= {"epochs": 2, "max_minutes": 0, "probes": 0}
    child = config_from_dict(raw)
    assert child.data.related == {"mr": str(parent_data)} and child.data.oversample == 3
    assert (child.train.related_per_epoch, child.train.related_until) == (3000, 0.6)
    prepare(child, log=lambda _: None, show_bar=False)
    assert build_trainer(child, torch.device("cpu"), show_bar=False, echo=False).run().epoch == 2
    latin = write_anki(tmp_path / "fra.txt", [(s, "bonjour le monde") for s, _ in synthetic_pairs(seed=1)])
    _, text = init_config([latin], tmp_path / "fr.yaml", init_from=str(parent_dir), tgt_lang="fr")
    assert "related" not in text and "init_from" in text  # another script: the parent alone, no related corpus
    pairs = synthetic_pairs(seed=1)
    larger = write_anki(
        tmp_path / "hin-3000.txt", [(f"{s} ({k})", t) for k in range(3_000 // len(pairs) + 1) for s, t in pairs]
    )
    path, text = init_config([larger], tmp_path / "larger.yaml", init_from=str(parent_dir))
    config = load_config(path)  # over 3,000 pairs: one child, which gets the epochs four would share
    assert (config.train.members, config.decode.mbr) == (1, 0) and "four children side by side" not in unwrapped(text)


@pytest.mark.parametrize(
    "lines, refused",
    [
        (["Hi.\tनमस्ते."], "holds 1 usable pair(s) of 1 distinct source sentence(s): too few to split"),
        (["English\tMarathi"], "holds no sentence pairs"),  # a header and nothing else
        (["Hi.\tनमस्ते.", "Hi.\tनमस्कार."], "of 1 distinct source sentence(s): too few to split"),
        ([], "is empty"),
    ],
    ids=["one-pair", "header-only", "one-source", "empty"],
)
def test_init_refuses_what_prepare_would_refuse(tmp_path, lines, refused):
    """Before, `nmt init` wrote a config for one pair (and for a header row read as a pair) that
    `nmt prepare` then refused."""
    path = tmp_path / "eng-mar.tsv"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    with pytest.raises(NmtError, match=re.escape(refused)):
        init_config([path], tmp_path / "c.yaml", src_lang="en", tgt_lang="mr")
    assert not (tmp_path / "c.yaml").exists()


@pytest.mark.parametrize("pairs", [3, 12, 60])
def test_a_toy_corpus_gets_a_config_prepare_accepts(tmp_path, pairs):
    """The smallest corpora init accepts hold back a dev and a test sentence or more, never the
    20 each that would leave nothing to train on (before: 'Split sizes too large' at prepare)."""
    path = write_anki(tmp_path / "eng-mar.tsv", synthetic_pairs()[:pairs])
    target, _ = init_config([path], tmp_path / "c.yaml", src_lang="en", tgt_lang="mr")
    config = load_config(target, [f"run_dir={tmp_path / 'run'}"])
    report = prepare(config, log=lambda _: None, show_bar=False)
    assert report.split_pairs["train"] > 0 and report.split_sources["dev"] >= 1 and report.split_sources["test"] >= 1


def test_init_writes_the_transformer_where_a_rule_holds_the_corpus_and_the_budget(tmp_path, monkeypatch):
    """nmt/recipes.yaml's Transformer rules, on a CPU: a small corpus gets it from the first rule's
    minutes on, a corpus of the CPU recipe's size from the second's; a shorter budget, a GPU (where
    the RNN led) and a large corpus keep the RNN."""
    import nmt.pipelines.init as init_module

    book = recipes()
    small, long = book.families["transformer"].rules
    assert small.up_to_pairs < 33_725 <= long.up_to_pairs and small.from_minutes < long.from_minutes
    monkeypatch.setattr(init_module, "select_device", lambda name: torch.device("cpu"))
    hin = write_anki(tmp_path / "eng-hin.tsv", synthetic_pairs())
    path, text = init_config([hin], tmp_path / "small.yaml", minutes=small.from_minutes)
    config = load_config(path)
    assert config.model.arch == "transformer" and config.train.lr_warmup > 0
    assert config.tokenizer.src_vocab_size == book.for_pairs(300).settings["tokenizer"]["src_vocab_size"]
    assert "A Transformer, not an RNN" in text and "An RNN, not a Transformer" not in text
    assert "Not read by" not in text
    prepares_and_trains(path, tmp_path / "small")
    path, text = init_config([hin], tmp_path / "shorter.yaml", minutes=small.from_minutes - 1)
    config = load_config(path)
    assert (config.model.arch, config.model.input_feeding) == ("rnn", True) and "An RNN, not a Transformer" in text

    mar = ROOT / "data" / "eng-mar" / "mar.txt"
    path, text = init_config([mar], tmp_path / "long.yaml", minutes=long.from_minutes)
    assert load_config(path).model.arch == "transformer" and "A Transformer, not an RNN" in text
    path, text = init_config([mar], tmp_path / "mar.yaml", minutes=long.from_minutes - 1)
    assert load_config(path).model.arch == "rnn" and "An RNN, not a Transformer" in text
    assert book.family_for(long.up_to_pairs + 1, 1_000)[1] is None  # the large-corpus recipe: not measured
    monkeypatch.setattr(init_module, "select_device", lambda name: torch.device("cuda"))
    path, _ = init_config([hin], tmp_path / "gpu-small.yaml", minutes=small.from_minutes)
    assert load_config(path).model.arch == "rnn"
    path, _ = init_config([mar], tmp_path / "gpu.yaml", minutes=long.from_minutes)
    assert load_config(path).model.arch == "rnn"


def test_every_config_init_writes_ends_with_the_recipes_table_the_small_data_page_shows(tmp_path):
    """nmt/recipes.yaml's ``table``: each row in the comments of a config init writes, and the same
    row in docs/small-data.md's table, so the two cannot drift apart."""
    rows = recipes().table
    assert any("distilled" in row.recipe and "CTranslate2" in row.runs_on for row in rows)
    _, text = init_config([SHARED_HINDI], tmp_path / "hin.yaml")
    page = (ROOT / "docs" / "small-data.md").read_text(encoding="utf-8")
    for row in rows:
        line = f"{row.corpus} | {row.recipe} | {row.minutes:g} min | {row.bleu:.1f} | {row.runs_on}"
        assert f"#   {line}\n" in text and f"| {line} |" in page
        assert (ROOT / row.page.split("#")[0]).is_file()
