"""Builders shared by tests: a synthetic English->Devanagari corpus, configs pointing at it,
small models and source batches, and the scripts of scripts/ as modules."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

from nmt.config.checks import check_model_combination
from nmt.config.parsing import family_settings
from nmt.config.schema import Config, DecodeConfig, ModelConfig, TrainConfig
from nmt.data.batching import source_tensor
from nmt.data.tokenizer import Tokenizer, train_sentencepiece
from nmt.model.base import build_model
from nmt.model.rnn.model import Seq2Seq
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import LoadedModel

SUBJECTS = {"I": "मी", "you": "तू", "we": "आम्ही", "they": "ते", "she": "ती"}
VERBS = {"see": "पाहतो", "want": "हवे", "like": "आवडते", "eat": "खातो"}
OBJECTS = {"apples": "सफरचंद", "water": "पाणी", "books": "पुस्तके", "tea": "चहा", "rice": "भात", "milk": "दूध"}


def wait_until(condition: Callable[[], object], seconds: float = 120.0, what: str = "the condition") -> None:
    """Return once ``condition()`` is true, polling. ``seconds`` guards against a hang (a failure
    named by ``what``); it is never a guess at how long something takes on a loaded machine."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def synthetic_pairs(seed: int = 0) -> list[tuple[str, str]]:
    """English 'S V O.' -> Devanagari 'S O V.' for every combination; some get a second translation."""
    rng = random.Random(seed)
    pairs = []
    for (s, ts), (v, tv), (o, to) in itertools.product(SUBJECTS.items(), VERBS.items(), OBJECTS.items()):
        pairs.append((f"{s} {v} {o}.", f"{ts} {to} {tv}."))
        if rng.random() < 0.3:
            pairs.append((f"{s} {v} {o}.", f"{ts} {to} {tv}!"))
    return pairs


