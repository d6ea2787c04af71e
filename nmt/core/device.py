"""The device and precision policy, in one place (docs/tutorials/hardware.md).

Device (``train.device`` / ``--device``): ``auto`` takes a CUDA GPU, then Apple's MPS, then
the CPU; ``NMT_DEVICE`` in the environment says what ``auto`` means instead (the test suite
sets it to ``cpu`` so that its results do not depend on the machine).

Precision (``train.precision``), for the training step:

=========  ==================================================================================
auto       bf16 autocast on a CUDA GPU with native bf16 (compute capability 8.0 or more:
           A100, H100, RTX 30xx and later); fp16 autocast with loss scaling on older CUDA
           GPUs (T4, V100: bf16 there is emulated and slow); float32 on MPS and the CPU.
float32    no autocast (TF32 tensor cores for matrix products on a CUDA GPU).
bf16       bf16 autocast, wherever asked.
fp16       fp16 autocast with a GradScaler (dynamic loss scaling), wherever asked.
=========  ==================================================================================

Under autocast only the attention, the output layers and the loss's inputs run in the lower
precision: the recurrences (the encoder's cuDNN RNN and the decoder's step) are kept in
float32 (``nmt.model.fast.float32_recurrence``), since cuDNN's autocast casts an RNN to fp16
whatever dtype was asked for, and a recurrent state rounded at every step drifts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from nmt.core.errors import NmtError

DEVICE_NAMES = ("auto", "cpu", "cuda", "mps")
PRECISION_NAMES = ("auto", "float32", "bf16", "fp16")
NATIVE_BF16_CAPABILITY = (8, 0)  # Ampere: the first NVIDIA GPUs with bf16 tensor cores


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return backend is not None and backend.is_available()


def select_device(name: str) -> torch.device:
    """auto | cpu | cuda | mps -> the device (auto: CUDA, then MPS, then the CPU)."""
    if name not in DEVICE_NAMES:
        raise NmtError(f"--device: got {name!r}, expected one of {', '.join(map(repr, DEVICE_NAMES))}.")
    if name == "auto":
        override = os.environ.get("NMT_DEVICE", "").strip()
        if override and override != "auto":
            return select_device(override)
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if mps_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise NmtError("Device 'cuda' was asked for, but PyTorch sees no CUDA GPU. Use --device cpu or auto.")
    if name == "mps" and not mps_available():
        raise NmtError("Device 'mps' was asked for, but PyTorch sees no Apple GPU (MPS). Use --device cpu or auto.")
    return torch.device(name)


@dataclass(frozen=True)
class Precision:
    """What ``train.precision`` resolved to on one device."""

    autocast: torch.dtype | None  # None: plain float32
    loss_scaling: bool  # a GradScaler (fp16 only)

    def describe(self, recurrent: bool = True) -> str:
        """For the training log; ``recurrent``: the model has recurrences, which stay in float32."""
        if self.autocast is None:
            return "float32"
        name = "bf16" if self.autocast is torch.bfloat16 else "fp16"
        kept = ", float32 recurrences" if recurrent else ""
        return f"{name} autocast" + (" with loss scaling" if self.loss_scaling else "") + kept


FLOAT32 = Precision(None, False)
BF16 = Precision(torch.bfloat16, False)
FP16 = Precision(torch.float16, True)


def cuda_capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def select_precision(name: str, device: torch.device) -> Precision:
    """``train.precision`` on ``device``, by the table in this module's docstring."""
    if name not in PRECISION_NAMES:
        raise NmtError(f"train.precision: got {name!r}, expected one of {', '.join(map(repr, PRECISION_NAMES))}.")
    if name != "auto":
        return {"float32": FLOAT32, "bf16": BF16, "fp16": FP16}[name]
    if device.type != "cuda":
        return FLOAT32
    return BF16 if cuda_capability(device) >= NATIVE_BF16_CAPABILITY else FP16


