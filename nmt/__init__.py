"""nmt: attention-based RNN encoder-decoder translation for small parallel corpora."""

__version__ = "0.1.0"
DISTRIBUTION = "nmt-kit"  # the name on PyPI (`pip install nmt-kit`); the package and the command are `nmt`
