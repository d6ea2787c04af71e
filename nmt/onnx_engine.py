"""A second engine behind the search protocol: a package's ONNX graphs (``nmt export --onnx``)
run by onnxruntime, searched by the same greedy and beam search as PyTorch (``nmt/search.py``).

``OnnxModel`` has ``encode`` and ``decode_step`` like ``Seq2Seq``; its memory and state are the
graphs' flat tensors (``nmt/model/graphs.py``), held as CPU torch tensors that share memory with
onnxruntime's numpy arrays, so search's row selection and top-k work on them unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from nmt.errors import NmtError
from nmt.model.graphs import MEMORY_NAMES, state_names
from nmt.onnx_export import GRAPHS, graph_bytes, graph_file, onnxruntime_module


@dataclass
class FlatTensors:
    """Memory or decoder state as the graphs see them: tensors in order, and t of the next step."""

    tensors: list[torch.Tensor]
    position: int = 0

    def select(self, index: torch.Tensor) -> FlatTensors:
        return FlatTensors([t.index_select(0, index) for t in self.tensors], self.position)


class OnnxModel:
    """A package's two graphs as a ``SearchModel``; inference only, on the CPU."""

    training = False

    def __init__(self, package: Path, config, threads: int = 0, parameters: int = 0):
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
        sessions = [
            onnxruntime.InferenceSession(
                graph_bytes(graph_file(package, g)), options, providers=["CPUExecutionProvider"]
            )
            for g in GRAPHS
        ]
        self.encoder, self.decoder = sessions
        self.config = config.model  # what Seq2Seq.config is: the model's settings
        self.parameters = parameters  # as the package's manifest counts them
        self.step_inputs = {arg.name for arg in self.decoder.get_inputs()}  # only those the graph reads
        self.step_names = ["prev_tokens", "step", *MEMORY_NAMES, *state_names(self.config)]

    def train(self, mode: bool = True) -> OnnxModel:
        if mode:
            raise NmtError("The onnx engine translates; training runs on PyTorch (--engine torch).")
        return self

    def eval(self) -> OnnxModel:
        return self

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[FlatTensors, FlatTensors]:
        """src (B, S) -> (enc_outputs, keys, mask), the decoder's first state."""
        outputs = [torch.from_numpy(o) for o in self.encoder.run(None, {"src": src.cpu().numpy()})]
        return FlatTensors(outputs[:3]), FlatTensors(outputs[3:])

    def decode_step(self, prev_tokens: torch.Tensor, state: FlatTensors, memory: FlatTensors):
        """prev_tokens (B,) -> logits (B, V), the next state, attention (B, S)."""
        values = [prev_tokens.cpu(), torch.tensor([state.position]), *memory.tensors, *state.tensors]
        feeds = {
            name: np.ascontiguousarray(value.numpy())
            for name, value in zip(self.step_names, values)
            if name in self.step_inputs
        }
        logits, weights, *next_state = (torch.from_numpy(o) for o in self.decoder.run(None, feeds))
        return logits, FlatTensors(next_state, state.position + 1), weights
