"""A package's CTranslate2 folder read by this toolkit before CTranslate2's C++ loader sees it:
``model.bin``'s layout parsed within the file's bounds (CTranslate2's binary format, version 6:
a header, then each variable's name, shape, type and bytes, then aliases), its settings and
shapes held against the package's config, ``config.json`` and the vocabularies against the
package's tokenizers. The hashes (nmt/runtime/package_files.py) say the files are the exported
ones; this says that what they declare is what the config describes, so that a package whose
manifest was edited too is still refused by name before the loader can abort the process
(an ``alignment_layer`` of 99 freed memory twice; ``num_heads`` 0 divided by zero)."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.registry import ARCHITECTURES
from nmt.data.tokenizer import BOS, EOS, UNK, Tokenizer

BINARY_VERSIONS = (6,)  # the model.bin versions CTranslate2 4.x writes
TYPE_SIZES = {0: 4, 1: 1, 2: 2, 3: 4, 4: 2, 5: 2}  # float32 int8 int16 int32 float16 bfloat16 (types.h)
INTEGER_TYPES = {1: "b", 2: "h", 3: "i"}
MAX_RANK = 4


@dataclass
class Variable:
    shape: tuple[int, ...]
    type_id: int
    scalar: int | None  # an integer scalar's value (settings such as num_heads)


def read_model_file(path: Path) -> dict[str, Variable]:
    """``model.bin``'s variables, every length checked against the file's size."""
    data = path.read_bytes()
    reader = _Reader(data, path)
    version = reader.unpack("I")
    if version not in BINARY_VERSIONS:
        raise NmtError(f"{path} is not a CTranslate2 model this nmt exports (binary version {version}).")
    reader.string()  # the spec's name
    reader.unpack("I")  # its revision
    variables: dict[str, Variable] = {}
    for _ in range(reader.unpack("I")):
        name = reader.string()
        rank = reader.unpack("B")
        if rank > MAX_RANK:
            raise NmtError(f"{path}: variable {name} has rank {rank}: the file is damaged.")
        shape = tuple(reader.unpack("I") for _ in range(rank))
        type_id = reader.unpack("B")
        if type_id not in TYPE_SIZES:
            raise NmtError(f"{path}: variable {name} has an unknown type ({type_id}): the file is damaged.")
        size = reader.unpack("I")
        count = 1
        for dim in shape:
            count *= dim
        if size != count * TYPE_SIZES[type_id]:
            raise NmtError(f"{path}: variable {name} declares {size} bytes for shape {shape}: the file is damaged.")
        raw = reader.take(size)
        scalar = struct.unpack("<" + INTEGER_TYPES[type_id], raw)[0] if not shape and type_id in INTEGER_TYPES else None
        variables[name] = Variable(shape, type_id, scalar)
    for _ in range(reader.unpack("I")):  # aliases: a name for another variable
        alias, target = reader.string(), reader.string()
        if target not in variables:
            raise NmtError(f"{path}: alias {alias} names no variable ({target}): the file is damaged.")
        variables[alias] = variables[target]
    if reader.offset != len(data):
        raise NmtError(f"{path} has {len(data) - reader.offset} bytes after its last variable: the file is damaged.")
    return variables


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.data, self.path, self.offset = data, path, 0

    def take(self, size: int) -> bytes:
        if self.offset + size > len(self.data):
            raise NmtError(f"{self.path} ends early (truncated or not a CTranslate2 model): export the model again.")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def unpack(self, code: str) -> int:
        return struct.unpack("<" + code, self.take(struct.calcsize(code)))[0]

    def string(self) -> str:
        raw = self.take(self.unpack("H"))
        try:
            return raw.rstrip(b"\0").decode("utf-8")
        except UnicodeDecodeError:
            raise NmtError(f"{self.path} holds a name that is not UTF-8: the file is damaged.") from None


def check_model_file(folder: Path, config: Config, src_tok: Tokenizer, tgt_tok: Tokenizer) -> None:
    """Refuse, naming the file and what differs, a CTranslate2 folder that is not the package's
    model: ``model.bin``'s layout, its variables (none the export does not write), settings and
    shapes, ``config.json``'s tokens, the vocabularies."""
    model_file = folder / "model.bin"
    variables = read_model_file(model_file)
    layout = ARCHITECTURES[config.model.arch].ctranslate2_layout(config.model, src_tok.vocab_size, tgt_tok.vocab_size)
    if layout is None:
        raise NmtError(f"{folder}: model.arch {config.model.arch!r} has no CTranslate2 model (the export refuses it).")
    shapes, settings = layout
    # a quantized weight's scale: one per row of the weight it scales
    scales = {f"{name}_scale": shape[0] for name, shape in shapes.items() if name.endswith("/weight")}
    for name, found in variables.items():
        if name in settings:
            if found.scalar != settings[name]:
                given = settings[name]
                raise NmtError(f"{model_file}: {name} is {found.scalar}, where the package's config gives {given}.")
        elif name in scales:
            if found.shape not in ((), (scales[name],)):
                raise NmtError(f"{model_file}: {name} has shape {list(found.shape)}: refused.")
        elif name not in shapes:
            raise NmtError(f"{model_file} holds {name}, which this toolkit's export does not write: refused.")
        elif found.shape != shapes[name]:
            raise NmtError(
                f"{model_file}: {name} has shape {list(found.shape)}, where the package's config gives "
                f"{list(shapes[name])}: refused."
            )
    missing = sorted(name for name in [*shapes, *settings] if name not in variables)
    if missing:
        raise NmtError(f"{model_file} lacks {missing[0]}, which the package's config describes: refused.")
    _check_config_file(folder / "config.json")
    _check_vocabularies(folder, src_tok, tgt_tok)


def _check_config_file(path: Path) -> None:
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise NmtError(f"{path} is not readable JSON ({error}): export the model again.") from None
    if not isinstance(settings, dict):
        raise NmtError(f"{path} must hold a JSON object: export the model again.")
    for key, token in (("unk_token", UNK), ("bos_token", BOS), ("eos_token", EOS), ("decoder_start_token", BOS)):
        if settings.get(key) != token:
            raise NmtError(f"{path}: {key} is {settings.get(key)!r}, where this toolkit's models use {token!r}.")


def _check_vocabularies(folder: Path, src_tok: Tokenizer, tgt_tok: Tokenizer) -> None:
    shared = folder / "shared_vocabulary.json"
    sides = [(shared, src_tok)] if shared.is_file() else []
    if not sides:
        sides = [(folder / "source_vocabulary.json", src_tok), (folder / "target_vocabulary.json", tgt_tok)]
    for path, tokenizer in sides:
        try:
            pieces = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise NmtError(f"{path} is missing or not readable JSON ({error}): export the model again.") from None
        if pieces != tokenizer.pieces():
            raise NmtError(f"{path} is not the vocabulary of {tokenizer.path.name}: export the model again.")
