"""A wall-clock budget for training (``train.max_minutes``, ``nmt train --minutes N``).

The clock counts every second spent inside ``Trainer.run`` — training steps, validation,
checkpoints — across resumed sessions (the spent seconds travel in the checkpoint), so a
budget means the same on any machine: this much time, then the best model so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TimeBudget:
    def __init__(self, minutes: float, spent_before: float = 0.0, clock: Callable[[], float] | None = None):
        self.limit = minutes * 60.0  # seconds; 0 = no budget
        self.spent_before = spent_before  # seconds spent by earlier sessions of the run
        self.clock = clock or time.monotonic
        self.started = clock()

    def spent(self) -> float:
        """Seconds spent so far, earlier sessions included."""
        return self.spent_before + self.clock() - self.started

    def exhausted(self) -> bool:
        return self.limit > 0 and self.spent() >= self.limit
