import pytest
import torch

from nmt.config import DecodeConfig, ModelConfig
from nmt.errors import NmtError
from nmt.evaluation import reference_streams, score
from nmt.fileio import read_lines, split_lines
from nmt.model.seq2seq import Seq2Seq
from nmt.tokenizer import Tokenizer, train_sentencepiece
from nmt.translate import Translator

from .conftest import synthetic_pairs


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    root = tmp_path_factory.mktemp("spm")
    pairs = synthetic_pairs()
    train_sentencepiece([s for s, _ in pairs], root / "src.model", 300, "unigram", 1.0)
    train_sentencepiece([t for _, t in pairs], root / "tgt.model", 300, "unigram", 1.0)
    src_tok, tgt_tok = Tokenizer(root / "src.model"), Tokenizer(root / "tgt.model")
    torch.manual_seed(0)
    config = ModelConfig(embed_dim=16, encoder_hidden=16, decoder_hidden=16, attention_dim=16, output_dim=16)
    model = Seq2Seq(config, src_tok.vocab_size, tgt_tok.vocab_size)
    return Translator(model, src_tok, tgt_tok, DecodeConfig(batch_size=3, max_len_offset=3, max_len_ratio=1.0), torch.device("cpu"))


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


def test_attention_matrix_labels_match_weights(translator):
    src_labels, tgt_labels, weights = translator.attention_matrix("I see apples.", "मी सफरचंद पाहतो.")
    assert weights.shape == (len(tgt_labels), len(src_labels))
    assert torch.allclose(weights.sum(-1), torch.ones(len(tgt_labels)))


def test_split_lines_only_on_newline(tmp_path):
    assert split_lines("a\r\nb\u2028c\x0cd\n\ne\n") == ["a", "b\u2028c\x0cd", "", "e"]
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\xff\n")
    assert read_lines(path, errors="replace") == ["one", "two\ufffd"]


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
    from nmt.evaluation import score_by_length

    sources = ["a b", "a b c d", "one two three four five six seven eight nine ten eleven twelve"]
    refs = [["x y z w"], ["p q r s"], ["m n o p"]]
    hyps = ["x y z w", "nothing alike at all", "m n o p"]
    rows = score_by_length(hyps, refs, sources)
    assert [r["bucket"] for r in rows] == ["1-3", "4-5", "11+"]
    assert [r["sentences"] for r in rows] == [1, 1, 1]
    assert rows[0]["bleu"] == 100.0 and rows[1]["bleu"] < 10.0


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


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
