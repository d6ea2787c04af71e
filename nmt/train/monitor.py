"""TensorBoard logging (``train.tensorboard: true``): scalars and attention heatmaps per validation."""

from __future__ import annotations

from pathlib import Path

from nmt.errors import NmtError

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
    def __init__(self, log_dir: Path, translator, data):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise NmtError("train.tensorboard needs the tensorboard package: pip install tensorboard") from None
        self.writer = SummaryWriter(str(log_dir))
        self.translator = translator
        self.sentences = [ids for ids in data.dev_sources[:HEATMAP_SENTENCES] if ids]

    def log(self, record: dict) -> None:
        """One validation's metrics.jsonl record, plus heatmaps of a few fixed dev sentences."""
        from nmt.plotting import attention_figure

        step = record["step"]
        for tag, key in SCALARS.items():
            if key in record:
                self.writer.add_scalar(tag, record[key], step)
        if self.translator.model.config.attention == "none":
            return
        src_tok, tgt_tok = self.translator.src_tok, self.translator.tgt_tok
        for number, (ids, hyp) in enumerate(zip(self.sentences, self.translator.translate_ids(self.sentences, 1))):
            source, hypothesis = src_tok.decode([ids])[0], tgt_tok.decode([hyp])[0]
            src_labels, tgt_labels, weights = self.translator.attention_matrix(source, hypothesis)
            figure = attention_figure(src_labels, tgt_labels, weights, f"{source}\n{hypothesis}")
            self.writer.add_figure(f"attention/dev_{number + 1}", figure, step, close=True)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
