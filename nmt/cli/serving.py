"""``nmt serve``: the page, the attention lab and the JSON API."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.common import (
    CheckpointsOption,
    DeviceOption,
    EngineOption,
    OptionalConfigOption,
    SetOption,
    TgtLangOption,
    ThreadsOption,
    open_translator,
    user_errors,
)
from nmt.core.errors import NmtError

TokenOption = Annotated[
    str,
    typer.Option(
        "--token",
        envvar="NMT_SERVE_TOKEN",
        help="The token every API request must carry (the page is opened as /?token=TOKEN); "
        "default: a random one, printed in the address.",
    ),
]

NoTokenOption = Annotated[
    bool, typer.Option("--no-token", help="No token: any program on this machine may use the API.")
]

AllowHostOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host", help="Another name the page is opened by (e.g. this machine's name on the network); repeatable."
    ),
]


def _serve_token(token: str, no_token: bool) -> str:
    """The given token, none with --no-token, else a new random one (as Jupyter makes at each start)."""
    if no_token and token:
        raise NmtError("--no-token and --token contradict each other: give one.")
    return "" if no_token else token or secrets.token_urlsafe(18)


@user_errors
def serve(
    config: OptionalConfigOption = None,
    set_: SetOption = None,
    checkpoint: CheckpointsOption = None,
    model: Annotated[
        list[Path] | None,
        typer.Option("--model", help="A model package folder from `nmt export`; repeat to show models side by side."),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")] = 8000,
    device: DeviceOption = None,
    token: TokenOption = "",
    no_token: NoTokenOption = False,
    allow_host: AllowHostOption = None,
    max_work: Annotated[
        int | None,
        typer.Option(
            "--max-work", min=1, help="One request's work limit: characters x beam size, summed (413 beyond; 256000)."
        ),
    ] = None,
    max_queued: Annotated[
        int | None,
        typer.Option("--max-queued", min=1, help="Texts waiting per model before 503 + Retry-After (512)."),
    ] = None,
    max_request_seconds: Annotated[
        float | None,
        typer.Option(
            "--max-request-seconds",
            min=1,
            help="One translation request's time, waiting included; beyond, its work is dropped and it gets 503 (60).",
        ),
    ] = None,
    engine: EngineOption = "torch",
    tgt_lang: TgtLangOption = None,
    threads: ThreadsOption = "auto",
) -> None:
    """A local page that translates as you type and draws attention, and its JSON API.

    Open http://HOST:PORT/ in a browser; the API is under /api (docs/reference/api.md). Several --model
    folders are shown side by side; --config (with --checkpoint) serves a training run. Ctrl-C stops.
    """
    from nmt.serve.app import LOCAL_HOSTS, bind, build_app, page_address, run_server
    from nmt.serve.requests import Limits

    translators = _served(config, set_, checkpoint, model, device, engine, tgt_lang, threads)
    token = _serve_token(token, no_token)
    listening = bind(host, port)  # before a word is printed: a busy port is an error, not an address
    address = page_address(host, listening.getsockname()[1], token)
    typer.echo(f"Serving {', '.join(translators)} on {address} (Ctrl-C stops)", err=True)
    _warn_if_reachable(host, token)
    limits = Limits(
        max_work=max_work or Limits.max_work,
        max_queued=max_queued or Limits.max_queued,
        max_seconds=max_request_seconds or Limits.max_seconds,
    )
    hosts = (*LOCAL_HOSTS, *([host] if host not in ("0.0.0.0", "::") else []), *(allow_host or []))
    run_server(build_app(translators, limits, token, hosts), listening)


def _served(config, set_, checkpoint, models, device, engine, tgt_lang, threads: str = "auto") -> dict:
    """The models to serve by name: each --model package (named after its folder; a repeated
    name gets a number), side by side, or the run of --config; each paces its own decoding."""
    if not models:
        translator = open_translator(config, set_, checkpoint, None, device, engine, tgt_lang, threads=threads)
        return {Path(translator.loaded.config.run_dir).name: translator}
    translators: dict = {}
    for path in models:
        name = path.resolve().name
        name = name if name not in translators else f"{name}-{len(translators) + 1}"
        translators[name] = open_translator(config, set_, checkpoint, [path], device, engine, tgt_lang, threads=threads)
    return translators


def _warn_if_reachable(host: str, token: str) -> None:
    """Listening beyond loopback: say who can reach the page."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(
            f"warning: listening on {host}: anyone who can reach this machine on the network can open the page "
            "and use the API"
            + (" with the token." if token else "; without --no-token every request carries a token.")
            + " The page answers only to the names it is opened by: add this machine's with --allow-host NAME.",
            err=True,
        )
