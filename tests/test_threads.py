"""train.threads: auto and --threads auto: the thread tuner's choices from scripted timings, a
training whose threads switch mid-epoch against a fixed count, resuming after a switch, paced
decoding, and (slow) a real run beside busy processes."""

from __future__ import annotations

import multiprocessing
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.config.parsing import check_value, config_from_dict
from nmt.core.errors import NmtError
from nmt.core.threads import (
    Decision,
    ThreadTuner,
    TunerSettings,
    candidate_counts,
    describe,
    make_tuner,
    parse_setting,
    usable_cores,
)
from nmt.decoding.paced import PacedModel
from nmt.pipelines.prepare import prepare
from nmt.training import trainer as trainer_module
from nmt.training.callbacks import Callback
from nmt.training.state import TrainingInterrupted
from nmt.training.trainer import build_trainer

from .helpers import random_sources, random_translator, small_model, synthetic_pairs, tiny_config, write_anki

runner = CliRunner()
QUICK = TunerSettings(measure_seconds=0.2, min_units=2, window_seconds=1.0, recheck_seconds=6.0, warmup_units=1)


class NoLoad:
    """Other processes' load, as a test says it is (None: unknown)."""

    def __init__(self, cores: float | None = None):
        self.value = cores

    def cores(self) -> float | None:
        return self.value


@pytest.fixture(autouse=True)
def no_thread_cap(monkeypatch):
    """The suite's workers cap every OpenMP program at one thread (tests/conftest.py); the tuner's
    tests measure what `threads: auto` does where nothing caps it, as a user's machine has it."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


def drive(tuner: ThreadTuner, seconds_per_unit, units: int, work: float = 100.0) -> list[int]:
    """Feed ``units`` units whose time is ``seconds_per_unit[threads]``; the counts they ran with."""
    used = []
    for _ in range(units):
        used.append(tuner.threads)
        tuner.record(work, seconds_per_unit[tuner.threads])
    return used


def quick_tuner(decisions: list | None = None, candidates=(1, 2), load: float | None = None) -> ThreadTuner:
    return ThreadTuner(
        list(candidates), QUICK, on_decision=(decisions if decisions is not None else []).append, load=NoLoad(load)
    )  # type: ignore[arg-type]


# ---- the controller, from scripted timings ----


def test_the_first_measurement_alternates_the_counts_and_keeps_the_fastest():
    decisions: list[Decision] = []
    tuner = quick_tuner(decisions)
    idle = {2: 0.05, 1: 0.08}  # two threads 1.6x one, as on an idle 2-core machine
    used = drive(tuner, idle, 12)
    assert used[:1] == [1]  # the warm-up unit, not measured, at one thread: never many times slower
    # unit by unit, so that both see the same work at the same moment, until each has 0.2 s
    assert used[1:9] == [1, 2, 1, 2, 1, 2, 1, 2]
    assert decisions[0].threads == 2 and decisions[0].previous == 0
    assert decisions[0].rates == pytest.approx({2: 2000.0, 1: 1250.0})
    assert set(used[9:]) == {2}  # steady at the choice


def test_a_load_that_slows_the_count_in_use_is_measured_again_and_fewer_threads_win():
    decisions: list[Decision] = []
    tuner = quick_tuner(decisions, load=1.0)
    drive(tuner, {2: 0.05, 1: 0.08}, 20)
    busy = {2: 0.19, 1: 0.085}  # one busy process: two threads wait for the one the scheduler took
    used = drive(tuner, busy, 40)
    assert decisions[-1].threads == 1 and decisions[-1].previous == 2
    assert decisions[-1].why.startswith("the rate moved from 2,000 to")
    assert used[-10:] == [1] * 10
    line = describe(decisions[-1], "tok/s")
    assert line.startswith("Threads measured again, the rate moved from 2,000 to")
    assert "other processes are using about 1.0 of 2 cores" in line and line.endswith("now 1 thread.")


def test_a_load_that_leaves_is_found_by_the_periodic_measurement():
    decisions: list[Decision] = []
    tuner = quick_tuner(decisions)
    drive(tuner, {2: 0.19, 1: 0.085}, 12)
    assert tuner.threads == 1
    used = drive(tuner, {2: 0.05, 1: 0.08}, 120)  # one thread's rate barely changes: no drift to see
    assert decisions[-1].threads == 2 and decisions[-1].why == "6 s since the last measurement"
    assert used[-5:] == [2] * 5


def test_a_count_many_times_slower_is_measured_no_further():
    """Beside two busy processes on two cores a two-thread step lasted 20 times one thread's: each
    of its units is the measurement's cost, so it is dropped once it is under half the fastest."""
    decisions: list[Decision] = []
    tuner = quick_tuner(decisions)
    used = drive(tuner, {2: 2.0, 1: 0.05}, 12)
    assert used[1:3] == [1, 2] and used[3:].count(2) == 0  # one unit of two threads, never again
    assert decisions[0].threads == 1


