"""CTranslate2 export (nmt export --ctranslate2) and engine (--engine ctranslate2): each
Transformer variant against PyTorch's search, through the CLI and the JSON API, int8, and the
refusals a user can meet."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.schema import DecodeConfig
from nmt.core.errors import NmtError
from nmt.decoding.rules import repeats_a_span
from nmt.decoding.search import search_sentences
from nmt.export.ctranslate2_model import export_ctranslate2
from nmt.pipelines.translate import Translator
from nmt.runtime.ctranslate2_engine import CTranslate2Model
from nmt.runtime.loading import load_packages

from .helpers import (
    TINY_TRANSFORMER,
    local_client,
    served_beside_torch,
    small_model,
    synthetic_pairs,
    tiny_config,
    write_anki,
)

pytest.importorskip("ctranslate2")
runner = CliRunner()
VOCAB = 24


class Pieces:
    """A vocabulary of VOCAB made-up pieces (the specials first, as SentencePiece's are)."""

    vocab_size = VOCAB
    SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")
    code_ids = ()  # no language code (tokenizer.tgt_code)

    def id_to_piece(self, ids: list[int]) -> list[str]:
        return [self.SPECIALS[i] if i < 4 else f"▁w{i}" for i in ids]

    def piece_ids(self, pieces: list[str]) -> list[int]:
        return [self.SPECIALS.index(p) if p in self.SPECIALS else int(p[2:]) for p in pieces]

    def pieces(self) -> list[str]:
        return self.id_to_piece(list(range(VOCAB)))


def random_transformer(seed: int = 1, **overrides):
    """A Transformer with weights far from their initialisation (sharp, distinct predictions)."""
    from nmt.model.transformer.model import Transformer

    from .test_transformer import transformer_config

    torch.manual_seed(seed)
    model = Transformer(transformer_config(**overrides), VOCAB, VOCAB)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.3 if parameter.dim() > 1 else 0.1)
        # as in a trained model, <pad> and <bos> get no probability (CTranslate2 suppresses them
        # and renormalises; this toolkit's search masks them without renormalising)
        model.decoder.output.bias[:3] = -30.0
    return model.eval()


SENTENCES = [[5, 6, 7], [8, 9, 10, 11, 12], [13], [], [14, 15, 16, 17, 18, 19, 20, 21]]
VARIANTS = [
    dict(),  # sinusoidal positions, untied output
    dict(tie_embeddings=True),
    dict(positions="learned"),
    dict(positions="learned", tie_embeddings=True, encoder_layers=1, decoder_layers=3),
    # the shapes of the published models: Marian's (OPUS-MT) and fairseq's M2M100/NLLB
    dict(norm="post", activation="swish", positions="marian", tie_embeddings=True),
    dict(positions="fairseq", activation="gelu", scale_embeddings=False),
]


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_each_variant_searches_as_pytorch_does(overrides, tmp_path):
    model = random_transformer(**overrides)
    export_ctranslate2(model, Pieces(), Pieces(), tmp_path / "ct2", "float32")
    engine = CTranslate2Model(tmp_path / "ct2", SimpleNamespace(model=model.config), (Pieces(), Pieces()))
    for beam, n_best in [(1, 1), (4, 3)]:
        decode = DecodeConfig(beam_size=beam, max_len_ratio=1.0, max_len_offset=4)
        want = search_sentences(model, SENTENCES, decode, torch.device("cpu"), n_best, with_attention=True)
        got = search_sentences(engine, SENTENCES, decode, torch.device("cpu"), n_best, with_attention=True)
        for expected, found in zip(want, got):
            # the best alike; the rest of an n-best list is each beam search's own bookkeeping
            # (CTranslate2 keeps a hypothesis that ends early only while it is among the beam's best)
            assert len(found) == len(expected)
            h, e = found[0], expected[0]
            assert (h.tokens, h.ended) == (e.tokens, e.ended)
            assert h.score == pytest.approx(e.score, abs=1e-3)
            assert h.token_logprobs == pytest.approx(e.token_logprobs, abs=1e-3)
            if e.attention is not None:  # the last layer's heads averaged, one row per step
                assert torch.allclose(h.attention, e.attention, atol=1e-4)
            assert [x.score for x in found] == sorted((x.score for x in found), reverse=True)


