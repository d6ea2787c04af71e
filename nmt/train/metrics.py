"""``<run_dir>/metrics.jsonl``: one JSON record per validation (epoch, step, losses, dev BLEU
and chrF, learning rate, tokens/s, gradient norm, times). Written by training, read by
``nmt plot``, the end-of-training summary and experiment scripts."""

from __future__ import annotations

import json
from pathlib import Path

from nmt.fileio import read_lines, write_lines_atomic


class MetricsFile:
    def __init__(self, path: Path):
        self.path = path

    def read(self) -> list[dict]:
        """Every record so far (none if the file does not exist yet)."""
        return [json.loads(line) for line in read_lines(self.path) if line.strip()] if self.path.is_file() else []

    def append(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def trim(self, last_epoch: int) -> None:
        """On resume: drop the records of epochs the checkpoint does not include."""
        if self.path.is_file():
            write_lines_atomic(self.path, (json.dumps(r) for r in self.read() if r["epoch"] <= last_epoch))

    def reset(self) -> None:
        """A new run starts without the records of an old one."""
        self.path.unlink(missing_ok=True)
