"""The attention lab: a translation taken apart, for the page's lab views and for notebooks.

``Lab(translator)`` answers, for one source sentence:

* ``tree``: the beam-search tree — every candidate search expanded, kept, ended or pruned;
* ``playback``: each decoding step of a translation with the model's own numbers — the
  query, the score of every source position, the softmax weights, the context vector, the
  top next subwords — beside the equations of the model's attention;
* ``edit``: decoding resumed with the attention of one step replaced by given weights,
  beside decoding without the edit (does the model follow its attention?);
* ``saliency``: gradient × input of each source subword for one target subword, beside its
  attention row, with their rank correlation;
* ``heads`` (a Transformer's): every head of every layer, cross- and self-attention
  (nmt/pipelines/heads.py); a Transformer's playback shows one layer's head.

Playback, edit and heads look inside the model, and each family looks inside its own: the lab
asks the ``LooksInside`` its family names (``TranslationModel.lab_view``: the RNN's in
nmt/pipelines/rnn_lab.py, the Transformer's in nmt/pipelines/heads.py), which refuses, naming why,
what its family does not have.
The tree and saliency read only what every model has (search, the source embeddings and
``forward``). Every result (nmt/pipelines/lab_views.py) has ``to_json()``, what the API returns.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import asdict

import torch

from nmt.core.errors import NmtError
from nmt.data.batching import source_tensor
from nmt.data.tokenizer import BOS_ID, EOS_ID
from nmt.decoding.beam_trace import BeamTrace
from nmt.decoding.search import SearchesItself, evaluating, search_batch
from nmt.model.base import TranslationModel
from nmt.model.ensemble import Ensemble
from nmt.pipelines.align import sentence_alignment, training_pairs
from nmt.pipelines.lab_size import LabSize, lab_size
from nmt.pipelines.lab_views import (
    Alignment,
    Edit,
    Heads,
    LabInputError,
    LooksInside,
    Playback,
    Saliency,
    Tree,
    spearman,
)
from nmt.pipelines.translate import Translator


@functools.cache
def _view(path: str) -> LooksInside:
    """The ``LooksInside`` named ``module:Class``, imported by name as a registry's entries are."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)()


def _looks_inside(family: type[TranslationModel]) -> LooksInside | None:
    """The view ``family`` names (``lab_view``, inherited by a subclass); None: it names none."""
    return _view(family.lab_view) if family.lab_view else None


