"""The Transformer (model.arch: transformer): its layers against PyTorch's own in float64, the
cached decoding step against the teacher-forced pass, search and ensembles (one mixed with an
RNN), a tiny model that learns, and the whole command line: train, resume, members, packages."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.checks import check_model_combination
from nmt.config.files import load_config
from nmt.config.schema import ModelConfig, TrainConfig
from nmt.data.batching import Example, collate, source_tensor
from nmt.data.tokenizer import BOS_ID, EOS_ID
from nmt.decoding.search import beam_search, greedy_search
from nmt.model.base import build_model
from nmt.model.dropout import lane_mask
from nmt.model.ensemble import Ensemble
from nmt.model.transformer.layers import DecoderLayer, EncoderLayer, MultiHeadAttention, TransformerMemory
from nmt.model.transformer.model import Transformer
from nmt.training.step import train_step

from .helpers import (
    TINY_TRANSFORMER,
    TRANSFORMER_SCHEDULE,
    model_settings,
    random_sources,
    small_model,
    synthetic_pairs,
    tiny_config,
    write_anki,
    write_run_config,
)

runner = CliRunner()


def transformer_config(width: int = 16, heads: int = 4, layers: int = 2, **overrides) -> ModelConfig:
    settings = dict(
        arch="transformer",
        embed_dim=width,
        heads=heads,
        ff_dim=2 * width,
        encoder_layers=layers,
        decoder_layers=layers,
        dropout=0.0,
        attention_dropout=0.0,
    )
    config = model_settings(**{**settings, **overrides})
    check_model_combination(config)
    return config


def small_transformer(vocab: int = 20, seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    model = build_model(transformer_config(**overrides), vocab, vocab)
    assert isinstance(model, Transformer)
    return model


def copy_attention(ours: MultiHeadAttention, theirs: torch.nn.MultiheadAttention) -> None:
    """PyTorch's in_proj is [W^Q; W^K; W^V] stacked: ours is W^Q and [W^K; W^V]."""
    width = ours.query.weight.size(0)
    torch.nn.init.normal_(ours.value_bias)  # not its zeros: the copy must carry it
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.query.weight, ours.key_value.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.query.bias, torch.zeros(width), ours.value_bias]))  # no key bias
        theirs.out_proj.weight.copy_(ours.out.weight)
        theirs.out_proj.bias.copy_(ours.out.bias)
    assert theirs.in_proj_weight.shape == (3 * width, width)


def copy_tail(ours, theirs, norms: list[tuple[str, str]]) -> None:
    with torch.no_grad():
        theirs.linear1.weight.copy_(ours.feed_forward.inner.weight)
        theirs.linear1.bias.copy_(ours.feed_forward.inner.bias)
        theirs.linear2.weight.copy_(ours.feed_forward.outer.weight)
        theirs.linear2.bias.copy_(ours.feed_forward.outer.bias)
        for mine, their in norms:
            getattr(theirs, their).weight.copy_(getattr(ours, mine).weight)
            getattr(theirs, their).bias.copy_(getattr(ours, mine).bias)


def padded_batch(batch: int = 3, length: int = 6, width: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batch, length, width, generator=generator, dtype=torch.float64)
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[1, 4:] = False
    mask[2, 2:] = False
    return x, mask


def test_an_encoder_layer_equals_pytorchs_pre_norm_layer_in_float64():
    torch.manual_seed(0)
    ours = EncoderLayer(transformer_config()).double().train()
    theirs = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=True)
    theirs = theirs.double().train()  # train mode: PyTorch's own layer, not its inference fast path
    copy_attention(ours.self_attention, theirs.self_attn)
    copy_tail(ours, theirs, [("self_norm", "norm1"), ("ff_norm", "norm2")])
    x, mask = padded_batch()
    expected = theirs(x, src_key_padding_mask=~mask)
    got = ours(x, mask)
    real = mask.unsqueeze(-1).expand_as(got)  # PyTorch's padded rows are its own business
    torch.testing.assert_close(got[real], expected[real], rtol=1e-12, atol=1e-12)


