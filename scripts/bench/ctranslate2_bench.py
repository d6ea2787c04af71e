#!/usr/bin/env python
"""A trained Transformer on CTranslate2 beside PyTorch and onnxruntime, over its test set.

Parity and quality (beam 5, decode.no_repeat_span --no-repeat-span on every engine, 0 by
default: CTranslate2 has no such rule, and keeps it by searching the sentences that break it again
on PyTorch): the share of CTranslate2 float32 translations identical to PyTorch's, and test BLEU
and chrF (all references) of PyTorch, float32, int8_float32 and int8, with how many sentences
each CTranslate2 model sent back to PyTorch.

Speed (alone on the machine; each row in its own process, rows interleaved, median of
--repeats): sentences/s and target tokens/s of beam-5 decoding of the test sources at each
--threads count and --batches size (1: a served request; 32: a file), after a warm-up pass over
the same sources, peak resident memory of the process, and the model's size on disk.

    python scripts/bench/ctranslate2_bench.py --run runs/eng-mar-transformer
    python scripts/bench/ctranslate2_bench.py --run runs/eng-mar-transformer --no-repeat-span 6
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import bench_common as bc
import torch

from nmt.config.paths import prepared_paths
from nmt.data.references import read_references
from nmt.decoding.scoring import score
from nmt.export.package import export_model
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_packages, load_run_config

QUANTIZATIONS = ("float32", "int8_float32", "int8")
ENGINES = ("torch", "ctranslate2")


def packages(run: Path, folder: Path) -> dict[str, Path]:
    """One package per quantization (each holds the PyTorch weights and the ONNX graphs too)."""
    made = {}
    for quantization in QUANTIZATIONS:
        path = folder / quantization
        if not path.is_dir():
            export_model(run, path, onnx=quantization == "float32", ctranslate2=quantization)
        made[quantization] = path
    return made


def translator(package: Path, engine: str, threads: int, batch: int, span: int = 0) -> Translator:
    from nmt.config.parsing import decoding_settings

    torch.set_num_threads(threads)
    loaded = load_packages([package], torch.device("cpu"), engine)
    settings = [f"decode.no_repeat_span={span}", f"decode.batch_size={batch}", "decode.batch_tokens=0"]
    return Translator(loaded, decode=decoding_settings(loaded.config.decode, settings, 5))


def translations(package: str, engine: str, sources: list[str], beam: int, span: int) -> dict:
    """The translations, and how many sentences CTranslate2 searched again on PyTorch."""
    found = translator(Path(package), engine, 2, 32, span)
    texts = found.translate(sources, beam)
    return {"texts": texts, "searched_again": getattr(found.model, "searched_again", 0)}


def ranking_scores(package: str, sources: list[str], texts: list[str]) -> list[float]:
    """PyTorch's ranking score (log p / length^α, <eos> counted) of each given translation."""
    from nmt.decoding.rules import Ranking

    scorer = translator(Path(package), "torch", 2, 32)
    ranking = Ranking.of(scorer.decode)
    return [ranking.score(h.score, len(h.token_logprobs)) for h in scorer.score(sources, texts)]


def speed(package: str, engine: str, threads: int, batch: int, sources: list[str], span: int) -> dict:
    found = translator(Path(package), engine, threads, batch, span)
    found.search(sources)  # warm-up, a whole pass: CTranslate2's PyTorch searches (the no-repeat rule's) included
    bc.settle(torch.device("cpu"))
    started = time.perf_counter()
    hypotheses = found.search(sources)
    seconds = time.perf_counter() - started
    tokens = sum(len(h[0].tokens) + h[0].ended for h in hypotheses)
    return {
        "threads_used": getattr(found.model, "threads", torch.get_num_threads()),
        "sentences_per_s": len(sources) / seconds,
        "tokens_per_s": tokens / seconds,
        "peak_mib": bc.peak_memory_mib(torch.device("cpu")),
    }


