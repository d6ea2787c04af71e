"""Interchange with Hugging Face ``transformers`` on tiny random models built offline
(tests/hf_models.py): a Marian model imported here computes what ``transformers`` computes —
the same pieces, the same log-probabilities, the same greedy and beam translations — and then
trains, shows its heads and exports like a model trained here."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from nmt.core.errors import NmtError
from nmt.data.tokenizer import BOS_ID, EOS_ID
from nmt.pipelines.huggingface_import import import_hf
from nmt.runtime.loading import load_trained

from .helpers import synthetic_pairs
from .hf_models import imported, tiny_marian

transformers = pytest.importorskip("transformers")
CPU = torch.device("cpu")
PAIRS = synthetic_pairs()[:6]


@pytest.fixture(scope="module", params=["shared", "separate"])
def marian(request, tmp_path_factory):
    """A tiny Marian folder (one vocabulary for both sides, or one each) and its import."""
    folder, run, _ = imported(tmp_path_factory.mktemp(f"marian-{request.param}"), f"marian-{request.param}")
    hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    return folder, run, hf_model, transformers.AutoTokenizer.from_pretrained(folder)


def test_an_imported_marian_cuts_text_into_the_pieces_its_tokenizer_does(marian):
    _, run, _, tokenizer = marian
    loaded = load_trained(run, CPU)
    assert (loaded.config.data.src_lang, loaded.config.data.tgt_lang) == ("en", "mr")
    source_pieces = {index: piece for piece, index in tokenizer.get_src_vocab().items()}  # ids to tokens: the target's
    for source, target in PAIRS:
        theirs = tokenizer(source).input_ids
        ours = loaded.src_tok.encode([source])[0]
        assert loaded.src_tok.id_to_piece(ours) == [source_pieces[index] for index in theirs[:-1]]
        assert theirs[-1] == tokenizer.eos_token_id  # both end a source with <eos>
        theirs = tokenizer(text_target=target).input_ids[:-1]
        ours = loaded.tgt_tok.encode([target])[0]
        assert loaded.tgt_tok.id_to_piece(ours) == tokenizer.convert_ids_to_tokens(theirs)


def teacher_forced(hf_model, tokenizer, source: str, target: str, **options):
    """transformers' model fed ``target`` after its decoder start: the inputs, the labels, the
    decoder's input and the outputs (``options``: e.g. output_attentions), on the model's device."""
    device = hf_model.device
    inputs = tokenizer(source, return_tensors="pt").to(device)
    labels = tokenizer(text_target=target, return_tensors="pt").input_ids.to(device)
    start = torch.full((1, 1), hf_model.config.decoder_start_token_id, device=device)
    decoder_input = torch.cat([start, labels[:, :-1]], 1)
    with torch.no_grad():
        out = hf_model(**inputs, decoder_input_ids=decoder_input, **options)
    return inputs, labels, decoder_input, out


def their_log_probs(hf_model, tokenizer, source: str, target: str) -> torch.Tensor:
    _, labels, _, out = teacher_forced(hf_model, tokenizer, source, target)
    return out.logits.log_softmax(-1).gather(-1, labels[..., None])[0, :, 0]


def our_log_probs(loaded, source: str, target: str, device: torch.device = CPU) -> torch.Tensor:
    src = torch.tensor([loaded.src_tok.encode([source])[0] + [EOS_ID]], device=device)
    tgt = loaded.tgt_tok.encode([target])[0] + [EOS_ID]
    with torch.no_grad():
        previous = torch.tensor([[BOS_ID, *tgt[:-1]]], device=device)
        logits, _ = loaded.model(src, torch.tensor([src.size(1)]), previous)
    return logits.log_softmax(-1).gather(-1, torch.tensor([tgt], device=device)[..., None])[0, :, 0]


def assert_log_probs_as_transformers(case) -> None:
    """Every target token's log-probability given the source, ours and transformers', to 1e-5
    plus one part in a million (float32 rounding, which grows with the value: under the default
    kernel set a log-probability of -16.6 came out 1.14e-5 apart), for an imported model
    (``case``: a fixture's folder, run, model, tokenizer)."""
    _, run, hf_model, tokenizer = case
    loaded = load_trained(run, CPU)
    for source, target in PAIRS:
        theirs, ours = their_log_probs(hf_model, tokenizer, source, target), our_log_probs(loaded, source, target)
        assert ours.shape == theirs.shape
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-5)


def test_an_imported_marian_gives_transformers_log_probabilities(marian):
    assert_log_probs_as_transformers(marian)


def test_a_model_too_big_for_this_machine_is_refused_with_the_figure_before_it_is_read(monkeypatch):
    """NLLB's 600 M parameters where 2 GiB are free: the import needs about 4.5 GiB (their weights
    and ours, float32), fine-tuning about 9 GiB; both figures said, the import refused."""
    from nmt.pipelines.huggingface_import import check_fits

    said = []
    monkeypatch.setattr("nmt.pipelines.huggingface_import.available_memory", lambda device: 2 * 2**30)
    with pytest.raises(NmtError, match=r"600.0 M parameters: importing it needs about 4.5 GiB .* 2.0 GiB free"):
        check_fits(600_000_000, said.append)
    assert "fine-tuning about 8.94 GiB" in said[0]
    check_fits(75_000_000, said.append)  # OPUS-MT's size fits: said, not refused
    assert "75.0 M parameters" in said[1]


