"""``nmt compare``: which attention aligns and translates best on your own pairs? Variants of one
config (the papers' attentions, and a Transformer) trained one after another on the same prepared
data, the user's budget shared evenly among them, then each scored on the test set with all its
references (BLEU, chrF) and its attention held against eflomal's word alignments of the same
pairs (AER; a Transformer's every layer and head too). A table, a JSON file
(<runs>/compare.json) and, from Python, a view (``nmt.compare_attentions``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt.config.files import load_config
from nmt.config.paths import run_paths
from nmt.config.recipes import recipes
from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import write_text_atomic
from nmt.core.registry import ARCHITECTURES, ATTENTIONS
from nmt.data.alignments import agreement, kept_eflomal_alignments, require_eflomal
from nmt.pipelines.align import alignment_agreement, model_alignments, target_ids, training_pairs
from nmt.pipelines.evaluate import evaluate, evaluation_set
from nmt.pipelines.prepare import prepare
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_checkpoints
from nmt.training.launch import train

TRANSFORMER = "transformer"  # the variant that is nmt init's Transformer (nmt/recipes.yaml's families)


@dataclass(frozen=True)
class Variant:
    name: str
    overrides: tuple[str, ...]  # --set lines over the config


def variants(attentions: Sequence[str], transformer: bool = False) -> list[Variant]:
    """An RNN variant per attention (each a registered one), and nmt init's Transformer if asked
    (its model and schedule; the config's tokenizer and batches, so that every variant reads the
    same prepared data)."""
    unknown = [name for name in attentions if name not in ATTENTIONS]
    if unknown:
        raise NmtError(f"--attention {unknown[0]!r}: not a registered attention; registered: {', '.join(ATTENTIONS)}.")
    found = [Variant(name, ("model.arch=rnn", f"model.attention={name}")) for name in dict.fromkeys(attentions)]
    if transformer:
        settings = recipes().families[TRANSFORMER].settings
        lines = [f"{s}.{k}={json.dumps(v)}" for s in ("model", "train") for k, v in settings.get(s, {}).items()]
        found.append(Variant(TRANSFORMER, tuple(lines)))
    if len(found) < 2:
        raise NmtError("Give at least two variants to compare: --attention A --attention B (or --transformer).")
    return found


def compare_variants(
    config: Path,
    overrides: Sequence[str],
    chosen: Sequence[Variant],
    minutes: float,
    runs: Path | None,
    device: torch.device,
    log: Callable[[str], object] = print,
) -> dict:
    """Train each variant for ``minutes / len(chosen)`` (a finished one is reused), then score it;
    the results, also written to <runs>/compare.json."""
    if minutes <= 0:
        raise NmtError("--minutes: the budget the variants share, e.g. 10 (each trains for its share).")
    require_eflomal("nmt compare")  # before anything trains: the AER is half the question
    base = load_config(config, list(overrides))
    runs = runs or Path(f"{base.run_dir}-compare")
    prepare(base, log=log)  # once: every variant reads this data
    share = minutes / len(chosen)
    results = []
    for variant in chosen:
        log(f"== {variant.name}: {share:.1f} minutes")
        settings = [*variant.overrides, *overrides, f"run_dir={runs / variant.name}"]  # --set: every variant's
        settings += [f"data.prepared_dir={base.prepared_dir}", f"train.max_minutes={share}"]
        cfg = load_config(config, settings)
        if not run_paths(cfg).checkpoint("best").is_file():
            train(cfg, device, resume=True, log=log)
        results.append(_scores(variant.name, cfg, device))
    found = {"config": str(config), "minutes": minutes, "variants": results}
    runs.mkdir(parents=True, exist_ok=True)
    write_text_atomic(runs / "compare.json", json.dumps(found, indent=1, ensure_ascii=False))
    return found


def _scores(name: str, cfg: Config, device: torch.device) -> dict:
    """BLEU, chrF and the attention's AER against eflomal on the test set; a family with heads:
    each layer's each head's AER."""
    translator = Translator(load_checkpoints(cfg, ["best"], device))
    test_set, set_name = evaluation_set(cfg, None, [])
    report = evaluate(translator, test_set, set_name, ["best"])
    training = training_pairs(cfg)
    aligned = alignment_agreement(translator, test_set, set_name, training)
    found = {"name": name, "arch": cfg.model.arch, "bleu": report["bleu"], "chrf": report["chrf"]}
    found.update({"aer": aligned["aer"], "precision": aligned["precision"], "recall": aligned["recall"]})
    grid = ARCHITECTURES[cfg.model.arch].head_grid(cfg.model)
    if grid is not None:
        found["heads"] = _head_agreement(translator, test_set, set_name, training, grid)
    return found


def _head_agreement(
    translator: Translator, test_set, set_name: str, training, grid: tuple[int, int]
) -> list[list[float]]:
    """The AER of each decoder layer's each head alone (layers x heads), against the reference kept
    by ``alignment_agreement``."""
    sources = [s for s, refs in zip(test_set.sources, test_set.references) for _ in refs]
    targets = [ref for refs in test_set.references for ref in refs]
    reference = kept_eflomal_alignments(
        run_paths(translator.loaded.config).eval_alignments(set_name, "eflomal"), sources, targets, training
    )
    ids = target_ids(translator, targets)
    layers, heads = grid
    return [
        [agreement(reference, model_alignments(translator, sources, ids, layer, [head])).aer for head in range(heads)]
        for layer in range(layers)
    ]


def table(found: dict) -> str:
    """The results as people read them: a row per variant, the best AER and BLEU marked."""
    rows = found["variants"]
    best_aer, best_bleu = min(r["aer"] for r in rows), max(r["bleu"] for r in rows)
    lines = [f"{'variant':16s} {'BLEU':>6s} {'chrF':>6s} {'AER':>6s}"]
    for r in rows:
        marks = ("*" if r["bleu"] == best_bleu else " ") + ("*" if r["aer"] == best_aer else " ")
        lines.append(f"{r['name']:16s} {r['bleu']:6.2f} {r['chrf']:6.2f} {r['aer']:6.3f} {marks}")
        if "heads" in r:
            best = min(min(layer) for layer in r["heads"])
            layer, head = next((i, h) for i, row in enumerate(r["heads"]) for h, aer in enumerate(row) if aer == best)
            lines.append(f"{'':16s} its best head: layer {layer}, head {head}, AER {best:.3f}")
    lines.append(f"({found['minutes']:g} minutes shared; * the best; AER against eflomal, lower is better)")
    return "\n".join(lines)
