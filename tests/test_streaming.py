"""The streaming prepare equals the rules stated in memory: de-duplication
(``drop_duplicates``), the split (``split_by_source``), and the sorted distinct sources and
sample they rest on."""

from __future__ import annotations

import io
import random
import re
from array import array

import pytest
from tqdm import tqdm

from nmt.config.parsing import config_from_dict
from nmt.config.paths import prepared_paths
from nmt.core.fileio import read_lines
from nmt.data.distinct import DistinctSorted, FirstOccurrence, pair_digest, repeated_digests
from nmt.data.pairs import Pair, drop_duplicates
from nmt.data.split import group_references, split_by_source
from nmt.data.streaming import Reservoir
from nmt.data.tsv import read_tsv
from nmt.pipelines.prepare import prepare

from .helpers import synthetic_pairs, tiny_config, write_anki

QUIET = {"log": lambda _: None, "show_bar": False}


def messy_corpus(seed: int) -> list[tuple[str, str]]:
    """Synthetic pairs, each repeated up to three times in random places, plus sources that
    differ only in a control character (ordered before and after a line feed's byte)."""
    rng = random.Random(seed)
    pairs = synthetic_pairs(seed)
    pairs += [rng.choice(pairs) for _ in range(len(pairs) // 2)]
    pairs += [("I see tea.\x05", "मी चहा पाहतो."), ("I see tea.\x7f", "मी चहा पाहतो."), ("I see tea.", "मी चहा.")]
    rng.shuffle(pairs)
    return pairs


@pytest.mark.parametrize("seed", [0, 1])
def test_streaming_prepare_equals_the_in_memory_rules(tmp_path, monkeypatch, seed):
    """De-duplication and split of the files prepare writes equal drop_duplicates then
    split_by_source on the pairs in memory: same pairs, same order, same references. The
    distinct sources are sorted in chunks of 7, so the merge is exercised."""
    monkeypatch.setattr("nmt.data.streaming.DistinctSorted", lambda folder: DistinctSorted(folder, chunk=7))
    data_path = write_anki(tmp_path / "pairs.txt", messy_corpus(seed))
    raw = tiny_config(tmp_path, data_path)
    raw["data"].update(dev_size=0.15, test_size=12, split_seed=seed)
    config = config_from_dict(raw)
    report = prepare(config, **QUIET)

    kept, dropped = drop_duplicates(read_tsv(data_path).pairs)
    expected = split_by_source(kept, 0.15, 12, seed)
    paths = prepared_paths(config)
    assert report.duplicates_dropped == dropped > 0 and report.pairs_kept == len(kept)
    for split in ("train", "dev", "test"):
        pairs: list[Pair] = getattr(expected, split)
        assert read_lines(paths.text(split, "src")) == [p.src for p in pairs], split
        assert read_lines(paths.text(split, "tgt")) == [p.tgt for p in pairs], split
        assert report.split_pairs[split] == len(pairs)
        assert report.split_sources[split] == len({p.src for p in pairs})
    for split in ("dev", "test"):
        rows = [line.split("\t") for line in read_lines(paths.multi(split))]
        assert [(src, refs) for src, *refs in rows] == group_references(getattr(expected, split))


def test_distinct_sorted_matches_sorted_set_across_chunks(tmp_path):
    rng = random.Random(3)
    alphabet = ["a", "b", "\x01", "\x7f", "é", "मी", "😀", " "]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 6))) for _ in range(500)]
    distinct = DistinctSorted(tmp_path, chunk=37)
    for text in texts:
        distinct.add(text)
    expected = sorted(set(texts))
    assert distinct.finish() == len(expected)
    ranks = {0: "first", 17: "x", len(expected) - 1: "last"}
    assert distinct.pick(ranks) == {expected[rank]: label for rank, label in ranks.items()}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["distinct.txt"]  # the chunks are gone


def test_digests_keep_the_first_of_each_repeated_pair():
    rng = random.Random(0)
    pairs = [Pair(f"s{rng.randrange(40)}", f"t{rng.randrange(3)}", "", i) for i in range(300)]
    digests = array("Q", (pair_digest(p.src, p.tgt) for p in pairs))
    repeated, distinct = repeated_digests(digests)
    keep = FirstOccurrence(repeated)
    kept = [p for p in pairs if keep.keep(pair_digest(p.src, p.tgt))]
    expected, dropped = drop_duplicates(pairs)
    assert kept == expected and keep.dropped == dropped and distinct == len(expected)
    assert pair_digest("a b", "c") != pair_digest("a", "b c")


def test_reservoir_is_seeded_uniform_and_in_stream_order():
    small = Reservoir(10, seed=1)
    for item in range(7):
        small.offer(item)
    assert small.in_order() == list(range(7))  # a short stream: every item, in order
    samples = []
    for seed in (1, 1, 2):
        reservoir = Reservoir(50, seed)
        for item in range(1000):
            reservoir.offer(item)
        samples.append(reservoir.in_order())
    assert samples[0] == samples[1] != samples[2]
    assert len(samples[0]) == 50 and samples[0] == sorted(samples[0])
    counts = [0] * 10  # each tenth of the stream gets about a tenth of the sample
    for seed in range(200):
        reservoir = Reservoir(20, seed)
        for item in range(1000):
            reservoir.offer(item)
        for item in reservoir.in_order():
            counts[item // 100] += 1
    assert all(300 < count < 500 for count in counts)  # 400 expected


def test_sentencepiece_learns_from_a_bounded_sample_stated_in_the_report(tmp_path):
    pairs = [(f"{s} number {i}.", f"{t} क्रमांक {i}.") for i, (s, t) in enumerate(synthetic_pairs() * 12)]
    data_path = write_anki(tmp_path / "pairs.txt", pairs)
    raw = tiny_config(tmp_path, data_path)
    raw["tokenizer"]["sample_pairs"] = 1000
    report = prepare(config_from_dict(raw), **QUIET)
    assert report.split_pairs["train"] > 1000 and report.tokenizer_pairs == 1000
    assert "seeded sample of 1,000 of the" in report.summary()


def test_prepare_shows_its_passes_in_lines_per_second(tmp_path, monkeypatch):
    """On a terminal prepare draws a bar per pass, counting lines (here forced on, into a buffer)."""
    screen = io.StringIO()

    def visible_bar(*args, **kwargs):
        return tqdm(*args, **{**kwargs, "disable": False, "file": screen, "mininterval": 0, "leave": True})

    monkeypatch.setattr("nmt.core.progress.tqdm", visible_bar)
    data_path = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    prepare(config_from_dict(tiny_config(tmp_path, data_path)), log=lambda _: None)
    shown = screen.getvalue()
    lines = len(read_lines(data_path))
    for what in ("reading", "splitting"):
        assert re.search(rf"prepare: {what}: 100%\|.*\| {lines}/{lines} \[.*lines/s\]", shown), what
    assert "prepare: encoding: 100%" in shown
