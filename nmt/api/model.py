"""``nmt.load`` and the ``Model`` it gives: a trained model as a notebook uses it, its translations,
scores, alignments and export, and every view of the attention lab as an object that draws itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from nmt.api.views import View, sized
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.pipelines.lab import Lab
from nmt.pipelines.translate import Translator
from nmt.pipelines.translators import open_trained


def load(
    path: str | Path | Sequence[str | Path],
    engine: str = "torch",
    device: str | None = None,
    checkpoint: str = "best",
    tgt_lang: str | None = None,
) -> Model:
    """The model ``path`` names: a run folder (its ``checkpoint``, default best), a model package
    (``nmt export``; ``engine`` onnx or ctranslate2 where it was exported for them) or a config file
    (its run). Several paths: one ensemble (packages, or runs of one config). ``tgt_lang``: the
    target of a model of several (``data.related``)."""
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    return Model(open_trained(list(paths), engine, device, checkpoint, tgt_lang))


class Model:
    """A loaded model. ``translator`` and ``lab`` are the objects the command line and the served
    lab use; every method here is one call into them."""

    def __init__(self, translator: Translator):
        self.translator = translator
        self.lab = Lab(translator)

    @property
    def config(self) -> Config:
        """The model's resolved config (a package's own, or its run's)."""
        return self.translator.loaded.config

    def __repr__(self) -> str:
        data = self.config.data
        return (
            f"<nmt.Model {data.src_lang}->{self.translator.tgt_lang} {self.config.model.arch} at {self.config.run_dir}>"
        )

    # ---- translation ----

    def translate(
        self, texts: str | Sequence[str], beam_size: int | None = None, n_best: int | None = None
    ) -> str | list[str] | list[tuple[str, float]] | list[list[tuple[str, float]]]:
        """The translation of ``texts`` (one text: one string; a list: a list, in order). With
        ``n_best``: the best ``n_best`` translations of each, as (translation, score) pairs."""
        single = isinstance(texts, str)
        lines: list[str] = [texts] if isinstance(texts, str) else list(texts)
        if n_best is None:
            found: list = self.translator.translate(lines, beam_size)
        else:
            found = [
                [(self.translator.detokenize(h), h.score) for h in hypotheses]
                for hypotheses in self.translator.search(lines, beam_size, n_best=n_best)
            ]
        return found[0] if single else found

    def score(self, sources: Sequence[str], translations: Sequence[str]) -> list[float]:
        """The log-probability of each given translation of each source (forced decoding)."""
        return [h.score for h in self.translator.score(list(sources), list(translations))]

    def evaluate(self, src: str | Path | None = None, refs: Sequence[str | Path] = (), align: bool = False) -> dict:
        """BLEU, chrF and TER (``nmt evaluate``'s report) on the prepared test set with all its
        references, or on ``src`` against the line-aligned ``refs``; written to <run_dir>/eval/.
        ``align``: also the attention's agreement with eflomal's word alignments of the pairs
        (``report["alignment"]``: AER, precision, recall; the ``align`` extra)."""
        from nmt.pipelines.evaluate import evaluate, evaluation_set, write_report

        if align:
            from nmt.data.alignments import require_eflomal

            require_eflomal("evaluate(align=True)")  # before anything is translated
        test_set, name = evaluation_set(self.config, Path(src) if src else None, [Path(r) for r in refs])
        report = evaluate(self.translator, test_set, name, ["best"])
        if align:
            from nmt.pipelines.align import alignment_agreement, training_pairs

            report["alignment"] = alignment_agreement(self.translator, test_set, name, training_pairs(self.config))
            write_report(self.translator, name, report)
        return report

    def align(
        self, sources: Sequence[str], targets: Sequence[str] | None = None, layer: int | None = None
    ) -> list[str]:
        """``nmt align``'s lines: each pair's word links from the attention (Pharaoh, i-j); without
        ``targets``, "translation ||| links" of the model's own translations."""
        from nmt.pipelines.align import model_lines

        lines, _ = model_lines(self.translator, list(sources), list(targets) if targets else None, layer)
        return lines

    def export(self, out_dir: str | Path, onnx: bool = False, ctranslate2: str | None = None) -> Path:
        """A model package of this run (``nmt export``): its best checkpoint, config, tokenizers,
        card and test set; ``onnx`` and ``ctranslate2`` (a quantization, e.g. int8) add engines."""
        from nmt.config.paths import PackagePaths
        from nmt.export.package import export_model

        run = Path(self.config.run_dir)
        if PackagePaths(run).manifest.is_file():
            raise NmtError(f"{run} is a package already: export the run it came from.")
        return export_model(run, Path(out_dir), "best", onnx, ctranslate2)

    # ---- the attention lab's views ----

    def attention(self, text: str, beam_size: int | None = None) -> View:
        """The attention of the best translation of ``text``: a heatmap, target subwords over source."""
        return View("attention", self._heatmap(text, beam_size))

    def _heatmap(self, text: str, beam_size: int | None = None) -> dict:
        if not text.strip():
            raise NmtError("The text is empty: give a sentence.")
        (heatmap,) = self.translator.heatmaps([text], beam_size)
        return {
            "source": heatmap.source,
            "translation": heatmap.translation,
            "source_tokens": heatmap.src_labels,
            "tokens": heatmap.tgt_labels,
            "weights": heatmap.weights.tolist(),
        }

    def tree(self, text: str, beam_size: int | None = None) -> View:
        """Every hypothesis beam search expanded, kept, ended or pruned."""
        sized(self.lab, "tree", text, None, beam=beam_size or self.translator.decode.beam_size)
        return View("tree", self.lab.tree(text, beam_size).to_json())

    def playback(self, text: str, top_k: int = 5, layer: int = -1, head: int = 0) -> View:
        """Each decoding step of the translation with the model's own numbers (a Transformer's:
        one ``layer`` and ``head``)."""
        tokens = sized(self.lab, "playback", text, None, top_k=top_k)
        return View("playback", self.lab.playback(text, tokens, top_k, layer, head).to_json())

    def heads(self, text: str, layer: int | None = None, head: int | None = None) -> View:
        """A Transformer's every layer and head: cross-attention and both self-attentions."""
        tokens = sized(self.lab, "heads", text, None, layer=layer, head=head)
        return View("heads", self.lab.heads(text, tokens, layer, head).to_json())

    def alignment(self, source: str, target: str | None = None) -> View:
        """Word alignment of ``source`` and ``target`` (default: the model's translation): the
        attention's links beside eflomal's where it is installed, and their AER."""
        tokens = self.lab.labels(self.lab.target_ids(target, None)) if target else None
        tokens = sized(self.lab, "align", source, tokens)
        return View("align", self.lab.align(source, tokens).to_json())

    def edit(self, text: str, step: int, weights: Sequence[float]) -> View:
        """Decoding resumed with step ``step``'s attention replaced by ``weights``, beside decoding
        without the edit: does the model follow its attention?"""
        return View("edit", self.lab.edit(text, step, list(weights)).to_json())

    def saliency(self, text: str, position: int) -> View:
        """Gradient × input of each source subword for target subword ``position``, beside its attention row."""
        return View("saliency", self.lab.saliency(text, position).to_json())


def compare(models: Mapping[str, Model] | Sequence[Model], text: str, beam_size: int | None = None) -> View:
    """Several models' translations of ``text`` and their attention, side by side (named by the
    mapping's keys, or by their run folders)."""
    named = models.items() if isinstance(models, Mapping) else [(Path(m.config.run_dir).name, m) for m in models]
    entries = [{"name": name, **model._heatmap(text, beam_size)} for name, model in named]
    if not entries:
        raise NmtError("Give at least one model to compare.")
    return View("compare", {"source": text, "models": entries})
