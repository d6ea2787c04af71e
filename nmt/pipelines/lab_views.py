"""What the attention lab answers (nmt/pipelines/lab.py), each with ``to_json()`` as the API returns
it, the request error that names its field, and what a family's view into its model gives the lab
(``LooksInside``: the RNN's in nmt/pipelines/rnn_lab.py, the Transformer's in nmt/pipelines/heads.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

import torch

from nmt.config.schema import Config, ModelConfig
from nmt.core.errors import NmtError
from nmt.data.tokenizer import Tokenizer
from nmt.decoding.search import NEVER_CHOSEN
from nmt.model.base import TranslationModel


def compact(value: Any) -> Any:
    """``value`` with every float to 6 significant digits: what a page draws or prints of a number,
    in half the bytes of a float's full form."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {key: compact(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [compact(item) for item in value]
    return value


class LabInputError(NmtError):
    """A lab request that does not fit the sentence or the model; ``field`` names the input."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


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


@dataclass
class Heads:
    """Every head of every layer for one translation: [layer][head][query position][key position]."""

    source_tokens: list[str]
    tokens: list[str]  # the target subwords, <eos> last where the translation ended
    heads: int
    cross: list  # decoder layer -> head -> target step -> source position
    decoder_self: list  # decoder layer -> head -> target step -> target step (causal: later ones are 0)
    encoder_self: list  # encoder layer -> head -> source position -> source position
    layer: int | None = None  # asked for one layer (of each kind): the lists hold it alone
    head: int | None = None  # asked for one head: each layer's list holds it alone

    def to_json(self) -> dict:
        return self.__dict__


@dataclass
class Alignment:
    """One translation's word alignment: the model's attention summed over each word's subwords
    (a row per target word), its links, and a reference aligner's links with their agreement; for a
    family with heads, each decoder layer's each head's AER against the reference."""

    source_words: list[str]
    target_words: list[str]
    weights: list[list[float]]  # target word -> source word
    links: list[list[int]]  # the model's [source word, target word]
    reference: list[list[int]] | None  # eflomal's, or None (``note`` says why)
    note: str  # which reference, or why there is none
    agreement: dict | None  # the model's links against the reference: aer, precision, recall
    heads: list[list[float]] | None = None  # layer -> head -> AER against the reference
    pharaoh: str = ""  # the model's links as a Pharaoh line ("0-0 2-1"), what the export carries
    reference_pharaoh: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


class LabParts(Protocol):
    """What a family's view reads of the lab (``Lab``): the model, the sentence and the translation
    as ids, labels for subwords."""

    config: Config
    tgt_tok: Tokenizer

    def model(self) -> TranslationModel: ...

    def source(self, text: str) -> tuple[torch.Tensor, torch.Tensor, list[str]]: ...

    def target_ids(self, text: str, tokens: list[str] | None) -> list[int]: ...

    def labels(self, ids: list[int]) -> list[str]: ...


class LooksInside:
    """A model family's views into its own model, for the lab: playback of its attention step by
    step, an edit of one step's attention, every head. What a family does not have is refused
    naming the request's field and why (an RNN has no heads; a Transformer's attention is not
    one path to edit)."""

    family = "this model family"  # for the refusals
    views: tuple[str, ...] = ("tree", "saliency")  # what the lab shows of it: these, and the family's own

    def views_check(self, view: str, config: ModelConfig) -> None:
        """Refuse ``view`` where the family's views do not hold it."""
        if view not in self.views:
            raise LabInputError("model", self.refusal(view, config))

    def refusal(self, view: str, config: ModelConfig) -> str:
        """Why the family has no ``view``: said before a request is sized, and where it is called."""
        return {
            "playback": f"{self.family} has no attention the lab can play back",
            "edit": f"{self.family} has no single attention to replace: edit is the RNN's",
            "heads": f"heads are a Transformer's (model.arch: transformer); {self.family} has none",
        }.get(view, f"{self.family} has no {view} view in the lab")

    def playback(
        self, lab: LabParts, text: str, tokens: list[str] | None, top_k: int, layer: int, head: int
    ) -> Playback:
        raise LabInputError("model", self.refusal("playback", lab.config.model))

    def edit(self, lab: LabParts, text: str, step: int, weights: list[float], tokens: list[str] | None) -> Edit:
        raise LabInputError("model", self.refusal("edit", lab.config.model))

    def heads(self, lab: LabParts, text: str, tokens: list[str] | None, layer: int | None, head: int | None) -> Heads:
        raise LabInputError("model", self.refusal("heads", lab.config.model))
