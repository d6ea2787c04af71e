"""``<run_dir>/metrics.jsonl``: one JSON record per validation (epoch, step, losses, dev BLEU
and chrF, learning rate, tokens/s, gradient norm, times, whether it was the best so far;
``epochs`` and ``mid_epoch`` or ``partial`` on a validation inside an epoch). Written by training, read by
``nmt plot``, the end-of-training summary and experiment scripts."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from nmt.errors import NmtError
from nmt.fileio import write_lines_atomic
from nmt.train.state import Progress


def epochs_trained(record: dict) -> float:
    """The epochs trained when a record was taken: 3 at the end of the third, 2.4 inside the
    third (train.validate_every, or a validation the time budget forced)."""
    return record.get("epochs", record["epoch"])


class MetricsFile:
    """Records appended one line each. A crash (or a VM that dies) mid-write can leave a last
    line cut short: readers skip it, and the next append or trim drops it."""

    def __init__(self, path: Path):
        self.path = path

    def read(self) -> list[dict]:
        """Every record so far (none if the file does not exist yet)."""
        if not self.path.is_file():
            return []
        complete, _, tail = self.path.read_bytes().rpartition(b"\n")  # every whole record ends in LF
        records = []
        for number, line in enumerate(complete.decode("utf-8", errors="replace").split("\n"), start=1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise NmtError(f"{self.path}, line {number}: not a JSON record ({error.msg}).") from None
        with contextlib.suppress(ValueError):  # a tail cut short by a crash is no record
            records.append(json.loads(tail.decode("utf-8")))
        return records

    def append(self, record: dict) -> None:
        self._drop_cut_tail()
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def trim(self, progress: Progress) -> None:
        """On resume: drop the records the checkpoint resumed does not include."""
        if self.path.is_file():
            write_lines_atomic(self.path, (json.dumps(r) for r in self.read() if self.included(r, progress)))

    @staticmethod
    def included(record: dict, progress: Progress) -> bool:
        """Whether a checkpoint at ``progress`` includes ``record``: not a validation after its step,
        nor one the budget forced inside the epoch it goes on with (that epoch's end is validated again)."""
        return record["step"] <= progress.step and not (record.get("partial") and record["epoch"] > progress.epoch)

    def reset(self) -> None:
        """A new run starts without the records of an old one."""
        self.path.unlink(missing_ok=True)

    def _drop_cut_tail(self) -> None:
        """Cut the file after its last LF, so that a record never continues a line a crash left."""
        if not self.path.is_file() or self.path.stat().st_size == 0:
            return
        with open(self.path, "r+b") as handle:
            handle.seek(-1, 2)
            if handle.read(1) == b"\n":
                return
            handle.seek(0)
            handle.truncate(handle.read().rfind(b"\n") + 1)
