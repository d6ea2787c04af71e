"""What training reads: the prepared splits as token ids, and each epoch's batches."""

from __future__ import annotations

import random
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nmt.config.paths import prepared_paths, run_paths
from nmt.config.schema import Config, TrainConfig
from nmt.core.fileio import iter_lines, read_lines
from nmt.data.alignments import given_links, kept_eflomal_alignments, piece_links, word_of_pieces
from nmt.data.batching import Batch, Example, bucketed_batches, collate
from nmt.data.references import ReferenceSet, read_references
from nmt.data.related import source_tag
from nmt.data.shards import Shard, ShardPairs
from nmt.data.tokenizer import PAD_ID, Tokenizer, tagged
from nmt.training.distributed import Distributed
from nmt.training.schedule import epoch_seeds, related_seed
from nmt.training.state import STOP_SIGNALS


@dataclass
class TrainData:
    train: Sequence[Example]  # read from the prepared token shards, or given in memory
    dev: Sequence[Example]  # dev pairs, for the loss
    dev_sources: list[list[int]]  # distinct dev sources, for BLEU
    dev_references: list[list[str]]  # every reference of each distinct dev source
    skipped_long: int  # training pairs over train.max_len
    train_text: tuple[list[str], list[str]] = ([], [])  # every training pair as text, for subword sampling
    # with train.related_per_epoch or related_until: for each training example, whether it is this
    # pair's own (None: every epoch trains on every prepared pair)
    own: np.ndarray | None = None
    guided: int = 0  # with train.guided_alignment: the training pairs that have reference links


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
    train_text: tuple[list[str], list[str]] = ([], [])
    if config.train.subword_sampling:
        train_text = (read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt")))
    dev = shard_pairs(config, "dev", src_tok, tgt_tok)
    dev_set = read_references(paths.multi("dev"))
    if 0 < config.train.validation_sentences < len(dev_set.sources):
        dev_set, dev = validation_sample(dev_set, dev, read_lines(paths.text("dev", "src")), config.train)
    dev_sources = src_tok.encode(tagged(dev_set.sources, source_tag(config.data)))  # this pair's target's tag, if any
    own = None
    cfg = config.train
    if config.data.related and (cfg.related_per_epoch or cfg.related_until < 1.0):  # an epoch chooses among them
        lead = tagged([""], config.data.tgt_lang)[0]  # this pair's sources lead with its target's tag
        own = np.fromiter((line.startswith(lead) for line in iter_lines(paths.text("train", "src"))), bool)[kept.kept]
    training: Sequence[Example] = kept
    guided = 0
    if config.train.guided_alignment:
        training = guided_examples(config, kept, src_tok, tgt_tok)
        guided = sum(ex.links is not None and len(ex.links) > 0 for ex in training)
    return TrainData(training, dev, dev_sources, dev_set.references, len(train) - len(kept), train_text, own, guided)


def guided_examples(config: Config, kept: ShardPairs, src_tok: Tokenizer, tgt_tok: Tokenizer) -> list[Example]:
    """The training examples with eflomal's links of their pair carried down to subwords (what
    ``train.guided_alignment`` guides toward): the corpus's own (``data.links``), or eflomal's
    of every prepared pair, computed once per run and kept in the run folder, so that a resumed
    run reads the same ones."""
    paths, run = prepared_paths(config), run_paths(config)
    sources, targets = read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt"))
    if config.data.links:  # made once beside the corpus: no eflomal here
        links = given_links(config.data, paths.root, sources, targets)
    else:
        run.writable(run.training_alignments)
        links = kept_eflomal_alignments(run.training_alignments, sources, targets)
    codes = (src_tok.id_to_piece(src_tok.code_ids), tgt_tok.id_to_piece(tgt_tok.code_ids))  # no word's pieces
    examples = []
    for index in range(len(kept)):
        example, row = kept[index], int(kept.kept[index])
        source_words = word_of_pieces(src_tok.id_to_piece(example.src_ids), codes[0])
        target_words = word_of_pieces(tgt_tok.id_to_piece(example.tgt_ids), codes[1])
        examples.append(Example(example.src_ids, example.tgt_ids, piece_links(links[row], source_words, target_words)))
    return examples


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


def epoch_examples(
    data: TrainData, src_tok: Tokenizer, tgt_tok: Tokenizer, cfg: TrainConfig, epoch: int, own_only: bool = False
):
    """The training pairs of ``epoch``: as prepared, or with ``train.subword_sampling`` each side
    segmented afresh; with related corpora,
    ``own_only`` (train.related_until) this pair's alone, or ``train.related_per_epoch`` of the
    related ones beside them. Seeded by (train.seed, epoch), so that a resumed epoch gets the
    same pairs."""
    examples = related_choice(data, cfg, epoch, own_only)
    if cfg.subword_sampling:
        src_seed, tgt_seed = epoch_seeds(cfg, epoch)
        src_lines, tgt_lines = data.train_text
        sampled = zip(
            src_tok.sample(src_lines, cfg.subword_sampling, src_seed),
            tgt_tok.sample(tgt_lines, cfg.subword_sampling, tgt_seed),
        )
        examples = within_length([Example(s, t) for s, t in sampled], cfg.max_len)
    return examples


def related_choice(data: TrainData, cfg: TrainConfig, epoch: int, own_only: bool) -> Sequence[Example]:
    """The prepared pairs an epoch of a model of several targets trains on: this pair's alone
    (``own_only``), or all of them and ``train.related_per_epoch`` related ones drawn afresh."""
    if data.own is None or not (own_only or cfg.related_per_epoch):
        return data.train
    own, related = np.flatnonzero(data.own), np.flatnonzero(~data.own)
    if not own_only and cfg.related_per_epoch < len(related):
        rng = np.random.default_rng(related_seed(cfg, epoch))
        related = np.sort(rng.choice(related, cfg.related_per_epoch, replace=False))
    positions = own if own_only else np.concatenate([own, related])
    if isinstance(data.train, ShardPairs):
        return data.train.subset(positions)
    return [data.train[int(i)] for i in positions]


def side_lengths(examples: Sequence[Example]) -> tuple[np.ndarray, np.ndarray]:
    """(source lengths, target lengths) of every example, without <eos>."""
    if isinstance(examples, ShardPairs):
        return examples.lengths()
    return np.array([len(ex.src_ids) for ex in examples]), np.array([len(ex.tgt_ids) for ex in examples])


def batch_lengths(examples: Sequence[Example]) -> list[int]:
    """The padded length each example needs: its longer side plus <eos>/<bos> (from the
    shards' offsets alone when the examples are memory-mapped)."""
    src, tgt = side_lengths(examples)
    return (np.maximum(src, tgt) + 1).tolist()


def epoch_batches(
    examples: Sequence[Example], cfg: TrainConfig, epoch: int, world: int = 1, done: Sequence[Sequence[int]] = ()
) -> list[list[int]]:
    """This epoch's global batches: bucketed, and shuffled with a seed of (train.seed, epoch).
    With ``world`` data-parallel processes each batch holds ``world`` times the sentences
    (and token budget); every process takes its share of each.

    ``done``: [processes, batches] already trained in this epoch under another number of
    processes, in order; the examples those batches held are left out of the ones returned."""
    lengths = batch_lengths(examples)
    remaining = np.arange(len(lengths))
    for earlier_world, count in done:
        trained = _bucketed(lengths, remaining, cfg, epoch, earlier_world)[:count]
        remaining = np.setdiff1d(remaining, [i for batch in trained for i in batch])
    return _bucketed(lengths, remaining, cfg, epoch, world)


def _bucketed(lengths: list[int], indices: np.ndarray, cfg: TrainConfig, epoch: int, world: int) -> list[list[int]]:
    """The batches of the examples at ``indices`` (all of them: the batches of a whole epoch)."""
    if len(indices) == len(lengths):  # the whole epoch: no mapping
        subset, back = lengths, None
    else:
        subset, back = [lengths[i] for i in indices], indices.tolist()
    seed = cfg.seed * 1000 + epoch
    batches = bucketed_batches(subset, cfg.batch_size * world, seed=seed, batch_tokens=cfg.batch_tokens * world)
    return batches if back is None else [[back[j] for j in batch] for batch in batches]


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


class _Batches(torch.utils.data.Dataset):
    """Item ``indices`` (a tuple of example indices): the collated local share of that global batch."""

    def __init__(self, examples: Sequence[Example], ddp: Distributed):
        self.examples, self.ddp = examples, ddp

    def __getitem__(self, indices: tuple[int, ...]) -> Batch:
        return local_batch(self.examples, list(indices), self.ddp)


class _EpochOrder(torch.utils.data.Sampler):
    """The batches of the epoch being trained, set before each epoch (the sampler lives in
    the training process, so persistent workers need no new copy of anything)."""

    def __init__(self):
        self.batches: list[list[int]] = []

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        return (tuple(batch) for batch in self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def _ignore_stop_signals(_worker_id: int) -> None:
    """Workers leave stop signals to the main process, which checkpoints and stops them."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


class EpochLoader:
    """Each epoch's collated batches, in order: built in the loop, or by ``train.loader_workers``
    processes ahead of it, in page-locked memory on a GPU (for asynchronous copies). The
    DataLoader and its workers are made once and kept from epoch to epoch (made again only
    when the examples themselves change: subword sampling segments them afresh each epoch)."""

    def __init__(self, data: TrainData, ddp: Distributed, cfg: TrainConfig, device: torch.device):
        self.ddp, self.workers, self.pin = ddp, loader_workers(cfg, device), device.type == "cuda"
        self.order = _EpochOrder()
        self.loader: torch.utils.data.DataLoader | None = None
        self.examples: Sequence[Example] | None = None

    def batches(self, examples: Sequence[Example], batches: list[list[int]]) -> Iterator[Batch]:
        if self.workers == 0 and not self.pin:
            return (local_batch(examples, indices, self.ddp) for indices in batches)
        if self.loader is None or examples is not self.examples:
            self.close()
            self.loader, self.examples = self._new_loader(examples), examples
        self.order.batches = batches
        return iter(self.loader)

    def _new_loader(self, examples: Sequence[Example]) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(
            _Batches(examples, self.ddp),
            batch_size=None,  # items are whole batches already
            sampler=self.order,
            num_workers=self.workers,
            pin_memory=self.pin,
            persistent_workers=self.workers > 0,
            prefetch_factor=4 if self.workers else None,
            worker_init_fn=_ignore_stop_signals if self.workers else None,
            generator=torch.Generator().manual_seed(0),  # its seed draw must not advance the global RNG (dropout)
        )

    def close(self) -> None:
        """Stop the workers (at the end of training, or before new examples get new ones)."""
        iterator = getattr(self.loader, "_iterator", None)
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()
        self.loader = self.examples = None