def test_the_no_repeat_rule_is_kept_by_searching_the_repeating_sentences_again_on_pytorch(tmp_path):
    """CTranslate2 has no rule against a span repeated back to back (before: decode.no_repeat_span
    was refused, and every shipped recipe sets it): a sentence whose CTranslate2 output repeats is
    searched again by the PyTorch model, so each output is the rule's, the others CTranslate2's."""
    model = random_transformer(seed=1, positions="learned")
    with torch.no_grad():
        model.decoder.output.bias[3] -= 0.5  # <eos> later: long outputs, where a random model stutters
    export_ctranslate2(model, Pieces(), Pieces(), tmp_path / "ct2", "float32")
    sentences = [[4 + (i * 7 + j) % 20 for j in range(1 + i % 6)] for i in range(24)]
    for beam, n_best, span in [(1, 1, 1), (4, 2, 2)]:
        free = DecodeConfig(beam_size=beam, max_len_ratio=2.0, max_len_offset=4)
        ruled = dataclasses.replace(free, no_repeat_span=span)
        engine = CTranslate2Model(
            tmp_path / "ct2", SimpleNamespace(model=model.config), (Pieces(), Pieces()), pytorch=lambda: model
        )
        unruled = search_sentences(engine, sentences, free, torch.device("cpu"), n_best)
        stutter = [i for i, found in enumerate(unruled) if any(repeats_a_span(h.tokens, span) for h in found)]
        assert stutter and (beam > 1 or len(stutter) < len(sentences))  # greedy: some need the rule, some not
        got = search_sentences(engine, sentences, ruled, torch.device("cpu"), n_best)
        want = search_sentences(model, sentences, ruled, torch.device("cpu"), n_best)
        assert engine.searched_again == len(stutter)
        for i, (found, expected, free_found) in enumerate(zip(got, want, unruled)):
            assert not any(repeats_a_span(h.tokens, span) for h in found)
            source = expected if i in stutter else free_found
            assert [(h.tokens, h.ended) for h in found] == [(h.tokens, h.ended) for h in source]
            assert [h.score for h in found] == pytest.approx([h.score for h in source], abs=1e-3)
    weightless = CTranslate2Model(tmp_path / "ct2", SimpleNamespace(model=model.config), (Pieces(), Pieces()))
    with pytest.raises(NmtError, match="no_repeat_span=0, or --engine torch"):
        search_sentences(weightless, sentences, ruled, torch.device("cpu"))


def test_an_int8_model_is_smaller_and_translates_close_to_pytorch(tmp_path):
    model = random_transformer(width=64, heads=4)
    export_ctranslate2(model, Pieces(), Pieces(), tmp_path / "f32", "float32")
    export_ctranslate2(model, Pieces(), Pieces(), tmp_path / "int8", "int8")
    sizes = {name: (tmp_path / name / "model.bin").stat().st_size for name in ("f32", "int8")}
    assert sizes["int8"] < 0.5 * sizes["f32"]
    engine = CTranslate2Model(tmp_path / "int8", SimpleNamespace(model=model.config), (Pieces(), Pieces()))
    decode = DecodeConfig(beam_size=2, max_len_ratio=1.0, max_len_offset=4)
    found = search_sentences(engine, SENTENCES, decode, torch.device("cpu"))
    assert all(hypotheses[0].tokens or not sentence for hypotheses, sentence in zip(found, SENTENCES))


def test_a_model_it_cannot_represent_or_a_wrong_mapping_is_refused(tmp_path, monkeypatch):
    with pytest.raises(NmtError, match=r"cannot run on CTranslate2.*--onnx"):
        export_ctranslate2(small_model(vocab=VOCAB).eval(), Pieces(), Pieces(), tmp_path / "rnn", "float32")
    with pytest.raises(NmtError, match="--quantization 'int4': one of int8"):
        export_ctranslate2(random_transformer(), Pieces(), Pieces(), tmp_path / "q", "int4")
    from nmt.model.transformer import ctranslate2_spec

    def unplaced(embedding_spec, positions_spec, embedder):  # a mapping that forgets the positions
        original(embedding_spec, positions_spec, embedder)
        positions_spec.encodings = positions_spec.encodings * 0

    original = ctranslate2_spec._embeddings
    monkeypatch.setattr(ctranslate2_spec, "_embeddings", unplaced)
    with pytest.raises(NmtError, match="differs from PyTorch"):
        export_ctranslate2(random_transformer(), Pieces(), Pieces(), tmp_path / "bad", "float32")


def test_without_ctranslate2_export_and_the_engine_say_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if the extra were not installed
    with pytest.raises(NmtError, match=r"pip install ctranslate2 .*\[ctranslate2\]"):
        export_ctranslate2(random_transformer(), Pieces(), Pieces(), tmp_path / "ct2", "int8")
    assert not (tmp_path / "ct2").exists()