def test_a_damaged_model_is_refused_naming_its_file_and_leaves_no_run(tmp_path):
    """Weights that are not a safetensors file, or that lack a layer: a clear error naming the
    file, and no half-written run (a second try is not refused as "not empty")."""
    folder = tiny_marian(tmp_path / "opus-mt-en-mr")
    weights = folder / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(NmtError, match=r"model.safetensors"):
        import_hf(str(folder), tmp_path / "run", "", "", log=lambda message: None)
    assert not (tmp_path / "run").exists() and [p.name for p in tmp_path.iterdir()] == ["opus-mt-en-mr"]
    from safetensors.torch import load_file, save_file

    weights.write_bytes(whole)
    state = load_file(str(weights))
    save_file({k: v for k, v in state.items() if "layers.1.fc1" not in k}, str(weights))
    with pytest.raises(NmtError, match=r"weights this model lacks .*layers.1.feed_forward.inner"):
        import_hf(str(folder), tmp_path / "run", "", "", log=lambda message: None)
    assert not (tmp_path / "run").exists()


def test_a_model_type_not_imported_is_refused_naming_what_is(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "t5"}', encoding="utf-8")
    with pytest.raises(NmtError, match=r"model_type 't5'.*imports MarianMTModel"):
        import_hf(str(folder), tmp_path / "run", "en", "de", log=print)


def limit(translator, source_length: int) -> int:
    """This toolkit's length limit for a source of ``source_length`` ids (<eos> included)."""
    return int(translator.decode.max_len_ratio * source_length + translator.decode.max_len_offset)


def generated(hf_model, tokenizer, source: str, beam: int, most: int) -> list[str]:
    """generate()'s best for ``source``: its target pieces, </s> last where it ended."""
    with torch.no_grad():
        ids = hf_model.generate(
            **tokenizer(source, return_tensors="pt").to(hf_model.device),
            num_beams=beam,
            do_sample=False,
            max_new_tokens=most,
            length_penalty=1.0,
            bad_words_ids=[[hf_model.config.pad_token_id]],
            forced_eos_token_id=None,
        )[0, 1:].tolist()
    return [tokenizer.decoder[index] for index in ids if index != hf_model.config.pad_token_id]


def test_an_imported_marian_searches_greedily_as_generate_does(marian):
    """Greedy search gives generate()'s tokens, sentence for sentence (a <pad> is never written,
    as OPUS-MT's bad_words_ids say; the length limit is this toolkit's)."""
    from nmt.pipelines.translate import Translator

    _, run, hf_model, tokenizer = marian
    translator = Translator(load_trained(run, CPU))
    sources = [source for source, _ in PAIRS]
    for source, (best,) in zip(sources, translator.search(sources, beam_size=1)):
        most = limit(translator, len(tokenizer(source).input_ids))
        ours = translator.tgt_tok.id_to_piece(best.tokens) + (["</s>"] if best.ended else [])
        assert ours == generated(hf_model, tokenizer, source, 1, most), source


def test_an_imported_marians_beam_search_scores_at_least_what_generates_does(marian):
    """Beam search ranks by the same score as generate() (log-probability / length, <eos>
    counted); generate keeps an ended hypothesis only while it is among the beam's best of its
    step, this toolkit keeps every one: its best scores at least as high, by the model's own
    log-probabilities, and is generate's wherever their scores tie."""
    from nmt.pipelines.translate import Translator

    _, run, hf_model, tokenizer = marian
    loaded = load_trained(run, CPU)
    translator = Translator(loaded)
    sources = [source for source, _ in PAIRS]
    ties = 0
    for source, (best,) in zip(sources, translator.search(sources, beam_size=4)):
        theirs = generated(hf_model, tokenizer, source, 4, limit(translator, len(tokenizer(source).input_ids)))
        ended = theirs[-1:] == ["</s>"]
        tokens = loaded.tgt_tok.piece_ids(theirs[:-1] if ended else theirs) + ([EOS_ID] if ended else [])
        src = torch.tensor([loaded.src_tok.encode([source])[0] + [EOS_ID]])
        with torch.no_grad():
            logits, _ = loaded.model(src, torch.tensor([src.size(1)]), torch.tensor([[BOS_ID, *tokens[:-1]]]))
        their_score = float(logits.log_softmax(-1)[0].gather(-1, torch.tensor(tokens)[:, None]).sum()) / len(tokens)
        assert best.score >= their_score - 1e-4, source
        if best.score == pytest.approx(their_score, abs=1e-4):
            assert translator.tgt_tok.id_to_piece(best.tokens) == (theirs[:-1] if ended else theirs)
            ties += 1
    assert ties >= 4  # the same translation for most sources


