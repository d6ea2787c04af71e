"""Language codes (``tokenizer.src_code``, ``tokenizer.tgt_code``: NLLB's and M2M100's way of
naming a pair): a piece before every source, a piece every target starts with. Search feeds the
target's after <bos> and never chooses it; the text of a translation leaves it out. A model
trained here with codes gets them as pieces of its own SentencePiece models."""

from __future__ import annotations

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.core.errors import NmtError
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_tokenizers, load_trained

from .helpers import synthetic_pairs, tiny_config, write_anki

CODES = {"src_code": "__en__", "tgt_code": "__mr__"}


@pytest.fixture(scope="module")
def coded_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("codes")
    raw = tiny_config(tmp_path, write_anki(tmp_path / "pairs.txt", synthetic_pairs()), tokenizer=CODES)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", "--config", str(path)])
    assert result.exit_code == 0, result.output
    return path, tmp_path / "run"


def test_the_codes_are_pieces_of_their_own_and_lead_every_sequence(coded_run):
    config, _ = coded_run
    src_tok, tgt_tok = load_tokenizers(load_config(config))
    assert "__en__" in src_tok.pieces() and "__mr__" in tgt_tok.pieces()  # pieces of their own
    pieces = src_tok.id_to_piece(src_tok.encode(["I see tea."])[0])
    assert pieces[0] == "__en__" and "".join(pieces[1:]) == "▁I▁see▁tea."
    assert tgt_tok.id_to_piece(tgt_tok.encode(["मी चहा पाहतो."])[0])[0] == "__mr__"
    assert tgt_tok.decode(tgt_tok.encode(["मी चहा पाहतो."])) == ["मी चहा पाहतो."]


def test_search_starts_each_translation_with_the_target_code_given_not_chosen(coded_run):
    """Greedy and beam: the code first with a log-probability of 0 and an attention row of its
    own; the text without it; the search after it the search a prefix of the code continues."""
    _, run = coded_run
    loaded = load_trained(run, torch.device("cpu"))
    translator = Translator(loaded)
    code = loaded.tgt_tok.code_ids
    sources = ["I see tea.", "we like rice."]
    for beam in (1, 3):
        for hypotheses in translator.search(sources, beam_size=beam, n_best=beam, with_attention=True):
            for h in hypotheses:
                assert h.tokens[:1] == code and h.token_logprobs[0] == 0.0
                assert h.attention is not None and h.attention.size(0) == len(h.token_logprobs)
                assert "__mr__" not in translator.detokenize(h)
    explained = translator.explain(sources[:1], beam_size=3, prefix=["__mr__"])[0]
    searched = translator.search(sources[:1], beam_size=3)[0][0]
    assert explained.translations[0].tokens[1:] == loaded.tgt_tok.labels(searched.tokens[1:], searched.ended)
    assert explained.translations[0].tokens[0] == "__mr__"


def test_a_code_the_vocabulary_lacks_is_refused_naming_the_key(coded_run):
    config, _ = coded_run
    wrong = load_config(config, ["tokenizer.tgt_code=__hi__"])
    with pytest.raises(NmtError, match=r"tokenizer.tgt_code: '__hi__' is not a piece of"):
        load_tokenizers(wrong)


def test_the_offline_page_refuses_a_model_with_codes_naming_them(coded_run, tmp_path):
    from nmt.export.web_page import export_web

    _, run = coded_run
    with pytest.raises(NmtError, match=r"tokenizer.src_code: __en__, tokenizer.tgt_code: __mr__"):
        export_web(run, tmp_path / "page")
    assert not (tmp_path / "page").exists()


def test_an_alignment_reads_no_word_in_a_language_code():
    from nmt.decoding.alignment import piece_words

    assert piece_words(["__en__", "▁I", "▁see", "<eos>"]) == [None, 0, 1, None]
    assert piece_words(["hin_Deva", "▁मी", "▁चहा"]) == [None, 0, 1]


def test_an_argos_package_gives_the_target_code_as_its_target_prefix(tmp_path):
    """A Transformer with a target code only: Argos Translate starts each translation with it
    (the package's target_prefix) and takes it off again."""
    import json
    import zipfile

    pytest.importorskip("argostranslate")
    pytest.importorskip("spacy")
    pytest.importorskip("ctranslate2")
    from nmt.export.argos import export_argos

    from .helpers import TINY_TRANSFORMER, TRANSFORMER_SCHEDULE
    from .test_ctranslate2 import argos_translate

    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    raw = tiny_config(tmp_path, data, tokenizer={"tgt_code": "__mr__"}, train=TRANSFORMER_SCHEDULE)
    raw["model"] = {**TINY_TRANSFORMER, "dropout": 0.0}  # CTranslate2 runs Transformers
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert CliRunner().invoke(app, ["train", "--config", str(path)]).exit_code == 0
    archive = export_argos(tmp_path / "run", tmp_path / "en_mr", quantization="float32")
    with zipfile.ZipFile(archive) as opened:
        assert json.loads(opened.read("translate-en_mr-1_0/metadata.json"))["target_prefix"] == "__mr__"
    argos = argos_translate(archive, "I see tea.", tmp_path / "home")
    assert argos.returncode == 0, argos.stderr
    assert not argos.stdout.strip().split("\n")[-1].startswith("__mr__")