def test_a_decoder_layer_equals_pytorchs_pre_norm_layer_in_float64():
    torch.manual_seed(0)
    ours = DecoderLayer(transformer_config()).double().train()
    theirs = torch.nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=True)
    theirs = theirs.double().train()
    copy_attention(ours.self_attention, theirs.self_attn)
    copy_attention(ours.cross_attention, theirs.multihead_attn)
    copy_tail(ours, theirs, [("self_norm", "norm1"), ("cross_norm", "norm2"), ("ff_norm", "norm3")])
    encoded, src_mask = padded_batch(length=7)
    target = torch.randn(3, 5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    expected = theirs(target, encoded, tgt_mask=causal, memory_key_padding_mask=~src_mask, tgt_is_causal=True)
    keys, values = ours.cross_attention.keys_values(encoded)
    got, weights, _ = ours(target, TransformerMemory([keys], [values], src_mask), 0, with_weights=True)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    assert weights is not None and weights.shape == (3, 4, 5, 7)
    assert torch.all(weights[~src_mask.unsqueeze(1).unsqueeze(2).expand_as(weights)] == 0)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_post_norm_layers_equal_pytorchs_post_norm_layers_in_float64(activation):
    """model.norm: post — LN(x + block(x)) after each block, the 2017 paper's (and Marian's)."""
    torch.manual_seed(0)
    config = transformer_config(norm="post", activation=activation)
    encoder = EncoderLayer(config).double().train()
    theirs = torch.nn.TransformerEncoderLayer(16, 4, 32, 0.0, activation, batch_first=True, norm_first=False)
    theirs = theirs.double().train()
    copy_attention(encoder.self_attention, theirs.self_attn)
    copy_tail(encoder, theirs, [("self_norm", "norm1"), ("ff_norm", "norm2")])
    x, mask = padded_batch()
    got, expected = encoder(x, mask), theirs(x, src_key_padding_mask=~mask)
    real = mask.unsqueeze(-1).expand_as(got)
    torch.testing.assert_close(got[real], expected[real], rtol=1e-12, atol=1e-12)
    decoder = DecoderLayer(config).double().train()
    theirs = torch.nn.TransformerDecoderLayer(16, 4, 32, 0.0, activation, batch_first=True, norm_first=False)
    theirs = theirs.double().train()
    copy_attention(decoder.self_attention, theirs.self_attn)
    copy_attention(decoder.cross_attention, theirs.multihead_attn)
    copy_tail(decoder, theirs, [("self_norm", "norm1"), ("cross_norm", "norm2"), ("ff_norm", "norm3")])
    target = torch.randn(3, 5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    expected = theirs(target, x, tgt_mask=causal, memory_key_padding_mask=~mask, tgt_is_causal=True)
    keys, values = decoder.cross_attention.keys_values(x)
    got, _, _ = decoder(target, TransformerMemory([keys], [values], mask), 0)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    assert isinstance(small_transformer(norm="post").encoder.norm, torch.nn.Identity)  # no last LN of a stack


def test_each_position_layout_is_the_published_formula():
    """sinusoidal: sin, cos of each frequency side by side; marian: the sines, then the cosines;
    fairseq: the same halves with frequencies 10000^(-i / (half - 1)), counted from position 2."""
    width, half = 16, 8
    position = torch.arange(5, dtype=torch.float32)[:, None]

    def layout(name: str) -> torch.Tensor:
        return small_transformer(positions=name).encoder.positions(0, 5, torch.device("cpu"))

    frequencies = 10000.0 ** (-torch.arange(0, width, 2, dtype=torch.float32) / width)
    angles = position * frequencies
    interleaved = torch.stack([angles.sin(), angles.cos()], -1).flatten(-2)
    torch.testing.assert_close(layout("sinusoidal"), interleaved)
    torch.testing.assert_close(layout("marian"), torch.cat([angles.sin(), angles.cos()], -1))
    fairseq = (position + 2) * 10000.0 ** (-torch.arange(half, dtype=torch.float32) / (half - 1))
    torch.testing.assert_close(layout("fairseq"), torch.cat([fairseq.sin(), fairseq.cos()], -1))
    unscaled = small_transformer(scale_embeddings=False).encoder
    assert unscaled.scale == 1.0 and small_transformer().encoder.scale == 4.0  # √16


@pytest.mark.parametrize("causal", [False, True])
def test_the_fused_kernel_and_the_explicit_weights_compute_the_same_attention(causal):
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4, dropout=0.0).double()
    x, mask = padded_batch(length=6)
    keys, values = attention.keys_values(x)
    fused, none = attention(x, keys, values, None if causal else mask, causal=causal)
    explicit, weights = attention(x, keys, values, None if causal else mask, causal=causal, with_weights=True)
    assert none is None and weights is not None
    torch.testing.assert_close(fused, explicit, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 6, dtype=torch.float64))
    if causal:
        assert torch.all(weights.triu(1) == 0)


