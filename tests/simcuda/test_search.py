"""Search and validation on the simulated CUDA device: the CPU's results, and the host read
only where the code says it reads (one read per decoding step, one at the end)."""

from __future__ import annotations

import pytest
import torch

from nmt.config.files import load_config
from nmt.decoding.rules import Ranking
from nmt.decoding.search import beam_search, greedy_search
from nmt.model.base import build_model
from nmt.pipelines.prepare import prepare
from nmt.training.trainer import build_trainer

from ..helpers import model_settings, random_sources, small_model
from .conftest import write_config
from .simulator import SimulatedCuda

# Where search may read the device: once per decoding step (greedy: its tokens and their
# log-probabilities; beam: how many hypotheses end in each sentence, and whether its best does),
# and at the end (beam: every hypothesis set aside, in one copy; the attention asked for, in one).
SEARCH_READS = {"nmt/decoding/search.py::greedy_search", "nmt/decoding/search.py::set_aside"}
AT_THE_END = {"nmt/decoding/search.py::ended", "nmt/decoding/search.py::_attention_on_host"}
# Validation: each chunk's dev loss (one read per 1,024 dev pairs), then the searches.
VALIDATION_READS = {"nmt/training/validate.py::validate", *SEARCH_READS}


class CountingSteps:
    """A model whose decoding steps are counted (a host read may come once per step)."""

    def __init__(self, model):
        self.wrapped, self.steps = model, 0

    def encode(self, src, src_lengths):
        return self.wrapped.encode(src, src_lengths)

    def decode_step(self, prev, state, memory):
        self.steps += 1
        return self.wrapped.decode_step(prev, state, memory)


SEARCHES = {
    "greedy": dict(beam_size=1),
    "greedy-repeat-guard-attention": dict(beam_size=1, no_repeat_span=2, with_attention=True),
    "beam": dict(beam_size=4, n_best=2),
    "beam-coverage-attention": dict(beam_size=3, ranking=Ranking(0.6, "gnmt", 0.4), with_attention=True),
    "beam-repeat-guard-short-limit": dict(beam_size=5, no_repeat_span=3, max_len=4),
}


def search(model, src, lengths, beam_size, max_len=10, **options):
    if beam_size == 1:
        options.pop("n_best", None)
        return greedy_search(model, src, lengths, max_len, **options)
    return beam_search(model, src, lengths, beam_size, max_len, **options)


@pytest.mark.parametrize("name", list(SEARCHES))
@pytest.mark.parametrize("cell", ["gru", "lstm", "transformer"])
def test_search_on_cuda_finds_the_cpus_hypotheses_reading_once_a_step(name, cell):
    options = SEARCHES[name]

    def model():  # the same weights each time (moved to cuda before any use, as a run does)
        if cell == "transformer":
            torch.manual_seed(3)
            config = model_settings(
                arch="transformer", embed_dim=16, heads=4, ff_dim=32, encoder_layers=2, decoder_layers=2, dropout=0.0
            )
            return build_model(config, 20, 20).eval()
        return small_model(seed=3, rnn=cell, attention="luong-general", input_feeding=True).eval()

    src, lengths = random_sources(12, seed=5)
    on_cpu = search(model(), src, lengths, **options)
    with SimulatedCuda(strict=True, allowed_syncs=SEARCH_READS | AT_THE_END) as mode:
        counted = CountingSteps(model().to("cuda"))
        on_cuda = search(counted, src.to("cuda"), lengths, **options)
    for cpu_hypotheses, cuda_hypotheses in zip(on_cpu, on_cuda, strict=True):
        assert [h.tokens for h in cuda_hypotheses] == [h.tokens for h in cpu_hypotheses]
        for cpu, cuda in zip(cpu_hypotheses, cuda_hypotheses):
            assert cuda.token_logprobs == pytest.approx(cpu.token_logprobs, abs=1e-5)
            assert cuda.score == pytest.approx(cpu.score, abs=1e-5)
            if cpu.attention is not None:
                torch.testing.assert_close(cuda.attention, cpu.attention, atol=1e-6, rtol=0)
    per_step = [s for s in mode.syncs if s.function in SEARCH_READS]
    assert 0 < len(per_step) <= counted.steps
    at_end = [s.function for s in mode.syncs if s.function in AT_THE_END]
    assert at_end.count("nmt/decoding/search.py::ended") == (options["beam_size"] > 1)
    assert at_end.count("nmt/decoding/search.py::_attention_on_host") == bool(options.get("with_attention"))


def test_validation_on_cuda_reads_the_dev_loss_once_and_scores_as_the_cpu(tmp_path):
    config = load_config(write_config(tmp_path, precision="float32"))
    prepare(config, log=lambda _: None)
    on_cpu = build_trainer(config, torch.device("cpu"), show_bar=False).validate()
    with SimulatedCuda(strict=False) as mode:
        trainer = build_trainer(config, torch.device("cuda"), show_bar=False)
        mode.strict, mode.allowed = True, VALIDATION_READS
        on_cuda = trainer.validate()
        mode.strict = False
    assert on_cuda == pytest.approx(on_cpu, rel=1e-5)
    in_training = [s.function for s in mode.syncs if s.function.startswith("nmt/training/")]
    assert in_training == ["nmt/training/validate.py::validate"]
