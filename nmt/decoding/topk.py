"""Exact top-k over beams in two stages: the candidate finder of beam and greedy search.

On the CPU, ATen's ``topk`` over a (rows, vocabulary) step costs as much as the output
layer that made it (docs/benchmarks.md). ``best_candidates`` reads every logit once in a
cheap ``amax`` and runs ``topk`` only on block maxima and on the few blocks that can hold
the answer.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F


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
    reads every logit, and ``topk`` runs only on block maxima and on the k chosen blocks.
    """
    rows, vocab = logits.shape
    sentences = rows // group
    k = min(k, group * vocab)
    depth, width = _block_shape(vocab, round(math.sqrt(8 * vocab)))  # 160 x 25 for V = 4000 (docs/benchmarks.md)
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
