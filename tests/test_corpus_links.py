"""Word links as data (``data.links``): a corpus may come with its links, a Pharaoh line per
line of its file, made once by eflomal (scripts/dev/corpus_links.py); guided alignment and its
probe read them and need no eflomal. The shipped English–Marathi corpus ships its links."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.parsing import config_from_dict
from nmt.config.schema import DataConfig
from nmt.core.errors import NmtError
from nmt.data.alignments import corpus_links, parse_links, read_links
from nmt.data.pairs import ReadResult
from nmt.data.sources import read_corpus
from nmt.pipelines.prepare import prepare

from .helpers import synthetic_pairs, tiny_config, write_anki

ROOT = Path(__file__).resolve().parents[1]


def test_the_shipped_links_match_the_corpus_line_for_line(tmp_path):
    """data/eng-mar/mar.links: a line per line of mar.txt, each pair's links within its words
    (English words the first index, Marathi the second), and every pair linked."""
    data = DataConfig(path=str(ROOT / "data" / "eng-mar" / "mar.txt"), src_lang="en", tgt_lang="mr")
    lines = read_links(ROOT / "data" / "eng-mar" / "mar.links")
    with open(ROOT / "data" / "eng-mar" / "mar.txt", encoding="utf-8") as corpus:
        assert len(lines) == sum(1 for _ in corpus)
    pairs = list(read_corpus(data, tmp_path).train_pairs(ReadResult(keep_problems=0)))
    assert len(pairs) == 33_725
    for pair in pairs:
        links = lines[pair.line_no - 1]
        assert links.possible, pair
        words = len(pair.src.split()), len(pair.tgt.split())
        assert all(i < words[0] and j < words[1] for i, j in links.possible), (pair, links)


@pytest.fixture
def linked_corpus(tmp_path):
    """A tiny corpus with a header row and its links (each pair's words in order: i-i)."""
    pairs = synthetic_pairs()
    data = write_anki(tmp_path / "pairs.tsv", pairs)
    text = data.read_text(encoding="utf-8")
    data.write_text("English\tMarathi\n" + text, encoding="utf-8")  # a header: its links line is empty
    lines = [""] + [" ".join(f"{i}-{i}" for i in range(min(len(s.split()), len(t.split())))) for s, t in pairs]
    (tmp_path / "pairs.links").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return data, tmp_path / "pairs.links"


def test_guided_alignment_reads_the_links_file_without_eflomal(tmp_path, linked_corpus, monkeypatch):
    """eflomal not importable: a run with data.links trains with guided alignment and its probe,
    every training pair guided by the file's links."""
    monkeypatch.setitem(sys.modules, "eflomal", None)  # import eflomal raises ImportError
    data, links = linked_corpus
    raw = tiny_config(tmp_path, data, train={"guided_alignment": 0.1, "probe_alignment": 10, "epochs": 2})
    raw["data"]["links"] = str(links)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    log = (tmp_path / "run" / "train.log").read_text(encoding="utf-8")
    assert "Guided alignment (train.guided_alignment 0.1)" in log and f"have ({links})." in log
    guided, pairs = re.search(r"which ([\d,]+) of ([\d,]+) training pairs have", log).groups()
    assert guided == pairs  # every training pair found its links in the file
    assert "dev pairs (train.probe_alignment): AER" in log  # the probe measured against the file's links
    records = [json.loads(line) for line in (tmp_path / "run" / "timeline.jsonl").read_text().splitlines()]
    assert all(record["alignment"]["pairs"] == 10 for record in records)


def test_naming_the_links_keeps_the_prepared_data(tmp_path, linked_corpus):
    """data.links is read by training, never prepared: a run prepared (and trained) before its
    config named links is reused as it is, as bash scripts/main.sh re-run after the default recipe
    gained its links finds its earlier run."""
    data, links = linked_corpus
    config = config_from_dict(tiny_config(tmp_path, data))
    assert not prepare(config, log=lambda _: None).reused
    config.data.links = str(links)
    assert prepare(config, log=lambda _: None).reused


def test_the_links_of_each_pair_are_found_by_its_text(tmp_path, linked_corpus):
    data, links = linked_corpus
    by_pair = corpus_links(DataConfig(path=str(data), links=str(links)), tmp_path)
    source, target = synthetic_pairs()[0]
    words = min(len(source.split()), len(target.split()))
    assert by_pair[(source, target)].possible == parse_links(" ".join(f"{i}-{i}" for i in range(words))).possible


def test_a_links_file_shorter_than_the_corpus_is_refused_naming_both(tmp_path, linked_corpus):
    data, links = linked_corpus
    links.write_text("\n".join(links.read_text(encoding="utf-8").splitlines()[:5]) + "\n", encoding="utf-8")
    with pytest.raises(NmtError, match=r"data.links: .*pairs.links has 5 lines, but line 6 of .*pairs.tsv"):
        corpus_links(DataConfig(path=str(data), links=str(links)), tmp_path)


def test_the_shipped_guided_recipe_trains_without_eflomal(tmp_path, monkeypatch):
    """configs/eng-mar-cpu.yaml, the default recipe, reads the shipped links: with eflomal
    unimportable it prepares and trains (a tiny model, 2,000 pairs, one epoch), every training
    pair guided."""
    monkeypatch.setitem(sys.modules, "eflomal", None)
    monkeypatch.chdir(ROOT)  # the config's relative paths, as a checkout's user runs it
    sizes = ("embed_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "output_dim")
    overrides = [f"model.{key}=32" for key in sizes] + [
        "data.max_pairs=2000",
        "data.prepared_dir=" + str(tmp_path / "prepared"),
        "run_dir=" + str(tmp_path / "run"),
        "train.max_minutes=0",
        "train.epochs=1",
        "train.probe_alignment=20",
        "tokenizer.src_vocab_size=500",
        "tokenizer.tgt_vocab_size=500",
    ]
    sets = [part for override in overrides for part in ("--set", override)]
    result = CliRunner().invoke(app, ["train", "--config", "configs/eng-mar-cpu.yaml", *sets])
    assert result.exit_code == 0, result.output
    log = (tmp_path / "run" / "train.log").read_text(encoding="utf-8")
    guided, pairs = re.search(r"which ([\d,]+) of ([\d,]+) training pairs have", log).groups()
    assert guided == pairs and "(data/eng-mar/mar.links)" in log
