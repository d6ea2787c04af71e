"""What training reads: the prepared splits as token ids, and each epoch's batches."""

from __future__ import annotations

from dataclasses import dataclass

from nmt.config import Config, TrainConfig
from nmt.data.batching import Example, bucketed_batches
from nmt.data.prepare import prepared_paths
from nmt.fileio import read_lines
from nmt.tokenizer import Tokenizer


@dataclass
class TrainData:
    train: list[Example]
    dev: list[Example]  # dev pairs, for the loss
    dev_sources: list[list[int]]  # distinct dev sources, for BLEU
    dev_references: list[list[str]]  # every reference of each distinct dev source
    skipped_long: int  # training pairs over train.max_len


def encode_pairs(src_tok: Tokenizer, tgt_tok: Tokenizer, src_lines: list[str], tgt_lines: list[str]) -> list[Example]:
    return [Example(s, t) for s, t in zip(src_tok.encode(src_lines), tgt_tok.encode(tgt_lines))]


def load_train_data(config: Config, src_tok: Tokenizer, tgt_tok: Tokenizer) -> TrainData:
    paths = prepared_paths(config)
    train = encode_pairs(src_tok, tgt_tok, read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt")))
    max_len = config.train.max_len
    kept = [ex for ex in train if len(ex.src_ids) <= max_len and len(ex.tgt_ids) <= max_len]
    dev = encode_pairs(src_tok, tgt_tok, read_lines(paths.text("dev", "src")), read_lines(paths.text("dev", "tgt")))
    multi = [line.split("\t") for line in read_lines(paths.multi("dev"))]
    dev_sources = src_tok.encode([cols[0] for cols in multi])
    return TrainData(kept, dev, dev_sources, [cols[1:] for cols in multi], len(train) - len(kept))


def batch_lengths(examples: list[Example]) -> list[int]:
    """The padded length each example needs: its longer side plus <eos>/<bos>."""
    return [max(len(ex.src_ids), len(ex.tgt_ids)) + 1 for ex in examples]


def epoch_batches(examples: list[Example], cfg: TrainConfig, epoch: int, world: int = 1) -> list[list[int]]:
    """This epoch's global batches: bucketed, and shuffled with a seed of (train.seed, epoch).
    With ``world`` data-parallel processes each batch holds ``world`` times the sentences
    (and token budget); every process takes its share of each."""
    lengths = batch_lengths(examples)
    return bucketed_batches(lengths, cfg.batch_size * world, seed=cfg.seed * 1000 + epoch, batch_tokens=cfg.batch_tokens * world)
