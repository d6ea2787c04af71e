"""Progress bars for long work, on a terminal and in a notebook only.

A bar redraws itself with carriage returns; written to a file (``bash scripts/main.sh > run.log``,
a scheduler's log) every redraw would become a line of its own. So a bar shows only when
standard error is a terminal (tqdm's ``disable=None``), or in a notebook's kernel: a widget where
ipywidgets is installed, else one line redrawn in place (notebooks honour the carriage return,
and no escape code is written); elsewhere the
work's own lines say how it goes (the training log's line per validation, the summaries prepare
and evaluate print).
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


def in_notebook() -> bool:
    """Whether this process is a notebook's kernel (Jupyter, VS Code, Colab: IPython's ZMQ shell)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def progress_bar(total: int | None, desc: str, unit: str, show: bool = True, **options: Any) -> tqdm:
    """A tqdm bar that draws itself when ``show`` and standard error is a terminal or a notebook's."""
    if in_notebook():
        return _notebook_bar()(total=total, desc=desc, unit=unit, leave=False, disable=not show, **options)
    return tqdm(total=total, desc=desc, unit=unit, leave=False, disable=None if show else True, **options)


def _notebook_bar() -> type[tqdm]:
    """tqdm's widget where ipywidgets is installed (tqdm.auto would warn where it is not), else tqdm's own."""
    try:
        import ipywidgets  # noqa: F401  (only whether it is there)
    except ImportError:
        return tqdm
    from tqdm.notebook import tqdm as widget_bar

    return widget_bar
