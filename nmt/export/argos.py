"""``nmt export --argos``: a Transformer run as an Argos Translate package (``.argosmodel``), the
format LibreTranslate installs: a zip of one folder holding ``metadata.json``, the CTranslate2
model (``model/``), ``sentencepiece.model`` and a README.

Two things the format assumes that this toolkit's models need not:

- **One SentencePiece model for both sides.** Argos encodes the source with it and turns the
  translation's pieces back into text with it too. A model with separate vocabularies ships the
  source's SentencePiece model with every target piece it lacks added as *unused* (pieces the
  encoder never produces, which decoding still spells): the source's segmentation is unchanged
  and the target's text comes out as the target's own model writes it.
- **Sentence splitting.** Argos splits input into sentences before translating, with a model it
  downloads on first use (MiniSBD) unless the package carries one. The package carries a spaCy
  pipeline whose rule-based sentencizer needs no download (``spacy/``, when spaCy is installed at
  export); Argos uses it with ``ARGOS_CHUNK_TYPE=SPACY`` (docs/portable.md).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from nmt import __version__
from nmt.core.errors import NmtError
from nmt.core.fileio import fsync_file
from nmt.data.languages import language_name
from nmt.export.package import export_model
from nmt.runtime.ctranslate2_engine import FOLDER
from nmt.runtime.loading import load_run, package_parts

SUFFIX = ".argosmodel"
ARGOS_VERSION = "1.9"  # the oldest Argos Translate whose package layout this is


def argos_path(out: Path) -> Path:
    return out if out.name.endswith(SUFFIX) else out.with_name(out.name + SUFFIX)


def export_argos(run_dir: Path, out: Path, checkpoint: str = "best", quantization: str = "int8") -> Path:
    """Write ``run_dir``'s ``checkpoint`` as an Argos Translate package at ``out`` (``.argosmodel``
    added when missing; it must not exist)."""
    path = argos_path(out)
    if path.exists():
        raise NmtError(f"{path} exists: choose a new file for the Argos Translate package.")
    config = load_run(run_dir)
    if config.data.related:
        raise NmtError(
            f"{run_dir} translates into several targets, each chosen by a tag before the source; an Argos "
            "Translate package translates one pair and adds no tag. Export a model of one pair."
        )
    if config.tokenizer.src_code:
        raise NmtError(
            f"{run_dir} reads a language code before each source (tokenizer.src_code: {config.tokenizer.src_code}), "
            "which Argos Translate does not add. Export it as a package (--ctranslate2 for CTranslate2) instead."
        )
    src, tgt = config.data.src_lang, config.data.tgt_lang
    folder = f"translate-{src}_{tgt}-1_0"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".argos.", dir=path.parent) as work:
        package = export_model(run_dir, Path(work) / "package", checkpoint, ctranslate2=quantization)
        root = Path(work) / folder
        shutil.copytree(package / FOLDER, root / "model")
        _, src_tok, tgt_tok, _ = package_parts(package)
        (root / "sentencepiece.model").write_bytes(one_sentencepiece(src_tok.path, tgt_tok.path))
        shutil.copyfile(package / "MODEL_CARD.md", root / "README.md")
        spacy_sentencizer(root / "spacy")
        metadata = {
            "package_version": "1.0",
            "argos_version": ARGOS_VERSION,
            "from_code": src,
            "from_name": language_name(src),
            "to_code": tgt,
            "to_name": language_name(tgt),
            "type": "translate",
            "links": [],
            "source": f"nmt {__version__}, {Path(run_dir).resolve().name} ({checkpoint})",
        }
        if config.tokenizer.tgt_code:  # each translation starts with it: Argos gives it and takes it off
            metadata["target_prefix"] = config.tokenizer.tgt_code
        (root / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        staged = Path(work) / path.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in sorted(root.rglob("*")):
                archive.write(file, file.relative_to(root.parent).as_posix())
        fsync_file(staged)
        os.replace(staged, path)
    return path


def one_sentencepiece(source_model: Path, target_model: Path) -> bytes:
    """The source's SentencePiece model with each target piece it lacks added as UNUSED: it
    segments the source as before and spells the target's pieces as the target's model does."""
    try:
        from sentencepiece import sentencepiece_model_pb2 as model_pb2
    except ImportError:  # the protobuf runtime it needs
        raise NmtError("--argos merges SentencePiece models with protobuf: pip install protobuf.") from None
    proto: Any = model_pb2.ModelProto  # type: ignore[attr-defined]  # generated code, untyped
    merged, target = proto(), proto()
    merged.ParseFromString(source_model.read_bytes())
    if source_model == target_model:
        return merged.SerializeToString()
    target.ParseFromString(target_model.read_bytes())
    have = {piece.piece for piece in merged.pieces}
    for piece in target.pieces:
        if piece.piece not in have:
            added = merged.pieces.add()
            added.piece, added.score, added.type = piece.piece, 0.0, proto.SentencePiece.UNUSED
    return merged.SerializeToString()


def spacy_sentencizer(folder: Path) -> bool:
    """A blank multilingual spaCy pipeline at ``folder``, where spaCy is installed (Argos adds its
    rule-based sentencizer, which needs no model, on load); whether one was written."""
    try:
        import spacy
    except ImportError:
        return False
    spacy.blank("xx").to_disk(folder)
    return True