@pytest.mark.parametrize(
    "shape",
    [
        dict(positions="sinusoidal"),
        dict(positions="learned"),
        dict(positions="marian", norm="post"),
        dict(positions="fairseq", activation="swish"),
    ],
    ids=lambda shape: "-".join(shape.values()),
)
def test_decoding_step_by_step_with_the_cache_gives_the_teacher_forced_logits(shape):
    model = small_transformer(vocab=30, seed=1, tie_embeddings=True, **shape).eval()
    src, lengths = random_sources(4, vocab=30, seed=2)
    tgt_in = torch.randint(4, 30, (4, 6), generator=torch.Generator().manual_seed(3))
    tgt_in[:, 0] = BOS_ID
    logits, shown = model(src, lengths, tgt_in)
    memory, state = model.encode(src, lengths)
    steps, weights = [], []
    for t in range(tgt_in.size(1)):
        step_logits, state, step_weights = model.decode_step(tgt_in[:, t], state, memory)
        steps.append(step_logits)
        weights.append(step_weights)
    torch.testing.assert_close(torch.stack(steps, 1), logits, rtol=1e-5, atol=1e-5)
    assert shown is not None
    torch.testing.assert_close(torch.stack(weights, 1), shown, rtol=1e-5, atol=1e-6)
    assert state.position == 6 and state.keys[0].shape == (4, 4, 6, 4)  # (B, heads, t, d) per layer


def test_training_mode_uses_the_fused_kernels_and_returns_no_weights():
    model = small_transformer().train()
    src, lengths = random_sources(3)
    logits, weights = model(src, lengths, torch.full((3, 4), BOS_ID))
    assert weights is None and logits.shape == (3, 4, 20)


def test_shown_weights_are_a_distribution_over_the_real_source_positions():
    model = small_transformer(seed=2).eval()
    src, lengths = random_sources(5, seed=4)
    memory, state = model.encode(src, lengths)
    _, _, weights = model.decode_step(torch.full((5,), BOS_ID), state, memory)
    torch.testing.assert_close(weights.sum(-1), torch.ones(5))
    assert torch.all(weights[~memory.mask] == 0)


def test_a_joint_vocabulary_shares_one_table_and_ties_the_output():
    torch.manual_seed(0)
    model = build_model(transformer_config(tie_embeddings=True), 25, 25, joint_vocabulary=True)
    assert model.encoder.embedding is model.decoder.embedding
    assert model.decoder.output.weight is model.encoder.embedding.weight


def test_beam_one_is_greedy_and_a_wider_beam_gives_a_ranked_n_best():
    model = small_transformer(seed=3).eval()
    src, lengths = random_sources(6, seed=5)
    greedy = greedy_search(model, src, lengths, 8)
    one = beam_search(model, src, lengths, 1, 8)
    assert [h[0].tokens for h in greedy] == [h[0].tokens for h in one]
    wide = beam_search(model, src, lengths, 4, 8, n_best=3)
    for found in wide:
        assert len(found) == 3 and len({tuple(h.tokens) for h in found}) == 3
        assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)


def test_an_ensemble_of_one_transformer_twice_translates_as_the_model():
    model = small_transformer(seed=4).eval()
    twice = Ensemble([model, model]).eval()
    src, lengths = random_sources(5, seed=6)
    alone, together = beam_search(model, src, lengths, 3, 8), beam_search(twice, src, lengths, 3, 8)
    assert [h[0].tokens for h in alone] == [h[0].tokens for h in together]
    for a, b in zip(alone, together):
        assert b[0].token_logprobs == pytest.approx(a[0].token_logprobs, abs=1e-5)


