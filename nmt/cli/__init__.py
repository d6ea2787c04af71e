"""The ``nmt`` command: prepare | train | translate | evaluate, each over one YAML config (plus
init, plot, average, export, align, score, tune, compare and serve).

Each command parses its options, loads the config, calls one function and prints; its module
says which (``data``, ``training``, ``translating``, ``serving``, ``exporting``, ``runs``), and
``common`` holds what they share. A user mistake (``NmtError``, a missing file, an unwritable
directory) ends with a short message and exit code 1, never a traceback.
"""

from __future__ import annotations

from nmt.cli import data, exporting, runs, serving, training, translating
from nmt.cli.common import app

# in the order `nmt --help` lists them
COMMANDS = (
    data.prepare,
    data.init,
    training.train,
    translating.translate,
    translating.score,
    translating.align,
    translating.evaluate,
    serving.serve,
    exporting.export,
    runs.plot,
    runs.tune,
    runs.compare,
    runs.average,
)
for command in COMMANDS:
    app.command()(command)


def main() -> None:
    app()


__all__ = ["app", "main"]
