"""Token-id shards (nmt/data/shards.py): what prepare writes is the SentencePiece encoding of
the prepared text, training reads it memory-mapped, and a damaged shard is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from nmt.config import config_from_dict
from nmt.data.shards import HEADER_BYTES, Shard, ShardPairs, write_shard
from nmt.errors import NmtError
from nmt.fileio import read_lines
from nmt.loading import load_tokenizers
from nmt.paths import SPLITS, prepared_paths
from nmt.prepare import prepare
from nmt.train.data import batch_lengths, encode_pairs, load_train_data

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
    shard = Shard(write_shard(tmp_path / "x.ids", sentences), vocab_size=largest + 1)
    assert [shard[i] for i in range(len(shard))] == sentences
    assert Shard(write_shard(tmp_path / "empty.ids", []), vocab_size=10).lengths.size == 0


def damage(path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[:-3]))
    elif how == "not a shard":
        path.write_bytes(b"hello\tworld\n" * 10)
    elif how == "offsets":
        data[HEADER_BYTES + 8 : HEADER_BYTES + 16] = np.array([99], dtype="<i8").tobytes()  # offsets[1]
        path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "how, message",
    [
        ("truncated", "holds 67 bytes where its header implies 70 (truncated?)"),
        ("not a shard", "does not start with an nmt token-shard header"),
        ("offsets", "its sentence offsets are inconsistent"),
    ],
)
def test_a_damaged_shard_is_refused_naming_the_file(tmp_path, how, message):
    path = write_shard(tmp_path / "train.en.ids", [[4, 5], [6]])
    damage(path, how)
    with pytest.raises(NmtError, match="nmt prepare --force") as error:
        Shard(path, vocab_size=10)
    assert str(path) in str(error.value) and message in str(error.value)


def test_ids_beyond_the_vocabulary_and_a_missing_shard_are_refused(tmp_path):
    path = write_shard(tmp_path / "train.mr.ids", [[4, 500]])
    with pytest.raises(NmtError, match="holds id 500, beyond the vocabulary of 300"):
        Shard(path, vocab_size=300)
    with pytest.raises(NmtError, match=r"missing.*nmt prepare --force"):
        Shard(tmp_path / "nowhere.ids", vocab_size=300)
