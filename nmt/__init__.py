"""nmt: attention-based translation (RNN encoder-decoders and the Transformer) for small parallel corpora."""

__version__ = "0.1.0"
DISTRIBUTION = "nmt-kit"  # the distribution's name (the package and the command are `nmt`); not on PyPI yet


def install_hint(extra: str, packages: str) -> str:
    """How to install an optional extra, in a line that works today: its packages by name."""
    return (
        f"pip install {packages} (what the [{extra}] extra installs: pip install '.[{extra}]' from a checkout of nmt, "
        f"or pip install '{DISTRIBUTION}[{extra}]' once the name is published)"
    )
