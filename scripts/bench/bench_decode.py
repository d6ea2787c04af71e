#!/usr/bin/env python
"""Decoding throughput: sentences/s for greedy and beam 5 on the eng-mar test set.

Rows, each in its own process:
  nmt, JoeyNMT-equivalent model, random weights   same work as the peer row below
  JoeyNMT 2.3.0, random weights                   when joeynmt is installed
  nmt, trained checkpoint (--checkpoint)          what a user sees: stops at <eos>

With random weights neither decoder finishes a sentence early, so both run every sentence
to the same limit (1.5 x the longest source in the batch, JoeyNMT's default; ours is set
to match with decode.max_len_ratio=1.5, decode.max_len_offset=0): the ratio measures the
decoders, not early stopping. With --train-steps N both models are first trained for N
steps (each with its own batching, same data, same sizes) so that both have learned to
stop: the ratio then includes early stopping, as a user sees it. Batches: 64 sentences;
ours sorted by length, JoeyNMT's in file order as its `translate` does.

    python scripts/bench/bench_decode.py --sentences 1000
    python scripts/bench/bench_decode.py --sentences 1000 --train-steps 1000
    python scripts/bench/bench_decode.py --checkpoint runs/eng-mar/checkpoints/best.pt
    python scripts/bench/bench_decode.py --transformer --sentences 500 --train-steps 500

--transformer: both rows are the Transformer at JoeyNMT's Transformer sizes
(joeynmt_peer.TRANSFORMER_OVERRIDES: 3 + 3 layers, 256 wide, 4 heads) instead of its RNN.
"""

from __future__ import annotations

import argparse
import time

import bench_common as bc
import joeynmt_peer
import torch

CTRANSLATE2 = {"ctranslate2": "float32", "ctranslate2-int8": "int8"}  # tool -> quantization
SAME_LIMIT = ["decode.max_len_ratio=1.5", "decode.max_len_offset=0", "decode.batch_size=64", "decode.batch_tokens=0"]


def test_sources(config, count: int) -> list[str]:
    from nmt.config.paths import prepared_paths
    from nmt.data.references import read_references

    return read_references(prepared_paths(config).multi("test")).sources[:count]


def train_weights(
    config_path: str, overrides: list[str], steps: int, device_name: str, threads: int, tool: str, path: str
) -> float:
    """Train ``tool``'s model for ``steps`` steps and save its weights to ``path``; returns seconds."""
    import random

    from nmt.data.batching import collate
    from nmt.runtime.loading import load_tokenizers
    from nmt.training.data import epoch_batches, load_train_data
    from nmt.training.optim import make_adam
    from nmt.training.step import train_step

    device = bc.setup_device(device_name, threads)
    config = bc.load(config_path, overrides)
    cfg = config.train
    src_tok, tgt_tok = load_tokenizers(config)
    data = load_train_data(config, src_tok, tgt_tok)
    torch.manual_seed(cfg.seed)
    start = time.perf_counter()
    if tool == "nmt":
        _, _, model, optimizer = bc.model_and_optimizer(config, device)
        batches = [b for epoch in range(1, 100) for b in epoch_batches(data.train, cfg, epoch)][:steps]
        for indices in batches:
            batch = collate([data.train[i] for i in indices])
            train_step(model, batch.to(device), optimizer, cfg, batch.num_tgt_tokens)
    else:
        model = joeynmt_peer.build(config.model, src_tok.vocab_size, tgt_tok.vocab_size, device)
        optimizer = make_adam(list(model.parameters()), cfg.learning_rate)
        rng = random.Random(cfg.seed)
        for _ in range(steps):
            indices = rng.sample(range(len(data.train)), cfg.batch_size)
            joeynmt_peer.train_step(
                model, joeynmt_peer.make_batch([data.train[i] for i in indices], device), optimizer, cfg.clip_grad_norm
            )
    torch.save(model.state_dict(), path)
    return time.perf_counter() - start


