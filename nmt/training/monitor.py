"""TensorBoard logging (``train.tensorboard: true``): scalars and attention heatmaps per validation."""

from __future__ import annotations

from pathlib import Path

import torch

from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES
from nmt.data.tokenizer import Tokenizer
from nmt.decoding.search import search_sentences
from nmt.training.data import TrainData

SCALARS = {
    "loss/train": "train_loss",
    "loss/dev": "dev_loss",
    "dev/perplexity": "dev_ppl",
    "dev/bleu": "dev_bleu",
    "dev/chrf": "dev_chrf",
    "train/learning_rate": "lr",
    "train/tokens_per_s": "tokens_per_s",
    "train/grad_norm": "grad_norm",
}
HEATMAP_SENTENCES = 3


class TensorBoardMonitor:
    def __init__(
        self,
        log_dir: Path,
        model,
        config: Config,
        data: TrainData,
        tokenizers: tuple[Tokenizer, Tokenizer],
        device: torch.device,
    ):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise NmtError("train.tensorboard needs the tensorboard package: pip install tensorboard") from None
        self.writer = SummaryWriter(str(log_dir))
        self.model, self.config, self.device = model, config, device
        self.src_tok, self.tgt_tok = tokenizers
        self.sentences = [ids for ids in data.dev_sources[:HEATMAP_SENTENCES] if ids]

    def log(self, record: dict) -> None:
        """One validation's metrics.jsonl record, plus heatmaps of a few fixed dev sentences."""
        from nmt.core.plotting import attention_figure

        step = record["step"]
        for tag, key in SCALARS.items():
            if key in record:
                self.writer.add_scalar(tag, record[key], step)
        if not ARCHITECTURES[self.config.model.arch].shows_attention(self.config.model):
            return
        found = search_sentences(
            self.model, self.sentences, self.config.decode.with_beam(1), self.device, with_attention=True
        )
        for number, (ids, hypotheses) in enumerate(zip(self.sentences, found)):
            best = hypotheses[0]
            source, hypothesis = self.src_tok.decode([ids])[0], self.tgt_tok.decode([best.tokens])[0]
            src_labels, tgt_labels = self.src_tok.labels(ids), self.tgt_tok.labels(best.tokens, with_eos=best.ended)
            assert best.attention is not None  # asked for above
            figure = attention_figure(src_labels, tgt_labels, best.attention, f"{source}\n{hypothesis}")
            self.writer.add_figure(f"attention/dev_{number + 1}", figure, step, close=True)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
