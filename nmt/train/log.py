"""The training log: lines to the console (above any progress bar) and to <run_dir>/train.log."""

from __future__ import annotations

import time
from pathlib import Path

from tqdm import tqdm


class RunLog:
    """Timestamped lines to ``path``, echoed to the console; silent when not ``enabled``
    (processes other than rank 0)."""

    def __init__(self, path: Path, echo: bool = True, enabled: bool = True, prefix: str = ""):
        self.path = path
        self.echo = echo
        self.enabled = enabled
        self.prefix = prefix  # on the console only: whose line it is when several runs share one (train.members)
        if enabled:
            path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {message}\n")
        if self.echo:
            tqdm.write(self.prefix + message)
