"""Forced decoding: the log-probability a model gives translations it is handed.

The model runs exactly as in search (``SearchModel.encode`` and ``decode_step``, one target
position at a time), except that each step is fed the given token instead of a chosen one,
so a hypothesis that search found scores here what search said it scored.
"""

from __future__ import annotations

import torch
from tqdm import tqdm

from nmt.config import DecodeConfig
from nmt.data.batching import pad_sequences, sorted_batches, source_tensor
from nmt.search import Hypothesis, SearchModel
from nmt.tokenizer import BOS_ID, EOS_ID


@torch.inference_mode()
def forced_log_probs(
    model: SearchModel, src: torch.Tensor, src_lengths: torch.Tensor, targets: list[list[int]]
) -> list[list[float]]:
    """log p of each target token and then of <eos>: src (B, S), targets B lists of ids."""
    memory, state = model.encode(src, src_lengths)
    gold = pad_sequences([ids + [EOS_ID] for ids in targets]).to(src.device)  # (B, T), padded after <eos>
    prev = torch.full((gold.size(0),), BOS_ID, dtype=torch.long, device=src.device)
    steps = []
    for t in range(gold.size(1)):
        logits, state, _ = model.decode_step(prev, state, memory)  # (B, V)
        steps.append(logits.log_softmax(-1).gather(1, gold[:, t : t + 1]).squeeze(1))
        prev = gold[:, t]
    table = torch.stack(steps, 1).cpu()  # (B, T)
    return [table[row, : len(ids) + 1].tolist() for row, ids in enumerate(targets)]


def score_pairs(
    model: SearchModel,
    sources: list[list[int]],
    targets: list[list[int]],
    decode: DecodeConfig,
    device: torch.device,
    progress: bool = False,
) -> list[Hypothesis]:
    """Each (source, target) pair as a hypothesis whose score is its log-probability (no
    length normalisation), batched by length like search; the order of the input is kept."""
    results: list[Hypothesis | None] = [None] * len(sources)
    lengths = [len(src) + len(tgt) + 2 for src, tgt in zip(sources, targets)]
    was_training = model.training
    model.train(False)
    bar = tqdm(total=len(sources), desc="score", unit="pair", disable=not progress, leave=False)
    for batch in sorted_batches(lengths, decode.batch_size, decode.batch_tokens):
        src, src_lengths = source_tensor([sources[i] for i in batch])
        found = forced_log_probs(model, src.to(device), src_lengths, [targets[i] for i in batch])
        for i, log_probs in zip(batch, found):
            results[i] = Hypothesis(targets[i], log_probs, sum(log_probs))
        bar.update(len(batch))
    bar.close()
    model.train(was_training)
    return results
