"""The device and precision policy (nmt/core/device.py), with the GPU's properties mocked; the
float32 recurrences under autocast; loss scaling; random states that survive any number of
visible GPUs and ranks."""

from __future__ import annotations

import random

import pytest
import torch

from nmt.config.checks import check_model_combination
from nmt.config.parsing import config_from_dict
from nmt.config.schema import TrainConfig
from nmt.core.device import (
    BF16,
    FLOAT32,
    FP16,
    FUSED_ATTENTION,
    ProcessSettings,
    make_deterministic,
    select_device,
    select_precision,
    skip_cudnn_attention,
)
from nmt.core.errors import NmtError
from nmt.data.batching import Example, collate
from nmt.training.state import rank_seed, rng_state, set_rng_state
from nmt.training.step import train_step

from .helpers import model_config, small_model


@pytest.fixture
def gpus(monkeypatch):
    """Pretend this machine has a CUDA GPU (or MPS) with a given compute capability."""

    def pretend(cuda: bool = False, mps: bool = False, capability: tuple[int, int] = (8, 0)):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr("nmt.core.device.mps_available", lambda: mps)
        monkeypatch.setattr("nmt.core.device.cuda_capability", lambda device: capability)

    monkeypatch.delenv("NMT_DEVICE", raising=False)
    return pretend


@pytest.mark.parametrize(
    "cuda, mps, expected", [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu")]
)
def test_auto_takes_cuda_then_mps_then_the_cpu(gpus, cuda, mps, expected):
    gpus(cuda=cuda, mps=mps)
    assert select_device("auto").type == expected


def test_nmt_device_says_what_auto_means(gpus, monkeypatch):
    gpus(cuda=True)
    monkeypatch.setenv("NMT_DEVICE", "cpu")
    assert select_device("auto").type == "cpu"
    assert select_device("cuda").type == "cuda"  # a device named outright is taken as named


def test_a_missing_or_unknown_device_is_a_clear_error(gpus):
    gpus()
    with pytest.raises(NmtError, match="no CUDA GPU"):
        select_device("cuda")
    with pytest.raises(NmtError, match="no Apple GPU"):
        select_device("mps")
    with pytest.raises(NmtError, match="expected one of 'auto', 'cpu', 'cuda', 'mps'"):
        select_device("tpu")


@pytest.mark.parametrize(
    "capability, expected",
    [((9, 0), BF16), ((8, 0), BF16), ((8, 6), BF16), ((7, 5), FP16), ((7, 0), FP16), ((6, 1), FP16)],
)
def test_auto_precision_on_cuda_follows_native_bf16(gpus, capability, expected):
    gpus(cuda=True, capability=capability)
    assert select_precision("auto", torch.device("cuda")) == expected


def test_fp16_always_comes_with_loss_scaling_and_bf16_never():
    assert FP16.autocast is torch.float16 and FP16.loss_scaling
    assert BF16.autocast is torch.bfloat16 and not BF16.loss_scaling
    assert "loss scaling" in FP16.describe() and "float32 recurrences" in BF16.describe()
    assert BF16.describe(recurrent=False) == "bf16 autocast"  # a Transformer has no recurrence to keep


@pytest.mark.parametrize("device", ["cpu", "mps"])
def test_auto_precision_is_float32_off_cuda(gpus, device):
    gpus(mps=True)
    assert select_precision("auto", torch.device(device)) == FLOAT32


def test_an_explicit_precision_is_taken_as_asked(gpus):
    gpus(cuda=True, capability=(7, 5))
    assert select_precision("bf16", torch.device("cuda")) == BF16
    assert select_precision("float32", torch.device("cuda")) == FLOAT32
    assert select_precision("fp16", torch.device("cpu")) == FP16


def test_the_config_names_the_allowed_precisions():
    def config(precision: str):
        train = {"precision": precision, "epochs": 1, "batch_size": 2}
        return config_from_dict({"run_dir": "r", "data": {"path": "p.tsv"}, "train": train, "decode": {"beam_size": 1}})

    assert config("fp16").train.precision == "fp16"
    with pytest.raises(NmtError, match=r"train\.precision.*'auto'.*'float32'.*'bf16'.*'fp16'"):
        config("half")


def batch_of(seed: int = 0, vocab: int = 20):
    rng = random.Random(seed)
    examples = [
        Example(
            [rng.randrange(4, vocab) for _ in range(rng.randint(2, 7))], [rng.randrange(4, vocab) for _ in range(5)]
        )
        for _ in range(6)
    ]
    return collate(examples)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "order",
    [
        dict(attention="bahdanau"),
        dict(attention="luong-general"),
        dict(attention="luong-general", input_feeding=True),
        dict(attention="luong-concat", bridge="both", rnn_input="padded"),
    ],
)
def test_recurrences_stay_float32_under_autocast(order, dtype):
    """Everything recurrent that crosses from encoder to decoder, or from step to step, is
    float32 under autocast; the gradients are finite and reach every weight."""
    check_model_combination(model_config(**order))
    model = small_model(**order)
    batch = batch_of()
    with torch.autocast("cpu", dtype=dtype):
        enc_outputs, backward_final = model.encoder(batch.src, batch.src_lengths)
        memory, state = model.encode(batch.src, batch.src_lengths)
        _, stepped, _ = model.decode_step(batch.tgt_in[:, 0], state, memory)
        logits, _ = model(batch.src, batch.src_lengths, batch.tgt_in)
    assert enc_outputs.dtype == backward_final.dtype == memory.enc_outputs.dtype == torch.float32
    assert state.hidden.dtype == stepped.hidden.dtype == torch.float32
    assert logits.dtype == dtype  # the output layer is where autocast pays
    logits.float().logsumexp(-1).sum().backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


