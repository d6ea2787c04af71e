"""Minimum Bayes risk decoding (nmt/decoding/mbr.py): the candidate with the highest expected utility."""

import math

import pytest

from nmt.config.schema import Config, DecodeConfig
from nmt.core.errors import NmtError
from nmt.decoding.mbr import expected_utilities, mbr_choice, utility_function
from nmt.pipelines.translate import Translator

from .helpers import random_translator, tiny_config


def overlap(hypothesis: str, reference: str) -> float:
    """A utility simple enough to work out by hand: the share of the reference's words found."""
    words = reference.split()
    return 100.0 * sum(w in hypothesis.split() for w in words) / len(words)


def test_expected_utility_is_the_probability_weighted_agreement_worked_by_hand():
    candidates = ["a b", "a c", "x y"]
    log_probs = [math.log(0.3), math.log(0.3), math.log(0.4)]  # already a distribution
    expected = expected_utilities(candidates, log_probs, overlap)
    # "a b": 0.3*100 + 0.3*50 + 0.4*0 = 45; "a c": 0.3*50 + 0.3*100 + 0 = 45; "x y": 0.4*100 = 40
    assert expected == pytest.approx([45.0, 45.0, 40.0])


def test_mbr_picks_the_consensus_over_the_most_probable_outlier():
    candidates = ["x y", "a b", "a c"]
    log_probs = [math.log(0.4), math.log(0.3), math.log(0.3)]
    assert max(range(3), key=lambda i: log_probs[i]) == 0  # beam search would keep the outlier
    assert mbr_choice(candidates, log_probs, overlap) == 1  # the first of the two tied at 45


def test_the_weights_are_renormalised_over_the_n_best():
    candidates = ["a b", "a c", "x y"]
    assert expected_utilities(candidates, [-30.0, -30.0, -29.0], overlap) == pytest.approx(
        expected_utilities(candidates, [-1.0, -1.0, 0.0], overlap)
    )


@pytest.mark.parametrize("name", ["chrf", "bleu"])
def test_real_utilities_prefer_the_candidate_close_to_the_others(name):
    candidates = [
        "zebras fly over the quiet river tonight",
        "the cat sat on the mat",
        "the cat sat on a mat",
        "a cat sat on the mat",
    ]
    log_probs = [-1.0, -1.5, -1.6, -1.7]
    assert mbr_choice(candidates, log_probs, utility_function(name)) == 1
    assert mbr_choice(["only one"], [-3.0], utility_function(name)) == 0


def test_decode_mbr_is_checked_on_load(tmp_path):
    from nmt.config.parsing import config_from_dict

    raw = tiny_config(tmp_path, tmp_path / "pairs.txt")
    raw["decode"]["mbr"] = 1
    with pytest.raises(NmtError, match=r"decode\.mbr.*0 \(off\) or an integer >= 2"):
        config_from_dict(raw)
    raw["decode"]["mbr"] = 4
    raw["decode"]["mbr_utility"] = "meteor"
    with pytest.raises(NmtError, match=r"decode\.mbr_utility.*'chrf', 'bleu'"):
        config_from_dict(raw)


def test_translate_with_mbr_returns_one_of_each_lines_candidates(tmp_path):
    plain = random_translator(tmp_path, beam_size=4)
    lines = ["I see apples.", "", "we like tea.", "they eat rice."]
    candidates = [[plain.detokenize(h) for h in found] for found in plain.search(lines, 4, n_best=4)]
    config = Config(
        run_dir=plain.loaded.config.run_dir,
        model=plain.loaded.config.model,
        decode=DecodeConfig(**{**vars(plain.decode), "mbr": 4}),
    )
    loaded = plain.loaded
    mbr = Translator(type(loaded)(config, loaded.model, loaded.src_tok, loaded.tgt_tok, loaded.device))
    chosen = mbr.translate(lines)
    assert len(chosen) == len(lines) and chosen[1] == ""
    for line, options in zip(chosen, candidates):
        assert line in [" ".join(o.split()) for o in options] or (line == "" and not any(options))
    utility = utility_function("chrf")
    found = plain.search(lines, 4, n_best=4)
    for line, hypotheses, options in zip(chosen, found, candidates):
        if len(options) > 1:
            assert options[mbr_choice(options, [h.log_prob for h in hypotheses], utility)] == line