def test_an_rnn_and_a_transformer_ensemble_to_the_mean_of_their_log_probabilities():
    rnn, transformer = small_model(seed=5).eval(), small_transformer(seed=6).eval()
    mixed = Ensemble([rnn, transformer]).eval()
    src, lengths = random_sources(4, seed=7)
    fed = torch.tensor([[BOS_ID] * 4, [5, 8, 10, 11], [6, 9, EOS_ID, 12]])  # (steps, B)
    with torch.no_grad():
        states = [model.encode(src, lengths) for model in (mixed, rnn, transformer)]
        for tokens in fed:
            stepped = [
                model.decode_step(tokens, state, memory)
                for model, (memory, state) in zip((mixed, rnn, transformer), states)
            ]
            states = [(memory, new_state) for (memory, _), (_, new_state, _) in zip(states, stepped)]
            (both, _, weights), (rnn_logits, _, _), (transformer_logits, _, _) = stepped
            mean = (rnn_logits.log_softmax(-1) + transformer_logits.log_softmax(-1)) / 2
            torch.testing.assert_close(both, mean, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(weights.sum(-1), torch.ones(4))
    found = beam_search(mixed, src, lengths, 3, 6, with_attention=True)
    assert all(h[0].attention is not None and h[0].attention.shape[1] == lengths[i] for i, h in enumerate(found))


def test_lane_dropout_drops_the_rate_asked_and_keeps_the_expectation():
    torch.manual_seed(0)
    x = torch.ones(400, 1000)
    mask = lane_mask(x, 0.3)
    dropped = (mask == 0).float().mean().item()
    assert abs(dropped - 0.3) < 0.003
    kept = mask[mask > 0]
    assert torch.all(kept == kept[0]) and kept[0].item() == pytest.approx(1 / (1 - round(0.3 * 65536) / 65536))
    assert abs(mask.mean().item() - 1.0) < 0.01


def reversal_examples(count: int, seed: int) -> list[Example]:
    generator = torch.Generator().manual_seed(seed)
    examples = []
    for _ in range(count):
        length = int(torch.randint(3, 7, (1,), generator=generator))
        ids = torch.randint(4, 14, (length,), generator=generator).tolist()
        examples.append(Example(ids, ids[::-1]))
    return examples


@pytest.mark.slow
def test_a_tiny_transformer_learns_to_reverse_its_input():
    """Reversal needs the attention to find a position from the end: no RNN-like shortcut."""
    torch.manual_seed(0)
    model = build_model(transformer_config(width=32, heads=4, layers=2, dropout=0.1), 16, 16)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    cfg = TrainConfig(clip_grad_norm=1.0)
    training = reversal_examples(4000, seed=1)
    for step in range(600):
        batch = collate(training[(step * 64) % 3968 : (step * 64) % 3968 + 64])
        train_step(model.train(), batch, optimizer, cfg, batch.num_tgt_tokens)
    tests = reversal_examples(100, seed=2)
    src, lengths = source_tensor([ex.src_ids for ex in tests])
    found = greedy_search(model.eval(), src, lengths, 10)
    right = sum(h[0].tokens == ex.tgt_ids for h, ex in zip(found, tests))
    assert right >= 90, right


def test_the_config_checks_what_a_transformer_cannot_take(tmp_path):
    from nmt.config.parsing import config_from_dict
    from nmt.core.errors import NmtError

    raw = tiny_config(tmp_path, tmp_path / "pairs.txt", model={"arch": "transformer", "embed_dim": 30, "heads": 4})
    with pytest.raises(NmtError, match="embed_dim must divide by it"):
        config_from_dict(raw)
    raw["model"]["heads"] = 5
    config = config_from_dict(raw)
    assert list(config.model.unread) == ["encoder_hidden", "decoder_hidden", "attention_dim", "output_dim"]
    for key, value, message in [
        ("teacher_forcing", 0.5, "scheduled sampling"),
        ("freeze", ["attention"], "parts of the RNN"),
        ("lr_schedule", "inverse_sqrt", "set 'train.lr_warmup'"),
    ]:
        wrong = {**raw, "train": {**raw["train"], key: value}}
        with pytest.raises(NmtError, match=message):
            config_from_dict(wrong)
    rnn = {**raw, "model": {"heads": 8, "attention": "luong-dot", "decoder_hidden": 64, "encoder_hidden": 32}}
    assert list(config_from_dict(rnn).model.unread) == ["heads"]


# ---- the command line, end to end ----


def write_transformer_config(tmp_path: Path, name: str, **train) -> Path:
    train = {"epochs": 40, "batch_size": 16, **TRANSFORMER_SCHEDULE, "patience": 0, **train}
    return write_run_config(tmp_path, name, train, {**TINY_TRANSFORMER, "dropout": 0.1})


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    tmp_path = tmp_path_factory.mktemp("transformer")
    config = write_transformer_config(tmp_path, "run")
    result = runner.invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return config


@pytest.mark.slow
def test_a_transformer_trains_translates_and_evaluates_from_its_config(trained, tmp_path):
    run = Path(load_config(trained).run_dir)
    log = (run / "train.log").read_text(encoding="utf-8")
    assert "Not read by" not in log and "no train.lr_warmup" not in log
    best = max(json.loads(line)["dev_bleu"] for line in (run / "metrics.jsonl").read_text().splitlines())
    assert best > 60, best  # the synthetic pairs are learnable: an RNN of this size reaches 100
    result = runner.invoke(app, ["translate", "--config", str(trained), "--text", "we like tea."])
    assert result.exit_code == 0 and result.stdout.strip() == "आम्ही चहा आवडते.", result.output
    plot = tmp_path / "tea.png"
    result = runner.invoke(
        app, ["translate", "--config", str(trained), "--text", "we like tea.", "--plot-attention", str(plot)]
    )
    assert result.exit_code == 0 and plot.is_file(), result.output
    result = runner.invoke(app, ["evaluate", "--config", str(trained), "--set", "decode.mbr=3"])
    assert result.exit_code == 0 and "BLEU" in result.stdout, result.output


@pytest.mark.slow
def test_a_transformer_package_and_its_onnx_graphs_translate_as_its_run(trained, tmp_path):
    run = load_config(trained).run_dir
    result = runner.invoke(app, ["export", run, str(tmp_path / "pkg"), "--onnx"])
    assert result.exit_code == 0, result.output
    card = (tmp_path / "pkg" / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "Transformer translation model" in card and "4 heads" in card
    sources = "I see apples.\nwe like tea.\nthey eat rice.\nthe teacher reads a book.\n"
    for beam in ("1", "3"):
        from_run = runner.invoke(app, ["translate", "--config", str(trained), "--beam-size", beam], input=sources)
        for engine in ("torch", "onnx"):
            packaged = runner.invoke(
                app,
                ["translate", "--model", str(tmp_path / "pkg"), "--engine", engine, "--beam-size", beam],
                input=sources,
            )
            assert packaged.exit_code == 0 and packaged.stdout == from_run.stdout, (engine, beam, packaged.output)


@pytest.mark.slow
def test_a_trained_transformer_on_the_page_and_in_the_lab(trained):
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import load_checkpoints
    from nmt.serve.app import build_app

    from .helpers import local_client

    loaded = load_checkpoints(load_config(trained), ["best"], torch.device("cpu"))
    client = local_client(build_app({"t": Translator(loaded)}))
    translated = client.post("/api/translate", json={"text": "we like tea.", "attention": True}).json()
    assert translated["translations"][0]["text"] == "आम्ही चहा आवडते." and translated["attention"]
    info = client.get("/api/models").json()["models"][0]
    assert info["arch"] == "transformer" and info["heads"] == 4
    played = client.post("/api/lab/playback", json={"text": "we like tea.", "layer": 0, "head": 1}).json()
    assert [step["token"] for step in played["steps"]][-1] == "<eos>" and played["head"] == 1
    edit = client.post("/api/lab/edit", json={"text": "we like tea.", "step": 0, "weights": [1, 0, 0, 0, 0, 0]})
    assert edit.status_code == 422 and "cross-attention heads" in edit.text, edit.text
    salient = client.post("/api/lab/saliency", json={"text": "we like tea.", "position": 1})
    assert salient.status_code == 200 and len(salient.json()["saliency"]) == len(salient.json()["source_tokens"])
    timeline = client.get("/api/timeline", params={"model": "t"}).json()["entries"]
    assert timeline and timeline[-1]["epoch"] > timeline[0]["epoch"]
    probe = timeline[-1]["probes"][0]  # every head of every layer, epoch by epoch: the lab follows one
    heads = torch.tensor(probe["heads"])
    assert heads.shape == (2, 4, len(probe["tokens"]), len(probe["source_tokens"]))
    torch.testing.assert_close(heads[-1].mean(0), torch.tensor(probe["attention"]), rtol=0, atol=1e-4)


@pytest.mark.slow
def test_a_resumed_transformer_run_trains_the_same_weights(tmp_path):
    straight = write_transformer_config(tmp_path, "straight", epochs=4)
    split = write_transformer_config(tmp_path, "split", epochs=4)
    assert runner.invoke(app, ["train", "--config", str(straight)]).exit_code == 0
    assert runner.invoke(app, ["train", "--config", str(split), "--set", "train.epochs=2"]).exit_code == 0
    result = runner.invoke(app, ["train", "--config", str(split), "--resume"])
    assert result.exit_code == 0, result.output
    a, b = (
        torch.load(tmp_path / name / "checkpoints" / "last.pt", weights_only=True) for name in ("straight", "split")
    )
    assert a["progress"]["step"] == b["progress"]["step"] > 0
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


@pytest.mark.slow
def test_transformer_members_average_and_a_child_of_a_transformer_parent(trained, tmp_path):
    members = write_transformer_config(tmp_path, "members", epochs=3, members=2, keep_checkpoints=3)
    result = runner.invoke(app, ["train", "--config", str(members)])
    assert result.exit_code == 0 and "member-2: best dev BLEU" in result.output, result.output
    result = runner.invoke(app, ["translate", "--config", str(members), "--text", "we like tea."])
    assert result.exit_code == 0 and result.stdout.strip(), result.output
    averaged = tmp_path / "averaged.pt"
    result = runner.invoke(
        app, ["average", str(tmp_path / "members" / "member-1"), "--last", "2", "--output", str(averaged)]
    )
    assert result.exit_code == 0 and averaged.is_file(), result.output
    child = write_transformer_config(tmp_path, "child", epochs=1)
    parent = load_config(trained).run_dir
    result = runner.invoke(app, ["train", "--config", str(child), "--init-from", parent])
    assert result.exit_code == 0, result.output
    first = json.loads((tmp_path / "child" / "metrics.jsonl").read_text().splitlines()[0])
    assert first["dev_bleu"] > 50, first  # it starts as its parent
    rnn_child = write_transformer_config(tmp_path, "rnn-child", epochs=1)
    result = runner.invoke(app, ["train", "--config", str(rnn_child), "--init-from", parent, "--set", "model.arch=rnn"])
    assert result.exit_code == 1 and "model.arch" in result.stderr, result.output


@pytest.mark.slow
def test_init_from_a_transformer_writes_one_child_with_the_parents_schedule(trained, tmp_path, monkeypatch):
    """A Transformer parent's child is what was measured of one: one model, the parent's learning
    rate and warm-up, no lexical model (an RNN's); before, init wrote the RNN's rate of 0.002 with no
    warm-up, and lexical: true, which a Transformer cannot take."""
    from nmt.pipelines.init import init_config

    pairs = write_anki(tmp_path / "eng-mar.tsv", synthetic_pairs())
    parent = str(Path(load_config(trained).run_dir).resolve())
    monkeypatch.chdir(tmp_path)  # the config's run_dir, runs/child, is relative
    path, text = init_config([pairs], tmp_path / "child.yaml", init_from=parent)
    config = load_config(path)
    assert config.model.arch == "transformer" and config.train.members == 1
    assert "lexical" not in {**config.model.keys(), **config.model.unread}  # not even as an unread key
    assert (config.train.learning_rate, config.train.lr_warmup) == (0.003, 50)
    assert config.train.lr_schedule == "inverse_sqrt" and "a Transformer" in text
    result = runner.invoke(
        app, ["train", "--config", str(path), "--set", "train.max_minutes=0", "--set", "train.epochs=1"]
    )
    assert result.exit_code == 0, result.output


def test_the_warm_up_ramps_then_inverse_sqrt_falls():
    from nmt.training.schedule import RunPosition, learning_rate

    cfg = TrainConfig(learning_rate=1e-3, lr_schedule="inverse_sqrt", lr_warmup=100)

    def rate(step: int) -> float:
        return learning_rate(cfg, RunPosition(1, 1, 10, step=step))

    assert rate(0) == pytest.approx(1e-5) and rate(49) == pytest.approx(5e-4) and rate(99) == pytest.approx(1e-3)
    assert rate(399) == pytest.approx(1e-3 * math.sqrt(100 / 400))
    budget = TrainConfig(learning_rate=1e-3, lr_schedule="budget", lr_warmup=10, epochs=10)
    assert learning_rate(budget, RunPosition(1, 1, 100, step=4)) == pytest.approx(5e-4)
    assert learning_rate(budget, RunPosition(1, 50, 100, step=49)) == pytest.approx(1e-3 * (1 - 0.049))
    assert EOS_ID != BOS_ID  # the ids the tests above feed
