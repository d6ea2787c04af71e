"""Every source kind of `nmt prepare`: TSV columns in either order, header rows, line-aligned
files, given dev/test sets with several references, a joint vocabulary, and the checks on each."""

import json

import pytest

from nmt.config.parsing import config_from_dict
from nmt.config.paths import prepared_paths
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines
from nmt.data.languages import looks_like_header
from nmt.data.tsv import read_tsv
from nmt.pipelines.prepare import prepare
from nmt.runtime.loading import load_tokenizers, new_model

from .helpers import synthetic_pairs, tiny_config, write_anki

QUIET = {"log": lambda _: None}


def write_lines(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def aligned_corpus(tmp_path, pairs, name="train"):
    """Line-aligned en / mr files of ``pairs``."""
    return (
        write_lines(tmp_path / f"{name}.en", [s for s, _ in pairs]),
        write_lines(tmp_path / f"{name}.mr", [t for _, t in pairs]),
    )


def aligned_config(tmp_path, train, dev=None, test=None, **sections):
    raw = tiny_config(tmp_path, tmp_path / "unused")
    del raw["data"]["path"]
    raw["data"]["train"] = train
    raw["data"].update({key: value for key, value in (("dev", dev), ("test", test)) if value})
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


# --- TSV: columns and header -------------------------------------------------------------


def test_columns_pick_the_direction_marathi_to_english(tmp_path, anki_file):
    forward = config_from_dict(tiny_config(tmp_path / "f", anki_file))
    reverse = config_from_dict(
        tiny_config(tmp_path / "r", anki_file, data={"src_lang": "mr", "tgt_lang": "en", "columns": ["en", "mr"]})
    )
    prepare(forward, **QUIET)
    report = prepare(reverse, **QUIET)
    paths = prepared_paths(reverse)
    assert paths.text("train", "src").name == "train.mr" and paths.spm("src").name == "spm.mr.model"
    source_lines = read_lines(paths.text("train", "src")) + read_lines(paths.text("test", "src"))
    assert all(any("\u0900" <= c <= "\u097f" for c in line) for line in source_lines)  # Marathi is the source
    assert all(line.isascii() for line in read_lines(paths.text("train", "tgt")))
    # every pair is kept, the other way round; dev/test are grouped by Marathi source sentence
    assert report.pairs_kept == prepare(forward, **QUIET).pairs_kept
    multi = [line.split("\t") for line in read_lines(paths.multi("test"))]
    assert len({row[0] for row in multi}) == len(multi) and all(row[1].isascii() for row in multi)
    assert set(report.vocab_sizes) == {"mr", "en"}


@pytest.mark.parametrize(
    "first_line, header, skipped",
    [
        ("Eng\tHin\tOth", "auto", True),  # a tutorial copy of an Anki file
        ("en\tmr", "auto", True),
        ("English\tMarathi", "auto", True),
        ("source\ttarget", "auto", True),
        ("Go.\tजा.", "auto", False),
        ("No\tNo", "auto", False),  # a real pair made of language-code-like words
        ("Eng\tHin", False, False),  # declared: no header, so it is a pair
        ("Go.\tजा.", True, True),  # declared: the first line is a header whatever it holds
    ],
)
def test_header_row_detected_or_declared_never_a_pair(tmp_path, first_line, header, skipped):
    path = tmp_path / "pairs.tsv"
    path.write_text(first_line + "\nI see water.\tमी पाणी पाहतो.\n", encoding="utf-8")
    result = read_tsv(path, columns=["en", "mr"], src_lang="en", header=header)
    assert (result.header == first_line) is skipped
    assert len(result.pairs) == (1 if skipped else 2)
    assert result.pairs[-1].line_no == 2 and result.lines_read == 2


def test_header_reported_by_prepare(tmp_path):
    path = tmp_path / "pairs.tsv"
    write_anki(path, synthetic_pairs())
    path.write_text("Eng\tMar\tOth\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    report = prepare(config_from_dict(tiny_config(tmp_path, path)), **QUIET)
    assert report.header == "Eng\tMar\tOth" and "Skipped the header row" in report.summary()
    assert report.pairs_read == len(synthetic_pairs()) and report.malformed == 0


def test_header_words_need_two_different_column_names():
    assert looks_like_header(["Eng", "Hin", "Oth"], ["en", "hi"])
    assert looks_like_header(["mr", "en"], ["mr", "en"])
    assert not looks_like_header(["hi", "hi"], ["en", "hi"])
    assert not looks_like_header(["Hello", "नमस्कार"], ["en", "mr"])


@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"columns": ["en", "hi"]},
            "'data.columns': 'hi' is neither data.src_lang ('en') nor data.tgt_lang ('mr'). Allowed values: en, mr.",
        ),
        ({"columns": ["en", "en"]}, "expected both languages once"),
        ({"columns": ["en"]}, "expected both languages once"),
        ({"header": "yes"}, "'data.header': got 'yes', expected one of 'auto', true, false"),
        ({"train": {"en": "a.en", "mr": "a.mr"}}, "not both"),
        (
            {"test": {"en": "t.en", "hi": "t.hi"}},
            "'data.test': got languages ['en', 'hi'], expected exactly en (source) and mr (target)",
        ),
        ({"test": {"en": ["a", "b"], "mr": "t.mr"}}, "'data.test.en': the source side is one file"),
        ({"test": {"en": "t.en", "mr": []}}, "an empty list of reference files"),
        ({"test": "test.tsv"}, "'data.test': got 'test.tsv', expected a mapping of language to file"),
        ({"columns": "en,mr"}, "'data.columns': got 'en,mr', expected a list of strings"),
    ],
)
def test_config_mistakes_in_data_name_the_key(tmp_path, data, message):
    with pytest.raises(NmtError) as error:
        config_from_dict(tiny_config(tmp_path, tmp_path / "pairs.txt", data=data))
    assert message in str(error.value)


