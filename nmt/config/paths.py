"""Where things live on disk: the prepared-data folder, a run directory, a model package.

Each layout is spelled out here once; everything else asks these objects for paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nmt.config.schema import Config
from nmt.core.fileio import refuse_links_under

SPLITS = ("train", "dev", "test")
CHECKPOINT_NAMES = ("best", "last")


@dataclass(frozen=True)
class PreparedPaths:
    """``nmt prepare``'s output folder (``data.prepared_dir``, default ``<run_dir>/data``)::

    {train,dev,test}.{src_lang,tgt_lang}   parallel pairs, one per line
    {train,dev,test}.attribution          the third TSV column (or empty), line-aligned
    {dev,test}.multi.tsv                  source<TAB>ref1[<TAB>ref2...]: every reference
    {train,dev,test}.{lang}.ids           the same sentences as token ids (nmt/data/shards.py)
    spm.{src_lang}.model, spm.{tgt_lang}.model   (tokenizer.joint: one spm.{src_lang}-{tgt_lang}.model)
    problems.txt                          every malformed line, as path:line: reason
    report.json, report.txt               counts, split sizes, length statistics
    manifest.json                         fingerprint of inputs + config, for reuse
    """

    root: Path
    src_lang: str
    tgt_lang: str
    joint: bool = False  # one SentencePiece model for both sides

    def _lang(self, side: str) -> str:
        return self.src_lang if side == "src" else self.tgt_lang

    def text(self, split: str, side: str) -> Path:
        return self.root / f"{split}.{self._lang(side)}"

    def ids(self, split: str, side: str) -> Path:
        return self.root / f"{split}.{self._lang(side)}.ids"

    def attribution(self, split: str) -> Path:
        return self.root / f"{split}.attribution"

    def multi(self, split: str) -> Path:
        return self.root / f"{split}.multi.tsv"

    def spm(self, side: str) -> Path:
        if self.joint:
            return self.root / f"spm.{self.src_lang}-{self.tgt_lang}.model"
        return self.root / f"spm.{self._lang(side)}.model"

    @property
    def problems(self) -> Path:
        return self.root / "problems.txt"

    @property
    def report(self) -> Path:
        return self.root / "report.json"

    @property
    def report_text(self) -> Path:
        return self.root / "report.txt"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    def outputs(self) -> list[Path]:
        files = [self.text(s, side) for s in SPLITS for side in ("src", "tgt")]
        files += [self.ids(s, side) for s in SPLITS for side in ("src", "tgt")]
        files += [self.attribution(s) for s in SPLITS]
        files += [self.multi("dev"), self.multi("test"), self.spm("src"), self.spm("tgt")]
        return files + [self.problems, self.report_text, self.report, self.manifest]


def prepared_paths(config: Config) -> PreparedPaths:
    return PreparedPaths(config.prepared_dir, config.data.src_lang, config.data.tgt_lang, config.tokenizer.joint)


def refuse_linked_prepared_dir(config: Config) -> None:
    """A prepared folder inside the run (the default, ``RUN/data``) that is a link, or lies behind
    one, is refused before anything is written: ``prepare --force`` wrote its files, and a lock,
    through a linked ``data/`` into the link's target. A ``data.prepared_dir`` named outside the
    run is the user's own choice of folder."""
    refuse_links_under(Path(config.run_dir), Path(config.prepared_dir))


