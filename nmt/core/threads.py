"""CPU threads chosen by measurement, and kept right while the work goes on (``threads: auto``).

Why: PyTorch's CPU threads (OpenMP) spin at every barrier and wait for one another. Beside one
busy process on a 2-core machine, a two-thread training waits at every barrier for the thread the
scheduler took away and runs at under half the pace of one thread, which barely notices the load;
on an idle machine two threads are 1.6x one (docs/benchmarks.md, "Threads on a busy machine"). No
fixed count is right in both, and a laptop moves between them all day: measuring is.

``ThreadTuner`` watches a stream of units of work (training steps, decoding steps), each reported
as (work, seconds) at the thread count it said to use:

- **measuring**: the units alternate over the candidate counts, a turn of ``turn_units`` each,
  so that every count sees the same work at the same moment; a count measured at under ``slower``
  of the fastest's rate is measured no further (beside two busy processes a two-thread step is
  twenty times one thread's); once the others have ``measure_seconds`` and ``min_units`` of them,
  the fewest threads within ``tie`` of the fastest rate are chosen;
- **steady**: the chosen count runs; the rate of each ``window_seconds`` is compared with the rate
  it was chosen at, and the counts are measured again when it moves by more than ``margin`` (a
  load came or went) or after ``recheck_seconds`` in any case (a load that left barely changes
  one thread's rate), a wait that doubles, up to ``max_backoff`` times, while rechecks keep the count.

Measuring costs no work: every unit is a real step of the run, only at another count for a moment.
The tuner reads no clock unless it is asked to time a unit (``unit``), so tests drive it with
scripted timings; its state is plain data, saved in a training checkpoint so that a resumed run
goes on with the same counts. Thread counts are per OS thread in PyTorch: ``apply`` sets them on
the thread that runs the work.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch

AUTO: Literal["auto"] = "auto"
ThreadSetting = int | Literal["auto"]  # a count (0: PyTorch's default), or measured


@dataclass(frozen=True)
class TunerSettings:
    """How the tuner measures. The defaults keep measuring under 2 % of a run's time on a
    2-core machine, idle or loaded (docs/benchmarks.md), and see a new load within ~5 s."""

    measure_seconds: float = 1.0  # of work per candidate count in a measurement
    min_units: int = 4  # units per candidate count in a measurement, at least
    window_seconds: float = 5.0  # the steady rate is compared with the chosen one over windows this long
    margin: float = 0.3  # a window's rate this far (as a share) from the chosen one: measure again
    recheck_seconds: float = 60.0  # measure again after this much work in any case
    # a recheck that keeps the count doubles the wait before the next, up to this many times the first
    # (beside two busy processes one two-thread step lasts seconds: each recheck costs one)
    max_backoff: int = 4
    slower: float = 0.5  # a count measured at under this share of the fastest one's rate is not measured further
    tie: float = 0.03  # counts whose rate is within this share of the fastest tie: the fewest threads win
    warmup_units: int = 2  # the first units a tuner sees (allocations, lazy set-up) are not measured
    # while measuring: units run at a count before the next takes its turn, the first of them not
    # counted (a count's threads wake, and the last count's wind down, within it)
    turn_units: int = 1


# Decoding's units are steps of a few milliseconds, and a whole test set is a second or two of them:
# measured over a twentieth of a second per count, compared over windows of a second (the rate of
# a step moves with its sentences' lengths: a wider margin).
DECODING = TunerSettings(
    measure_seconds=0.05,
    min_units=10,
    window_seconds=1.0,
    margin=0.5,
    recheck_seconds=20.0,
    warmup_units=4,
    turn_units=4,
    slower=0.7,  # a step is cheap to measure again: stop measuring a count 30 % behind after one turn
)


@dataclass
class Tally:
    """Work and seconds added up over some units."""

    work: float = 0.0
    seconds: float = 0.0
    units: int = 0

    def add(self, work: float, seconds: float) -> None:
        self.work, self.seconds, self.units = self.work + work, self.seconds + seconds, self.units + 1

    @property
    def rate(self) -> float:
        return self.work / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Decision:
    """What a measurement found and chose (the log's line, the metrics' figures)."""

    threads: int  # chosen
    previous: int  # in use before the measurement (0: none, the first)
    rates: dict[int, float]  # work per second at each count measured
    why: str  # what started the measurement
    other_cores: float | None  # cores other processes kept busy meanwhile (None: not known here)
    cores: int  # the cores this process may use


@dataclass
class TunerState:
    """Everything the tuner knows, as plain data (a checkpoint holds it)."""

    candidates: list[int]
    threads: int  # for the next unit
    measuring: bool = True
    why: str = "the start"
    tallies: dict[int, Tally] = field(default_factory=dict)  # this measurement's, by count
    turn: int = 0  # the candidate whose turn it is
    in_turn: int = 0  # units run in this turn
    dropped: list[int] = field(default_factory=list)  # counts this measurement found clearly slower
    interval: float = 0.0  # the wait before the next recheck (0: recheck_seconds)
    chosen_rate: float = 0.0  # the steady rate to compare windows with
    window: Tally = field(default_factory=Tally)
    since_check: float = 0.0  # seconds of work since the last measurement ended
    skip: int = 0  # units still to leave out (warm-up)
    last: Decision | None = None

    def to_dict(self) -> dict:
        saved = asdict(self)
        saved["tallies"] = {str(k): v for k, v in saved["tallies"].items()}
        if self.last is not None:
            saved["last"]["rates"] = {str(k): v for k, v in self.last.rates.items()}
        return saved

    @classmethod
    def from_dict(cls, saved: dict) -> TunerState:
        saved = dict(saved)
        saved["tallies"] = {int(k): Tally(**v) for k, v in saved.get("tallies", {}).items()}
        saved["window"] = Tally(**saved.get("window", {}))
        last = saved.get("last")
        if last is not None:
            saved["last"] = Decision(**{**last, "rates": {int(k): v for k, v in last["rates"].items()}})
        return cls(**saved)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, within a container's CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(cores, quota) if quota else cores)


def _cgroup_quota() -> int:
    """A cgroup v2 CPU quota, rounded up to whole cores (0: none, or not Linux)."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as handle:
            limit, period = handle.read().split()[:2]
    except (OSError, ValueError):
        return 0
    if limit == "max":
        return 0
    return max(1, -(-int(limit) // int(period)))


def candidate_counts(cap: int) -> list[int]:
    """1, 2, 4, ... up to ``cap``, and ``cap`` itself."""
    counts, count = [], 1
    while count < cap:
        counts.append(count)
        count *= 2
    return [*counts, max(1, cap)]


class OtherLoad:
    """How many cores other processes kept busy since the last reading: the machine's busy time
    (/proc/stat) less this process's own. None where /proc/stat is not there (macOS, Windows)."""

    def __init__(self) -> None:
        self.last = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as handle:
                fields = [int(x) for x in handle.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        ticks = os.sysconf("SC_CLK_TCK")
        busy = (sum(fields[:8]) - fields[3] - fields[4]) / ticks  # all but idle and iowait
        own = os.times()
        return busy, own.user + own.system, time.monotonic()

    def cores(self) -> float | None:
        now, last = self._read(), self.last
        self.last = now
        if now is None or last is None or now[2] - last[2] < 0.2:
            return None
        return max(0.0, ((now[0] - last[0]) - (now[1] - last[1])) / (now[2] - last[2]))


class FixedThreads:
    """The tuner of a count that is not measured (a pinned ``threads: N``, one core, a GPU, an
    engine with threads of its own): the same calls as ``ThreadTuner``, doing nothing, so that
    the code that runs units never asks which it holds."""

    measures = False
    on_decision: Callable[[Decision], None] | None = None

    @property
    def threads(self) -> int:
        return torch.get_num_threads()

    def apply(self) -> None:
        pass

    @contextlib.contextmanager
    def unit(self, work: float) -> Iterator[None]:
        yield

    def state_dict(self) -> None:
        return None  # a checkpoint records none, as before

    def load_state_dict(self, saved: dict) -> None:
        pass


class ThreadTuner:
    """Chooses the thread count of each unit of work by measurement (see the module's text).
    ``on_decision`` is told of each measurement's result; ``clock`` times ``unit``."""

    def __init__(
        self,
        candidates: list[int],
        settings: TunerSettings = TunerSettings(),
        on_decision: Callable[[Decision], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        load: OtherLoad | None = None,
    ):
        if len(candidates) < 2:
            raise ValueError("a tuner needs two thread counts or more to choose from")
        self.settings, self.on_decision, self.clock = settings, on_decision, clock
        # warm-up and the first measurement start at one thread: the most threads can be many times
        # slower on a busy machine, one never is
        ordered = sorted(candidates)
        self.state = TunerState(ordered, threads=ordered[0], skip=settings.warmup_units)
        self.load = load or OtherLoad()
        self.cores = max(candidates)

    measures = True

    @property
    def threads(self) -> int:
        """The count the next unit runs with."""
        return self.state.threads

    def apply(self) -> None:
        """Set the next unit's count on the calling thread (PyTorch's count is per thread)."""
        if torch.get_num_threads() != self.state.threads:
            torch.set_num_threads(self.state.threads)

    @contextlib.contextmanager
    def unit(self, work: float) -> Iterator[None]:
        """Run one unit of ``work`` inside, at the tuner's count, and record its time."""
        self.apply()
        start = self.clock()
        yield
        self.record(work, self.clock() - start)

    def record(self, work: float, seconds: float) -> None:
        """The unit just done, at ``threads``, did ``work`` in ``seconds``."""
        state = self.state
        if state.skip:
            state.skip -= 1
            return
        if state.measuring:
            self._measured(work, seconds)
        else:
            self._steady(work, seconds)

    def _measured(self, work: float, seconds: float) -> None:
        state, settings = self.state, self.settings
        state.in_turn += 1
        if settings.turn_units == 1 or state.in_turn > 1:
            state.tallies.setdefault(state.threads, Tally()).add(work, seconds)
            self._drop_slower()
        measuring = [count for count in state.candidates if count not in state.dropped]
        done = all(
            (t := state.tallies.get(count)) is not None
            and t.units >= settings.min_units
            and t.seconds >= settings.measure_seconds
            for count in measuring
        )
        if done or len(measuring) == 1:
            self._decide()
            return
        if state.in_turn >= settings.turn_units or state.threads in state.dropped:
            state.in_turn = 0
            state.turn = (state.turn + 1) % len(state.candidates)
            while state.candidates[state.turn] in state.dropped:
                state.turn = (state.turn + 1) % len(state.candidates)
            state.threads = state.candidates[state.turn]

    def _drop_slower(self) -> None:
        """Counts whose measured rate is under ``slower`` x the fastest's are measured no further
        (their units are the measurement's cost)."""
        state = self.state
        rates = {count: tally.rate for count, tally in state.tallies.items() if tally.units}
        if len(rates) < 2:
            return
        fastest = max(rates.values())
        for count, rate in rates.items():
            if rate < self.settings.slower * fastest and count not in state.dropped:
                state.dropped.append(count)

    def _decide(self) -> None:
        state, settings = self.state, self.settings
        rates = {count: state.tallies[count].rate for count in state.candidates if count in state.tallies}
        fastest = max(rates.values())
        chosen = min(count for count, rate in rates.items() if rate >= fastest * (1 - settings.tie))
        previous = state.last.threads if state.last is not None else 0
        decision = Decision(chosen, previous, rates, state.why, self.load.cores(), self.cores)
        # a periodic recheck that keeps the count waits longer before the next; any change starts over
        interval = state.interval or settings.recheck_seconds
        kept = previous == chosen and state.why.endswith("since the last measurement")
        state.interval = min(2 * interval, settings.max_backoff * settings.recheck_seconds) if kept else 0.0
        state.measuring, state.threads, state.last, state.dropped = False, chosen, decision, []
        state.chosen_rate, state.window, state.since_check, state.tallies = rates[chosen], Tally(), 0.0, {}
        if self.on_decision is not None:
            self.on_decision(decision)

    def _steady(self, work: float, seconds: float) -> None:
        state, settings = self.state, self.settings
        state.since_check += seconds
        state.window.add(work, seconds)
        if state.window.seconds >= settings.window_seconds and state.window.units >= settings.min_units:
            rate, chosen = state.window.rate, state.chosen_rate
            state.window = Tally()
            if chosen and abs(rate / chosen - 1) > settings.margin:
                self.measure(f"the rate moved from {chosen:,.0f} to {rate:,.0f}")
                return
            state.chosen_rate = 0.8 * chosen + 0.2 * rate  # follows slow drifts (longer sentences, say)
        interval = state.interval or settings.recheck_seconds
        if state.since_check >= interval:
            self.measure(f"{interval:g} s since the last measurement")

    def measure(self, why: str) -> None:
        """Start a measurement now (from the count in use, so that it is measured first)."""
        state = self.state
        state.measuring, state.why, state.tallies, state.in_turn, state.dropped = True, why, {}, 0, []
        state.turn = state.candidates.index(state.threads)
        self.load.cores()  # the other processes' load is read over the measurement

    def state_dict(self) -> dict:
        return self.state.to_dict()

    def load_state_dict(self, saved: dict) -> None:
        """Go on from a saved state; one saved with other candidates (another machine) is measured afresh."""
        state = TunerState.from_dict(saved)
        if state.candidates == self.state.candidates:
            self.state = state


def describe(decision: Decision, unit: str) -> str:
    """One line for a log: what was measured, what it chose and why."""

    def count(threads: int) -> str:
        return f"{threads} thread{'s' if threads > 1 else ''}"

    rates = "; ".join(f"{count(t)}: {r:,.0f} {unit}" for t, r in sorted(decision.rates.items(), reverse=True))
    busy = ""
    if decision.other_cores is not None and decision.other_cores >= 0.5:
        busy = f"; other processes are using about {decision.other_cores:.1f} of {decision.cores} cores"
    if not decision.previous:
        return f"Threads measured at the start ({rates}{busy}): {count(decision.threads)}."
    now = "now" if decision.threads != decision.previous else "still"
    return f"Threads measured again, {decision.why} ({rates}{busy}): {now} {count(decision.threads)}."


MOST_THREADS = 1024  # a thread count past this is a typo, not a machine


def thread_cap_from_environment() -> int | None:
    """OMP_NUM_THREADS, where set to a count: what the user asked every OpenMP program to use."""
    try:
        value = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return value if value >= 1 else None


def make_tuner(
    setting: ThreadSetting,
    device: torch.device,
    cap: int | None = None,
    on_decision: Callable[[Decision], None] | None = None,
    settings: TunerSettings = TunerSettings(),
    say: Callable[[str], None] | None = None,
) -> ThreadTuner | FixedThreads:
    """The tuner of ``setting`` on ``device``: one that measures for ``auto`` on a CPU with two cores
    or more (``cap``: at most this many threads, the process's share when several share the machine;
    OMP_NUM_THREADS, where set, caps it too), ``FixedThreads`` otherwise. A count is set here, on the calling
    thread (0 leaves PyTorch's default), never above the cores this process may use: 1,000
    threads on 2 cores trained 270x slower. ``say`` is told what was decided where it is not
    what was asked (a count capped, OMP_NUM_THREADS honoured, one core)."""
    tell = say or (lambda _: None)
    cores = usable_cores()
    if isinstance(setting, int):
        if setting > cores:
            tell(f"Threads: {setting} asked for, but this process may use {cores} core(s): {cores} thread(s).")
        if setting:
            torch.set_num_threads(min(setting, cores))
        return FixedThreads()
    if device.type != "cpu":
        return FixedThreads()
    limit = max(1, cap if cap is not None else cores)
    from_environment = thread_cap_from_environment()
    reason = None
    if from_environment is not None and from_environment < limit:
        limit, reason = from_environment, f"as OMP_NUM_THREADS={from_environment} asks"
    if limit < 2:
        tell(f"Threads: 1 ({reason or 'auto has one core to use here'}, so nothing to measure).")
        torch.set_num_threads(1)
        return FixedThreads()
    if reason:
        tell(f"Threads: auto measures at most {limit}, {reason}.")
    return ThreadTuner(candidate_counts(limit), settings, on_decision)


def parse_setting(text: str, where: str) -> ThreadSetting:
    """'auto' or a count >= 0, as a command's option gives it."""
    from nmt.core.errors import NmtError

    if text.strip().lower() == AUTO:
        return AUTO
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MOST_THREADS:
        raise NmtError(
            f"{where}: got {text!r}, expected 'auto' or a number of threads from 0 (PyTorch's default) "
            f"to {MOST_THREADS}."
        )
    return value
