"""Greedy and batched beam search over any model exposing ``encode`` / ``decode_step``.

Search knows nothing of attention or RNNs: it only expands, reorders and steps the
decoder state through ``select``. Both searches drop sentences from the batch as they
finish, so a batch costs what its unfinished sentences cost, and neither writes a full
log-softmax: log-probabilities are logits minus their logsumexp, computed for the few
candidates kept (top-k of logits = top-k of log-probabilities, row by row).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.tokenizer import BOS_ID, EOS_ID


@dataclass
class SearchResult:
    tokens: list[list[int]]  # per sentence, without <bos>/<eos>
    scores: list[float]  # log-probability of each chosen hypothesis (including <eos>)


def max_output_length(src_lengths: torch.Tensor, ratio: float, offset: int) -> int:
    return max(1, int(src_lengths.max().item() * ratio) + offset)


@torch.no_grad()
def greedy_search(model, src: torch.Tensor, src_lengths: torch.Tensor, max_len: int) -> SearchResult:
    """Pick the most probable token at each step, for the whole batch at once."""
    memory, state = model.encode(src, src_lengths)
    batch = src.size(0)
    tokens: list[list[int]] = [[] for _ in range(batch)]
    scores = [0.0] * batch
    active = list(range(batch))  # original rows still decoding, in the order of the tensors
    prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
    for _ in range(max_len):
        logits, state, _ = model.decode_step(prev, state, memory)
        best_logits, prev = logits.max(dim=-1)
        best_scores = best_logits - torch.logsumexp(logits, dim=-1)
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


@torch.no_grad()
def beam_search(
    model, src: torch.Tensor, src_lengths: torch.Tensor, beam_size: int, max_len: int, length_penalty: float = 1.0
) -> SearchResult:
    """Batched beam search: all sentences x beams step as one batch.

    A hypothesis that emits <eos> is set aside with score log p / len**length_penalty
    (len counts <eos>). A sentence is done, and leaves the batch, when its best candidate
    of the step ends with <eos> (the rule of OpenNMT and JoeyNMT) or it has ``beam_size``
    finished hypotheses; the search stops when every sentence is done. Sentences still
    open at ``max_len`` add their live beams to the candidates.
    """
    batch, k = src.size(0), beam_size
    device = src.device
    memory, state = model.encode(src, src_lengths)
    expand = torch.arange(batch, device=device).repeat_interleave(k)  # (B*K,)
    memory, state = memory.select(expand), state.select(expand)
    beam_scores = torch.full((batch, k), float("-inf"), device=device)  # (A, K) for A active sentences
    beam_scores[:, 0] = 0.0  # all beams start identical: keep only one alive
    prev = torch.full((batch * k,), BOS_ID, dtype=torch.long, device=device)
    history = torch.empty((batch * k, 0), dtype=torch.long, device=device)  # (A*K, steps so far)
    finished: list[list[tuple[float, float, list[int]]]] = [[] for _ in range(batch)]  # (norm, raw, tokens)
    active = list(range(batch))  # original sentence of each row of beam_scores

    for step in range(1, max_len + 1):
        logits, state, _ = model.decode_step(prev, state, memory)  # (A*K, V)
        n_active = len(active)
        # Each beam's 2K best tokens hold every candidate of the sentence's top 2K.
        beam_logits, beam_tokens = logits.topk(min(2 * k, logits.size(-1)), dim=-1)  # (A*K, 2K)
        beam_log_probs = beam_logits - torch.logsumexp(logits, dim=-1, keepdim=True)
        width = beam_tokens.size(-1)
        candidates = (beam_scores.unsqueeze(-1) + beam_log_probs.view(n_active, k, width)).view(n_active, k * width)
        top_scores, top_ids = candidates.topk(2 * k, dim=-1)  # (A, 2K)
        top_beams = top_ids // width
        top_tokens = beam_tokens.view(n_active, k * width).gather(1, top_ids)
        is_eos = top_tokens == EOS_ID

        # Set aside hypotheses that end here (only among each sentence's first K candidates).
        eos_rows, eos_cols = torch.nonzero(is_eos[:, :k] & torch.isfinite(top_scores[:, :k]), as_tuple=True)
        if eos_rows.numel():
            origins = (eos_rows * k + top_beams[eos_rows, eos_cols]).tolist()
            raw_scores = top_scores[eos_rows, eos_cols].tolist()
            for row, raw, tokens in zip(eos_rows.tolist(), raw_scores, history[origins].tolist()):
                finished[active[row]].append((raw / step**length_penalty, raw, tokens))

        # Continue with the best K candidates that did not end.
        alive_scores = top_scores.masked_fill(is_eos, float("-inf"))
        keep_scores, keep_cols = alive_scores.topk(k, dim=-1)  # (A, K)
        keep_beams = top_beams.gather(1, keep_cols)
        keep_tokens = top_tokens.gather(1, keep_cols)
        origins = (torch.arange(n_active, device=device).unsqueeze(1) * k + keep_beams)  # (A, K) rows of the old batch

        best_ended = is_eos[:, 0].tolist()
        still = [r for r in range(n_active) if not best_ended[r] and len(finished[active[r]]) < k]
        if not still:
            active = []
            break
        if len(still) < n_active:  # drop the sentences that are done
            keep = torch.tensor(still, device=device)
            memory = memory.select((keep.unsqueeze(1) * k + torch.arange(k, device=device)).view(-1))
            keep_scores, keep_tokens, origins = keep_scores[keep], keep_tokens[keep], origins[keep]
            active = [active[r] for r in still]
        origins = origins.view(-1)
        beam_scores = keep_scores
        state = state.select(origins)
        history = torch.cat([history[origins], keep_tokens.view(-1, 1)], dim=1)
        prev = keep_tokens.view(-1)

    for row, sentence in enumerate(active):  # reached max_len: live beams compete with the finished
        for beam in range(k):
            raw = beam_scores[row, beam].item()
            if raw != float("-inf"):
                tokens = history[row * k + beam].tolist()
                finished[sentence].append((raw / max(1, len(tokens)) ** length_penalty, raw, tokens))
    best = [max(hyps, key=lambda f: f[0]) for hyps in finished]
    return SearchResult([b[2] for b in best], [b[1] for b in best])
