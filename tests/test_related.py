"""Related corpora trained beside the user's pair (``data.related``, nmt/data/related.py): tags
as single pieces, this pair oversampled (counted), dev/test kept clean, a balanced tokenizer
sample, and a model that translates into the target it is asked for."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.parsing import config_from_dict
from nmt.config.paths import prepared_paths, run_paths
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines
from nmt.data.references import read_references
from nmt.data.tokenizer import Tokenizer
from nmt.pipelines.prepare import prepare
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_checkpoints
from nmt.training.trainer import build_trainer

from .helpers import synthetic_pairs, tiny_config, write_anki

MARKER = "झाले"  # every sentence of the related corpus ends with this word: which target came out shows


def related_config(tmp_path: Path, **train) -> dict:
    pairs = synthetic_pairs(seed=0)
    user = write_anki(tmp_path / "hin.txt", pairs[::2])  # half the sentences: the small pair
    related = write_anki(tmp_path / "mar.txt", [(s, f"{t[:-1]} {MARKER}.") for s, t in pairs])  # all of them
    raw = tiny_config(tmp_path, user, train={"epochs": 2, "patience": 0, **train})
    raw["data"] |= {"tgt_lang": "hi", "related": {"mr": str(related)}, "oversample": 3}
    return raw


def test_prepare_mixes_the_related_corpus_with_tags_and_keeps_dev_and_test_clean(tmp_path):
    config = config_from_dict(related_config(tmp_path))
    report = prepare(config, log=lambda _: None, show_bar=False)
    paths = prepared_paths(config)
    src = read_lines(paths.text("train", "src"))
    own, related = [s for s in src if s.startswith("<2hi> ")], [s for s in src if s.startswith("<2mr> ")]
    assert len(own) + len(related) == len(src) == report.split_pairs["train"]
    tgt = read_lines(paths.text("train", "tgt"))
    own_pairs = Counter((s, t) for s, t in zip(src, tgt) if s.startswith("<2hi> "))
    assert set(own_pairs.values()) == {3} and len(related) == report.related["pairs"]["mr"]  # oversampled 3 times
    held = set(read_lines(paths.text("dev", "src"))) | set(read_lines(paths.text("test", "src")))
    assert not {s.removeprefix("<2mr> ") for s in related} & held  # a dev/test source is never trained on
    assert report.related["held_out"]["mr"] >= len(held) and report.related["test_sources_in_related"] > 0
    assert len(read_lines(paths.attribution("train"))) == len(src)  # still line-aligned
    assert read_references(paths.multi("test")).sources[0].startswith("<2") is False  # the user's text as it is
    tokenizer = Tokenizer(paths.spm("src"))
    assert [tokenizer.id_to_piece([i])[0] for i in tokenizer.piece_ids(["<2hi>", "<2mr>"])] == ["<2hi>", "<2mr>"]
    assert tokenizer.piece_ids(["<2hi>"])[0] in tokenizer.encode(["<2hi> I see tea."])[0]  # one piece, not cut
    own_sample = report.tokenizer_pairs - report.related["src_sample"]  # the pair's share of the tokenizers' sample
    assert report.related["tgt_sample"] == min(own_sample, report.related["pairs"]["mr"]) > 0  # balanced


def test_a_model_of_two_targets_translates_into_the_one_asked_for(tmp_path):
    config = config_from_dict(related_config(tmp_path, epochs=12, learning_rate=0.01))
    prepare(config, log=lambda _: None, show_bar=False)
    build_trainer(config, torch.device("cpu"), show_bar=False, echo=False).run()
    loaded = load_checkpoints(config, ["best"], torch.device("cpu"))
    sources = [s for s, _ in synthetic_pairs(seed=0)[:40]]
    into_hindi = Translator(loaded).translate(sources)
    into_marathi = Translator(loaded, "mr").translate(sources)
    marked = [sum(MARKER in line for line in lines) for lines in (into_hindi, into_marathi)]
    assert marked[1] >= 30 and marked[0] <= 10, marked  # the tag decides which language comes out
    with pytest.raises(NmtError, match=r"--tgt-lang xx: this model translates en into hi, mr only"):
        Translator(loaded, "xx")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(related_config(tmp_path, epochs=12, learning_rate=0.01)))
    command = ["translate", "--config", str(tmp_path / "c.yaml"), "--text", sources[0]]
    said = CliRunner().invoke(app, [*command, "--tgt-lang", "mr"])
    assert said.exit_code == 0 and said.stdout.strip() == into_marathi[0]
    refused = CliRunner().invoke(app, [*command, "--tgt-lang", "xx"])
    assert refused.exit_code == 1 and "translates en into hi, mr only" in refused.output


def test_the_related_keys_are_checked_and_leave_a_single_target_config_as_it_was(tmp_path):
    raw = related_config(tmp_path)
    raw["data"]["related"] = {"hi": "x.txt"}
    with pytest.raises(NmtError, match=r"'data.related': 'hi' -> 'x.txt': expected a target language other than"):
        config_from_dict(raw)
    raw["data"] |= {"related": {"mr": str(tmp_path / "mar.txt")}, "oversample": 1, "related_pairs": 20}
    config = config_from_dict(raw)
    report = prepare(config, log=lambda _: None, show_bar=False)  # a seeded sample of the related corpus
    assert report.related["pairs"]["mr"] == 20
    tagged_mr = [s for s in read_lines(prepared_paths(config).text("train", "src")) if s.startswith("<2mr> ")]
    assert len(tagged_mr) == 20
    raw["data"] |= {"related": {}, "related_pairs": 0}
    config = config_from_dict(raw)
    assert config.data.targets == ["hi"]
    prepare(config, log=lambda _: None, show_bar=False)
    assert not any(s.startswith("<2") for s in read_lines(prepared_paths(config).text("train", "src")))


def test_an_epoch_draws_related_pairs_afresh_and_a_last_phase_trains_the_pair_alone(tmp_path):
    from nmt.config.schema import TrainConfig
    from nmt.data.tokenizer import target_tag
    from nmt.training.data import epoch_examples

    config = config_from_dict(related_config(tmp_path, epochs=4, related_until=0.5, related_per_epoch=5))
    prepare(config, log=lambda _: None, show_bar=False)
    trainer = build_trainer(config, torch.device("cpu"), show_bar=False, echo=False)
    data, lead = trainer.data, target_tag("hi")
    src = read_lines(prepared_paths(config).text("train", "src"))
    own_rows = {row for row, line in enumerate(src) if line.startswith(f"{lead} ")}
    assert int(data.own.sum()) == len(own_rows) > 0  # this pair's pairs, oversampled ones counted

    def rows(epoch: int, own_only: bool = False, **cfg) -> list[int]:
        examples = epoch_examples(data, trainer.src_tok, trainer.tgt_tok, TrainConfig(**cfg), epoch, own_only)
        return [int(row) for row in examples.kept]

    first, again, second = rows(1, related_per_epoch=5), rows(1, related_per_epoch=5), rows(2, related_per_epoch=5)
    for drawn in (first, second):
        assert own_rows <= set(drawn) and len(set(drawn) - own_rows) == 5  # all of the pair's, 5 related ones
    assert first == again and set(first) != set(second)  # seeded by the epoch: drawn afresh each epoch
    assert set(rows(1, own_only=True)) == own_rows
    assert len(rows(1)) == len(data.train)  # neither key: every prepared pair
    progress = trainer.run()
    assert progress.own_pair_since == 3  # half of 4 epochs spent when epoch 3 starts
    assert "Epoch 3 on: this pair's" in run_paths(config).train_log.read_text(encoding="utf-8")


def test_the_related_schedule_needs_related_corpora(tmp_path):
    raw = related_config(tmp_path, related_until=0.5)
    raw["data"]["related"] = {}
    with pytest.raises(NmtError, match=r"'train.related_until' chooses which related pairs .* names no related corpus"):
        config_from_dict(raw)
    raw = related_config(tmp_path, related_per_epoch=10, subword_sampling=0.1)
    with pytest.raises(NmtError, match=r"'train.related_per_epoch' works on the prepared segmentation"):
        config_from_dict(raw)
    with pytest.raises(NmtError, match=r"train.related_until"):
        config_from_dict(related_config(tmp_path, related_until=1.5))