def test_rechecks_that_keep_the_count_wait_longer_and_a_change_starts_over():
    decisions: list[Decision] = []
    tuner = quick_tuner(decisions)
    busy = {2: 0.19, 1: 0.085}
    drive(tuner, busy, 700)
    waits = [d.why for d in decisions[1:4]]
    assert waits == [
        "6 s since the last measurement",
        "12 s since the last measurement",
        "24 s since the last measurement",
    ]
    assert all(d.threads == 1 for d in decisions)
    drive(tuner, busy, 700)
    assert decisions[-1].why == "24 s since the last measurement"  # at most max_backoff x recheck_seconds
    drive(tuner, {2: 0.05, 1: 0.08}, 400)  # the load leaves: found at the next recheck
    changed = next(d for d in decisions if d.threads == 2)
    after = decisions[decisions.index(changed) + 1 :]
    assert after and after[0].why == "6 s since the last measurement"  # the wait starts over


def test_counts_that_tie_go_to_the_fewest_threads():
    decisions: list[Decision] = []
    tuner = quick_tuner(decisions, candidates=(1, 2, 4))
    drive(tuner, {4: 0.05, 2: 0.0505, 1: 0.09}, 20)  # 2 within 3 % of 4
    assert decisions[0].threads == 2


def test_a_saved_state_goes_on_as_the_tuner_would_have():
    timings = {2: 0.05, 1: 0.08}
    straight = quick_tuner()
    expected = drive(straight, timings, 30)
    first = quick_tuner()
    head = drive(first, timings, 5)  # inside the first measurement
    second = quick_tuner()
    second.load_state_dict(first.state_dict())
    assert head + drive(second, timings, 25) == expected
    other_machine = quick_tuner(candidates=(1, 2, 4))
    other_machine.load_state_dict(first.state_dict())  # other candidates: measured afresh
    assert other_machine.state.measuring and not other_machine.state.tallies


def test_candidate_counts_and_the_settings_a_command_takes():
    assert candidate_counts(2) == [1, 2] and candidate_counts(6) == [1, 2, 4, 6] and candidate_counts(8) == [1, 2, 4, 8]
    assert parse_setting("auto", "--threads") == "auto" and parse_setting("3", "--threads") == 3
    with pytest.raises(NmtError, match="--threads: got 'two', expected 'auto' or a number"):
        parse_setting("two", "--threads")
    before = torch.get_num_threads()
    try:
        assert not make_tuner(1, torch.device("cpu")).measures and torch.get_num_threads() == 1  # a count is pinned
        assert not make_tuner("auto", torch.device("cuda")).measures  # not on a GPU
        assert not make_tuner("auto", torch.device("cpu"), cap=1).measures and torch.get_num_threads() == 1
        tuner = make_tuner("auto", torch.device("cpu"), cap=2)
        assert isinstance(tuner, ThreadTuner) and tuner.state.candidates == [1, 2]
    finally:
        torch.set_num_threads(before)


def test_train_threads_is_auto_by_default_and_says_what_it_takes(tmp_path):
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    raw = tiny_config(tmp_path, data)
    del raw["train"]["threads"]
    assert config_from_dict(raw).train.threads == "auto"
    assert check_value("train.threads", 3) == 3
    with pytest.raises(NmtError, match=r"'train\.threads': got 'fast', expected an integer or one of 'auto'"):
        check_value("train.threads", "fast")
    with pytest.raises(NmtError, match=r"'train\.threads': got -2, expected 'auto' or a number of threads from 0"):
        check_value("train.threads", -2)


