"""Training-batch regularisers do what they say and nothing else."""

import torch

from nmt.data.batching import Example, collate
from nmt.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from nmt.train.regularise import word_dropout


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
