"""The attention lab for a Transformer (nmt/pipelines/heads.py): every head of every layer, and one
head's scaled dot-product step by step, each number the model's own."""

from __future__ import annotations

import math

import pytest
import torch

from nmt.data.tokenizer import EOS_ID, PAD_ID
from nmt.pipelines.lab import Lab, LabInputError
from nmt.pipelines.translate import Translator
from nmt.serve.app import build_app

from .helpers import local_client, random_translator, transformer_translator

SENTENCE = "we like tea."


@pytest.fixture(scope="module")
def translator(tmp_path_factory) -> Translator:
    """An untrained Transformer of 3 + 2 layers and 4 heads over the synthetic pairs' vocabularies."""
    return transformer_translator(tmp_path_factory.mktemp("heads"))


def test_every_head_of_every_layer_for_the_best_translation(translator):
    lab = Lab(translator)
    found = lab.heads(SENTENCE)
    source, steps = len(found.source_tokens), len(found.tokens)
    assert found.heads == 4 and len(found.encoder_self) == 3 and len(found.cross) == len(found.decoder_self) == 2
    for layer in found.cross:
        assert torch.tensor(layer).shape == (4, steps, source)
        torch.testing.assert_close(torch.tensor(layer).sum(-1), torch.ones(4, steps))
    for layer in found.decoder_self:  # causal: a step sees itself and the steps before
        weights = torch.tensor(layer)
        assert weights.shape == (4, steps, steps) and torch.all(weights.triu(1) == 0)
    assert torch.tensor(found.encoder_self[0]).shape == (4, source, source)
    # the last layer's heads, averaged, are what search, the page and the heatmaps show
    hypothesis = translator.search([SENTENCE], with_attention=True)[0][0]
    assert hypothesis.attention is not None
    shown = torch.tensor(found.cross[-1]).mean(0)
    torch.testing.assert_close(shown, hypothesis.attention.float(), rtol=1e-4, atol=1e-5)


def test_a_heads_playback_is_its_scaled_dot_product_step_by_step(translator):
    lab = Lab(translator)
    played = lab.playback(SENTENCE, layer=0, head=2, top_k=3)
    assert (played.layer, played.head, played.layers, played.heads) == (0, 2, 2, 4)
    assert played.attention == "scaled-dot-product" and "√d_k" in played.formula[0]
    model = translator.model
    ids = translator.source_ids([SENTENCE])[0]
    src = torch.tensor([[*ids, EOS_ID]])  # <eos> closes the source
    with torch.no_grad():  # recomputed from the weights: head 2's W^K and W^V of layer 0 over the encoder's outputs
        encoded = model.encoder(src, src.ne(PAD_ID))[0]  # (S, width)
        attention = model.decoder.layers[0].cross_attention
        width, d = encoded.size(-1), encoded.size(-1) // 4
        w_k, w_v = attention.key_value.weight[:width], attention.key_value.weight[width:]
        head = slice(2 * d, 3 * d)
        expected_keys = encoded @ w_k[head].T  # (S, d): no key bias
        values = encoded @ w_v[head].T + attention.value_bias[head]
    keys = torch.tensor(played.keys)
    torch.testing.assert_close(keys, expected_keys, rtol=1e-5, atol=1e-5)
    for step in played.steps:
        query = torch.tensor(step.query)
        scores = keys @ query / math.sqrt(query.numel())  # q · k_j / √d
        torch.testing.assert_close(torch.tensor(step.scores), scores, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(torch.tensor(step.weights), scores.softmax(-1), rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(  # Σ_j α_j v_j
            torch.tensor(step.context), torch.tensor(step.weights) @ values, rtol=1e-4, atol=1e-5
        )
        assert len(step.top) == 3 and step.energies is None
    last = lab.playback(SENTENCE, top_k=1)
    assert last.layer == 1 and last.head == 0  # -1: the last layer
    with pytest.raises(LabInputError, match="layer must be from 0 to 1"):
        lab.playback(SENTENCE, layer=2)
    with pytest.raises(LabInputError, match="head must be from 0 to 3"):
        lab.playback(SENTENCE, head=4)


def test_editing_one_head_is_refused_with_the_reason_and_the_rnn_has_no_heads(translator, tmp_path):
    with pytest.raises(LabInputError, match="2 x 4 cross-attention heads") as refused:
        Lab(translator).edit(SENTENCE, 0, [1.0] * 5)
    assert refused.value.field == "model"
    with pytest.raises(LabInputError, match="heads are a Transformer's"):
        Lab(random_translator(tmp_path)).heads(SENTENCE)
    # sized first, an RNN's heads were counted as a Transformer's: a long sentence got 413 "ask for
    # one layer and head" instead of the reason
    rnn = local_client(build_app({"rnn": random_translator(tmp_path / "rnn")}))
    answer = rnn.post("/api/lab/heads", json={"text": " ".join(["we like tea"] * 60), "model": "rnn"})
    assert answer.status_code == 422 and "heads are a Transformer's" in answer.json()["error"], answer.text


def test_the_api_serves_heads_and_a_chosen_heads_playback(translator):
    client = local_client(build_app({"t": translator}))
    heads = client.post("/api/lab/heads", json={"text": SENTENCE})
    assert heads.status_code == 200 and heads.json()["heads"] == 4 and len(heads.json()["cross"]) == 2
    played = client.post("/api/lab/playback", json={"text": SENTENCE, "layer": 1, "head": 3})
    assert played.status_code == 200 and played.json()["head"] == 3
    wrong = client.post("/api/lab/playback", json={"text": SENTENCE, "head": 9})
    assert wrong.status_code == 422 and wrong.json()["field"] == "head"
    given = [*heads.json()["tokens"][:2], "<eos>"]  # a translation of the user's: its first two subwords, ended
    forced = client.post("/api/lab/heads", json={"text": SENTENCE, "tokens": given})
    assert forced.status_code == 200, forced.text
    assert forced.json()["tokens"] == given and len(forced.json()["cross"][0][0]) == 3
