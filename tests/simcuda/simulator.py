"""A CUDA device simulated on the CPU, strict enough to catch what breaks a first GPU run.

Every tensor "on cuda" is a ``CudaTensor``: a wrapper that reports ``device="cuda:0"`` (so
PyTorch's CUDA dispatch keys, autocast rules included, apply to it) around a real CPU tensor
that holds its data. ``SimulatedCuda``, a dispatch mode, runs every op on the CPU tensors and
checks three things on the way:

1. **devices**: an op mixing a cuda tensor with a CPU tensor of one element or more fails, as
   on a GPU, except the ops where CUDA takes CPU arguments (copies, advanced indexing with CPU
   indices, packed-sequence lengths);
2. **host syncs**: every read of a cuda tensor's values by the host (``.item()``, ``bool()``,
   ``.tolist()``, a copy to the CPU, ``nonzero`` and the other ops whose output size depends on
   values) is recorded with the ``nmt/`` line that asked for it, and raises unless that line is
   allowed;
3. **itself**: each result's reported shape, dtype and strides must be its data's, so that a
   slip of the simulator fails loudly instead of passing.

Kernels CUDA has and the CPU has not are emulated (the fused GRU/LSTM cells the CUDA path of
``gru_cell``/``lstm_cell``/``nn.GRU`` calls, softmax of half into float). The CUDA device guard
and hooks come from the C++ shim (shim.cpp), loaded before torch.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

aten = torch.ops.aten
CUDA = torch.device("cuda", 0)
NMT = str(Path(__file__).resolve().parents[2] / "nmt")


class HostSyncError(AssertionError):
    """The host read a cuda tensor's values at a line not allowed to."""


class DeviceMismatchError(RuntimeError):
    """An op mixed a cuda tensor with a CPU tensor, which a GPU refuses."""


class CudaTensor(torch.Tensor):
    """A tensor that reports cuda:0 and keeps its values in ``data_on_host`` (a CPU tensor)."""

    data_on_host: torch.Tensor

    @staticmethod
    def __new__(cls, data_on_host: torch.Tensor) -> CudaTensor:
        assert type(data_on_host) is torch.Tensor and data_on_host.device.type == "cpu", type(data_on_host)
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls,
            data_on_host.size(),
            strides=data_on_host.stride(),
            storage_offset=data_on_host.storage_offset(),
            dtype=data_on_host.dtype,
            layout=data_on_host.layout,
            device=CUDA,
            requires_grad=data_on_host.requires_grad,
            # shape and strides are asked of the data (METADATA below): an in-place op that
            # changes them (CUDA's RNN transposes its output in place) changes what it reports
            dispatch_sizes_strides_policy="sizes",
        )
        wrapper.data_on_host = data_on_host
        return wrapper

    def __reduce_ex__(self, protocol):
        """Saved as its data (torch.save writes it as a CPU tensor where a GPU's says cuda:0;
        a checkpoint is loaded with a map_location either way)."""
        return self.data_on_host.detach().__reduce_ex__(protocol)

    def __repr__(self, *, tensor_contents=None) -> str:  # type: ignore[override]
        return f"CudaTensor({self.data_on_host!r})"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func in METADATA:
            return METADATA[func](args[0].data_on_host, *args[1:])
        raise RuntimeError(f"{func} reached a CudaTensor outside SimulatedCuda: the tier's mode must be active")


# What a CudaTensor reports about itself is its data's.
METADATA = {
    aten.sym_size.default: lambda t: t.size(),
    aten.sym_size.int: lambda t, dim: t.size(dim),
    aten.sym_stride.default: lambda t: t.stride(),
    aten.sym_stride.int: lambda t, dim: t.stride(dim),
    aten.sym_numel.default: lambda t: t.numel(),
    aten.sym_storage_offset.default: lambda t: t.storage_offset(),
    aten.dim.default: lambda t: t.dim(),
    aten.is_contiguous.default: lambda t: t.is_contiguous(),
    aten.is_contiguous.memory_format: lambda t, fmt: t.is_contiguous(memory_format=fmt),
    aten.is_strides_like_format.default: lambda t, fmt: t.is_contiguous(memory_format=fmt),
    aten.is_non_overlapping_and_dense.default: lambda t: t.is_contiguous(),
}
# Ops whose output size depends on the values (CUDA copies them to the host to size the output).
VALUE_SIZED = {
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
    aten.repeat_interleave.Tensor,
    aten.is_nonzero.default,
    aten.equal.default,
    aten._local_scalar_dense.default,
}
# Ops where CUDA accepts CPU tensors beside cuda ones.
MIXED_ALLOWED = {
    aten.copy_.default,
    aten._to_copy.default,
    aten.index.Tensor,
    aten.index_put_.default,
    aten.index_put.default,
    aten._index_put_impl_.default,
    aten._pack_padded_sequence.default,
    aten._pad_packed_sequence.default,
    aten.gru.data,
    aten.lstm.data,
    aten.rnn_tanh.data,
    aten.set_.source_Tensor,
}

