"""Word alignments out of a model's attention under forced decoding: the target fed as given
(teacher forcing), the attention read at the step that produces each target word (or the step
where it is the decoder's input: ``step``), summed over each word's subwords on both sides, and
each target word linked to the source word it attends to most (``nmt.data.alignments.word_links``).
What ``nmt align`` and ``evaluate --align`` write, and what the training timeline measures at
each validation."""

from __future__ import annotations

import re

import numpy as np
import torch

from nmt.core.errors import NmtError
from nmt.data.alignments import Links, word_links, word_of_pieces
from nmt.data.batching import source_tensor
from nmt.data.tokenizer import BOS, BOS_ID, EOS, PAD, PAD_ID, Tokenizer
from nmt.decoding.search import evaluating
from nmt.model.base import TranslationModel

STEPS = ("input", "produced")  # which step's attention stands for a target word
# a target tag leading the source of a model of several targets (<2hi>), or a language code leading
# a side (tokenizer.src_code, tgt_code: M2M100's __hi__, NLLB's hin_Deva)
SPECIAL = re.compile(r"^(<2[^>]+>|__[a-z_]+__|[a-z]{3}_[A-Z][a-z]{3})$")
BATCH = 32  # sentence pairs a forced pass reads at once


def attention_alignments(
    model: TranslationModel,
    tokenizers: tuple[Tokenizer, Tokenizer],
    src_ids: list[list[int]],
    targets: list[list[int]],
    device: torch.device,
    layer: int | None = None,
    heads: list[int] | None = None,
    step: str = "produced",
) -> list[Links]:
    """Each (source ids, target ids) pair's links from ``model``'s attention (an empty side: none)."""
    if step not in STEPS:
        raise NmtError(f"step {step!r}: one of {', '.join(STEPS)}.")
    src_tok, tgt_tok = tokenizers
    links: list[Links] = []
    for start in range(0, len(src_ids), BATCH):
        chunk = range(start, min(start + BATCH, len(src_ids)))
        rows = [i for i in chunk if src_ids[i] and targets[i]]
        pairs = [src_ids[i] for i in rows], [targets[i] for i in rows]
        found = dict(zip(rows, forced_attention(model, *pairs, device, layer, heads)))
        for i in chunk:
            if i not in found:
                links.append(Links())  # an empty side: nothing to link
                continue
            length = len(targets[i])
            rows_read = found[i][1 : length + 1] if step == "input" else found[i][:length]  # (T, S)
            source_pieces = [*src_tok.id_to_piece(src_ids[i]), EOS]
            target_pieces = tgt_tok.id_to_piece(targets[i])
            links.append(word_links(rows_read, piece_words(source_pieces), piece_words(target_pieces)))
    return links


def default_heads(model: TranslationModel, guided: bool) -> list[int] | None:
    """The heads alignments read when none are asked for: of a model trained with
    ``train.guided_alignment`` (``guided``), the head it guided; otherwise every head (None)."""
    return [model.guided_head] if guided and model.guided_head is not None else None


def piece_words(pieces: list[str]) -> list[int | None]:
    """Each piece's whitespace word; specials and a target's tag belong to none."""
    return word_of_pieces(pieces, {p for p in pieces if p in (EOS, BOS, PAD) or SPECIAL.match(p)})


def forced_attention(
    model: TranslationModel,
    sources: list[list[int]],
    targets: list[list[int]],
    device: torch.device,
    layer: int | None = None,
    heads: list[int] | None = None,
) -> list[np.ndarray]:
    """Each pair's attention, teacher-forced: (T + 1, S + 1) rows <bos> then each target subword
    fed, columns each source subword then <eos>."""
    if not sources:
        return []
    src, lengths = source_tensor(sources)  # (B, S + 1): <eos> closes each source
    width = max(len(t) for t in targets) + 1
    tgt_in = torch.full((len(targets), width), PAD_ID, dtype=torch.long)  # (B, T + 1)
    for row, target in enumerate(targets):
        tgt_in[row, : len(target) + 1] = torch.tensor([BOS_ID, *target])
    with torch.no_grad(), evaluating(model):
        attention = model.cross_attention(src.to(device), lengths, tgt_in.to(device), layer, heads).cpu().numpy()
    return [attention[row, : len(t) + 1, : len(s) + 1] for row, (s, t) in enumerate(zip(sources, targets))]
