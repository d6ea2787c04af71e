"""``<run_dir>/timeline.jsonl``: the attention forming over a training run.

At every epoch's validation the Trainer translates a few probe sentences (``train.probes``: the
first N distinct dev sources of 6 to 20 subwords, long enough to show reordering) greedily
with the weights just validated and appends one record: epoch, step, dev BLEU and, per
probe, its source and target subwords, the translation and the attention matrix. The
page's timeline view scrubs through the records,
``nmt plot`` draws them as a strip of heatmaps, and an exported package carries the file.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import torch

from nmt.config.schema import Config
from nmt.core.errors import NmtError
from nmt.core.fileio import write_lines_atomic
from nmt.data.tokenizer import BOS_ID, EOS_ID, Tokenizer
from nmt.decoding.search import evaluating, search_sentences
from nmt.training.metrics import MetricsFile
from nmt.training.state import Progress

PROBE_LENGTHS = (6, 20)  # subwords: a probe long enough to show an alignment, short enough to read


def probe_sources(dev_sources: list[list[int]], count: int) -> list[list[int]]:
    """The first ``count`` dev sources whose length is within PROBE_LENGTHS (the shortest
    first-come ones are often one word, "Jump!"), topped up with the others in order."""
    low, high = PROBE_LENGTHS
    fitting = [ids for ids in dev_sources if low <= len(ids) <= high]
    others = [ids for ids in dev_sources if ids and not low <= len(ids) <= high]
    return (fitting + others)[:count]


def probe_translations(
    model, sources: list[list[int]], config: Config, tokenizers: tuple[Tokenizer, Tokenizer], device: torch.device
) -> list[dict]:
    """Each probe's subwords, greedy translation and attention (rows: target subwords and
    <eos>; columns: source subwords and <eos>)."""
    src_tok, tgt_tok = tokenizers
    found = search_sentences(model, sources, config.decode.with_beam(1), device, with_attention=True)
    probes = []
    for ids, hypotheses in zip(sources, found):
        best = hypotheses[0]
        attention = best.attention.tolist() if best.attention is not None else []
        probe = {
            "source_tokens": src_tok.labels(ids),
            "tokens": tgt_tok.labels(best.tokens, with_eos=best.ended),
            "translation": " ".join(tgt_tok.decode([best.tokens])[0].split()),
            "attention": [[round(w, 5) for w in row] for row in attention],
        }
        if model.has_heads:  # each head of each layer (a Transformer's), for the lab's head picker
            src = torch.tensor([[*ids, EOS_ID]], device=device)  # (1, S): <eos> closes the source
            tgt_in = torch.tensor([[BOS_ID, *best.tokens]], device=device)[:, : len(probe["tokens"])]  # (1, T)
            with evaluating(model):
                heads = model.every_head(src, tgt_in).cpu()  # (layers, heads, T, S)
            probe["heads"] = [
                [[[round(w, 5) for w in row] for row in head] for head in layer] for layer in heads.tolist()
            ]
        probes.append(probe)
    return probes


# Bounds on what training writes (a 55-second tiny run of many short epochs wrote 32 MB, which
# every package then carried and /api/timeline sent whole): a record past RECORD_BYTES keeps its
# probes' averaged attention without every head's; a file about to pass FILE_BYTES keeps every
# other record (the first and the newest always), so a long run's timeline stays evenly spread.
RECORD_BYTES = 400_000
FILE_BYTES = 8_000_000


def bounded_record(record: dict) -> dict:
    """``record`` within RECORD_BYTES: first without each head's weights, then with fewer probes."""
    if len(json.dumps(record)) <= RECORD_BYTES:
        return record
    probes = [{k: v for k, v in probe.items() if k != "heads"} for probe in record.get("probes", [])]
    while probes and len(json.dumps({**record, "probes": probes})) > RECORD_BYTES:
        probes = probes[:-1]
    return {**record, "probes": probes}


