"""The rules across config keys: settings that each make sense alone but not together (a model
family's own rules, a schedule, related corpora, guided alignment, the training data's sources),
each refused naming the keys and what to set instead."""

from __future__ import annotations

from nmt.config.ranges import LANGUAGE_CODE
from nmt.config.schema import Config, DataConfig, ModelConfig
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES


def check_model_combination(model: ModelConfig) -> None:
    """Refuse model settings that each make sense alone but not together: the family's rules
    (its registry entry's ``check_model``; what an attention can do is on the attention's entry)."""
    ARCHITECTURES[model.arch].check_model(model)


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
