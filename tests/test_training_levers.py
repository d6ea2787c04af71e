"""Training levers do what they say and nothing else: word dropout, dropout on the encoder's outputs,
subword sampling, the weights' exponential average, label smoothing."""

import pytest
import torch

from nmt.data.batching import Example, collate
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from nmt.training.optim import EmaWeights
from nmt.training.step import token_loss, word_dropout


def random_batch(n: int = 400, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    examples = []
    for _ in range(n):
        src = torch.randint(4, 50, (int(torch.randint(1, 20, (1,), generator=gen)),), generator=gen).tolist()
        tgt = torch.randint(4, 50, (int(torch.randint(1, 20, (1,), generator=gen)),), generator=gen).tolist()
        examples.append(Example(src, tgt))
    return collate(examples)


def test_word_dropout_rate_is_the_configured_one_and_touches_only_real_input_tokens():
    torch.manual_seed(0)
    batch = random_batch()
    dropped = word_dropout(batch, 0.1)
    for before, after, special in ((batch.src, dropped.src, EOS_ID), (batch.tgt_in, dropped.tgt_in, BOS_ID)):
        real = (before != PAD_ID) & (before != special)
        changed = before != after
        assert torch.all(after[changed] == UNK_ID)  # a dropped token becomes <unk>
        assert not torch.any(changed & ~real)  # padding and <eos>/<bos> never change
        rate = changed[real].float().mean().item()
        assert abs(rate - 0.1) < 0.01, rate  # ~7,800 real tokens per side: the rate is within 1 point
    assert torch.equal(dropped.tgt_out, batch.tgt_out) and torch.equal(dropped.src_lengths, batch.src_lengths)
    assert word_dropout(batch, 0.0) is batch  # off: the same batch, no random numbers drawn


@pytest.mark.parametrize("rnn_input", ["packed", "padded"])
def test_encoder_output_dropout_drops_real_positions_at_its_rate_in_training_only(rnn_input):
    from nmt.model.rnn.encoder import Encoder

    from .helpers import model_config

    torch.manual_seed(0)
    encoder = Encoder(model_config(32, encoder_output_dropout=0.25, rnn_input=rnn_input), 50)
    batch = random_batch()
    real = (batch.src != PAD_ID).unsqueeze(-1).expand(-1, -1, 64)  # (B, S, 2H)
    encoder.eval()
    clean, clean_final = encoder(batch.src, batch.src_lengths)
    encoder.train()  # the embedding dropout is 0: only the output dropout draws
    dropped, dropped_final = encoder(batch.src, batch.src_lengths)
    zeroed = (dropped == 0) & real
    assert abs(zeroed[real].float().mean().item() - 0.25) < 0.01  # ~500 k real values
    kept = real & ~zeroed
    assert torch.allclose(dropped[kept], clean[kept] / 0.75, atol=1e-6)  # survivors scaled by 1 / (1 - p)
    assert torch.all(dropped[~real] == 0)  # padding stays zero
    assert torch.equal(dropped_final, clean_final)  # the bridge's state is not dropped


def spm_model(tmp_path, model_type="unigram"):
    from nmt.data.tokenizer import Tokenizer, train_sentencepiece

    from .helpers import synthetic_pairs

    path = tmp_path / f"{model_type}.model"
    train_sentencepiece([s for s, _ in synthetic_pairs()] * 3, path, 300, model_type, 1.0)
    return Tokenizer(path)


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_subword_sampling_gives_several_segmentations_that_all_decode_to_the_text(tmp_path, model_type):
    tokenizer = spm_model(tmp_path, model_type)
    text = "they want apples and milk."
    samples = [tuple(tokenizer.sample([text], 0.3 if model_type == "bpe" else 0.1, seed)[0]) for seed in range(20)]
    assert len(set(samples)) >= 3  # several segmentations
    assert all(tokenizer.decode([list(s)])[0] == text for s in samples)  # of the same text
    assert tokenizer.sample([text] * 4, 0.1, 7) == tokenizer.sample([text] * 4, 0.1, 7)  # seeded: reproducible
    assert tokenizer.encode([text] * 3) == [tokenizer.encode([text])[0]] * 3  # inference never samples


def test_each_epoch_samples_afresh_and_a_resumed_epoch_gets_the_same_pairs(tmp_path):
    from nmt.config.schema import TrainConfig
    from nmt.training.data import TrainData, epoch_examples

    tokenizer = spm_model(tmp_path)
    lines = ["they want apples.", "I see water.", "we like tea."] * 20
    train = [Example(tokenizer.encode([s])[0], tokenizer.encode([s])[0]) for s in lines]
    data = TrainData(train, [], [], [], 0, (lines, lines))
    assert epoch_examples(data, tokenizer, tokenizer, TrainConfig(), 1) is train  # off: the prepared pairs
    sampling = TrainConfig(subword_sampling=0.1)
    first, again, second = (epoch_examples(data, tokenizer, tokenizer, sampling, e) for e in (1, 1, 2))
    assert first == again and first != second
    assert [tokenizer.decode([ex.src_ids])[0] for ex in second] == lines


def test_weight_average_follows_its_formula_and_swaps_back():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    average = EmaWeights(model, decay=0.8)
    expected = {name: p.detach().clone() for name, p in model.named_parameters()}
    for _ in range(3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        average.update()
        expected = {n: 0.8 * expected[n] + 0.2 * p.detach() for n, p in model.named_parameters()}
    for name, tensor in average.state_dict().items():
        assert torch.allclose(tensor, expected[name], atol=1e-6)
    own = {n: p.detach().clone() for n, p in model.named_parameters()}
    with average.swapped_in():
        assert all(torch.equal(p, average.state_dict()[n]) for n, p in model.named_parameters())
    assert all(torch.equal(p, own[n]) for n, p in model.named_parameters())


def test_training_with_a_weight_average_validates_both_and_translates_with_the_better(tmp_path):
    from nmt.config.parsing import config_from_dict
    from nmt.pipelines.prepare import prepare
    from nmt.runtime.checkpoint import load_checkpoint, translation_weights
    from nmt.runtime.loading import load_checkpoints
    from nmt.training.metrics import MetricsFile
    from nmt.training.trainer import build_trainer

    from .helpers import synthetic_pairs, tiny_config, write_anki

    config = config_from_dict(
        tiny_config(tmp_path, write_anki(tmp_path / "p.txt", synthetic_pairs()), train={"ema_decay": 0.9, "epochs": 2})
    )
    prepare(config, log=lambda _: None)
    trainer = build_trainer(config, torch.device("cpu"), show_bar=False)
    trainer.run()
    record = MetricsFile(trainer.run_dir.metrics).read()[-1]
    assert record["dev_bleu"] == max(record["raw_dev_bleu"], record["ema_dev_bleu"])
    payload = load_checkpoint(trainer.run_dir.checkpoint("last"))
    chosen = "ema" if record["ema_dev_bleu"] > record["raw_dev_bleu"] else "model"
    assert payload["translate_with"] == chosen
    assert all(torch.equal(payload["model"][n], p) for n, p in trainer.model.state_dict().items())  # resumes raw
    assert all(torch.equal(payload["ema"][n], t) for n, t in trainer.ema.state_dict().items())
    loaded = load_checkpoints(config, ["last"], torch.device("cpu")).model
    assert all(torch.equal(translation_weights(payload)[n], t) for n, t in loaded.state_dict().items())


def test_label_smoothing_mixes_the_gold_token_with_a_uniform_target_over_real_tokens_only():
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 4, 11, generator=gen)  # (B, T, V)
    targets = torch.randint(4, 11, (3, 4), generator=gen)
    targets[1, 2:] = PAD_ID  # padding adds nothing
    log_probs = logits.log_softmax(-1)
    real = targets != PAD_ID
    gold = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)[real]  # (N,)
    uniform = -log_probs.mean(-1)[real]  # cross-entropy against 1/V on every class
    for eps in (0.0, 0.1, 0.3):
        expected = ((1 - eps) * gold + eps * uniform).sum()
        assert torch.allclose(token_loss(logits, targets, eps), expected, atol=1e-5)
