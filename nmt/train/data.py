"""What training reads: the prepared splits as token ids, and each epoch's batches."""

from __future__ import annotations

import random
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nmt.config import Config, TrainConfig
from nmt.data.batching import Batch, Example, bucketed_batches, collate
from nmt.data.references import ReferenceSet, read_references
from nmt.data.shards import Shard, ShardPairs
from nmt.fileio import read_lines
from nmt.paths import prepared_paths
from nmt.tokenizer import PAD_ID, Tokenizer
from nmt.train.distributed import Distributed
from nmt.train.schedule import epoch_seeds


@dataclass
class TrainData:
    train: Sequence[Example]  # read from the prepared token shards, or given in memory
    dev: Sequence[Example]  # dev pairs, for the loss
    dev_sources: list[list[int]]  # distinct dev sources, for BLEU
    dev_references: list[list[str]]  # every reference of each distinct dev source
    skipped_long: int  # training pairs over train.max_len
    train_text: tuple[list[str], list[str]] = ([], [])  # every training pair as text, for subword sampling


def encode_pairs(src_tok: Tokenizer, tgt_tok: Tokenizer, src_lines: list[str], tgt_lines: list[str]) -> list[Example]:
    return [Example(s, t) for s, t in zip(src_tok.encode(src_lines), tgt_tok.encode(tgt_lines))]


def shard_pairs(config: Config, split: str, src_tok: Tokenizer, tgt_tok: Tokenizer) -> ShardPairs:
    """A prepared split's pairs, memory-mapped from its token shards."""
    paths = prepared_paths(config)
    return ShardPairs(
        Shard(paths.ids(split, "src"), src_tok.vocab_size), Shard(paths.ids(split, "tgt"), tgt_tok.vocab_size)
    )


