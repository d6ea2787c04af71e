"""The config reference, generated from the config dataclasses (``nmt/config/schema.py``, and each
registered model family's settings class for its own ``model`` keys): every key with its type,
default, allowed range and description, in one place, so a key is written once.

A key's description is the comment beside its field, or the comment lines right above it, in its
dataclass's source; its allowed values come from the field's type (a ``Literal``, a registry) and
``RANGES`` (a family's: its settings' ``ranges``); required keys from ``REQUIRED_KEYS``; what it
measured from ``nmt/measured.yaml``. The page is committed as docs/reference/config.md (so it reads
on a repository host too), written by ``python docs/reference_pages.py``; ``tests/test_docs.py``
checks that it is current and names every key.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from dataclasses import dataclass

from nmt.config import schema as config_module
from nmt.config.measured import key_effects
from nmt.config.parsing import _describe_type
from nmt.config.ranges import RANGES, REQUIRED_KEYS
from nmt.config.schema import Config, ModelConfig
from nmt.core.registry import ARCHITECTURES

SECTION_INTROS = {
    "": "The run as a whole.",
    "data": "What to read and how to split it (`nmt prepare`).",
    "tokenizer": "The SentencePiece models (`nmt prepare`).",
    "model": "The network: the keys every family reads, then each family's own (`model.arch` chooses; another "
    "family's keys are not read, and the training log names those set). Checked key by key when a checkpoint "
    "is loaded.",
    "train": "How `nmt train` trains: budget, schedule, regularisation, checkpoints, devices.",
    "decode": "How search translates (`nmt translate`, `evaluate`, `serve`; validation uses greedy search).",
    "tune": "`nmt tune`: a study of recipes for this corpus, machine and budget.",
}


@dataclass
class KeyDoc:
    key: str  # dotted: train.batch_size
    type: str  # as the validation messages say it: "an integer", "one of 'gru', 'lstm'"
    default: str  # as YAML writes it
    allowed: str  # the range check's description, or "" when the type says it all
    required: bool
    description: str
    measured: str = ""  # its effect where measured here, with a link to the page (nmt/measured.yaml)
    family: str = ""  # a model family's own key: the family (model.arch) that reads it


def _field_comments(cls: type) -> dict[str, str]:
    """Each field's comment in the class's source: the lines right above it and the comment on its line(s)."""
    source = inspect.getsource(cls)
    lines = source.splitlines()
    found = {}
    class_node = ast.parse(source).body[0]
    assert isinstance(class_node, ast.ClassDef)
    for node in class_node.body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        above: list[str] = []
        row = node.lineno - 2  # the line before the field, 0-based
        while row >= 0 and lines[row].strip().startswith("#"):
            above.insert(0, lines[row].strip().lstrip("#").strip())
            row -= 1
        beside = [line.split("#", 1)[1].strip() for line in lines[node.lineno - 1 : node.end_lineno] if "  #" in line]
        found[node.target.id] = " ".join(part for part in [*above, *beside] if part and part != "fmt: skip")
    return found


def _yaml_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value == "" or value == [] or value == {}:
        return '""' if isinstance(value, str) else "[]" if isinstance(value, list) else "{}"
    return str(value)


def _section_docs(section: str, cls: type, instance: object, family: str = "") -> list[KeyDoc]:
    """The keys of one section's dataclass (``cls``; a family's settings: only the keys it adds)."""
    docs = []
    effects = key_effects()
    comments = _field_comments(cls)
    types = typing.get_type_hints(cls, include_extras=True)
    shared = {f.name for f in dataclasses.fields(ModelConfig)} if family else set()
    ranges = getattr(cls, "ranges", {})
    for field in dataclasses.fields(cls):
        if dataclasses.is_dataclass(types[field.name]) or field.name in shared:
            continue
        key = f"{section}.{field.name}" if section else field.name
        allowed = RANGES[key][1] if key in RANGES else ranges[field.name][1] if field.name in ranges else ""
        required = key in REQUIRED_KEYS and key != "run_dir"  # run_dir defaults to runs/<file name>
        value = _yaml_value(getattr(instance, field.name))
        effect = effects.get(key)
        measured = f"{effect.text} ([measured](../{effect.page}))" if effect else ""
        description = comments.get(field.name, "")
        kind = _describe_type(types[field.name])
        docs.append(KeyDoc(key, kind, value, allowed, required, description, measured, family))
    return docs


def key_docs() -> list[KeyDoc]:
    """Every config key, section by section, in the dataclasses' order; after ``model``'s shared
    keys, each registered family's own (its settings class's)."""
    docs = []
    hints = typing.get_type_hints(Config, include_extras=True)
    docs += _section_docs("", Config, Config())
    for f in dataclasses.fields(Config):
        cls = hints[f.name]
        if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
            continue
        docs += _section_docs(f.name, cls, cls())
        if cls is ModelConfig:
            for arch in ARCHITECTURES:
                settings = ARCHITECTURES[arch].settings
                docs += _section_docs(f.name, settings, settings(), family=arch)
    return docs


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """The reference page."""
    parts = [
        "# Config reference\n",
        "Generated from the config dataclasses of `nmt/config/schema.py` and each model family's settings "
        "(`nmt/model/rnn/settings.py`, `nmt/model/transformer/settings.py`: their types, defaults, range checks and "
        "comments): this page is the only list of keys. A config is YAML with the sections below; keys marked "
        "*required* must be in the file, every other key has the default shown. Unknown keys are refused with the "
        "nearest valid name; a wrong type or value names the key, the value and what is allowed. "
        "`--set KEY=VALUE` overrides any key on the command line. *Measured here* gives a key's effect where it "
        "was measured on this project's corpora, with the page that measured it (`nmt/measured.yaml`); keys removed "
        "after they measured as losses are refused with what they measured.\n",
    ]
    docs = key_docs()
    for section, intro in SECTION_INTROS.items():
        rows = [d for d in docs if (d.key.split(".")[0] if "." in d.key else "") == section]
        if not rows:
            continue
        parts.append(f"## `{section}`\n" if section else "## Top level\n")
        parts.append(intro + "\n")
        families = [""] + sorted({d.family for d in rows if d.family}, key=[d.family for d in rows].index)
        for family in families:
            if family:
                settings = ARCHITECTURES[family].settings
                where = f"`{settings.__name__}`, {settings.__module__}"
                parts.append(f"### `model.arch: {family}`\n\nIts own keys, beside the shared ones above ({where}).\n")
            parts.append(_table([d for d in rows if d.family == family]) + "\n")
    return "\n".join(parts) + "\n"


def _table(rows: list[KeyDoc]) -> str:
    lines = ["| key | type | default | allowed | what it does | measured here |\n|---|---|---|---|---|---|"]
    for d in rows:
        default = "*required*" if d.required else f"`{_cell(d.default)}`"
        cells = [f"`{d.key}`", _cell(d.type), default, _cell(d.allowed), _cell(d.description), _cell(d.measured)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


_ = config_module  # the module whose source the comments are read from
