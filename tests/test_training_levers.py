"""Training levers do what they say and nothing else: word dropout, dropout on the encoder's outputs,
subword sampling, joined pairs, the curriculum, the weights' exponential average, label smoothing."""

import bisect

import numpy as np
import pytest
import torch

from nmt.data.batching import Example, collate
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from nmt.train.optim import EmaWeights
from nmt.train.step import token_loss, word_dropout


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
    from nmt.model.encoder import Encoder

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
    from nmt.train.data import TrainData, epoch_examples

    tokenizer = spm_model(tmp_path)
    lines = ["they want apples.", "I see water.", "we like tea."] * 20
    train = [Example(tokenizer.encode([s])[0], tokenizer.encode([s])[0]) for s in lines]
    data = TrainData(train, [], [], [], 0, (lines, lines))
    assert epoch_examples(data, tokenizer, tokenizer, TrainConfig(), 1) is train  # off: the prepared pairs
    sampling = TrainConfig(subword_sampling=0.1)
    first, again, second = (epoch_examples(data, tokenizer, tokenizer, sampling, e) for e in (1, 1, 2))
    assert first == again and first != second
    assert [tokenizer.decode([ex.src_ids])[0] for ex in second] == lines


def test_joined_pairs_are_two_training_pairs_end_to_end_drawn_afresh_each_epoch_within_max_len():
    from nmt.config.schema import TrainConfig
    from nmt.train.data import JoinedPairs, TrainData, batch_lengths, epoch_examples

    gen = torch.Generator().manual_seed(0)

    def ids(length: int) -> list[int]:
        return torch.randint(4, 50, (length,), generator=gen).tolist()

    train = [Example(ids(n), ids(n + 2)) for n in [1, 3, 5, 8, 13, 21, 30] * 10]
    data = TrainData(train, [], [], [], 0)
    assert epoch_examples(data, None, None, TrainConfig(), 1) is train  # off: the pairs as they are
    cfg = TrainConfig(concat_pairs=0.5, max_len=30)
    first, again, second = (epoch_examples(data, None, None, cfg, epoch) for epoch in (1, 1, 2))
    assert isinstance(first, JoinedPairs) and len(first) == len(train) + 35
    assert [first[i] for i in range(len(train))] == train  # the pairs themselves first, unchanged
    joined = [first[i] for i in range(len(train), len(first))]
    for example, (i, j) in zip(joined, first.joined):
        assert i != j
        assert example == Example(train[i].src_ids + train[j].src_ids, train[i].tgt_ids + train[j].tgt_ids)
        assert len(example.src_ids) <= 30 and len(example.tgt_ids) <= 30
    assert (first.joined == again.joined).all() and not (first.joined == second.joined).all()  # seeded by epoch
    assert batch_lengths(first) == [
        max(len(e.src_ids), len(e.tgt_ids)) + 1 for e in (first[i] for i in range(len(first)))
    ]


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
    from nmt.config.schema import config_from_dict
    from nmt.pipelines.prepare import prepare
    from nmt.runtime.checkpoint import load_checkpoint, translation_weights
    from nmt.runtime.loading import load_checkpoints
    from nmt.train.metrics import MetricsFile
    from nmt.train.trainer import build_trainer

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


def test_curriculum_visits_every_pair_once_short_ones_first_and_only_for_its_span():
    from nmt.data.curriculum import admissible_from, curriculum_order, difficulty

    lengths = [1 + (i * 7919) % 40 for i in range(2000)]  # 1..40, scattered
    assert difficulty(np.array([3, 1, 2, 2])).tolist() == [1.0, 0.25, 0.75, 0.75]
    first = curriculum_order(lengths, span=1.0, epoch=1, seed=5)
    assert sorted(first) == list(range(len(lengths)))  # an epoch is still every pair once
    assert first == curriculum_order(lengths, span=1.0, epoch=1, seed=5)  # seeded
    assert first != curriculum_order(lengths, span=1.0, epoch=1, seed=6)
    # no pair comes before it is admissible: c(p) = sqrt(p) here, so a pair at place p of the
    # epoch has a difficulty of at most about sqrt(p)
    released = admissible_from(np.array(lengths), 1.0)
    unvisited = sorted(released.tolist())
    for place, index in enumerate(first):  # admissible there, or the pair admissible soonest
        assert released[index] <= max(place / len(first), unvisited[0]) + 1e-12
        unvisited.pop(bisect.bisect_left(unvisited, released[index]))
    quarters = [np.mean([lengths[i] for i in first[q * 500 : (q + 1) * 500]]) for q in range(4)]
    assert quarters == sorted(quarters) and quarters[0] < 0.6 * quarters[3]
    # over two epochs: the second still leans short-first, the third is shuffled as usual
    second = curriculum_order(lengths, span=2.0, epoch=2, seed=5)
    assert np.mean([lengths[i] for i in second[:500]]) < np.mean([lengths[i] for i in second[-500:]])
    assert curriculum_order(lengths, span=2.0, epoch=3, seed=5) is None
    assert curriculum_order(lengths, span=0.0, epoch=1, seed=5) is None


def test_curriculum_batches_keep_every_pair_once_and_the_epochs_after_it_as_without_one():
    from nmt.config.schema import TrainConfig
    from nmt.train.data import batch_lengths, epoch_batches

    gen = torch.Generator().manual_seed(1)
    examples = [
        Example(*(torch.randint(4, 50, (n,), generator=gen).tolist() for _ in range(2)))
        for n in torch.randint(1, 40, (3000,), generator=gen).tolist()
    ]
    lengths = batch_lengths(examples)
    plain, curriculum = TrainConfig(batch_size=16), TrainConfig(batch_size=16, curriculum_epochs=1.0)
    batches = epoch_batches(examples, curriculum, 1)
    assert sorted(i for batch in batches for i in batch) == list(range(len(examples)))
    assert all(len(batch) <= 16 for batch in batches)
    longest = [max(lengths[i] for i in batch) for batch in batches]
    tenth = len(batches) // 10
    assert np.mean(longest[:tenth]) < 0.5 * np.mean(longest[-tenth:])  # short pairs first
    shuffled = [max(lengths[i] for i in batch) for batch in epoch_batches(examples, plain, 1)]
    assert abs(np.mean(shuffled[:tenth]) - np.mean(shuffled[-tenth:])) < 0.25 * np.mean(shuffled)
    assert epoch_batches(examples, curriculum, 2) == epoch_batches(examples, plain, 2)
    assert epoch_batches(examples, curriculum, 1) == batches  # the same on a resume


def test_curriculum_config_is_checked():
    from nmt.config.schema import config_from_dict
    from nmt.core.errors import NmtError

    with pytest.raises(NmtError, match=r"'train.curriculum_epochs': got -1.0, expected a number >= 0"):
        config_from_dict({"train": {"curriculum_epochs": -1}})
