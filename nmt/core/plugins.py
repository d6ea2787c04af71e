"""Your code, loaded where the built-ins are: a plugin is a Python module that registers
entries (an attention, a cell, an engine, a callback, a decoding strategy) when it is imported.

Three ways to name one, each imported once per process:

- installed: a package that declares ``[project.entry-points."nmt.plugins"]`` (any name = its
  module) is imported the first time any registry is read;
- in a config: ``plugins: [my_attention]`` — a run's saved config.yaml keeps the list, so the
  run's members, its resumption, ``nmt translate`` and the trials of ``nmt tune`` import them too;
- on the command line: ``nmt --plugin my_attention train ...`` adds the module to the config's list.

A plugin is a module name, importable from ``sys.path`` (``PYTHONPATH=. nmt ...`` for one in the
working folder), never a file path: a shared model package can name the code it needs, and
only code already on this machine is run. A package whose config names a plugin not loaded yet
is refused until ``--plugin`` names it (nmt/runtime/loading.py).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys

from nmt.core.errors import NmtError

GROUP = "nmt.plugins"
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_requested: list[str] = []  # --plugin, in order: load_config adds them to the config's plugins
_installed_loaded = False


def load_installed_plugins() -> None:
    """Import every module installed packages declare under the ``nmt.plugins`` entry points."""
    global _installed_loaded
    if _installed_loaded:
        return
    _installed_loaded = True
    for entry in importlib.metadata.entry_points(group=GROUP):
        try:
            entry.load()
        except Exception as error:
            raise NmtError(
                f"The installed nmt plugin {entry.name!r} ({entry.value}) failed to load: {error}"
            ) from error


def load_plugins(names: list[str], where: str = "plugins") -> None:
    """Import the modules ``names`` (``where`` says who named them, for messages)."""
    for name in names:
        if not isinstance(name, str) or not MODULE_NAME.fullmatch(name):
            raise NmtError(f"{where}: {name!r} is not a module name (a plugin is imported by name, not by path).")
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name and name.startswith(error.name):
                raise NmtError(
                    f"{where}: no module named {name!r} on the Python path: install it, or run from its folder "
                    "with PYTHONPATH=."
                ) from None
            raise NmtError(f"{where}: plugin {name!r} failed to import: {error}") from error
        except NmtError:
            raise
        except Exception as error:
            raise NmtError(f"{where}: plugin {name!r} failed to import ({type(error).__name__}: {error})") from error


def request_plugins(names: list[str]) -> None:
    """``--plugin``: import them now, and remember them for the configs this process loads."""
    load_plugins(names, "--plugin")
    _requested.extend(name for name in names if name not in _requested)


def requested_plugins() -> list[str]:
    return list(_requested)


def missing_plugins(names: list) -> list:
    """Which of ``names`` this process has not imported (anything but a module name, from a
    config someone else wrote, counts as missing)."""
    return [name for name in names if not isinstance(name, str) or name not in sys.modules]