# ---- through the CLI and the API ----


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """A tiny trained Transformer, exported with its CTranslate2 model (float32), and without."""
    tmp_path = tmp_path_factory.mktemp("ct2-run")
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    config = tmp_path / "tiny.yaml"
    raw = tiny_config(tmp_path, data, model=TINY_TRANSFORMER, train={"epochs": 12, "learning_rate": 0.003})
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert runner.invoke(app, ["train", "--config", str(config)]).exit_code == 0
    for name, options in [("pkg", ["--ctranslate2", "--quantization", "float32"]), ("plain", [])]:
        result = runner.invoke(app, ["export", raw["run_dir"], str(tmp_path / name), *options])
        assert result.exit_code == 0, result.output
    return tmp_path / "pkg"


TEXT = "I see apples.\nwe like tea.\n\nthey eat rice.\nshe reads books.\n"


def test_the_manifest_says_how_the_ctranslate2_model_was_made(package):
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["ctranslate2"]["quantization"] == "float32" and manifest["ctranslate2"]["folder"] == "ctranslate2"
    assert (package / "ctranslate2" / "model.bin").is_file()


@pytest.mark.parametrize("beam", ["1", "3"])
def test_translate_and_evaluate_on_ctranslate2_give_pytorchs_results(package, beam):
    outputs = {
        engine: runner.invoke(
            app, ["translate", "--model", str(package), "--engine", engine, "--beam-size", beam], input=TEXT
        )
        for engine in ("torch", "ctranslate2")
    }
    assert all(result.exit_code == 0 for result in outputs.values()), outputs["ctranslate2"].output
    assert outputs["ctranslate2"].output == outputs["torch"].output
    assert len(outputs["ctranslate2"].output.split("\n")) == len(TEXT.split("\n"))
    sources = package.parent / "src.txt"
    references = package.parent / "ref.txt"
    sources.write_text("I see apples.\nwe like tea.\n", encoding="utf-8")
    references.write_text("x\ny\n", encoding="utf-8")
    reports = {}
    for engine in ("torch", "ctranslate2"):
        arguments = ["evaluate", "--model", str(package), "--engine", engine, "--src", str(sources)]
        result = runner.invoke(app, [*arguments, "--ref", str(references), "--beam-size", beam])
        assert result.exit_code == 0, result.output
        reports[engine] = result.output
    assert reports["ctranslate2"].split("BLEU")[1][:12] == reports["torch"].split("BLEU")[1][:12]


def test_the_json_api_and_the_page_on_ctranslate2(package):
    models = served_beside_torch(package, "ctranslate2", score_abs=1e-3, attention_atol=1e-4)
    assert models["ctranslate2"]["engine"] == "ctranslate2"


def test_what_the_engine_does_not_do_is_refused_with_what_to_do(package):
    plain = package.parent / "plain"
    result = runner.invoke(app, ["translate", "--model", str(plain), "--engine", "ctranslate2"], input="we like tea.\n")
    assert result.exit_code == 1 and "--ctranslate2" in result.output and "Traceback" not in result.output
    for setting, message in [
        ("decode.mbr=2", "decode.mbr"),
        ("decode.length_form=gnmt", "length^α"),
    ]:
        result = runner.invoke(
            app, ["translate", "--model", str(package), "--engine", "ctranslate2", "--set", setting], input="we\n"
        )
        assert result.exit_code == 1 and message in result.output, result.output
    twice = ["--model", str(package), "--model", str(package)]
    result = runner.invoke(app, ["translate", *twice, "--engine", "ctranslate2"])
    assert result.exit_code == 1 and "one package" in result.output
    translator = Translator(load_packages([package], torch.device("cpu"), "ctranslate2"))
    with pytest.raises(NmtError, match="searches whole sentences"):
        translator.score(["we like tea."], ["x"])


ARGOS_SCRIPT = """
import sys
import argostranslate.package, argostranslate.translate
argostranslate.package.install_from_path(sys.argv[1])
installed = argostranslate.package.get_installed_packages()
print(installed[0].from_code, installed[0].to_code)
print(argostranslate.translate.translate(sys.argv[2], "en", "mr"))
"""


