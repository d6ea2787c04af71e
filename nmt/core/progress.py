"""Progress bars for long work, on a terminal only.

A bar redraws itself with carriage returns; written to a file (``bash scripts/main.sh > run.log``,
a scheduler's log) every redraw would become a line of its own. So a bar shows only when
standard error is a terminal (tqdm's ``disable=None``); elsewhere the work's own lines say how it
goes (the training log's line per validation, the summaries prepare and evaluate print).
"""

from __future__ import annotations

from typing import Any

from tqdm import tqdm


def progress_bar(total: int | None, desc: str, unit: str, show: bool = True, **options: Any) -> tqdm:
    """A tqdm bar that draws itself when ``show`` and standard error is a terminal."""
    return tqdm(total=total, desc=desc, unit=unit, leave=False, disable=None if show else True, **options)
