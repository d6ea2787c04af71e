"""One model's translation queue: concurrent requests batched into one search, in fair turns.

One worker thread per model takes, in turn, the next slice of every waiting request whose
search settings match the request at the head of the turn, up to a batch's work; one search
decodes them all, sorted by length as every search is, and each request's answers are put
back together. Work is counted in units (characters × beam, ``work_of``) and sized in
seconds: the scheduler keeps a running estimate of this model's seconds per unit and cuts
each batch to about ``batch_seconds`` of decoding (never beyond ``batch_work`` units), shared
among the waiting requests (at most ``slice_work`` units each, at least one text).

A request whose slice has run goes back to the end of the turn, behind every request that
came meanwhile, so a short request waits for at most the one batch running when it came (a
second or two, however big the requests around it), never for a long request's remaining
slices. A request's own work (a lab view, ``SoloWork``) is a batch of its own, and after one
such batch the first waiting translation goes next: with 48 lab views queued, a one-word
translation waited for all of them (5.5 s), and now for the one running when it came.
The queue holds at most ``max_queued`` texts (beyond: ``QueueFull`` with a retry
estimate), and ``cancel`` drops a request whose client went away or whose time ran out: its
waiting texts leave the queue and the batches after the running one no longer work for it.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any


class QueueFull(Exception):
    def __init__(self, queued: int, retry_after: int):
        super().__init__(f"{queued} texts are waiting already")
        self.queued, self.retry_after = queued, retry_after


@dataclass(eq=False)  # a ticket is itself: compared by identity
class Ticket:
    """One request in the queue: its texts, those still to decode, the answers so far."""

    texts: list[str]
    settings: Hashable  # what one search must share: beam size, n-best, prefix, attention
    work: list[int]  # units (characters x beam) per text
    pending: deque[int]  # indices into texts not yet taken into a batch, in order
    answers: list = field(default_factory=list)
    future: Future = field(default_factory=Future)
    left: int = 0  # texts not answered yet
    cancelled: bool = False
    solo: bool = False  # work of its own (a lab view): a batch alone, not part of the per-unit estimate

    @property
    def queued(self) -> int:
        return len(self.pending)

    def take(self, units: float) -> list[int]:
        """The next texts whose work adds up to at most ``units`` (one text at least)."""
        piece = [self.pending.popleft()]
        total = self.work[piece[0]]
        while self.pending and total + self.work[self.pending[0]] <= units:
            total += self.work[self.pending[0]]
            piece.append(self.pending.popleft())
        return piece


def slices_of(work: list[int], slice_work: float) -> deque[list[int]]:
    """Consecutive runs of texts whose work adds up to at most ``slice_work`` (one text at least):
    the slices a request of this work is decoded in while the estimate holds."""
    ticket = Ticket([""] * len(work), None, work, deque(range(len(work))))
    slices: deque[list[int]] = deque()
    while ticket.pending:
        slices.append(ticket.take(slice_work))
    return slices


class SoloWork:
    """A request's own work (a lab view, the next subwords' alternatives) as a scheduler's
    settings: equal to no other, so it is decoded as a batch alone, and run by ``run``."""

    def __init__(self, run: Callable[[], Any]):
        self.run = run


class Scheduler:
    """Batches and orders one model's translation work (``decode(texts, settings) -> answers``,
    one answer per text, run on this scheduler's worker thread under ``lock``, which the model's
    other work takes too)."""

    def __init__(
        self,
        decode: Callable[[list[str], Any], list],  # (texts, their settings: one hashable key)
        max_queued: int = 512,
        slice_work: int = 16_000,
        batch_work: int = 48_000,
        batch_seconds: float = 1.0,
        lock: threading.Lock | None = None,
        clock: Callable[[], float] = time.perf_counter,  # what a batch is timed by (a test's own clock)
    ):
        self.decode, self.max_queued, self.clock = decode, max_queued, clock
        self.lock = lock or threading.Lock()  # the model's: a batch is timed once it holds it
        self.slice_work, self.batch_work, self.batch_seconds = slice_work, batch_work, batch_seconds
        self.turn: list[Ticket] = []  # waiting requests, in the order they are served
        self.running: list[Ticket] = []  # the requests of the batch being decoded
        self.last_solo = False  # the last batch was a request's own work (a lab view)
        self.changed = threading.Condition()
        self.counts = {"batches": 0, "texts": 0, "cancelled": 0, "refused": 0}
        self.seconds_per_text = 0.05  # running estimates, for Retry-After and for sizing batches
        self.seconds_per_unit = 0.0  # 0: not measured yet
        self.worker = threading.Thread(target=self._run, name="nmt-scheduler", daemon=True)
        self.worker.start()

    # ---- called from the server's event loop ----

    def submit(self, texts: list[str], settings: Hashable, work: list[int], solo: bool = False) -> Ticket:
        """Queue a request (``work``: units per text); ``QueueFull`` when the queue is full.
        A ``solo`` request (settings no other request shares: ``SoloWork``) is decoded as a batch
        of its own, in its turn like any other."""
        with self.changed:
            queued = self.queued()
            if self.turn and queued + len(texts) > self.max_queued:
                self.counts["refused"] += 1
                raise QueueFull(queued, max(1, math.ceil(queued * self.seconds_per_text)))
            ticket = Ticket(texts, settings, work, deque(range(len(texts))), [None] * len(texts), left=len(texts))
            ticket.solo = solo
            self.turn.append(ticket)
            self.changed.notify()
            return ticket

    def cancel(self, ticket: Ticket) -> None:
        """The client went away, or its time ran out: drop what is left of its request."""
        with self.changed:
            if ticket.future.done() or ticket.cancelled:
                return
            ticket.cancelled = True
            ticket.pending.clear()
            if ticket in self.turn:
                self.turn.remove(ticket)
            self.counts["cancelled"] += 1
            ticket.future.cancel()

    def queued(self) -> int:
        """Texts waiting (not yet in a batch)."""
        return sum(ticket.queued for ticket in [*self.turn, *self.running])

    def status(self) -> dict:
        with self.changed:
            return {"queued_texts": self.queued(), "waiting_requests": len(self.turn), **self.counts}

    def batch_units(self) -> float:
        """A batch's work: about ``batch_seconds`` of decoding by the estimate, within ``batch_work``
        (0 before the first batch: one text, whatever it costs)."""
        if not self.seconds_per_unit:  # the first batch is one text: it measures the model
            return 0
        return min(self.batch_work, self.batch_seconds / self.seconds_per_unit)

    # ---- the worker thread ----

    def _run(self) -> None:
        while True:
            with self.changed:
                while not self.turn:
                    self.changed.wait()
            with self.changed:
                settings, batch = self._next_batch()
            if batch:
                self._decode(settings, batch)

    def _next_batch(self) -> tuple[Hashable, list[tuple[Ticket, list[int]]]]:
        """The next slice of each waiting request with the head's settings, in turn order, up to
        a batch's work; those requests leave the turn while their slices run."""
        if not self.turn:
            return None, []
        head = self.turn[0]
        if head.solo and self.last_solo:  # lab views take turns with translations, never all before one
            head = next((ticket for ticket in self.turn if not ticket.solo), head)
        self.last_solo = head.solo
        settings = head.settings
        matching = [ticket for ticket in self.turn if ticket.settings == settings]
        batch_units = self.batch_units()
        share = min(self.slice_work, batch_units / len(matching))  # a lone request may fill the batch
        batch: list = []
        total = 0
        for ticket in matching:
            if batch and total + ticket.work[ticket.pending[0]] > batch_units:
                break
            piece = ticket.take(share)
            batch.append((ticket, piece))
            total += sum(ticket.work[i] for i in piece)
        self.running = [ticket for ticket, _ in batch]
        self.turn = [t for t in self.turn if t not in self.running]
        return settings, batch

    def _decode(self, settings: Hashable, batch: list[tuple[Ticket, list[int]]]) -> None:
        texts = [ticket.texts[i] for ticket, piece in batch for i in piece]
        units = sum(ticket.work[i] for ticket, piece in batch for i in piece)
        with self.lock:
            start = self.clock()
            try:
                answers = self.decode(texts, settings)
            except Exception as error:  # the request fails, the server goes on
                with self.changed:
                    for ticket, _ in batch:
                        self._finish(ticket, error)
                    self.running = []
                return
            seconds = self.clock() - start
        with self.changed:
            if not any(ticket.solo for ticket, _ in batch):  # a lab view's cost is not a translation's
                self.seconds_per_text = 0.8 * self.seconds_per_text + 0.2 * seconds / len(texts)
                measured = seconds / max(1, units)
                self.seconds_per_unit = (
                    measured if not self.seconds_per_unit else 0.7 * self.seconds_per_unit + 0.3 * measured
                )
            self.counts["batches"] += 1
            self.counts["texts"] += len(texts)
            position = 0
            for ticket, piece in batch:
                for index in piece:
                    ticket.answers[index] = answers[position]
                    position += 1
                ticket.left -= len(piece)
                if not ticket.left:
                    self._finish(ticket)
                elif ticket.pending and not ticket.cancelled:  # behind every request that came meanwhile
                    self.turn.append(ticket)
            self.running = []

    def _finish(self, ticket: Ticket, error: Exception | None = None) -> None:
        if ticket in self.turn:
            self.turn.remove(ticket)
        if ticket.future.done():  # cancelled meanwhile
            return
        if error is not None:
            ticket.future.set_exception(error)
        else:
            ticket.future.set_result(ticket.answers)
