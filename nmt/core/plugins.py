"""Your code, loaded where the built-ins are: a plugin is a Python module that registers
entries (an attention, a cell, an engine, a callback, a decoding strategy) when it is imported.

Only two things can make ``nmt`` import code, and no file can:

- **installed**: a package that declares ``[project.entry-points."nmt.plugins"]`` (any name = its
  module) is imported the first time any registry is read;
- **the command line**: ``nmt --plugin my_attention train ...`` imports the module, and the run's
  config.yaml keeps its name (``plugins:``) so that the run says what it was trained with.

A config's ``plugins:`` list (your own, a run's config.yaml, a package's) is a requirement, not
an instruction: each name must be one of the above (a module of an installed plugin package, or
named with ``--plugin`` in this command), or the config is refused, saying which ``--plugin`` to
pass. A run folder or a package someone hands you therefore runs no code of its own, whatever
it names and wherever you run it from. The processes a command starts for itself (the members
of ``train.members``, the trials of ``nmt tune``) trust what it was told (``TRUSTED_ENV``).

A plugin is a module name, importable from ``sys.path`` (``PYTHONPATH=. nmt --plugin NAME ...`` for
one in the working folder), never a file path.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import sys

from nmt.core.errors import NmtError

GROUP = "nmt.plugins"
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# the --plugin names of the command that started this process (members and trials are processes of their own)
TRUSTED_ENV = "NMT_TRUSTED_PLUGINS"
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
    """``--plugin``: import them now, and remember them for the configs this process loads and
    the processes it starts."""
    load_plugins(names, "--plugin")
    _requested.extend(name for name in names if name not in _requested)
    if _requested:
        os.environ[TRUSTED_ENV] = ",".join(_requested)


def requested_plugins() -> list[str]:
    return list(_requested)


def _installed_packages() -> set[str]:
    """The top-level packages of the modules installed plugin packages declare."""
    return {entry.value.split(":")[0].split(".")[0] for entry in importlib.metadata.entry_points(group=GROUP)}


def trusted_plugins() -> set[str]:
    """Module names this process may import because a config names them: --plugin's here, or
    those of the command that started this process."""
    inherited = os.environ.get(TRUSTED_ENV, "")
    return set(_requested) | {name for name in inherited.split(",") if name}


def untrusted_plugins(names: list) -> list:
    """Which of a config's ``names`` neither an installed plugin package nor --plugin vouches
    for (anything but a module name counts as untrusted)."""
    trusted, installed = trusted_plugins(), _installed_packages()
    return [
        name for name in names if not isinstance(name, str) or not (name in trusted or name.split(".")[0] in installed)
    ]


def load_config_plugins(names: list[str], where: str) -> None:
    """Import the plugins a config names, if each is vouched for (``untrusted_plugins``); else
    refuse, importing nothing."""
    untrusted = untrusted_plugins(names)
    if untrusted:
        shown = ", ".join(map(repr, untrusted))
        flags = " ".join(f"--plugin {name}" for name in untrusted if isinstance(name, str))
        raise NmtError(
            f"{where} names {shown}, which is code: a config, a run folder or a package never makes nmt import "
            f"code by itself. If you trust it, name it on the command line ({flags or '--plugin MODULE'} before the "
            "command; PYTHONPATH=. for a module in this folder) or install it as a package that declares it."
        )
    load_plugins(names, where)


def missing_plugins(names: list) -> list:
    """Which of ``names`` this process has not imported (anything but a module name, from a
    config someone else wrote, counts as missing)."""
    return [name for name in names if not isinstance(name, str) or name not in sys.modules]
