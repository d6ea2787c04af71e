"""The one exception type for user mistakes.

The CLI prints an ``NmtError`` as a short paragraph and exits non-zero; anything else is a
bug and keeps its traceback.
"""


class NmtError(Exception):
    """A problem the user can fix: bad config, missing file, mismatched checkpoint..."""
