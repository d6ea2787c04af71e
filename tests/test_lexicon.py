"""A bilingual word list trained beside the pairs (``data.lexicon``, nmt/data/lexicon.py): its
pairs appended to training only, never a dev/test source, the tokenizers untouched, a changed
list prepared again, a bad file named; and scripts/freedict_lexicon.py, which writes one from a
FreeDict dictionary."""

from __future__ import annotations

from pathlib import Path

import pytest

from nmt.config.paths import prepared_paths
from nmt.config.schema import config_from_dict
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines
from nmt.pipelines.prepare import prepare

from .helpers import OBJECTS, script_module, synthetic_pairs, tiny_config, write_anki

WORDS = [(english, marathi) for english, marathi in OBJECTS.items()]  # "apples" -> "सफरचंद", ...


def lexicon_config(tmp_path: Path, name: str, lexicon: Path | None) -> dict:
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    raw = tiny_config(tmp_path, data, run_dir=str(tmp_path / name))
    if lexicon is not None:
        raw["data"]["lexicon"] = str(lexicon)
    return raw


def quiet(_: str) -> None:
    pass


def test_the_lexicon_trains_beside_the_pairs_and_never_in_dev_or_test(tmp_path):
    plain = config_from_dict(lexicon_config(tmp_path, "plain", None))
    plain_report = prepare(plain, log=quiet, show_bar=False)
    plain_paths = prepared_paths(plain)
    a_test_source = read_lines(plain_paths.text("test", "src"))[0]
    lexicon = write_anki(tmp_path / "lexicon.tsv", [*WORDS, (a_test_source, "परीक्षा")])
    config = config_from_dict(lexicon_config(tmp_path, "lexicon", lexicon))
    said: list[str] = []
    report = prepare(config, log=said.append, show_bar=False)
    paths = prepared_paths(config)
    before, after = read_lines(plain_paths.text("train", "src")), read_lines(paths.text("train", "src"))
    assert after == before + [english for english, _ in WORDS]  # appended, the test source left out
    assert read_lines(paths.text("train", "tgt"))[len(before) :] == [marathi for _, marathi in WORDS]
    assert read_lines(paths.attribution("train"))[len(before) :] == [f"lexicon: {lexicon}"] * len(WORDS)
    assert report.split_pairs == {**plain_report.split_pairs, "train": plain_report.split_pairs["train"] + len(WORDS)}
    for split in ("dev", "test"):
        for side in ("src", "tgt"):
            assert read_lines(paths.text(split, side)) == read_lines(plain_paths.text(split, side))
    for side in ("src", "tgt"):  # the tokenizers learn from the corpus's sentences only
        assert paths.spm(side).read_bytes() == plain_paths.spm(side).read_bytes()
    assert any(f"Lexicon: {len(WORDS)} word pairs" in line and "1 left out" in line for line in said)
    own = plain_report.split_pairs["train"]  # the report says what the tokenizers learned from, and not from
    assert report.added_pairs == len(WORDS) and "seeded sample" not in report.summary()
    assert f"learned from the split's {own:,} training pairs, not from the {len(WORDS)} a teacher or a word list" in (
        report.summary()
    )
    assert "SentencePiece learned" not in plain_report.summary()  # all of them: nothing to say


def test_a_changed_lexicon_prepares_again(tmp_path):
    lexicon = write_anki(tmp_path / "lexicon.tsv", WORDS)
    config = config_from_dict(lexicon_config(tmp_path, "run", lexicon))
    prepare(config, log=quiet, show_bar=False)
    assert prepare(config, log=quiet, show_bar=False).reused  # the same list: nothing to do
    write_anki(lexicon, [*WORDS, ("bread", "पाव")])
    report = prepare(config, log=quiet, show_bar=False)
    assert not report.reused and read_lines(prepared_paths(config).text("train", "src"))[-1] == "bread"


