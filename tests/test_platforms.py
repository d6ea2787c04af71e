"""Faults of the GPU, Mac and torchrun paths that a CPU can show (issue: right on a Mac, a
Colab GPU and a multi-GPU node). The GPU-only ones are in tests/test_gpu.py."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from nmt.config.parsing import config_from_dict
from nmt.config.schema import TrainConfig
from nmt.core.device import FP16, ProcessSettings, enable_tf32
from nmt.core.errors import NmtError
from nmt.data.batching import Batch
from nmt.decoding.search import search_sentences
from nmt.model.rnn.encoder import encoder_input
from nmt.pipelines.prepare import prepare
from nmt.training.distributed import Distributed
from nmt.training.metrics import MetricsFile
from nmt.training.state import rank_seed
from nmt.training.step import train_step
from nmt.training.trainer import build_trainer

from .helpers import random_sources, small_model, synthetic_pairs, tiny_config, write_anki
from .test_transformer import small_transformer


class NoFloat64(TorchDispatchMode):
    """Fails on any op that makes a float64 tensor (MPS has none)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(value, torch.Tensor) and value.dtype == torch.float64:
                raise AssertionError(f"{func} made a float64 tensor")
        return out


def built_trainer(tmp_path, **train):
    raw = tiny_config(tmp_path, write_anki(tmp_path / "p.txt", synthetic_pairs()), train={"epochs": 1, **train})
    config = config_from_dict(raw)
    prepare(config, log=lambda _: None)
    return build_trainer(config, torch.device("cpu"), show_bar=False)


def test_training_validation_and_beam_search_make_no_float64_tensor(tmp_path):
    trainer = built_trainer(tmp_path)
    with NoFloat64():
        trainer.run()  # one epoch, a validation, checkpoints, probes
        found = search_sentences(trainer.model, trainer.data.dev_sources[:8], trainer.config.decode, trainer.device)
    assert trainer.progress.epoch == 1 and len(found) == 8


def test_a_cut_last_line_in_metrics_and_timeline_does_not_block_resume(tmp_path):
    """A Colab VM that dies mid-write leaves half a record; --resume goes on, and drops it."""
    trainer = built_trainer(tmp_path)
    trainer.run()
    for path in (trainer.run_dir.metrics, trainer.run_dir.timeline):
        with open(path, "a", encoding="utf-8") as handle:
            handle.write('{"epoch": 2, "step": 1')  # cut short: no closing brace, no newline
    assert [r["epoch"] for r in trainer.metrics.read()] == [1]
    longer = dataclasses.replace(trainer.config, train=dataclasses.replace(trainer.config.train, epochs=2))
    again = build_trainer(longer, torch.device("cpu"), show_bar=False)
    again.run(resume=True)
    assert [r["epoch"] for r in again.metrics.read()] == [1, 2]
    assert [r["epoch"] for r in again.timeline.read()] == [1, 2]
    assert '"step": 1{' not in trainer.run_dir.metrics.read_text(encoding="utf-8")


def test_a_damaged_line_before_the_last_is_named(tmp_path):
    metrics = MetricsFile(tmp_path / "metrics.jsonl")
    metrics.path.write_text('{"epoch": 1}\n{"epoch": 2\n{"epoch": 3}\n', encoding="utf-8")
    with pytest.raises(NmtError, match=r"metrics.jsonl, line 2: not a JSON record"):
        metrics.read()


def test_checkpoints_come_on_a_time_interval_inside_an_epoch(tmp_path):
    trainer = built_trainer(tmp_path, checkpoint_minutes=2.5, keep_checkpoints=20)
    minutes = iter(range(1000))
    trainer.control.clock = lambda: 60.0 * next(minutes)  # every look at the clock: a minute later
    trainer.run()
    steps = sorted(int(p.stem.split("-")[1]) for p in trainer.run_dir.step_checkpoints())
    assert len(steps) >= 3 and steps[-1] == trainer.progress.step  # mid-epoch ones, then the epoch's own


def test_a_run_puts_back_the_process_settings_it_changed(tmp_path):
    """A second model in the same process (a study, a notebook, the suite) starts from the same state."""
    before = ProcessSettings.current()
    trainer = built_trainer(tmp_path, threads=1, deterministic=True)
    assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
    trainer.run()
    assert ProcessSettings.current() == before