@dataclass(frozen=True)
class RunPaths:
    """A run directory (``run_dir``)::

    config.yaml                 the resolved config
    data/                       prepared data (unless data.prepared_dir is elsewhere)
    checkpoints/step-<N>.pt     step checkpoints; last.pt and best.pt link to two of them
    checkpoints/averaged.pt     written by `nmt average`
    member-<K>/                 with train.members > 1: one run directory per member (no checkpoints/ here)
    train.log  metrics.jsonl  learning_curves.png  tensorboard/
    timeline.jsonl  timeline.png  the probe sentences' attention at every epoch's validation
    eval/<set>.hyp  eval/<set>.report.json
    """

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    def checkpoint(self, name: str) -> Path:
        """``best`` / ``last`` -> checkpoints/<name>.pt; anything else is taken as a path."""
        return self.checkpoints / f"{name}.pt" if name in CHECKPOINT_NAMES else Path(name)

    def member(self, k: int) -> RunPaths:
        """Member ``k`` (from 1) of a run of several (train.members): a run directory of its own."""
        return RunPaths(self.root / f"member-{k}")

    def trained_checkpoints(self) -> list[Path]:
        """The ``last`` checkpoints training wrote here: the run's own, or its members'."""
        found = [self.checkpoint("last"), *sorted(self.root.glob("member-*/checkpoints/last.pt"))]
        return [path for path in found if path.is_file()]

    def step_checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step-{step:08d}.pt"

    def step_checkpoints(self) -> list[Path]:
        """The step checkpoints, oldest first."""
        return sorted(self.checkpoints.glob("step-*.pt"))

    @property
    def averaged(self) -> Path:
        return self.checkpoints / "averaged.pt"

    @property
    def train_log(self) -> Path:
        return self.root / "train.log"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def learning_curves(self) -> Path:
        return self.root / "learning_curves.png"

    @property
    def timeline(self) -> Path:
        return self.root / "timeline.jsonl"

    @property
    def timeline_plot(self) -> Path:
        return self.root / "timeline.png"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tensorboard"

    @property
    def eval_dir(self) -> Path:
        return self.root / "eval"

    def writable(self, *paths: Path) -> None:
        """Refuse to write ``paths`` (by default the run's folders: checkpoints, eval, tensorboard)
        when one, or a folder between the run and it, is a symbolic link: a crafted run would have
        a command write elsewhere. Files are written by rename (a link is replaced, not followed)
        or appended without following one (nmt.core.fileio.appending)."""
        for path in paths or (self.checkpoints, self.eval_dir, self.tensorboard):
            refuse_links_under(self.root, path)

    def eval_hypotheses(self, name: str) -> Path:
        """One translation a line, in the order of ``eval_sources``'s lines."""
        return self.eval_dir / f"{name}.hyp"

    def eval_sources(self, name: str) -> Path:
        """The sources translated, one a line: each distinct source once, so its line is the
        hypothesis's (the prepared ``*.{src}`` files hold one line a pair, a source once per reference)."""
        return self.eval_dir / f"{name}.src"

    def eval_table(self, name: str) -> Path:
        """source<TAB>hypothesis<TAB>reference 1[<TAB>reference 2...]: what to read side by side."""
        return self.eval_dir / f"{name}.tsv"

    def eval_alignments(self, name: str, aligner: str) -> Path:
        """The word alignments of each (source, reference) pair of ``name``, in the Pharaoh format:
        the model's (``aligner`` "model") or the reference aligner's ("eflomal", written once)."""
        return self.eval_dir / f"{name}.{aligner}.align"

    @property
    def training_alignments(self) -> Path:
        """eflomal's links of each prepared training pair within train.max_len, in the Pharaoh
        format: what ``train.guided_alignment`` guides the attention toward (written once, so that
        a resumed run reads the same links)."""
        return self.root / "train.eflomal.align"

    @property
    def probe_alignments(self) -> Path:
        """eflomal's links of the dev pairs ``train.probe_alignment`` measures at each validation."""
        return self.root / "dev.eflomal.align"

    def eval_report(self, name: str) -> Path:
        return self.eval_dir / f"{name}.report.json"


def run_paths(config: Config) -> RunPaths:
    return RunPaths(Path(config.run_dir))


@dataclass(frozen=True)
class PackagePaths:
    """A model package (``nmt export``)::

    model.safetensors   config.yaml   spm.<src>.model   spm.<tgt>.model  (joint: spm.<src>-<tgt>.model)
    manifest.json       MODEL_CARD.md       timeline.jsonl (when the run recorded one)
    test.multi.tsv      (the test split with all its references, when the run had one)
    ctranslate2/        (nmt export --ctranslate2: nmt/export/ctranslate2_model.py)
    encoder.onnx        decoder_step.onnx   (nmt export --onnx: nmt/export/onnx_graphs.py)
    """

    root: Path

    @property
    def weights(self) -> Path:
        return self.root / "model.safetensors"

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def model_card(self) -> Path:
        return self.root / "MODEL_CARD.md"
