"""`prepare`: splits, references, attribution, reuse; malformed, empty, binary and random input."""

import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.config.parsing import config_from_dict
from nmt.config.paths import prepared_paths
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines
from nmt.data.tsv import read_tsv
from nmt.pipelines.prepare import prepare

from .helpers import synthetic_pairs, tiny_config, write_anki


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
    from .helpers import synthetic_pairs

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

    strict = config_from_dict(
        tiny_config(tmp_path, path, data={"on_malformed": "error"}, run_dir=str(tmp_path / "strict"))
    )
    with pytest.raises(NmtError, match=rf"(?s)2 malformed line\(s\).*pairs.txt:{n_lines - 1}: one column"):
        prepare(strict, log=lambda _: None)
    assert not prepared_paths(strict).manifest.exists()


def test_prepare_missing_data_file(tmp_path):
    config = config_from_dict(tiny_config(tmp_path, tmp_path / "missing.txt"))
    with pytest.raises(NmtError, match="Data file not found"):
        prepare(config)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"\n\n  \n", "is empty"),
        (bytes(range(256)) * 40, "does not look like an Anki/Tatoeba TSV"),
        (b"just one column\n" * 10, "does not look like an Anki/Tatoeba TSV"),
    ],
)
def test_prepare_refuses_empty_and_binary_files_and_writes_nothing(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    config = config_from_dict(tiny_config(tmp_path, path))
    with pytest.raises(NmtError, match=message):
        prepare(config)
    assert not (tmp_path / "run" / "data" / "manifest.json").exists()


def test_long_sentences_are_clipped_and_counted(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("Go.\tजा.\n" + "word " * 5000 + "\tशब्द\n", encoding="utf-8")
    result = read_tsv(path, max_chars=100)
    assert result.clipped == 1 and len(result.pairs[1].src) <= 100


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_reading_random_bytes_never_crashes(tmp_path, data):
    path = tmp_path / "fuzz.txt"
    path.write_bytes(data)
    result = read_tsv(path)
    body = data.removeprefix(b"\xef\xbb\xbf").replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # universal newlines
    assert result.lines_read == len(body.split(b"\n")) - (body.endswith(b"\n") or not body)
    assert result.lines_read == len(result.pairs) + len(result.problems) + result.blank_lines
    assert all(p.src and p.tgt and "\t" not in p.src + p.tgt for p in result.pairs)
    assert all(p.line_no >= 1 for p in result.problems)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.binary(max_size=600), st.lists(st.text(max_size=40), max_size=30).map(lambda ls: "\n".join(ls).encode())
    )
)
def test_prepare_on_random_bytes_or_text_succeeds_or_says_why(tmp_path_factory, content):
    root = tmp_path_factory.mktemp("fuzzprep")
    path = root / "in.txt"
    path.write_bytes(content)
    config = config_from_dict(tiny_config(root, path))
    try:
        prepare(config, log=lambda _: None)
    except NmtError as exc:
        assert str(exc)
        assert not (root / "run" / "data" / "manifest.json").exists()


BAD_FILES = {
    "latin-1": ("Je suis là.\tमी तिथे आहे.\nÇa va?\tकसं चाललंय?\n".encode("latin-1", errors="replace"), "not UTF-8"),
    "binary": (bytes(range(256)) * 20, "does not look like"),
    "empty": (b"", "is empty"),
}


@pytest.mark.parametrize("content", BAD_FILES, ids=list(BAD_FILES))
@pytest.mark.parametrize("key", ["related", "synthetic_from"])
def test_every_file_a_config_names_is_read_as_the_corpus_is(tmp_path, key, content):
    """A related corpus or self-training's sentences in another encoding, binary or empty is
    refused naming the key, the file and its first bad line. Before, a related or self-training
    file passed as "0 pairs" or as sentences of replacement characters."""
    from nmt.config.paths import prepared_paths
    from nmt.pipelines.distill import synthetic_sources

    data, expected = BAD_FILES[content]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(data)
    raw = tiny_config(tmp_path, write_anki(tmp_path / "pairs.txt", synthetic_pairs()))
    config = config_from_dict(raw)
    prepare(config, log=lambda _: None, show_bar=False)
    raw["data"] |= {"related": {"hi": str(bad)}} if key == "related" else {key: str(bad)}
    if key == "synthetic_from":  # what the teacher would translate: read before any teacher is loaded
        raw["data"] |= {"distill_from": str(tmp_path / "teacher"), "distill": "keep"}
        with pytest.raises(NmtError, match=rf"(?s)data.synthetic_from: {bad}.*{expected}"):
            synthetic_sources(config_from_dict(raw), prepared_paths(config))
        return
    with pytest.raises(NmtError, match=rf"(?s)data.{key}: {bad}.*{expected}") as refused:
        prepare(config_from_dict(raw), log=lambda _: None, show_bar=False, force=True)
    if content == "latin-1":
        assert f"{bad}:1: undecodable bytes" in str(refused.value)


