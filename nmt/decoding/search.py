"""Greedy and batched beam search over any ``SearchModel``.

Search knows a protocol, not a model: ``encode``, a ``decode_step`` that returns logits,
and states that ``select`` rows. It returns ``Hypothesis`` objects — tokens, the
log-probability of each, the ranking score and, when asked, the attention rows — so n-best
lists, scores and heatmaps all come from here. Both searches drop sentences from the batch
as they finish, so a batch costs what its unfinished sentences cost, and neither writes a
full log-softmax: log p = logit − logsumexp(logits), computed for the few candidates kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch

from nmt.config.schema import DecodeConfig
from nmt.core.errors import NmtError
from nmt.core.progress import progress_bar
from nmt.core.registry import STRATEGIES
from nmt.data.batching import sorted_batches, source_tensor
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from nmt.decoding.beam_trace import BeamTrace, kept_column_ids
from nmt.decoding.rules import Ranking, block_repeats, coverage_logs, max_output_lengths, sentence_limits
from nmt.decoding.topk import best_candidates


class Selectable(Protocol):
    def select(self, index: torch.Tensor) -> Selectable:
        """The rows ``index`` (reordering, repeating or dropping sentences and beams)."""
        ...


@runtime_checkable
class SearchesItself(Protocol):
    """An engine that runs its own search over whole sentences (CTranslate2): ``search_sentences``
    hands it the sentences and the decoding settings, whole."""

    def searches_itself(
        self,
        sentences: list[list[int]],
        decode: DecodeConfig,
        n_best: int,
        with_attention: bool,
        progress: bool,
        token_scores: bool = False,
    ) -> list[list[Hypothesis]]:
        """``token_scores``: each hypothesis's ``token_logprobs`` must be the model's (they are shown);
        otherwise an engine may leave them out of a search that only writes translations."""
        ...


class SearchModel(Protocol):
    """What search needs from a model: ``Seq2Seq``, ``Ensemble`` and the ONNX engine's model
    satisfy it. A torch module is put in eval mode while it is searched (``evaluating``); an
    inference engine has no modes to fake."""

    # memory and state are the model's own types, each a ``Selectable``
    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[Any, Any]:
        """src (B, S) ids, src_lengths (B,) -> (memory, the decoder's first state)."""
        ...

    def decode_step(self, prev_tokens: torch.Tensor, state: Any, memory: Any) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """prev_tokens (B,) -> (logits (B, V) float32, new state, attention weights (B, S)).

        Logits are unnormalised: log p(y) = logits[y] − logsumexp(logits), and search does
        that normalisation itself."""
        ...


@dataclass
class Hypothesis:
    tokens: list[int]  # target ids, without <bos>/<eos>
    token_logprobs: list[float]  # log p of each token, then of <eos> if it ended (one more than tokens)
    score: float  # ranks hypotheses: sum(token_logprobs) / lp(len(token_logprobs)) + cp (see ``Ranking``)
    attention: torch.Tensor | None = None  # (len(token_logprobs), source subwords + <eos>), when asked for

    @property
    def log_prob(self) -> float:
        return sum(self.token_logprobs)

    @property
    def ended(self) -> bool:
        """Whether it ends with <eos> (rather than at the length limit)."""
        return len(self.token_logprobs) > len(self.tokens)


# Tokens no search may choose: <pad> fills batches and <bos> only starts a translation. An early
# model gives them probability (a briefly trained Transformer put 0.56 on <bos>): masked after
# the step's normaliser is taken, so the log-probabilities stay the model's own.
NEVER_CHOSEN = (PAD_ID, BOS_ID)


def forbid_never_chosen(logits: torch.Tensor) -> torch.Tensor:
    """``logits`` (R, V) with <pad> and <bos> at -inf, in place (and returned)."""
    return logits.index_fill_(1, torch.tensor(NEVER_CHOSEN, device=logits.device), float("-inf"))


def _attention_on_host(
    matrices: Sequence[list[torch.Tensor] | torch.Tensor | None], source_lengths: list[int]
) -> list[torch.Tensor | None]:
    """Each hypothesis's attention rows (a list of (S,) rows or a (t, S) matrix, or None) on the
    CPU, cut to its sentence's real source positions: all copied in one read of the device."""
    cut = [
        None if m is None or len(m) == 0 else (torch.stack(list(m)) if isinstance(m, list) else m)[:, :length]
        for m, length in zip(matrices, source_lengths)
    ]
    present = [m for m in cut if m is not None]
    if not present:
        return [None] * len(cut)
    flat = torch.cat([m.float().reshape(-1) for m in present]).cpu()
    pieces = iter(flat.split([m.numel() for m in present]))
    return [None if m is None else next(pieces).view(m.shape) for m in cut]


def _record_greedy_step(rows, step_tokens, step_logprobs, weights, tokens, logprobs, attention) -> None:
    """One greedy step's results into each active row's lists (attention stays on the device,
    moved to the CPU once, at the end)."""
    for position, (row, token, logprob) in enumerate(zip(rows, step_tokens, step_logprobs)):
        logprobs[row].append(logprob)
        if token != EOS_ID:
            tokens[row].append(int(token))
        if attention is not None:
            attention[row].append(weights[position])


@torch.inference_mode()
def greedy_search(
    model: SearchModel,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    max_len: int | list[int],
    ranking: Ranking | None = None,
    with_attention: bool = False,
    no_repeat_span: int = 0,
) -> list[list[Hypothesis]]:
    """Pick the most probable token at each step, for the whole batch at once. One
    hypothesis per sentence, scored by ``ranking``'s length normalisation (greedy chooses
    nothing by score, so no coverage term); sentence i stops at <eos> or after ``max_len[i]``
    tokens, whatever its batch-mates. ``no_repeat_span`` > 0: see ``block_repeats``."""
    ranking = ranking or Ranking()
    memory, state = model.encode(src, src_lengths)
    batch = src.size(0)
    max_len = sentence_limits(max_len, batch)
    history = torch.empty((batch, 0), dtype=torch.long, device=src.device)  # kept only for the repeat guard
    tokens: list[list[int]] = [[] for _ in range(batch)]
    logprobs: list[list[float]] = [[] for _ in range(batch)]
    attention: list[list[torch.Tensor]] | None = [[] for _ in range(batch)] if with_attention else None
    active = list(range(batch))  # original rows still decoding, in the order of the tensors
    prev = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
    for step in range(1, max(max_len) + 1):
        logits, state, weights = model.decode_step(prev, state, memory)  # (A, V)
        log_z = torch.logsumexp(logits, dim=-1)  # of the model's own distribution, before any guard
        forbid_never_chosen(logits)
        if no_repeat_span:
            block_repeats(logits, history, no_repeat_span)
        best_logits, best_tokens = best_candidates(logits, None, 1, 1)  # (A, 1) each
        prev = best_tokens.squeeze(1)
        best_logprobs = best_logits.squeeze(1) - log_z
        if no_repeat_span:
            history = torch.cat([history, prev.unsqueeze(1)], dim=1)
        # the step's one read on the host: tokens (exact in float32) and their log-probabilities
        step_tokens, step_logprobs = torch.stack([prev.to(best_logprobs.dtype), best_logprobs]).tolist()
        _record_greedy_step(active, step_tokens, step_logprobs, weights, tokens, logprobs, attention)
        # positions in the active batch that go on: neither ended nor at their own length limit
        going_on = [i for i, token in enumerate(step_tokens) if token != EOS_ID and step < max_len[active[i]]]
        if not going_on:
            break
        if len(going_on) < len(active):
            still = torch.tensor(going_on, device=src.device)  # from the host's list: no read back
            active = [active[i] for i in going_on]
            memory, state, prev = memory.select(still), state.select(still), prev.index_select(0, still)
            if no_repeat_span:
                history = history.index_select(0, still)
    matrices = _attention_on_host(attention, src_lengths.tolist()) if attention is not None else [None] * batch
    return [
        [Hypothesis(tokens[r], logprobs[r], ranking.score(sum(logprobs[r]), len(logprobs[r])), matrices[r])]
        for r in range(batch)
    ]


@dataclass
class _Ended:
    """A hypothesis set aside by beam search, with the scores it was ranked by."""

    norm: float  # the ranking score of the log-probability as search accumulated it
    tokens: list[int]
    logprobs: list[float]
    attention: torch.Tensor | None


@dataclass
class _SetAside:
    """Hypotheses set aside in one step, still on the device: their sentences (host), and
    their raw scores, coverage sums (``_Beams.coverage_logs``) (n,), tokens (n, t) and
    log-probs (n, t or t + 1) on the device, read with every other step's at the end of the
    search (``_Beams.ended``). ``length``: what their score is normalised by (None: their
    own length, for live beams at a length limit)."""

    sentences: list[int]
    length: int | None
    scores: torch.Tensor
    coverage: torch.Tensor
    tokens: torch.Tensor
    logprobs: torch.Tensor
    attention: list[torch.Tensor] | list[None]


class _Beams:
    """Beam search's bookkeeping, on the device. Rows are (active sentence, beam) pairs,
    sentence-major. The host knows, from each step's one read, how many hypotheses each
    sentence has set aside and whether its best candidate ends; the hypotheses themselves
    stay on the device until the search ends (``set_aside``, ``best``)."""

    def __init__(
        self,
        src_lengths: torch.Tensor,
        source_width: int,
        device: torch.device,
        with_attention: bool,
        ranking: Ranking,
        limits: list[int],
    ):
        batch = src_lengths.size(0)
        self.ranking, self.limits = ranking, limits
        self.reached_limit = False  # whether a sentence's live beams were ended at its length limit
        # (A*beams, S): each row's attention summed over its steps, for the coverage penalty
        self.coverage = torch.zeros((batch, source_width), device=device) if ranking.coverage_penalty else None
        # (A*beams, S): True past each row's source length, where attention adds no coverage penalty
        self.padding = (
            (torch.arange(source_width) >= src_lengths.unsqueeze(1)).to(device) if self.coverage is not None else None
        )
        self.scores = torch.zeros((batch, 1), device=device)  # (A, beams): log p of each live beam
        self.tokens = torch.empty((batch, 0), dtype=torch.long, device=device)  # (A*beams, steps so far)
        self.logprobs = torch.empty((batch, 0), device=device)  # (A*beams, steps so far)
        self.attention = torch.empty((batch, 0, source_width), device=device) if with_attention else None
        self.active = list(range(batch))  # original sentence of each row of ``scores``
        self.set_aside_count = [0] * batch  # hypotheses each sentence has set aside
        # how many it had set aside when it had its answer (the search of one hypothesis would stop
        # there): its best among those is its best whatever the n-best (None: it had none yet)
        self.answered: list[int | None] = [None] * batch
        self.pending: list[_SetAside] = []  # in the order they were set aside

    def coverage_logs(self, rows: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """(n,) Σ_i log min(Σ_j a_ij, 1) of ``rows`` (n,), their attention summed over their
        steps (and this step's ``weights`` (R, S), where given) over their real source
        positions: the coverage penalty over β, for all of them at once on the device (zeros
        without a coverage penalty)."""
        if self.coverage is None or self.padding is None:
            return torch.zeros(rows.size(0), device=rows.device)
        sums = self.coverage[rows] if weights is None else self.coverage[rows] + weights[rows]
        return coverage_logs(sums, self.padding[rows])

    def done(self, row: int, best_ended: bool, beam_size: int, n_best: int) -> bool:
        """Whether the sentence of ``row`` needs no more steps."""
        count = self.set_aside_count[self.active[row]]
        return count >= beam_size or (best_ended and count >= n_best)

    def keep_open(
        self, scores: torch.Tensor, kept: Kept, best_ended: list[bool], beam_size: int, n_best: int
    ) -> tuple[torch.Tensor, Kept, bool] | None:
        """Drop the sentences that are done from the (A, K) candidate tensors: (scores, kept,
        whether any was dropped), or None when every sentence is done."""
        for row, sentence in enumerate(self.active):
            if self.answered[sentence] is None and self.done(row, best_ended[row], beam_size, 1):
                self.answered[sentence] = self.set_aside_count[sentence]
        still = [r for r in range(len(self.active)) if not self.done(r, best_ended[r], beam_size, n_best)]
        if not still:
            self.active = []
            return None
        if len(still) == len(self.active):
            return scores, kept, False
        keep = torch.tensor(still, device=scores.device)  # from the host's list: no read back
        self.active = [self.active[r] for r in still]
        return scores[keep], kept.rows(keep), True

    def set_aside(
        self, which: torch.Tensor, best_is_eos: torch.Tensor, scores, origins, token_logprobs, weights, step: int
    ) -> list[bool]:
        """Candidates ``which`` (A, C) bool, ending with <eos> at ``step``, are set aside. Returns
        whether each sentence's best candidate ends (``best_is_eos`` (A,)), read with how many
        end in each sentence in the step's one look at the host."""
        # one number a sentence: 2 x how many of its candidates end, + 1 if its best one does
        read = (which.sum(1) * 2 + best_is_eos).tolist()
        counts_read, best_ended = [v >> 1 for v in read], [bool(v & 1) for v in read]
        ending = sum(counts_read)
        if not ending:
            return best_ended
        rows, cols = torch.nonzero_static(which, size=ending).unbind(1)  # its size known: no host sync
        picked = origins[rows, cols]
        attention: list = [None] * ending
        if self.attention is not None:
            attention = list(torch.cat([self.attention[picked], weights[picked].unsqueeze(1)], dim=1).unbind(0))
        sentences = [self.active[row] for row, count in enumerate(counts_read) for _ in range(count)]
        for sentence in sentences:
            self.set_aside_count[sentence] += 1
        logprobs = torch.cat([self.logprobs[picked], token_logprobs[rows, cols].unsqueeze(1)], dim=1)
        coverage = self.coverage_logs(picked, weights)
        self.pending.append(
            _SetAside(sentences, step, scores[rows, cols], coverage, self.tokens[picked], logprobs, attention)
        )
        return best_ended

    def advance(self, scores: torch.Tensor, origins: torch.Tensor, tokens: torch.Tensor, token_logprobs, weights):
        """Continue rows ``origins`` (R',) with ``tokens`` (R',); ``scores`` (A', beams)."""
        self.scores = scores
        self.tokens = torch.cat([self.tokens[origins], tokens.unsqueeze(1)], dim=1)
        self.logprobs = torch.cat([self.logprobs[origins], token_logprobs.unsqueeze(1)], dim=1)
        if self.attention is not None:
            self.attention = torch.cat([self.attention[origins], weights[origins].unsqueeze(1)], dim=1)
        if self.coverage is not None and self.padding is not None:
            self.coverage, self.padding = self.coverage[origins] + weights[origins], self.padding[origins]

    def end_at_limit(self, step: int) -> torch.Tensor | None:
        """Sentences whose own length limit is ``step`` end: their live beams compete with the
        hypotheses that ended, and they leave. The rows of the sentences that go on (to select
        memory and state with), or None when every sentence goes on."""
        at_limit = [row for row, sentence in enumerate(self.active) if self.limits[sentence] <= step]
        if not at_limit:
            return None
        self._end_live_beams(at_limit)
        going_on = [row for row, sentence in enumerate(self.active) if self.limits[sentence] > step]
        beams = self.scores.size(1)
        rows = torch.tensor([row * beams + beam for row in going_on for beam in range(beams)], dtype=torch.long)
        rows = rows.to(self.scores.device)
        self.scores = self.scores[torch.tensor(going_on, dtype=torch.long).to(self.scores.device)]
        self.tokens, self.logprobs = self.tokens[rows], self.logprobs[rows]
        if self.attention is not None:
            self.attention = self.attention[rows]
        if self.coverage is not None and self.padding is not None:
            self.coverage, self.padding = self.coverage[rows], self.padding[rows]
        self.active = [self.active[row] for row in going_on]
        return rows

    def end_live_beams(self) -> None:
        """At the last step the live beams compete with the hypotheses that ended."""
        self._end_live_beams(list(range(len(self.active))))

    def _end_live_beams(self, rows: list[int]) -> None:
        """Set the live beams of ``rows`` aside (those of score -inf are dropped at the end)."""
        beams = self.scores.size(1)
        indices = [row * beams + beam for row in rows for beam in range(beams)]
        picked = torch.tensor(indices, dtype=torch.long).to(self.scores.device)
        attention = [None] * len(indices) if self.attention is None else list(self.attention[picked].unbind(0))
        sentences = [self.active[index // beams] for index in indices]
        self.pending.append(
            _SetAside(
                sentences,
                None,
                self.scores.reshape(-1)[picked],
                self.coverage_logs(picked),
                self.tokens[picked],
                self.logprobs[picked],
                attention,
            )
        )

    def ended(self) -> list[list[_Ended]]:
        """Every hypothesis set aside, by sentence, in the order set aside: all read in one copy."""
        parts = [t.reshape(-1).float() for p in self.pending for t in (p.scores, p.coverage, p.tokens, p.logprobs)]
        values = torch.cat(parts).tolist() if parts else []
        ended: list[list[_Ended]] = [[] for _ in self.set_aside_count]
        at = 0
        for part in self.pending:
            n, width = part.tokens.shape
            scores, coverage = values[at : at + n], values[at + n : at + 2 * n]
            tokens_at, logprobs_at = at + 2 * n, at + 2 * n + n * width
            at = logprobs_at + part.logprobs.numel()
            step_width = part.logprobs.size(1)
            for i, (sentence, raw, logs) in enumerate(zip(part.sentences, scores, coverage)):
                if raw == float("-inf"):  # a live beam with no finite continuation
                    continue
                tokens = list(map(int, values[tokens_at + i * width : tokens_at + (i + 1) * width]))
                logprobs = values[logprobs_at + i * step_width : logprobs_at + (i + 1) * step_width]
                self.reached_limit |= part.length is None
                norm = self.ranking.score(raw, part.length or len(tokens), self.ranking.coverage_penalty * logs)
                ended[sentence].append(_Ended(norm, tokens, logprobs, part.attention[i]))
        return ended

    def best(self, n_best: int, src_lengths: torch.Tensor) -> list[list[Hypothesis]]:
        """Each sentence's ``n_best``: first the best it had when it had its answer (what a search
        for one hypothesis returns, so that asking for more never changes the best), then the
        best of the others it found by searching on."""
        lengths = src_lengths.tolist()
        ranked = [self._ranked(ended, self.answered[s])[:n_best] for s, ended in enumerate(self.ended())]
        chosen = [(sentence, e) for sentence, hypotheses in enumerate(ranked) for e in hypotheses]
        matrices = iter(_attention_on_host([e.attention for _, e in chosen], [lengths[s] for s, _ in chosen]))
        return [[Hypothesis(e.tokens, e.logprobs, e.norm, next(matrices)) for e in hypotheses] for hypotheses in ranked]

    @staticmethod
    def _ranked(ended: list[_Ended], answered: int | None) -> list[_Ended]:
        """``ended`` best first (stable: ties keep the order they were set aside in), the best of
        the first ``answered`` of them leading (None: all compete)."""
        ranked = sorted(ended, key=lambda e: e.norm, reverse=True)
        if answered is None or not ended[:answered]:
            return ranked
        first = max(ended[:answered], key=lambda e: e.norm)  # max keeps the first of equals, as sorted does
        return [first, *(e for e in ranked if e is not first)]


def _candidates(logits: torch.Tensor, log_z: torch.Tensor, scores: torch.Tensor, count: int):
    """The ``count`` best continuations of each sentence's live beams (scores (A, beams)):
    their scores, tokens, origin rows and token log-probabilities, each (A, count)."""
    n_active, width = scores.shape
    top_scores, top_ids = best_candidates(logits, scores.view(-1) - log_z, width, count)
    top_tokens = top_ids % logits.size(-1)
    origins = torch.arange(n_active, device=logits.device).unsqueeze(1) * width + top_ids // logits.size(-1)
    return top_scores, top_tokens, origins, logits[origins, top_tokens] - log_z[origins]


class Kept(NamedTuple):
    """The candidates a beam step keeps, each (A, K): what the beams go on with, and (for the
    lab's trace) which of the step's candidates they were."""

    tokens: torch.Tensor
    origins: torch.Tensor  # the beam row each continues
    logprobs: torch.Tensor  # log p of its token
    columns: torch.Tensor  # its place among the step's candidates (``kept_column_ids``)

    def rows(self, keep: torch.Tensor) -> Kept:
        return Kept(*(t[keep] for t in self))


def _best_unended(
    top_scores: torch.Tensor, is_eos: torch.Tensor, k: int, candidates: Kept
) -> tuple[torch.Tensor, Kept]:
    """The K best candidates of each sentence that do not end: their scores (A, K) and each of
    ``candidates``' tensors (A, C) gathered at them."""
    alive_scores = top_scores.masked_fill(is_eos, float("-inf"))
    keep_scores, keep_cols = alive_scores.topk(min(k, alive_scores.size(1)), dim=-1)  # (A, K)
    return keep_scores, Kept(*(t.gather(1, keep_cols) for t in candidates))


@torch.inference_mode()
def beam_search(
    model: SearchModel,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    beam_size: int,
    max_len: int | list[int],
    ranking: Ranking | None = None,
    n_best: int = 1,
    with_attention: bool = False,
    no_repeat_span: int = 0,
    trace: BeamTrace | None = None,
) -> list[list[Hypothesis]]:
    """Batched beam search (all sentences x beams step as one batch): each sentence's ``n_best``
    hypotheses, best first. The first step runs once per sentence, then each keeps ``beam_size``
    beams. A hypothesis that emits <eos> is set aside with ``ranking``'s score (log p / len by
    default). A sentence is done when its best candidate ends and it has ``n_best`` ended (the rule
    of OpenNMT and JoeyNMT), or ``beam_size``; at its own ``max_len`` (one for all, or one each) its
    live beams join them. ``no_repeat_span``: ``block_repeats``; ``trace``: ``nmt.decoding.beam_trace``."""
    k, device = beam_size, src.device
    memory, state = model.encode(src, src_lengths)  # one row per sentence until the first step is taken
    limits = sentence_limits(max_len, src.size(0))
    beams = _Beams(src_lengths, src.size(1), device, with_attention, ranking or Ranking(), limits)
    prev = torch.full((src.size(0),), BOS_ID, dtype=torch.long, device=device)
    for step in range(1, max(limits) + 1):
        logits, state, weights = model.decode_step(prev, state, memory)  # (A*beams, V)
        log_z = torch.logsumexp(logits, dim=-1)  # (A*beams,) of the model's own distribution, before any guard
        forbid_never_chosen(logits)
        if no_repeat_span:
            block_repeats(logits, beams.tokens, no_repeat_span)
        top_scores, top_tokens, origins, token_logprobs = _candidates(logits, log_z, beams.scores, 2 * k)
        is_eos = top_tokens == EOS_ID
        # Set aside hypotheses that end here (only among each sentence's first K candidates).
        ending = is_eos[:, :k] & torch.isfinite(top_scores[:, :k])
        best_ended = beams.set_aside(ending, is_eos[:, 0], top_scores, origins, token_logprobs, weights, step)
        # Continue with the best K candidates that did not end, in the sentences that are not done.
        step_candidates = Kept(top_tokens, origins, token_logprobs, kept_column_ids(top_scores))
        keep_scores, kept = _best_unended(top_scores, is_eos, k, step_candidates)
        still_open = beams.keep_open(keep_scores, kept, best_ended, k, n_best)
        if trace is not None:
            candidates = (top_scores, top_tokens, origins, token_logprobs, ending, weights)
            trace.expand(step, *candidates, kept.columns if still_open is not None else None, src_lengths)
        if still_open is None:
            break
        keep_scores, kept, dropped = still_open
        keep_tokens, keep_origins, keep_logprobs = (t.reshape(-1) for t in (kept.tokens, kept.origins, kept.logprobs))
        if dropped or beams.scores.size(1) != keep_scores.size(1):  # (beams.scores: the step's before advance)
            memory = memory.select(keep_origins)  # a sentence's rows share its memory: any of them will do
        state = state.select(keep_origins)
        beams.advance(keep_scores, keep_origins, keep_tokens, keep_logprobs, weights)
        prev = keep_tokens
        going_on = beams.end_at_limit(step)
        if going_on is not None:
            if not beams.active:
                break
            memory, state, prev = memory.select(going_on), state.select(going_on), prev.index_select(0, going_on)
    beams.end_live_beams()
    found = beams.best(n_best, src_lengths)
    if trace is not None:
        trace.finish(found[0], ended_at_limit=beams.reached_limit)
    return found


@contextlib.contextmanager
def evaluating(model: SearchModel) -> Iterator[None]:
    """A torch module in eval mode inside the block (no dropout), in the mode it had after it;
    a wrapper (``PrefixedModel``) names the model it wraps as ``wrapped``; another engine's
    model has no modes."""
    while not isinstance(model, torch.nn.Module) and hasattr(model, "wrapped"):
        model = model.wrapped
    if not isinstance(model, torch.nn.Module):
        yield
        return
    was_training = model.training
    model.train(False)
    try:
        yield
    finally:
        model.train(was_training)


def search_sentences(
    model: SearchModel,
    sentences: list[list[int]],
    decode: DecodeConfig,
    device: torch.device,
    n_best: int = 1,
    with_attention: bool = False,
    progress: bool = False,
    token_scores: bool = False,
) -> list[list[Hypothesis]]:
    """Subword ids of many sentences -> the ``n_best`` hypotheses of each, in their order, at
    ``decode.beam_size`` (another beam: ``decode.with_beam(k)``). ``token_scores``: the caller shows
    each token's log-probability (an engine that searches itself then scores them; this search always does).

    Sentences are batched by length (longest first) under ``decode.batch_size`` and
    ``decode.batch_tokens``; an empty sentence gets one empty hypothesis.
    """
    beam_size = decode.beam_size
    if not 1 <= n_best <= beam_size:
        raise NmtError(f"n_best must be between 1 and the beam size ({beam_size}), got {n_best}.")
    if isinstance(model, SearchesItself):
        return model.searches_itself(sentences, decode, n_best, with_attention, progress, token_scores)
    results: list[list[Hypothesis] | None] = [None] * len(sentences)
    todo = [i for i, ids in enumerate(sentences) if ids]
    # Each sentence runs as beam_size hypotheses: the token budget is shared among them.
    batches = sorted_batches([len(sentences[i]) + 1 for i in todo], decode.batch_size, decode.batch_tokens // beam_size)
    bar = progress_bar(len(todo), "translate", "sent", progress)
    with evaluating(model):
        for batch in batches:
            rows = [todo[i] for i in batch]
            src, src_lengths = source_tensor([sentences[r] for r in rows])
            found = search_batch(model, src.to(device), src_lengths, decode, n_best, with_attention)
            for row, hypotheses in zip(rows, found):
                results[row] = hypotheses
            bar.update(len(rows))
    bar.close()
    return [found if found is not None else [Hypothesis([], [], 0.0)] for found in results]  # empty in, empty out


@dataclass(frozen=True)
class SearchSettings:
    """What a decoding strategy is asked to do for one batch."""

    beam_size: int
    n_best: int  # hypotheses per sentence, best first (at most beam_size)
    max_len: list[int]  # each sentence's output limit, in subwords
    ranking: Ranking
    with_attention: bool
    no_repeat_span: int
    trace: BeamTrace | None  # the lab's record of a beam search


@STRATEGIES.register("greedy")
def greedy_strategy(model: SearchModel, src: torch.Tensor, src_lengths: torch.Tensor, s: SearchSettings):
    """One hypothesis per sentence, whatever the beam size."""
    return greedy_search(model, src, src_lengths, s.max_len, s.ranking, s.with_attention, s.no_repeat_span)


@STRATEGIES.register("beam")
def beam_strategy(model: SearchModel, src: torch.Tensor, src_lengths: torch.Tensor, s: SearchSettings):
    return beam_search(
        model,
        src,
        src_lengths,
        s.beam_size,
        s.max_len,
        s.ranking,
        s.n_best,
        s.with_attention,
        s.no_repeat_span,
        s.trace,
    )


@STRATEGIES.register("auto")
def auto_strategy(model: SearchModel, src: torch.Tensor, src_lengths: torch.Tensor, s: SearchSettings):
    """Greedy at beam 1 (unless a ``trace`` is asked for, which beam search records), beam search above."""
    chosen = greedy_strategy if s.beam_size == 1 and s.trace is None else beam_strategy
    return chosen(model, src, src_lengths, s)


def search_batch(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    decode: DecodeConfig,
    n_best: int = 1,
    with_attention: bool = False,
    trace: BeamTrace | None = None,
) -> list[list[Hypothesis]]:
    """One batch with ``decode``'s settings (its beam size among them), searched by the strategy
    ``decode.strategy`` names (``STRATEGIES``: auto, greedy, beam, or a plugin's)."""
    beam_size = decode.beam_size
    max_len = max_output_lengths(src_lengths.tolist(), decode.max_len_ratio, decode.max_len_offset)
    ranking = Ranking.of(decode)
    settings = SearchSettings(beam_size, n_best, max_len, ranking, with_attention, decode.no_repeat_span, trace)
    start = target_start(model)
    try:
        if start:
            return _searched_after(start, model, src, src_lengths, decode.strategy, settings)
        return STRATEGIES[decode.strategy](model, src, src_lengths, settings)
    except torch.cuda.OutOfMemoryError:
        raise NmtError(
            f"CUDA ran out of memory translating {src.size(0)} sentences of up to {src.size(1)} subwords with beam "
            f"{beam_size}. Lower decode.batch_tokens (now {decode.batch_tokens}) or decode.batch_size "
            f"(now {decode.batch_size})."
        ) from None


class PrefixedModel:
    """``model`` with the start of the translation given: search run on it continues
    ``prefix`` (ids) instead of starting at <bos>. Holds one search's state: make one per
    search; every sentence of that search shares the prefix. ``prefix_attention``: the
    attention of the steps that read <bos> and the prefix but its last token, (B, len(prefix), S)."""

    def __init__(self, model: SearchModel, prefix: list[int]):
        self.model, self.prefix = model, prefix
        self.target_start: list[int] = []  # the prefix holds the model's own start (nmt.decoding.search.target_start)
        self.wrapped = model  # what search puts in eval mode (nmt.decoding.search.evaluating)
        self.started = False
        self.prefix_attention: torch.Tensor | None = None

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor):
        """Memory, and the state after reading <bos> and the prefix but its last token."""
        memory, state = self.model.encode(src, src_lengths)
        rows = []
        for token in [BOS_ID, *self.prefix[:-1]]:  # search's first step feeds the prefix's last token
            fed = torch.full((src.size(0),), token, dtype=torch.long, device=src.device)
            _, state, weights = self.model.decode_step(fed, state, memory)  # weights: (B, S)
            rows.append(weights)
        self.prefix_attention = torch.stack(rows, 1) if rows else None  # (B, len(prefix), S)
        self.started = False
        return memory, state

    def decode_step(self, prev_tokens: torch.Tensor, state, memory):
        if not self.started and self.prefix:  # search feeds <bos> first: the prefix's last token instead
            prev_tokens = torch.full_like(prev_tokens, self.prefix[-1])
        self.started = True
        return self.model.decode_step(prev_tokens, state, memory)


def target_start(model: Any) -> list[int]:
    """The target ids every translation of ``model`` starts with, fed after <bos> and never
    searched: its target language code (``tokenizer.tgt_code``), which loading sets as the
    model's ``target_start``. A wrapper without one is looked through (``wrapped``)."""
    while model is not None:
        if hasattr(model, "target_start"):
            return list(model.target_start)
        model = getattr(model, "wrapped", None)
    return []


def _searched_after(
    start: list[int], model: Any, src: torch.Tensor, src_lengths: torch.Tensor, strategy: str, s: SearchSettings
) -> list[list[Hypothesis]]:
    """Search that continues ``start``, each hypothesis with ``start`` in front: its tokens,
    log-probabilities of 0 (given, as forced tokens are in ``transformers``' generate) and the
    attention of the steps that read them."""
    prefixed = PrefixedModel(model, start)
    found = STRATEGIES[strategy](prefixed, src, src_lengths, s)
    rows = prefixed.prefix_attention  # (B, len(start), S)
    led: list[list[Hypothesis]] = []
    for sentence, hypotheses in enumerate(found):
        led.append([])
        for h in hypotheses:
            attention = h.attention
            if attention is not None and rows is not None:
                attention = torch.cat([rows[sentence, :, : attention.size(1)].float().cpu(), attention])
            led[-1].append(Hypothesis(start + h.tokens, [0.0] * len(start) + h.token_logprobs, h.score, attention))
    return led
