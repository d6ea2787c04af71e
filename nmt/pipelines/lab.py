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

The numbers are the model's: playback and edit run the very ``decode_step`` search runs and
read the attention module's inputs as it is called (``Attention.explain`` recomputes its
intermediate values from them). Every result has ``to_json()``, what the API returns.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass

import torch

from nmt.core.errors import NmtError
from nmt.core.registry import ATTENTIONS
from nmt.data.batching import source_tensor
from nmt.data.tokenizer import BOS_ID, EOS_ID
from nmt.decoding.beam_trace import BeamTrace
from nmt.decoding.forced import PrefixedModel
from nmt.decoding.search import NEVER_CHOSEN, Hypothesis, evaluating, search_batch
from nmt.model.attention import WINDOW_FORMULAS
from nmt.model.base import TranslationModel
from nmt.model.ensemble import Ensemble
from nmt.model.seq2seq import Seq2Seq
from nmt.model.transformer import Transformer
from nmt.pipelines.heads import FORMULA, Heads, all_heads, head_steps
from nmt.pipelines.lab_size import LabSize, lab_size
from nmt.pipelines.translate import Translator


class LabInputError(NmtError):
    """A lab request that does not fit the sentence or the model; ``field`` names the input."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


QUERY_NAMES = {
    "attend-then-recur": "s_{t-1}, the decoder state before the step",
    "recur-then-attend": "h_t, the decoder state after the recurrence",
}


def choosable(probabilities: torch.Tensor) -> torch.Tensor:
    """A step's probabilities (V,) with those of what search never chooses (<pad>, <bos>) at 0:
    the candidates a step shows are those search could take."""
    return probabilities.index_fill(0, torch.tensor(NEVER_CHOSEN, device=probabilities.device), 0.0)


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); 0 when either is constant."""

    def ranks(values: list[float]) -> torch.Tensor:
        x = torch.tensor(values, dtype=torch.float64)
        order = x.argsort()
        ranked = torch.empty_like(x)
        ranked[order] = torch.arange(len(values), dtype=torch.float64)
        for value in x.unique():  # ties share their mean rank
            tied = x == value
            ranked[tied] = ranked[tied].mean()
        return ranked

    if len(a) < 2:
        return 0.0
    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denominator = (ra.norm() * rb.norm()).item()
    return (ra @ rb).item() / denominator if denominator else 0.0


@contextlib.contextmanager
def attention_calls(model: Seq2Seq, replace: dict[int, torch.Tensor] | None = None):
    """Record every call of the decoder's attention (its inputs) during the block; with
    ``replace``, the call at decoder step t uses the weights replace[t] (S,) instead of its
    own: context = weights · values."""
    calls: list[tuple] = []

    def hook(module, args, output):
        calls.append(args)  # (query, keys, values, mask, steps)
        step = args[4]
        if replace is not None and isinstance(step, int) and step in replace:
            values = args[2]
            weights = replace[step].to(values.dtype).view(1, 1, -1).expand(values.size(0), 1, -1)
            return torch.bmm(weights, values), weights
        return output

    handle = model.decoder.attention.register_forward_hook(hook)
    try:
        yield calls
    finally:
        handle.remove()


@dataclass
class Tree:
    source_tokens: list[str]
    nodes: list[
        dict
    ]  # id, parent, token (a subword label), step, logprob, log_prob_sum, status, rank, score, attention
    beam_size: int

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Step:
    """One decoding step of playback."""

    step: int
    token: str  # the subword this step emitted (as played back)
    probability: float  # its probability
    query: list[float]
    energies: list[float] | None  # the score function's output per source position
    scores: list[float | None] | None  # what the softmax normalised (None: masked or outside the window)
    weights: list[float]
    context: list[float]
    top: list[dict]  # the most probable next subwords: {token, probability}
    centre: float | None = None  # a local window's p_t
    window: tuple[int, int] | None = None  # its [p_t - D, p_t + D], cut to the sentence
    chosen: int | None = None  # hard attention's position


@dataclass
class Playback:
    source_tokens: list[str]
    tokens: list[str]
    attention: str  # model.attention (a Transformer's: scaled-dot-product)
    window: str  # model.attention_window
    formula: list[str]
    query_is: str
    steps: list[Step]
    layer: int | None = None  # a Transformer's: the decoder layer and head played back, of how many
    head: int | None = None
    layers: int | None = None
    heads: int | None = None
    keys: list[list[float]] | None = None  # that head's k_j, one per source position (d each)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Edit:
    source_tokens: list[str]
    prefix: list[str]  # the subwords before the edited step, as given
    step: int
    weights: list[float]  # the attention put in place at that step
    original_weights: list[float]  # the model's own at that step
    original: list[str]  # subwords decoded from the step on without the edit
    edited: list[str]  # and with it
    original_text: str
    edited_text: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Saliency:
    source_tokens: list[str]
    tokens: list[str]
    position: int  # the target subword explained
    saliency: list[float]  # gradient × input of each source subword (summed over the embedding)
    attention: list[float]  # the attention row of that target subword
    rank_correlation: float  # Spearman's, of |saliency| and attention

    def to_json(self) -> dict:
        return asdict(self)