def argos_translate(archive: Path, text: str, home: Path) -> subprocess.CompletedProcess:
    """argostranslate installing ``archive`` into an empty ``home`` of its own and translating
    ``text`` with it, offline (the package's spaCy sentencizer splits the sentences)."""
    environment = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "ARGOS_CHUNK_TYPE": "SPACY",
    }
    return subprocess.run(
        [sys.executable, "-c", ARGOS_SCRIPT, str(archive), text],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def test_an_argos_package_installs_and_translates_offline_with_argostranslates_own_api(package, tmp_path):
    """argostranslate (from PyPI) installs the package from its file and translates with it, with
    no network: the package's own spaCy sentencizer splits the sentences (ARGOS_CHUNK_TYPE=SPACY)."""
    pytest.importorskip("argostranslate")
    pytest.importorskip("spacy")
    run_dir = package.parent / "run"
    options = ["--argos", "--quantization", "float32"]
    result = runner.invoke(app, ["export", str(run_dir), str(tmp_path / "en_mr"), *options])
    assert result.exit_code == 0, result.output
    archive = tmp_path / "en_mr.argosmodel"
    with zipfile.ZipFile(archive) as opened:
        names = set(opened.namelist())
        metadata = json.loads(opened.read("translate-en_mr-1_0/metadata.json"))
    assert {"translate-en_mr-1_0/model/model.bin", "translate-en_mr-1_0/sentencepiece.model"} <= names
    assert (metadata["from_code"], metadata["to_code"], metadata["type"]) == ("en", "mr", "translate")
    argos = argos_translate(archive, "I see apples. we like tea.", tmp_path / "home")
    assert argos.returncode == 0, argos.stderr
    installed, translation = argos.stdout.strip().split("\n")[-2:]
    assert installed == "en mr"
    # Argos searches at beam 4 with a length penalty of 0.2: this toolkit's translation with those settings
    ours = runner.invoke(
        app,
        ["translate", "--model", str(package), "--beam-size", "4", "--set", "decode.length_penalty=0.2"],
        input="I see apples.\nwe like tea.\n",
    )
    assert translation == " ".join(ours.output.split("\n")[:2])


def test_one_sentencepiece_model_segments_the_source_and_spells_the_target_as_their_own(package, tmp_path):
    import sentencepiece

    from nmt.export.argos import one_sentencepiece

    source, target = package / "spm.en.model", package / "spm.mr.model"
    merged_file = tmp_path / "merged.model"
    merged_file.write_bytes(one_sentencepiece(source, target))
    merged, src, tgt = (sentencepiece.SentencePieceProcessor(model_file=str(f)) for f in (merged_file, source, target))
    pairs = synthetic_pairs()
    for english, marathi in pairs:
        assert merged.encode(english, out_type=str) == src.encode(english, out_type=str)
        pieces = tgt.encode(marathi, out_type=str)
        assert merged.decode_pieces(pieces) == tgt.decode_pieces(pieces) == marathi
    assert src.get_piece_size() < merged.get_piece_size() <= src.get_piece_size() + tgt.get_piece_size()


def test_the_engine_runs_at_the_thread_count_that_decodes_a_probe_fastest(tmp_path, monkeypatch):
    """1 thread against PyTorch's count, each timed on a probe (a fake clock: the count that is
    slower here takes 5 units a pass, the other 1); a count of 1 is not measured."""
    from nmt.runtime import ctranslate2_engine

    clock = [0.0]
    monkeypatch.setattr(ctranslate2_engine.time, "perf_counter", lambda: clock[0])

    class Translator:
        def __init__(self, folder, device, intra_threads, inter_threads):
            self.threads = intra_threads

        def translate_batch(self, probe, **options):
            clock[0] += {1: 5.0, 2: 1.0, 4: 9.0}[self.threads]

    fake = SimpleNamespace(Translator=Translator)
    assert ctranslate2_engine.fastest_translator(fake, tmp_path, Pieces(), 2)[0] == 2
    assert ctranslate2_engine.fastest_translator(fake, tmp_path, Pieces(), 4)[0] == 1
    before = clock[0]
    assert ctranslate2_engine.fastest_translator(fake, tmp_path, Pieces(), 1)[0] == 1 and clock[0] == before


# ---- a crafted CTranslate2 folder never reaches the C++ loader (docs/explanation/security.md) ----


def _rehash(package: Path) -> None:
    """The manifest's hashes made to match the files as they are now (a crafter who edits both)."""
    from nmt.core.fileio import sha256_file

    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest["files_sha256"] = {
        name: sha256_file(package / name) for name in manifest["files_sha256"] if (package / name).is_file()
    }
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def _set_scalar(model_file: Path, name: str, value: int) -> None:
    """Two bytes of model.bin: an int16 setting (name, rank 0, type, size, then its value)."""
    data = bytearray(model_file.read_bytes())
    at = data.index(name.encode() + b"\0") + len(name) + 1 + 1 + 1 + 4
    data[at : at + 2] = int(value).to_bytes(2, "little", signed=True)
    model_file.write_bytes(bytes(data))


def _translate_in_a_process(package: Path) -> subprocess.CompletedProcess:
    """In a process of its own: on the code before this check, CTranslate2 aborted the process."""
    return subprocess.run(
        [sys.executable, "-m", "nmt", "translate", "--model", str(package), "--engine", "ctranslate2", "--text", "we"],
        capture_output=True,
        text=True,
        timeout=300,
    )


CRAFTS = {
    "alignment layer 99": (lambda p: _set_scalar(p / "ctranslate2/model.bin", "decoder/alignment_layer", 99), True),
    "num_heads 0": (lambda p: _set_scalar(p / "ctranslate2/model.bin", "encoder/num_heads", 0), True),
    "truncated": (
        lambda p: (p / "ctranslate2/model.bin").write_bytes((p / "ctranslate2/model.bin").read_bytes()[:999]),
        True,
    ),
    "random bytes": (lambda p: (p / "ctranslate2/model.bin").write_bytes(os.urandom(4096)), True),
    "bad config.json": (lambda p: (p / "ctranslate2/config.json").write_text("{not json", encoding="utf-8"), True),
    "changed eos_token": (
        lambda p: (p / "ctranslate2/config.json").write_text(
            (p / "ctranslate2/config.json").read_text(encoding="utf-8").replace('"<eos>"', '"<unk>"'), encoding="utf-8"
        ),
        True,
    ),
    "missing vocabulary": (lambda p: (p / "ctranslate2/target_vocabulary.json").unlink(), True),
    "an extra file": (lambda p: (p / "ctranslate2/extra.bin").write_bytes(b"x"), False),
}


@pytest.mark.parametrize("rehashed", [False, True], ids=["edited", "edited-and-rehashed"])
@pytest.mark.parametrize("craft", list(CRAFTS))
def test_a_crafted_ctranslate2_folder_is_refused_naming_the_file(package, tmp_path, craft, rehashed):
    crafted = tmp_path / "crafted"
    shutil.copytree(package, crafted)
    edit, in_manifest = CRAFTS[craft]
    edit(crafted)
    if rehashed and in_manifest:
        _rehash(crafted)
    with pytest.raises(NmtError, match=r"ctranslate2[/\\]"):
        load_packages([crafted], torch.device("cpu"), "ctranslate2")


def test_the_crafted_bytes_that_aborted_the_process_end_it_with_a_message(package, tmp_path):
    for name, value in [("decoder/alignment_layer", 99), ("encoder/num_heads", 0)]:
        crafted = tmp_path / name.replace("/", "-")
        shutil.copytree(package, crafted)
        _set_scalar(crafted / "ctranslate2/model.bin", name, value)
        _rehash(crafted)
        result = _translate_in_a_process(crafted)
        assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
        assert name in result.stderr and "Traceback" not in result.stderr


def test_a_swapped_weight_shape_is_refused_even_with_the_manifest_rehashed(package, tmp_path):
    crafted = tmp_path / "swapped"
    shutil.copytree(package, crafted)
    model_file = crafted / "ctranslate2/model.bin"
    data = bytearray(model_file.read_bytes())
    name = b"decoder/layer_0/ffn/linear_0/weight\0"  # (ff, width) -> (width, ff): the same bytes
    at = data.index(name) + len(name) + 1
    rows, columns = data[at : at + 4], data[at + 4 : at + 8]
    data[at : at + 8] = columns + rows
    model_file.write_bytes(bytes(data))
    _rehash(crafted)
    with pytest.raises(NmtError, match=r"linear_0/weight has shape"):
        load_packages([crafted], torch.device("cpu"), "ctranslate2")


@pytest.mark.parametrize("link", ["folder", "model.bin"])
def test_a_linked_ctranslate2_folder_or_file_is_refused(package, tmp_path, link):
    crafted = tmp_path / "linked"
    shutil.copytree(package, crafted)
    outside = tmp_path / "outside"
    shutil.copytree(package / "ctranslate2", outside)
    if link == "folder":
        shutil.rmtree(crafted / "ctranslate2")
        (crafted / "ctranslate2").symlink_to(outside)
    else:
        (crafted / "ctranslate2/model.bin").unlink()
        (crafted / "ctranslate2/model.bin").symlink_to(outside / "model.bin")
    with pytest.raises(NmtError, match="symbolic link"):
        load_packages([crafted], torch.device("cpu"), "ctranslate2")


def test_a_package_exported_before_hashes_runs_on_torch_and_its_ctranslate2_folder_is_refused(package, tmp_path):
    legacy = tmp_path / "legacy"
    shutil.copytree(package, legacy)
    manifest = json.loads((legacy / "manifest.json").read_text(encoding="utf-8"))
    del manifest["files_sha256"]
    (legacy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert load_packages([legacy], torch.device("cpu"), "torch").parameters > 0
    with pytest.raises(NmtError, match="export the model again"):
        load_packages([legacy], torch.device("cpu"), "ctranslate2")


def test_the_weights_settings_edited_consistently_are_refused_by_their_hash(package, tmp_path):
    """Editing heads in config.yaml and in the safetensors header alike (or deleting the header's
    record) loaded and translated garbage: the manifest's hash of the weights refuses both."""
    from safetensors.torch import load_file, save_file

    for how in ("heads in both", "metadata deleted"):
        crafted = tmp_path / how.replace(" ", "-")
        shutil.copytree(package, crafted)
        weights = load_file(str(crafted / "model.safetensors"))
        from safetensors import safe_open

        with safe_open(str(crafted / "model.safetensors"), framework="pt") as handle:
            metadata = dict(handle.metadata() or {})
        if how == "heads in both":
            config = yaml.safe_load((crafted / "config.yaml").read_text(encoding="utf-8"))
            config["model"]["heads"] = 2
            (crafted / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
            metadata = {k: v.replace('"heads": 4', '"heads": 2') for k, v in metadata.items()}
            save_file(weights, str(crafted / "model.safetensors"), metadata=metadata)
        else:
            save_file(weights, str(crafted / "model.safetensors"))
        with pytest.raises(NmtError, match=r"model.safetensors is not the file `nmt export` wrote"):
            load_packages([crafted], torch.device("cpu"), "torch")


def test_evaluate_on_a_package_alone_scores_its_test_split_with_all_references(package):
    """docs/portable.md's `nmt evaluate --model pkg --engine ctranslate2` (it asked for --src/--ref
    before, and those gave one reference a line): the package carries its test split's references."""
    carried = (package / "test.multi.tsv").read_text(encoding="utf-8").splitlines()
    assert carried and max(line.count("\t") for line in carried) >= 2  # a source with several references
    reports = {}
    for engine in ("torch", "ctranslate2"):
        result = runner.invoke(app, ["evaluate", "--model", str(package), "--engine", engine, "--json"])
        assert result.exit_code == 0, result.output
        reports[engine] = json.loads(result.stdout)
    assert reports["torch"]["num_sentences"] == len(carried) and reports["torch"]["num_references"] >= 2
    assert reports["ctranslate2"]["bleu"] == pytest.approx(reports["torch"]["bleu"])


def test_what_feeds_the_decoder_a_given_target_is_a_422_on_ctranslate2(package):
    """/api/lab/tree (listed by /api/models), /api/alternatives and prefixes answered 500."""
    from nmt.serve.app import build_app
    from nmt.serve.requests import Limits

    translator = Translator(load_packages([package], torch.device("cpu"), "ctranslate2"))
    with local_client(build_app({"ct2": translator}, Limits())) as client:
        assert client.get("/api/models").json()["models"][0]["lab_views"] == []
        text = {"text": "we like tea.", "model": "ct2"}
        for path, body, field in [
            ("/api/lab/tree", text, "model"),
            ("/api/alternatives", {**text, "prefix": ""}, "model"),
            ("/api/translate", {**text, "prefix": "we"}, "prefix"),
        ]:
            answer = client.post(path, json=body)
            assert answer.status_code == 422 and answer.json()["field"] == field, (path, answer.text)
            assert "--engine torch" in answer.json()["error"]
        assert client.post("/api/translate", json=text).status_code == 200


def test_a_quantization_without_a_ctranslate2_model_is_refused_not_ignored(package, tmp_path):
    result = runner.invoke(app, ["export", str(package.parent / "run"), str(tmp_path / "q"), "--quantization", "int16"])
    assert result.exit_code == 1 and "add --ctranslate2" in result.output and not (tmp_path / "q").exists()
