"""The seeded train/dev/test split, grouped by source sentence."""

import pytest

from nmt.core.errors import NmtError
from nmt.data.pairs import Pair
from nmt.data.split import group_references, split_by_source


def make_pairs(n_sources: int, per_source: int) -> list[Pair]:
    return [Pair(f"s{i}", f"t{i}-{j}", "", 0) for i in range(n_sources) for j in range(per_source)]


def test_split_is_grouped_by_source_and_loses_nothing():
    pairs = make_pairs(200, 3)
    splits = split_by_source(pairs, dev_size=0.1, test_size=20, seed=5)
    sources = {name: {p.src for p in getattr(splits, name)} for name in ("train", "dev", "test")}
    assert not sources["train"] & sources["dev"]
    assert not sources["train"] & sources["test"]
    assert not sources["dev"] & sources["test"]
    assert len(sources["test"]) == 20 and len(sources["dev"]) == 20
    assert sorted(splits.train + splits.dev + splits.test, key=id) == sorted(pairs, key=id)
    assert all(len([p for p in splits.test if p.src == s]) == 3 for s in sources["test"])


def test_split_is_deterministic_and_seeded():
    pairs = make_pairs(100, 2)
    a = split_by_source(pairs, 0.1, 0.1, seed=1)
    b = split_by_source(pairs, 0.1, 0.1, seed=1)
    c = split_by_source(pairs, 0.1, 0.1, seed=2)
    assert a.test == b.test and a.test != c.test


def test_split_too_large_is_refused():
    with pytest.raises(NmtError, match="leave no training data"):
        split_by_source(make_pairs(10, 1), dev_size=5, test_size=5, seed=0)


def test_group_references():
    assert group_references(make_pairs(2, 2)) == [("s0", ["t0-0", "t0-1"]), ("s1", ["t1-0", "t1-1"])]


def test_a_fraction_carves_at_most_the_cap_and_a_count_is_taken_as_given():
    pairs = make_pairs(1000, 1)
    capped = split_by_source(pairs, dev_size=0.05, test_size=0.05, seed=3, cap=20)  # 5 % would be 50
    assert len(capped.dev) == len(capped.test) == 20 and len(capped.train) == 960
    uncapped = split_by_source(pairs, dev_size=0.05, test_size=0.05, seed=3, cap=0)
    assert len(uncapped.dev) == 50
    counted = split_by_source(pairs, dev_size=30, test_size=0.01, seed=3, cap=20)
    assert len(counted.dev) == 30 and len(counted.test) == 10  # a count is what was asked for; 1 % is under the cap
    below = split_by_source(pairs, dev_size=0.05, test_size=0.05, seed=3, cap=5000)
    assert [p.src for p in below.test] == [p.src for p in uncapped.test]  # a cap not reached changes nothing
