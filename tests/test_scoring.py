"""sacrebleu scores against every reference, and BLEU by source length."""

import pytest

from nmt.core.errors import NmtError
from nmt.decoding.scoring import reference_streams, repeated_word_share, repeats_a_word, score, score_by_length


def test_multi_reference_scoring():
    refs = [["the cat sat", "a cat was sitting"], ["hello there"]]
    hyps = ["a cat was sitting", "hello there"]
    assert score(hyps, refs)["bleu"] == 100.0  # matches the second reference of sentence 1
    single = score(hyps, [[r[0]] for r in refs])
    assert single["bleu"] < 100.0
    report = score(hyps, refs)
    assert report["num_references"] == 2 and "nrefs:var" in report["signature"]["bleu"]
    assert reference_streams(refs) == [["the cat sat", "hello there"], ["a cat was sitting", None]]


def test_scoring_errors():
    with pytest.raises(NmtError, match="2 hypotheses but 1"):
        score(["a", "b"], [["a"]])


def test_score_by_length_buckets():
    sources = ["a b", "a b c d", "one two three four five six seven eight nine ten eleven twelve"]
    refs = [["x y z w"], ["p q r s"], ["m n o p"]]
    hyps = ["x y z w", "nothing alike at all", "m n o p"]
    rows = score_by_length(hyps, refs, sources)
    assert [r["bucket"] for r in rows] == ["1-3", "4-5", "11+"]
    assert [r["sentences"] for r in rows] == [1, 1, 1]
    assert rows[0]["bleu"] == 100.0 and rows[1]["bleu"] < 10.0


def test_repeated_word_share_finds_back_to_back_words_and_ignores_punctuation():
    texts = ["चहा चहा आवडतो का?", "तो मुलगा आहे. आहे", "मी मी", "मी तू मी", "", "a, a!"]
    assert [repeats_a_word(t) for t in texts] == [True, True, True, False, False, True]
    assert repeated_word_share(texts) == pytest.approx(100 * 4 / 6)
    assert repeated_word_share([]) == 0.0
