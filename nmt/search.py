"""Greedy and batched beam search over any model exposing ``encode`` / ``decode_step``.

Search knows nothing of attention or RNNs: it only expands, reorders and steps the
decoder state through ``select``. Both searches drop sentences from the batch as they
finish, so a batch costs what its unfinished sentences cost, and neither writes a full
log-softmax: log-probabilities are logits minus their logsumexp, computed for the few
candidates kept. Candidates are found by ``best_candidates``, a two-stage top-k that reads
every logit once, in a cheap max, instead of a full ``topk``/``max`` pass per row.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from nmt.tokenizer import BOS_ID, EOS_ID


@dataclass
class SearchResult:
    tokens: list[list[int]]  # per sentence, without <bos>/<eos>
    scores: list[float]  # log-probability of each chosen hypothesis (including <eos>)


@functools.lru_cache(maxsize=64)
def _block_shape(vocab: int, target_width: int) -> tuple[int, int]:
    """(depth, width) with depth * width >= vocab: a divisor of ``vocab`` near ``target_width``
    when there is one (no padding), else ``target_width`` itself."""
    for delta in range(target_width // 2 + 1):
        for width in (target_width - delta, target_width + delta):
            if width > 0 and vocab % width == 0:
                return vocab // width, width
    return -(-vocab // target_width), target_width


def best_candidates(
    logits: torch.Tensor, offsets: torch.Tensor | None, group: int, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best of ``logits[r, v] + offsets[r]`` over each ``group`` consecutive rows.

    logits (R, V), offsets (R,) or None -> values (R / group, k') and ids (R / group, k'),
    id = row within the group * V + token, k' = min(k, group * V). The same as
    ``(logits + offsets[:, None]).view(-1, group * V).topk(k)``, ties aside, values bitwise.

    Each row's V logits are cut into ``width`` strided blocks (block j holds tokens j,
    j + width, j + 2 width, ...). The k best candidates lie in the k blocks whose maxima are
    best: a block outside them is beaten by k maxima of other blocks. So one cheap ``amax``
    reads every logit, and ``topk`` runs only on block maxima and on the k chosen blocks;
    on the CPU ``topk`` and ``max`` over a whole (320, 4000) step cost as much as the
    output layer that made it.
    """
    rows, vocab = logits.shape
    sentences = rows // group
    k = min(k, group * vocab)
    depth, width = _block_shape(vocab, round(math.sqrt(8 * vocab)))  # 160 x 25 for V = 4000 (measured best)
    if depth * width != vocab:  # pad with -inf: never chosen ahead of a real token
        logits = F.pad(logits, (0, depth * width - vocab), value=float("-inf"))
    blocks = logits.view(rows, depth, width)  # blocks[r, d, j] = logits[r, d * width + j]
    block_max = blocks.amax(dim=1)  # (R, width)
    if offsets is not None:
        block_max = block_max + offsets.unsqueeze(1)
    top_blocks = block_max.view(sentences, group * width).topk(min(k, group * width), dim=-1).indices  # (N, kb)
    block_rows = torch.arange(sentences, device=logits.device).unsqueeze(1) * group + top_blocks // width  # (N, kb)
    block_cols = top_blocks % width
    chosen = blocks[block_rows, :, block_cols]  # (N, kb, depth)
    if offsets is not None:
        chosen = chosen + offsets[block_rows].unsqueeze(-1)
    values, positions = chosen.view(sentences, -1).topk(k, dim=-1)  # (N, k)
    which = positions // depth  # index into the chosen blocks
    tokens = (positions % depth) * width + block_cols.gather(1, which)
    in_group = block_rows.gather(1, which) % group
    return values, in_group * vocab + tokens.clamp(max=vocab - 1)  # (a padded slot only ever holds -inf)


def max_output_length(src_lengths: torch.Tensor, ratio: float, offset: int) -> int:
    return max(1, int(src_lengths.max().item() * ratio) + offset)


@torch.inference_mode()
def greedy_search(model, src: torch.Tensor, src_lengths: torch.Tensor, max_len: int) -> SearchResult:
    """Pick the most probable token at each step, for the whole batch at once."""
    memory, state = model.encode(src, src_lengths)
    batch = src.size(0)
    tokens: list[list[int]] = [[] for _ in range(batch)]
    scores = [0.0] * batch
    active = list(range(batch))  # original rows still decoding, in the order of the tensors
    prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
    for _ in range(max_len):
        logits, state, _ = model.decode_step(prev, state, memory)  # (A, V)
        best_logits, best_tokens = best_candidates(logits, None, 1, 1)  # (A, 1) each
        prev = best_tokens.squeeze(1)
        best_scores = best_logits.squeeze(1) - torch.logsumexp(logits, dim=-1)
        for row, token, token_score in zip(active, prev.tolist(), best_scores.tolist()):
            scores[row] += token_score
            if token != EOS_ID:
                tokens[row].append(token)
        still = (prev != EOS_ID).nonzero(as_tuple=True)[0]  # positions in the active batch
        if still.numel() == 0:
            break
        if still.numel() < len(active):
            active = [active[i] for i in still.tolist()]
            memory, state, prev = memory.select(still), state.select(still), prev.index_select(0, still)
    return SearchResult(tokens, scores)


