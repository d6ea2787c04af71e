"""Forced decoding: the log-probability a model gives translations it is handed, what it
would say next after a given start, and search that continues a given start.

The model runs exactly as in search (``SearchModel.encode`` and ``decode_step``, one target
position at a time), except that each step is fed the given token instead of a chosen one,
so a hypothesis that search found scores here what search said it scored.
"""

from __future__ import annotations

import torch

from nmt.config.schema import DecodeConfig
from nmt.core.progress import progress_bar
from nmt.data.batching import pad_sequences, sorted_batches, source_tensor
from nmt.data.tokenizer import BOS_ID, EOS_ID
from nmt.decoding.search import NEVER_CHOSEN, Hypothesis, SearchModel, evaluating, forbid_never_chosen


@torch.inference_mode()
def forced_log_probs(
    model: SearchModel, src: torch.Tensor, src_lengths: torch.Tensor, targets: list[list[int]]
) -> list[list[float]]:
    """log p of each target token and then of <eos>: src (B, S), targets B lists of ids."""
    gold = pad_sequences([ids + [EOS_ID] for ids in targets]).to(src.device)  # (B, T), padded after <eos>
    log_probs, _, _ = forced_steps(model, src, src_lengths, gold)
    table = log_probs.gather(2, gold.unsqueeze(2)).squeeze(2).cpu()  # (B, T)
    return [table[row, : len(ids) + 1].tolist() for row, ids in enumerate(targets)]


@torch.inference_mode()
def forced_steps(model: SearchModel, src: torch.Tensor, src_lengths: torch.Tensor, fed: torch.Tensor):
    """Feed <bos> and then ``fed`` (B, T) ids but its last column: the log-probabilities of
    every next token at each of the T steps (B, T, V), the attention (B, T, S) and the state
    after the last step (ready for the step after ``fed``)."""
    memory, state = model.encode(src, src_lengths)
    prev = torch.full((fed.size(0),), BOS_ID, dtype=torch.long, device=src.device)
    log_probs, attention = [], []
    for t in range(fed.size(1)):
        logits, state, weights = model.decode_step(prev, state, memory)  # (B, V), state, (B, S)
        log_probs.append(logits.log_softmax(-1))
        attention.append(weights)
        prev = fed[:, t]
    return torch.stack(log_probs, 1), torch.stack(attention, 1), state


@torch.inference_mode()
def next_tokens(model: SearchModel, src: torch.Tensor, src_lengths: torch.Tensor, prefix: list[int], k: int):
    """The ``k`` most probable tokens after ``prefix`` (one sentence: src (1, S)) that search
    could choose (never <pad> or <bos>): their ids and log-probabilities, most probable first."""
    fed = torch.tensor([[*prefix, EOS_ID]], dtype=torch.long, device=src.device)  # the last column is not fed
    log_probs, _, _ = forced_steps(model, src, src_lengths, fed)
    choosable = forbid_never_chosen(log_probs[0, -1:].clone())[0]  # what search could choose next
    best = choosable.topk(min(k, log_probs.size(-1) - len(NEVER_CHOSEN)))
    return best.indices.tolist(), best.values.tolist()


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
    bar = progress_bar(len(sources), "score", "pair", progress)
    with evaluating(model):
        for batch in sorted_batches(lengths, decode.batch_size, decode.batch_tokens):
            src, src_lengths = source_tensor([sources[i] for i in batch])
            found = forced_log_probs(model, src.to(device), src_lengths, [targets[i] for i in batch])
            for i, log_probs in zip(batch, found):
                results[i] = Hypothesis(targets[i], log_probs, sum(log_probs))
            bar.update(len(batch))
    bar.close()
    return [found for found in results if found is not None]
