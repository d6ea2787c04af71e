"""The attention lab's view into an RNN (``model.arch: rnn``): its one attention played back
step by step with the model's own numbers — the query, the energies, the scores, the weights, the
context, the top next subwords — beside the equations of its ``AttentionKind``, and decoding
resumed with one step's attention replaced (does the model follow its attention?).

The numbers are the model's: playback and edit run the very ``decode_step`` search runs and read
the attention module's inputs as it is called (``Attention.explain`` recomputes its intermediate
values from them).
"""

from __future__ import annotations

import contextlib
from typing import cast

import torch

from nmt.core.registry import ATTENTIONS
from nmt.data.tokenizer import BOS_ID, EOS_ID
from nmt.decoding.search import NEVER_CHOSEN, Hypothesis, PrefixedModel, search_batch
from nmt.model.rnn.attention import WINDOW_FORMULAS
from nmt.model.rnn.model import Seq2Seq
from nmt.model.rnn.settings import rnn_settings
from nmt.pipelines.lab_views import Edit, LabInputError, LabParts, LooksInside, Playback, Step, choosable

QUERY_NAMES = {
    "attend-then-recur": "s_{t-1}, the decoder state before the step",
    "recur-then-attend": "h_t, the decoder state after the recurrence",
}


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


class RnnInside(LooksInside):
    """Playback and edit of an RNN's attention; it has no heads."""

    family = "an RNN (one attention: see playback)"
    views = ("tree", "playback", "edit", "saliency", "align")

    @torch.inference_mode()
    def playback(
        self, lab: LabParts, text: str, tokens: list[str] | None, top_k: int, layer: int, head: int
    ) -> Playback:
        """Each step's attention with its numbers (``layer`` and ``head`` are a Transformer's)."""
        model = cast(Seq2Seq, lab.model()).eval()
        src, lengths, source_tokens = lab.source(text)
        target = lab.target_ids(text, tokens)
        model_config = model.config
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
            steps.append(self._step(lab, t, token, probabilities, best, calls[-1][0], parts, len(source_tokens)))
            prev = torch.tensor([token], device=src.device)
        formula = [*kind.formula, *WINDOW_FORMULAS[model_config.attention_window]]
        return Playback(
            source_tokens,
            lab.labels(target),
            model_config.attention,
            model_config.attention_window,
            formula,
            QUERY_NAMES[kind.order],
            steps,
        )

    @staticmethod
    def _step(lab: LabParts, t: int, token: int, probabilities, best, query, parts: dict, length: int) -> Step:
        def row(name: str):
            return parts[name][0, 0, :length].float().cpu() if name in parts else None

        scores = row("scores")
        step = Step(
            t,
            lab.labels([token])[0],
            probabilities[token].item(),
            query[0, 0].float().cpu().tolist(),
            row("energies").tolist() if "energies" in parts else None,
            [None if s == float("-inf") else s for s in scores.tolist()] if scores is not None else None,
            row("weights").tolist(),
            parts["context"][0, 0].float().cpu().tolist(),
            [
                {"token": piece, "probability": p}
                for piece, p in zip(lab.labels(best.indices.tolist()), best.values.tolist())
            ],
        )
        if "centres" in parts:
            centre, half = parts["centres"][0, 0].item(), rnn_settings(lab.config.model).window_width
            step.centre = centre
            step.window = (max(0, round(centre - half)), min(length - 1, round(centre + half)))
        if ATTENTIONS[rnn_settings(lab.config.model).attention].one_position:  # hard attention: the position chosen
            step.chosen = int(row("weights").argmax())
        return step

    @torch.inference_mode()
    def edit(self, lab: LabParts, text: str, step: int, weights: list[float], tokens: list[str] | None) -> Edit:
        """Decode ``text`` with the first ``step`` subwords of ``tokens`` (default: the best
        translation) forced, and the attention of step ``step`` replaced by ``weights`` (one
        per source subword, <eos> included; normalised to sum 1); greedy after it."""
        model = cast(Seq2Seq, lab.model()).eval()
        src, lengths, source_tokens = lab.source(text)
        target = lab.target_ids(text, tokens)
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
        decode = lab.config.decode
        original, original_weights = self._continue(model, decode, src, lengths, prefix, None)
        edited, _ = self._continue(model, decode, src, lengths, prefix, {step: given.to(src.device)})
        texts = lab.tgt_tok.decode([prefix + original, prefix + edited])
        return Edit(
            source_tokens,
            lab.labels(prefix),
            step,
            given.tolist(),
            original_weights,
            lab.labels(original + [EOS_ID]),
            lab.labels(edited + [EOS_ID]),
            " ".join(texts[0].split()),
            " ".join(texts[1].split()),
        )

    @staticmethod
    def _continue(model, decode, src, lengths, prefix: list[int], replace) -> tuple[list[int], list[float]]:
        """Greedy decoding after ``prefix`` (the attention of some steps replaced): the
        continuation's ids and the first continued step's own attention weights."""
        searched = PrefixedModel(model, prefix) if prefix else model
        with attention_calls(model, replace) as calls:
            found: Hypothesis = search_batch(searched, src, lengths, decode.with_beam(1))[0][0]
        first_call = calls[len(prefix)] if len(calls) > len(prefix) else calls[-1]
        own = model.decoder.attention.explain(*first_call)["weights"][0, 0, : lengths[0]].float().cpu().tolist()
        return found.tokens, own
