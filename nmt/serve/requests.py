"""What the API accepts: JSON bodies read into typed requests, every mistake a ``RequestError``
that names the field (4xx, never a traceback), sizes capped by ``Limits`` (413)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.requests import Request

from nmt.data.pairs import is_blank


class RequestError(Exception):
    def __init__(self, status: int, field: str, message: str):
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


@dataclass(frozen=True)
class Limits:
    max_chars: int = 1000  # characters per text (and per prefix)
    max_texts: int = 64  # texts per batch request
    max_beam: int = 16
    max_alternatives: int = 20
    max_body_bytes: int = 1_000_000
    # one request's work: its texts' characters (+ OVERHEAD_CHARS each) x beam size, summed; the
    # biggest the defaults allow (64 texts of 1,000 characters at beam 16) is 1,034,240
    max_work: int = 256_000
    max_queued: int = 512  # texts waiting per model; beyond, 503 with Retry-After
    max_seconds: float = 60.0  # one translation request's time, queue included; beyond, 503 and its work dropped
    # one answer of the attention lab's, in bytes: a request whose answer could be bigger is refused
    # (413 naming what to narrow) before any work, and one that turned out bigger is not sent
    max_answer_bytes: int = 2_000_000


JSON_TYPES = ("application/json",)


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused (413) as soon as it is known to be over ``limit`` bytes: by its
    Content-Length before anything is read, else by counting while it streams in. A client
    cannot make the server hold more than ``limit`` bytes of its body."""
    too_big = RequestError(413, "body", f"the request body is over {limit:,} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise too_big if declared.isdigit() else RequestError(400, "body", "Content-Length must be a number")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limits: Limits) -> dict:
    """A POST's JSON object. The content type must say JSON: a cross-site page can send a
    ``text/plain`` POST without asking, but a JSON one only after a CORS preflight, which this
    server never grants."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in JSON_TYPES:
        raise RequestError(
            415, "body", f"send the body as JSON with Content-Type: application/json (got {content_type or 'none'!r})"
        )
    body = await read_body(request, limits.max_body_bytes)
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise RequestError(400, "body", "the request body is not valid JSON (or nested too deeply)") from None
    if not isinstance(data, dict):
        raise RequestError(400, "body", 'the request body must be a JSON object, e.g. {"text": "Hello."}')
    field = unencodable(data)
    if field is not None:
        raise RequestError(
            422, field, f"{field} holds a lone surrogate (\\ud800-\\udfff), which is not Unicode text: send UTF-8 text"
        )
    return data


def unencodable(data: dict) -> str | None:
    """The field of the first string (or key) in ``data`` that UTF-8 cannot encode (JSON's
    ``"\\ud800"`` escapes decode to lone surrogates), as ``texts[2]``; None if there is none.
    Every endpoint answers such text with the same 422, before any tokenizer or JSON answer
    meets it."""
    stack: list[tuple[str, object]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str) and not _encodes(value):
            return path or "body"
        if isinstance(value, dict):
            for key, item in value.items():
                if not _encodes(key):
                    return path or "body"
                stack.append((f"{path}.{key}" if path else key, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def model_name(data: dict) -> str | None:
    """``model``: a name from GET /api/models, or absent for the first model."""
    name = data.get("model")
    if name is not None and not isinstance(name, str):
        raise RequestError(422, "model", "model must be a string: a name from GET /api/models")
    return name


def integer(data: dict, field: str, default: int, low: int, high: int) -> int:
    value = data.get(field, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise RequestError(422, field, f"{field} must be an integer from {low} to {high}")
    if not low <= value <= high:
        raise RequestError(422, field, f"{field} must be from {low} to {high}, got {value}")
    return value


def text(value, field: str, limits: Limits, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise RequestError(422, field, f"{field} must be a string")
    if not allow_empty and is_blank(value):
        raise RequestError(422, field, f"{field} is empty: give a sentence to translate")
    if len(value) > limits.max_chars:
        raise RequestError(413, field, f"{field} is {len(value):,} characters; the limit is {limits.max_chars:,}")
    return value


def flag(data: dict, field: str, default: bool) -> bool:
    value = data.get(field, default)
    if not isinstance(value, bool):
        raise RequestError(422, field, f"{field} must be true or false")
    return value


OVERHEAD_CHARS = 10  # a short text still costs a search row and its steps


def work_of(texts: list[str], beam_size: int) -> list[int]:
    """Each text's share of the work budget: (characters + OVERHEAD_CHARS) x beam size."""
    return [(len(text) + OVERHEAD_CHARS) * beam_size for text in texts]


def texts_of(data: dict, limits: Limits) -> tuple[list[str], bool]:
    """The sentences: ``text`` (one) or ``texts`` (a batch), and whether it was a batch."""
    if ("text" in data) == ("texts" in data):
        raise RequestError(400, "text", "give either text (a string) or texts (a list of strings)")
    if "text" in data:
        return [text(data["text"], "text", limits)], False
    texts = data["texts"]
    if not isinstance(texts, list) or not texts:
        raise RequestError(422, "texts", "texts must be a non-empty list of strings")
    if len(texts) > limits.max_texts:
        raise RequestError(413, "texts", f"{len(texts)} texts; the limit is {limits.max_texts} per request")
    return [text(value, f"texts[{i}]", limits) for i, value in enumerate(texts)], True


def prefix_of(data: dict, limits: Limits) -> str | list[str]:
    """``prefix`` (text) or ``prefix_tokens`` (target subwords, as the API returns them)."""
    if "prefix" in data and "prefix_tokens" in data:
        raise RequestError(400, "prefix", "give either prefix (text) or prefix_tokens (subwords), not both")
    if "prefix_tokens" not in data:
        return text(data.get("prefix", ""), "prefix", limits, allow_empty=True)
    tokens = data["prefix_tokens"]
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise RequestError(422, "prefix_tokens", "prefix_tokens must be a list of strings (target subwords)")
    if len(tokens) > limits.max_chars:
        raise RequestError(413, "prefix_tokens", f"{len(tokens)} subwords; the limit is {limits.max_chars}")
    return tokens


@dataclass(frozen=True)
class TranslateRequest:
    texts: list[str]
    batch: bool  # ``texts`` was given (answer with "results")
    beam_size: int
    n_best: int
    prefix: str | list[str]
    attention: bool  # answer with the best translation's attention (the page asks; off by default)

    @classmethod
    def parse(cls, data: dict, limits: Limits, default_beam: int) -> TranslateRequest:
        texts, batch = texts_of(data, limits)
        beam_size = integer(data, "beam_size", min(default_beam, limits.max_beam), 1, limits.max_beam)
        n_best = integer(data, "n_best", 1, 1, beam_size)
        request = cls(texts, batch, beam_size, n_best, prefix_of(data, limits), flag(data, "attention", False))
        work = sum(request.work)
        if work > limits.max_work:
            raise RequestError(
                413,
                "texts",
                f"this request is {work:,} units of work (characters + {OVERHEAD_CHARS} per text, times beam_size "
                f"{beam_size}); the limit is {limits.max_work:,} per request: send fewer or shorter texts, "
                "or a smaller beam_size",
            )
        return request

    @property
    def work(self) -> list[int]:
        return work_of(self.texts, self.beam_size)

    @property
    def settings(self) -> tuple:
        """What requests must share to be decoded in one search."""
        prefix = self.prefix if isinstance(self.prefix, str) else tuple(self.prefix)
        return (self.beam_size, self.n_best, prefix, self.attention)


@dataclass(frozen=True)
class AlternativesRequest:
    text: str
    prefix: str | list[str]
    k: int

    @classmethod
    def parse(cls, data: dict, limits: Limits) -> AlternativesRequest:
        return cls(
            text(data.get("text"), "text", limits),
            prefix_of(data, limits),
            integer(data, "k", 5, 1, limits.max_alternatives),
        )


def tokens_of(data: dict, limits: Limits) -> list[str] | None:
    """``tokens``: the target subwords of the translation to look at ("<eos>" last if it
    ended), as the API returns them; absent: the best translation."""
    tokens = data.get("tokens")
    if tokens is None:
        return None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise RequestError(422, "tokens", "tokens must be a list of strings (target subwords)")
    if len(tokens) > limits.max_chars:
        raise RequestError(413, "tokens", f"{len(tokens)} subwords; the limit is {limits.max_chars}")
    return tokens


def weights_of(data: dict, limits: Limits) -> list[float]:
    weights = data.get("weights")
    if not isinstance(weights, list) or not weights:
        raise RequestError(422, "weights", "weights must be a non-empty list of numbers, one per source subword")
    if len(weights) > limits.max_chars:
        raise RequestError(413, "weights", f"{len(weights)} weights; the limit is {limits.max_chars}")
    if not all(isinstance(w, int | float) and not isinstance(w, bool) for w in weights):
        raise RequestError(422, "weights", "weights must be numbers")
    return [float(w) for w in weights]


@dataclass(frozen=True)
class LabRequest:
    """What the attention lab's views take (each reads the fields it needs)."""

    text: str
    tokens: list[str] | None = None
    beam_size: int = 0
    top_k: int = 5
    step: int = 0
    position: int = 0
    weights: tuple[float, ...] = ()
    layer: int = -1  # a Transformer's playback: the decoder layer (-1: the last) and the head
    head: int = 0
    one_layer: int | None = None  # heads: one layer (of each kind) and one head instead of all
    one_head: int | None = None

    @classmethod
    def tree(cls, data: dict, limits: Limits, default_beam: int) -> LabRequest:
        beam = integer(data, "beam_size", min(max(2, default_beam), limits.max_beam), 1, limits.max_beam)
        return cls(text(data.get("text"), "text", limits), beam_size=beam)

    @classmethod
    def playback(cls, data: dict, limits: Limits) -> LabRequest:
        top_k = integer(data, "top_k", 5, 1, limits.max_alternatives)
        layer, head = integer(data, "layer", -1, -64, 63), integer(data, "head", 0, 0, 63)  # checked on the model
        return cls(text(data.get("text"), "text", limits), tokens_of(data, limits), top_k=top_k, layer=layer, head=head)

    @classmethod
    def heads(cls, data: dict, limits: Limits) -> LabRequest:
        layer = None if data.get("layer") is None else integer(data, "layer", 0, 0, 63)  # checked on the model
        head = None if data.get("head") is None else integer(data, "head", 0, 0, 63)
        return cls(text(data.get("text"), "text", limits), tokens_of(data, limits), one_layer=layer, one_head=head)

    @classmethod
    def edit(cls, data: dict, limits: Limits) -> LabRequest:
        step = integer(data, "step", 0, 0, limits.max_chars)
        weights = tuple(weights_of(data, limits))
        return cls(text(data.get("text"), "text", limits), tokens_of(data, limits), step=step, weights=weights)

    @classmethod
    def align(cls, data: dict, limits: Limits) -> LabRequest:
        return cls(text(data.get("text"), "text", limits), tokens_of(data, limits))

    @classmethod
    def saliency(cls, data: dict, limits: Limits) -> LabRequest:
        position = integer(data, "position", 0, 0, limits.max_chars)
        return cls(text(data.get("text"), "text", limits), tokens_of(data, limits), position=position)
