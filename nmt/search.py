"""Greedy and batched beam search over any model exposing ``encode`` / ``decode_step``.

Search knows nothing of attention or RNNs: it only expands, reorders and steps the
decoder state through ``select``.
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
    prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    scores = torch.zeros(batch, device=src.device)
    steps = []
    for _ in range(max_len):
        log_probs, state, _ = model.decode_step(prev, state, memory)
        best_scores, prev = log_probs.max(dim=-1)
        scores += best_scores.masked_fill(finished, 0.0)
        steps.append(prev.masked_fill(finished, EOS_ID))
        finished |= prev == EOS_ID
        if bool(finished.all()):
            break
    tokens = torch.stack(steps, 1).tolist()
    return SearchResult([_strip_eos(seq) for seq in tokens], scores.tolist())


def _strip_eos(seq: list[int]) -> list[int]:
    return seq[: seq.index(EOS_ID)] if EOS_ID in seq else seq


@torch.no_grad()
def beam_search(
    model, src: torch.Tensor, src_lengths: torch.Tensor, beam_size: int, max_len: int, length_penalty: float = 1.0
) -> SearchResult:
    """Batched beam search: all sentences x beams step as one batch.

    A hypothesis that emits <eos> is set aside with score log p / len**length_penalty
    (len counts <eos>); a sentence is done once it has ``beam_size`` finished hypotheses,
    and the search stops early when every sentence is done. Sentences still open at
    ``max_len`` add their live beams to the candidates.
    """
    batch, k = src.size(0), beam_size
    device = src.device
    memory, state = model.encode(src, src_lengths)
    expand = torch.arange(batch, device=device).repeat_interleave(k)  # (B*K,)
    memory, state = memory.select(expand), state.select(expand)
    beam_scores = torch.full((batch, k), float("-inf"), device=device)
    beam_scores[:, 0] = 0.0  # all beams start identical: keep only one alive
    prev = torch.full((batch * k,), BOS_ID, dtype=torch.long, device=device)
    history = torch.empty((batch * k, 0), dtype=torch.long, device=device)
    finished: list[list[tuple[float, float, list[int]]]] = [[] for _ in range(batch)]  # (norm, raw, tokens)
    done = [False] * batch

    for step in range(1, max_len + 1):
        log_probs, state, _ = model.decode_step(prev, state, memory)  # (B*K, V)
        vocab = log_probs.size(-1)
        candidates = (beam_scores.unsqueeze(-1) + log_probs.view(batch, k, vocab)).view(batch, k * vocab)
        top_scores, top_ids = candidates.topk(2 * k, dim=-1)  # (B, 2K)
        top_beams, top_tokens = top_ids // vocab, top_ids % vocab
        is_eos = top_tokens == EOS_ID

        # Set aside hypotheses that end here (only among each sentence's first K candidates).
        eos_rows, eos_cols = torch.nonzero(is_eos[:, :k] & torch.isfinite(top_scores[:, :k]), as_tuple=True)
        if eos_rows.numel():
            origins = (eos_rows * k + top_beams[eos_rows, eos_cols]).tolist()
            raw_scores = top_scores[eos_rows, eos_cols].tolist()
            histories = history[origins].tolist()
            for row, raw, tokens in zip(eos_rows.tolist(), raw_scores, histories):
                if not done[row]:
                    finished[row].append((raw / step**length_penalty, raw, tokens))

        # Continue with the best K candidates that did not end.
        alive_scores = top_scores.masked_fill(is_eos, float("-inf"))
        keep_scores, keep_cols = alive_scores.topk(k, dim=-1)  # (B, K)
        keep_beams = top_beams.gather(1, keep_cols)
        keep_tokens = top_tokens.gather(1, keep_cols)
        origins = (torch.arange(batch, device=device).unsqueeze(1) * k + keep_beams).view(-1)

        for row in range(batch):
            if not done[row] and len(finished[row]) >= k:
                done[row] = True
        if all(done):
            break
        done_mask = torch.tensor(done, device=device).unsqueeze(1)
        beam_scores = keep_scores.masked_fill(done_mask, float("-inf"))
        state = state.select(origins)
        history = torch.cat([history[origins], keep_tokens.view(-1, 1)], dim=1)
        prev = keep_tokens.view(-1)

    for row in range(batch):
        if not done[row]:  # reached max_len: live beams compete with what has finished
            for beam in range(k):
                raw = beam_scores[row, beam].item()
                if raw != float("-inf"):
                    tokens = history[row * k + beam].tolist()
                    finished[row].append((raw / max(1, len(tokens)) ** length_penalty, raw, tokens))
    best = [max(hyps, key=lambda f: f[0]) for hyps in finished]
    return SearchResult([b[2] for b in best], [b[1] for b in best])
