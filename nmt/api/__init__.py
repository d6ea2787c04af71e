"""The Python API: what a notebook or a script reaches for, from ``import nmt``::

    import nmt
    model = nmt.load("runs/eng-mar-cpu")          # a run folder, a model package or a config file
    model.translate("How are you?")               # -> "तू कसा आहेस?"
    model.attention("How are you?")               # a view that draws itself in the notebook

``load`` gives a ``Model``: translation, scores, alignments, export, and every view of the
attention lab as an object with ``.data`` (the lab's numbers) and a self-contained drawing
(``_repr_html_``, ``.save(path)``). ``train`` and ``prepare`` run what ``nmt train`` and ``nmt
prepare`` run and return the model. The objects underneath are the command line's own
(``Translator``, ``Lab``, the pipelines); the deeper modules stay for those who want them.
"""

from nmt.api.model import Model, compare, load
from nmt.api.runs import compare_attentions, init, prepare, timeline, train
from nmt.api.views import View

__all__ = ["Model", "View", "compare", "compare_attentions", "init", "load", "prepare", "timeline", "train"]
