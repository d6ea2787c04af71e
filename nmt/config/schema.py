"""Typed configuration: one YAML file -> dataclasses, with defaults and validation on load.

Every section is a dataclass; every field has a type and a default unless it is required.
``load_config`` refuses unknown keys (suggesting the nearest valid name), wrong types and
out-of-range values, always naming the dotted key, the value given and what is allowed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml

from nmt.config.measured import removed_keys
from nmt.core.device import DEVICE_NAMES, PRECISION_NAMES
from nmt.core.errors import NmtError
from nmt.core.plugins import load_config_plugins, requested_plugins
from nmt.core.registry import ARCHITECTURES, ATTENTIONS, CALLBACKS, CELLS, STRATEGIES
from nmt.core.threads import MOST_THREADS, ThreadSetting

# Allowed values come from the registries, read when a config is validated: a new attention
# (nmt/model/attention.py) or cell (nmt/model/cells.py) is one entry there, nothing here.
ArchName = Annotated[str, ARCHITECTURES]
AttentionName = Annotated[str, ATTENTIONS]
CellName = Annotated[str, CELLS]
StrategyName = Annotated[str, STRATEGIES]
WINDOWS = ("global", "local-m", "local-p")  # where attention may look (nmt/model/attention.py: Window)
WindowName = Literal[WINDOWS]  # type: ignore[valid-type]
DeviceName = Literal[DEVICE_NAMES]  # type: ignore[valid-type]
PrecisionName = Literal[PRECISION_NAMES]  # type: ignore[valid-type]
RnnInput = Literal["auto", "packed", "padded"]
# train.freeze: parts of a model kept as its parent left them (nmt/runtime/parent.py maps each to its tensors)
FREEZE_PARTS = ("src_embeddings", "tgt_embeddings", "embeddings", "encoder", "bridge", "attention", "decoder")
HeaderMode = Literal["auto", True, False]


# A given dev/test set: {source language: file, target language: file or [files]} (several references).
LanguageFiles = dict[str, str | list[str]]


@dataclass
class DataConfig:
    # Training data, one of two kinds (docs/tutorials/your-data.md):
    path: str = ""  # a TSV file (Anki/Tatoeba or any: one pair per line) or an Anki zip
    train: LanguageFiles = field(default_factory=dict)  # or line-aligned text files, {language: file}
    src_lang: str = "en"  # the direction: translate from src_lang into tgt_lang
    tgt_lang: str = "mr"  # the target language; both names the prepared files, the report and the model card
    columns: list[str] = field(default_factory=list)  # the TSV's language columns (default [src_lang, tgt_lang])
    header: HeaderMode = "auto"  # the TSV's first line names its columns: auto (detect), true, false
    # Dev and test: given as line-aligned files (used as they are), else carved out of the training data.
    dev: LanguageFiles = field(default_factory=dict)
    test: LanguageFiles = field(
        default_factory=dict
    )  # {src_lang: FILE, tgt_lang: FILE or [FILES]} (several references)
    on_malformed: Literal["skip", "error"] = "skip"  # skip (and count) or refuse bad lines
    max_pairs: int = 0  # keep only the first N pairs read (0 = all); for quick experiments
    max_chars: int = 1000  # longer sentences are clipped to this many characters (counted in the report)
    dev_size: float = 0.05  # carved sets, < 1: fraction of distinct source sentences; >= 1: their number
    test_size: float = 0.05  # the test set carved out of training when not given, as dev_size
    max_carved: int = 5000  # a fractional dev_size / test_size carves at most this many sources (0 = no cap)
    split_seed: int = 1234  # seed of the grouped split (every source sentence in one split)
    prepared_dir: str = ""  # where prepare writes; default <run_dir>/data
    # sequence-level knowledge distillation (nmt/pipelines/distill.py): a teacher (run directory or package of
    # this pair) translates the training sources, and its translations become the training targets
    distill_from: str = ""
    # the human targets replaced by the teacher's, kept beside them, or kept alone (keep: with synthetic_from)
    distill: Literal["replace", "add", "keep"] = "replace"
    # self-training: a file of source sentences (one a line; a TSV's first column) the teacher translates,
    # the pairs trained beside the human ones (He et al., 2020); sources of dev or test are left out
    synthetic_from: str = ""
    # related corpora trained beside this pair, {target language: TSV or Anki zip from src_lang}, e.g.
    # {mr: data/eng-mar/mar.txt} for Hindi: one model for every target, each source led by its target's
    # tag (<2hi>); dev, test and the best checkpoint stay this pair's (docs/small-data.md)
    related: dict[str, str] = field(default_factory=dict)
    oversample: int = 1  # with related corpora: this pair's training pairs, this many times an epoch
    related_pairs: int = 0  # at most this many pairs of each related corpus, a seeded sample (0 = all of them)

    @property
    def tsv_columns(self) -> list[str]:
        return self.columns or [self.src_lang, self.tgt_lang]

    @property
    def targets(self) -> list[str]:
        """The languages the model translates into: tgt_lang, then the related corpora's."""
        return [self.tgt_lang, *self.related]


