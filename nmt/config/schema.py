"""Typed configuration: the sections of one YAML file as dataclasses, each field with its type,
its default and a comment that says what it holds (the generated reference reads them).

What else a config needs lives beside this module: ``ranges`` (each key's allowed values),
``parsing`` (a mapping and ``--set`` into these dataclasses, naming any key it refuses),
``checks`` (the rules across keys) and ``files`` (a YAML file in and out).
"""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from nmt.core.device import DEVICE_NAMES, PRECISION_NAMES
from nmt.core.registry import ARCHITECTURES, STRATEGIES
from nmt.core.threads import ThreadSetting

# Allowed values come from the registries, read when a config is validated: a new family or
# decoding strategy is one entry there, nothing here.
ArchName = Annotated[str, ARCHITECTURES]
StrategyName = Annotated[str, STRATEGIES]
DeviceName = Literal[DEVICE_NAMES]  # type: ignore[valid-type]
PrecisionName = Literal[PRECISION_NAMES]  # type: ignore[valid-type]
HeaderMode = Literal["auto", True, False]


# A given dev/test set: {source language: file, target language: file or [files]} (several references).
LanguageFiles = dict[str, str | list[str]]


@dataclass
class DataConfig:
    # Training data, one of two kinds (docs/tutorials/your-data.md):
    path: str = ""  # a TSV file (Anki/Tatoeba or any: one pair per line) or an Anki zip
    train: LanguageFiles = field(default_factory=dict)  # or line-aligned text files, {language: file}
    # the training data's word links, made once (Pharaoh i-j, one line per line of data.path, as
    # scripts/dev/corpus_links.py writes them with eflomal): guided alignment and its probe read them
    # instead of running eflomal (data/eng-mar/mar.links ships with the example corpus)
    links: str = ""
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
    # this pair, or a list of packages ensembled, of any families) translates the training sources, and its
    # translations become the training targets
    distill_from: str | list[str] = ""
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
    # a language-code piece every source begins with, e.g. M2M100's __en__ or NLLB's eng_Latn (empty: none);
    # nmt init --from-hf sets both codes for the models that read them
    src_code: str = ""
    # a language-code piece every target begins with: translations start with it, never searched
    # (NLLB's and M2M100's forced first token, e.g. hin_Deva or __hi__); empty: none
    tgt_code: str = ""


@dataclass
class ModelConfig:
    """The keys every model family reads. A family's own keys are its settings class's, a subclass
    of this one registered with the family (``TranslationModel.settings``: nmt/model/rnn/settings.py,
    nmt/model/transformer/settings.py, a plugin's); in YAML they sit beside these in ``model``."""

    # the model family: rnn (Bahdanau's or Luong's recurrent encoder-decoder) or transformer
    # (Vaswani et al.: attention only); each reads the keys below and its own
    arch: ArchName = "rnn"
    embed_dim: int = 256  # source and target embedding size (the Transformer's width throughout)
    encoder_layers: int = 1  # stacked encoder layers (the RNN's: bidirectional)
    decoder_layers: int = 1  # stacked decoder layers (the RNN's top layer's h queries the attention)
    # the output layer shares the target embeddings (through a projection if widths differ)
    tie_embeddings: bool = False
    dropout: float = 0.2  # dropout on embeddings, between stacked layers and before the output layer
    # not a key: another family's keys the config set away from their defaults, which its model
    # does not read (parsing gives them; ``unread`` keeps them for the training log)
    others: InitVar[dict[str, Any] | None] = None

    # the keys `model.width` sets together (nmt init's `width`, nmt tune's model.width)
    widths: ClassVar[tuple[str, ...]] = ("embed_dim",)
    # keys that change neither the weights' shapes nor their meaning: a checkpoint or package
    # trained with another value loads
    free_keys: ClassVar[tuple[str, ...]] = ("dropout",)
    # each key's allowed values beyond its type (the shared keys': nmt/config/ranges.py's RANGES)
    ranges: ClassVar[dict[str, tuple[Any, str]]] = {}

    def __post_init__(self, others: dict[str, Any] | None) -> None:
        self.unread: dict[str, Any] = dict(others or {})

    def keys(self) -> dict[str, Any]:
        """The model section as YAML writes it: the shared keys, then the family's own."""
        return dataclasses.asdict(self)


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
    # (nmt/training/members.py)
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
    # registered callbacks told of the run (nmt/training/callbacks.py): csv writes <run_dir>/metrics.csv;
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
    model: ModelConfig = field(default_factory=lambda: default_model())
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    tune: TuneConfig = field(default_factory=TuneConfig)

    @property
    def prepared_dir(self) -> Path:
        return Path(self.data.prepared_dir) if self.data.prepared_dir else Path(self.run_dir) / "data"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_model(arch: str = ModelConfig.arch) -> ModelConfig:
    """The settings of a model of family ``arch`` at their defaults (its registered settings class)."""
    return ARCHITECTURES[arch].settings()