def test_the_report_says_how_many_lone_carriage_returns_it_read_as_line_breaks(tmp_path):
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    text = data.read_bytes().replace(b"\n", b"\r", 5)
    data.write_bytes(text)
    report = prepare(config_from_dict(tiny_config(tmp_path, data)), log=lambda _: None, show_bar=False)
    assert report.lone_cr == 5 and "Read 5 carriage return(s) without a line feed" in report.summary()
    assert report.pairs_read == len(synthetic_pairs())


def test_what_a_killed_prepare_left_is_removed_by_the_next(tmp_path):
    """A prepare killed in pass 1 or 2 leaves its scratch folder (``.prepare-*``) and the
    temporary files of atomic writes (``.NAME.*.tmp``) in the prepared folder; before, they
    stayed there for good, as large as the corpus."""
    config = config_from_dict(tiny_config(tmp_path, write_anki(tmp_path / "pairs.txt", synthetic_pairs())))
    root = tmp_path / "run" / "data"
    (root / ".prepare-k1ll3d").mkdir(parents=True)
    (root / ".prepare-k1ll3d" / "sources.0").write_bytes(b"x" * 1000)
    (root / ".train.en.a1b2c3.tmp").write_text("half a file", encoding="utf-8")
    (root / "keep.txt").write_text("the user's own", encoding="utf-8")
    said: list[str] = []
    prepare(config, log=said.append, show_bar=False)
    assert not list(root.glob(".prepare-*")) and not list(root.glob(".*.tmp"))
    assert (root / "keep.txt").is_file()
    assert any("1 scratch folder(s), 1 file(s)" in line for line in said), said


def test_data_an_earlier_format_prepared_is_kept_where_a_trained_model_depends_on_it(tmp_path):
    """The fingerprint of format 5 holds every data key (no per-feature carve-outs), so it cannot
    be compared with format 4's: a trained run's data is reused as it is (its tokenizers are its
    checkpoints'), an untrained one's prepared again."""
    import json

    from nmt.training.launch import train

    config = config_from_dict(tiny_config(tmp_path, write_anki(tmp_path / "pairs.txt", synthetic_pairs())))
    manifest = tmp_path / "run" / "data" / "manifest.json"
    prepare(config, log=lambda _: None, show_bar=False)
    manifest.write_text(json.dumps({"fingerprint": "of format 4"}), encoding="utf-8")
    assert not prepare(config, log=lambda _: None, show_bar=False).reused  # nothing depends on it
    config.train.epochs = 1
    train(config, torch.device("cpu"), show_bar=False, log=lambda _: None)
    manifest.write_text(json.dumps({"fingerprint": "of format 4"}), encoding="utf-8")
    said: list[str] = []
    assert prepare(config, log=said.append, show_bar=False).reused
    assert any("prepared by an earlier version of nmt (format 4)" in line for line in said), said


def test_a_vocabulary_smaller_than_asked_is_said_and_one_too_small_for_the_characters_is_refused(tmp_path):
    """Before, tokenizer.*_vocab_size: 2000 became 306 on a small corpus without a word, and a
    vocabulary below the text's characters failed with SentencePiece's own internal message."""
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    raw = tiny_config(tmp_path, data, tokenizer={"src_vocab_size": 2000, "tgt_vocab_size": 2000})
    report = prepare(config_from_dict(raw), log=lambda _: None, show_bar=False)
    assert any(
        "tokenizer.tgt_vocab_size asks for 2,000 pieces; the training text yields" in w for w in report.warnings()
    )
    assert "the training text yields" in report.summary()
    letters = "".join(chr(0x0905 + i) for i in range(40)) + "".join(chr(0x4E00 + i) for i in range(400))
    wide = write_anki(tmp_path / "wide.txt", [(f"word {i}", letters[i % len(letters)] * 3) for i in range(600)])
    raw = tiny_config(tmp_path, wide, run_dir=str(tmp_path / "wide"), tokenizer={"tgt_vocab_size": 300})
    with pytest.raises(NmtError, match=r"tokenizer.tgt_vocab_size is 300, but the training text has \d+ distinct"):
        prepare(config_from_dict(raw), log=lambda _: None, show_bar=False)
