"""The first hour, round two: `nmt init` reads what the file says (a header row, the name's order,
the scripts as a check) and writes either family on request; evaluation files that line up; no
U+FFFD in an output; every missing piece of the offline page named at once; messages a student
would otherwise question."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.core.errors import NmtError
from nmt.data.tokenizer import Tokenizer, train_sentencepiece
from nmt.export import web_page
from nmt.pipelines.init import init_config

from .helpers import synthetic_pairs, tiny_config, write_anki

runner = CliRunner()
LATIN = [(f"I see {w} now.", f"je vois {w} maintenant.") for w in ("apples", "water", "books", "tea", "rice", "milk")]


def corpus(path: Path, pairs: list[tuple[str, str]], header: str = "", copies: int = 12) -> Path:
    """``pairs`` made into a few hundred distinct ones (numbers added), with ``header`` first."""
    rows = [(f"{s} {i}", f"{t} {i}") for i in range(copies) for s, t in pairs]
    lines = ([header] if header else []) + [f"{s}\t{t}" for s, t in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


HINDI = [(s, t) for s, t in synthetic_pairs()[:40]]  # English -> Devanagari


@pytest.mark.parametrize(
    "name, header, pairs, expected",
    [
        ("pairs.tsv", "Eng\tHin\tOth", HINDI, ("en", "hi")),  # the export's own header (the README's example name)
        ("pairs.tsv", "English\tHindi", HINDI, ("en", "hi")),
        ("pairs.tsv", "en\tmr", HINDI, ("en", "mr")),
        ("data.tsv", "hin\teng", [(t, s) for s, t in HINDI], ("hi", "en")),  # the header's order, not English first
        ("fr-en.tsv", "", [(t, s) for s, t in LATIN], ("fr", "en")),  # a two-letter name: its order is the columns'
        ("en-fr.tsv", "", LATIN, ("en", "fr")),
        ("eng-hin.tsv", "", HINDI, ("en", "hi")),
        ("hin.txt", "", HINDI, ("en", "hi")),  # an Anki export named after the other language
    ],
)
def test_init_reads_the_languages_from_the_header_or_the_name(tmp_path, name, header, pairs, expected):
    data = corpus(tmp_path / name, pairs, header)
    _, text = init_config([data], tmp_path / "c.yaml")
    config = yaml.safe_load(text)
    assert (config["data"]["src_lang"], config["data"]["tgt_lang"]) == expected


def test_init_refuses_only_when_nothing_tells_and_suggests_codes_of_the_scripts(tmp_path):
    data = corpus(tmp_path / "pairs.tsv", HINDI)
    with pytest.raises(NmtError) as refused:
        init_config([data], tmp_path / "c.yaml")
    message = str(refused.value)
    assert "--src-lang en" in message and "--tgt-lang hi" in message and "hi, mr, ne" in message
    assert "--tgt-lang es" not in message  # before: es, for a Devanagari target


def test_a_code_whose_script_is_not_the_texts_is_kept_with_a_warning(tmp_path):
    data = corpus(tmp_path / "pairs.tsv", HINDI)
    warnings: list[str] = []
    _, text = init_config([data], tmp_path / "c.yaml", src_lang="hi", tgt_lang="en", warn=warnings.append)
    assert yaml.safe_load(text)["data"]["src_lang"] == "hi"
    assert len(warnings) == 2
    assert "the source is hi (Hindi), usually written in devanagari script, but its text is in latin" in warnings[0]
    languages = ["--src-lang", "hi", "--tgt-lang", "en"]
    result = runner.invoke(app, ["init", str(data), "--to", str(tmp_path / "d.yaml"), *languages])
    assert result.exit_code == 0 and "warning: the source is hi (Hindi)" in result.output


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_init_writes_the_family_asked_for(tmp_path, arch):
    data = corpus(tmp_path / "eng-hin.tsv", HINDI)  # a small corpus: the Transformer is the measured choice
    _, text = init_config([data], tmp_path / f"{arch}.yaml", arch=arch)
    config = yaml.safe_load(text)
    assert config["model"]["arch"] == arch
    assert f"(--arch {arch}; nmt init --arch" in text
    if arch == "rnn":  # the RNN's own recipe: no warm-up, no tied embeddings
        assert "lr_warmup" not in config["train"] and not config["model"].get("tie_embeddings")
    else:
        assert config["train"]["lr_warmup"] > 0
    with pytest.raises(NmtError, match="--arch 'cnn': one of rnn, transformer"):
        init_config([data], tmp_path / "x.yaml", arch="cnn")


def test_init_help_says_where_an_empty_folder_gets_its_config():
    result = runner.invoke(app, ["init", "--help"])
    assert "./SRC-TGT.yaml" in " ".join(result.output.split())
    assert "Transformer" in runner.invoke(app, ["--help"]).output


# ---- evaluation files that line up ----


def test_evaluation_writes_the_sources_beside_the_hypotheses(tmp_path):
    """Before: eval/test.hyp had a line per distinct source, data/test.en a line per pair; pasted
    side by side they paired sentences with other sentences' translations."""
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    raw = tiny_config(tmp_path, data, train={"epochs": 1})
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    for command in (["train", "--config", str(config)], ["evaluate", "--config", str(config)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
    run = Path(raw["run_dir"])
    sources = (run / "eval" / "test.src").read_text(encoding="utf-8").splitlines()
    hypotheses = (run / "eval" / "test.hyp").read_text(encoding="utf-8").splitlines()
    table = [line.split("\t") for line in (run / "eval" / "test.tsv").read_text(encoding="utf-8").splitlines()]
    multi = [line.split("\t") for line in (run / "data" / "test.multi.tsv").read_text(encoding="utf-8").splitlines()]
    assert len(sources) == len(hypotheses) == len(table) == len(multi)
    assert [row[0] for row in table] == sources == [row[0] for row in multi]
    assert [row[1] for row in table] == hypotheses and [row[2:] for row in table] == [row[1:] for row in multi]
    pairs = (run / "data" / "test.en").read_text(encoding="utf-8").splitlines()
    assert len(pairs) > len(sources)  # the reason: a source with two references is there twice


# ---- outputs ----


def test_an_incomplete_byte_sequence_is_dropped_not_shown_as_a_replacement_character(tmp_path):
    """A byte-fallback model may end a translation in the middle of a character: before, "�" (U+FFFD)."""
    train_sentencepiece([t for _, t in synthetic_pairs()], tmp_path / "tgt.model", 300, "unigram", 1.0)
    tok = Tokenizer(tmp_path / "tgt.model")
    whole = tok.encode(["चहा आवडतो"])[0]
    first_byte = tok.piece_ids(["<0xE0>"])  # the first byte of a three-byte Devanagari character
    decoded = tok.decode([whole + first_byte, first_byte])
    assert decoded == ["चहा आवडतो", ""]
    assert "\ufffd" not in "".join(decoded)


def test_the_offline_page_names_every_missing_piece_at_once(tmp_path, monkeypatch):
    """Before: the npm runtime first, then (once installed) the Python packages, pointing at an
    unpublished name."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(NmtError) as refused:
        web_page.find_runtime(tmp_path / "no-node-modules")
    message = str(refused.value)
    assert "onnxruntime-web and sentencepiece-js" in message and "onnxruntime (Python)" in message
    assert "pip install onnx 'onnxruntime>=1.24'" in message


def test_the_perplexity_says_when_it_passes_the_vocabulary(tmp_path):
    from nmt.training.callbacks import MetricsLog
    from nmt.training.metrics import ValidationRecord

    lines: list[str] = []

    class Trainer:  # what MetricsLog reads of the trainer
        tgt_tok = type("Tok", (), {"vocab_size": 2000})()
        metrics = type("Metrics", (), {"append": staticmethod(lambda record: None)})()
        log = staticmethod(lines.append)

    record = dict(epoch=1, step=9, train_loss=9.0, dev_loss=10.3, dev_bleu=0.0, dev_chrf=1.0, lr=1e-3)
    record |= dict(tokens_per_s=5000.0, grad_norm=1.0, epoch_seconds=3.0, train_seconds=3.0, elapsed_seconds=3.0)
    for ppl in (29_023.0, 6.4):
        MetricsLog().after_validation(Trainer(), ValidationRecord(**record, dev_ppl=ppl, best=True))
    assert "ppl 29023.0 (> 2,000 subwords: worse than guessing)" in lines[0]
    assert "worse than guessing" not in lines[1]


def test_the_timeline_message_says_no_epoch_has_ended(tmp_path):
    from nmt.serve.app import ServedModel
    from nmt.serve.requests import Limits, RequestError

    from .helpers import random_translator

    served = ServedModel("m", random_translator(tmp_path), Limits())
    with pytest.raises(RequestError, match="no epoch of its training has ended yet"):
        served.timeline()
    served.translator.loaded.config.train.probes = 0
    with pytest.raises(RequestError, match=r"train\.probes: 0"):
        served.timeline()
