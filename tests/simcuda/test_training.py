"""The training step on the simulated CUDA device: equal to the CPU's, and never a host sync."""

from __future__ import annotations

import pytest
import torch

from nmt.config.files import load_config
from nmt.pipelines.prepare import prepare
from nmt.training import trainer as trainer_module
from nmt.training.trainer import build_trainer

from .conftest import autocast_enables, write_config
from .simulator import CudaTensor, HostSyncError, SimulatedCuda

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)
STEPS = 4


def test_the_shim_loaded_before_torch_and_autocast_really_enables():
    assert torch._C._get_accelerator().type == "cuda" and torch.cuda.is_available()
    assert autocast_enables(torch.float16) and autocast_enables(torch.bfloat16)
    assert torch.amp.GradScaler("cuda").is_enabled()
    with SimulatedCuda() as mode:
        x = torch.ones(3, device="cuda")
        assert isinstance(x, CudaTensor) and x.device == CUDA
        with pytest.raises(HostSyncError, match=r"test_training\.py"):
            float(x.sum())
    assert [s.op for s in mode.syncs] == ["aten._local_scalar_dense.default"]


def train_steps(config, device: torch.device, mode: SimulatedCuda | None = None):
    """STEPS updates of a fresh trainer on ``device``: the step results and the trainer. Under
    ``mode`` the trainer is built leniently and the steps strictly (no host sync at all)."""
    trainer = build_trainer(config, device, show_bar=False)
    batches = list(trainer.loader.batches(trainer.data.train, [list(range(16))] * STEPS))
    meter = trainer_module.EpochMeter(trainer.progress, trainer.device)
    if mode is not None:
        mode.strict = True
    results = []
    for number, batch in enumerate(batches, start=1):
        tokens = batch.num_tgt_tokens  # on the CPU batch, as the loop counts them
        result = trainer.train_batch(batch, tokens, 1, number, 16)
        meter.add(result, tokens)
        results.append(result)
    if mode is not None:
        mode.strict = False
    return results, trainer