@torch.inference_mode()
def beam_search(
    model, src: torch.Tensor, src_lengths: torch.Tensor, beam_size: int, max_len: int, length_penalty: float = 1.0
) -> SearchResult:
    """Batched beam search: all sentences x beams step as one batch.

    The first step runs once per sentence (its beams would all be the same <bos>), then
    each sentence keeps ``beam_size`` beams. A hypothesis that emits <eos> is set aside
    with score log p / len**length_penalty (len counts <eos>). A sentence is done, and
    leaves the batch, when its best candidate of the step ends with <eos> (the rule of
    OpenNMT and JoeyNMT) or it has ``beam_size`` finished hypotheses; the search stops when
    every sentence is done. Sentences still open at ``max_len`` add their live beams to
    the candidates.
    """
    batch, k = src.size(0), beam_size
    device = src.device
    memory, state = model.encode(src, src_lengths)  # one row per sentence until the first step is taken
    beam_scores = torch.zeros((batch, 1), device=device)  # (A, beams) for A active sentences
    prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)
    history = torch.empty((batch, 0), dtype=torch.long, device=device)  # (A*beams, steps so far)
    finished: list[list[tuple[float, float, list[int]]]] = [[] for _ in range(batch)]  # (norm, raw, tokens)
    active = list(range(batch))  # original sentence of each row of beam_scores

    for step in range(1, max_len + 1):
        logits, state, _ = model.decode_step(prev, state, memory)  # (A*beams, V)
        n_active, beams = beam_scores.shape
        vocab = logits.size(-1)
        offsets = beam_scores.view(-1) - torch.logsumexp(logits, dim=-1)  # score so far - log Z, per row
        top_scores, top_ids = best_candidates(logits, offsets, beams, 2 * k)  # (A, 2K): the sentence's best
        top_beams, top_tokens = top_ids // vocab, top_ids % vocab
        is_eos = top_tokens == EOS_ID

        # Set aside hypotheses that end here (only among each sentence's first K candidates).
        eos_rows, eos_cols = torch.nonzero(is_eos[:, :k] & torch.isfinite(top_scores[:, :k]), as_tuple=True)
        if eos_rows.numel():
            origins = (eos_rows * beams + top_beams[eos_rows, eos_cols]).tolist()
            raw_scores = top_scores[eos_rows, eos_cols].tolist()
            for row, raw, tokens in zip(eos_rows.tolist(), raw_scores, history[origins].tolist()):
                finished[active[row]].append((raw / step**length_penalty, raw, tokens))

        # Continue with the best K candidates that did not end.
        alive_scores = top_scores.masked_fill(is_eos, float("-inf"))
        keep_scores, keep_cols = alive_scores.topk(min(k, alive_scores.size(1)), dim=-1)  # (A, K)
        keep_beams = top_beams.gather(1, keep_cols)
        keep_tokens = top_tokens.gather(1, keep_cols)
        origins = torch.arange(n_active, device=device).unsqueeze(1) * beams + keep_beams  # (A, K) rows of the old batch

        best_ended = is_eos[:, 0].tolist()
        still = [r for r in range(n_active) if not best_ended[r] and len(finished[active[r]]) < k]
        if not still:
            active = []
            break
        dropped = len(still) < n_active
        if dropped:  # drop the sentences that are done
            keep = torch.tensor(still, device=device)
            keep_scores, keep_tokens, origins = keep_scores[keep], keep_tokens[keep], origins[keep]
            active = [active[r] for r in still]
        origins = origins.view(-1)
        if dropped or beams != keep_scores.size(1):
            memory = memory.select(origins)  # a sentence's rows share its memory: any of them will do
        beam_scores = keep_scores
        state = state.select(origins)
        history = torch.cat([history[origins], keep_tokens.view(-1, 1)], dim=1)
        prev = keep_tokens.view(-1)

    beams = beam_scores.size(1)
    for row, sentence in enumerate(active):  # reached max_len: live beams compete with the finished
        for beam in range(beams):
            raw = beam_scores[row, beam].item()
            if raw != float("-inf"):
                tokens = history[row * beams + beam].tolist()
                finished[sentence].append((raw / max(1, len(tokens)) ** length_penalty, raw, tokens))
    best = [max(hyps, key=lambda f: f[0]) for hyps in finished]
    return SearchResult([b[2] for b in best], [b[1] for b in best])
