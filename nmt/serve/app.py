"""``nmt serve``: one page and a JSON API over loaded models (Starlette on uvicorn).

Models are shared read-only: each request decodes on a worker thread (the event loop keeps
answering) under its model's lock. Nothing is fetched from the network; the page's files
ship in ``nmt/serve/static``. Every user mistake gets a 4xx JSON answer naming the field:
``{"error": message, "field": name}``.
"""

from __future__ import annotations

import threading
from dataclasses import asdict
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from nmt.errors import NmtError
from nmt.fonts import missing_scripts, script_font
from nmt.serve.requests import AlternativesRequest, Limits, RequestError, TranslateRequest, model_name, read_json
from nmt.translate import Explanation, Translator

STATIC = Path(__file__).resolve().parent / "static"


class ServedModel:
    """One model the server offers, with the lock its requests take turns on."""

    def __init__(self, name: str, translator: Translator):
        self.name, self.translator = name, translator
        self.lock = threading.Lock()
        # scripts in the vocabularies that no served font draws (the browser may have one)
        tokenizers = (translator.loaded.src_tok, translator.loaded.tgt_tok)
        pieces = [tok.processor.id_to_piece(i) for tok in tokenizers for i in range(tok.vocab_size)]
        self.scripts_without_font = sorted(script.title() for script in missing_scripts(pieces))

    def info(self) -> dict:
        config = self.translator.loaded.config
        model = self.translator.model
        return {
            "name": self.name,
            "src_lang": config.data.src_lang,
            "tgt_lang": config.data.tgt_lang,
            "attention": config.model.attention,
            "input_feeding": config.model.input_feeding,
            "parameters": sum(p.numel() for p in model.parameters()),
            "beam_size": config.decode.beam_size,
            "scripts_without_font": self.scripts_without_font,
        }

    def check_prefix(self, prefix: str | list[str]) -> None:
        try:
            self.translator.prefix_ids(prefix)
        except NmtError as error:
            raise RequestError(422, "prefix_tokens", str(error)) from None

    def explain(self, request: TranslateRequest) -> list[Explanation]:
        self.check_prefix(request.prefix)
        with self.lock:
            return self.translator.explain(request.texts, request.beam_size, request.n_best, request.prefix)

    def alternatives(self, request: AlternativesRequest) -> list[tuple[str, float]]:
        self.check_prefix(request.prefix)
        with self.lock:
            return self.translator.alternatives(request.text, request.prefix, request.k)


def explanation_json(explanation: Explanation) -> dict:
    return {
        "translations": [asdict(t) for t in explanation.translations],
        "source_tokens": explanation.source_tokens,
        "attention": explanation.attention,
    }


async def page(request: Request) -> FileResponse:
    return FileResponse(STATIC / "index.html")


async def font(request: Request) -> Response:
    """/fonts/<script>.ttf: a Noto font from its PyPI package (as for the PNG heatmaps), so the
    page shapes Devanagari, Arabic, Tamil... even where the system has no font for them."""
    path = script_font(request.path_params["script"])
    return FileResponse(path, media_type="font/ttf") if path else Response(status_code=404)


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def request_error(request: Request, error: RequestError) -> JSONResponse:
    return JSONResponse({"error": error.message, "field": error.field}, status_code=error.status)


async def server_error(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse({"error": f"the server failed on this request ({type(error).__name__})"}, 500)


def build_app(models: dict[str, Translator], limits: Limits | None = None) -> Starlette:
    """The page at /, its files at /static, the API at /api/*."""
    served = {name: ServedModel(name, translator) for name, translator in models.items()}
    limits = limits or Limits()

    def pick(name: str | None) -> ServedModel:
        if name is None:
            return next(iter(served.values()))
        if name not in served:
            raise RequestError(404, "model", f"no model named {name!r}; this server has: {', '.join(served)}")
        return served[name]

    async def list_models(request: Request) -> JSONResponse:
        return JSONResponse({"models": [m.info() for m in served.values()]})

    async def translate(request: Request) -> JSONResponse:
        data = await read_json(request, limits)
        model = pick(model_name(data))
        parsed = TranslateRequest.parse(data, limits, model.translator.decode.beam_size)
        results = [explanation_json(e) for e in await run_in_threadpool(model.explain, parsed)]
        body = {"results": results} if parsed.batch else results[0]
        return JSONResponse({**body, "model": model.name})

    async def alternatives(request: Request) -> JSONResponse:
        data = await read_json(request, limits)
        model = pick(model_name(data))
        parsed = AlternativesRequest.parse(data, limits)
        found = await run_in_threadpool(model.alternatives, parsed)
        return JSONResponse(
            {
                "alternatives": [{"token": t, "logprob": p} for t, p in found],
                "prefix": parsed.prefix,
                "model": model.name,
            }
        )

    routes = [
        Route("/", page),
        Route("/fonts/{script:str}.ttf", font),
        Route("/api/health", health),
        Route("/api/models", list_models),
        Route("/api/translate", translate, methods=["POST"]),
        Route("/api/alternatives", alternatives, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    handlers = {RequestError: request_error, Exception: server_error}
    return Starlette(routes=routes, exception_handlers=handlers)


def run_server(app: Starlette, host: str, port: int) -> None:
    """Serve until Ctrl-C (uvicorn finishes the requests in flight, then returns)."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="info")
