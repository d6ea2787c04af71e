"""A trained model as two ONNX graphs (``nmt export RUN PKG --onnx``): the encoder and one
decoder step, with the flat tensors of ``nmt/model/graphs.py``, dynamic in batch and source
length. ``nmt/runtime/onnx_engine.py`` runs them under the same search as PyTorch.

The exporter is chosen by parity, not by default: PyTorch's TorchScript-based exporter
(``dynamo=False``) writes the encoder's GRU/LSTM as ONNX's own GRU/LSTM operators with the
right ``linear_before_reset``, where the newer exporter has had GRU faults (pytorch #189225,
#191855). Every export is checked before it is kept: onnxruntime runs both graphs on a probe
batch and must give PyTorch's outputs within ``TOLERANCE``.
"""

from __future__ import annotations

import copy
import io
import warnings
from pathlib import Path

import torch

from nmt.core.errors import NmtError
from nmt.core.fileio import disk_full
from nmt.data.tokenizer import PAD_ID
from nmt.model.base import TranslationModel
from nmt.runtime.onnx_engine import GRAPHS, graph_file, onnxruntime_module

OPSET = 17
TOLERANCE = 1e-4  # largest difference allowed between PyTorch and onnxruntime on the probe batch
EXPORTER = "torch.onnx.export (TorchScript-based, dynamo=False)"


def _probe(vocab_size: int, source_length: int = 7) -> torch.Tensor:
    """Two source rows of distinct lengths (the second padded): (2, S) int64."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, vocab_size, (2, source_length), generator=generator)
    src[1, source_length - 3 :] = PAD_ID
    return src


def _dynamic_axes(names: list[str], tensors: list[torch.Tensor], source_length: int) -> dict:
    """Axis 0 is the batch for every tensor; axis 1 the source for those as long as the source."""
    axes = {}
    for name, tensor in zip(names, tensors):
        axes[name] = {0: "batch"}
        if tensor.dim() >= 2 and tensor.size(1) == source_length:
            axes[name][1] = "source"
    return axes


def _export(module: torch.nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str], axes: dict):
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on batch_first RNNs and the like
        torch.onnx.export(
            module,
            args,
            buffer,  # type: ignore[arg-type]  # a file-like object is accepted too
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
    path.write_bytes(buffer.getvalue())


def export_graphs(model: TranslationModel, out_dir: Path) -> dict:
    """Write encoder.onnx and decoder_step.onnx of ``model`` into ``out_dir`` and check them
    against PyTorch; returns what the manifest records of them. The graphs are the family's own
    (its registry entry's ``onnx_graphs``); a family without them is refused by its name."""
    family = type(model)
    graphs = family.onnx_graphs()
    variant = f"The model ({model.config.arch}: {family.describe(model.config)})"
    if graphs is None:
        raise NmtError(f"{variant} cannot be exported to ONNX: its family declares no graphs (onnx_graphs).")
    onnxruntime_module()  # a clear error when the extra is missing, before anything is exported
    model = copy.deepcopy(model).float().cpu().eval()
    config = model.config
    states, memory = graphs.state_names(config), graphs.memory_names(config)
    src = _probe(model.tgt_vocab_size)
    source_length = src.size(1)
    encoder, step = (graph.eval() for graph in graphs.modules(model))
    with torch.no_grad():
        encoded = list(encoder(src))
        step_inputs = [torch.tensor([4, 5]), torch.tensor([0]), *encoded]
        for position in range(graphs.steps_before_tracing):  # traced and checked with a longer cache
            stepped = list(step(*step_inputs))
            caches = stepped[2 : 2 + len(states)]
            step_inputs = [torch.tensor([6, 7]), torch.tensor([position + 1]), *encoded[: len(memory)], *caches]
        stepped = list(step(*step_inputs))
    encoder_outputs = [*memory, *states]
    step_names = ["prev_tokens", "step", *memory, *states]
    step_outputs = ["logits", "attention", *(f"next_{name}" for name in states), *graphs.extra_outputs]
    if graphs.axes is not None:
        encoder_axes, step_axes = graphs.axes(["src", *encoder_outputs]), graphs.axes([*step_names, *step_outputs])
    else:
        encoder_axes = _dynamic_axes(["src", *encoder_outputs], [src, *encoded], source_length)
        step_axes = _dynamic_axes([*step_names, *step_outputs], [*step_inputs, *stepped], source_length)
    try:
        _export(encoder, (src,), graph_file(out_dir, "encoder"), ["src"], encoder_outputs, encoder_axes)
        _export(step, tuple(step_inputs), graph_file(out_dir, "decoder_step"), step_names, step_outputs, step_axes)
    except Exception as error:  # the exporter's own message names the operator it could not write
        full = disk_full(error)
        if full is not None:  # the disk, not the model: said as such (nmt/cli.py)
            raise full from None
        raise NmtError(f"{variant} cannot be exported to ONNX: {error}") from None
    probes = {"encoder": (dict(src=src), encoded), "decoder_step": (dict(zip(step_names, step_inputs)), stepped)}
    check_parity(out_dir, probes, variant)
    return {
        "opset": OPSET,
        "exporter": EXPORTER,
        "graphs": {graph: graph_file(out_dir, graph).name for graph in GRAPHS},
        "state": states,
        "memory": memory,
        "encoder": {"inputs": ["src"], "outputs": encoder_outputs},
        "decoder_step": {"inputs": step_names, "outputs": step_outputs},
    }


def check_parity(out_dir: Path, probes: dict, variant: str) -> None:
    """onnxruntime's outputs of each graph on its probe inputs (name -> tensor) against PyTorch's
    outputs. A graph declares only the inputs it reads (the step, for a global attention, not)."""
    onnxruntime = onnxruntime_module()
    for graph, (inputs, expected) in probes.items():
        session = onnxruntime.InferenceSession(str(graph_file(out_dir, graph)), providers=["CPUExecutionProvider"])
        feeds = {arg.name: inputs[arg.name].numpy() for arg in session.get_inputs()}
        for name, got, want in zip([o.name for o in session.get_outputs()], session.run(None, feeds), expected):
            difference = (torch.from_numpy(got).float() - want.float()).abs().max().item() if want.numel() else 0.0
            if not difference <= TOLERANCE:
                raise NmtError(
                    f"{variant} exported to ONNX differs from PyTorch: {graph}'s {name} by {difference:.2e} "
                    f"(allowed {TOLERANCE:.0e}). It cannot be exported faithfully."
                )
