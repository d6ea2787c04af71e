"""Pictures: attention heatmaps and learning curves (matplotlib, no display).

Figures are made as ``matplotlib.figure.Figure`` objects, never through pyplot, and the backend
is never chosen here: importing this toolkit in a notebook once switched matplotlib to Agg, and
the student's own inline plots and ``show()`` showed nothing. A figure returned (such as
``attention_figure``'s) displays as a cell's last line; a file is written by its own canvas."""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib
import torch
from matplotlib import font_manager
from matplotlib.figure import Figure

from nmt.core.fileio import save_atomic
from nmt.core.fonts import installed_fonts, missing_font_warning, missing_scripts


def _use_script_fonts() -> None:
    """Fall back to the installed Noto fonts (``nmt.core.fonts``) for glyphs DejaVu Sans lacks
    (Devanagari, Arabic, Tamil, Telugu, Thai, Khmer): without them, labels are empty boxes."""
    families = list(matplotlib.rcParams["font.family"])
    for font_file in installed_fonts():
        font_manager.fontManager.addfont(str(font_file))
        name = font_manager.FontProperties(fname=str(font_file)).get_name()
        if name not in families:
            families.append(name)
    matplotlib.rcParams["font.family"] = [
        "DejaVu Sans",
        *[f for f in families if f not in ("sans-serif", "DejaVu Sans")],
    ]


_use_script_fonts()


def plot_attention(
    src_labels: list[str], tgt_labels: list[str], weights: torch.Tensor, path: str | Path, title: str = ""
) -> None:
    """Heatmap of weights (T, S) to a file (.png, .svg, .pdf)."""
    _save(attention_figure(src_labels, tgt_labels, weights, title), path, dpi=120)


def attention_figure(src_labels: list[str], tgt_labels: list[str], weights: torch.Tensor, title: str = "") -> Figure:
    """Heatmap of weights (T, S): target subwords down the side, source subwords along the top.
    A script no installed font draws is named in a warning (once per script)."""
    _warn_missing_scripts([*src_labels, *tgt_labels])
    rows, cols = weights.shape
    fig = Figure(figsize=(max(4.0, 0.45 * cols + 2), max(3.0, 0.4 * rows + 1.5)))
    ax = fig.subplots()
    image = ax.imshow(weights.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(cols), labels=src_labels, rotation=60, ha="left", rotation_mode="anchor")
    ax.set_yticks(range(rows), labels=tgt_labels)
    ax.xaxis.tick_top()
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    if title:
        ax.set_title(title, fontsize=9, pad=40)
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    return fig


_warned_scripts: set[str] = set()


def _warn_missing_scripts(labels: list[str]) -> None:
    missing = {s: c for s, c in missing_scripts(labels).items() if s not in _warned_scripts}
    if missing:
        _warned_scripts.update(missing)
        warnings.warn(missing_font_warning(missing), stacklevel=3)


def _save(fig: Figure, path: str | Path, dpi: int = 110) -> None:
    """Write ``fig`` atomically in the format the path's suffix names (.png, .svg, .pdf)."""
    suffix = Path(path).suffix.lstrip(".").lower() or "png"
    save_atomic(path, lambda tmp: fig.savefig(tmp, format=suffix, dpi=dpi))


TIMELINE_PANELS = 8  # at most this many validations in the strip (evenly spaced, the last always)


def plot_timeline(records: list[dict], path: str | Path, probe: int = 0) -> int:
    """Probe ``probe``'s attention at successive validations (timeline.jsonl records), one
    heatmap per validation left to right: alignment forming. Returns how many are drawn."""
    if len(records) > TIMELINE_PANELS:
        step = (len(records) - 1) / (TIMELINE_PANELS - 1)
        records = [records[round(i * step)] for i in range(TIMELINE_PANELS)]
    first = records[0]["probes"][probe]
    _warn_missing_scripts(first["source_tokens"] + [t for r in records for t in r["probes"][probe]["tokens"]])
    cols = len(first["source_tokens"])
    fig = Figure(figsize=(max(3.0, 0.3 * cols + 1.2) * len(records), 4.2))
    axes = fig.subplots(1, len(records), squeeze=False)
    for ax, record in zip(axes[0], records):
        shown = record["probes"][probe]
        weights = torch.tensor(shown["attention"]) if shown["attention"] else torch.zeros(1, cols)
        ax.imshow(weights.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(cols), labels=shown["source_tokens"], rotation=70, fontsize=7)
        ax.set_yticks(range(len(shown["tokens"])), labels=shown["tokens"], fontsize=7)
        aer = f", AER {record['alignment']['aer']:.2f}" if "alignment" in record else ""  # train.probe_alignment
        ax.set_title(f"epoch {record['epoch']}\nBLEU {record['dev_bleu']:.1f}{aer}", fontsize=8)
    fig.suptitle("".join(first["source_tokens"][:-1]).replace("▁", " ").strip(), fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    return len(records)


def plot_learning_curves(records: list[dict], path: str | Path) -> None:
    """Train/dev loss and dev BLEU/chrF by epoch, from metrics.jsonl records."""
    # fractional inside an epoch, as nmt.training.metrics.epochs_trained reads it (a core module cannot import it)
    epochs = [r.get("epochs", r["epoch"]) for r in records]
    fig = Figure(figsize=(10, 4))
    left, right = fig.subplots(1, 2)
    left.plot(epochs, [r["train_loss"] for r in records], marker="o", label="train loss")
    left.plot(epochs, [r["dev_loss"] for r in records], marker="o", label="dev loss")
    left.set_xlabel("epoch")
    left.set_ylabel("cross-entropy per token")
    left.legend()
    right.plot(epochs, [r["dev_bleu"] for r in records], marker="o", label="dev BLEU (greedy)")
    right.plot(epochs, [r["dev_chrf"] for r in records], marker="o", label="dev chrF (greedy)")
    right.set_xlabel("epoch")
    right.legend()
    fig.tight_layout()
    _save(fig, path)


def plot_bleu_by_length(rows_by_variant: dict[str, list[dict]], path: str | Path, baseline: str = "none") -> None:
    """BLEU by source-length bucket, one line per variant; the no-attention baseline dashed."""
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for name, rows in rows_by_variant.items():
        style = dict(linestyle="--", color="black", linewidth=2) if name == baseline else dict(linewidth=1.5)
        ax.plot([r["bucket"] for r in rows], [r["bleu"] for r in rows], marker="o", label=name, **style)
    ax.set_xlabel("source sentence length (words)")
    ax.set_ylabel("test BLEU (all references)")
    ax.set_title("BLEU by source length: attention variants vs no attention")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