# Ops with an output CUDA keeps on the host (by its index): packed sequences' batch sizes, lengths.
HOST_OUTPUTS = {aten._pack_padded_sequence.default: 1, aten._pad_packed_sequence.default: 1}


@dataclass
class HostSync:
    """One read of device values by the host: the op, and the innermost nmt/ line that asked
    (``nmt/decoding/search.py:241``) with its function (``nmt/decoding/search.py::greedy_search``)."""

    op: str
    where: str
    function: str = ""


def asking_frame() -> tuple[str, str]:
    """(file:line, file::function) of the innermost frame in nmt/, or else of the innermost
    frame outside torch and this file."""
    frames = traceback.extract_stack()[:-2]
    chosen = next((f for f in reversed(frames) if f.filename.startswith(NMT)), None)
    if chosen is not None:
        path = Path(chosen.filename).relative_to(Path(NMT).parent)
        return f"{path}:{chosen.lineno}", f"{path}::{chosen.name}"
    chosen = next(
        (f for f in reversed(frames) if "/torch/" not in f.filename and not f.filename.endswith("simulator.py")), None
    )
    return (f"{chosen.filename}:{chosen.lineno}", f"{chosen.filename}::{chosen.name}") if chosen else ("?", "?")


def asking_line() -> str:
    return asking_frame()[0]


@dataclass
class SimulatedCuda(TorchDispatchMode):
    """The dispatch mode that runs cuda ops on the CPU (see the module's docstring).

    ``allowed_syncs``: the nmt/ functions (``nmt/decoding/search.py::greedy_search``) where a
    host read is expected; ``strict``: a read anywhere else raises ``HostSyncError``."""

    strict: bool = True
    allowed_syncs: Iterable[str] = ()
    syncs: list[HostSync] = field(default_factory=list)
    dtype_ops: Counter = field(default_factory=Counter)  # cuda results by dtype: autocast at work

    def __post_init__(self) -> None:
        super().__init__()
        self.allowed = set(self.allowed_syncs)

    def __enter__(self):
        ACTIVE.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        ACTIVE.remove(self)
        return super().__exit__(*exc)

    def host_sync(self, op: str) -> None:
        where, function = asking_frame()
        self.syncs.append(HostSync(op, where, function))
        if self.strict and function not in self.allowed:
            raise HostSyncError(f"host sync ({op}) at {where} ({function}): the GPU would wait for the host here")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in METADATA:
            return CudaTensor.__torch_dispatch__(func, types, args, kwargs)
        on_cuda, on_cpu = tensors_by_device((args, kwargs))
        target = target_device(func, args, kwargs)
        if on_cuda and on_cpu and func not in MIXED_ALLOWED:
            shapes = [tuple(t.shape) for t in on_cpu]
            raise DeviceMismatchError(f"{func} got cuda tensors and CPU tensors of shapes {shapes} at {asking_line()}")
        if on_cuda:
            self.note_host_reads(func, args, target)
        result = run_on_host(func, args, kwargs, on_cuda)
        if func is aten.copy_.default:
            return args[0]
        wrappers = {id(t.data_on_host): t for t in on_cuda}
        if is_copy(func):
            return copied(result, args[0], target, wrappers, func)
        if not (on_cuda or (target is not None and target.type == "cuda")) or func is aten._local_scalar_dense.default:
            return result
        if func in HOST_OUTPUTS:
            kept = HOST_OUTPUTS[func]
            return tuple(out if i == kept else wrap(out, wrappers, func) for i, out in enumerate(result))
        result = tree_map(lambda out: wrap(out, wrappers, func), result)
        tree_map(lambda out: self.dtype_ops.update([out.dtype]) if isinstance(out, CudaTensor) else None, result)
        return result

    def note_host_reads(self, func, args, target: torch.device | None) -> None:
        """An op on cuda tensors that makes the host wait for their values."""
        if func in VALUE_SIZED:
            self.host_sync(str(func))
        elif is_copy(func) and isinstance(args[0], CudaTensor) and target is not None and target.type == "cpu":
            self.host_sync(f"{func} to the host")
        elif func is aten.copy_.default and not isinstance(args[0], CudaTensor):
            self.host_sync("copy_ to the host")
        elif func is aten.index.Tensor and any(i is not None and i.dtype == torch.bool for i in args[1]):
            self.host_sync("index with a bool mask")  # its true count sizes the output