def test_training_data_is_required_in_one_form(tmp_path):
    raw = tiny_config(tmp_path, tmp_path / "x")
    del raw["data"]["path"]
    with pytest.raises(NmtError, match=r"give the training data as 'data.path'.*or as 'data.train'.*one of them"):
        config_from_dict(raw)
    with pytest.raises(NmtError, match=r"'data.train.mr': training data has one target file"):
        aligned_config(tmp_path, {"en": "a.en", "mr": ["a.mr", "b.mr"]})
    with pytest.raises(NmtError, match=r"'data.columns' names the columns of a TSV file"):
        aligned_config(tmp_path, {"en": "a.en", "mr": "a.mr"}, data={"columns": ["en", "mr"]})


# --- line-aligned files and given dev/test sets ------------------------------------------


def test_line_aligned_training_with_given_dev_and_test_with_two_references(tmp_path):
    pairs = synthetic_pairs()
    train = aligned_corpus(tmp_path, pairs[:120])
    dev = aligned_corpus(tmp_path, pairs[120:140], "dev")
    test_src = write_lines(tmp_path / "test.en", ["I see water.", "we like tea.", "they eat rice."])
    ref1 = write_lines(tmp_path / "test.mr.1", ["मी पाणी पाहतो.", "आम्ही चहा आवडते.", "ते भात खातो."])
    ref2 = write_lines(tmp_path / "test.mr.2", ["मी पाणी बघतो.", "", "ते भात खातात."])  # blank: no second reference
    config = aligned_config(
        tmp_path,
        {"en": str(train[0]), "mr": str(train[1])},
        dev={"en": str(dev[0]), "mr": str(dev[1])},
        test={"en": str(test_src), "mr": [str(ref1), str(ref2)]},
    )
    report = prepare(config, **QUIET)
    paths = prepared_paths(config)
    # nothing carved out of training: every training line is a training pair (duplicates aside)
    assert report.split_pairs["train"] == len(set(pairs[:120])) and set(report.given_sets) == {"dev", "test"}
    assert read_lines(paths.text("dev", "src")) == [s for s, _ in pairs[120:140]]
    rows = [line.split("\t") for line in read_lines(paths.multi("test"))]
    assert rows == [
        ["I see water.", "मी पाणी पाहतो.", "मी पाणी बघतो."],
        ["we like tea.", "आम्ही चहा आवडते."],
        ["they eat rice.", "ते भात खातो.", "ते भात खातात."],
    ]
    assert report.split_pairs["test"] == 5 and report.split_sources["test"] == 3
    assert "given: " in report.summary()


