"""The model families, a folder each (``rnn/``, ``transformer/``: settings, network, registry
entry, export modules), what every family is (``base.py``), and what they share: the fast path,
dropout, ensembles and the flat graphs' names."""
