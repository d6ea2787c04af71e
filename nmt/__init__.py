"""nmt: attention-based RNN encoder-decoder translation for small parallel corpora."""

__version__ = "0.1.0"