def measure(
    label: str,
    config_path: str,
    overrides: list[str],
    count: int,
    beam: int,
    device_name: str,
    threads: int,
    tool: str,
    checkpoint: str,
    weights: str = "",
) -> dict:
    from nmt.data.batching import Example
    from nmt.decoding.search import search_sentences
    from nmt.runtime.loading import load_checkpoints, load_tokenizers, new_model

    device = bc.setup_device(device_name, threads)
    config = bc.load(config_path, overrides)
    src_tok, tgt_tok = load_tokenizers(config)
    sources = test_sources(config, count)
    src_ids = src_tok.encode(sources)
    torch.manual_seed(0)
    if tool in ("nmt", "onnx", *CTRANSLATE2):
        if checkpoint:
            model = load_checkpoints(config, [checkpoint], device).model
        else:
            model = new_model(config, src_tok, tgt_tok).to(device).eval()
            if weights:
                model.load_state_dict(torch.load(weights, weights_only=True))
        if tool == "onnx":  # the same weights as ONNX graphs, on onnxruntime (nmt export --onnx)
            model = onnx_model(model, config)
        if tool in CTRANSLATE2:  # the same weights as a CTranslate2 model (nmt export --ctranslate2)
            model = ctranslate2_model(model, config, (src_tok, tgt_tok), CTRANSLATE2[tool])
        search_sentences(model, src_ids[:64], config.decode.with_beam(beam), device)  # warm-up
        bc.settle(device)
        start = time.perf_counter()
        outputs = search_sentences(model, src_ids, config.decode.with_beam(beam), device)
        bc.sync(device)
        seconds = time.perf_counter() - start
        out_tokens = sum(len(o[0].tokens) for o in outputs)
    else:
        model = joeynmt_peer.build(config.model, src_tok.vocab_size, tgt_tok.vocab_size, device)
        if weights:
            model.load_state_dict(torch.load(weights, weights_only=True))
        examples = [Example(ids, []) for ids in src_ids]
        chunks = [examples[i : i + 64] for i in range(0, len(examples), 64)]
        joeynmt_peer.decode(model, joeynmt_peer.make_batch(chunks[0], device, with_target=False), beam)  # warm-up
        bc.settle(device)
        start = time.perf_counter()
        out_tokens = 0
        for chunk in chunks:
            output, _, _ = joeynmt_peer.decode(model, joeynmt_peer.make_batch(chunk, device, with_target=False), beam)
            out_tokens += int((output != joeynmt_peer.JOEY_PAD).sum())
        bc.sync(device)
        seconds = time.perf_counter() - start
    return {
        "label": label,
        "beam": beam,
        "sentences_per_s": len(sources) / seconds,
        "output_tokens_per_s": out_tokens / seconds,
        "peak_mib": bc.peak_memory_mib(device),
        "seconds": seconds,
    }


def onnx_model(model, config):
    import tempfile
    from pathlib import Path

    from nmt.export.onnx_graphs import export_graphs
    from nmt.runtime.onnx_engine import OnnxModel

    folder = Path(tempfile.mkdtemp(prefix="bench-onnx-"))
    export_graphs(model, folder)
    return OnnxModel(folder, config)


def ctranslate2_model(model, config, tokenizers, quantization: str):
    import tempfile
    from pathlib import Path

    from nmt.export.ctranslate2_model import export_ctranslate2
    from nmt.runtime.ctranslate2_engine import CTranslate2Model

    folder = Path(tempfile.mkdtemp(prefix="bench-ct2-")) / "model"
    export_ctranslate2(model, *tokenizers, folder, quantization)
    return CTranslate2Model(folder, config, tokenizers, pytorch=lambda: model)  # for decode.no_repeat_span


