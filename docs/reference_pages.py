"""The generated reference pages: every config key from the config dataclasses
(nmt/config/reference.py), every command and option from the Typer app itself. They are
committed (a repository host shows them; the README links them) and written by
``python docs/reference_pages.py``; tests/test_docs.py fails when one is not current, so no
page can hold a stale copy of what the code declares."""

from __future__ import annotations

from pathlib import Path

import click
import typer.main

from nmt.cli import app
from nmt.config.reference import markdown as config_markdown


def _option_row(param: click.Parameter) -> str:
    names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
    if isinstance(param, click.Argument):
        return f"| `{param.human_readable_name}` (argument) | {'required' if param.required else ''} | |"
    default = "" if param.default in (None, False, (), []) or callable(param.default) else f"`{param.default}`"
    help_text = (getattr(param, "help", "") or "").replace("|", "\\|").replace("\n", " ")
    return f"| {names} | {help_text} | {default} |"


def cli_markdown() -> str:
    """Every command: its help text and its options, as the app declares them."""
    group = typer.main.get_command(app)
    parts = [
        "# CLI reference\n",
        "Generated from the commands themselves (what `nmt COMMAND --help` prints). "
        "[What each command does](commands.md) says more about each.\n",
    ]
    for name, command in sorted(group.commands.items()):
        parts.append(f"## `nmt {name}`\n")
        parts.append((command.help or "").strip() + "\n")
        rows = [_option_row(p) for p in command.params if p.name != "help"]
        if rows:
            parts.append("| option | what it does | default |\n|---|---|---|")
            parts += rows
            parts.append("")
    return "\n".join(parts) + "\n"


GENERATED = {"reference/config.md": config_markdown, "reference/cli.md": cli_markdown}


def write_generated() -> list[Path]:
    """Write the generated pages into docs/ (committed, so that they read on a repository host
    too; tests/test_docs.py checks they are current). ``python docs/reference_pages.py`` runs it."""
    docs = Path(__file__).resolve().parent
    written = []
    for name, make in GENERATED.items():
        path = docs / name
        path.write_text(make(), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_generated():
        print(f"wrote {path}")
