"""End to end, Marathi -> English: from the shipped Anki file (columns reversed by config), and
from line-aligned files with a given test set of two references and a joint vocabulary; each
trains a tiny model and is evaluated against its own references."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.core.fileio import read_lines

from .helpers import synthetic_pairs

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def run(*args):
    result = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def devanagari(text: str) -> bool:
    return any("\u0900" <= c <= "\u097f" for c in text)


@pytest.mark.slow
def test_marathi_to_english_from_the_shipped_anki_file(tmp_path):
    sets = [
        f"run_dir={tmp_path / 'run'}",
        "data.src_lang=mr",
        "data.tgt_lang=en",
        "data.columns=[en, mr]",
    ]
    options = [x for item in sets for x in ("--set", item)]
    config = ROOT / "configs" / "tiny.yaml"
    run("prepare", "--config", config, *options)
    data = tmp_path / "run" / "data"
    assert all(devanagari(line) for line in read_lines(data / "train.mr"))
    assert not any(devanagari(line) for line in read_lines(data / "train.en"))
    run("train", "--config", config, *options)
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["dev_loss"] < metrics[0]["dev_loss"]  # it learns
    report = json.loads(run("evaluate", "--config", config, *options, "--json").stdout)
    rows = read_lines(data / "test.multi.tsv")
    assert report["num_sentences"] == len(rows) and report["set"] == "test"
    assert not any(devanagari(line) for line in read_lines(tmp_path / "run" / "eval" / "test.hyp"))  # English out
    out = run("translate", "--config", config, *options, "--text", "मला माहीत आहे.").stdout
    assert out.strip() and not devanagari(out)


@pytest.mark.slow
def test_line_aligned_files_with_a_given_test_set_and_a_joint_vocabulary(tmp_path):
    pairs = sorted(set(synthetic_pairs()))
    held_out = pairs[::9]  # unseen combinations of seen words
    train = [pair for pair in pairs if pair not in held_out]
    files = {}
    for name, lines in {
        "train.mr": [t for _, t in train],
        "train.en": [s for s, _ in train],
        "test.mr": [t for _, t in held_out],
        "test.en": [s for s, _ in held_out],
        "test.en.2": [s.replace(".", "!") for s, _ in held_out],  # a second reference for every line
    }.items():
        files[name] = tmp_path / name
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = {
        "run_dir": str(tmp_path / "run"),
        "data": {
            "src_lang": "mr",
            "tgt_lang": "en",
            "train": {"mr": str(files["train.mr"]), "en": str(files["train.en"])},
            "test": {"mr": str(files["test.mr"]), "en": [str(files["test.en"]), str(files["test.en.2"])]},
            "dev_size": 8,
        },
        "tokenizer": {"joint": True, "src_vocab_size": 400, "tgt_vocab_size": 400},
        "model": {"embed_dim": 48, "encoder_hidden": 48, "decoder_hidden": 48, "attention_dim": 48, "output_dim": 48},
        "train": {"epochs": 40, "batch_size": 16, "learning_rate": 0.005, "threads": 1, "seed": 3, "patience": 0},
        "decode": {"beam_size": 3},
    }
    config_path = tmp_path / "mr-en.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    out = run("prepare", "--config", config_path).stdout
    assert "(given: " in out
    data = tmp_path / "run" / "data"
    assert [p.name for p in data.glob("spm.*")] == ["spm.mr-en.model"]
    assert read_lines(data / "test.mr") == [t for _, t in held_out for _ in range(2)]  # one pair per reference
    run("train", "--config", config_path)
    report = json.loads(run("evaluate", "--config", config_path, "--json").stdout)
    assert report["num_sentences"] == len(held_out) and report["num_references"] == 2
    assert report["bleu"] > 40, report  # it learned the word order, scored against both references
    package = tmp_path / "package"
    run("export", tmp_path / "run", package)
    assert sorted(p.name for p in package.glob("spm.*")) == ["spm.mr-en.model"]
    assert "given as files" in (package / "MODEL_CARD.md").read_text(encoding="utf-8")
    hypotheses = read_lines(tmp_path / "run" / "eval" / "test.hyp")
    packaged = run("translate", "--model", package, "--input", files["test.mr"], "--beam-size", "3").stdout
    assert packaged.splitlines() == hypotheses  # the package translates as the run does
