"""The registries: one per kind of thing a config names (model family, attention, cell, engine,
callback, decoding strategy). Each maps a name to an entry and is filled by the modules that define
the entries, with a decorator or ``register(name, entry)``::

    @CELLS.register("elman")
    class ElmanRNN(RecurrentStack, nn.RNN): ...

A registry sits in core so that the config, which validates names against it, never imports
the model that fills it. The first read imports the modules of the built-in entries, then the
plugins (nmt/core/plugins.py): a name in a config is checked against everything that can be
registered, wherever the entry is defined. These by-name imports are the only ones that point
up the layers, and they are the same mechanism a plugin uses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, Generic, TypeVar

Entry = TypeVar("Entry")


class Registry(MutableMapping[str, Entry], Generic[Entry]):
    """Names to entries, in registration order (the order the config reference lists them)."""

    def __init__(self, kind: str, builtins: tuple[str, ...]):
        self.kind = kind  # what an entry is, for messages: "attention"
        self.builtins = builtins  # the modules that register the built-in entries
        self._entries: dict[str, Entry] = {}
        self._loaded = False

    def register(self, name: str, entry: Any = None) -> Any:
        """``register(name, entry)``, or ``@register(name)`` above a class or function. A name
        registered twice is refused: a plugin cannot silently replace a built-in."""

        def add(value: Any) -> Any:
            if name in self._entries and self._entries[name] is not value:
                raise ValueError(f"{self.kind} {name!r} is registered already ({self._entries[name]!r})")
            self._entries[name] = value
            return value

        return add if entry is None else add(entry)

    def load(self) -> None:
        """Import the built-in entries' modules and the plugins, once."""
        if self._loaded:
            return
        self._loaded = True  # first: the modules imported here register into this registry
        for module in self.builtins:
            importlib.import_module(module)
        from nmt.core.plugins import load_installed_plugins

        load_installed_plugins()

    def names(self) -> list[str]:
        self.load()
        return list(self._entries)

    def __getitem__(self, name: str) -> Entry:
        self.load()
        return self._entries[name]

    def __setitem__(self, name: str, entry: Entry) -> None:  # tests register for one test (monkeypatch.setitem)
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


# model.arch: a model class, made as ``Class(model_config, src_vocab_size, tgt_vocab_size,
# joint_vocabulary)``, with ``forward``, ``encode`` and ``decode_step`` (nmt/model/rnn/model.py, transformer.py)
ARCHITECTURES: Registry[Any] = Registry("architecture", ("nmt.model.rnn.model", "nmt.model.transformer.model"))
# model.attention: an AttentionKind (nmt/model/rnn/attention.py)
ATTENTIONS: Registry[Any] = Registry("attention", ("nmt.model.rnn.attention",))
# model.rnn: a RecurrentStack class (nmt/model/rnn/cells.py)
CELLS: Registry[Any] = Registry("cell", ("nmt.model.rnn.cells",))
# --engine: an Engine, what loads a package and runs its model (nmt/runtime/loading.py)
ENGINES: Registry[Any] = Registry(
    "engine", ("nmt.runtime.loading", "nmt.runtime.onnx_engine", "nmt.runtime.ctranslate2_engine")
)
# train.callbacks: a Callback class, made with no arguments (nmt/training/callbacks.py)
CALLBACKS: Registry[Callable[[], Any]] = Registry("callback", ("nmt.training.callbacks",))
# decode.strategy: a search function (nmt/decoding/search.py)
STRATEGIES: Registry[Any] = Registry("decoding strategy", ("nmt.decoding.search",))