def prepare_device(name: str) -> torch.device:
    """The device named (``select_device``), set up as every command runs on it: on a CUDA GPU,
    TF32 matrix products (``enable_tf32``) and attention without cuDNN's kernel
    (``skip_cudnn_attention``). Commands, benchmarks and studies all start here, so that what a
    study measures is what a command would run."""
    device = select_device(name)
    enable_tf32(device)
    skip_cudnn_attention(device)
    return device


def skip_cudnn_attention(device: torch.device) -> None:
    """On a CUDA device, switch off cuDNN's fused attention kernel (process-wide), leaving the
    flash and memory-efficient ones. PyTorch 2.11 picks cuDNN's for the Transformer's padding
    and causal masks, and cuDNN builds a plan for every new shape: on an H200, a training step
    of a new batch shape took 364 ms with it against 30 ms without, and once built it was no
    faster (22.3 against 20.6 ms a step). Batches by tokens bring new shapes all the time, and
    search a new key length at every step. The commands, the trainer and loaded models set it."""
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)


def enable_tf32(device: torch.device) -> None:
    """On a CUDA device, let float32 matrix products and cuDNN RNNs use TF32 tensor cores
    (10-bit mantissa inputs, float32 accumulation). A process-wide switch; no-op elsewhere.

    Set through the legacy ``allow_tf32`` flags on purpose: PyTorch 2.9+ reads them through its
    new ``fp32_precision`` switches too, while setting the new switches makes any later read
    of the legacy flags raise ("mix of the legacy and new APIs") in every library of the process."""
    if device.type != "cuda":
        return
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def make_deterministic(device: torch.device) -> None:
    """``train.deterministic``: the same run gives the same bits, resumed or not, on a GPU too.
    cuBLAS gets a fixed workspace, cuDNN its deterministic algorithms and no autotuning, and
    PyTorch refuses (warns about) any op without a deterministic implementation. On CUDA the
    fused attention kernels are switched off: in warn-only mode PyTorch still picks the flash
    and memory-efficient kernels, whose backward passes add in a varying order, so the
    Transformer's attention runs the plain (math) kernel. Costs speed on a GPU
    (docs/benchmarks.md); nothing on a CPU, whose kernels are deterministic already."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    if device.type == "cuda":  # the CPU's fused attention is deterministic
        for switch in FUSED_ATTENTION:
            getattr(torch.backends.cuda, f"enable_{switch}_sdp")(False)


# torch.backends.cuda's switches for the fused scaled_dot_product_attention kernels (each has an
# enable_<name>_sdp setter and a <name>_sdp_enabled getter)
FUSED_ATTENTION = ("flash", "mem_efficient", "cudnn")


@dataclass(frozen=True)
class ProcessSettings:
    """The process-wide switches training sets (torch's CPU threads, deterministic
    algorithms), read so that they can be put back when a run ends: a second model trained,
    compiled or evaluated in the same process (a tuning study, a notebook, a server, the test
    suite) must not inherit the first run's."""

    threads: int
    deterministic: bool
    warn_only: bool
    cudnn_deterministic: bool
    cudnn_benchmark: bool
    fused_attention: tuple[bool, ...]  # FUSED_ATTENTION's switches, in order

    @classmethod
    def current(cls) -> ProcessSettings:
        return cls(
            torch.get_num_threads(),
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
            torch.backends.cudnn.deterministic,
            torch.backends.cudnn.benchmark,
            tuple(getattr(torch.backends.cuda, f"{switch}_sdp_enabled")() for switch in FUSED_ATTENTION),
        )

    def restore(self) -> None:
        torch.set_num_threads(self.threads)
        torch.use_deterministic_algorithms(self.deterministic, warn_only=self.warn_only)
        torch.backends.cudnn.deterministic = self.cudnn_deterministic
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        for switch, enabled in zip(FUSED_ATTENTION, self.fused_attention, strict=True):
            getattr(torch.backends.cuda, f"enable_{switch}_sdp")(enabled)