def test_nmt_init_imports_and_writes_the_config_that_fine_tunes_it_and_training_lowers_the_loss(tmp_path, monkeypatch):
    """`nmt init PAIRS --from-hf FOLDER`: the import, and a config starting from it (init_from),
    whose training on the pairs lowers the dev loss from the imported model's."""
    import json

    from typer.testing import CliRunner

    from nmt.cli import app

    from .helpers import write_anki

    tiny_marian(tmp_path / "opus-mt-en-mr")
    write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["init", "pairs.txt", "--from-hf", "opus-mt-en-mr", "--to", "ft.yaml"])
    assert result.exit_code == 0, result.output
    assert "init_from: runs/opus-mt-en-mr" in (tmp_path / "ft.yaml").read_text(encoding="utf-8")
    for command in (["prepare", "--config", "ft.yaml"], ["train", "--config", "ft.yaml"]):
        settings = ["--set", "train.max_minutes=0", "--set", "train.epochs=4", "--set", "train.learning_rate=0.003"]
        result = runner.invoke(app, command + (settings if command[0] == "train" else []))
        assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "runs" / "ft" / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 4 and records[-1]["dev_loss"] < records[0]["dev_loss"]
    again = runner.invoke(app, ["init", "--from-hf", "opus-mt-en-mr"])
    assert again.exit_code == 1 and "not empty" in again.output  # an import never overwrites a run


def test_the_lab_reads_an_imported_models_heads_and_plays_one_back(marian):
    import nmt

    _, run, _, _ = marian
    model = nmt.load(run)
    heads = model.heads("I see tea.").data
    assert heads["heads"] == 4 and len(heads["cross"]) == 2 and len(heads["cross"][0]) == 4  # 2 layers of 4
    playback = model.playback("I see tea.", layer=-1, head=1).data
    step = playback["steps"][0]
    recomputed = torch.tensor([s if s is not None else float("-inf") for s in step["scores"]]).softmax(0)
    torch.testing.assert_close(recomputed, torch.tensor(step["weights"]), rtol=0, atol=1e-5)


def test_an_imported_model_exports_to_ctranslate2_which_translates_as_it_does(marian, tmp_path):
    pytest.importorskip("ctranslate2")
    from nmt.export.package import export_model
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import load_packages

    _, run, _, _ = marian
    package = export_model(run, tmp_path / "package", ctranslate2="float32")
    sources = [source for source, _ in PAIRS]
    expected = Translator(load_trained(run, CPU)).translate(sources, beam_size=2)
    engine = load_packages([package], CPU, engine="ctranslate2")
    assert Translator(engine).translate(sources, beam_size=2) == expected


def test_an_export_is_the_imported_model_again_in_transformers(marian, tmp_path):
    """The round trip: a Marian model imported and exported gives, in transformers, the
    log-probabilities it gave before, token for token (its ids are this toolkit's order now)."""
    from nmt.export.huggingface import export_hf

    _, run, hf_model, tokenizer = marian
    exported = export_hf(run, tmp_path / "hf")
    again = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported).eval()
    again_tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    assert type(again).__name__ == "MarianMTModel" and type(again_tokenizer).__name__ == "MarianTokenizer"
    for source, target in PAIRS:
        before = their_log_probs(hf_model, tokenizer, source, target)
        after = their_log_probs(again, again_tokenizer, source, target)
        torch.testing.assert_close(after, before, rtol=0, atol=1e-5)
    reimported = tmp_path / "run"
    import_hf(str(exported), reimported, "en", "mr", log=lambda message: None)
    original, back = load_trained(run, CPU).model.state_dict(), load_trained(reimported, CPU).model.state_dict()
    assert original.keys() == back.keys()
    for name, tensor in original.items():
        torch.testing.assert_close(back[name], tensor, rtol=0, atol=0, msg=name)


def test_transformers_translates_an_export_as_this_toolkit_does(marian, tmp_path):
    """generate() and batch_decode on the export (and pipeline("translation"), in the
    transformers releases that have it: 5 removed it) give this toolkit's greedy translations."""
    from nmt.export.huggingface import export_hf
    from nmt.pipelines.translate import Translator

    _, run, _, _ = marian
    exported = export_hf(run, tmp_path / "hf")
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    sources = [source for source, _ in PAIRS]
    ours = Translator(load_trained(run, CPU)).translate(sources, beam_size=1)
    translator = Translator(load_trained(run, CPU))
    for source, expected in zip(sources, ours):
        inputs = tokenizer([source], return_tensors="pt")
        most = limit(translator, inputs.input_ids.size(1))
        with torch.no_grad():
            generated = model.generate(**inputs, num_beams=1, max_new_tokens=most)
        assert tokenizer.batch_decode(generated, skip_special_tokens=True) == [expected]
    if int(transformers.__version__.split(".")[0]) < 5:
        translate = transformers.pipeline("translation", model=str(exported), device="cpu")
        assert [output["translation_text"] for output in translate(sources, num_beams=1)] == ours


