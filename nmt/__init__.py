"""nmt: attention-based translation (RNN encoder-decoders and the Transformer) for small parallel corpora.

From Python (a notebook, a script)::

    import nmt
    model = nmt.load("runs/eng-mar-cpu")   # a run folder, a model package or a config file
    model.translate("How are you?")
    model.attention("How are you?")        # draws itself in a notebook, offline

``load``, ``train``, ``prepare``, ``timeline`` and ``Model`` are nmt.api's (imported when first used:
``import nmt`` stays light, and the command line with it; ``__init__.pyi`` gives type checkers and
editors their signatures).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
API = (
    "Model",
    "View",
    "compare",
    "compare_attentions",
    "init",
    "load",
    "prepare",
    "timeline",
    "train",
)  # nmt.api's, at the package's top
__all__ = [*API, "__version__"]


def __getattr__(name: str) -> Any:
    """``nmt.load`` and the rest of ``API``: nmt.api's, imported by name on first use (as a registry
    imports its entries), so that ``import nmt.cli`` does not import torch before it needs it."""
    if name in API:
        return getattr(importlib.import_module("nmt.api"), name)
    raise AttributeError(f"module 'nmt' has no attribute {name!r}")


DISTRIBUTION = "nmt-kit"  # the distribution's name (the package and the command are `nmt`); not on PyPI yet


def install_hint(extra: str, packages: str) -> str:
    """How to install an optional extra, in a line that works today: its packages by name."""
    return (
        f"pip install {packages} (what the [{extra}] extra installs: pip install '.[{extra}]' from a checkout of nmt, "
        f"or pip install '{DISTRIBUTION}[{extra}]' once the name is published)"
    )
