import json

import pytest

from nmt.config import config_from_dict
from nmt.data.anki import Pair
from nmt.data.prepare import prepare, prepared_paths
from nmt.data.split import group_references, split_by_source
from nmt.errors import NmtError
from nmt.fileio import read_lines

from .conftest import tiny_config, write_anki


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


def test_prepare_writes_splits_references_attribution_and_reuses(tmp_path, anki_file):
    config = config_from_dict(tiny_config(tmp_path, anki_file))
    report = prepare(config, log=lambda _: None)
    paths = prepared_paths(config)
    assert not report.reused
    train_src = read_lines(paths.text("train", "src"))
    assert len(train_src) == len(read_lines(paths.text("train", "tgt"))) == report.split_pairs["train"]
    attribution = read_lines(paths.root / "train.attribution")
    assert len(attribution) == len(train_src) and all(a.startswith("CC-BY") for a in attribution)
    assert not any("tatoeba" in line for line in train_src + read_lines(paths.text("train", "tgt")))
    test_src = set(read_lines(paths.text("test", "src")))
    assert not test_src & set(train_src)
    multi = [line.split("\t") for line in read_lines(paths.multi("test"))]
    assert len(multi) == len(test_src) == report.split_sources["test"]
    assert sum(len(row) - 1 for row in multi) == report.split_pairs["test"]
    assert paths.spm("src").is_file() and paths.spm("tgt").is_file()
    saved = json.loads(paths.report.read_text(encoding="utf-8"))
    assert saved["pairs_kept"] == report.pairs_kept and saved["malformed"] == 0

    mtime = paths.spm("src").stat().st_mtime_ns
    again = prepare(config, log=lambda _: None)
    assert again.reused and paths.spm("src").stat().st_mtime_ns == mtime
    changed = config_from_dict(tiny_config(tmp_path, anki_file, data={"split_seed": 99}))
    assert not prepare(changed, log=lambda _: None).reused


def test_prepare_skips_or_refuses_malformed_lines(tmp_path):
    from .conftest import synthetic_pairs

    path = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    with open(path, "ab") as handle:
        handle.write(b"broken line without tab\n\xff\xfe\tbytes\n")
    n_lines = len(path.read_bytes().splitlines())
    logged = []
    config = config_from_dict(tiny_config(tmp_path, path))
    report = prepare(config, log=logged.append)
    assert report.malformed == 2
    assert any(f"pairs.txt:{n_lines - 1}: one column" in line for line in logged)
    assert any(f"pairs.txt:{n_lines}: undecodable" in line for line in report.malformed_lines)
    problems = read_lines(prepared_paths(config).root / "problems.txt")
    assert len(problems) == 2

    strict = config_from_dict(tiny_config(tmp_path, path, data={"on_malformed": "error"}, run_dir=str(tmp_path / "strict")))
    with pytest.raises(NmtError, match=rf"(?s)2 malformed line\(s\).*pairs.txt:{n_lines - 1}: one column"):
        prepare(strict, log=lambda _: None)
    assert not prepared_paths(strict).manifest.exists()


def test_prepare_missing_data_file(tmp_path):
    config = config_from_dict(tiny_config(tmp_path, tmp_path / "missing.txt"))
    with pytest.raises(NmtError, match="Data file not found"):
        prepare(config)