def test_a_model_neither_class_holds_is_refused_naming_the_settings_of_each(tmp_path):
    from nmt.export.huggingface import export_hf

    from .helpers import small_trained_models

    trained = small_trained_models(tmp_path)
    with pytest.raises(NmtError, match=r"model.norm: post .*model.positions: marian") as refused:
        export_hf(trained["transformer-package"], tmp_path / "hf")
    m2m100 = str(refused.value).split("as M2M100ForConditionalGeneration, ")[1]  # its pre-norm layers would do there
    assert "model.norm" not in m2m100
    for key in ("model.positions: fairseq", "tokenizer.joint: true", "model.output_bias: false"):
        assert key in m2m100
    with pytest.raises(NmtError, match=r"model.arch: transformer"):
        export_hf(trained["rnn-run"], tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_ctranslate2s_own_converter_converts_an_export_that_translates_as_here(marian, tmp_path):
    """ct2-transformers-converter on the export (its MarianMTModel loader: one vocabulary for both
    sides, a decoder that starts from zeros, the last row <pad> dropped) gives greedy translations
    equal to this toolkit's, for a model imported from Marian (whose decoder starts from zeros)."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from ctranslate2.converters import TransformersConverter

    from nmt.export.huggingface import export_hf
    from nmt.pipelines.translate import Translator

    folder, run, _, _ = marian
    if (folder / "target_vocab.json").exists():
        pytest.skip("CTranslate2's Marian loader reads one vocabulary for both sides")
    exported = export_hf(run, tmp_path / "hf")
    TransformersConverter(str(exported)).convert(str(tmp_path / "ct2"))
    converted = ctranslate2.Translator(str(tmp_path / "ct2"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    ours = Translator(load_trained(run, CPU))
    sources = [source for source, _ in PAIRS]
    for source, (best,) in zip(sources, ours.search(sources, beam_size=1)):
        pieces = tokenizer.convert_ids_to_tokens(tokenizer(source).input_ids)
        (result,) = converted.translate_batch(
            [pieces], beam_size=1, min_decoding_length=0, max_decoding_length=limit(ours, len(pieces))
        )
        assert result.hypotheses[0] == ours.tgt_tok.id_to_piece(best.tokens), source


def assert_cross_attention_is_ours(run, source_ids: list[int], decoder_ids: list[int], theirs: torch.Tensor) -> None:
    """``theirs`` (layers, heads, decoder positions, source positions), read off an export of
    ``run`` for its ids: every layer's and head's cross-attention is this toolkit's for the same
    tokens (an export's ids mapped back to ours)."""
    from nmt.export.huggingface import hf_order

    loaded = load_trained(run, CPU)
    src_order, tgt_order = hf_order(loaded.src_tok.vocab_size), hf_order(loaded.tgt_tok.vocab_size)
    src = torch.tensor([[src_order[index] for index in source_ids]])
    previous = torch.tensor([[tgt_order[index] for index in decoder_ids]])
    for layer in range(theirs.size(0)):
        for head in range(theirs.size(1)):
            ours = loaded.model.cross_attention(src, torch.tensor([src.size(1)]), previous, layer, [head])
            torch.testing.assert_close(ours[0], theirs[layer, head], rtol=0, atol=1e-5)


def test_bertviz_draws_an_exports_heads_which_are_this_toolkits(marian, tmp_path):
    """BertViz's head_view takes an export's attentions as transformers returns them, and its
    cross-attention is this toolkit's, head for head (what the lab's heads view draws)."""
    bertviz = pytest.importorskip("bertviz")
    from nmt.export.huggingface import export_hf

    _, run, _, _ = marian
    exported = export_hf(run, tmp_path / "hf")
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    source, target = PAIRS[0]
    inputs, _, decoder_input, out = teacher_forced(model, tokenizer, source, target, output_attentions=True)
    html = bertviz.head_view(
        encoder_attention=out.encoder_attentions,
        decoder_attention=out.decoder_attentions,
        cross_attention=out.cross_attentions,
        encoder_tokens=tokenizer.convert_ids_to_tokens(inputs.input_ids[0]),
        decoder_tokens=tokenizer.convert_ids_to_tokens(decoder_input[0]),
        html_action="return",
    )
    drawn = html.data  # the numbers and tokens (SentencePiece's ▁ prettified away) in its params
    assert '"name": "Cross"' in drawn and all(piece.strip("▁") in drawn for piece in tokenizer.tokenize(source))
    theirs = torch.stack([layer[0] for layer in out.cross_attentions])  # (layers, heads, T, S)
    assert_cross_attention_is_ours(run, inputs.input_ids[0].tolist(), decoder_input[0].tolist(), theirs)


def test_an_imported_model_exports_to_onnx_and_argos_which_translate_as_it_does(marian, tmp_path):
    """Every export takes an imported model: ONNX graphs (checked against PyTorch as they are
    written) translate on onnxruntime as it does, and an Argos package (CTranslate2 weights that
    came from OPUS-MT and may be fine-tuned here) installs and translates in argostranslate."""
    pytest.importorskip("onnxruntime")
    from nmt.export.argos import export_argos
    from nmt.export.package import export_model
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import load_packages

    from .test_ctranslate2 import argos_translate

    folder, run, _, _ = marian
    sources = [source for source, _ in PAIRS[:3]]
    expected = Translator(load_trained(run, CPU)).translate(sources, beam_size=1)
    package = export_model(run, tmp_path / "package", onnx=True)
    assert Translator(load_packages([package], CPU, engine="onnx")).translate(sources, beam_size=1) == expected
    if (folder / "target_vocab.json").exists():
        return  # Argos packages hold one SentencePiece model; the pieces of two vocabularies are not one
    pytest.importorskip("argostranslate")
    pytest.importorskip("spacy")
    archive = export_argos(run, tmp_path / "en_mr", quantization="float32")
    argos = argos_translate(archive, sources[0], tmp_path / "home")
    assert argos.returncode == 0, argos.stderr
    # installed and translating with these weights: every word one of the target vocabulary's pieces
    # (its search settings are Argos's own; CTranslate2's numbers are held to ours above)
    words = argos.stdout.strip().split("\n")[-1].split()
    pieces = {piece.strip("▁") for piece in load_trained(run, CPU).tgt_tok.pieces()}
    assert words and set(words) <= pieces


CODES = {"M2M100Tokenizer": ("__en__", "__mr__"), "NllbTokenizer": ("eng_Latn", "mar_Deva")}


@pytest.fixture(scope="module", params=list(CODES))
def m2m100(request, tmp_path_factory):
    """A tiny M2M100 folder (NLLB-200's class) with M2M100's or NLLB's tokenizer, and its import
    (en -> mr: the codes found in the vocabulary)."""
    kind = "nllb" if request.param == "NllbTokenizer" else "m2m100"
    folder, run, _ = imported(tmp_path_factory.mktemp("m2m100"), kind)
    hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    return folder, run, hf_model, transformers.AutoTokenizer.from_pretrained(folder)


def test_an_imported_m2m100_leads_each_side_with_its_language_code_as_its_tokenizer_does(m2m100):
    """M2M100Tokenizer: __en__ before each source, __mr__ starting each target; the import says
    so as tokenizer.src_code and tgt_code (one joint vocabulary), and text is cut as it cuts it."""
    _, run, _, tokenizer = m2m100
    loaded = load_trained(run, CPU)
    tok = loaded.config.tokenizer
    assert (tok.joint, tok.src_code, tok.tgt_code) == (True, *CODES[type(tokenizer).__name__])
    for source, target in PAIRS:
        theirs = tokenizer.convert_ids_to_tokens(tokenizer(source).input_ids)
        assert loaded.src_tok.id_to_piece(loaded.src_tok.encode([source])[0]) + ["</s>"] == theirs
        theirs = tokenizer.convert_ids_to_tokens(tokenizer(text_target=target).input_ids)
        assert loaded.tgt_tok.id_to_piece(loaded.tgt_tok.encode([target])[0]) + ["</s>"] == theirs
        assert loaded.tgt_tok.decode(loaded.tgt_tok.encode([target])) == [target]  # the code is no part of the text


def test_an_imported_m2m100_gives_transformers_log_probabilities(m2m100):
    assert_log_probs_as_transformers(m2m100)  # the language code's first


def test_an_imported_m2m100_searches_greedily_as_generate_does_with_the_code_forced(m2m100):
    """generate(forced_bos_token_id=__mr__) and this toolkit's greedy search give the same tokens,
    the code first; the translation's text has no code; the lab reads the model's heads."""
    import nmt
    from nmt.pipelines.translate import Translator

    _, run, hf_model, tokenizer = m2m100
    translator = Translator(load_trained(run, CPU))
    sources = [source for source, _ in PAIRS]
    target_code = CODES[type(tokenizer).__name__][1]
    code = tokenizer.convert_tokens_to_ids(target_code)
    for source, (best,) in zip(sources, translator.search(sources, beam_size=1)):
        most = limit(translator, len(tokenizer(source).input_ids)) + 1  # generate counts the forced code
        with torch.no_grad():
            ids = hf_model.generate(
                **tokenizer(source, return_tensors="pt"),
                forced_bos_token_id=code,
                num_beams=1,
                do_sample=False,
                max_new_tokens=most,
            )[0, 1:].tolist()
        ours = translator.tgt_tok.id_to_piece(best.tokens) + (["</s>"] if best.ended else [])
        assert ours == tokenizer.convert_ids_to_tokens(ids), source
        assert best.token_logprobs[0] == 0.0  # given, not chosen: generate scores it so too
        assert target_code not in translator.detokenize(best)  # the code leads the tokens, not the text
    heads = nmt.load(run).heads("I see tea.").data
    assert heads["heads"] == 4 and len(heads["cross"]) == 2


def test_nmt_init_imports_an_m2m100_and_fine_tunes_it_with_its_codes(m2m100, tmp_path, monkeypatch):
    """`nmt init PAIRS --from-hf FOLDER --src-lang en --tgt-lang mr`: the child keeps the joint
    vocabulary and both codes; training on the pairs lowers the dev loss; the CTranslate2 package
    of the child translates as PyTorch does (the code given as CTranslate2's target prefix); the
    exports that cannot add a source code say so."""
    import json
    import shutil

    import yaml
    from typer.testing import CliRunner

    from nmt.cli import app

    from .helpers import write_anki

    folder, _, _, their_tokenizer = m2m100
    codes = CODES[type(their_tokenizer).__name__]
    shutil.copytree(folder, tmp_path / folder.name)
    write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    init = ["init", "pairs.txt", "--from-hf", folder.name, "--src-lang", "en", "--tgt-lang", "mr", "--to", "ft.yaml"]
    result = runner.invoke(app, init)
    assert result.exit_code == 0, result.output
    tokenizer = yaml.safe_load((tmp_path / "ft.yaml").read_text(encoding="utf-8"))["tokenizer"]
    assert tokenizer["joint"] and (tokenizer["src_code"], tokenizer["tgt_code"]) == codes
    settings = ["--set", "train.max_minutes=0", "--set", "train.epochs=3", "--set", "train.learning_rate=0.003"]
    for command in (["prepare", "--config", "ft.yaml"], ["train", "--config", "ft.yaml", *settings]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "runs" / "ft" / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 3 and records[-1]["dev_loss"] < records[0]["dev_loss"]
    from nmt.pipelines.translate import Translator

    sources = [source for source, _ in PAIRS]
    assert yaml.safe_load((tmp_path / "ft.yaml").read_text(encoding="utf-8"))["train"]["freeze"] == ["output_bias"]
    exported = runner.invoke(app, ["export", "runs/ft", "ft-hf", "--hf"])  # the bias held: M2M100's class takes it
    assert exported.exit_code == 0, exported.output
    hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "ft-hf").eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "ft-hf")
    child = load_trained(tmp_path / "runs" / "ft", CPU)
    child.config.decode.no_repeat_span = 0  # the recipe's; generate() has no such rule
    translator = Translator(child)
    for source, expected in zip(sources, translator.translate(sources, beam_size=1)):
        inputs = hf_tokenizer([source], return_tensors="pt")
        most = limit(translator, inputs.input_ids.size(1)) + 1  # generate counts the forced code
        with torch.no_grad():
            ids = hf_model.generate(**inputs, num_beams=1, max_new_tokens=most)
        assert hf_tokenizer.batch_decode(ids, skip_special_tokens=True) == [expected], source
    argos = runner.invoke(app, ["export", "runs/ft", "ft.argosmodel", "--argos"])
    assert argos.exit_code == 1 and f"tokenizer.src_code: {codes[0]}" in argos.output
    if importlib.util.find_spec("ctranslate2") is None:
        return
    from nmt.export.package import export_model
    from nmt.runtime.loading import load_packages

    package = export_model(tmp_path / "runs" / "ft", tmp_path / "package", ctranslate2="float32")
    expected = Translator(load_trained(tmp_path / "runs" / "ft", CPU)).translate(sources, beam_size=2)
    assert Translator(load_packages([package], CPU, engine="ctranslate2")).translate(sources, beam_size=2) == expected


def tiny_transformer(root, epochs: int, tokenizer: dict, **model):
    """A tiny Transformer trained here on the synthetic pairs (``model``: its settings beyond the
    tiny ones, ``tokenizer``: its vocabularies): its run."""
    import yaml
    from typer.testing import CliRunner

    from nmt.cli import app

    from .helpers import RNN_WIDTHS, TINY_TRANSFORMER, TRANSFORMER_SCHEDULE, tiny_config, write_anki

    raw = tiny_config(
        root,
        write_anki(root / "pairs.txt", synthetic_pairs()),
        run_dir=str(root / "run"),
        model={**TINY_TRANSFORMER, **model},
        tokenizer=tokenizer,
    )
    raw["train"].update(epochs=epochs, probes=0, **TRANSFORMER_SCHEDULE)
    for width in RNN_WIDTHS:
        del raw["model"][width]
    (root / "config.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    trained = CliRunner().invoke(app, ["train", "--config", str(root / "config.yaml")])
    assert trained.exit_code == 0, trained.output
    return root / "run"


@pytest.fixture(scope="module")
def m2m100_shaped(tmp_path_factory):
    """A tiny Transformer trained here in M2M100's shape (pre-norm, fairseq's positions, one joint
    vocabulary, no output bias), and its export."""
    from nmt.export.huggingface import export_hf

    root = tmp_path_factory.mktemp("m2m100-shaped")
    joint = {"joint": True, "src_vocab_size": 400, "tgt_vocab_size": 400}
    run = tiny_transformer(root, 8, joint, norm="pre", positions="fairseq", output_bias=False)
    return run, export_hf(run, root / "hf")


def test_a_model_in_m2m100s_shape_exports_with_its_pieces_and_log_probabilities(m2m100_shaped):
    """AutoModelForSeq2SeqLM gives an M2M100ForConditionalGeneration, AutoTokenizer a fast
    tokenizer that cuts text into this toolkit's pieces (unusual spaces and characters too), and
    the model's log-probabilities are this toolkit's (ids in fairseq's order: <bos> 0, <pad> 1)."""
    from nmt.export.huggingface import m2m100_order

    run, exported = m2m100_shaped
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    assert type(model).__name__ == "M2M100ForConditionalGeneration"
    assert (model.config.pad_token_id, model.config.decoder_start_token_id) == (1, 0)
    loaded = load_trained(run, CPU)
    order = m2m100_order(loaded.src_tok.vocab_size)
    for source in [source for source, _ in PAIRS] + ["  Ünïcode   spaces ok? ", "xé́ Ａ 42"]:
        ours = [order.index(index) for index in loaded.src_tok.encode([source])[0] + [EOS_ID]]
        assert tokenizer(source).input_ids == ours, source
    for source, target in PAIRS:
        theirs, ours = their_log_probs(model, tokenizer, source, target), our_log_probs(loaded, source, target)
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-5)


def test_transformers_and_ctranslate2s_converter_translate_an_m2m100_export_as_here(m2m100_shaped, tmp_path):
    """generate() on the export gives this toolkit's greedy translations, and
    ct2-transformers-converter's M2M100 loader converts it to a model that gives its pieces."""
    from nmt.pipelines.translate import Translator

    run, exported = m2m100_shaped
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    translator = Translator(load_trained(run, CPU))
    sources = [source for source, _ in PAIRS]
    found = translator.search(sources, beam_size=1)
    for source, (best,) in zip(sources, found):
        inputs = tokenizer([source], return_tensors="pt")
        with torch.no_grad():
            ids = model.generate(**inputs, num_beams=1, max_new_tokens=limit(translator, inputs.input_ids.size(1)))
        assert tokenizer.batch_decode(ids, skip_special_tokens=True) == [translator.detokenize(best)], source
    ctranslate2 = pytest.importorskip("ctranslate2")
    from ctranslate2.converters import TransformersConverter

    TransformersConverter(str(exported)).convert(str(tmp_path / "ct2"))
    converted = ctranslate2.Translator(str(tmp_path / "ct2"))
    for source, (best,) in zip(sources, found):
        pieces = tokenizer.convert_ids_to_tokens(tokenizer(source).input_ids)
        (result,) = converted.translate_batch(
            [pieces], beam_size=1, min_decoding_length=0, max_decoding_length=limit(translator, len(pieces))
        )
        assert result.hypotheses[0] == translator.tgt_tok.id_to_piece(best.tokens), source
    from nmt.export.package import export_model
    from nmt.runtime.loading import load_packages

    package = export_model(run, tmp_path / "package", ctranslate2="float32")  # no output bias: zeros there
    engine = Translator(load_packages([package], CPU, engine="ctranslate2"))
    assert engine.translate(sources, beam_size=2) == translator.translate(sources, beam_size=2)


def test_an_m2m100_export_imports_back_bit_for_bit(m2m100_shaped, tmp_path):
    run, exported = m2m100_shaped
    reimported = tmp_path / "run"
    import_hf(str(exported), reimported, "en", "mr", log=lambda message: None)
    original, back = load_trained(run, CPU), load_trained(reimported, CPU)
    assert not back.config.model.output_bias and back.config.tokenizer.joint
    assert original.src_tok.pieces() == back.src_tok.pieces()
    for name, tensor in original.model.state_dict().items():
        torch.testing.assert_close(back.model.state_dict()[name], tensor, rtol=0, atol=0, msg=name)
    assert original.model.state_dict().keys() == back.model.state_dict().keys()


def test_an_imported_m2m100_exports_back_as_it_was(m2m100):
    """An import from M2M100 or NLLB, exported: the same ids (its <s> where it was, decoding from
    </s> again: the import's <bos> was a copy of it), the same source ids from the export's
    tokenizer, and the original's logits."""
    folder, run, hf_model, tokenizer = m2m100
    from nmt.export.huggingface import export_hf

    exported = export_hf(run, folder.parent / f"hf-{type(tokenizer).__name__}")
    again = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported).eval()
    again_tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    assert again.config.vocab_size == hf_model.config.vocab_size
    assert again.config.decoder_start_token_id == hf_model.config.decoder_start_token_id
    code = tokenizer.convert_tokens_to_ids(CODES[type(tokenizer).__name__][1])
    assert again.generation_config.forced_bos_token_id == code
    for source, target in PAIRS:
        inputs = tokenizer(source, return_tensors="pt")
        assert again_tokenizer(source).input_ids == inputs.input_ids[0].tolist()
        decoder_input = tokenizer(text_target=target, return_tensors="pt").input_ids[:, :-1]
        decoder_input = torch.cat([torch.full((1, 1), hf_model.config.decoder_start_token_id), decoder_input], 1)
        with torch.no_grad():
            before = hf_model(**inputs, decoder_input_ids=decoder_input).logits
            after = again(**inputs, decoder_input_ids=decoder_input).logits
        torch.testing.assert_close(after, before, rtol=1e-6, atol=1e-5)