def is_copy(func) -> bool:
    return func is aten._to_copy.default or func.overloadpacket is aten.to


def target_device(func, args, kwargs) -> torch.device | None:
    """The device an op creates its result on, where it names one (factories, copies)."""
    if kwargs.get("device") is not None:
        return torch.device(kwargs["device"])
    if func is aten.to.device:
        return torch.device(args[1])
    if func is aten.to.other:
        return args[1].device
    return None


def run_on_host(func, args, kwargs, on_cuda):
    """The op (or its emulation) on the host's tensors, with any device it names made the CPU."""
    host_args, host_kwargs = tree_map(on_host, (args, kwargs))
    if host_kwargs.get("device") is not None:
        host_kwargs["device"] = torch.device("cpu")
    if func is aten.to.device:
        host_args = (host_args[0], torch.device("cpu"), *host_args[2:])
    try:
        return EMULATED.get(func, func)(*host_args, **host_kwargs)
    except RuntimeError as error:  # the CPU kernel refused: say which op, with which tensors
        described = [f"{tuple(t.shape)} {t.dtype}" for t in on_cuda]
        raise RuntimeError(f"{func} on cuda tensors {described} at {asking_line()}: {error}") from error


def copied(result: torch.Tensor, source, target: torch.device | None, wrappers, func):
    """The result of a copy op (``_to_copy``, ``to``): on cuda, or on the host as a copy of its
    own (``to`` returns its input when nothing changes, which here is the device's data)."""
    to_cuda = target.type == "cuda" if target is not None else isinstance(source, CudaTensor)
    if to_cuda:
        if result is source:  # a CPU tensor's copy, not the tensor itself
            result = result.clone()
        return wrap(result, wrappers, func)
    if isinstance(source, CudaTensor) and result is source.data_on_host:
        return result.clone()
    return result


ACTIVE: list[SimulatedCuda] = []  # the modes entered, innermost last
HOST_TOLIST = torch.Tensor.tolist


def tolist(tensor: torch.Tensor):
    """Tensor.tolist, which PyTorch refuses for a subclass: a host read of a cuda tensor."""
    if not isinstance(tensor, CudaTensor):
        return HOST_TOLIST(tensor)
    if not ACTIVE:
        raise RuntimeError("tolist() of a CudaTensor outside SimulatedCuda: the tier's mode must be active")
    ACTIVE[-1].host_sync("tolist")
    return HOST_TOLIST(tensor.data_on_host)


def numpy(tensor: torch.Tensor, *args, **kwargs):
    if isinstance(tensor, CudaTensor):  # as on a GPU
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor first.")
    return HOST_NUMPY(tensor, *args, **kwargs)


HOST_NUMPY = torch.Tensor.numpy
THREAD_RUN = threading.Thread.run
MODULE_APPLY = torch.nn.Module._apply


def apply_swapping(module: torch.nn.Module, fn, recurse: bool = True):
    """module.to("cuda") swaps each parameter for its CudaTensor in place (the Parameter object
    kept, as on a GPU): by default it assigns param.data, which cannot hold a wrapper. Only
    here: load_state_dict copies into the parameters, as on a GPU, not swaps."""
    before = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        return MODULE_APPLY(module, fn, recurse)
    finally:
        torch.__future__.set_swap_module_params_on_conversion(before)