# ---- training: the switches change nothing but the time ----


class ScriptedClock:
    """A clock read twice per unit (start, end): each unit lasts what ``costs`` says for the
    thread count it runs with, after ``change_at`` units the second table (a load arrives)."""

    def __init__(self, costs: dict[int, float], later: dict[int, float] | None = None, change_at: int = 10**9):
        self.now, self.reads, self.costs, self.later, self.change_at = 0.0, 0, costs, later or costs, change_at

    def __call__(self) -> float:
        self.reads += 1
        if self.reads % 2 == 0:  # a unit's end
            table = self.costs if self.reads // 2 <= self.change_at else self.later
            self.now += table[torch.get_num_threads()]
        return self.now


class CountsSeen(Callback):
    """The thread count of every step, and (``stop_at``) a stop as Ctrl-C gives it after that step."""

    every_steps = 1

    def __init__(self, stop_at: int = 0):
        self.counts: list[int] = []
        self.stop_at = stop_at

    def after_step(self, trainer, step: int) -> None:
        self.counts.append(torch.get_num_threads())
        if step == self.stop_at:
            trainer.control.signal.signal_name = "SIGINT"


def scripted_config(tmp_path: Path, name: str, threads, width: int = 32):
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    widths = dict.fromkeys(("embed_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "output_dim"), width)
    raw = tiny_config(
        tmp_path,
        data,
        run_dir=str(tmp_path / name),
        data={"prepared_dir": str(tmp_path / "prepared")},
        model={**widths, "dropout": 0.1},
        train={"epochs": 3, "batch_size": 8, "threads": threads, "checkpoint_minutes": 0},
    )
    config = config_from_dict(raw)
    prepare(config, log=lambda _: None)
    return config


def train_with(config, monkeypatch, clock: ScriptedClock | None, callback: CountsSeen, resume: bool = False):
    """Train ``config``; with ``clock``, its tuner (auto, 1 or 2 threads) reads that clock."""
    if clock is not None:
        monkeypatch.setattr(
            trainer_module,
            "make_tuner",
            lambda *args, **kwargs: ThreadTuner([1, 2], QUICK, clock=clock, load=NoLoad()),  # type: ignore[arg-type]
        )
    trainer = build_trainer(config, torch.device("cpu"), show_bar=False, echo=False, callbacks=[callback])
    trainer.run(resume=resume)
    return trainer


@pytest.fixture
def float64():
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


def test_threads_switched_mid_epoch_train_the_same_losses_as_a_fixed_count(tmp_path, monkeypatch, float64):
    """In float64: a thread count changes how float sums are split, which float32 rounds
    differently (1e-7 after an epoch of this model, measured) and float64 does not (1e-17)."""
    fixed = CountsSeen()
    straight = train_with(scripted_config(tmp_path, "fixed", 2), monkeypatch, None, fixed)
    assert set(fixed.counts) == {2}
    switching = CountsSeen()
    load_arrives = ScriptedClock({2: 0.05, 1: 0.08}, {2: 0.2, 1: 0.08}, change_at=12)
    tuned = train_with(scripted_config(tmp_path, "auto", "auto"), monkeypatch, load_arrives, switching)
    assert 1 in switching.counts and 2 in switching.counts and switching.counts[-1] == 1  # switched, in epochs
    assert len(switching.counts) == len(fixed.counts)  # measuring trained the same steps, none more
    records = [(r["train_loss"], r["dev_loss"]) for r in tuned.metrics.read()]
    expected = [(r["train_loss"], r["dev_loss"]) for r in straight.metrics.read()]
    assert records == pytest.approx(expected, rel=1e-12)
    for name, value in straight.model.state_dict().items():
        torch.testing.assert_close(tuned.model.state_dict()[name], value, rtol=1e-10, atol=1e-12)
    assert [r["threads"] for r in tuned.metrics.read()][-1] == 1


def test_a_run_resumed_after_a_switch_goes_on_with_the_same_counts_and_weights(tmp_path, monkeypatch):
    def costs() -> ScriptedClock:
        return ScriptedClock({2: 0.05, 1: 0.08}, {2: 0.2, 1: 0.08}, change_at=12)

    whole = CountsSeen()
    straight = train_with(scripted_config(tmp_path, "straight", "auto"), monkeypatch, costs(), whole)
    switched_at = next(i for i in range(10, len(whole.counts)) if whole.counts[i] != whole.counts[i - 1])
    stop_at = switched_at + 3  # after a switch, inside the second measurement or just past it
    config = scripted_config(tmp_path, "stopped", "auto")
    first = CountsSeen(stop_at=stop_at)
    with pytest.raises(TrainingInterrupted):
        train_with(config, monkeypatch, costs(), first)
    rest = CountsSeen()
    clock = costs()
    clock.reads = 2 * stop_at  # the scripted load goes on where it was
    resumed = train_with(config, monkeypatch, clock, rest, resume=True)
    assert first.counts + rest.counts == whole.counts
    for name, value in straight.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], value), name


