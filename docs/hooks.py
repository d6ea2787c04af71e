"""MkDocs hooks: the generated reference pages, added at build time so that no file holds a
second copy of what the code declares — every config key from the config dataclasses
(nmt/config/reference.py), every command and option from the Typer app itself."""

from __future__ import annotations

import click
import typer.main
from mkdocs.structure.files import File

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


def on_files(files, config):
    files.append(File.generated(config, "reference/config.md", content=config_markdown()))
    files.append(File.generated(config, "reference/cli.md", content=cli_markdown()))
    return files
