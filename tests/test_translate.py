"""The translation front end: one line out per line in, order, clipping, heatmaps, input reading."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.core.fileio import read_lines, split_lines

from .helpers import random_translator


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    return random_translator(tmp_path_factory.mktemp("spm"))


WEIRD_LINES = [
    "I see apples.",
    "",
    "   ",
    "line with\u2028separator",
    "bell\x07 and \x1b[31m escape",
    "数字 ١٢٣ 😀" * 20,
    "tab\tinside",
    "\ufeff",
]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_one_line_out_per_line_in(translator, beam_size):
    out = translator.translate(WEIRD_LINES, beam_size=beam_size)
    assert len(out) == len(WEIRD_LINES)
    assert out[1] == "" and out[2] == ""
    assert all("\n" not in line and "\r" not in line and "\u2028" not in line for line in out)


def test_order_is_restored(translator):
    lines = ["I see apples.", "we like tea.", "I see apples.", "they eat rice.", "we like tea."]
    out = translator.translate(lines, beam_size=2)
    assert out[0] == out[2] and out[1] == out[4]


def test_heatmaps_come_from_search_with_labels_that_match_the_weights(translator):
    lines = ["I see apples.", "", "we like tea."]
    heatmaps = translator.heatmaps(lines, beam_size=2)
    assert [h.source for h in heatmaps] == ["I see apples.", "we like tea."]  # blank lines have none
    assert [h.translation for h in heatmaps] == [t for t in translator.translate(lines, beam_size=2) if t]
    for heatmap in heatmaps:
        assert heatmap.weights.shape == (len(heatmap.tgt_labels), len(heatmap.src_labels))
        assert heatmap.src_labels[-1] == "<eos>"
        assert torch.allclose(heatmap.weights.sum(-1), torch.ones(len(heatmap.tgt_labels)), atol=1e-5)


def test_n_best_hypotheses_detokenize_to_the_translation(translator):
    found = translator.search(["I see apples.", "they eat rice."], beam_size=3, n_best=3)
    assert [len(hypotheses) for hypotheses in found] == [3, 3]
    best = [translator.detokenize(hypotheses[0]) for hypotheses in found]
    assert best == translator.translate(["I see apples.", "they eat rice."], beam_size=3)


def test_split_lines_only_on_newline(tmp_path):
    assert split_lines("a\r\nb\u2028c\x0cd\n\ne\n") == ["a", "b\u2028c\x0cd", "", "e"]
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\xff\n")
    assert read_lines(path, errors="replace") == ["one", "two\ufffd"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=60), max_size=12))
def test_random_text_gives_one_line_out_per_line_in(translator, lines):
    lines = [line.replace("\n", " ") for line in lines]  # a line of input never holds a newline
    out = translator.translate(lines, beam_size=2)
    assert len(out) == len(lines)
    assert all("\n" not in line for line in out)
    assert all(o == "" for line, o in zip(lines, out) if not line.split())


def test_overlong_input_is_clipped_not_fatal(translator):
    out = translator.translate(["apples " * 2000, "tea"], beam_size=1)
    assert len(out) == 2
