"""``nmt serve``: one page and a JSON API over loaded models (Starlette on uvicorn).

Models are shared read-only. Translations go through each model's ``Scheduler``: concurrent
requests are batched into one search, big ones cut into slices that take turns with the
others, the queue is bounded (503 with Retry-After) and a request whose client went away is
dropped. The lab's and the alternatives' requests decode on a worker thread under the model's
lock (the event loop keeps answering). Nothing is fetched from the network; the page's files
ship in ``nmt/serve/static``. Every user mistake gets a 4xx JSON answer naming the field:
``{"error": message, "field": name}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import json
import logging
import re
import socket
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from nmt.config.paths import run_paths
from nmt.core.errors import NmtError
from nmt.core.fonts import missing_scripts, script_font
from nmt.core.registry import ARCHITECTURES
from nmt.decoding.search import SearchesItself
from nmt.pipelines.lab import Lab, LabInputError
from nmt.pipelines.lab_size import LabSize
from nmt.pipelines.lab_views import compact
from nmt.pipelines.translate import Explanation, Translator
from nmt.serve.requests import (
    AlternativesRequest,
    LabRequest,
    Limits,
    RequestError,
    TranslateRequest,
    model_name,
    read_json,
    work_of,
)
from nmt.serve.scheduler import QueueFull, Scheduler, SoloWork, Ticket
from nmt.training.timeline import read_timeline_within

STATIC = Path(__file__).resolve().parent / "static"
LAB_VIEWS = ("tree", "playback", "edit", "saliency", "heads", "align")


# A served model's output limit (ratio x source subwords + offset), whatever its package says:
# the work budget counts a request's input, so its output must stay in proportion.
SERVED_MAX_LEN_RATIO = 3.0
SERVED_MAX_LEN_OFFSET = 50
# The names a browser on this machine reaches the server by; others are refused (DNS rebinding).
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def clamp_decoding(translator: Translator) -> None:
    decode = translator.decode
    translator.decode = replace(
        decode,
        max_len_ratio=min(decode.max_len_ratio, SERVED_MAX_LEN_RATIO),
        max_len_offset=min(decode.max_len_offset, SERVED_MAX_LEN_OFFSET),
    )


class ServedModel:
    """One model the server offers, with the lock its requests take turns on."""

    def __init__(self, name: str, translator: Translator, limits: Limits):
        self.name, self.translator = name, translator
        clamp_decoding(translator)
        self.lab = Lab(translator)
        self.lock = threading.Lock()
        self.scheduler = Scheduler(self.decode, max_queued=limits.max_queued, lock=self.lock)
        # scripts in the vocabularies that no served font draws (the browser may have one)
        tokenizers = (translator.loaded.src_tok, translator.loaded.tgt_tok)
        pieces = [piece for tok in tokenizers for piece in tok.pieces()]
        self.scripts_without_font = sorted(script.title() for script in missing_scripts(pieces))

    def info(self) -> dict:
        config = self.translator.loaded.config
        family = ARCHITECTURES[config.model.arch]
        return {
            "name": self.name,
            "src_lang": config.data.src_lang,
            "tgt_lang": config.data.tgt_lang,
            "arch": config.model.arch,  # rnn | transformer: the family, whose own settings follow
            "summary": family.summary(config.model),  # the family's few words
            **family.served_settings(config.model),  # layers, and an RNN's attention or a Transformer's heads
            "lab_views": list(self.lab.views()),  # the lab's views of this model
            "parameters": self.translator.loaded.parameters,
            "engine": self.translator.loaded.engine,
            "beam_size": config.decode.beam_size,
            "scripts_without_font": self.scripts_without_font,
            "has_timeline": run_paths(config).timeline.is_file(),
            "parent": public_parent(self.translator.loaded.parent),  # the model it was trained from, or null
        }

    def check_prefix(self, prefix: str | list[str]) -> None:
        try:
            ids = self.translator.prefix_ids(prefix)
        except NmtError as error:
            raise RequestError(422, "prefix_tokens", str(error)) from None
        if ids:
            self.check_steps("prefix")

    def check_steps(self, field: str) -> None:
        """A 422 naming ``field`` where the engine searches whole sentences itself (CTranslate2):
        prefixes and next-token alternatives feed its decoder a given target, which it cannot."""
        if isinstance(self.translator.model, SearchesItself):
            raise RequestError(
                422,
                field,
                f"{field}: this model runs on --engine {self.translator.loaded.engine}, which searches whole "
                "sentences itself; prefixes, alternatives and the lab's views need --engine torch (or onnx)",
            )

    def decode(self, texts: list[str], settings) -> list:
        """One search for a batch of requests' texts with the same settings, or one request's own
        work (``SoloWork``): the scheduler's call, on its worker thread, under the model's lock."""
        if isinstance(settings, SoloWork):
            return [settings.run()]
        beam_size, n_best, prefix, attention = settings
        prefix = prefix if isinstance(prefix, str) else list(prefix)
        return self.translator.explain(texts, beam_size, n_best, prefix, with_attention=attention)

    def alternatives(self, request: AlternativesRequest) -> bytes:
        found = self.translator.alternatives(request.text, request.prefix, request.k)
        alternatives = [{"token": t, "logprob": p} for t, p in found]
        return json_bytes({"alternatives": alternatives, "prefix": request.prefix, "model": self.name})

    def lab_size(self, view: str, request: LabRequest) -> LabSize:
        """How big the answer of ``view`` will be, before any work (422 where the request does not fit
        the model or the sentence)."""
        by_view: dict[str, dict] = {
            "tree": {"beam": request.beam_size},
            "playback": {"top_k": request.top_k},
            "heads": {"layer": request.one_layer, "head": request.one_head},
        }
        asked = by_view.get(view, {})
        try:
            return self.lab.size(view, request.text, request.tokens, **asked)
        except (LabInputError, NmtError) as error:
            raise RequestError(422, getattr(error, "field", "tokens"), str(error)) from None

    def lab_answer(self, view: str, request: LabRequest, max_bytes: int) -> bytes:
        """One of the attention lab's views (``nmt.pipelines.lab``) as JSON bytes, made on the
        scheduler's thread; a request that does not fit the sentence or the model is a 422 naming the
        field, and an answer over ``max_bytes`` a 413."""
        lab = self.lab
        if request.tokens is None and view != "tree":  # the translation first, then its exact size
            request = replace(request, tokens=lab.labels(lab.target_ids(request.text, None)))
            self.refuse_oversized(view, self.lab_size(view, request), max_bytes)
        calls = {
            "tree": lambda: lab.tree(request.text, request.beam_size),
            "playback": lambda: lab.playback(request.text, request.tokens, request.top_k, request.layer, request.head),
            "heads": lambda: lab.heads(request.text, request.tokens, request.one_layer, request.one_head),
            "edit": lambda: lab.edit(request.text, request.step, list(request.weights), request.tokens),
            "saliency": lambda: lab.saliency(request.text, request.position, request.tokens),
            "align": lambda: lab.align(request.text, request.tokens),
        }
        try:
            answer = calls[view]().to_json()  # type: ignore[attr-defined]  # every view has one
        except LabInputError as error:
            raise RequestError(422, error.field, str(error)) from None
        body = json_bytes({**answer, "model": self.name})
        if len(body) > max_bytes:
            raise RequestError(
                413, "tokens", f"this {view} answer is {len(body):,} bytes; the limit is {max_bytes:,}: {NARROW[view]}"
            )
        return body

    @staticmethod
    def refuse_oversized(view: str, size: LabSize, max_bytes: int) -> None:
        """413 naming what to narrow when ``size`` passes ``max_bytes``."""
        if size.bytes > max_bytes:
            field, _ = size.narrow[0]
            raise RequestError(
                413,
                field,
                f"this {view} answer would be {size.bytes:,} bytes; the limit is {max_bytes:,}: {NARROW[view]}",
            )

    def timeline(self, max_bytes: int = Limits().max_answer_bytes) -> dict:
        path = run_paths(self.translator.loaded.config).timeline
        if path.is_symlink():
            raise RequestError(403, "model", f"{self.name}'s timeline is a symbolic link: it is not served")
        if not path.is_file():
            config = self.translator.loaded.config
            why = (
                "no epoch of its training has ended yet (the probes' attention is recorded at each epoch's end)"
                if config.train.probes > 0
                else "it was trained with train.probes: 0 (training records one with train.probes > 0)"
            )
            raise RequestError(404, "model", f"{self.name} has no attention timeline: {why}")
        entries, recorded = read_timeline_within(path, max_bytes)
        return {"entries": entries, "recorded": recorded}  # recorded > len(entries): evenly thinned to fit


NARROW = {  # what makes each lab view's answer smaller
    "heads": "ask for one layer and head (layer, head), or send the subwords of a shorter translation",
    "tree": "send a shorter text or a smaller beam_size",
    "playback": "send the subwords of a shorter translation, or a smaller top_k",
    "edit": "send a shorter text",
    "saliency": "send a shorter text",
    "align": "send a shorter text, or the subwords of a shorter translation",
}


def json_bytes(value: Any) -> bytes:
    """An answer as JSON bytes, made off the event loop (by the scheduler's thread or a worker):
    serialising a big answer on the loop kept /api/health waiting for seconds."""
    return json.dumps(compact(value), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def json_response(body: bytes) -> Response:
    return Response(body, media_type="application/json")


def public_parent(parent: dict | None) -> dict | None:
    """A parent as the API shows it: its name, pair, hash and score (models trained before the
    lineage left out local paths still carry one: not this machine's business to publish)."""
    return None if parent is None else {key: value for key, value in parent.items() if key != "path"}


def explanation_json(explanation: Explanation, attention: bool) -> dict:
    answer = {"translations": [asdict(t) for t in explanation.translations], "source_tokens": explanation.source_tokens}
    return {**answer, "attention": explanation.attention} if attention else answer


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


async def answer_of(
    request: Request, scheduler: Scheduler, ticket: Ticket, max_seconds: float, poll: float = 0.05
) -> list:
    """The ticket's answers; if the client disconnects first, or ``max_seconds`` pass (the queue
    included), its work is cancelled (503 naming the limit)."""
    waiting = asyncio.wrap_future(ticket.future)
    deadline = time.monotonic() + max_seconds
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=poll)
        if done:
            return waiting.result()
        if await request.is_disconnected():
            scheduler.cancel(ticket)
            raise ClientGone
        if time.monotonic() > deadline:
            scheduler.cancel(ticket)
            raise RequestError(
                503,
                "texts",
                f"this request took longer than {max_seconds:g} s (nmt serve --max-request-seconds) and was dropped: "
                "send fewer or shorter texts, or a smaller beam_size, or try again when the server is less busy",
            )


async def page(request: Request) -> FileResponse:
    return FileResponse(STATIC / "index.html")


async def font(request: Request) -> Response:
    """/fonts/<script>.ttf: a Noto font from its PyPI package (as for the PNG heatmaps), so the
    page shapes Devanagari, Arabic, Tamil... even where the system has no font for them."""
    path = script_font(request.path_params["script"])
    return FileResponse(path, media_type="font/ttf") if path else Response(status_code=404)


async def request_error(request: Request, error: RequestError) -> JSONResponse:
    return JSONResponse({"error": error.message, "field": error.field}, status_code=error.status)


async def server_error(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse({"error": f"the server failed on this request ({type(error).__name__})"}, 500)


async def queue_full(request: Request, error: QueueFull) -> JSONResponse:
    message = f"the server is busy ({error.queued} texts waiting for this model); retry in {error.retry_after} s"
    return JSONResponse({"error": message, "field": "model"}, 503, headers={"Retry-After": str(error.retry_after)})


async def client_gone(request: Request, error: ClientGone) -> Response:
    return Response(status_code=499)  # nobody reads it: the status only marks the log line


class Api:
    """The JSON API's handlers over the served models."""

    def __init__(self, models: dict[str, Translator], limits: Limits):
        self.served = {name: ServedModel(name, translator, limits) for name, translator in models.items()}
        self.limits = limits

    async def health(self, request: Request) -> JSONResponse:
        """Answered on the event loop, never behind the queue: each model's queue and counts."""
        return JSONResponse({"status": "ok", "queues": {m.name: m.scheduler.status() for m in self.served.values()}})

    def pick(self, name: str | None) -> ServedModel:
        if name is None:
            return next(iter(self.served.values()))
        if name not in self.served:
            raise RequestError(404, "model", f"no model named {name!r}; this server has: {', '.join(self.served)}")
        return self.served[name]

    async def list_models(self, request: Request) -> JSONResponse:
        return JSONResponse({"models": [m.info() for m in self.served.values()]})

    async def translate(self, request: Request) -> Response:
        data = await read_json(request, self.limits)
        model = self.pick(model_name(data))
        parsed = TranslateRequest.parse(data, self.limits, model.translator.decode.beam_size)
        model.check_prefix(parsed.prefix)
        ticket = model.scheduler.submit(parsed.texts, parsed.settings, parsed.work)
        explained = await answer_of(request, model.scheduler, ticket, self.limits.max_seconds)
        results = [explanation_json(e, parsed.attention) for e in explained]
        body = {"results": results} if parsed.batch else results[0]
        return json_response(await run_in_threadpool(json_bytes, {**body, "model": model.name}))

    async def alternatives(self, request: Request) -> Response:
        """POST /api/alternatives: the next subwords' alternatives, in the model's queue as a translation is."""
        data = await read_json(request, self.limits)
        model = self.pick(model_name(data))
        parsed = AlternativesRequest.parse(data, self.limits)
        model.check_steps("model")
        model.check_prefix(parsed.prefix)
        work = work_of([parsed.text], 1)
        ticket = model.scheduler.submit([parsed.text], SoloWork(lambda: model.alternatives(parsed)), work, solo=True)
        return json_response((await answer_of(request, model.scheduler, ticket, self.limits.max_seconds))[0])

    async def lab(self, request: Request) -> Response:
        """POST /api/lab/<view>: the attention lab's views. Each is sized before any work (413 naming
        what to narrow when its answer could pass ``max_answer_bytes``), then waits its turn in the
        model's queue with the translations, under their queue and time bounds, and is made and
        serialised on the scheduler's thread: the event loop only sends the bytes."""
        view = request.path_params["view"]
        if view not in LAB_VIEWS:
            raise RequestError(404, "view", f"no lab view {view!r}; there are: {', '.join(LAB_VIEWS)}")
        data = await read_json(request, self.limits)
        model = self.pick(model_name(data))
        if view == "tree":
            parsed = LabRequest.tree(data, self.limits, model.translator.decode.beam_size)
        else:
            parsed = getattr(LabRequest, view)(data, self.limits)
        size, limit = model.lab_size(view, parsed), self.limits.max_answer_bytes
        model.refuse_oversized(view, size, limit)  # before any work: at least this big
        run = SoloWork(lambda: model.lab_answer(view, parsed, limit))
        ticket = model.scheduler.submit([parsed.text], run, [size.numbers], solo=True)
        return json_response((await answer_of(request, model.scheduler, ticket, self.limits.max_seconds))[0])

    async def timeline(self, request: Request) -> JSONResponse:
        """GET /api/timeline?model=NAME: the probe sentences' attention at every epoch's validation."""
        model = self.pick(request.query_params.get("model"))
        found = await run_in_threadpool(model.timeline, self.limits.max_answer_bytes - 1000)  # room for the rest
        return JSONResponse({**found, "model": model.name})


def build_app(
    models: dict[str, Translator], limits: Limits | None = None, token: str = "", hosts: tuple[str, ...] = LOCAL_HOSTS
) -> Starlette:
    """The page at /, its files at /static, the API at /api/*; with a ``token``, every API
    request but /api/health must carry it. Requests must name one of ``hosts`` as their Host,
    and a browser's Origin, where it sends one, must be one of them too (``LocalOnly``)."""
    api = Api(models, limits or Limits())
    routes = [
        Route("/", page),
        Route("/fonts/{script:str}.ttf", font),
        Route("/api/health", api.health),
        Route("/api/models", api.list_models),
        Route("/api/translate", api.translate, methods=["POST"]),
        Route("/api/alternatives", api.alternatives, methods=["POST"]),
        Route("/api/lab/{view:str}", api.lab, methods=["POST"]),
        Route("/api/timeline", api.timeline),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    handlers: dict[Any, Any] = {
        RequestError: request_error,
        QueueFull: queue_full,
        ClientGone: client_gone,
        Exception: server_error,
    }
    middleware = [Middleware(LocalOnly, hosts=hosts)]
    middleware += [Middleware(TokenCheck, token=token)] if token else []
    app = Starlette(routes=routes, exception_handlers=handlers, middleware=middleware)
    app.state.served = api.served  # the models with their schedulers and locks, for tests and tools
    return app


class TokenCheck:
    """A shared token for a class: API requests carry it as ``Authorization: Bearer TOKEN`` (the
    page sends the one in its address, ``/?token=TOKEN``); others get 401 naming the field."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/api/") and scope["path"] != "/api/health":
            given = Request(scope).headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                message = (
                    "this server needs its token: open the page as /?token=TOKEN, or send Authorization: Bearer TOKEN"
                )
                await JSONResponse({"error": message, "field": "token"}, 401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def host_name(value: str) -> str:
    """The host of a Host header or an Origin's authority, without its port: ``[::1]:8000`` -> ``::1``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class LocalOnly:
    """Only requests meant for this server: a Host header naming one of ``hosts`` (a page on
    another site that rebinds its own name to 127.0.0.1 sends its own name, and gets 400), and,
    where a browser sends an Origin, one on those hosts (another site's page gets 403)."""

    def __init__(self, app, hosts: tuple[str, ...]):
        self.app, self.hosts = app, {host_name(h) for h in hosts}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = Request(scope).headers
            origin = headers.get("origin")
            if host_name(headers.get("host", "")) not in self.hosts:
                allowed = ", ".join(sorted(self.hosts))
                message = f"this server answers to {allowed} (nmt serve --allow-host NAME adds a name)"
                await JSONResponse({"error": message, "field": "host"}, 400)(scope, receive, send)
                return
            if origin is not None and host_name(origin.split("://", 1)[-1]) not in self.hosts:
                message = "requests from other sites' pages are refused"
                await JSONResponse({"error": message, "field": "origin"}, 403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


TOKEN_IN_ADDRESS = re.compile(r"(token=)[^&\s]*")


class HideToken(logging.Filter):
    """The access log shows ``/?token=…``, never the token itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(TOKEN_IN_ADDRESS.sub(r"\1…", a) if isinstance(a, str) else a for a in record.args)
        return True


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: a free port the system picks), bound before
    the server starts, so that the address printed is the one bound and a busy port is refused
    before anything says "Serving"."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise NmtError(
                f"Port {port} on {host} is in use (another nmt serve?): give another with --port, or --port 0 "
                "for a free one."
            ) from None
        raise NmtError(f"Cannot listen on {host}:{port}: {error.strerror}.") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def page_address(host: str, port: int, token: str) -> str:
    """The page's address, as a browser opens it (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def run_server(app: Starlette, listening: socket.socket) -> None:
    """Serve on ``listening`` (``bind``) until Ctrl-C (uvicorn finishes the requests in flight,
    then returns)."""
    import uvicorn

    host, port = listening.getsockname()[:2]
    config = uvicorn.Config(app, host=host, port=port, log_level="info")  # configures uvicorn's loggers
    logging.getLogger("uvicorn.access").addFilter(HideToken())
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl-C after a clean shutdown
        uvicorn.Server(config).run(sockets=[listening])