class Lab:
    def __init__(self, translator: Translator):
        self.translator = translator
        self.tgt_tok, self.src_tok = translator.tgt_tok, translator.src_tok
        self.config = translator.loaded.config
        self.training: tuple[list[str], list[str]] | None = None  # the run's pairs, for the align view

    # ---- inputs ----

    def model(self) -> TranslationModel:
        """The one PyTorch model served: what the lab can look inside."""
        model = self.translator.model
        if not isinstance(model, torch.nn.Module):  # another engine's model: nothing to look inside
            raise LabInputError(
                "model",
                f"the attention lab's playback, edits and saliency look inside PyTorch's model; this one runs on "
                f"{self.translator.loaded.engine}: serve it with --engine torch",
            )
        if isinstance(model, Ensemble):
            raise LabInputError(
                "model", "the attention lab looks inside one model, not an ensemble: serve or load one checkpoint"
            )
        if not isinstance(model, TranslationModel):
            raise LabInputError("model", f"the attention lab looks inside a translation model, not a {type(model)}")
        return model

    def inside(self) -> LooksInside:
        """The model's family's view into it."""
        family = type(self.model())
        found = _looks_inside(family)
        if found is None:
            raise LabInputError(
                "model",
                f"the attention lab does not look inside model.arch {self.config.model.arch!r} ({family.__name__}): "
                "its tree and saliency work on any model",
            )
        return found

    def refuse_own_search(self) -> None:
        """The tree traces this toolkit's beam search: an engine that searches itself has none."""
        if isinstance(self.translator.model, SearchesItself):
            raise LabInputError(
                "model",
                f"the search tree traces this toolkit's beam search; this model runs on "
                f"{self.translator.loaded.engine}, which searches itself: serve it with --engine torch or onnx",
            )

    def views(self) -> tuple[str, ...]:
        """The views the lab has of this model: its family's, or the search tree alone where it
        cannot look inside (another engine, an ensemble)."""
        model = self.translator.model
        if isinstance(model, SearchesItself):  # its steps are its own (CTranslate2): no tree to trace either
            return ()
        if isinstance(model, Ensemble) or not isinstance(model, TranslationModel):
            return ("tree",)
        return (_looks_inside(type(model)) or LooksInside()).views

    def source(self, text: str) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        """``text`` as the model reads it: src (1, S), its length (1,), the subwords' labels."""
        ids = self.translator.source_ids([text])[0]
        if not ids:
            raise LabInputError("text", "the text is empty: give a sentence")
        src, lengths = source_tensor([ids])
        return src.to(self.translator.device), lengths, self.src_tok.labels(ids)

    def target_ids(self, text: str, tokens: list[str] | None) -> list[int]:
        """The translation to look at, as ids ending in <eos> where it ended: ``tokens`` as
        given (target subwords, "<eos>" last if it ends), else the best translation."""
        if tokens is None:
            best = self.translator.search([text])[0][0]
            return best.tokens + ([EOS_ID] if best.ended else [])
        ended = bool(tokens) and tokens[-1] == "<eos>"
        try:
            ids = self.translator.prefix_ids(tokens[:-1] if ended else tokens)
        except NmtError as error:
            raise LabInputError("tokens", str(error)) from None
        if not ids and not ended:
            raise LabInputError("tokens", "tokens is empty: give the target subwords of a translation")
        return ids + ([EOS_ID] if ended else [])

    def labels(self, ids: list[int]) -> list[str]:
        return [("<eos>" if i == EOS_ID else piece) for i, piece in zip(ids, self.tgt_tok.id_to_piece(ids))]

    # ---- views ----

    def tree(self, text: str, beam_size: int | None = None) -> Tree:
        self.refuse_own_search()
        model = self.translator.model
        src, lengths, source_tokens = self.source(text)
        beam = beam_size or self.config.decode.beam_size
        trace = BeamTrace()
        with evaluating(model):
            search_batch(model, src, lengths, self.config.decode.with_beam(beam), n_best=beam, trace=trace)
        nodes = [asdict(node) for node in trace.nodes]
        pieces = self.labels([node["token"] for node in nodes])
        for node, piece in zip(nodes, pieces):
            node["token"] = "<bos>" if node["token"] == BOS_ID else piece
        return Tree(source_tokens, nodes, beam)

    @torch.inference_mode()
    def playback(
        self, text: str, tokens: list[str] | None = None, top_k: int = 5, layer: int = -1, head: int = 0
    ) -> Playback:
        """Each step's attention with its numbers; a Transformer's for decoder ``layer`` (−1: the
        last) and ``head``."""
        return self.inside().playback(self, text, tokens, top_k, layer, head)

    @torch.inference_mode()
    def edit(self, text: str, step: int, weights: list[float], tokens: list[str] | None = None) -> Edit:
        """Decode ``text`` with the first ``step`` subwords of ``tokens`` (default: the best
        translation) forced, and the attention of step ``step`` replaced by ``weights`` (one
        per source subword, <eos> included; normalised to sum 1); greedy after it."""
        return self.inside().edit(self, text, step, weights, tokens)

    @torch.inference_mode()
    def align(self, text: str, tokens: list[str] | None = None) -> Alignment:
        """The word alignment of ``tokens`` (default: the best translation) by the model's attention,
        beside eflomal's where the model was served from its run (``nmt.pipelines.align``)."""
        self.inside().views_check("align", self.config.model)
        if self.training is None:  # read once: eflomal aligns a sentence beside them
            self.training = training_pairs(self.config)
        target = [t for t in self.target_ids(text, tokens) if t != EOS_ID]
        if not target:
            raise LabInputError("tokens", "the translation is empty: nothing to align")
        try:
            return sentence_alignment(self.translator, text, target, self.training)
        except NmtError as error:
            raise LabInputError("model", str(error)) from None

    def heads(
        self, text: str, tokens: list[str] | None = None, layer: int | None = None, head: int | None = None
    ) -> Heads:
        """Every head of every layer for ``tokens`` (default: the best translation), or ``layer``'s
        (of each kind) and ``head``'s alone."""
        return self.inside().heads(self, text, tokens, layer, head)

    def size(self, view: str, text: str, tokens: list[str] | None, **asked) -> LabSize:
        """How big ``view``'s answer for ``text`` will be at least, before any work (``tokens``
        absent: a translation of one subword; the tree: one step), exactly once the translation is
        known; ``asked``: the view's beam, top_k, layer, head."""
        if view not in self.views():  # before sizing: an RNN's heads were sized by a Transformer's count
            if view == "tree":
                self.refuse_own_search()
            raise LabInputError("model", self.inside().refusal(view, self.config.model))  # inside(): other engines
        source = len(self.translator.source_ids([text])[0]) + 1  # its <eos> too
        return lab_size(view, self.config, source, len(tokens) if tokens is not None else 1, **asked)

    def saliency(self, text: str, position: int, tokens: list[str] | None = None) -> Saliency:
        """Gradient × input of each source subword's embedding for log p of target subword
        ``position`` of ``tokens`` (default: the best translation), teacher-forced."""
        model = self.model()
        src, lengths, source_tokens = self.source(text)
        target = self.target_ids(text, tokens)
        if not 0 <= position < len(target):
            raise LabInputError(
                "position", f"position must be from 0 to {len(target) - 1} for this translation, got {position}"
            )
        embedded: list[torch.Tensor] = []

        def keep(module, args, output):
            output.retain_grad()
            embedded.append(output)

        was_training = model.training
        model.eval()
        handle = model.get_submodule("encoder.embedding").register_forward_hook(keep)
        try:
            with torch.enable_grad():
                tgt_in = torch.tensor([[BOS_ID, *target[:position]]], device=src.device)
                logits, attention = model(src, lengths, tgt_in)
                log_prob = logits[0, -1].float().log_softmax(-1)[target[position]]
                model.zero_grad(set_to_none=True)
                log_prob.backward()
        finally:
            handle.remove()
            model.train(was_training)
        source = embedded[0]
        assert source.grad is not None  # backward ran above
        saliency = (source.grad * source).sum(-1)[0].detach().float().cpu().tolist()  # (S,)
        row = attention[0, -1, : len(source_tokens)].detach().float().cpu().tolist()
        return Saliency(
            source_tokens,
            self.labels(target),
            position,
            saliency,
            row,
            spearman([abs(s) for s in saliency], row),
        )
