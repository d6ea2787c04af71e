"""Token-id shards (nmt/data/shards.py): what prepare writes is the SentencePiece encoding of
the prepared text, training reads it memory-mapped, and a damaged shard is refused by name."""

from __future__ import annotations

import re
from dataclasses import asdict

import numpy as np
import pytest
import torch

from nmt.config.parsing import config_from_dict
from nmt.config.paths import SPLITS, prepared_paths
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines
from nmt.data.shards import HEADER_BYTES, Shard, ShardPairs, write_shard
from nmt.pipelines.prepare import prepare
from nmt.runtime.loading import load_tokenizers
from nmt.training.data import batch_lengths, encode_pairs, load_train_data
from nmt.training.trainer import build_trainer

from .helpers import synthetic_pairs, tiny_config, write_anki


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    config = config_from_dict(tiny_config(root, write_anki(root / "pairs.txt", synthetic_pairs())))
    prepare(config, log=lambda _: None)
    return config


@pytest.mark.parametrize("split", SPLITS)
def test_each_split_shard_is_the_sentencepiece_encoding_of_its_text(prepared, split):
    paths = prepared_paths(prepared)
    src_tok, tgt_tok = load_tokenizers(prepared)
    for side, tokenizer in (("src", src_tok), ("tgt", tgt_tok)):
        lines = read_lines(paths.text(split, side))
        shard = Shard(paths.ids(split, side), tokenizer.vocab_size)
        assert len(shard) == len(lines) > 0
        assert [shard[i] for i in range(len(shard))] == tokenizer.encode(lines)
        assert tokenizer.decode([shard[0]]) == [lines[0]]  # and back to the text
        assert shard.lengths.tolist() == [len(ids) for ids in tokenizer.encode(lines)]


def test_training_reads_the_shards_with_the_pairs_the_text_gives(prepared):
    paths = prepared_paths(prepared)
    src_tok, tgt_tok = load_tokenizers(prepared)
    data = load_train_data(prepared, src_tok, tgt_tok)
    assert isinstance(data.train, ShardPairs) and data.train_text == ([], [])  # no text without sampling
    in_memory = encode_pairs(
        src_tok, tgt_tok, read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt"))
    )
    assert list(data.train) == in_memory and len(data.dev) > 0
    assert batch_lengths(data.train) == batch_lengths(in_memory)  # from the offsets alone
    short = data.train.within_length(4)
    assert list(short) == [ex for ex in in_memory if len(ex.src_ids) <= 4 and len(ex.tgt_ids) <= 4]


@pytest.mark.parametrize("largest", [5, 70_000])  # two and four bytes per id
def test_round_trip_of_any_ids_empty_sentences_included(tmp_path, largest):
    sentences = [[1, 2, largest], [], [largest], [0, 1, 2, 3]]
    lengths = write_shard(tmp_path / "x.ids", sentences, largest + 1)
    shard = Shard(tmp_path / "x.ids", vocab_size=largest + 1)
    assert [shard[i] for i in range(len(shard))] == sentences
    assert lengths.tolist() == shard.lengths.tolist() == [3, 0, 1, 4]
    write_shard(tmp_path / "empty.ids", [], 10)
    assert Shard(tmp_path / "empty.ids", vocab_size=10).lengths.size == 0


def test_a_shard_is_written_as_it_comes_in_chunks(tmp_path, monkeypatch):
    """More sentences than one chunk, from a generator: the same shard as one chunk gives."""
    sentences = [[i % 7, i % 11] * (i % 5) for i in range(50)]
    write_shard(tmp_path / "one.ids", sentences, 20)
    monkeypatch.setattr("nmt.data.shards.CHUNK", 8)
    write_shard(tmp_path / "many.ids", (ids for ids in sentences), 20)
    assert (tmp_path / "one.ids").read_bytes() == (tmp_path / "many.ids").read_bytes()
    shard = Shard(tmp_path / "many.ids", vocab_size=20)
    assert [shard[i] for i in range(len(shard))] == sentences


def damage(path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[:-3]))
    elif how == "not a shard":
        path.write_bytes(b"hello\tworld\n" * 10)
    elif how == "offsets":
        ids_bytes = 8  # 3 two-byte ids, padded to 8
        at = HEADER_BYTES + ids_bytes + 8  # offsets[1]
        data[at : at + 8] = np.array([99], dtype="<i8").tobytes()
        path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "how, message",
    [
        ("truncated", "holds 69 bytes where its header implies 72 (truncated?)"),
        ("not a shard", "does not start with an nmt token-shard header"),
        ("offsets", "its sentence offsets are inconsistent"),
    ],
)
def test_a_damaged_shard_is_refused_naming_the_file(tmp_path, how, message):
    path = tmp_path / "train.en.ids"
    write_shard(path, [[4, 5], [6]], 100)
    damage(path, how)
    with pytest.raises(NmtError, match="nmt prepare --force") as error:
        Shard(path, vocab_size=10)
    assert str(path) in str(error.value) and message in str(error.value)


def test_ids_beyond_the_vocabulary_and_a_missing_shard_are_refused(tmp_path):
    path = tmp_path / "train.mr.ids"
    write_shard(path, [[4, 500]], 501)
    with pytest.raises(NmtError, match="holds id 500, beyond the vocabulary of 300"):
        Shard(path, vocab_size=300)
    with pytest.raises(NmtError, match=r"missing.*nmt prepare --force"):
        Shard(tmp_path / "nowhere.ids", vocab_size=300)


def test_validation_can_use_a_fixed_sample_of_dev_sources_with_their_pairs(prepared):
    src_tok, tgt_tok = load_tokenizers(prepared)
    whole = load_train_data(prepared, src_tok, tgt_tok)
    config = config_from_dict({**asdict(prepared), "train": {**asdict(prepared.train), "validation_sentences": 5}})
    sample = load_train_data(config, src_tok, tgt_tok)
    assert len(whole.dev_sources) > 5 and len(sample.dev_sources) == 5
    assert sample.dev_sources == load_train_data(config, src_tok, tgt_tok).dev_sources  # fixed: the same each load
    chosen = [whole.dev_sources.index(ids) for ids in sample.dev_sources]
    assert chosen == sorted(chosen)  # in dev order
    assert sample.dev_references == [whole.dev_references[i] for i in chosen]
    expected_pairs = [ex for ex in whole.dev if ex.src_ids in sample.dev_sources]  # every pair of a chosen source
    assert list(sample.dev) == expected_pairs and len(expected_pairs) >= 5


def test_training_says_how_long_a_validation_and_an_epoch_take(prepared, tmp_path, monkeypatch):
    monkeypatch.setattr("nmt.training.trainer.PACE_BATCHES", 2)
    raw = {**asdict(prepared), "run_dir": str(tmp_path / "run")}
    raw["data"] = {**asdict(prepared.data), "prepared_dir": str(prepared_paths(prepared).root)}
    raw["train"] = {**asdict(prepared.train), "epochs": 1, "batch_size": 4, "max_minutes": 10}
    trainer = build_trainer(config_from_dict(raw), torch.device("cpu"), show_bar=False)
    trainer.run()
    log = trainer.run_dir.train_log.read_text(encoding="utf-8")
    dev = len(trainer.data.dev_sources)
    said = (
        rf"A validation \({dev} dev sentences, loss on \d+ pairs, greedy BLEU\) takes up to about \d+ s "
        r"\(at the references' length"
    )
    assert re.search(said, log)
    assert "budget counts training, validation and checkpoints" in log
    batches = trainer.epoch_length
    assert re.search(rf"An epoch \({batches} batches\) takes about \d+ s at the pace of the first 2 batches\.", log)