def run_in_simulation(thread: threading.Thread) -> None:
    """A thread started while the simulation runs runs in it too (dispatch modes are per
    thread; a GPU is not): nmt serve's scheduler, the DataLoader's pinning thread."""
    if not ACTIVE:
        return THREAD_RUN(thread)
    with ACTIVE[-1]:
        return THREAD_RUN(thread)


HOST_FACTORIES = {"tensor": torch.tensor, "as_tensor": torch.as_tensor}


def from_data(factory: Callable) -> Callable:
    """torch.tensor(data, device="cuda") builds its tensor below the dispatch modes: built on
    the CPU here, then copied to the device through the mode (as CUDA copies it)."""

    def build(data, *args, device=None, **kwargs):
        if device is None or torch.device(device).type != "cuda":
            return factory(data, *args, device=device, **kwargs)
        return factory(data, *args, **kwargs).to(device)

    return build


def tensors_by_device(tree) -> tuple[list[CudaTensor], list[torch.Tensor]]:
    """The cuda tensors in ``tree``, and its CPU tensors that are not scalars (CUDA takes 0-dim ones)."""
    on_cuda: list[CudaTensor] = []
    on_cpu: list[torch.Tensor] = []

    def visit(x):
        if isinstance(x, CudaTensor):
            on_cuda.append(x)
        elif isinstance(x, torch.Tensor) and x.dim() > 0:
            on_cpu.append(x)
        return x

    tree_map(visit, tree)
    return on_cuda, on_cpu


def on_host(x):
    return x.data_on_host if isinstance(x, CudaTensor) else x


def wrap(out, wrappers: dict[int, CudaTensor], func):
    """A result on cuda: the argument it mutated in place, or a new CudaTensor, checked."""
    if not isinstance(out, torch.Tensor):
        return out
    if id(out) in wrappers:  # an in-place op returns its (mutated) argument
        wrapper = wrappers[id(out)]
        check_consistent(wrapper, func)
        return wrapper
    assert type(out) is torch.Tensor and out.device.type == "cpu", f"simulator slip: result {type(out)} {out.device}"
    with torch.inference_mode(False):  # a view of a normal tensor under inference_mode must be normal too
        wrapper = CudaTensor(out)
    check_consistent(wrapper, func)
    return wrapper


def check_consistent(wrapper: CudaTensor, func) -> None:
    data = wrapper.data_on_host
    if wrapper.shape != data.shape or wrapper.dtype != data.dtype or wrapper.stride() != data.stride():
        raise AssertionError(
            f"simulator slip after {func}: cuda tensor reports {tuple(wrapper.shape)} {wrapper.dtype} "
            f"{wrapper.stride()}, its data is {tuple(data.shape)} {data.dtype} {data.stride()}"
        )


# ---- kernels CUDA has and the CPU has not --------------------------------------------------