def test_given_test_set_that_overlaps_training_is_flagged(tmp_path):
    pairs = synthetic_pairs()
    train = aligned_corpus(tmp_path, pairs)
    test = aligned_corpus(tmp_path, pairs[:4], "test")
    logged = []
    config = aligned_config(
        tmp_path, {"en": str(train[0]), "mr": str(train[1])}, test={"en": str(test[0]), "mr": str(test[1])}
    )
    report = prepare(config, log=logged.append)
    train_sources = set(read_lines(prepared_paths(config).text("train", "src")))
    overlap = {s for s, _ in pairs[:4]} & train_sources
    assert overlap and report.sources_also_in_train == {"test": len(overlap)}
    assert any("also occur in the training data" in line for line in logged)
    # dev was not given: carved out of training, by source sentence
    assert report.split_pairs["dev"] > 0 and "dev" not in report.given_sets


def test_misaligned_files_are_refused_naming_both_paths_and_counts(tmp_path):
    src = write_lines(tmp_path / "train.en", ["a", "b", "c"])
    tgt = write_lines(tmp_path / "train.mr", ["अ", "ब"])
    config = aligned_config(tmp_path, {"en": str(src), "mr": str(tgt)})
    with pytest.raises(NmtError) as error:
        prepare(config, **QUIET)
    message = str(error.value)
    assert f"{src} has 3 lines" in message and f"{tgt} has 2" in message and "data.train" in message
    assert not prepared_paths(config).manifest.exists()  # nothing half-written
    assert not prepared_paths(config).root.exists()


def test_second_reference_of_another_length_is_refused(tmp_path):
    train = aligned_corpus(tmp_path, synthetic_pairs())
    test_src = write_lines(tmp_path / "t.en", ["a", "b"])
    ref1, ref2 = write_lines(tmp_path / "t.mr", ["अ", "ब"]), write_lines(tmp_path / "t2.mr", ["अ"])
    config = aligned_config(
        tmp_path, {"en": str(train[0]), "mr": str(train[1])}, test={"en": str(test_src), "mr": [str(ref1), str(ref2)]}
    )
    with pytest.raises(NmtError, match=f"data.test: .*{test_src} has 2 lines, {ref2} has 1"):
        prepare(config, **QUIET)


def test_malformed_aligned_lines_reported_with_file_and_line(tmp_path):
    pairs = synthetic_pairs()
    src, tgt = aligned_corpus(tmp_path, pairs)
    with open(tgt, "ab") as handle:  # line len+1: bad bytes on the target side; len+2: empty target
        handle.write(b"\xff\xfe bad\n\n")
    with open(src, "a", encoding="utf-8") as handle:
        handle.write("one more\nand another\n")
    config = aligned_config(tmp_path, {"en": str(src), "mr": str(tgt)})
    report = prepare(config, **QUIET)
    problems = read_lines(prepared_paths(config).problems)
    assert problems == [
        f"{tgt}:{len(pairs) + 1}: undecodable bytes (not UTF-8) at byte 0",
        f"{tgt}:{len(pairs) + 2}: empty target side",
    ]
    assert report.malformed == 2
    strict = aligned_config(tmp_path / "s", {"en": str(src), "mr": str(tgt)}, data={"on_malformed": "error"})
    with pytest.raises(NmtError, match=f"2 malformed line\\(s\\).*\n  {tgt}:{len(pairs) + 1}: undecodable"):
        prepare(strict, **QUIET)