class Lab:
    def __init__(self, translator: Translator):
        self.translator = translator
        self.tgt_tok, self.src_tok = translator.tgt_tok, translator.src_tok
        self.config = translator.loaded.config

    # ---- inputs ----

    def _model(self) -> TranslationModel:
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
        if not isinstance(model, (Seq2Seq, Transformer)):
            raise LabInputError("model", f"the attention lab knows the RNN and the Transformer, not a {type(model)}")
        return model

    def _rnn(self, view: str) -> Seq2Seq:
        """The model, for a view only an RNN's single attention has."""
        model = self._model()
        if not isinstance(model, Seq2Seq):
            raise LabInputError(
                "model",
                f"{view} replaces one attention's weights, and a Transformer has {self._layers_and_heads(model)} "
                "cross-attention heads, each one path of several from the source to the output: replacing one "
                "does not make the model attend there, so this view is the RNN's (see heads and playback)",
            )
        return model

    @staticmethod
    def _layers_and_heads(model: TranslationModel) -> str:
        return f"{model.config.decoder_layers} x {model.config.heads}"

    def _source(self, text: str) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
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
        src, lengths, source_tokens = self._source(text)
        beam = beam_size or self.config.decode.beam_size
        trace = BeamTrace()
        model = self.translator.model
        with evaluating(model):
            search_batch(model, src, lengths, self.config.decode, beam, n_best=beam, trace=trace)
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
        if isinstance(self._model(), Transformer):
            return self._head_playback(text, tokens, top_k, layer, head)
        model = self._rnn("playback").eval()
        src, lengths, source_tokens = self._source(text)
        target = self.target_ids(text, tokens)
        model_config = self.config.model
        kind = ATTENTIONS[model_config.attention]
        steps = []
        memory, state = model.encode(src, lengths)
        prev = torch.tensor([BOS_ID], device=src.device)
        for t, token in enumerate(target):
            with attention_calls(model) as calls:
                logits, state, _ = model.decode_step(prev, state, memory)
            probabilities = logits[0].float().softmax(-1)
            best = choosable(probabilities).topk(min(top_k, probabilities.numel() - len(NEVER_CHOSEN)))
            parts = model.decoder.attention.explain(*calls[-1])
            steps.append(self._step(t, token, probabilities, best, calls[-1][0], parts, len(source_tokens)))
            prev = torch.tensor([token], device=src.device)
        formula = [*kind.formula, *WINDOW_FORMULAS[model_config.attention_window]]
        return Playback(
            source_tokens,
            self.labels(target),
            model_config.attention,
            model_config.attention_window,
            formula,
            QUERY_NAMES[kind.order],
            steps,
        )

    def _step(self, t: int, token: int, probabilities, best, query, parts: dict, length: int) -> Step:
        def row(name: str):
            return parts[name][0, 0, :length].float().cpu() if name in parts else None

        scores = row("scores")
        step = Step(
            t,
            self.labels([token])[0],
            probabilities[token].item(),
            query[0, 0].float().cpu().tolist(),
            row("energies").tolist() if "energies" in parts else None,
            [None if s == float("-inf") else s for s in scores.tolist()] if scores is not None else None,
            row("weights").tolist(),
            parts["context"][0, 0].float().cpu().tolist(),
            [
                {"token": piece, "probability": p}
                for piece, p in zip(self.labels(best.indices.tolist()), best.values.tolist())
            ],
        )
        if "centres" in parts:
            centre, half = parts["centres"][0, 0].item(), self.config.model.window_width
            step.centre = centre
            step.window = (max(0, round(centre - half)), min(length - 1, round(centre + half)))
        if ATTENTIONS[self.config.model.attention].one_position:  # hard attention: the position chosen
            step.chosen = int(row("weights").argmax())
        return step

    @torch.inference_mode()
    def edit(self, text: str, step: int, weights: list[float], tokens: list[str] | None = None) -> Edit:
        """Decode ``text`` with the first ``step`` subwords of ``tokens`` (default: the best
        translation) forced, and the attention of step ``step`` replaced by ``weights`` (one
        per source subword, <eos> included; normalised to sum 1); greedy after it."""
        model = self._rnn("edit").eval()
        src, lengths, source_tokens = self._source(text)
        target = self.target_ids(text, tokens)
        if not 0 <= step < max(1, len(target)):
            raise LabInputError(
                "step", f"step must be from 0 to {max(0, len(target) - 1)} for this translation, got {step}"
            )
        if len(weights) != len(source_tokens):
            raise LabInputError(
                "weights", f"{len(weights)} weights given; one per source subword (<eos> too) is {len(source_tokens)}"
            )
        given = torch.tensor(weights, dtype=torch.float32)
        if not torch.isfinite(given).all() or (given < 0).any() or given.sum() <= 0:
            raise LabInputError("weights", "weights must be finite, non-negative numbers with a positive sum")
        given = given / given.sum()
        prefix = [t for t in target[:step] if t != EOS_ID]
        original, original_weights = self._continue(model, src, lengths, prefix, None)
        edited, _ = self._continue(model, src, lengths, prefix, {step: given.to(src.device)})
        texts = self.tgt_tok.decode([prefix + original, prefix + edited])
        return Edit(
            source_tokens,
            self.labels(prefix),
            step,
            given.tolist(),
            original_weights,
            self.labels(original + [EOS_ID]),
            self.labels(edited + [EOS_ID]),
            " ".join(texts[0].split()),
            " ".join(texts[1].split()),
        )

    def _head_playback(self, text: str, tokens: list[str] | None, top_k: int, layer: int, head: int) -> Playback:
        model = self._model()
        assert isinstance(model, Transformer)
        layers, heads = model.config.decoder_layers, model.config.heads
        if not (layer == -1 or 0 <= layer < layers):
            raise LabInputError("layer", f"layer must be from 0 to {layers - 1} (or -1, the last), got {layer}")
        if not 0 <= head < heads:
            raise LabInputError("head", f"head must be from 0 to {heads - 1}, got {head}")
        layer %= layers
        src, lengths, source_tokens = self._source(text)
        target = self.target_ids(text, tokens)
        keys, parts, logits = head_steps(model, src, lengths, target, layer, head)
        steps = []
        for t, (token, part, step_logits) in enumerate(zip(target, parts, logits)):
            probabilities = step_logits.float().softmax(-1)
            best = choosable(probabilities).topk(min(top_k, probabilities.numel() - len(NEVER_CHOSEN)))
            top = [
                {"token": piece, "probability": p}
                for piece, p in zip(self.labels(best.indices.tolist()), best.values.tolist())
            ]
            scores: list[float | None] = list(part.scores)
            probability = probabilities[token].item()
            label = self.labels([token])[0]
            steps.append(Step(t, label, probability, part.query, None, scores, part.weights, part.context, top))
        query_is = (
            f"q_t = W^Q LN(x_t): decoder layer {layer}'s state at step t after its self-attention, "
            f"head {head}'s share ({model.config.embed_dim // heads} of {model.config.embed_dim} dimensions)"
        )
        return Playback(
            source_tokens,
            self.labels(target),
            "scaled-dot-product",
            "global",
            FORMULA,
            query_is,
            steps,
            layer,
            head,
            layers,
            heads,
            keys,
        )

    def heads(
        self, text: str, tokens: list[str] | None = None, layer: int | None = None, head: int | None = None
    ) -> Heads:
        """A Transformer's every head of every layer for ``tokens`` (default: the best translation),
        or ``layer``'s (of each kind) and ``head``'s alone."""
        model = self._model()
        if not isinstance(model, Transformer):
            raise LabInputError(
                "model", "heads are a Transformer's (model.arch: transformer); an RNN has one attention: see playback"
            )
        most = max(model.config.encoder_layers, model.config.decoder_layers)
        if layer is not None and not 0 <= layer < most:
            raise LabInputError("layer", f"layer must be from 0 to {most - 1}, got {layer}")
        if head is not None and not 0 <= head < model.config.heads:
            raise LabInputError("head", f"head must be from 0 to {model.config.heads - 1}, got {head}")
        src, lengths, source_tokens = self._source(text)
        target = self.target_ids(text, tokens)
        found = all_heads(model, src, lengths, target, layer, head)
        return Heads(source_tokens, self.labels(target), model.config.heads, **found, layer=layer, head=head)

    def size(self, view: str, text: str, tokens: list[str] | None, **asked) -> LabSize:
        """How big ``view``'s answer for ``text`` will be at least, before any work (``tokens``
        absent: a translation of one subword; the tree: one step), exactly once the translation is
        known; ``asked``: the view's beam, top_k, layer, head."""
        source = len(self.translator.source_ids([text])[0]) + 1  # its <eos> too
        return lab_size(view, self.config, source, len(tokens) if tokens is not None else 1, **asked)

    def _continue(self, model, src, lengths, prefix: list[int], replace) -> tuple[list[int], list[float]]:
        """Greedy decoding after ``prefix`` (the attention of some steps replaced): the
        continuation's ids and the first continued step's own attention weights."""
        decode = self.config.decode
        searched = PrefixedModel(model, prefix) if prefix else model
        with attention_calls(model, replace) as calls:
            found: Hypothesis = search_batch(searched, src, lengths, decode, 1)[0][0]
        first_call = calls[len(prefix)] if len(calls) > len(prefix) else calls[-1]
        own = model.decoder.attention.explain(*first_call)["weights"][0, 0, : lengths[0]].float().cpu().tolist()
        return found.tokens, own

    def saliency(self, text: str, position: int, tokens: list[str] | None = None) -> Saliency:
        """Gradient × input of each source subword's embedding for log p of target subword
        ``position`` of ``tokens`` (default: the best translation), teacher-forced."""
        model = self._model()
        src, lengths, source_tokens = self._source(text)
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