@dataclass
class TokenizerConfig:
    src_vocab_size: int = 4000  # SentencePiece vocabulary of the source (256 byte pieces included)
    tgt_vocab_size: int = 4000  # and of the target
    model_type: Literal["unigram", "bpe", "char", "word"] = "unigram"  # SentencePiece's segmentation model
    character_coverage: float = 1.0  # SentencePiece's share of characters covered by pieces (rare ones: bytes)
    # true: one SentencePiece model for both languages (its size: src_vocab_size, which must equal
    # tgt_vocab_size), and the encoder and decoder share one embedding table
    joint: bool = False
    # SentencePiece learns from a seeded sample of this many training pairs (all when fewer):
    # its memory grows with what it reads, not with the corpus
    sample_pairs: int = 200_000
    # with init_from, a side in another language than the parent's: auto (whichever of the parent's
    # SentencePiece model and a new one cuts the training text into fewer pieces), parent, or new
    # (a side in the parent's language always keeps the parent's, unless new)
    parent_vocab: Literal["auto", "parent", "new"] = "auto"


@dataclass
class ModelConfig:
    # the model family: rnn (Bahdanau's or Luong's recurrent encoder-decoder) or transformer
    # (Vaswani et al.: attention only); each reads its own keys below and the shared ones
    arch: ArchName = "rnn"
    embed_dim: int = 256  # source and target embedding size (the Transformer's width throughout)
    encoder_hidden: int = 256  # per direction; encoder states are 2x this wide
    encoder_layers: int = 1  # stacked bidirectional encoder layers (Transformer: encoder layers)
    decoder_hidden: int = 256  # the decoder cell's size
    decoder_layers: int = 1  # stacked cells; the top layer's h queries the attention (Transformer: decoder layers)
    rnn: CellName = "gru"  # the recurrent cell of encoder and decoder: gru | lstm
    attention: AttentionName = "bahdanau"  # luong-* use Luong's decoder order; none = Cho et al.
    attention_window: WindowName = "global"  # global, or Luong et al.'s local-m / local-p windows (not with none)
    window_width: int = 5  # D: local windows cover [p_t - D, p_t + D]
    input_feeding: bool = False  # Luong: feed the attentional vector h̃_{t-1} into the next step
    bridge: Literal["backward", "both"] = "backward"  # s_0 from ←h_1 (Bahdanau) or from [→h_S; ←h_1]
    gumbel_temperature: float = 1.0  # hard attention's Gumbel-softmax temperature in training
    attention_dim: int = 256  # width of the additive (bahdanau, luong-concat, hard) scorer
    output_dim: int = 256  # width of the pre-softmax layer (Luong: of h̃_t)
    # the output layer shares the target embeddings (through a projection if widths differ)
    tie_embeddings: bool = False
    # a lexical model (Nguyen & Chiang, 2018): the attention-weighted source embeddings add their
    # own term to the logits, a shortcut from source words to target words for small corpora
    lexical: bool = False
    dropout: float = 0.2  # dropout on embeddings, between stacked layers and before the output layer
    encoder_output_dropout: float = 0.0  # dropout on the encoder's outputs h_j, the attention's memory (training only)
    # How the encoder's RNN is run (same weights, same outputs): packed sequences, or one padded
    # call per direction with each sentence reversed within its length (docs/benchmarks.md);
    # auto: padded on Apple's MPS (packed sequences have open faults there), packed elsewhere
    rnn_input: RnnInput = "auto"
    # Transformer only (nmt/model/transformer.py): pre-norm layers, embed_dim wide
    heads: int = 4  # attention heads in every layer; embed_dim must divide by it
    ff_dim: int = 1024  # the feed-forward network's inner width
    attention_dropout: float = 0.1  # dropout on the attention weights (dropout: on embeddings and residuals)
    activation_dropout: float = 0.0  # dropout inside the feed-forward network, after its ReLU
    positions: Literal["sinusoidal", "learned"] = "sinusoidal"  # how a position is encoded: a function or a table