def test_missing_file_names_its_config_key(tmp_path):
    src = write_lines(tmp_path / "train.en", ["a"])
    config = aligned_config(tmp_path, {"en": str(src), "mr": str(tmp_path / "nope.mr")})
    with pytest.raises(NmtError, match=r"Data file not found: .*nope.mr \(config key 'data.train.mr'\)"):
        prepare(config, **QUIET)


# --- joint vocabulary ---------------------------------------------------------------------


def test_joint_vocabulary_one_model_and_one_embedding_table(tmp_path, anki_file):
    config = config_from_dict(
        tiny_config(
            tmp_path,
            anki_file,
            tokenizer={"joint": True, "src_vocab_size": 500, "tgt_vocab_size": 500},
            model={"tie_embeddings": True},
        )
    )
    report = prepare(config, **QUIET)
    paths = prepared_paths(config)
    assert paths.spm("src") == paths.spm("tgt") and paths.spm("src").name == "spm.en-mr.model"
    assert sorted(p.name for p in paths.root.glob("spm.*")) == ["spm.en-mr.model"]
    src_tok, tgt_tok = load_tokenizers(config)
    assert src_tok.sha256 == tgt_tok.sha256 and report.vocab_sizes == {
        "en": src_tok.vocab_size,
        "mr": src_tok.vocab_size,
    }
    # the one vocabulary holds pieces of both scripts
    pieces = [src_tok.processor.id_to_piece(i) for i in range(src_tok.vocab_size)]
    assert any(p.strip("▁").isascii() and p.strip("▁").isalpha() for p in pieces)
    assert any(any("\u0900" <= c <= "\u097f" for c in p) for p in pieces)
    model = new_model(config, src_tok, tgt_tok)
    shared = model.encoder.embedding.weight
    assert model.decoder.embedding.weight is shared and model.decoder.output.weight is shared
    separate = new_model(
        config_from_dict(tiny_config(tmp_path, anki_file, model={"tie_embeddings": True})), src_tok, tgt_tok
    )
    counted = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for p in separate.parameters()) - counted == shared.numel()


def test_joint_vocabulary_sizes_must_agree(tmp_path, anki_file):
    with pytest.raises(NmtError, match=r"tokenizer.joint=true trains one vocabulary.*got 300 and 500"):
        config_from_dict(tiny_config(tmp_path, anki_file, tokenizer={"joint": True, "tgt_vocab_size": 500}))


def test_report_json_names_languages_and_given_sets(tmp_path):
    train = aligned_corpus(tmp_path, synthetic_pairs())
    config = aligned_config(tmp_path, {"en": str(train[0]), "mr": str(train[1])})
    prepare(config, **QUIET)
    saved = json.loads(prepared_paths(config).report.read_text(encoding="utf-8"))
    assert saved["input_path"] == f"{train[0]} + {train[1]}" and saved["given_sets"] == {}
    assert set(saved["length_stats"]) == {"en", "mr"} and saved["scripts_without_font"] == {}


def test_a_script_without_a_font_is_named_by_prepare(tmp_path):
    words = {"I": "我", "you": "你", "we": "我们", "they": "他们"}
    things = {"tea": "茶", "water": "水", "rice": "米饭", "books": "书"}
    pairs = [(f"{s} like {o}.", f"{ts}喜欢{to}。") for s, ts in words.items() for o, to in things.items()]
    path = write_anki(tmp_path / "eng-cmn.tsv", pairs)
    logged = []
    config = config_from_dict(tiny_config(tmp_path, path, data={"tgt_lang": "zh", "dev_size": 2, "test_size": 2}))
    report = prepare(config, log=logged.append)
    missing = report.scripts_without_font  # the ideographs, and the ideographic full stop
    assert set(missing) == {"CJK", "IDEOGRAPHIC"} and missing["CJK"] in "我你们他喜欢茶水米饭书"
    assert any(line.startswith("warning: No installed font draws Cjk") for line in logged)
    assert "empty boxes" in report.summary()