# ---- decoding ----


def test_paced_decoding_translates_as_the_plain_model_and_measures_its_steps(tmp_path):
    translator = random_translator(tmp_path)
    lines = [f"{a} {b}" for a in ("I", "you", "we") for b in ("see", "want", "eat", "like")]
    plain = translator.translate(lines, beam_size=3)
    decisions: list[Decision] = []
    clock = ScriptedClock({2: 0.01, 1: 0.004})  # one thread faster: the tuner must find it
    tuner = ThreadTuner([1, 2], QUICK, on_decision=decisions.append, clock=clock, load=NoLoad())  # type: ignore[arg-type]
    before = torch.get_num_threads()
    try:
        translator.searched = PacedModel(translator.model, tuner)
        translator.threads = tuner
        for _ in range(30):
            assert translator.translate(lines, beam_size=3) == plain
            if decisions:
                break
    finally:
        torch.set_num_threads(before)
    assert decisions and decisions[0].threads == 1


def test_paced_model_leaves_scores_and_attention_alone():
    model = small_model(vocab=20)
    src, lengths = random_sources(4, vocab=20)
    tuner = ThreadTuner([1, 2], QUICK, load=NoLoad())  # type: ignore[arg-type]
    paced = PacedModel(model, tuner)
    model.eval()
    with torch.no_grad():
        memory, state = model.encode(src, lengths)
        paced_memory, paced_state = paced.encode(src, lengths)
        fed = torch.ones(4, dtype=torch.long)
        expected = model.decode_step(fed, state, memory)
        got = paced.decode_step(fed, paced_state, paced_memory)
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[2], expected[2])
    assert tuner.state.skip == QUICK.warmup_units - 1  # the step was a unit the tuner saw


def test_commands_take_threads_and_refuse_a_bad_count(tmp_path):
    result = runner.invoke(app, ["translate", "--model", str(tmp_path), "--threads", "many", "--text", "hi"])
    assert result.exit_code != 0
    assert "--threads: got 'many', expected 'auto' or a number of threads" in result.output


# ---- a real load ----


def _spin() -> None:
    while True:
        pass


class StopWhenChosen(Callback):
    """Ends the run at the first validation after the tuner's first choice."""

    def __init__(self):
        self.decisions: list[Decision] = []

    def on_start(self, trainer, resumed: bool) -> None:
        logged = trainer.threads.on_decision

        def seen(decision: Decision) -> None:
            self.decisions.append(decision)
            logged(decision)

        trainer.threads.on_decision = seen

    def after_validation(self, trainer, record) -> str | None:
        return "the tuner chose" if self.decisions else None