# The model's widths, which recipes set together (nmt init's `width`, nmt tune's model.width).
MODEL_WIDTHS = ("embed_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "output_dim")


@dataclass
class TrainConfig:
    epochs: int = 20  # the most epochs (train.max_minutes often ends a run first)
    batch_size: int = 64  # sentences per batch (with batch_tokens: the most sentences per batch)
    batch_tokens: int = 0  # > 0: also cap each batch at this many padded tokens (longest side x sentences)
    learning_rate: float = 1e-3  # Adam's learning rate
    clip_grad_norm: float = 1.0  # gradient norm clipping (0 = off)
    teacher_forcing: float = 1.0  # probability of feeding the gold previous token
    label_smoothing: float = 0.0  # label smoothing of the cross-entropy
    word_dropout: float = 0.0  # probability of replacing a source / target input token by <unk> in training
    ema_decay: float = 0.0  # > 0: also keep an exponential moving average of the weights; best of both kept
    subword_sampling: float = 0.0  # > 0: a fresh SentencePiece segmentation each epoch with this alpha (0 = off)
    max_len: int = 50  # training pairs longer than this (in subwords, either side) are skipped
    # with related corpora (data.related): each epoch draws this many of their pairs afresh beside
    # all of this pair's (0 = all of them every epoch): more of the related corpus seen in a budget
    related_per_epoch: int = 0
    # with related corpora: from the first epoch that starts past this share of the run (budget or
    # epochs), this pair's pairs only, a last phase on the user's pair alone (1 = related to the end)
    related_until: float = 1.0
    # > 0: the weight of a loss pulling the aligning attention toward eflomal's links of the
    # training pairs (guided alignment; the `align` extra; 0 = off)
    guided_alignment: float = 0.0
    # early stopping: validations without a better dev BLEU, an equal one at a lower dev loss
    # counting as better (0 = none: train to the end)
    patience: int = 5
    max_minutes: float = 0.0  # wall-clock budget for the whole run, resumes included (0 = none); `--minutes`
    # budget: linear decay over the run, i.e. train.max_minutes or train.epochs, whichever ends it first;
    # inverse_sqrt: Vaswani et al.'s, falling as 1/sqrt(step) after train.lr_warmup steps
    lr_schedule: Literal["plateau", "budget", "inverse_sqrt"] = "plateau"
    lr_warmup: int = 0  # the first N steps ramp the learning rate up linearly (a Transformer needs it; 0 = none)
    lr_hold: float = 0.0  # budget schedule: share of the run at the full learning rate before the decay
    lr_patience: int = 1  # plateau: validations without a better dev BLEU (as patience) before the LR is reduced
    lr_factor: float = 0.5  # plateau: the learning rate is multiplied by this when dev BLEU stalls
    min_lr: float = 1e-5  # plateau: the learning rate never goes below this
    seed: int = 42  # seed of initialisation, dropout and batch order
    # > 1: train this many models side by side (seeds seed, seed+1, ...), the threads shared among
    # them, in <run_dir>/member-K; translation and evaluation ensemble their best checkpoints
    # (nmt/train/members.py)
    members: int = 1
    device: DeviceName = "auto"  # auto: a CUDA GPU, then Apple's MPS, then the CPU (--device overrides)
    # auto: bf16 autocast on CUDA GPUs with native bf16, fp16 + loss scaling on older ones, else float32
    precision: PrecisionName = "auto"
    deterministic: bool = False  # the same bits on a GPU too, a resume included (costs GPU speed)
    # CPU threads: auto measures the step rate at 1, 2, 4, ... threads at the start and again while the
    # run goes on (another program's load can make fewer threads faster), and keeps the fastest; a
    # number pins it (0 = torch's default), never above the cores this process may use. Members and
    # torchrun processes share the cores among them; OMP_NUM_THREADS, where set, caps auto.
    threads: ThreadSetting = "auto"
    # torch.compile the decoder's per-step body: none | default | reduce-overhead (+ CUDA graphs on a GPU)
    compile: Literal["none", "default", "reduce-overhead"] = "none"
    loader_workers: int = -1  # processes collating batches ahead of training (-1 = auto: 2 on a GPU, 0 on CPU)
    checkpoint_every: int = 0  # also checkpoint every N steps inside an epoch (0 = only after each epoch)
    # also validate (and checkpoint) every N steps inside an epoch, for short runs and large corpora
    # (0 = after each epoch only); patience and lr_patience count these validations too
    validate_every: int = 0
    checkpoint_minutes: float = 10.0  # also checkpoint inside an epoch after this many minutes without one (0 = off)
    ddp_timeout_minutes: float = 60.0  # under torchrun: how long a collective waits for the other processes
    # step checkpoints kept (last.pt and best.pt are links to two of them): `nmt average` wants more, a
    # disk fewer; each is the size of the model and its optimizer state (about 38 MB for eng-mar)
    keep_checkpoints: int = 1
    max_nonfinite: int = 10  # stop after this many steps in a row with a non-finite loss or gradient
    tensorboard: bool = False  # also log scalars and attention heatmaps to <run_dir>/tensorboard
    probes: int = 3  # the first N dev sentences' attention at each epoch's end, in <run_dir>/timeline.jsonl (0 = off)
    # > 0: at each validation, the attention's agreement with eflomal (AER) on the first N dev pairs,
    # in timeline.jsonl and the log: alignment forming (the `align` extra; 0 = off)
    probe_alignment: int = 0
    # registered callbacks told of the run (nmt/train/callbacks.py): csv writes <run_dir>/metrics.csv;
    # a plugin registers its own
    callbacks: list[str] = field(default_factory=list)
    # validate on a fixed seeded sample of this many distinct dev sources and their pairs (0 = all of them)
    validation_sentences: int = 0
    # with init_from: parts kept as the parent left them, any of src_embeddings, tgt_embeddings,
    # embeddings, encoder, bridge, attention, decoder
    freeze: list[str] = field(default_factory=list)


@dataclass
class DecodeConfig:
    beam_size: int = 5  # 1 = greedy
    # how a batch is searched (nmt/decoding/search.py): auto is greedy at beam 1 and beam search
    # above; greedy or beam always; a plugin may register its own
    strategy: StrategyName = "auto"
    length_penalty: float = 1.0  # alpha: hypotheses ranked by log-prob / lp(length), lp = length**alpha
    length_form: Literal["power", "gnmt"] = "power"  # lp: length**alpha, or ((5 + length) / 6)**alpha (Wu et al.)
    coverage_penalty: float = 0.0  # beta of Wu et al.'s coverage penalty in beam search (0 = off)
    no_repeat_span: int = 0  # > 0: no span of up to this many subwords may repeat back to back (0 = off)
    max_len_ratio: float = 1.5  # output limit: ratio * source length + max_len_offset
    max_len_offset: int = 10  # output limit: + this many subwords
    batch_size: int = 64  # sentences per decoding batch
    batch_tokens: int = (
        4000  # and at most this many padded source tokens (0 = no cap): long files never run out of memory
    )
    max_input_len: int = 250  # longer inputs are clipped to this many subwords (with a warning)
    # > 1: minimum Bayes risk decoding (nmt/decoding/mbr.py) over this many beam candidates: the one the
    # others agree with most (translate and evaluate; the page and the lab show the beam's own best)
    mbr: int = 0
    mbr_utility: Literal["chrf", "bleu"] = "chrf"  # the sentence-level agreement MBR maximises

    def with_beam(self, beam_size: int | None) -> DecodeConfig:
        """These settings at another beam size (None: these): how a request's or a command's beam
        reaches search, inside the settings, never beside them."""
        return (
            self if beam_size is None or beam_size == self.beam_size else dataclasses.replace(self, beam_size=beam_size)
        )


@dataclass
class TuneConfig:
    """``nmt tune``: a study of recipes for this config's corpus, machine and budget (nmt/pipelines/tune.py)."""

    trials: int = 20  # trials in the study (--trials)
    trial_fraction: float = 0.3  # each trial trains for this share of train.max_minutes
    confirm: int = 2  # the best N trials are trained again at the full budget, with each seed
    seeds: list[int] = field(default_factory=lambda: [1, 2])  # the confirmation's seeds
    workers: int = 0  # trials at once on this machine (0 = auto: measured, one thread each or all threads)
    sampler_seed: int = 0  # the TPE sampler's seed
    # config key -> {low: x, high: y[, log: true]} or {choices: [...]}; empty: the default space
    # (docs/tuning.md); model.width sets every width of the model at once
    space: dict = field(default_factory=dict)


@dataclass
class Config:
    run_dir: str = ""  # default: runs/<config file name without extension>
    # modules imported before the rest is checked: your attentions, cells, engines, callbacks
    # (nmt/core/plugins.py); --plugin on the command line adds to it
    plugins: list[str] = field(default_factory=list)
    # start from a model you have: a run directory (its best checkpoint) or a package (nmt export);
    # continued training, fine-tuning or transfer (nmt/runtime/parent.py); --init-from on prepare and train
    init_from: str = ""
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    tune: TuneConfig = field(default_factory=TuneConfig)

    @property
    def prepared_dir(self) -> Path:
        return Path(self.data.prepared_dir) if self.data.prepared_dir else Path(self.run_dir) / "data"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# Keys a config file must state explicitly: the run is meaningless without them.
REQUIRED_KEYS = ("run_dir", "train.epochs", "train.batch_size", "decode.beam_size")

# Range checks beyond the type: dotted key -> (predicate, description of what is allowed).
_POSITIVE = (lambda v: v > 0, "a number > 0")
_NON_NEGATIVE = (lambda v: v >= 0, "a number >= 0")
_PROBABILITY = (lambda v: 0.0 <= v <= 1.0, "a number between 0 and 1")


def _between(low: float, high: float) -> tuple[Any, str]:
    """A closed range. The upper bounds keep a shared package's config from sizing a model (or a
    search) far beyond anything trained here: a config travels with the weights it describes."""
    return (lambda v: low <= v <= high, f"a number from {low} to {high}")


MAX_WIDTH = 4096  # embeddings, hidden states, attention and output layers
MAX_LAYERS = 8
# a language code names prepared files and a package's tokenizers: it must stay one path part
LANGUAGE_CODE = re.compile(r"[A-Za-z0-9_-]+")
_LANGUAGE = (lambda v: LANGUAGE_CODE.fullmatch(v) is not None, "a language code: letters, digits, '_' and '-' only")
_RANGES: dict[str, tuple[Any, str]] = {
    "data.src_lang": _LANGUAGE,
    "data.tgt_lang": _LANGUAGE,
    "data.max_pairs": _NON_NEGATIVE,
    "data.max_chars": _POSITIVE,
    "data.dev_size": _POSITIVE,
    "data.test_size": _POSITIVE,
    "data.max_carved": _NON_NEGATIVE,
    "data.oversample": _between(1, 100),
    "data.related_pairs": _NON_NEGATIVE,
    "tokenizer.src_vocab_size": (lambda v: 300 <= v <= 100_000, "an integer from 300 (256 byte pieces) to 100000"),
    "tokenizer.tgt_vocab_size": (lambda v: 300 <= v <= 100_000, "an integer from 300 (256 byte pieces) to 100000"),
    "tokenizer.sample_pairs": (lambda v: v >= 1000, "an integer >= 1000"),
    "tokenizer.character_coverage": (lambda v: 0.9 <= v <= 1.0, "a number between 0.9 and 1.0"),
    "model.embed_dim": _between(1, MAX_WIDTH),
    "model.encoder_hidden": _between(1, MAX_WIDTH),
    "model.encoder_layers": _between(1, MAX_LAYERS),
    "model.decoder_hidden": _between(1, MAX_WIDTH),
    "model.decoder_layers": _between(1, MAX_LAYERS),
    "model.attention_dim": _between(1, MAX_WIDTH),
    "model.window_width": _between(1, 1000),
    "model.gumbel_temperature": _POSITIVE,
    "model.output_dim": _between(1, MAX_WIDTH),
    "model.dropout": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    "model.encoder_output_dropout": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    "model.heads": _between(1, 64),
    "model.ff_dim": _between(1, 4 * MAX_WIDTH),
    "model.attention_dropout": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    "model.activation_dropout": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    "train.epochs": _POSITIVE,
    "train.batch_size": _POSITIVE,
    "train.batch_tokens": _NON_NEGATIVE,
    "train.learning_rate": _POSITIVE,
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
    "train.max_len": _POSITIVE,
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
    "train.ddp_timeout_minutes": _POSITIVE,
    "train.keep_checkpoints": _POSITIVE,
    "train.max_nonfinite": _POSITIVE,
    "train.probes": _NON_NEGATIVE,
    "train.probe_alignment": _NON_NEGATIVE,
    "train.freeze": (lambda v: set(v) <= set(FREEZE_PARTS), "a list of: " + ", ".join(FREEZE_PARTS)),
    "tune.trials": _POSITIVE,
    "tune.trial_fraction": (lambda v: 0.0 < v <= 1.0, "a number in (0, 1]"),
    "tune.confirm": _NON_NEGATIVE,
    "tune.seeds": (lambda v: len(v) > 0, "a list of at least one integer"),
    "tune.workers": _NON_NEGATIVE,
    "decode.beam_size": _between(1, 64),
    "decode.length_penalty": _NON_NEGATIVE,
    "decode.coverage_penalty": _NON_NEGATIVE,
    "decode.no_repeat_span": _between(0, 50),
    # the output limit (ratio x source length + offset): a package's settings bound what one request can cost
    "decode.max_len_ratio": (lambda v: 0 < v <= 10, "a number > 0 and <= 10"),
    "decode.max_len_offset": _between(0, 1000),
    "decode.batch_size": _POSITIVE,
    "decode.batch_tokens": _NON_NEGATIVE,
    "decode.max_input_len": _between(1, 10_000),
    "decode.mbr": (
        lambda v: v == 0 or 2 <= v <= 64,
        "0 (off) or an integer >= 2 and <= 64 (MBR's candidates)",
    ),
}


def _allowed(tp: Any) -> tuple:
    """The values a Literal field allows, or the keys of the registry an Annotated name reads."""
    if typing.get_origin(tp) is Annotated:
        return tuple(tp.__metadata__[0])
    return typing.get_args(tp)


def _describe_type(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_describe_type(member) for member in typing.get_args(tp))
    if typing.get_origin(tp) in (Literal, Annotated):
        # strings as Python writes them, booleans as YAML does: one of 'auto', true, false
        return "one of " + ", ".join(repr(a) if isinstance(a, str) else str(a).lower() for a in _allowed(tp))
    if typing.get_origin(tp) is list:
        return "a list of integers" if typing.get_args(tp)[0] is int else "a list of strings"
    if tp is dict:
        return "a mapping"
    if typing.get_origin(tp) is dict:
        return "a mapping of language to file (or, for a target, to a list of files)"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against the field type ``tp``; return it (ints widen to floats)."""
    ok = False
    if typing.get_origin(tp) in (typing.Union, types.UnionType):  # the first member that takes it
        for member in typing.get_args(tp):
            with contextlib.suppress(NmtError):
                value, ok = _coerce("", value, member), True
                break
    elif typing.get_origin(tp) in (Literal, Annotated):  # by type too: 1 is not true
        ok = any(value == allowed and type(value) is type(allowed) for allowed in _allowed(tp))
    elif typing.get_origin(tp) is list:
        item_type = typing.get_args(tp)[0]
        ok = isinstance(value, list) and all(
            isinstance(item, item_type) and not (item_type is int and isinstance(item, bool)) for item in value
        )
    elif tp is dict:  # a free mapping (tune.space), checked where it is read
        ok = isinstance(value, dict) and all(isinstance(key, str) for key in value)
    elif typing.get_origin(tp) is dict:
        ok = isinstance(value, dict) and all(
            isinstance(k, str) and (isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)))
            for k, v in value.items()
        )
    elif tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        if isinstance(value, str):  # YAML 1.1 reads 5e-4 (no dot) as a string
            with contextlib.suppress(ValueError):
                value = float(value)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and not math.isfinite(value):  # YAML's .inf and .nan: no budget, rate or size is infinite
            raise NmtError(f"Config key '{key}': got {value!r}, expected a finite number.")
        value = float(value) if ok else value
    elif tp is str:
        ok = isinstance(value, str)
    if not ok:
        raise NmtError(f"Config key '{key}': got {value!r}, expected {_describe_type(tp)}.")
    check = _RANGES.get(key)
    if check is not None and not check[0](value):
        raise NmtError(f"Config key '{key}': got {value!r}, expected {check[1]}.")
    return value


def _unknown_key_message(key: str, valid: list[str], prefix: str) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    hint = f" Did you mean '{prefix}{close[0]}'?" if close else ""
    where = f"section '{prefix[:-1]}'" if prefix else "the top level"
    return f"Unknown config key '{prefix}{key}'.{hint} Valid keys in {where}: {', '.join(valid)}."


def drop_removed_keys(raw: dict, trained: bool = False) -> None:
    """Take the keys removed after they measured as losses (``nmt/measured.yaml``) out of ``raw``,
    in place: those at their old default silently (every run's saved config.yaml wrote them), or
    any value for a ``trained`` run's own config (they shaped its training only); one set to
    anything else is refused, with what it measured, instead of "unknown key"."""
    for dotted, removed in removed_keys().items():
        section, name = dotted.split(".")
        values = raw.get(section)
        if not isinstance(values, dict) or name not in values:
            continue
        if values[name] != removed.default and not trained:
            raise NmtError(
                f"Config key '{dotted}' was removed: {removed.why} (docs/{removed.page}). Delete it from the config "
                "(a run trained with it still translates: its own config.yaml is read without it)."
            )
        del values[name]


def _build(cls: type, raw: Any, prefix: str) -> Any:
    if not isinstance(raw, dict):
        what = f"section '{prefix[:-1]}'" if prefix else "the config file"
        raise NmtError(f"Config {what} must be a mapping of keys to values, got {raw!r}.")
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in fields:
            raise NmtError(_unknown_key_message(str(key), fields, prefix))
    kwargs = {}
    for name in fields:
        if name not in raw:
            continue
        tp = hints[name]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            kwargs[name] = _build(tp, raw[name] if raw[name] is not None else {}, f"{prefix}{name}.")
        else:
            kwargs[name] = _coerce(f"{prefix}{name}", raw[name], tp)
    return cls(**kwargs)


def check_value(dotted: str, value: Any) -> Any:
    """``value`` checked as config key ``dotted`` (``section.key``) would be, on its own: its type
    and range, not how it combines with the other keys (a clear NmtError naming the key)."""
    section, name = dotted.split(".", 1)
    section_type = typing.get_type_hints(Config, include_extras=True)[section]
    return _coerce(dotted, value, typing.get_type_hints(section_type, include_extras=True)[name])


def _has_key(raw: dict, dotted: str) -> bool:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def parse_override(text: str) -> tuple[str, Any]:
    """Parse ``KEY=VALUE`` (dotted key; value as a YAML scalar)."""
    if "=" not in text:
        raise NmtError(f"--set expects KEY=VALUE (e.g. train.batch_size=32), got {text!r}.")
    key, value = text.split("=", 1)
    key = key.strip()
    if not key:
        raise NmtError(f"--set expects KEY=VALUE with a non-empty key, got {text!r}.")
    try:
        return key, yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError as exc:
        raise NmtError(f"--set {key}: cannot parse {value!r} as a YAML value ({exc}).") from None


def apply_overrides(raw: dict, overrides: list[str]) -> None:
    for text in overrides:
        key, value = parse_override(text)
        node = raw
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value


def check_model_combination(model: ModelConfig) -> None:
    """Refuse model settings that each make sense alone but not together: the family's rules
    (its registry entry's ``check_model``; what an attention can do is on the attention's entry)."""
    ARCHITECTURES[model.arch].check_model(model)


def keys_not_read(model: ModelConfig) -> list[str]:
    """The keys of another model family set away from their defaults (``model.attention:
    luong-concat`` on a Transformer): the model does not read them, and the training log says so.
    Not refused, so that ``--set model.arch=transformer`` tries a Transformer on an RNN's config.
    A width equal to ``embed_dim`` is not counted (nmt tune's ``model.width`` sets them all)."""
    own = set(ARCHITECTURES[model.arch].config_keys)
    defaults = ModelConfig()
    unread = []
    for name in ARCHITECTURES:
        for key in ARCHITECTURES[name].config_keys:
            value = getattr(model, key)
            if key in own or key in unread or value == getattr(defaults, key):
                continue
            if key in MODEL_WIDTHS and value == model.embed_dim:
                continue
            unread.append(key)
    return unread


def config_from_dict(raw: dict, default_run_dir: str = "", trained: bool = False) -> Config:
    """Validate a raw mapping into a ``Config``. Required keys must be present. The plugins it
    names are imported first, if this command trusts them (nmt/core/plugins.py): the names they
    register are then valid values. ``trained``: a trained run's own config (removed keys are
    dropped whatever they say: ``drop_removed_keys``)."""
    if isinstance(raw, dict):
        drop_removed_keys(raw, trained)
    if isinstance(raw, dict) and "plugins" in raw:
        load_config_plugins(_coerce("plugins", raw["plugins"], list[str]), "Config key 'plugins'")
    config = _build(Config, raw, "")
    for key in REQUIRED_KEYS:
        if key == "run_dir" and default_run_dir:
            continue
        if not _has_key(raw, key):
            raise NmtError(f"Config key '{key}' is required but missing. Required keys: {', '.join(REQUIRED_KEYS)}.")
    check_model_combination(config.model)
    check_schedule(config)
    for name in config.train.callbacks:
        if name not in CALLBACKS:
            raise NmtError(
                f"Config key 'train.callbacks': {name!r} is not a registered callback; registered: "
                f"{', '.join(CALLBACKS) or 'none'} (a plugin registers its own: nmt/core/plugins.py)."
            )
    if not config.run_dir:
        config.run_dir = default_run_dir
    check_data_sources(config.data)
    check_related_schedule(config)
    check_guided_alignment(config)
    if config.tokenizer.joint and config.tokenizer.src_vocab_size != config.tokenizer.tgt_vocab_size:
        raise NmtError(
            "tokenizer.joint=true trains one vocabulary for both languages: set tokenizer.src_vocab_size and "
            f"tokenizer.tgt_vocab_size to its size (got {config.tokenizer.src_vocab_size} and "
            f"{config.tokenizer.tgt_vocab_size})."
        )
    return config


def check_schedule(config: Config) -> None:
    """The training settings a model family or a schedule cannot take."""
    train = config.train
    if train.lr_schedule == "inverse_sqrt" and not train.lr_warmup:
        raise NmtError(
            "Config key 'train.lr_schedule': inverse_sqrt falls as 1/sqrt(step) from the end of the warm-up: "
            "set 'train.lr_warmup' to its length in steps (e.g. 1000)."
        )
    ARCHITECTURES[config.model.arch].check_training(config)  # and the family's own (its registry entry's)


def check_related_schedule(config: Config) -> None:
    """train.related_per_epoch and train.related_until choose among the prepared pairs of a model
    of several targets: they need related corpora, and the prepared segmentation."""
    train = config.train
    asked = {"related_per_epoch": train.related_per_epoch > 0, "related_until": train.related_until < 1.0}
    chosen = [key for key, on in asked.items() if on]
    if not chosen:
        return
    keys = " and ".join(f"'train.{key}'" for key in chosen)
    if not config.data.related:
        raise NmtError(
            f"Config key {keys} chooses which related pairs an epoch trains on, but 'data.related' names no related "
            "corpus: set data.related (e.g. {mr: data/eng-mar/mar.txt}) or leave the key out."
        )
    if train.subword_sampling:
        raise NmtError(
            f"Config key {keys} works on the prepared segmentation, not with 'train.subword_sampling': set one of them."
        )


def check_guided_alignment(config: Config) -> None:
    """Guided alignment reads eflomal's links of the prepared training pairs, word by word: it
    needs the prepared segmentation and sources without a target's tag."""
    if not config.train.guided_alignment:
        return
    clash = {"train.subword_sampling": config.train.subword_sampling, "data.related": config.data.related}
    chosen = [key for key, value in clash.items() if value]
    if chosen:
        raise NmtError(
            f"Config key 'train.guided_alignment' guides the attention with links of the prepared training pairs, "
            f"not with '{chosen[0]}': set one of them."
        )


def check_data_sources(data: DataConfig) -> None:
    """One kind of training data; languages that name the direction; given sets that name both."""
    src, tgt = data.src_lang, data.tgt_lang
    if src == tgt:
        raise NmtError(
            f"Config keys 'data.src_lang' and 'data.tgt_lang' are both {src!r}: "
            "they name the direction and the prepared files, and must differ."
        )
    if data.synthetic_from and not data.distill_from:
        raise NmtError(
            "Config key 'data.synthetic_from' names sentences for a teacher to translate: set 'data.distill_from' "
            "to the teacher (a run directory or a package), and 'data.distill: keep' to keep the human targets."
        )
    for lang, path in data.related.items():
        if lang in (src, tgt) or not LANGUAGE_CODE.fullmatch(lang) or not isinstance(path, str):
            raise NmtError(
                f"Config key 'data.related': {lang!r} -> {path!r}: expected a target language other than {src!r} "
                f"and {tgt!r} (letters, digits, '-' or '_') and one TSV file or Anki zip, e.g. "
                "{mr: data/eng-mar/mar.txt}."
            )
    if bool(data.path) == bool(data.train):
        raise NmtError(
            "Config: give the training data as 'data.path' (a TSV file or an Anki zip) or as 'data.train' "
            f"(line-aligned files, {{{src}: FILE, {tgt}: FILE}}), " + ("not both." if data.path else "one of them.")
        )
    if data.columns:
        if not data.path:
            raise NmtError("Config key 'data.columns' names the columns of a TSV file, but 'data.path' is not set.")
        for lang in data.columns:
            if lang not in (src, tgt):
                raise NmtError(
                    f"Config key 'data.columns': {lang!r} is neither data.src_lang ({src!r}) nor data.tgt_lang "
                    f"({tgt!r}). Allowed values: {src}, {tgt}."
                )
        if sorted(data.columns) != sorted([src, tgt]):
            raise NmtError(
                f"Config key 'data.columns': got {data.columns}, expected both languages once, e.g. [{src}, {tgt}] "
                f"or [{tgt}, {src}] (a third TSV column is read as attribution)."
            )
    for key in ("train", "dev", "test"):
        files: dict = getattr(data, key)
        if not files:
            continue
        if set(files) != {src, tgt}:
            raise NmtError(
                f"Config key 'data.{key}': got languages {sorted(files)}, expected exactly {src} (source) and "
                f"{tgt} (target), e.g. {{{src}: {key}.{src}, {tgt}: {key}.{tgt}}}."
            )
        if not isinstance(files[src], str):
            raise NmtError(f"Config key 'data.{key}.{src}': the source side is one file, got a list.")
        if key == "train" and not isinstance(files[tgt], str):
            raise NmtError(
                f"Config key 'data.train.{tgt}': training data has one target file (several references "
                "are for data.dev and data.test)."
            )
        if isinstance(files[tgt], list) and not files[tgt]:
            raise NmtError(f"Config key 'data.{key}.{tgt}': an empty list of reference files.")


def load_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Load, override and validate a YAML config. ``run_dir`` defaults to runs/<file stem>."""
    path = Path(path)
    if not path.is_file():
        raise NmtError(f"Config file not found: {path}")
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        raise NmtError(f"Config file {path} is not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise NmtError(f"Config file {path} is not UTF-8 text: {exc}") from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise NmtError(f"Config file {path} must hold a mapping of sections, got {type(raw).__name__}.")
    apply_overrides(raw, overrides or [])
    if requested_plugins():  # --plugin: as if the file listed them, so the run's config.yaml keeps them
        listed = raw["plugins"] if isinstance(raw.get("plugins"), list) else []
        raw["plugins"] = listed + [name for name in requested_plugins() if name not in listed]
    config = config_from_dict(raw, default_run_dir=str(Path("runs") / path.stem))
    if is_run_config(path) and Path(config.run_dir).resolve() != path.parent.resolve():
        config.run_dir = str(path.parent)  # a run's own config.yaml: the run is where it is, from any folder
    return config


def is_run_config(path: Path) -> bool:
    """Whether ``path`` is the config.yaml a run saved beside its checkpoints (its own, or its members')."""
    folder = path.parent
    return path.name == "config.yaml" and (
        (folder / "checkpoints").is_dir() or any(folder.glob("member-*/checkpoints"))
    )


def decoding_settings(
    decode: DecodeConfig, overrides: list[str] | None = None, beam_size: int | None = None, what: str = "--model"
) -> DecodeConfig:
    """``decode`` with ``--set decode.KEY=VALUE`` overrides and ``--beam-size``, each checked as
    the config would check it: the one place a command's decoding settings are made, for a model
    whose config is fixed (a package: its model, tokenizers and training cannot change, so any
    other key is refused, naming ``what`` carries them)."""
    changes: dict[str, Any] = {}
    for text in overrides or []:
        key, value = parse_override(text)
        section, _, name = key.partition(".")
        if section != "decode" or not name:
            raise NmtError(
                f"--set {key}: {what} carries its own model, tokenizers and training; only its decoding settings "
                f"(decode.*: {', '.join(f.name for f in dataclasses.fields(DecodeConfig))}) may be set."
            )
        if name not in {f.name for f in dataclasses.fields(DecodeConfig)}:
            raise NmtError(_unknown_key_message(name, [f.name for f in dataclasses.fields(DecodeConfig)], "decode."))
        changes[name] = check_value(key, value)
    if beam_size is not None:
        changes["beam_size"] = check_value("decode.beam_size", beam_size)
    return dataclasses.replace(decode, **changes)


def save_config(config: Config, path: str | Path) -> None:
    from nmt.core.fileio import write_text_atomic

    write_text_atomic(path, yaml.safe_dump(config.to_dict(), sort_keys=False, allow_unicode=True))
