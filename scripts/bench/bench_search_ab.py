#!/usr/bin/env python
"""Beam and greedy search of this tree against another commit's, in one process, alternating.

    python scripts/bench/bench_search_ab.py --before HEAD~1 --checkpoint runs/eng-mar-cpu/checkpoints/best.pt

The other commit's nmt/decoding/search.py is loaded beside this one (git show REV:path) and both
decode the same eng-mar test sentences with the same model, batches and settings, one pass of
each in turn, ``--rounds`` times: the machine's drift (other processes, turbo, a noisy VM's
neighbours) falls on both alike, which separate processes cannot promise. Prints the median
seconds of each and their ratio, and checks that both found the same hypotheses.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from nmt.config.files import load_config
from nmt.config.paths import prepared_paths
from nmt.core.registry import STRATEGIES
from nmt.data.batching import sorted_batches, source_tensor
from nmt.data.references import read_references
from nmt.decoding import search as search_now
from nmt.runtime.loading import load_checkpoints

ROOT = Path(__file__).resolve().parents[2]


def load_search_of(revision: str):
    """The module nmt/decoding/search.py as ``revision`` has it (imports resolve to this tree's nmt)."""
    text = subprocess.run(
        ["git", "show", f"{revision}:nmt/decoding/search.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="nmt-search-")) / "search_before.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("search_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["search_before"] = module  # its dataclasses look their module up
    register = STRATEGIES.register
    STRATEGIES.register = lambda name, entry=None: (lambda f: f) if entry is None else entry  # type: ignore
    try:  # its strategies stay its own: the registry keeps this tree's
        spec.loader.exec_module(module)
    finally:
        STRATEGIES.register = register  # type: ignore[method-assign]
    return module


def one_pass(module, model, sentences: list[list[int]], decode, beam: int) -> tuple[float, list]:
    """One pass of ``module``'s own search over every sentence, batched as search_sentences does."""
    batches = sorted_batches([len(s) + 1 for s in sentences], decode.batch_size, decode.batch_tokens // beam)
    strategy = module.greedy_strategy if beam == 1 else module.beam_strategy
    found: list = []
    gc.collect()
    start = time.perf_counter()
    with torch.inference_mode():
        for batch in batches:
            src, lengths = source_tensor([sentences[i] for i in batch])
            limits = module.max_output_lengths(lengths.tolist(), decode.max_len_ratio, decode.max_len_offset)
            ranking = module.Ranking(decode.length_penalty, decode.length_form, decode.coverage_penalty)
            settings = module.SearchSettings(beam, 1, limits, ranking, False, decode.no_repeat_span, None)
            found += [h[0].tokens for h in strategy(model, src, lengths, settings)]
    return time.perf_counter() - start, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD", help="the commit to compare with (default: HEAD)")
    parser.add_argument("--config", default="configs/eng-mar-cpu.yaml")
    parser.add_argument("--checkpoint", default="runs/eng-mar-cpu/checkpoints/best.pt")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    config = load_config(args.config)
    loaded = load_checkpoints(config, [args.checkpoint], device)
    test = read_references(prepared_paths(config).multi("test"))
    sentences = loaded.src_tok.encode(test.sources[: args.sentences])
    before = load_search_of(args.before)
    print(f"{len(sentences)} sentences, {args.threads} threads, {args.rounds} alternating rounds")
    print("| search | before s (median) | now s (median) | now / before speed | same hypotheses |")
    print("|---|---:|---:|---:|---|")
    for beam in args.beams:
        times: dict[str, list[float]] = {"before": [], "now": []}
        same, reference = True, []
        one_pass(search_now, loaded.model, sentences, config.decode, beam)  # warm-up
        for _ in range(args.rounds):
            for name, module in (("before", before), ("now", search_now)):
                seconds, found = one_pass(module, loaded.model, sentences, config.decode, beam)
                times[name].append(seconds)
                reference = found if name == "before" else reference
                same &= found == reference
        old, new = statistics.median(times["before"]), statistics.median(times["now"])
        label = "greedy" if beam == 1 else f"beam {beam}"
        print(f"| {label} | {old:.3f} | {new:.3f} | {old / new:.3f}x | {'yes' if same else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