def test_fp16_nan_gradients_under_a_finite_loss_are_skipped_and_counted():
    """The loss scaler skips such a step and halves its scale; the step must say it was skipped."""
    model = small_model(seed=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    model.decoder.output.weight.register_hook(lambda grad: grad * float("nan"))
    src, lengths = random_sources(4)
    tgt = torch.randint(4, 20, (4, 5))
    batch = Batch(src, lengths, tgt, tgt)
    cfg = TrainConfig(epochs=1, batch_size=4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = train_step(model, batch, optimizer, cfg, 20.0, FP16, scaler)
    assert torch.isfinite(result.loss_sum) and bool(result.nonfinite)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert scaler.get_scale() < 2.0**16  # the scaler saw it too


def test_fp16_training_stops_with_a_clear_message_when_the_scale_cannot_help(tmp_path):
    trainer = built_trainer(tmp_path, precision="fp16", max_nonfinite=3)
    assert trainer.scaler is not None
    for parameter in trainer.model.parameters():
        parameter.register_hook(lambda grad: grad * float("nan"))
    with pytest.raises(NmtError, match=r"3 steps in a row had a non-finite.*train\.precision: bf16 or float32"):
        trainer.run()


def test_a_rank_the_checkpoint_has_no_state_for_gets_its_own_stream(tmp_path):
    """A single-process checkpoint resumed under torchrun: rank 1 must not replay rank 0's draws."""
    trainer = built_trainer(tmp_path)
    trainer.run()
    saved = torch.load(trainer.run_dir.checkpoint("last"), weights_only=True)["rng"]
    rank1 = build_trainer(trainer.config, torch.device("cpu"), Distributed(rank=1, world=2), show_bar=False)
    rank1.restore()
    assert not torch.equal(torch.get_rng_state(), saved["torch"])
    rank0 = build_trainer(trainer.config, torch.device("cpu"), show_bar=False)
    rank0.restore()
    assert torch.equal(torch.get_rng_state(), saved["torch"])
    assert len({rank_seed(7, rank, step) for rank in range(8) for step in (0, 5)}) == 16


def test_a_mid_epoch_resume_under_more_processes_trains_every_pair_of_the_epoch_once(tmp_path):
    """1 process for 3 batches, then 2: each pair of the epoch is in exactly one process's share once."""
    trainer = built_trainer(tmp_path, batch_size=8)
    examples = trainer.data.train
    single = trainer.epoch_plan(examples, 1)
    seen = [i for batch in single[:3] for i in batch]
    trainer.progress.batch_in_epoch = 3
    for rank in range(2):
        trainer.ddp = Distributed(rank=rank, world=2)
        progress = copy.deepcopy(trainer.progress)
        rest = trainer.epoch_plan(examples, 1)
        assert max(len(batch) for batch in rest) <= 16  # batches for the global batch of 2 x 8
        seen += [i for batch in rest for i in trainer.ddp.shard(batch)]
        assert trainer.progress.epoch_done == [[1, 3]] and trainer.progress.batch_in_epoch == 0
        trainer.progress = progress
    assert sorted(seen) == list(range(len(examples)))


def test_tf32_is_set_so_that_both_of_pytorchs_apis_can_read_it():
    """After our switch, another library reading the legacy flags (or the new ones) must not raise."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = (matmul.allow_tf32, cudnn.allow_tf32)
    try:
        enable_tf32(torch.device("cuda"))  # only flags: no GPU needed
        assert matmul.allow_tf32 and cudnn.allow_tf32
        assert matmul.fp32_precision == "tf32" and cudnn.rnn.fp32_precision == "tf32"
        assert torch.get_float32_matmul_precision() in ("high", "medium")
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = before


@pytest.mark.parametrize("overrides", [{}, {"attention": "luong-general", "input_feeding": True, "decoder_layers": 2}])
def test_under_autocast_every_input_projection_of_the_recurrence_is_float32(overrides):
    """README: the recurrences run in float32 under autocast, their input projections (the
    embedding's gates, the fed vector's or the context's, a stacked layer's) included."""
    model = small_model(**overrides).train()
    seen = []

    class Gates(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.ops.aten.addmm.default, torch.ops.aten.mm.default) and out.size(-1) == 3 * 16:
                seen.append(out.dtype)  # (B, 3H): a GRU's gate projection
            return out

    src, lengths = random_sources(4)
    with torch.autocast("cpu", dtype=torch.bfloat16), Gates():
        logits, _ = model(src, lengths, torch.randint(4, 20, (4, 5)))
    assert seen and set(seen) == {torch.float32}
    assert logits.dtype == torch.bfloat16  # the output layer does run in 16 bits


STACKED_LOCAL = {"attention": "luong-general", "input_feeding": True, "rnn": "lstm", "decoder_layers": 2}


@pytest.mark.parametrize("overrides", [{}, {**STACKED_LOCAL, "attention_window": "local-p", "window_width": 2}])
def test_the_compiled_step_body_is_one_graph_for_every_length(overrides):
    """train.compile: no graph breaks around the recurrent cell, no recompilation per length."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = small_model(**overrides)
    model.compile_steps("default", backend="eager")  # Dynamo's tracing is what is checked, not inductor's code

    def train_on(batch: int, length: int) -> int:
        src, lengths = random_sources(batch, seed=length)
        model(src, lengths, torch.randint(4, 20, (batch, length)))[0].sum().backward()
        return counters["stats"]["unique_graphs"]

    first = train_on(4, 3)  # one graph, or two where the first step has no fed vector yet
    assert first <= 2 and [train_on(b, n) for b, n in ((3, 5), (5, 9), (2, 14))] == [first] * 3
    assert not counters["graph_break"], dict(counters["graph_break"])


def test_the_encoder_runs_padded_where_packing_is_unsafe_and_says_so(tmp_path):
    assert encoder_input("auto", torch.device("mps")) == "padded"  # packed sequences: open MPS faults
    assert encoder_input("auto", torch.device("cuda"), stacked_dropout=True) == "padded"  # cuDNN's dropout state
    assert encoder_input("auto", torch.device("cuda")) == encoder_input("auto", torch.device("cpu")) == "packed"
    assert encoder_input("packed", torch.device("mps")) == "packed"  # the config's word is kept
    trainer = built_trainer(tmp_path)
    trainer.device = torch.device("mps")  # only the log line is checked: no MPS needed
    trainer.log_model_notes()  # the family's notes (Seq2Seq.training_notes)
    assert "The encoder runs padded (packed sequences have open faults on MPS)" in trainer.run_dir.train_log.read_text(
        encoding="utf-8"
    )


def test_the_data_loader_and_its_workers_are_kept_across_epochs(tmp_path, monkeypatch):
    made = []

    class Counted(torch.utils.data.DataLoader):
        def __init__(self, *args, **kwargs):
            made.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(torch.utils.data, "DataLoader", Counted)
    trainer = built_trainer(tmp_path, epochs=3, loader_workers=1)
    trainer.run()
    assert trainer.progress.epoch == 3
    assert len(made) == 1 and made[0]["persistent_workers"]  # one loader, its worker forked once
    assert trainer.loader.loader is None  # and stopped when training ended


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_graphed_steps_run_in_training_only_and_search_runs_eagerly(arch):
    """train.compile: reduce-overhead replays CUDA graphs, which treat every call without
    gradients as a new iteration and overwrite outputs a search still holds (an H200 raised
    "accessing tensor output of CUDAGraphs that has been overwritten" in validation): the
    compiled code runs where gradients are on, search runs the same modules eagerly."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = small_transformer() if arch == "transformer" else small_model()
    model.compile_steps("reduce-overhead", backend="eager")
    src, lengths = random_sources(3, seed=1)
    with torch.no_grad():
        model.eval()
        model(src, lengths, torch.randint(4, 20, (3, 5)))
    assert counters["stats"]["unique_graphs"] == 0
    model.train()
    model(src, lengths, torch.randint(4, 20, (3, 5)))[0].sum().backward()
    assert counters["stats"]["unique_graphs"] > 0
