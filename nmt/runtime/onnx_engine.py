"""A second engine behind the search protocol: a package's ONNX graphs (``nmt export --onnx``)
run by onnxruntime, searched by the same greedy and beam search as PyTorch (``nmt/decoding/search.py``).

``OnnxModel`` has ``encode`` and ``decode_step`` like ``Seq2Seq``; its memory and state are the
graphs' flat tensors (``nmt/model/graphs.py``), held as CPU torch tensors that share memory with
onnxruntime's numpy arrays, so search's row selection and top-k work on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nmt import install_hint
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import refuse_link
from nmt.core.registry import ENGINES
from nmt.model.graphs import memory_names, state_names
from nmt.runtime.loading import Engine, LoadedModel, package_parts
from nmt.runtime.package_files import check_file

GRAPHS = ("encoder", "decoder_step")
INSTALL = install_hint("onnx", "onnx 'onnxruntime>=1.24'")


def _graph_tensors(graph: Any) -> Iterator:
    """Every tensor a graph holds: its initializers and its nodes' tensor attributes, subgraphs too."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            for subgraph in [attribute.g] * attribute.HasField("g") + list(attribute.graphs):
                yield from _graph_tensors(subgraph)


def graph_bytes(path: Path) -> bytes:
    """An ONNX graph of a package, checked to be self-contained before onnxruntime sees it: a
    tensor stored as "external data" names another file to read (``../../anything``, or through
    a link), and ``nmt export`` never writes one."""
    import onnx

    refuse_link(path)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # onnx's parser raises its own (DecodeError and others)
        raise NmtError(f"{path} is not a readable ONNX graph ({type(error).__name__}): export it again.") from None
    if any(tensor.data_location == onnx.TensorProto.EXTERNAL for tensor in _graph_tensors(model.graph)):
        raise NmtError(f"{path} refers to tensors stored in other files (ONNX external data): refused.")
    return model.SerializeToString()


def onnxruntime_module() -> Any:
    """onnxruntime, or a clear error saying how to install it (exporting checks the graphs with
    it, and the onnx engine runs them on it)."""
    try:
        import onnxruntime
    except ImportError:
        raise NmtError(f"ONNX graphs are checked and run by onnxruntime: {INSTALL}.") from None
    return onnxruntime


def graph_file(root: Path, graph: str) -> Path:
    return Path(root) / f"{graph}.onnx"


@dataclass
class FlatTensors:
    """Memory or decoder state as the graphs see them: tensors in order, and t of the next step."""

    tensors: list[torch.Tensor]
    position: int = 0

    def select(self, index: torch.Tensor) -> FlatTensors:
        return FlatTensors([t.index_select(0, index) for t in self.tensors], self.position)


class OnnxModel:
    """A package's two graphs as a ``SearchModel``; inference only, on the CPU."""

    def __init__(self, package: Path, config: Config, threads: int = 0, parameters: int = 0):
        onnxruntime = onnxruntime_module()
        missing = [graph_file(package, graph) for graph in GRAPHS if not graph_file(package, graph).is_file()]
        if missing:
            raise NmtError(
                f"{package} has no ONNX graphs ({', '.join(p.name for p in missing)} missing): "
                f"make them with `nmt export RUN {package} --onnx`."
            )
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        # its workers sleep between calls: spinning, they take the cores from the search run between the steps
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sessions = [
            onnxruntime.InferenceSession(
                graph_bytes(graph_file(package, g)), options, providers=["CPUExecutionProvider"]
            )
            for g in GRAPHS
        ]
        self.encoder, self.decoder = sessions
        self.config = config.model  # what Seq2Seq.config is: the model's settings
        self.parameter_count = parameters  # as the package's manifest counts them
        self.step_inputs = {arg.name for arg in self.decoder.get_inputs()}  # only those the graph reads
        self.memory_names = memory_names(self.config)
        self.step_names = ["prev_tokens", "step", *self.memory_names, *state_names(self.config)]
        # the outputs search reads, by name (a Transformer's step also returns every layer's heads)
        self.step_outputs = ["logits", "attention", *(f"next_{name}" for name in state_names(self.config))]

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[FlatTensors, FlatTensors]:
        """src (B, S) -> the memory (``memory_names``), the decoder's first state."""
        outputs = [torch.from_numpy(o) for o in self.encoder.run(None, {"src": src.cpu().numpy()})]
        held = len(self.memory_names)
        return FlatTensors(outputs[:held]), FlatTensors(outputs[held:])

    def decode_step(
        self, prev_tokens: torch.Tensor, state: FlatTensors, memory: FlatTensors
    ) -> tuple[torch.Tensor, FlatTensors, torch.Tensor]:
        """prev_tokens (B,) -> logits (B, V), the next state, attention (B, S)."""
        values = [prev_tokens.cpu(), torch.tensor([state.position]), *memory.tensors, *state.tensors]
        feeds = {
            name: np.ascontiguousarray(value.numpy())
            for name, value in zip(self.step_names, values)
            if name in self.step_inputs
        }
        logits, weights, *next_state = (torch.from_numpy(o) for o in self.decoder.run(self.step_outputs, feeds))
        return logits, FlatTensors(next_state, state.position + 1), weights


def load_onnx_package(model_dirs: list[Path], device: torch.device) -> LoadedModel:
    """One package's ONNX graphs on onnxruntime, on the CPU whatever ``device`` says."""
    config, src_tok, tgt_tok, manifest = package_parts(model_dirs[0])
    for graph in GRAPHS:  # the graphs exported, unchanged (a missing one is named by OnnxModel)
        path = graph_file(model_dirs[0], graph)
        if path.is_file() or path.is_symlink():
            check_file(model_dirs[0], manifest, path.name)
    model = OnnxModel(model_dirs[0], config, parameters=manifest.get("parameters", 0))
    return LoadedModel(config, model, src_tok, tgt_tok, torch.device("cpu"), manifest.get("parent"))


ENGINES.register("onnx", Engine(load_onnx_package, describe="a package's ONNX graphs on onnxruntime (CPU)"))