def test_a_bpe_vocabulary_becomes_a_tokenizer_that_cuts_as_sentencepiece_does(tmp_path):
    """The export's tokenizer.json from a BPE SentencePiece model (the unigram's is tested
    above): the same pieces, byte pieces for a character it never saw included."""
    from nmt.data.tokenizer import Tokenizer, train_sentencepiece
    from nmt.export.huggingface import m2m100_order
    from nmt.export.huggingface_tokenizer import fast_tokenizer, reordered_sentencepiece

    sentences = [text for pair in synthetic_pairs() for text in pair]
    train_sentencepiece(sentences, tmp_path / "bpe.model", 400, "bpe", 0.999)
    tok = Tokenizer(tmp_path / "bpe.model")
    order = m2m100_order(tok.vocab_size)
    model = reordered_sentencepiece(tok.path, order)
    fast = fast_tokenizer(model, [], "", "<eos>")
    for text in [*sentences[:20], "  odd   spacing ", "ẞ 𝄞 unseen"]:
        assert fast.encode(text).ids == [order.index(index) for index in tok.encode([text])[0] + [EOS_ID]], text


def marian_shaped(root, src_vocab_size: int = 300, tgt_vocab_size: int = 300, joint: bool = False, **model):
    """A tiny Transformer trained here in Marian's shape with two vocabularies of the sizes given,
    or one (``joint``) (``model``: more of its settings)."""
    vocabularies = {"src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size, "joint": joint}
    return tiny_transformer(root, 6, vocabularies, norm="post", positions="marian", **model)


@pytest.mark.parametrize("sizes", [(300, 340), (340, 300)], ids=["smaller-source", "smaller-target"])
def test_an_export_of_two_vocabularies_of_different_sizes_has_one_pad_and_imports_back(tmp_path, sizes):
    """Separate vocabularies of different sizes: the smaller is filled up to the larger before its
    <pad>, so <pad> is the last id of both (MarianMTModel pads both embeddings with it,
    MarianTokenizer reads it from the source's): the model loads, a padded batch decodes to this
    toolkit's greedy translations with no <pad> left in them, no filler is ever written, and an
    import of the export leaves the fillers out — the weights it had, row for row."""
    from nmt.export.huggingface import export_hf
    from nmt.pipelines.translate import Translator

    run = marian_shaped(tmp_path, *sizes)
    loaded = load_trained(run, CPU)
    assert loaded.src_tok.vocab_size != loaded.tgt_tok.vocab_size
    exported = export_hf(run, tmp_path / "hf")
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    size = max(loaded.src_tok.vocab_size, loaded.tgt_tok.vocab_size)
    assert model.config.pad_token_id == tokenizer.pad_token_id == size - 1
    assert tokenizer.get_vocab()["<pad>"] == tokenizer.get_src_vocab()["<pad>"] == size - 1
    sources = [source for source, _ in synthetic_pairs()[:12]]
    inputs = tokenizer(sources, return_tensors="pt", padding=True)
    most = limit(Translator(loaded), inputs.input_ids.size(1))
    decode = loaded.config.decode
    decode.no_repeat_span, decode.max_len_ratio, decode.max_len_offset = 0, 0.0, most  # generate()'s rules
    ours = Translator(loaded).translate(sources, beam_size=1)
    with torch.no_grad():
        ids = model.generate(**inputs, num_beams=1, max_new_tokens=most)
    assert tokenizer.batch_decode(ids, skip_special_tokens=True) == ours
    import json

    smaller = "vocab.json" if loaded.src_tok.vocab_size < size else "target_vocab.json"
    vocab = json.loads((exported / smaller).read_text(encoding="utf-8"))
    fillers = {index for piece, index in vocab.items() if piece.startswith("<filler:")}
    assert len(fillers) == abs(loaded.src_tok.vocab_size - loaded.tgt_tok.vocab_size) and len(vocab) == size
    assert not set(ids.flatten().tolist()) & fillers or smaller == "vocab.json"
    reimported = tmp_path / "reimported"
    import_hf(str(exported), reimported, "en", "mr", log=lambda message: None)
    back = load_trained(reimported, CPU)
    assert (back.src_tok.pieces(), back.tgt_tok.pieces()) == (loaded.src_tok.pieces(), loaded.tgt_tok.pieces())
    original, again = loaded.model.state_dict(), back.model.state_dict()
    for name, tensor in original.items():
        torch.testing.assert_close(again[name], tensor, rtol=0, atol=0, msg=name)


def test_inseq_reads_an_exports_cross_attention_which_is_this_toolkits(tmp_path):
    """Inseq's attention attribution on an export (loaded by its folder, as its users load OPUS-MT)
    holds for every target token each layer's and head's cross-attention: this toolkit's, head for
    head. One vocabulary and unscaled embeddings (model.scale_embeddings: false): Inseq 0.7 embeds
    the target with the encoder's table, and multiplies the embeddings it feeds by the scale, which
    transformers 5's Marian decoder multiplies by again — on two vocabularies or a scaled model
    (every OPUS-MT) its decoder's side is not the model's (docs/tutorials/transformers.md)."""
    inseq = pytest.importorskip("inseq")
    from nmt.export.huggingface import export_hf

    run = marian_shaped(tmp_path, 400, 400, joint=True, scale_embeddings=False)
    exported = export_hf(run, tmp_path / "hf")
    source, target = PAIRS[0]
    model = inseq.load_model(str(exported), "attention")
    found = model.attribute(source, generated_texts=target, show_progress=False).sequence_attributions[0]
    theirs = found.source_attributions  # (source tokens, target tokens, layers, heads)
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    assert [token.token for token in found.source] == tokenizer.convert_ids_to_tokens(tokenizer(source).input_ids)
    previous = [token.id for token in found.target[:-1]]  # the decoder's inputs
    assert tokenizer.convert_ids_to_tokens(previous[1:]) == tokenizer.tokenize(target)
    assert theirs.shape == (len(found.source), len(previous), 2, 4)
    assert_cross_attention_is_ours(run, [token.id for token in found.source], previous, theirs.permute(2, 3, 1, 0))


@pytest.mark.parametrize("tied", [True, False], ids=["tied-output", "untied-output"])
def test_an_export_of_one_vocabulary_loads_every_weight_it_has(tmp_path, tied):
    """One joint vocabulary: MarianMTModel's model.shared, and each stack's embedding table under
    its own name too — transformers ties those to model.shared only where the output layer is tied
    as well, and would start an untied model's from random numbers (it did: 'MISSING ... newly
    initialized'). Nothing missing, and transformers' log-probabilities are this toolkit's."""
    from nmt.export.huggingface import export_hf

    run = marian_shaped(tmp_path, 400, 400, joint=True, tie_embeddings=tied)
    exported = export_hf(run, tmp_path / "hf")
    model, info = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported, output_loading_info=True)
    assert info["missing_keys"] == set() or not info["missing_keys"], info
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    loaded = load_trained(run, CPU)
    for source, target in PAIRS:
        ours = our_log_probs(loaded, source, target)
        torch.testing.assert_close(their_log_probs(model.eval(), tokenizer, source, target), ours, rtol=1e-6, atol=1e-5)
