"""The one exception type for user mistakes.

The CLI prints an ``NmtError`` as a short paragraph and exits non-zero; anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path


class NmtError(Exception):
    """A problem the user can fix: bad config, missing file, mismatched checkpoint..."""


def relative_to_here(path: str | Path) -> str:
    """For a message about a missing ``path``: where a relative one was looked for, and why
    there (a config's paths are relative to the folder nmt runs in, as JoeyNMT's and
    OpenNMT's are)."""
    path = Path(path)
    if path.is_absolute():
        return ""
    return (
        f" (looked for in {Path.cwd() / path}: a config's paths are relative to the folder nmt runs in; run it "
        "from the folder the config was written for, or give a run's own RUN/config.yaml, which works from any folder)"
    )