@pytest.mark.slow
@pytest.mark.skipif(usable_cores() < 2, reason="one core: there is no count to choose")
def test_beside_busy_processes_training_moves_off_the_slow_count(tmp_path):
    """One busy process per core but one: every count above one waits at each barrier for a
    thread the scheduler took away, while one thread keeps its core. The run ends when the tuner
    has chosen (a validation every 10 steps asks), whatever the machine's speed."""
    cores = usable_cores()
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    widths = dict.fromkeys(("embed_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "output_dim"), 192)
    raw = tiny_config(
        tmp_path,
        data,
        model=widths,
        train={"epochs": 500, "patience": 0, "batch_size": 32, "threads": "auto", "validate_every": 10, "probes": 0},
        decode={"beam_size": 1},
    )
    config = config_from_dict(raw)
    prepare(config, log=lambda _: None)
    context = multiprocessing.get_context("spawn")
    busy = [context.Process(target=_spin, daemon=True) for _ in range(cores - 1)]
    for process in busy:
        process.start()
    watcher = StopWhenChosen()
    try:
        trainer = build_trainer(config, torch.device("cpu"), show_bar=False, echo=False, callbacks=[watcher])
        trainer.run()
    finally:
        for process in busy:
            process.terminate()
            process.join()
    assert watcher.decisions, "the run ended before the tuner chose"
    chosen = watcher.decisions[0]
    assert chosen.threads < cores, f"stayed at {cores} threads beside {cores - 1} busy processes: {chosen.rates}"
    assert chosen.rates[1] > chosen.rates[cores]
    log = (Path(config.run_dir) / "train.log").read_text(encoding="utf-8")
    assert "Threads measured at the start (" in log


def test_load_config_keeps_a_pinned_count(tmp_path):
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    config_path = tmp_path / "c.yaml"
    import yaml

    config_path.write_text(yaml.safe_dump(tiny_config(tmp_path, data, train={"threads": 2})), encoding="utf-8")
    assert load_config(config_path, []).train.threads == 2
    shutil.rmtree(tmp_path / "run", ignore_errors=True)


def test_decoding_measures_in_turns_whose_first_unit_is_left_out():
    """Decoding steps last milliseconds: a count runs a few in a row, and the first of each turn
    (its threads waking, the last count's winding down) is not counted."""
    settings = TunerSettings(measure_seconds=0.0, min_units=3, turn_units=4, warmup_units=0)
    decisions: list[Decision] = []
    tuner = ThreadTuner([1, 2], settings, on_decision=decisions.append, load=NoLoad())  # type: ignore[arg-type]
    used = []
    for unit in range(10):
        used.append(tuner.threads)
        # the first unit of each turn is slow whatever the count: counted, it would turn the choice
        first_of_turn = unit % 4 == 0
        tuner.record(100.0, 1.0 if first_of_turn and tuner.threads == 1 else {2: 0.02, 1: 0.01}[tuner.threads])
    assert used[:8] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert decisions and decisions[0].threads == 1 and decisions[0].rates == pytest.approx({2: 5000.0, 1: 10000.0})


@pytest.fixture
def threads_restored():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_a_thread_count_is_bounded_by_the_cores_and_a_typo_is_refused(monkeypatch, threads_restored):
    """1,000 threads on 2 cores trained 270x slower; a 20-digit count gave a traceback."""
    from nmt.core import threads as threads_module

    monkeypatch.setattr(threads_module, "usable_cores", lambda: 2)
    said: list[str] = []
    assert not make_tuner(1000, torch.device("cpu"), say=said.append).measures
    assert torch.get_num_threads() == 2 and "1000 asked for" in said[0] and "2 core(s)" in said[0]
    for text in ("100000000000000000000", "1025", "-1", "many"):
        with pytest.raises(NmtError, match=r"from 0 .* to 1024"):
            parse_setting(text, "--threads")
    with pytest.raises(NmtError, match=r"train\.threads.*to 1024"):
        config_from_dict({"train": {"threads": 10**20}})


def test_auto_says_when_the_environment_or_one_core_decides(monkeypatch, threads_restored):
    from nmt.core import threads as threads_module

    monkeypatch.setattr(threads_module, "usable_cores", lambda: 4)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    said: list[str] = []
    assert not make_tuner("auto", torch.device("cpu"), say=said.append).measures
    assert torch.get_num_threads() == 1 and said == ["Threads: 1 (as OMP_NUM_THREADS=1 asks, so nothing to measure)."]
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    tuner = make_tuner("auto", torch.device("cpu"), say=said.append)
    assert isinstance(tuner, ThreadTuner) and tuner.cores == 2 and "at most 2, as OMP_NUM_THREADS=2 asks" in said[-1]
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(threads_module, "usable_cores", lambda: 1)  # taskset -c 0
    said.clear()
    assert not make_tuner("auto", torch.device("cpu"), say=said.append).measures and "one core" in said[0]