def load_train_data(config: Config, src_tok: Tokenizer, tgt_tok: Tokenizer) -> TrainData:
    """The prepared splits as token ids (no re-encoding: prepare wrote them); the training
    text only when subword sampling segments it afresh each epoch."""
    paths = prepared_paths(config)
    train = shard_pairs(config, "train", src_tok, tgt_tok)
    kept = train.within_length(config.train.max_len)
    train_text = ([], [])
    if config.train.subword_sampling:
        train_text = (read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt")))
    dev = shard_pairs(config, "dev", src_tok, tgt_tok)
    dev_set = read_references(paths.multi("dev"))
    if 0 < config.train.validation_sentences < len(dev_set.sources):
        dev_set, dev = validation_sample(dev_set, dev, read_lines(paths.text("dev", "src")), config.train)
    return TrainData(kept, dev, src_tok.encode(dev_set.sources), dev_set.references, len(train) - len(kept), train_text)


def validation_sample(
    dev_set: ReferenceSet, dev: ShardPairs, dev_lines: list[str], cfg: TrainConfig
) -> tuple[ReferenceSet, ShardPairs]:
    """A fixed sample of ``train.validation_sentences`` distinct dev sources (the same in every
    run and resume: seeded by ``train.seed``), with their references and their pairs for the loss."""
    chosen = sorted(random.Random(cfg.seed).sample(range(len(dev_set.sources)), cfg.validation_sentences))
    sample = ReferenceSet([dev_set.sources[i] for i in chosen], [dev_set.references[i] for i in chosen])
    wanted = set(sample.sources)
    rows = np.array([row for row, source in enumerate(dev_lines) if source in wanted], dtype=np.int64)
    return sample, ShardPairs(dev.src, dev.tgt, dev.kept[rows])


def within_length(examples: list[Example], max_len: int) -> list[Example]:
    return [ex for ex in examples if len(ex.src_ids) <= max_len and len(ex.tgt_ids) <= max_len]


def epoch_examples(data: TrainData, src_tok: Tokenizer, tgt_tok: Tokenizer, cfg: TrainConfig, epoch: int):
    """The training pairs of ``epoch``: as prepared, or with ``train.subword_sampling`` each side
    segmented afresh, seeded by (train.seed, epoch) so that a resumed epoch gets the same pairs."""
    if not cfg.subword_sampling:
        return data.train
    src_seed, tgt_seed = epoch_seeds(cfg, epoch)
    src_lines, tgt_lines = data.train_text
    sampled = zip(src_tok.sample(src_lines, cfg.subword_sampling, src_seed),
                  tgt_tok.sample(tgt_lines, cfg.subword_sampling, tgt_seed))  # fmt: skip
    return within_length([Example(s, t) for s, t in sampled], cfg.max_len)


def batch_lengths(examples: Sequence[Example]) -> list[int]:
    """The padded length each example needs: its longer side plus <eos>/<bos> (from the
    shards' offsets alone when the examples are memory-mapped)."""
    if isinstance(examples, ShardPairs):
        src, tgt = examples.lengths()
        return (np.maximum(src, tgt) + 1).tolist()
    return [max(len(ex.src_ids), len(ex.tgt_ids)) + 1 for ex in examples]


def epoch_batches(examples: Sequence[Example], cfg: TrainConfig, epoch: int, world: int = 1) -> list[list[int]]:
    """This epoch's global batches: bucketed, and shuffled with a seed of (train.seed, epoch).
    With ``world`` data-parallel processes each batch holds ``world`` times the sentences
    (and token budget); every process takes its share of each."""
    lengths = batch_lengths(examples)
    return bucketed_batches(
        lengths, cfg.batch_size * world, seed=cfg.seed * 1000 + epoch, batch_tokens=cfg.batch_tokens * world
    )


def local_batch(examples: Sequence[Example], indices: list[int], ddp: Distributed) -> Batch:
    """This process's part of a global batch. A process left without sentences (a global
    batch smaller than the world) still steps, on one sentence whose targets are all padding,
    so it adds nothing to the loss or the gradients."""
    mine = ddp.shard(indices)
    if mine:
        return collate([examples[i] for i in mine])
    batch = collate([examples[indices[0]]])
    batch.tgt_out.fill_(PAD_ID)
    return batch


def loader_workers(cfg: TrainConfig, device: torch.device) -> int:
    """train.loader_workers, with -1 (auto) = 2 on a GPU (collation overlaps the GPU's work),
    0 on the CPU (the cores are busy training)."""
    if cfg.loader_workers >= 0:
        return cfg.loader_workers
    return 2 if device.type == "cuda" else 0


class _EpochBatches(torch.utils.data.Dataset):
    """Item i: the collated (local share of) global batch i."""

    def __init__(self, examples: Sequence[Example], batches: list[list[int]], ddp: Distributed):
        self.examples, self.batches, self.ddp = examples, batches, ddp

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> Batch:
        return local_batch(self.examples, self.batches[index], self.ddp)


def _ignore_stop_signals(_worker_id: int) -> None:
    """Workers leave Ctrl-C and SIGTERM to the main process, which checkpoints and stops them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def iterate_batches(
    examples: Sequence[Example], batches: list[list[int]], ddp: Distributed, workers: int, pin_memory: bool
) -> Iterator[Batch]:
    """The collated batches, in order: built in the loop, or by ``workers`` processes ahead of
    it; in page-locked memory with ``pin_memory`` (for asynchronous copies to a GPU)."""
    if workers == 0 and not pin_memory:
        return (local_batch(examples, indices, ddp) for indices in batches)
    loader = torch.utils.data.DataLoader(
        _EpochBatches(examples, batches, ddp),
        batch_size=None,  # items are whole batches already
        num_workers=workers,
        pin_memory=pin_memory,
        prefetch_factor=4 if workers else None,
        worker_init_fn=_ignore_stop_signals if workers else None,
        generator=torch.Generator().manual_seed(0),  # its seed draw must not advance the global RNG (dropout)
    )
    return iter(loader)