def disk_mib(path: Path) -> float:
    files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default="runs/eng-mar-transformer")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=0, help="the first N test sources for speed (0: all)")
    parser.add_argument("--work", default="", help="keep the packages here (reused when present)")
    parser.add_argument("--out", default="", help="also write the results as JSON here")
    parser.add_argument("--no-repeat-span", type=int, default=0, help="decode.no_repeat_span on every engine")
    args = parser.parse_args()
    run = Path(args.run)
    work = Path(args.work or tempfile.mkdtemp(prefix="ct2-bench-"))
    made = packages(run, work)
    test = read_references(prepared_paths(load_run_config(run)).multi("test"))
    span = args.no_repeat_span
    results: dict = {"hardware": bc.hardware(), "run": str(run), "sources": len(test.sources), "quality": {}}
    results["no_repeat_span"] = span
    float32 = str(made["float32"])
    greedy = {engine: bc.in_child(translations, float32, engine, test.sources, 1, span)["texts"] for engine in ENGINES}
    results["greedy_same"] = sum(a == b for a, b in zip(greedy["torch"], greedy["ctranslate2"]))
    print(f"greedy: {results['greedy_same']}/{len(test.sources)} of CTranslate2 float32's as PyTorch's")
    outputs = {"torch": bc.in_child(translations, float32, "torch", test.sources, 5, span)}
    for quantization in QUANTIZATIONS:
        outputs[quantization] = bc.in_child(translations, str(made[quantization]), "ctranslate2", test.sources, 5, span)
    texts = {name: output["texts"] for name, output in outputs.items()}
    for name, lines in texts.items():
        scores = score(lines, test.references, metrics=("bleu", "chrf"))
        same = sum(a == b for a, b in zip(lines, texts["torch"]))
        again = outputs[name]["searched_again"]
        results["quality"][name] = {"bleu": scores["bleu"], "chrf": scores["chrf"], "same_as_torch": same}
        results["quality"][name]["searched_again"] = again
        print(
            f"{name}: BLEU {scores['bleu']:.2f} chrF {scores['chrf']:.2f}; {same}/{len(lines)} as PyTorch's; "
            f"{again} searched again on PyTorch"
        )
    # where beam 5 differs: which translation PyTorch's own ranking prefers (each search's stopping rule)
    differ = [i for i, (a, b) in enumerate(zip(texts["torch"], texts["float32"])) if a != b]
    chosen = [test.sources[i] for i in differ]
    ours = bc.in_child(ranking_scores, float32, chosen, [texts["torch"][i] for i in differ])
    theirs = bc.in_child(ranking_scores, float32, chosen, [texts["float32"][i] for i in differ])
    results["differ"] = {"count": len(differ), "ctranslate2_ranked_higher": sum(b > a for a, b in zip(ours, theirs))}
    print(
        f"beam 5 differs on {len(differ)}: CTranslate2's ranked higher by PyTorch's own score on "
        f"{results['differ']['ctranslate2_ranked_higher']}"
    )
    results["disk_mib"] = {
        "torch": disk_mib(made["float32"] / "model.safetensors"),
        "onnx": sum(disk_mib(made["float32"] / f) for f in ("encoder.onnx", "decoder_step.onnx")),
        **{q: disk_mib(made[q] / "ctranslate2") for q in QUANTIZATIONS},
    }
    sources = test.sources[: args.sentences or None]
    rows = [("torch", "float32"), ("onnx", "float32"), ("ctranslate2", "float32"), ("ctranslate2", "int8")]
    results["speed"] = []
    for threads in args.threads:
        for batch in args.batches:
            jobs = [
                (f"{engine} {quantization}", speed, (str(made[quantization]), engine, threads, batch, sources, span))
                for engine, quantization in rows
            ]
            runs = bc.interleaved_runs(jobs, args.repeats, note=f", {threads} thread(s), batch {batch}")
            for label, label_runs in runs.items():
                row = bc.median_run(label_runs, "sentences_per_s")
                results["speed"].append({"row": label, "threads": threads, "batch": batch, **row})
                print(f"{threads} thread(s), batch {batch}: {label}: {row['sentences_per_s']:.1f} sentences/s")
    print(f"Hardware: {results['hardware']}")
    print(json.dumps(results, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
