"""``python -m nmt``: the ``nmt`` command.

``python -m`` puts the current folder first on ``sys.path``; a run folder someone hands you could
then shadow any module nmt imports later (a plugin's name, a library's). It is taken off again,
as the installed ``nmt`` command never has it, unless nmt itself is being run from that folder
(a checkout that was not installed). ``PYTHONPATH=.`` still adds it on purpose.
"""

import os
import sys
from pathlib import Path


def _without_the_current_folder() -> None:
    here = Path.cwd().resolve()
    if sys.path and sys.path[0] in ("", os.curdir, str(here)):
        nmt_home = Path(__file__).resolve().parents[1]
        if nmt_home != here:
            sys.path.pop(0)


_without_the_current_folder()

from nmt.cli import main  # noqa: E402  (after the path is mended)

if __name__ == "__main__":
    main()
