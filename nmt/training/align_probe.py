"""Alignment forming over a training run (``train.probe_alignment``): at each validation the
model's attention aligns the first N dev pairs by forced decoding (``nmt.decoding.alignment``),
held against eflomal's links of the same pairs (computed once beside the training pairs and
kept in the run folder, so that a resumed run reads the same ones). The agreement (AER,
precision, recall) goes into that validation's timeline record and the training log; the lab's
timeline and ``nmt plot`` draw it."""

from __future__ import annotations

import torch

from nmt.config.paths import prepared_paths, run_paths
from nmt.config.schema import Config
from nmt.core.fileio import read_lines
from nmt.data.alignments import Links, agreement, given_links, kept_eflomal_alignments
from nmt.data.related import source_tag
from nmt.data.tokenizer import Tokenizer, tagged
from nmt.decoding.alignment import attention_alignments, default_heads
from nmt.model.base import TranslationModel


class AlignmentProbe:
    """The first ``train.probe_alignment`` dev pairs and eflomal's links of them."""

    def __init__(self, config: Config, tokenizers: tuple[Tokenizer, Tokenizer]):
        self.config, self.tokenizers = config, tokenizers
        paths = prepared_paths(config)
        count = config.train.probe_alignment
        self.sources = read_lines(paths.text("dev", "src"))[:count]
        self.targets = read_lines(paths.text("dev", "tgt"))[:count]
        src_tok, tgt_tok = tokenizers
        self.src_ids = src_tok.encode(tagged(self.sources, source_tag(config.data)))
        self.tgt_ids = tgt_tok.encode(self.targets)
        self._reference: list[Links] | None = None

    def reference(self) -> list[Links]:
        """eflomal's links of the pairs: read from the run folder, or computed (once) and written there."""
        if self._reference is None:
            run, paths = run_paths(self.config), prepared_paths(self.config)
            if self.config.data.links:  # the corpus's own, made once (dev pairs are corpus pairs)
                self._reference = given_links(self.config.data, paths.root, self.sources, self.targets)
                return self._reference
            run.writable(run.probe_alignments)
            training = (read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt")))
            self._reference = kept_eflomal_alignments(run.probe_alignments, self.sources, self.targets, training)
        return self._reference

    def measure(self, model: TranslationModel, device: torch.device) -> dict:
        """The attention's agreement with eflomal now: AER, precision, recall and the pairs counted."""
        heads = default_heads(model, bool(self.config.train.guided_alignment))
        found = attention_alignments(model, self.tokenizers, self.src_ids, self.tgt_ids, device, heads=heads)
        scored = agreement(self.reference(), found)
        return {
            "aer": round(scored.aer, 4),
            "precision": round(scored.precision, 4),
            "recall": round(scored.recall, 4),
            "pairs": len(found),
        }


def check_aligner(config: Config) -> None:
    """The settings that run eflomal, refused before prepare or a step where it is missing."""
    from nmt.data.alignments import require_eflomal

    if config.data.links:  # the links are data: nothing runs eflomal
        return
    if config.train.guided_alignment:
        require_eflomal(f"train.guided_alignment {config.train.guided_alignment:g}")
    if config.train.probe_alignment:
        require_eflomal(f"train.probe_alignment {config.train.probe_alignment}")