def _measure_kw(*args):
    return measure(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/eng-mar.yaml")
    parser.add_argument("--set", nargs="*", default=[])
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--beams", nargs="*", type=int, default=[1, 5])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--checkpoint", default="", help="also time this trained checkpoint (config's own model)")
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--onnx", action="store_true", help="also the same model's ONNX graphs on onnxruntime")
    parser.add_argument(
        "--ctranslate2", action="store_true", help="also the same Transformer on CTranslate2, float32 and int8"
    )
    parser.add_argument("--train-steps", type=int, default=0, help="train both models this many steps first")
    parser.add_argument("--transformer", action="store_true", help="both rows: the Transformer at JoeyNMT's sizes")
    parser.add_argument("--weights-dir", default="", help="keep the trained weights here; reuse them if present")
    parser.add_argument(
        "--repeats", type=int, default=3, help="time every row this many times, interleaved; report the median"
    )
    args = parser.parse_args()
    import tempfile
    from pathlib import Path

    if args.transformer:  # the peer reads the family from the same overrides
        args.set = args.set + joeynmt_peer.TRANSFORMER_OVERRIDES
    equivalent = args.set + ([] if args.transformer else joeynmt_peer.EQUIVALENT_OVERRIDES) + SAME_LIMIT
    peer = joeynmt_peer.AVAILABLE and not args.no_peer
    workdir = args.weights_dir or tempfile.mkdtemp(prefix="bench-decode-")
    Path(workdir).mkdir(parents=True, exist_ok=True)
    weights = {"nmt": "", "joeynmt": ""}
    state = "random weights"
    if args.train_steps:
        state = f"trained {args.train_steps} steps"
        for tool, overrides in [("nmt", equivalent)] + ([("joeynmt", args.set)] if peer else []):
            weights[tool] = f"{workdir}/{tool}-{args.train_steps}.pt"
            if Path(weights[tool]).is_file():
                print(f"reusing {weights[tool]}", flush=True)
                continue
            print(f"training: {tool}, {args.train_steps} steps ...", flush=True)
            seconds = bc.in_child(
                train_weights, args.config, overrides, args.train_steps, args.device, args.threads, tool, weights[tool]
            )
            print(f"  {seconds:.0f} s", flush=True)
    rows, ratios = [], {}
    for beam in args.beams:
        plan = [(f"nmt, JoeyNMT-equivalent, {state}", equivalent, "nmt", "")]
        if args.onnx:
            plan.append((f"nmt on onnxruntime, JoeyNMT-equivalent, {state}", equivalent, "onnx", ""))
        if args.ctranslate2:
            for tool, quantization in CTRANSLATE2.items():
                plan.append((f"nmt on CTranslate2 {quantization}, JoeyNMT-equivalent, {state}", equivalent, tool, ""))
        if peer:
            plan.append((f"JoeyNMT 2.3.0, {state}", args.set, "joeynmt", ""))
        if args.checkpoint:
            plan.append(("nmt, trained checkpoint", args.set, "nmt", args.checkpoint))
        jobs = [
            (
                label,
                _measure_kw,
                (
                    label,
                    args.config,
                    overrides,
                    args.sentences,
                    beam,
                    args.device,
                    args.threads,
                    tool,
                    checkpoint,
                    weights["joeynmt" if tool == "joeynmt" else "nmt"],
                ),
            )
            for label, overrides, tool, checkpoint in plan
        ]
        runs = bc.interleaved_runs(jobs, args.repeats, note=f", beam {beam}")
        rows += [bc.median_run(label_runs, "sentences_per_s") for label_runs in runs.values()]
        peer_runs = runs.get(f"JoeyNMT 2.3.0, {state}")
        if peer_runs:
            for label in [p[0] for p in plan if p[2] != "joeynmt" and not p[3]]:
                ratios[f"beam {beam}: {label} / JoeyNMT"] = bc.paired_ratio(runs[label], peer_runs, "sentences_per_s")
    print(
        f"\nDecoding {args.sentences} test sentences, {args.config} {' '.join(args.set)}; median of {args.repeats} runs"
    )
    print(f"Hardware: {bc.hardware()}\n")
    bc.print_table(
        rows,
        [
            ("label", "run", "s"),
            ("beam", "beam", "d"),
            ("sentences_per_s", "sentences/s", ",.1f"),
            ("output_tokens_per_s", "output tokens/s", ",.0f"),
            ("peak_mib", "peak memory MiB", ",.0f"),
            ("spread", "spread of runs", ".0%"),
        ],
    )
    for name, ratio in ratios.items():
        print(f"{name} = {ratio}")


if __name__ == "__main__":
    main()
