#!/usr/bin/env python
"""Training throughput: target tokens/s, sentences/s, peak memory, padding, for N steps on
the prepared data of --config (default: the eng-mar model, JoeyNMT's sizes), CPU or CUDA.

Rows:
  nmt (config as given)                 this project's default decoder for the config
  nmt, JoeyNMT-equivalent               luong-concat + input feeding: JoeyNMT's RNN structure
  nmt, luong-general fast / step-by-step  the parallel teacher-forced path against the loop
  JoeyNMT 2.3.0, own / our batches      when joeynmt is installed (see scripts/bench/joeynmt_peer.py)
  nmt, encoder packed / padded          the config as given, with model.rnn_input=packed / padded
  nmt, compiled decoder step            the config as given, with train.compile=default (against the first row)
  nmt, graphed decoder step             on CUDA: train.compile=reduce-overhead, batches padded to the graph buckets
  nmt, GRU / LSTM / LSTM 2 + 2 layers   model.rnn: the config with each cell, and stacked
  transformer rows: this project's Transformer at JoeyNMT's Transformer sizes (3 + 3 layers, 256 wide,
  4 heads; joeynmt_peer.TRANSFORMER_OVERRIDES), JoeyNMT's Transformer on the same batches, and plain
  torch.nn.Transformer of the same sizes (its fused layers, our embeddings and output layer)

    python scripts/bench/bench_train.py --steps 200
    python scripts/bench/bench_train.py --device cuda --steps 500 --set train.batch_tokens=6000
    python scripts/bench/bench_train.py --rows default transformer --set train.batch_size=128
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import bench_common as bc
import joeynmt_peer
import torch


def _timed_steps(make, run_step, batches, steps: int, warmup: int, device) -> tuple[float, int, int]:
    """Make every batch first (collated and on the device, as the trainer's loader workers have
    them ready), run ``warmup`` untimed steps, then ``steps`` timed ones; returns (seconds,
    tokens, sentences)."""
    made = [make(indices) for indices in batches[: warmup + steps]]
    for batch in made[:warmup]:
        run_step(batch)
    bc.settle(device)
    start = time.perf_counter()
    tokens = sentences = 0
    for indices, batch in zip(batches[warmup : warmup + steps], made[warmup:], strict=True):
        tokens += run_step(batch)
        sentences += len(indices)
    bc.sync(device)
    return time.perf_counter() - start, tokens, sentences


def _batches(data, cfg, kind: str, needed: int) -> list[list[int]]:
    from nmt.training.data import epoch_batches

    if kind == "ours":
        batches = epoch_batches(data.train, cfg, 1)
    else:  # JoeyNMT's sentence batching: a random order cut into batches of batch_size
        order = list(range(len(data.train)))
        random.Random(cfg.seed).shuffle(order)
        batches = [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
    while len(batches) < needed:
        batches = batches + batches
    return batches


def measure(
    label: str,
    config_path: str,
    overrides: list[str],
    steps: int,
    device_name: str,
    threads: int,
    tool: str = "nmt",
    batching: str = "ours",
    fast_path: bool = True,
    warmup: int = 5,
) -> dict:
    from nmt.core.device import make_deterministic, select_precision
    from nmt.core.registry import ARCHITECTURES
    from nmt.data.batching import collate, padded_to_bucket, padding_fraction
    from nmt.model.fast import graph_bucket
    from nmt.runtime.loading import load_tokenizers
    from nmt.training.data import batch_lengths, load_train_data
    from nmt.training.step import train_step

    device = bc.setup_device(device_name, threads)
    config = bc.load(config_path, overrides)
    cfg = config.train
    if cfg.deterministic:
        make_deterministic(device)  # as the Trainer does (each row runs in its own process)
    torch.manual_seed(cfg.seed)
    src_tok, tgt_tok = load_tokenizers(config)
    data = load_train_data(config, src_tok, tgt_tok)
    batches = _batches(data, cfg, batching, steps + warmup)
    if tool == "nmt":
        _, _, model, optimizer = bc.model_and_optimizer(config, device)
        if not fast_path:
            decoder = model.decoder
            decoder.teacher_forced = lambda tgt_in, state, memory: decoder.scheduled_sampling(
                tgt_in, state, memory, 1.0
            )

        precision = select_precision(cfg.precision, device)
        scaler = torch.amp.GradScaler(device.type) if precision.loss_scaling else None

        def make(indices):
            batch = collate([data.train[i] for i in indices])
            tokens = batch.num_tgt_tokens
            if cfg.compile == "reduce-overhead" and device.type == "cuda":
                batch = padded_to_bucket(batch, *graph_bucket(ARCHITECTURES[config.model.arch].whole_target))
            return batch.to(device), tokens

        def run_step(made):
            batch, tokens = made
            train_step(model, batch, optimizer, cfg, tokens, precision, scaler)
            return tokens
    elif tool == "torch":
        model, run_step = _plain_transformer(config, src_tok.vocab_size, tgt_tok.vocab_size, device)

        def make(indices):
            return collate([data.train[i] for i in indices]).to(device)
    else:
        model = joeynmt_peer.build(config.model, src_tok.vocab_size, tgt_tok.vocab_size, device)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)

        def make(indices):
            return joeynmt_peer.make_batch([data.train[i] for i in indices], device)

        def run_step(batch):
            return joeynmt_peer.train_step(model, batch, optimizer, cfg.clip_grad_norm)

    seconds, tokens, sentences = _timed_steps(make, run_step, batches, steps, warmup, device)
    used = batches[warmup : warmup + steps]
    return {
        "label": label,
        "tokens_per_s": tokens / seconds,
        "sentences_per_s": sentences / seconds,
        "peak_mib": bc.peak_memory_mib(device),
        "padding": 100 * padding_fraction(used, batch_lengths(data.train)),
        "parameters": sum(p.numel() for p in model.parameters()),
        "seconds": seconds,
    }


def _plain_transformer(config, src_vocab: int, tgt_vocab: int, device):
    """torch.nn.Transformer (pre-norm, batch_first) of the config's sizes, with scaled embeddings,
    sinusoidal positions and an output layer as ours: what PyTorch's own layers run at."""
    from nmt.data.tokenizer import PAD_ID
    from nmt.model.transformer.layers import Positions
    from nmt.training.step import token_loss

    m, cfg = config.model, config.train
    core = torch.nn.Transformer(
        m.embed_dim, m.heads, m.encoder_layers, m.decoder_layers, m.ff_dim, m.dropout, batch_first=True, norm_first=True
    )
    parts = torch.nn.ModuleDict(
        {
            "core": core,
            "src": torch.nn.Embedding(src_vocab, m.embed_dim, padding_idx=PAD_ID),
            "tgt": torch.nn.Embedding(tgt_vocab, m.embed_dim, padding_idx=PAD_ID),
            "out": torch.nn.Linear(m.embed_dim, tgt_vocab),
        }
    ).to(device)
    positions = Positions(m).to(device)
    optimizer = torch.optim.Adam(parts.parameters(), lr=cfg.learning_rate)
    scale = m.embed_dim**0.5

    def run_step(batch):
        src, tgt_in = batch.src, batch.tgt_in
        optimizer.zero_grad(set_to_none=True)
        causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=device)
        hidden = core(
            parts["src"](src) * scale + positions(0, src.size(1), device),
            parts["tgt"](tgt_in) * scale + positions(0, tgt_in.size(1), device),
            tgt_mask=causal,
            src_key_padding_mask=src.eq(PAD_ID),
            memory_key_padding_mask=src.eq(PAD_ID),
            tgt_is_causal=True,
        )
        tokens = batch.num_tgt_tokens
        (token_loss(parts["out"](hidden), batch.tgt_out, cfg.label_smoothing) / tokens).backward()
        torch.nn.utils.clip_grad_norm_(parts.parameters(), cfg.clip_grad_norm)
        optimizer.step()
        return tokens

    return parts, run_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/eng-mar.yaml")
    parser.add_argument("--set", nargs="*", default=[], help="config overrides for every row")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = default)")
    parser.add_argument("--no-peer", action="store_true", help="skip JoeyNMT even if installed")
    parser.add_argument(
        "--rows",
        nargs="*",
        default=["default", "equivalent", "fast", "peer"],
        help="which rows: default equivalent fast peer encoder compile graphed precision batching deterministic "
        "cells transformer",
    )
    parser.add_argument("--json", help="also write the rows (and the ratios) to this file")
    parser.add_argument(
        "--repeats", type=int, default=1, help="time every row this many times, interleaved; report the median"
    )
    args = parser.parse_args()
    common = (args.steps, args.device, args.threads)
    plan = []
    if "default" in args.rows:
        plan.append(("nmt, config as given", args.set, dict()))
    if "equivalent" in args.rows:
        plan.append(("nmt, JoeyNMT-equivalent", args.set + joeynmt_peer.EQUIVALENT_OVERRIDES, dict()))
    if "fast" in args.rows:
        plan.append(("nmt, luong-general, fast path", args.set + ["model.attention=luong-general"], dict()))
        plan.append(
            ("nmt, luong-general, step by step", args.set + ["model.attention=luong-general"], dict(fast_path=False))
        )
    if "peer" in args.rows and joeynmt_peer.AVAILABLE and not args.no_peer:
        plan.append(("JoeyNMT 2.3.0, its own batching", args.set, dict(tool="joeynmt", batching="joeynmt")))
        plan.append(("JoeyNMT 2.3.0, our bucketed batches", args.set, dict(tool="joeynmt", batching="ours")))
    elif "peer" in args.rows:
        print("(JoeyNMT not installed: no peer rows; see scripts/bench/joeynmt_peer.py)")
    if "encoder" in args.rows:
        plan.append(("nmt, encoder packed", args.set + ["model.rnn_input=packed"], dict()))
        plan.append(("nmt, encoder padded", args.set + ["model.rnn_input=padded"], dict()))
    if "compile" in args.rows:
        plan.append(("nmt, compiled decoder step", args.set + ["train.compile=default"], dict(warmup=30)))
    if "compile" in args.rows or "graphed" in args.rows:
        if args.device == "cuda":  # CUDA graphs: batches padded to the graph buckets, as the trainer pads them
            graphed = args.set + ["train.compile=reduce-overhead"]
            plan.append(("nmt, graphed decoder step", graphed, dict(warmup=60)))
        else:
            print("(no graphed row: CUDA graphs need a CUDA device)")
    if "precision" in args.rows:
        plan.append(("nmt, float32", args.set + ["train.precision=float32"], dict()))
        plan.append(("nmt, precision auto", args.set + ["train.precision=auto"], dict()))
    if "batching" in args.rows:  # batches by tokens, for a GPU: as many sentences as fit the token cap
        for tokens in (2000, 4000, 8000):
            batch = [f"train.batch_tokens={tokens}", "train.batch_size=1024"]
            plan.append((f"nmt, {tokens} tokens per batch", args.set + batch, dict()))
    if "deterministic" in args.rows:
        plan.append(("nmt, deterministic", args.set + ["train.deterministic=true"], dict()))
    if "cells" in args.rows:  # model.rnn: the same model with each cell, and stacked
        plan.append(("nmt, GRU", args.set + ["model.rnn=gru"], dict()))
        plan.append(("nmt, LSTM", args.set + ["model.rnn=lstm"], dict()))
        stacked = ["model.encoder_layers=2", "model.decoder_layers=2"]
        plan.append(("nmt, LSTM, 2 + 2 layers", args.set + ["model.rnn=lstm", *stacked], dict()))
    if "transformer" in args.rows:
        sizes = args.set + joeynmt_peer.TRANSFORMER_OVERRIDES
        plan.append(("nmt, Transformer", sizes, dict()))
        if joeynmt_peer.AVAILABLE and not args.no_peer:
            plan.append(
                ("JoeyNMT 2.3.0 Transformer, its own batching", sizes, dict(tool="joeynmt", batching="joeynmt"))
            )
            plan.append(("JoeyNMT 2.3.0 Transformer, our batches", sizes, dict(tool="joeynmt", batching="ours")))
        plan.append(("torch.nn.Transformer, same sizes", sizes, dict(tool="torch")))
    jobs = [
        (label, _measure_kw, (label, args.config, overrides, common, options)) for label, overrides, options in plan
    ]
    runs = bc.interleaved_runs(jobs, args.repeats)
    rows = [bc.median_run(label_runs, "tokens_per_s") for label_runs in runs.values()]
    print(
        f"\nTraining, {args.steps} steps after 5 warm-up steps (compiled row: 30), batches collated ahead, "
        f"{args.config} {' '.join(args.set)}; median of {args.repeats} run(s)"
    )
    print(f"Hardware: {bc.hardware()}\n")
    bc.print_table(
        rows,
        [
            ("label", "run", "s"),
            ("tokens_per_s", "target tokens/s", ",.0f"),
            ("sentences_per_s", "sentences/s", ",.1f"),
            ("peak_mib", "peak memory MiB", ",.0f"),
            ("padding", "padding %", ".1f"),
            ("parameters", "parameters", ",d"),
        ],
    )
    ratios = [
        (
            "nmt (JoeyNMT-equivalent) / JoeyNMT 2.3.0, its own batching",
            "nmt, JoeyNMT-equivalent",
            "JoeyNMT 2.3.0, its own batching",
        ),
        (
            "nmt (JoeyNMT-equivalent) / JoeyNMT 2.3.0, our bucketed batches",
            "nmt, JoeyNMT-equivalent",
            "JoeyNMT 2.3.0, our bucketed batches",
        ),
        ("luong-general fast path / step by step", "nmt, luong-general, fast path", "nmt, luong-general, step by step"),
        ("encoder padded / packed", "nmt, encoder padded", "nmt, encoder packed"),
        ("LSTM / GRU", "nmt, LSTM", "nmt, GRU"),
        ("compiled decoder step / eager", "nmt, compiled decoder step", "nmt, config as given"),
        ("graphed decoder step / eager", "nmt, graphed decoder step", "nmt, config as given"),
        ("precision auto / float32", "nmt, precision auto", "nmt, float32"),
        ("deterministic / default", "nmt, deterministic", "nmt, config as given"),
        (
            "nmt Transformer / JoeyNMT 2.3.0 Transformer, its own batching",
            "nmt, Transformer",
            "JoeyNMT 2.3.0 Transformer, its own batching",
        ),
        (
            "nmt Transformer / JoeyNMT 2.3.0 Transformer, our batches",
            "nmt, Transformer",
            "JoeyNMT 2.3.0 Transformer, our batches",
        ),
        ("nmt Transformer / torch.nn.Transformer", "nmt, Transformer", "torch.nn.Transformer, same sizes"),
        ("nmt Transformer / the config as given", "nmt, Transformer", "nmt, config as given"),
    ]
    found = {}
    for title, top, bottom in ratios:
        if top in runs and bottom in runs:
            found[title] = bc.paired_ratio(runs[top], runs[bottom], "tokens_per_s")
            print(f"{title}: {found[title]}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "ratios": found}, default=str, indent=1), encoding="utf-8")


def _measure_kw(label, config_path, overrides, common, options):
    return measure(label, config_path, overrides, *common, **options)


if __name__ == "__main__":
    main()
