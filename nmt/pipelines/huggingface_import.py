"""``nmt init --from-hf FOLDER``: a Hugging Face translation model (Marian / OPUS-MT, or M2M100 /
NLLB-200) as a run of this toolkit — its config, its tokenizers and its weights in this
toolkit's layout — which every command then uses: ``nmt translate``, ``evaluate``, ``serve`` and
the lab read it, ``nmt export`` packages it (ONNX, CTranslate2, Argos), and ``init_from``
fine-tunes it on your pairs.

The folder is what ``save_pretrained`` writes (config.json, model.safetensors or
pytorch_model.bin, and the tokenizer's files: Marian's source.spm, target.spm, vocab.json and,
for separate vocabularies, target_vocab.json; M2M100's sentencepiece.bpe.model with vocab.json,
NLLB's with tokenizer.json). A name instead of a folder is downloaded through ``huggingface_hub``
where it is installed and the network allows. M2M100's and NLLB's language codes become the
run's ``tokenizer.src_code`` and ``tgt_code``.

Ids: this toolkit's vocabularies start with <pad>, <unk>, <bos>, <eos>; the import writes each
side's SentencePiece model with the Hugging Face vocabulary's pieces in that order (the model
cuts text as before: scores and types are kept) and moves the weights' rows to match. Marian
starts decoding from <pad>: our <bos> takes that row, and its logit is never predicted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config.files import save_config
from nmt.config.parsing import config_from_dict
from nmt.config.paths import prepared_paths, run_paths
from nmt.config.ranges import LEAST_VOCABULARY
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import staged_folder
from nmt.core.hardware import available_memory
from nmt.data.languages import LANGUAGES
from nmt.data.tokenizer import BOS, BOS_ID, EOS, PAD, UNK, sentencepiece_with_pieces
from nmt.model.transformer.huggingface import (
    is_filler,
    m2m100_problems,
    m2m100_settings,
    marian_problems,
    marian_settings,
    weights_from_hf,
)
from nmt.runtime.checkpoint import save_checkpoint
from nmt.runtime.loading import TRAINING_BYTES_PER_PARAMETER, load_tokenizers, new_model, spm_hashes

SUPPORTED = {"marian": "MarianMTModel (OPUS-MT)", "m2m_100": "M2M100ForConditionalGeneration (M2M100, NLLB-200)"}
IMPORT_BYTES_PER_PARAMETER = 8  # their weights and ours, in float32, side by side
SPECIAL_PIECES = {"pad_token": "<pad>", "unk_token": "<unk>", "eos_token": "</s>"}  # Marian's defaults


@dataclass
class Vocabulary:
    """One side's vocabulary in this toolkit's order: its pieces, and for each our id the
    Hugging Face row it reads (``rows``)."""

    pieces: list[str]
    rows: list[int]


def hf_folder(name_or_folder: str, log: Callable[[str], object]) -> Path:
    """The model's folder: the one given, or a download of the name (``huggingface_hub``)."""
    folder = Path(name_or_folder).expanduser()
    if folder.is_dir():
        return folder
    if folder.exists():
        raise NmtError(f"--from-hf {name_or_folder}: a folder is needed (what save_pretrained writes), not a file.")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise NmtError(
            f"--from-hf {name_or_folder}: no such folder here, and huggingface_hub is not installed to download "
            "it (pip install 'nmt-kit[hf]'; or download the model's folder where there is a network and give its path)."
        ) from None
    log(f"Downloading {name_or_folder} from the Hugging Face Hub ...")
    try:
        return Path(snapshot_download(name_or_folder))
    except Exception as error:  # offline, a wrong name, a gated model: the hub's own message
        raise NmtError(
            f"--from-hf {name_or_folder}: not a folder here, and the download failed ({type(error).__name__}: "
            f"{error}). Download the model's folder where there is a network and give its path."
        ) from None


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NmtError(
            f"{path} is missing: a Hugging Face model folder holds it (save_pretrained writes it)."
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise NmtError(f"{path} is not JSON ({error}).") from None
    if not isinstance(value, dict):
        raise NmtError(f"{path} does not hold a JSON object.")
    return value


def _weights_file(folder: Path) -> Path:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return folder / name
    raise NmtError(f"{folder} holds no model.safetensors or pytorch_model.bin (sharded checkpoints are not read yet).")


def _parameters(path: Path) -> int | None:
    """The weights' parameter count from the file's header, nothing loaded (safetensors only)."""
    if path.suffix != ".safetensors":
        return None
    from safetensors import safe_open

    try:
        with safe_open(str(path), "pt") as handle:
            return sum(torch.Size(handle.get_slice(name).get_shape()).numel() for name in handle.keys())  # noqa: SIM118 - a safe_open has no __iter__
    except Exception as error:  # safetensors' own, on a file that is not one
        raise NmtError(f"Cannot read {path}: it is not a safetensors file ({error}).") from None


def _load_state(path: Path) -> dict[str, torch.Tensor]:
    """The weights, as plain tensors (a pickle that holds anything else is refused, as checkpoints are)."""
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # the readers' own errors, on a damaged or foreign file
        raise NmtError(f"Cannot read {path} as plain tensors ({type(error).__name__}: {error}).") from None


def check_fits(parameters: int, log: Callable[[str], object]) -> None:
    """Say what importing and fine-tuning a model of ``parameters`` will take, and refuse the
    import before anything is read where this machine's free memory cannot hold it."""
    importing, training = parameters * IMPORT_BYTES_PER_PARAMETER, parameters * TRAINING_BYTES_PER_PARAMETER
    free = available_memory(torch.device("cpu"))
    log(
        f"{parameters / 1e6:,.1f} M parameters: importing takes about {importing / 2**30:,.2f} GiB of memory, "
        f"fine-tuning about {training / 2**30:,.2f} GiB before activations (weights, gradients and Adam's moments)"
        + (f"; {free / 2**30:,.1f} GiB free here." if free is not None else ".")
    )
    if free is not None and importing > free:
        raise NmtError(
            f"This model has {parameters / 1e6:,.1f} M parameters: importing it needs about {importing / 2**30:,.1f} "
            f"GiB and this machine has {free / 2**30:,.1f} GiB free. Import it on a machine with more memory, or "
            "choose a smaller model (OPUS-MT's are about 75 M)."
        )


def vocabulary(
    hf_vocab: dict[str, int], pieces: dict[str, str], own_bos: int | None, bos_row: int, path: Path
) -> Vocabulary:
    """One side in our order: <pad>, <unk>, <bos>, <eos> (rows: the side's pad, unk, ``bos_row``
    and eos), then every other piece in the model's id order (the side's own <bos>, ``own_bos``,
    is ours, not another piece; an export's fillers are left out)."""
    by_id = sorted((index, piece) for piece, index in hf_vocab.items())
    if [index for index, _ in by_id] != list(range(len(by_id))):
        raise NmtError(f"{path}: its ids are not 0 .. {len(by_id) - 1}, one piece each.")
    pad, unk, eos = (hf_vocab[pieces[key]] for key in ("pad_token", "unk_token", "eos_token"))
    special = {pad, unk, eos} | ({own_bos} if own_bos is not None else set())
    ours, rows = [PAD, UNK, BOS, EOS], [pad, unk, bos_row, eos]
    for index, piece in by_id:
        if index not in special and piece not in (PAD, UNK, BOS, EOS) and not is_filler(piece):
            ours.append(piece)
            rows.append(index)
    return Vocabulary(ours, rows)


def _token(tokenizer_config: dict, key: str, default: str) -> str:
    """A special token as tokenizer_config.json names it (a string, or an AddedToken's record)."""
    value = tokenizer_config.get(key, default)
    return str(value.get("content", default) if isinstance(value, dict) else value)


def marian_vocabularies(folder: Path, hf: dict) -> tuple[Vocabulary, Vocabulary, int, bool]:
    """Both sides' vocabularies of a Marian folder in our order, the target id decoding starts
    from, and whether our <bos> is a new row (a copy of that one: Marian starts from <pad>)."""
    tokenizer_config = (
        _read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    )
    source_vocab = _read_json(folder / "vocab.json")
    separate = bool(tokenizer_config.get("separate_vocabs")) or (folder / "target_vocab.json").is_file()
    target_vocab = _read_json(folder / "target_vocab.json") if separate else source_vocab
    for name in ("source.spm", "target.spm"):
        if not (folder / name).is_file():
            raise NmtError(f"{folder / name} is missing: a Marian tokenizer's folder holds source.spm and target.spm.")
    pieces = {key: _token(tokenizer_config, key, default) for key, default in SPECIAL_PIECES.items()}
    for side, hf_vocab in (("vocab.json", source_vocab), ("target_vocab.json", target_vocab)):
        lacking = [piece for piece in pieces.values() if piece not in hf_vocab]
        if lacking:
            raise NmtError(f"{folder / side} has no {', '.join(lacking)}: the tokenizer's special pieces.")
    start = int(hf.get("decoder_start_token_id", target_vocab[pieces["pad_token"]]))
    # our <bos> is the row decoding starts from: the model's own <bos> if it has one, else a copy of that row
    start_is_new = target_vocab.get(BOS) != start
    own_bos = source_vocab.get(BOS)  # a source never holds <bos>: its row is the side's own, or pad's
    src = vocabulary(
        source_vocab,
        pieces,
        own_bos,
        source_vocab[pieces["pad_token"]] if own_bos is None else own_bos,
        folder / "vocab.json",
    )
    tgt = vocabulary(target_vocab, pieces, None if start_is_new else start, start, folder / "target_vocab.json")
    return src, tgt, start, start_is_new


def import_marian(
    folder: Path, hf: dict, out: Path, src_lang: str, tgt_lang: str, log: Callable[[str], object]
) -> Config:
    """A MarianMTModel folder (its config.json: ``hf``) as the new run ``out``."""
    problems = marian_problems(hf)
    if problems:
        raise NmtError(f"{folder}: this Marian model has what the Transformer here cannot hold: {'; '.join(problems)}.")
    weights_path = _checked_weights(folder, log)
    src, tgt, start, start_is_new = marian_vocabularies(folder, hf)
    raw = _run_settings(folder, hf, out, (src_lang, tgt_lang), {"src": src, "tgt": tgt}, marian_settings(hf))
    codes = [piece for piece in src.pieces if piece.startswith(">>") and piece.endswith("<<")]
    sides = {"src": (folder / "source.spm", src, codes), "tgt": (folder / "target.spm", tgt, codes)}
    weights = weights_from_hf(_load_state(weights_path), hf, src.rows, tgt.rows, start, start_is_new)
    return _write_run(config_from_dict(raw), sides, weights, _imported(hf, folder, "MarianMTModel"), log)


def import_m2m100(
    folder: Path, hf: dict, out: Path, src_lang: str, tgt_lang: str, log: Callable[[str], object]
) -> Config:
    """An M2M100ForConditionalGeneration folder (M2M100's, NLLB-200's: ``hf`` its config.json)
    as the new run ``out``: one vocabulary for both sides, the language codes as the tokenizer's
    ``src_code`` and ``tgt_code``."""
    problems = m2m100_problems(hf)
    if problems:
        raise NmtError(f"{folder}: this M2M100 model has what the Transformer here cannot hold: {'; '.join(problems)}.")
    weights_path = _checked_weights(folder, log)
    vocab, whole, hf_vocab, start_is_new = m2m100_vocabulary(folder, hf)
    codes = {"src": "", "tgt": ""}  # none where the tokenizer holds none (an export of a model trained here)
    if whole:
        codes = {side: language_code(lang, hf_vocab, folder) for side, lang in (("src", src_lang), ("tgt", tgt_lang))}
    # no bias of its own: one holds out our <bos> where it is a copy of the row decoding starts from
    model = {**m2m100_settings(hf), "output_bias": start_is_new}
    raw = _run_settings(folder, hf, out, (src_lang, tgt_lang), {"src": vocab, "tgt": vocab}, model)
    raw["tokenizer"] |= {"joint": True, "src_code": codes["src"], "tgt_code": codes["tgt"]}
    if start_is_new:  # the bias is the import's, not the model's: kept so, a child exports back to M2M100
        raw["train"]["freeze"] = ["output_bias"]
    start = vocab.rows[BOS_ID]
    weights = weights_from_hf(_load_state(weights_path), hf, vocab.rows, vocab.rows, start, start_is_new)
    sides = {"src": (folder / "sentencepiece.bpe.model", vocab, whole)}  # one model for both sides
    if whole:
        log(f"Language codes: {codes['src']} before each source, {codes['tgt']} starting each translation.")
    return _write_run(
        config_from_dict(raw), sides, weights, _imported(hf, folder, "M2M100ForConditionalGeneration"), log
    )


def m2m100_vocabulary(folder: Path, hf: dict) -> tuple[Vocabulary, list[str], dict[str, int], bool]:
    """The one vocabulary of an M2M100 or NLLB folder in our order, the pieces never cut (the
    language codes and other special tokens), the model's own piece -> id map, and whether our
    <bos> is a new row: M2M100 and NLLB start decoding from </s>, so it is a copy of that one
    (an export of this toolkit's starts from its own <bos>, which stays <bos>). Read
    through ``transformers``' tokenizer (M2M100Tokenizer's vocab.json and appended codes,
    NllbTokenizer's tokenizer.json): the rows past it (M2M100's made-up words) are named
    ``<rowN>``, pieces no text is cut into."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise NmtError(
            f"{folder}: an M2M100 or NLLB model's vocabulary is read with its tokenizer: pip install 'nmt-kit[hf]'."
        ) from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as error:  # transformers' own, on a folder without a tokenizer it reads
        raise NmtError(f"{folder}: its tokenizer does not load ({type(error).__name__}: {error}).") from None
    if not (folder / "sentencepiece.bpe.model").is_file():
        raise NmtError(f"{folder / 'sentencepiece.bpe.model'} is missing: M2M100's and NLLB's tokenizers read it.")
    hf_vocab: dict[str, int] = {}
    for index, token in enumerate(tokenizer.convert_ids_to_tokens(list(range(int(hf["vocab_size"]))))):
        hf_vocab[f"<row{index}>" if token is None or token in hf_vocab else token] = index
    pieces = {key: str(getattr(tokenizer, key)) for key in SPECIAL_PIECES}
    special = set(tokenizer.all_special_tokens) - set(pieces.values())
    start = int(hf.get("decoder_start_token_id", hf_vocab[pieces["eos_token"]]))
    start_is_new = start == hf_vocab[pieces["eos_token"]]
    vocab = vocabulary(hf_vocab, pieces, None if start_is_new else start, start, folder / "config.json")
    return vocab, [piece for piece in vocab.pieces[4:] if piece in special], hf_vocab, start_is_new


def language_code(lang: str, hf_vocab: dict[str, int], folder: Path) -> str:
    """The piece of ``hf_vocab`` that names language ``lang``: as given (eng_Latn), M2M100's
    __en__, or NLLB's code of the language's ISO 639-3 name and a script (hin_Deva for hi)."""
    if lang in hf_vocab:
        return lang
    if f"__{lang}__" in hf_vocab:
        return f"__{lang}__"
    names = LANGUAGES.get(lang, ("", ()))[1]
    found = [piece for piece in hf_vocab if len(piece) == 8 and piece[3] == "_" and piece[:3] in names]
    if found:
        return found[0]
    raise NmtError(
        f"{folder}: no language code for {lang!r} in its vocabulary (M2M100 spells them __hi__, NLLB hin_Deva): "
        "give --src-lang and --tgt-lang as the model spells them."
    )


def _checked_weights(folder: Path, log: Callable[[str], object]) -> Path:
    """The weights file, after the memory they need was said and found free (safetensors)."""
    weights_path = _weights_file(folder)
    parameters = _parameters(weights_path)
    if parameters is not None:
        check_fits(parameters, log)
    return weights_path


def _imported(hf: dict, folder: Path, default: str) -> dict[str, str]:
    return {"class": hf.get("architectures", [default])[0], "name": folder.resolve().name}


def _run_settings(
    folder: Path, hf: dict, out: Path, languages: tuple[str, str], vocab: dict[str, Vocabulary], model: dict
) -> dict[str, Any]:
    """The imported run's config (before parsing)."""
    src_lang, tgt_lang = languages
    return {
        "run_dir": str(out),
        # what it was trained on, as a package records it (a name): the pairs are the model's makers'
        "data": {"path": f"huggingface:{folder.resolve().name}", "src_lang": src_lang, "tgt_lang": tgt_lang},
        # the sizes SentencePiece would be asked for: a vocabulary smaller than the least (a model
        # trained here on a few sentences, whose config asked for the least) records the least
        "tokenizer": {f"{side}_vocab_size": max(len(vocab[side].pieces), LEAST_VOCABULARY) for side in ("src", "tgt")},
        "model": model,
        # what fine-tuning starts from (nmt init DATA --init-from RUN writes the recipe for your corpus)
        "train": {"epochs": 10, "batch_size": 32, "lr_warmup": 200, "learning_rate": 0.0001},
        "decode": {"beam_size": hf.get("num_beams") or 5},
    }


def _write_run(
    config: Config,
    sides: dict[str, tuple[Path, Vocabulary, list[str]]],
    weights: dict[str, torch.Tensor],
    imported_from: dict[str, str],
    log: Callable[[str], object],
) -> Config:
    """The run ``config`` names, whole or not at all: its config, each side's SentencePiece
    model (``sides``: the model's own, its vocabulary in our order, the pieces never cut; one
    side for a joint vocabulary) and ``weights`` as its best checkpoint."""
    out = Path(config.run_dir)
    with staged_folder(out) as staging:  # the whole run or none: a failure leaves no half-written folder

        def staged(path: Path) -> Path:
            """Where ``path`` of the run (under ``out``) is written before the run appears."""
            target = staging / path.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            return target

        paths, run = prepared_paths(config), run_paths(config)
        for side, (base, vocab, whole) in sides.items():
            left_out = sentencepiece_with_pieces(base, vocab.pieces, staged(paths.spm(side)), whole=whole)
            if left_out:
                log(
                    f"{side}: {len(left_out)} pieces of {base.name} are not in the vocabulary (the model reads them as "
                    f"<unk>); text that needs one is cut into smaller pieces here, e.g. {left_out[0]!r}."
                )
        src_tok, tgt_tok = load_tokenizers(config, staged)
        model = new_model(config, src_tok, tgt_tok)
        missing, unexpected = model.load_state_dict(weights, strict=False)
        if missing or unexpected:
            raise NmtError(
                f"The weights of {imported_from['name']}: weights this model lacks ({missing[:3]}) or lacks a "
                f"place for ({unexpected[:3]})."
            )
        save_config(config, staged(run.config))
        payload = {
            "model": model.state_dict(),
            "config": config.to_dict(),
            "spm_sha256": spm_hashes(src_tok, tgt_tok),
            "hardware": "imported",
            "imported_from": imported_from,
        }
        save_checkpoint(staged(run.checkpoint("best")), payload)
    return config


def import_hf(name_or_folder: str, out: Path, src_lang: str, tgt_lang: str, log: Callable[[str], object]) -> Config:
    """Import a Hugging Face translation model into the new run folder ``out``."""
    if out.exists() and any(out.iterdir()):
        raise NmtError(f"{out} exists and is not empty: choose a new folder for the imported run (--run-dir).")
    folder = hf_folder(name_or_folder, log)
    hf = _read_json(folder / "config.json")
    kind = hf.get("model_type")
    if kind in IMPORTS:
        languages = _languages(folder.resolve().name, src_lang, tgt_lang)
        return IMPORTS[kind](folder, hf, out, *languages, log)
    raise NmtError(
        f"{folder}: model_type {kind!r}; --from-hf imports {', '.join(SUPPORTED.values())} "
        f"(model_type {' or '.join(SUPPORTED)})."
    )


IMPORTS = {"marian": import_marian, "m2m_100": import_m2m100}


def _languages(name: str, src_lang: str, tgt_lang: str) -> tuple[str, str]:
    """--src-lang and --tgt-lang, or the pair an OPUS-MT name spells (opus-mt-en-hi)."""
    if src_lang and tgt_lang:
        return src_lang, tgt_lang
    parts = name.split("-")
    if len(parts) >= 4 and parts[0] == "opus" and parts[1] == "mt":
        return src_lang or parts[2], tgt_lang or parts[3]
    raise NmtError(f"Which languages does {name} translate? Give --src-lang and --tgt-lang (e.g. en and hi).")