def test_a_lexicon_that_is_not_word_pairs_is_named_with_its_line(tmp_path):
    bad = tmp_path / "glossary.txt"
    bad.write_text("apples सफरचंद\nwater पाणी\n", encoding="utf-8")  # no tabs
    config = config_from_dict(lexicon_config(tmp_path, "run", bad))
    with pytest.raises(
        NmtError, match=rf"(?s)data.lexicon: {bad} does not look like a word list.*2 of 2 lines.*{bad}:1: one column"
    ):
        prepare(config, log=quiet, show_bar=False)
    missing = config_from_dict(lexicon_config(tmp_path, "other", tmp_path / "nowhere.tsv"))
    with pytest.raises(NmtError, match=r"nowhere.tsv \(config key 'data.lexicon'\)"):
        prepare(missing, log=quiet, show_bar=False)


def test_one_bad_line_is_skipped_and_counted_unless_malformed_lines_are_errors(tmp_path):
    lexicon = tmp_path / "lexicon.tsv"
    lexicon.write_text("apples\tसफरचंद\nwater पाणी\n", encoding="utf-8")
    said: list[str] = []
    prepare(config_from_dict(lexicon_config(tmp_path, "run", lexicon)), log=said.append, show_bar=False)
    assert any("Lexicon: 1 word pairs" in line and "1 malformed line(s) skipped" in line for line in said)
    strict = lexicon_config(tmp_path, "strict", lexicon)
    strict["data"]["on_malformed"] = "error"
    with pytest.raises(NmtError, match=rf"{lexicon}:2"):
        prepare(config_from_dict(strict), log=quiet, show_bar=False)


def test_beside_related_corpora_the_lexicon_is_the_pairs_tagged_and_oversampled(tmp_path):
    pairs = synthetic_pairs()
    related = write_anki(tmp_path / "mar.txt", pairs)
    raw = lexicon_config(tmp_path, "run", write_anki(tmp_path / "lexicon.tsv", WORDS))
    raw["data"] |= {"tgt_lang": "hi", "related": {"mr": str(related)}, "oversample": 2}
    config = config_from_dict(raw)
    prepare(config, log=quiet, show_bar=False)
    paths = prepared_paths(config)
    trained = list(zip(read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt"))))
    for english, marathi in WORDS:
        assert trained.count((f"<2hi> {english}", marathi)) == 2  # the pair's tag, twice an epoch
        assert not any(src == f"<2mr> {english}" for src, _ in trained)


DICTIONARY = """\
00-database-info
English-Hindi FreeDict Dictionary
book /bˈʊk/ <N>
1. पुस्तक, किताब
      "I am reading a good book."
2. बही~खाता
book /bˈʊk/ <VT>
1. बुक~करना, पुस्तक
go /ɡˈəʊ/ <V>
1. जाना
2. समाना[<जाना]
3. हो_जाना{स्थिति}
abattoir /ˈabɐtwˌɑː/ <N>
1. वधशाला.
go on /ɡˌəʊ ˈɒn/ <PhrV>
1. जारी~रखना
zebra crossing lane /z/ <N>
1. English only
"""


def test_freedict_entries_become_word_pairs_of_the_corpus_words():
    freedict = script_module("freedict_lexicon")
    translations = freedict.entries(DICTIONARY.splitlines())
    assert translations == {
        "book": ["पुस्तक", "किताब", "बही खाता", "बुक करना"],  # senses in order, a repeat dropped, ~ a space
        "go": ["जाना", "समाना", "हो जाना"],  # notes in brackets and braces dropped
        "abattoir": ["वधशाला"],
        "go on": ["जारी रखना"],
    }  # an entry with only English in it is no translation
    known = {"book", "go", "on"}
    assert freedict.lexicon(translations, known, per_word=2, max_words=3) == [
        ("book", "पुस्तक"),
        ("book", "किताब"),
        ("go", "जाना"),
        ("go", "समाना"),
        ("go on", "जारी रखना"),
    ]
    assert ("abattoir", "वधशाला") in freedict.lexicon(translations, None, per_word=1, max_words=1)
    assert ("go on", "जारी रखना") not in freedict.lexicon(translations, None, per_word=1, max_words=1)