def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """CUDA's fused GRU cell (what gru_cell and nn.GRU call on a GPU): the new state, and a
    workspace [r, z, n, hx, hidden_n] for the backward below."""
    if input_bias is not None:
        input_gates, hidden_gates = input_gates + input_bias, hidden_gates + hidden_bias
    i_r, i_z, i_n = input_gates.chunk(3, 1)
    h_r, h_z, h_n = hidden_gates.chunk(3, 1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    hy = n + z * (hx - n)
    return hy, torch.cat([r, z, n, hx, h_n], 1)


def fused_gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, h_n = workspace.chunk(5, 1)
    grad_n = grad_hy * (1 - z) * (1 - n * n)
    grad_z = grad_hy * (hx - n) * z * (1 - z)
    grad_r = grad_n * h_n * r * (1 - r)
    grad_input = torch.cat([grad_r, grad_z, grad_n], 1)
    grad_hidden = torch.cat([grad_r, grad_z, grad_n * r], 1)
    bias = (grad_input.sum(0), grad_hidden.sum(0)) if has_bias else (None, None)
    return grad_input, grad_hidden, grad_hy * z, *bias


def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """CUDA's fused LSTM cell: (hy, cy, workspace [i, f, g, o] after their nonlinearities)."""
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    cy = f * cx + i * g
    hy = o * torch.tanh(cy)
    return hy, cy, torch.cat([i, f, g, o], 1)


def fused_lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = torch.tanh(cy)
    grad_cy_total = grad_cy if grad_cy is not None else torch.zeros_like(cy)
    if grad_hy is not None:
        grad_cy_total = grad_cy_total + grad_hy * o * (1 - tanh_cy * tanh_cy)
    grad_o = grad_hy * tanh_cy * o * (1 - o) if grad_hy is not None else torch.zeros_like(o)
    grad_gates = torch.cat(
        [grad_cy_total * g * i * (1 - i), grad_cy_total * cx * f * (1 - f), grad_cy_total * i * (1 - g * g), grad_o], 1
    )
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_cy_total * f, grad_bias


def softmax_half_to_float(kernel: Callable) -> Callable:
    """CUDA's softmax takes half input into float output in one kernel; the CPU's refuses."""

    def run(x, dim, half_to_float):
        return kernel(x.float() if half_to_float else x, dim, False)

    return run


def softmax_backward_half_to_float(kernel: Callable) -> Callable:
    """The backward of the above: float gradients, a half input's gradient."""

    def run(grad, output, dim, input_dtype):
        if grad.dtype == input_dtype:
            return kernel(grad, output, dim, input_dtype)
        return kernel(grad, output, dim, grad.dtype).to(input_dtype)

    return run


EMULATED: dict = {
    aten._thnn_fused_gru_cell.default: fused_gru_cell,
    aten._thnn_fused_gru_cell_backward.default: fused_gru_cell_backward,
    aten._thnn_fused_lstm_cell.default: fused_lstm_cell,
    aten._thnn_fused_lstm_cell_backward_impl.default: fused_lstm_cell_backward,
    aten._softmax.default: softmax_half_to_float(aten._softmax.default),
    aten._log_softmax.default: softmax_half_to_float(aten._log_softmax.default),
    aten._softmax_backward_data.default: softmax_backward_half_to_float(aten._softmax_backward_data.default),
    aten._log_softmax_backward_data.default: softmax_backward_half_to_float(aten._log_softmax_backward_data.default),
}


def shim_loaded() -> bool:
    return "torch" in sys.modules and torch._C._get_accelerator().type == "cuda"


# ---- torch.cuda's Python API, answered for the one simulated device -------------------------


@dataclass
class SimulatedDevice:
    """What ``torch.cuda`` says about the device: its capability decides bf16 (8.0+) or fp16."""

    capability: tuple[int, int] = (8, 0)
    rng_states: dict = field(default_factory=dict)

    def install(self) -> None:
        """Patch torch.cuda's availability, device and RNG queries (the amp checks read them)."""
        if not shim_loaded():
            raise RuntimeError("the simulated-CUDA shim is not loaded: torch says its accelerator is not cuda")
        torch.nn.Module._apply = apply_swapping  # type: ignore[method-assign]
        torch.Tensor.tolist = tolist  # type: ignore[method-assign]
        torch.Tensor.numpy = numpy  # type: ignore[method-assign]
        threading.Thread.run = run_in_simulation  # type: ignore[method-assign]
        for name, factory in HOST_FACTORIES.items():
            setattr(torch, name, from_data(factory))
        cuda = torch.cuda
        cuda.is_available = lambda: True
        cuda.device_count = lambda: 1
        cuda.current_device = lambda: 0
        cuda.set_device = lambda device: None
        cuda._lazy_init = lambda: None
        cuda.get_device_name = lambda device=None: "simulated CUDA (the CPU)"
        cuda.get_device_capability = lambda device=None: self.capability
        cuda.is_bf16_supported = lambda including_emulation=True: self.capability >= (8, 0)
        cuda.synchronize = lambda device=None: None
        cuda.max_memory_allocated = lambda device=None: 0
        cuda.memory_allocated = lambda device=None: 0
        cuda.reset_peak_memory_stats = lambda device=None: None
        # the CUDA generator is not simulated: cuda ops draw from the CPU's; its state is a token
        cuda.get_rng_state = lambda device="cuda": torch.zeros(16, dtype=torch.uint8)
        cuda.set_rng_state = self.set_rng_state

    def set_rng_state(self, state: torch.Tensor, device="cuda") -> None:
        assert isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and state.device.type == "cpu"
        self.rng_states[str(device)] = state