def evenly(count: int, kept: int) -> list[int]:
    """``kept`` of ``count`` positions spread evenly, the first and the last among them."""
    if kept >= count:
        return list(range(count))
    if kept <= 1:
        return [count - 1]
    return sorted({round(i * (count - 1) / (kept - 1)) for i in range(kept)})


class Timeline(MetricsFile):
    """The records, read and written like metrics.jsonl (trimmed on resume, reset on a new run),
    within RECORD_BYTES a record and FILE_BYTES in all. Past FILE_BYTES the records keep every
    other epoch on (a stride of 2, 4, ...): the first record and the newest always, the others
    at epochs the stride divides, so that the chart stays evenly spread however long the run."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.stride: int | None = None  # epochs between kept records, read once from the file
        self.last_epoch: int | None = None  # the newest record's

    @staticmethod
    def included(record: dict, progress: Progress) -> bool:
        """Entries of the epochs the checkpoint completed (probes are recorded at an epoch's end, or
        where the budget ended it: that epoch's end is recorded again)."""
        return record["epoch"] <= progress.epoch

    def trim(self, progress: Progress) -> None:
        super().trim(progress)
        self.stride = self.last_epoch = None

    def reset(self) -> None:
        super().reset()
        self.stride = self.last_epoch = None

    def append(self, record: dict) -> None:
        record = bounded_record(record)
        if not self.path.is_file() or self.path.is_symlink():  # a link is refused by the append
            super().append(record)
            self.stride, self.last_epoch = 1, record["epoch"]
            return
        if self.stride is not None and self.last_epoch is not None:
            on_stride = self.last_epoch % self.stride == 0
            if on_stride and self.path.stat().st_size + len(json.dumps(record)) + 1 <= FILE_BYTES:
                super().append(record)  # the usual case: one line added
                self.last_epoch = record["epoch"]
                return
        records = self.read()
        stride = self.stride or _stride(records)
        if len(records) > 1 and records[-1]["epoch"] % stride:  # the newest, kept only while it was
            records = records[:-1]
        records.append(record)
        while sum(len(json.dumps(r)) + 1 for r in records) > FILE_BYTES and len(records) > 2:
            stride *= 2
            records = [r for i, r in enumerate(records) if i in (0, len(records) - 1) or r["epoch"] % stride == 0]
        write_lines_atomic(self.path, (json.dumps(r) for r in records))
        self.stride, self.last_epoch = stride, record["epoch"]


def _stride(records: list[dict]) -> int:
    """The epochs between the kept records (1 until the file was first thinned)."""
    inner = [r["epoch"] for r in records[1:-1]]
    gaps = [b - a for a, b in itertools.pairwise(inner) if b > a]
    return min(gaps) if gaps else 1


def read_timeline(path: Path) -> list[dict]:
    return Timeline(path).read()


def read_timeline_within(path: Path, max_bytes: int) -> tuple[list[dict], int]:
    """Records of ``path`` whose JSON fits ``max_bytes``, evenly spread over the run (the first and
    the last always), and how many it holds: read a line at a time, only the lines kept parsed,
    so that a timeline written before the bounds (161 MB) costs its reading, not its size in
    memory. A record that alone does not fit is bounded (``bounded_record``)."""
    offsets = []
    with open(path, "rb") as handle:
        position = 0
        for line in handle:
            if line.strip() and line.endswith(b"\n"):
                offsets.append((position, len(line)))
            position += len(line)
    count, kept = len(offsets), len(offsets)
    while True:
        chosen = evenly(count, kept)
        total = sum(min(offsets[i][1], RECORD_BYTES) for i in chosen)
        if total <= max_bytes or kept <= 1:
            break
        kept = max(1, kept * max_bytes // max(total, 1) * 9 // 10 or kept // 2)
    records = []
    with open(path, "rb") as handle:
        for i in chosen:
            handle.seek(offsets[i][0])
            try:
                records.append(bounded_record(json.loads(handle.read(offsets[i][1]).decode("utf-8", errors="replace"))))
            except json.JSONDecodeError as error:
                raise NmtError(f"{path}: record {i + 1} is not JSON ({error.msg}).") from None
    return records, count
