"""A raw mapping (a YAML file's, ``--set KEY=VALUE`` overrides) into the typed ``Config``: each
value checked against its field's type and range, an unknown key refused with the nearest valid
name, keys removed after they measured as losses dropped or refused with what they measured."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import types
import typing
from typing import Annotated, Any, Literal

import yaml

from nmt.config.checks import (
    check_data_sources,
    check_guided_alignment,
    check_model_combination,
    check_related_schedule,
    check_schedule,
)
from nmt.config.measured import removed_keys
from nmt.config.ranges import RANGES, REQUIRED_KEYS
from nmt.config.schema import ArchName, Config, DecodeConfig, ModelConfig
from nmt.core.errors import NmtError
from nmt.core.plugins import load_config_plugins
from nmt.core.registry import ARCHITECTURES, CALLBACKS


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


def _coerce(key: str, value: Any, tp: Any, ranges: dict[str, tuple[Any, str]] | None = None) -> Any:
    """Check ``value`` against the field type ``tp`` and its range (``RANGES``, or a family's
    ``ranges`` by the key's last part); return it (ints widen to floats)."""
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
    check = RANGES.get(key) or (ranges or {}).get(key.rpartition(".")[2])
    if check is not None and not check[0](value):
        raise NmtError(f"Config key '{key}': got {value!r}, expected {check[1]}.")
    return value


def _unknown_key_message(key: str, valid: list[str], prefix: str, near: list[str] | None = None, of: str = "") -> str:
    """Refusing ``key``: the nearest of ``near`` (default: ``valid``), and the valid keys ``of`` what."""
    close = difflib.get_close_matches(key, near or valid, n=1, cutoff=0.5)
    hint = f" Did you mean '{prefix}{close[0]}'?" if close else ""
    where = f"section '{prefix[:-1]}'{of}" if prefix else "the top level"
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
        if tp is ModelConfig:
            kwargs[name] = _build_model(raw[name] if raw[name] is not None else {}, f"{prefix}{name}.")
        elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
            kwargs[name] = _build(tp, raw[name] if raw[name] is not None else {}, f"{prefix}{name}.")
        else:
            kwargs[name] = _coerce(f"{prefix}{name}", raw[name], tp)
    return cls(**kwargs)


def key_names(cls: type) -> list[str]:
    """The keys a config section of ``cls`` takes: its fields."""
    return [f.name for f in dataclasses.fields(cls)]


def family_settings(arch: str) -> type[ModelConfig]:
    """The settings class of the model family ``arch`` names: ``model``'s keys for it."""
    return ARCHITECTURES[arch].settings


def _other_families_keys(own: list[str]) -> dict[str, type[ModelConfig]]:
    """The model keys of every registered family that ``own`` lacks, each with its family's settings."""
    found: dict[str, type[ModelConfig]] = {}
    for arch in ARCHITECTURES:
        settings = family_settings(arch)
        for key in key_names(settings):
            if key not in own:
                found.setdefault(key, settings)
    return found


def _build_model(raw: Any, prefix: str) -> ModelConfig:
    """The ``model`` section as its family's settings (``model.arch`` names the family). Another
    family's keys are checked as that family checks them and not read: a saved config of any
    version holds them all, and ``--set model.arch=transformer`` tries a Transformer on an RNN's
    config. Those set away from their defaults are kept in ``unread``, for the training log."""
    if not isinstance(raw, dict):
        raise NmtError(f"Config section '{prefix[:-1]}' must be a mapping of keys to values, got {raw!r}.")
    arch = _coerce(f"{prefix}arch", raw.get("arch", "rnn"), ArchName)
    settings = family_settings(arch)
    own = key_names(settings)
    others = _other_families_keys(own)
    for key in raw:
        if key not in own and key not in others:
            message = _unknown_key_message(str(key), own, prefix, [*own, *others], f" (model.arch {arch})")
            raise NmtError(message)
    hints = typing.get_type_hints(settings, include_extras=True)
    kwargs = {key: _coerce(f"{prefix}{key}", raw[key], hints[key], settings.ranges) for key in own if key in raw}
    unread = {}
    for key in (key for key in raw if key in others):
        other = others[key]
        value = _coerce(f"{prefix}{key}", raw[key], typing.get_type_hints(other)[key], other.ranges)
        width = key in other.widths and value == kwargs.get("embed_dim", settings.embed_dim)
        if value != getattr(other(), key) and not width:  # nmt tune's model.width sets every width
            unread[key] = value
    return settings(**kwargs, others=unread)


def model_from_dict(raw: dict) -> ModelConfig:
    """A saved ``model`` section (a checkpoint's, a package's record) as its family's settings."""
    return _build_model(dict(raw), "model.")


def check_value(dotted: str, value: Any, arch: str = "rnn") -> Any:
    """``value`` checked as config key ``dotted`` (``section.key``) would be, on its own, for a
    model of family ``arch``: its type and range, not how it combines with the other keys (a clear
    NmtError naming the key)."""
    section, name = dotted.split(".", 1)
    section_type = typing.get_type_hints(Config, include_extras=True)[section]
    if section_type is ModelConfig:
        section_type = family_settings(arch)
        if name not in key_names(section_type):
            section_type = _other_families_keys(key_names(section_type)).get(name, section_type)
    ranges = section_type.ranges if issubclass(section_type, ModelConfig) else None
    return _coerce(dotted, value, typing.get_type_hints(section_type, include_extras=True)[name], ranges)


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