def test_fp16_with_loss_scaling_trains_and_scales():
    model = small_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1)
    before = [p.detach().clone() for p in model.parameters()]
    batch = batch_of()
    result = train_step(model, batch, optimizer, TrainConfig(), batch.num_tgt_tokens, FP16, scaler)
    assert torch.isfinite(result.loss_sum) and not result.nonfinite
    assert scaler.get_scale() == 2.0**11  # a step without overflow grows the scale
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_an_overflowing_fp16_step_is_skipped_by_the_scaler_and_counted():
    """Counted as skipped (train.max_nonfinite then stops a scale that never recovers), and its
    gradient norm is no figure (the epoch's mean leaves skipped steps out, not as zeros)."""
    model = small_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)  # the scaled loss overflows float32
    before = [p.detach().clone() for p in model.parameters()]
    batch = batch_of()
    result = train_step(model, batch, optimizer, TrainConfig(), batch.num_tgt_tokens, FP16, scaler)
    assert result.nonfinite and not torch.isfinite(result.grad_norm)
    assert scaler.get_scale() == 2.0**126  # the scale backs off
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_rng_states_are_saved_per_rank_and_restored_with_any_number_of_gpus():
    cpu = torch.device("cpu")
    torch.manual_seed(1)
    first = rng_state(cpu)
    expected_first = torch.rand(3)
    torch.manual_seed(2)
    second = rng_state(cpu)
    expected_second = torch.rand(3)
    set_rng_state([first, second], cpu, seed=7, rank=1, step=40)
    assert torch.equal(torch.rand(3), expected_second)
    # more ranks than saved: a stream of the rank's own from (seed, rank, step), not rank 0's again
    set_rng_state([first, second], cpu, seed=7, rank=5, step=40)
    drawn = torch.rand(3)
    assert not torch.equal(drawn, expected_first) and not torch.equal(drawn, expected_second)
    torch.manual_seed(rank_seed(7, 5, 40))
    assert torch.equal(drawn, torch.rand(3))
    set_rng_state([first, second], cpu, seed=7, rank=6, step=40)
    assert not torch.equal(torch.rand(3), drawn)  # and each extra rank its own
    # one state (a run of one process) is rank 0's
    set_rng_state(first, cpu, seed=7)
    assert torch.equal(torch.rand(3), expected_first)
    # a checkpoint from before, with one CUDA state per visible GPU, restores on the CPU
    old = {**first, "cuda": [torch.zeros(8, dtype=torch.uint8)] * 4}
    set_rng_state(old, cpu, seed=7)
    assert torch.equal(torch.rand(3), expected_first)


def test_deterministic_mode_switches_the_global_flags():
    try:
        make_deterministic(torch.device("cpu"))
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False


def test_deterministic_mode_on_cuda_switches_off_fused_attention_and_a_run_puts_it_back():
    """In warn-only mode PyTorch still picks the flash and memory-efficient attention kernels,
    whose backward passes are not deterministic: on CUDA the Transformer must run the math kernel.
    The switches are process-wide flags, settable without a GPU."""
    fused = [getattr(torch.backends.cuda, f"{switch}_sdp_enabled") for switch in FUSED_ATTENTION]
    before = ProcessSettings.current()
    try:
        for switch in FUSED_ATTENTION:
            getattr(torch.backends.cuda, f"enable_{switch}_sdp")(True)
        make_deterministic(torch.device("cpu"))
        assert all(enabled() for enabled in fused)  # the CPU's fused kernel is deterministic: kept
        make_deterministic(torch.device("cuda"))
        assert not any(enabled() for enabled in fused)
    finally:
        before.restore()
    assert ProcessSettings.current() == before


def test_cudnns_attention_kernel_is_switched_off_on_cuda_only():
    """cuDNN's fused attention builds a plan for every new shape (364 ms against 30 ms a step on an
    H200 at each new batch shape): switched off on CUDA, and nothing changes elsewhere."""
    before = ProcessSettings.current()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        skip_cudnn_attention(torch.device("cpu"))
        assert torch.backends.cuda.cudnn_sdp_enabled()
        skip_cudnn_attention(torch.device("cuda"))  # a process-wide flag: settable without a GPU
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        before.restore()
    assert ProcessSettings.current() == before  # where the trainer, a command and a load set it: tests/simcuda
