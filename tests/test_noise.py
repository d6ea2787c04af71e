"""nmt/data/noise.py: the noise on synthetic sources (words dropped, the rest shuffled locally)."""

from __future__ import annotations

import random

from nmt.data.noise import SHUFFLE_WITHIN, noisy_words

SENTENCE = " ".join(f"w{i}" for i in range(12))  # distinct words: where each one went can be read


def test_no_noise_returns_the_sentence_as_it_is():
    text = "Tom  isn't   here ."  # not even its spaces are touched
    assert noisy_words(text, 0.0, random.Random(1)) == text
    assert noisy_words("", 0.3, random.Random(1)) == ""


def test_words_are_dropped_at_the_rate_asked_and_one_is_always_kept():
    rng = random.Random(3)
    kept = [len(noisy_words(SENTENCE, 0.2, rng).split()) for _ in range(2000)]
    assert 0.77 < sum(kept) / (12 * len(kept)) < 0.83  # 80 % of the words kept
    assert all(len(noisy_words("one two", 0.99, rng).split()) == 1 for _ in range(200))


def test_a_kept_word_moves_fewer_than_shuffle_within_places_among_the_kept():
    rng = random.Random(5)
    moved = set()
    for _ in range(2000):
        words = noisy_words(SENTENCE, 0.1, rng).split()
        order = sorted(words, key=lambda word: int(word[1:]))  # where each would stand unshuffled
        for place, word in enumerate(words):
            moved.add(abs(place - order.index(word)))
    assert moved == set(range(SHUFFLE_WITHIN))  # 0, 1 and 2 places, never 3


def test_the_same_seed_draws_the_same_noise():
    first = [noisy_words(SENTENCE, 0.1, rng) for rng in [random.Random(9)] for _ in range(20)]
    again = [noisy_words(SENTENCE, 0.1, rng) for rng in [random.Random(9)] for _ in range(20)]
    assert first == again and len(set(first)) > 1
