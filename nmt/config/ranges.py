"""Each config key's allowed values beyond its type, and the keys a config must state: checked
as a value is read (``nmt.config.parsing``), named with what is allowed when refused. The upper
bounds keep a shared package's config from sizing a model or a search far beyond its weights."""

from __future__ import annotations

import re
from typing import Any

from nmt.core.threads import MOST_THREADS

LEAST_VOCABULARY = 300  # SentencePiece's 256 byte pieces and a few more
_VOCABULARY = f"an integer from {LEAST_VOCABULARY} (256 byte pieces) to 262144"

# Keys a config file must state explicitly: the run is meaningless without them.
REQUIRED_KEYS = ("run_dir", "train.epochs", "train.batch_size", "decode.beam_size")

# Range checks beyond the type: dotted key -> (predicate, description of what is allowed).
positive = (lambda v: v > 0, "a number > 0")
_NON_NEGATIVE = (lambda v: v >= 0, "a number >= 0")
_PROBABILITY = (lambda v: 0.0 <= v <= 1.0, "a number between 0 and 1")
below_one = (lambda v: 0.0 <= v < 1.0, "a number in [0, 1)")  # a dropout's probability


def between(low: float, high: float) -> tuple[Any, str]:
    """A closed range. The upper bounds keep a shared package's config from sizing a model (or a
    search) far beyond anything trained here: a config travels with the weights it describes."""
    return (lambda v: low <= v <= high, f"a number from {low} to {high}")


MAX_WIDTH = 4096  # embeddings, hidden states, attention and output layers
MAX_LAYERS = 8
# a language code names prepared files and a package's tokenizers: it must stay one path part
LANGUAGE_CODE = re.compile(r"[A-Za-z0-9_-]+")
_LANGUAGE = (lambda v: LANGUAGE_CODE.fullmatch(v) is not None, "a language code: letters, digits, '_' and '-' only")
# A family's own model keys are its settings class's (``ModelConfig.ranges``).
RANGES: dict[str, tuple[Any, str]] = {
    "data.src_lang": _LANGUAGE,
    "data.tgt_lang": _LANGUAGE,
    "data.max_pairs": _NON_NEGATIVE,
    "data.max_chars": positive,
    "data.dev_size": positive,
    "data.test_size": positive,
    "data.max_carved": _NON_NEGATIVE,
    "data.oversample": between(1, 100),
    "data.related_pairs": _NON_NEGATIVE,
    # the most: NLLB-200's 256,206 pieces and an <bos> (nmt init --from-hf)
    "tokenizer.src_vocab_size": (lambda v: LEAST_VOCABULARY <= v <= 262_144, _VOCABULARY),
    "tokenizer.tgt_vocab_size": (lambda v: LEAST_VOCABULARY <= v <= 262_144, _VOCABULARY),
    "tokenizer.sample_pairs": (lambda v: v >= 1000, "an integer >= 1000"),
    "tokenizer.character_coverage": (lambda v: 0.9 <= v <= 1.0, "a number between 0.9 and 1.0"),
    "model.embed_dim": between(1, MAX_WIDTH),
    "model.encoder_layers": between(1, MAX_LAYERS),
    "model.decoder_layers": between(1, MAX_LAYERS),
    "model.dropout": below_one,
    "train.epochs": positive,
    "train.batch_size": positive,
    "train.batch_tokens": _NON_NEGATIVE,
    "train.learning_rate": positive,
    "train.clip_grad_norm": _NON_NEGATIVE,
    "train.teacher_forcing": _PROBABILITY,
    "train.label_smoothing": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    "train.word_dropout": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    # a loss beside the cross-entropy: 0.1 and 1 measured; 1e30 ended in "lower train.learning_rate"
    "train.guided_alignment": (lambda v: 0.0 <= v <= 100.0, "a number from 0 (off) to 100 (0.1 and 1 were measured)"),
    "train.lr_hold": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    "train.lr_warmup": _NON_NEGATIVE,
    "train.ema_decay": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1) (0 = off)"),
    "train.subword_sampling": (lambda v: 0.0 <= v <= 1.0, "a number in [0, 1] (0 = off)"),
    "train.max_len": positive,
    "train.related_per_epoch": _NON_NEGATIVE,
    "train.related_until": (lambda v: 0.0 <= v <= 1.0, "a number in [0, 1] (1 = related corpora to the end)"),
    "train.patience": _NON_NEGATIVE,
    "train.max_minutes": _NON_NEGATIVE,
    "train.validation_sentences": _NON_NEGATIVE,
    "train.lr_patience": _NON_NEGATIVE,
    "train.lr_factor": (lambda v: 0.0 < v < 1.0, "a number in (0, 1)"),
    "train.min_lr": _NON_NEGATIVE,
    "train.threads": (
        lambda v: v == "auto" or 0 <= v <= MOST_THREADS,
        f"'auto' or a number of threads from 0 (torch's default) to {MOST_THREADS}",
    ),
    "train.members": (lambda v: v >= 1, "an integer >= 1"),
    "train.loader_workers": (lambda v: v >= -1, "an integer >= 0, or -1 for auto"),
    "train.checkpoint_every": _NON_NEGATIVE,
    "train.validate_every": _NON_NEGATIVE,
    "train.checkpoint_minutes": _NON_NEGATIVE,
    "train.ddp_timeout_minutes": positive,
    "train.keep_checkpoints": positive,
    "train.max_nonfinite": positive,
    "train.probes": _NON_NEGATIVE,
    "train.probe_alignment": _NON_NEGATIVE,
    "tune.trials": positive,
    "tune.trial_fraction": (lambda v: 0.0 < v <= 1.0, "a number in (0, 1]"),
    "tune.confirm": _NON_NEGATIVE,
    "tune.seeds": (lambda v: len(v) > 0, "a list of at least one integer"),
    "tune.workers": _NON_NEGATIVE,
    "decode.beam_size": between(1, 64),
    "decode.length_penalty": _NON_NEGATIVE,
    "decode.coverage_penalty": _NON_NEGATIVE,
    "decode.no_repeat_span": between(0, 50),
    # the output limit (ratio x source length + offset): a package's settings bound what one request can cost
    "decode.max_len_ratio": (lambda v: 0 < v <= 10, "a number > 0 and <= 10"),
    "decode.max_len_offset": between(0, 1000),
    "decode.batch_size": positive,
    "decode.batch_tokens": _NON_NEGATIVE,
    "decode.max_input_len": between(1, 10_000),
    "decode.mbr": (
        lambda v: v == 0 or 2 <= v <= 64,
        "0 (off) or an integer >= 2 and <= 64 (MBR's candidates)",
    ),
}
