"""The encoder-decoder model: encoder, attention registry, the two decoder orders, their
assembly, the fast path and ensembles."""