def host(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.data_on_host if isinstance(tensor, CudaTensor) else tensor


def figures(results) -> list[float]:
    """Each step's loss and gradient norm."""
    return [float(host(value)) for r in results for value in (r.loss_sum, r.grad_norm)]


def weights(trainer) -> dict[str, torch.Tensor]:
    return {name: host(p.detach()).clone() for name, p in trainer.model.named_parameters()}


# a small Transformer, its dropouts off (CUDA's fused dropout draws other numbers than the CPU's)
TRANSFORMER = {
    "arch": "transformer",
    "heads": 4,
    "ff_dim": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "attention_dropout": 0.0,
}

VARIANTS = {
    "packed-gru": ({}, {}),
    "padded-encoder": ({"rnn_input": "padded"}, {}),
    "lstm-2-layers": ({"rnn": "lstm", "encoder_layers": 2, "decoder_layers": 2}, {}),
    "input-feeding-local-p": ({"attention": "luong-general", "input_feeding": True, "attention_window": "local-p"}, {}),
    "hard-attention": ({"attention": "hard"}, {}),
    "no-attention-tied": ({"attention": "none", "tie_embeddings": True}, {}),
    "sampling-word-dropout-ema": ({}, {"teacher_forcing": 0.7, "word_dropout": 0.1, "ema_decay": 0.9}),
    "transformer-warm-up": (TRANSFORMER, {"lr_schedule": "inverse_sqrt", "lr_warmup": 3}),
    "transformer-learned-tied": ({**TRANSFORMER, "positions": "learned", "tie_embeddings": True}, {}),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_float32_steps_on_cuda_equal_the_cpus_without_a_host_sync(tmp_path, variant):
    model, train = VARIANTS[variant]
    config = load_config(write_config(tmp_path, model=model, precision="float32", **train))
    prepare(config, log=lambda _: None)
    on_cpu, cpu_trainer = train_steps(config, CPU)
    with SimulatedCuda(strict=False) as mode:
        on_cuda, cuda_trainer = train_steps(config, CUDA, mode)
        assert all(r.loss_sum.device == CUDA and r.grad_norm.device == CUDA for r in on_cuda)
        assert next(cuda_trainer.model.parameters()).device == CUDA
        cuda_weights = weights(cuda_trainer)
    assert figures(on_cuda) == pytest.approx(figures(on_cpu), rel=1e-5)
    cpu_weights = weights(cpu_trainer)
    # Adam divides each update by its gradient's running scale: a weight whose gradient is near zero
    # moves by rounding's share of it, so a weight may differ by more than its gradients do (one of
    # 2,048 here: 1.1e-5 with an Intel Xeon's default kernels, 2.8e-5 with its AVX2 ones)
    for name, weight in cuda_weights.items():
        torch.testing.assert_close(weight, cpu_weights[name], rtol=0, atol=1e-4, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_mixed_precision_steps_run_under_cudas_autocast_without_a_host_sync(tmp_path, precision, arch):
    """bf16, and fp16 with the loss scaler and the fused Adam's found_inf: CUDA's autocast
    rules (not the CPU's) really apply, and the figures stay near float32's."""
    model = TRANSFORMER if arch == "transformer" else {}
    config = load_config(write_config(tmp_path, model=model, precision=precision))
    prepare(config, log=lambda _: None)
    on_cpu, _ = train_steps(config, CPU)
    with SimulatedCuda(strict=False) as mode:
        on_cuda, trainer = train_steps(config, CUDA, mode)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    assert mode.dtype_ops[dtype] > 0, "autocast never ran an op in low precision"
    assert (trainer.scaler is not None) == (precision == "fp16")
    assert figures(on_cuda) == pytest.approx(figures(on_cpu), rel=0.05)


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_dropout_between_stacked_layers_trains_on_cuda_without_a_host_sync(tmp_path, rnn):
    """CUDA's dropout is its fused kernel, which draws other numbers than the CPU's: the steps
    are checked for no host sync and a sane loss, not equality."""
    model = {"dropout": 0.3, "rnn": rnn, "encoder_layers": 2, "decoder_layers": 2}
    config = load_config(write_config(tmp_path, model=model, precision="float32"))
    prepare(config, log=lambda _: None)
    on_cpu, _ = train_steps(config, CPU)
    with SimulatedCuda(strict=False) as mode:
        on_cuda, _ = train_steps(config, CUDA, mode)
    assert figures(on_cuda) == pytest.approx(figures(on_cpu), rel=0.2)
    assert figures(on_cuda) != figures(on_cpu)  # the fused kernel's dropout did run


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_reduce_overhead_on_cuda_pads_every_batch_to_a_graph_bucket(tmp_path, monkeypatch, arch):
    """CUDA graphs replay one shape each: under train.compile reduce-overhead the trainer pads a
    batch to GRAPH_BUCKET multiples before it reaches the device, a Transformer's targets too (the
    capture itself needs a GPU: the compiler is left out here, and tests/test_batching.py checks
    the padding changes nothing)."""
    from nmt.model.fast import GRAPH_BUCKET
    from nmt.model.rnn.model import Seq2Seq
    from nmt.model.transformer.model import Transformer

    model = TRANSFORMER if arch == "transformer" else {}
    config = load_config(write_config(tmp_path, model=model, compile="reduce-overhead"))
    prepare(config, log=lambda _: None)
    for family in (Seq2Seq, Transformer):
        monkeypatch.setattr(family, "compile_steps", lambda self, mode, backend="inductor": None)
    shapes = []
    padded = trainer_module.padded_to_bucket

    def recorded(batch, *bucket):
        grown = padded(batch, *bucket)
        shapes.append((*grown.src.shape, grown.tgt_in.size(1)))
        return grown

    monkeypatch.setattr(trainer_module, "padded_to_bucket", recorded)
    with SimulatedCuda(strict=False) as mode:
        results, _ = train_steps(config, CUDA, mode)
    rows, positions = GRAPH_BUCKET
    assert len(shapes) == STEPS and all(r % rows == 0 and s % positions == 0 for r, s, _ in shapes)
    assert all(loss > 0 for loss in figures(results)[::2])
    if arch == "transformer":  # its layers see every target position: those are bucketed as well
        assert all(t % positions == 0 for _, _, t in shapes)
        return  # its padded batch against the plain one: tests/test_batching.py, parameter by parameter
    on_cpu, _ = train_steps(config, CPU)  # on the CPU nothing is graphed, nothing padded
    assert len(shapes) == STEPS
    # The first step's loss and gradient norm are the padded batch's against the plain one: equal
    # up to the order of float32 sums. Later steps drift by 1e-3 where Adam scales the gradients'
    # rounding noise on parameters a softmax ignores into full-size steps, as for any two kernels.
    assert figures(results)[:2] == pytest.approx(figures(on_cpu)[:2], rel=1e-4)
    assert figures(results) == pytest.approx(figures(on_cpu), rel=1e-2)


def test_a_command_the_trainer_and_a_loaded_model_on_cuda_switch_cudnns_attention_off(tmp_path):
    """cuDNN's attention builds a plan for every new shape (docs/benchmarks.md): each way onto a
    CUDA device switches it off (nmt.core.device.skip_cudnn_attention), and a run puts it back."""
    from nmt.core.device import ProcessSettings, prepare_device
    from nmt.runtime.loading import _one_or_ensemble

    from ..helpers import small_model

    config = load_config(write_config(tmp_path, model=TRANSFORMER))
    prepare(config, log=lambda _: None)
    before = ProcessSettings.current()
    with SimulatedCuda(strict=False):
        try:
            for way_onto_cuda in (
                lambda: prepare_device("cuda"),  # every command
                lambda: build_trainer(config, CUDA, show_bar=False),  # training from Python
                lambda: _one_or_ensemble([small_model()], CUDA),  # a model loaded for search
            ):
                torch.backends.cuda.enable_cudnn_sdp(True)
                way_onto_cuda()
                assert not torch.backends.cuda.cudnn_sdp_enabled()
        finally:
            before.restore()
    assert ProcessSettings.current() == before