def write_anki(path: Path, pairs: list[tuple[str, str]], attribution: bool = False) -> Path:
    lines = [
        f"{s}\t{t}" + (f"\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i}" if attribution else "")
        for i, (s, t) in enumerate(pairs)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tiny_config(tmp_path: Path, data_path: Path, **sections) -> dict:
    """A raw config dict for a seconds-long run on ``data_path``; ``sections`` update it."""
    config = {
        "run_dir": str(tmp_path / "run"),
        "data": {"path": str(data_path), "dev_size": 0.1, "test_size": 0.1},
        "tokenizer": {"src_vocab_size": 300, "tgt_vocab_size": 300},
        "model": {
            "embed_dim": 32,
            "encoder_hidden": 32,
            "decoder_hidden": 32,
            "attention_dim": 32,
            "output_dim": 32,
            "dropout": 0.0,
        },
        "train": {"epochs": 2, "batch_size": 16, "threads": 1, "seed": 7},
        "decode": {"beam_size": 2},
    }
    for section, values in sections.items():
        if isinstance(values, dict):
            config.setdefault(section, {}).update(values)
        else:
            config[section] = values
    return config


RNN_WIDTHS = ("encoder_hidden", "decoder_hidden", "attention_dim", "output_dim")
# a tiny Transformer for write_run_config's model, and the schedule it trains with (it does not
# train without a warm-up)
TINY_TRANSFORMER = dict(arch="transformer", embed_dim=32, heads=4, ff_dim=64, encoder_layers=2, decoder_layers=2)
TRANSFORMER_SCHEDULE = dict(lr_schedule="inverse_sqrt", lr_warmup=50, learning_rate=0.003)


def write_run_config(tmp_path: Path, name: str, train: dict, model: dict) -> Path:
    """``tmp_path/<name>.yaml``: a tiny config on the synthetic pairs, its run in ``tmp_path/<name>``
    and its prepared data shared by every run of the test; ``train`` and ``model`` update it."""
    data = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    raw = tiny_config(
        tmp_path,
        data,
        run_dir=str(tmp_path / name),
        data={"prepared_dir": str(tmp_path / "prepared")},
        train=train,
        model=model,
    )
    if raw["model"].get("arch") == "transformer":
        for width in RNN_WIDTHS:
            del raw["model"][width]  # a Transformer's config leaves the RNN's widths out
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def model_settings(**keys) -> ModelConfig:
    """Model settings as a config's ``model`` section gives them: the settings class of the family
    ``arch`` names (default rnn), with ``keys``."""
    return family_settings(keys.get("arch", ModelConfig.arch))(**keys)


def model_config(dim: int = 16, dropout: float = 0.0, **overrides) -> ModelConfig:
    """A small, valid model config of width ``dim`` (overrides: any ModelConfig field)."""
    sizes = dict(
        embed_dim=dim, encoder_hidden=dim, decoder_hidden=dim, attention_dim=dim, output_dim=dim, dropout=dropout
    )
    if overrides.get("arch", "rnn") != "rnn":  # the widths of the RNN's
        sizes = dict(embed_dim=dim, dropout=dropout)
    config = model_settings(**{**sizes, **overrides})
    check_model_combination(config)
    return config


def small_model(vocab: int = 20, dim: int = 16, dropout: float = 0.0, seed: int = 0, **overrides) -> Seq2Seq:
    torch.manual_seed(seed)
    model = Seq2Seq(model_config(dim, dropout, **overrides), vocab, vocab)
    if model.decoder.lexical is not None:  # its output starts at zero: make its term count
        torch.nn.init.normal_(model.decoder.lexical.output.weight, std=0.5)
    return model


def random_sources(n: int, vocab: int = 20, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random sentences of 1-7 tokens (+ <eos>): padded ids (n, S) and lengths (n,)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 8, (n,), generator=gen).tolist()
    ids = [torch.randint(4, vocab, (length,), generator=gen).tolist() for length in lengths]
    return source_tensor(ids)


# Every attention mechanism and window, as ModelConfig overrides.
VARIANT_CONFIGS = [
    dict(attention="bahdanau"),
    dict(attention="luong-dot", decoder_hidden=32),
    dict(attention="luong-general"),
    dict(attention="luong-concat"),
    dict(attention="luong-general", input_feeding=True),
    dict(attention="luong-general", attention_window="local-m", window_width=2),
    dict(attention="luong-dot", decoder_hidden=32, attention_window="local-p", window_width=2),
    dict(attention="bahdanau", attention_window="local-p", window_width=2),
    dict(attention="hard"),
    dict(attention="none"),
]


# Every variant with an LSTM as well, and stacked decoders (and encoders) of both cells.
CELL_VARIANT_CONFIGS = [
    *VARIANT_CONFIGS,
    *(dict(overrides, rnn="lstm") for overrides in VARIANT_CONFIGS),
    dict(attention="bahdanau", decoder_layers=2),
    dict(attention="luong-concat", decoder_layers=3, rnn="lstm"),
    dict(attention="luong-general", input_feeding=True, decoder_layers=2, encoder_layers=2, rnn="lstm"),
    dict(attention="bahdanau", attention_window="local-p", window_width=2, decoder_layers=2, rnn="lstm"),
    dict(attention="bahdanau", lexical=True),
    dict(attention="luong-concat", lexical=True),
    dict(attention="luong-general", input_feeding=True, lexical=True),
]


def variant_id(overrides: dict) -> str:
    return "-".join(str(v) for v in overrides.values())


def best_tokens(found) -> list[list[int]]:
    """The best hypothesis' tokens of each sentence of a search result."""
    return [hypotheses[0].tokens for hypotheses in found]


def best_log_probs(found) -> list[float]:
    """The best hypothesis' log-probability (the sum of its token log-probs) of each sentence."""
    return [hypotheses[0].log_prob for hypotheses in found]


def random_translator(root: Path, **decode) -> Translator:
    """A Translator over an untrained model and SentencePiece models of the synthetic pairs."""
    pairs = synthetic_pairs()
    train_sentencepiece([s for s, _ in pairs], root / "src.model", 300, "unigram", 1.0)
    train_sentencepiece([t for _, t in pairs], root / "tgt.model", 300, "unigram", 1.0)
    src_tok, tgt_tok = Tokenizer(root / "src.model"), Tokenizer(root / "tgt.model")
    torch.manual_seed(0)
    decoding = {"batch_size": 3, "max_len_offset": 3, "max_len_ratio": 1.0, **decode}
    config = Config(run_dir=str(root), model=model_config(dropout=0.2), decode=DecodeConfig(**decoding))
    model = Seq2Seq(config.model, src_tok.vocab_size, tgt_tok.vocab_size).eval()
    return Translator(LoadedModel(config, model, src_tok, tgt_tok, torch.device("cpu")))


def transformer_translator(root: Path, encoder_layers: int = 3, decoder_layers: int = 2) -> Translator:
    """A Translator over an untrained Transformer (4 heads, 16 wide) and SentencePiece models of
    the synthetic pairs."""
    pairs = synthetic_pairs()
    train_sentencepiece([s for s, _ in pairs], root / "src.model", 300, "unigram", 1.0)
    train_sentencepiece([t for _, t in pairs], root / "tgt.model", 300, "unigram", 1.0)
    src_tok, tgt_tok = Tokenizer(root / "src.model"), Tokenizer(root / "tgt.model")
    torch.manual_seed(0)
    model_config = model_settings(
        arch="transformer",
        embed_dim=16,
        heads=4,
        ff_dim=32,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers,
        dropout=0.0,
        attention_dropout=0.0,
    )
    config = Config(run_dir=str(root), model=model_config, decode=DecodeConfig(beam_size=3, max_len_offset=4))
    model = build_model(model_config, src_tok.vocab_size, tgt_tok.vocab_size).eval()
    return Translator(LoadedModel(config, model, src_tok, tgt_tok, torch.device("cpu")))


COPY_WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def copy_translator(root: Path, steps: int = 500, seed: int = 0, **overrides) -> Translator:
    """A Translator over a tiny model trained to copy sentences of NATO words (one
    SentencePiece word model for both sides): it can only get a word right by attending to
    it, so it follows whatever attention it is given — the crafted model of the lab's tests."""
    from nmt.data.batching import Example, collate
    from nmt.training.step import train_step

    rng = random.Random(seed)
    sentences = [" ".join(rng.choice(COPY_WORDS) for _ in range(rng.randint(3, 6))) for _ in range(3000)]
    train_sentencepiece(sentences, root / "words.model", 300, "word", 1.0)
    tok = Tokenizer(root / "words.model")
    ids = tok.encode(sentences)
    torch.manual_seed(seed)
    config = Config(run_dir=str(root), model=model_config(32, **overrides), decode=DecodeConfig(beam_size=3))
    model = Seq2Seq(config.model, tok.vocab_size, tok.vocab_size)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    examples = [Example(x, list(x)) for x in ids]
    for _ in range(steps):
        batch = collate(rng.sample(examples, 64))
        train_step(model, batch, optimizer, TrainConfig(clip_grad_norm=1.0), batch.num_tgt_tokens)
    return Translator(LoadedModel(config, model.eval(), tok, tok, torch.device("cpu")))


def served_beside_torch(package: Path, engine: str, score_abs: float, attention_atol: float) -> dict:
    """``package`` served twice in one app, by torch and by ``engine``: the JSON API's n-best
    texts, scores and attention for "we like tea." alike (within the tolerances), the lab's
    playback refused on ``engine`` naming --engine torch, and the page served. Returns
    /api/models by name."""
    from nmt.runtime.loading import load_packages
    from nmt.serve.app import build_app
    from nmt.serve.requests import Limits

    engines = ("torch", engine)
    translators = {name: Translator(load_packages([package], torch.device("cpu"), name)) for name in engines}
    with local_client(build_app(translators, Limits())) as client:
        models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
        request = {"text": "we like tea.", "n_best": 2, "attention": True}
        answers = {name: client.post("/api/translate", json={**request, "model": name}).json() for name in engines}
        ours, theirs = answers[engine]["translations"], answers["torch"]["translations"]
        assert [t["text"] for t in ours] == [t["text"] for t in theirs]
        assert [t["score"] for t in ours] == pytest.approx([t["score"] for t in theirs], abs=score_abs)
        attention = [torch.tensor(answers[name]["attention"]) for name in (engine, "torch")]
        assert torch.allclose(*attention, atol=attention_atol)
        # one translation, no attention: each token's log-probability the model's (CTranslate2 made
        # them up here before: zeros, then the total on the last token)
        plain = {n: client.post("/api/translate", json={"text": "we like tea.", "model": n}).json() for n in engines}
        ours, theirs = plain[engine]["translations"][0], plain["torch"]["translations"][0]
        assert ours["token_logprobs"] == pytest.approx(theirs["token_logprobs"], abs=score_abs)
        assert ours["score"] == pytest.approx(theirs["score"], abs=score_abs)
        lab = client.post("/api/lab/playback", json={"text": "we like tea.", "model": engine})
        assert lab.status_code == 422 and "--engine torch" in lab.json()["error"]
        assert client.get("/").status_code == 200  # the page
    return models


def local_client(app, **options):
    """A test client that calls the app as a browser on this machine does (``nmt serve`` answers
    only to local host names: ``nmt.serve.app.LocalOnly``)."""
    from starlette.testclient import TestClient

    return TestClient(app, base_url="http://127.0.0.1:8000", **options)


def small_trained_models(root: Path) -> dict[str, Path]:
    """Two models that translate the synthetic pairs, trained in seconds: an RNN run (Luong's
    general attention with input feeding) and a package of a Transformer (2+2 layers, 2 heads);
    {"rnn-run": run folder, "transformer-package": package folder}."""
    from typer.testing import CliRunner

    from nmt.cli import app

    data = write_anki(root / "pairs.txt", synthetic_pairs())
    rnn = tiny_config(root, data, run_dir=str(root / "rnn-run"), model={"attention": "luong-general"})
    rnn["model"]["input_feeding"] = True
    rnn["train"].update(epochs=40, probes=0, learning_rate=0.01, patience=0)
    transformer = tiny_config(root, data, run_dir=str(root / "transformer-run"), model={**TINY_TRANSFORMER, "heads": 2})
    transformer["train"].update(epochs=12, probes=0, **TRANSFORMER_SCHEDULE)
    for width in RNN_WIDTHS:
        del transformer["model"][width]
    runner = CliRunner()
    for name, raw in (("rnn", rnn), ("transformer", transformer)):
        path = root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw), encoding="utf-8")
        trained = runner.invoke(app, ["train", "--config", str(path)])
        assert trained.exit_code == 0, trained.output
    exported = runner.invoke(app, ["export", str(root / "transformer-run"), str(root / "transformer-package")])
    assert exported.exit_code == 0, exported.output
    return {"rnn-run": root / "rnn-run", "transformer-package": root / "transformer-package"}
