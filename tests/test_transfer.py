"""Starting from a parent model (init_from): continued training, fine-tuning and transfer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.core.errors import NmtError
from nmt.model.rnn.model import FED_WEIGHT
from nmt.pipelines.prepare import prepare
from nmt.runtime.loading import load_tokenizers, new_model, trained_weights_files
from nmt.runtime.parent import composed_pieces, load_parent, shared_pieces
from nmt.training.trainer import build_trainer

from .helpers import local_client, random_sources, synthetic_pairs, tiny_config, write_anki

runner = CliRunner()


def nmt(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def write_config(tmp_path: Path, name: str, pairs, tgt_lang: str = "mr", **sections) -> Path:
    data = write_anki(tmp_path / f"{name}.tsv", pairs)
    raw = tiny_config(tmp_path, data, run_dir=str(tmp_path / name), **sections)
    raw["data"]["tgt_lang"] = tgt_lang
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def hindi_like(pairs):
    """Another target language in the same script: other words for some, the same for others."""
    swap = {"पाहतो": "देखता", "आवडते": "पसंद", "खातो": "खाता", "पाणी": "पानी", "भात": "चावल"}
    changed = []
    for src, tgt in pairs:
        for old, new in swap.items():
            tgt = tgt.replace(old, new)
        changed.append((src, tgt))
    return changed


@pytest.fixture(scope="module")
def parent_run(tmp_path_factory) -> Path:
    """An English->Marathi parent, trained for a few epochs, with its test scores."""
    tmp_path = tmp_path_factory.mktemp("parent")
    config = write_config(tmp_path, "parent", synthetic_pairs(), train={"epochs": 4})
    nmt("train", "--config", str(config))
    nmt("evaluate", "--config", str(config))
    return tmp_path / "parent"


def child_trainer(tmp_path: Path, parent: Path, tgt_lang: str = "hi", **sections):
    pairs = hindi_like(synthetic_pairs(seed=1)) if tgt_lang == "hi" else synthetic_pairs(seed=1)
    config = load_config(write_config(tmp_path, "child", pairs, tgt_lang=tgt_lang, **sections), [])
    config.init_from = str(parent)
    prepare(config, log=lambda _: None)
    return build_trainer(config, torch.device("cpu"), show_bar=False)


def test_a_child_of_another_pair_keeps_the_parents_rows_for_shared_pieces(tmp_path, parent_run):
    parent = load_parent(parent_run)
    trainer = child_trainer(tmp_path, parent_run)
    src_tok, tgt_tok = trainer.src_tok, trainer.tgt_tok
    assert src_tok.sha256 == parent.src_tok.sha256  # English: the parent's tokenizer as it is
    state = trainer.model.state_dict()
    assert torch.equal(state["encoder.embedding.weight"], parent.weights["encoder.embedding.weight"])
    assert torch.equal(state["encoder.rnn.weight_hh_l0"], parent.weights["encoder.rnn.weight_hh_l0"])
    child_ids, parent_ids = shared_pieces(tgt_tok, parent.tgt_tok)
    assert tgt_tok.sha256 != parent.tgt_tok.sha256  # measured: a new one cuts "Hindi" into fewer pieces
    assert 4 <= len(child_ids) < tgt_tok.vocab_size
    composed = composed_pieces(tgt_tok, parent.tgt_tok, set(child_ids))
    assert composed  # a new piece is made of the parent's, and starts as their mean
    for name in ("decoder.embedding.weight", "decoder.output.weight", "decoder.output.bias"):
        assert torch.equal(state[name][child_ids], parent.weights[name][parent_ids]), name
        for child_id, parts in composed.items():
            assert torch.allclose(state[name][child_id], parent.weights[name][parts].mean(0)), name
    log = trainer.run_dir.train_log
    trainer.run()
    text = log.read_text(encoding="utf-8")
    assert "Started from the parent" in text and "The parent as it is, on this dev set" in text
    # a fresh start: the child's own steps and best score, not the parent's
    saved = torch.load(trainer.run_dir.checkpoint("last"), weights_only=True)
    assert saved["progress"]["step"] == trainer.progress.step and saved["progress"]["epoch"] == 2
    assert all(s["step"] == trainer.progress.step for s in saved["optimizer"]["state"].values())
    assert saved["parent"]["name"] == "parent" and saved["parent"]["pair"] == "en-mr"
    assert saved["parent"]["test_bleu"] is not None
    timeline = [json.loads(line)["epoch"] for line in trainer.run_dir.timeline.read_text().splitlines()]
    assert timeline[:2] == [0, 1]  # the lab's timeline starts at the parent


def test_continued_training_of_the_same_pair_takes_both_tokenizers(tmp_path, parent_run):
    trainer = child_trainer(tmp_path, parent_run, tgt_lang="mr")
    parent = load_parent(parent_run)
    assert (trainer.src_tok.sha256, trainer.tgt_tok.sha256) == (parent.src_tok.sha256, parent.tgt_tok.sha256)
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor, parent.weights[name]), name
    assert trainer.progress.best_bleu == -1.0 and trainer.optimizer.state == {}


def test_a_package_is_a_parent_and_the_childs_card_and_api_name_it(tmp_path, parent_run):
    package = tmp_path / "package"
    nmt("export", str(parent_run), str(package))
    child = write_config(tmp_path, "child", hindi_like(synthetic_pairs(seed=1)), tgt_lang="hi")
    nmt("prepare", "--config", str(child), "--init-from", str(package))
    nmt("train", "--config", str(child), "--init-from", str(package))
    out = nmt("translate", "--config", str(child), "--text", "I see apples.")
    assert len(out.splitlines()) == 1  # its translation (a child of two epochs may translate to nothing)
    child_package = tmp_path / "child-package"
    nmt("export", str(tmp_path / "child"), str(child_package))
    card = (child_package / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "**Parent**: trained from `package` (en-mr" in card and "test BLEU" in card

    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import load_packages
    from nmt.serve.app import build_app

    served = local_client(build_app({"child": Translator(load_packages([child_package], torch.device("cpu")))}))
    (info,) = served.get("/api/models").json()["models"]
    assert info["parent"]["name"] == "package" and info["parent"]["pair"] == "en-mr"


@pytest.mark.parametrize("parts", [["encoder"], ["embeddings", "attention"]])
def test_frozen_parts_stay_bit_identical_to_the_parent(tmp_path, parent_run, parts):
    trainer = child_trainer(tmp_path, parent_run, tgt_lang="mr", train={"epochs": 2, "freeze": parts})
    parent = load_parent(parent_run)
    trainer.run()
    prefixes = tuple(prefix for part in parts for prefix in trainer.model.freezable[part])
    moved = []
    for name, tensor in trainer.model.state_dict().items():
        if name.startswith(prefixes):
            assert torch.equal(tensor, parent.weights[name]), name
        elif not torch.equal(tensor, parent.weights[name]):
            moved.append(name)
    assert moved  # the rest did train


def test_a_parent_of_another_architecture_names_each_difference(tmp_path, parent_run):
    with pytest.raises(NmtError) as error:
        child_trainer(tmp_path, parent_run, model={"embed_dim": 48, "attention": "luong-dot", "decoder_hidden": 64})
    message = str(error.value)
    assert "model.embed_dim: parent has 32, config has 48" in message
    assert "model.attention: parent has 'bahdanau', config has 'luong-dot'" in message
    assert "model.decoder_hidden: parent has 32, config has 64" in message


LUONG = {"attention": "luong-concat", "input_feeding": False}


@pytest.fixture(scope="module")
def luong_parent_run(tmp_path_factory) -> Path:
    """A Luong parent without input feeding (the fast decoder), trained for an epoch."""
    tmp_path = tmp_path_factory.mktemp("luong-parent")
    config = write_config(tmp_path, "parent", synthetic_pairs(), model=LUONG, train={"epochs": 1})
    nmt("train", "--config", str(config))
    return tmp_path / "parent"


def assert_starts_as_the_parent(trainer, parent) -> None:
    """The child's logits are the parent's on random sentences (both vocabularies the parent's)."""
    reference = new_model(parent.config, parent.src_tok, parent.tgt_tok)
    reference.load_state_dict(parent.weights)
    src, src_lengths = random_sources(4, vocab=parent.src_tok.vocab_size)
    tgt_in, _ = random_sources(4, vocab=parent.tgt_tok.vocab_size, seed=1)
    trainer.model.eval()
    reference.eval()
    with torch.no_grad():
        child_logits, _ = trainer.model(src, src_lengths, tgt_in)
        parent_logits, _ = reference(src, src_lengths, tgt_in)
    torch.testing.assert_close(child_logits, parent_logits, rtol=1e-5, atol=1e-5)


def test_a_child_may_add_input_feeding_and_starts_as_the_parent(tmp_path, luong_parent_run):
    """The fed columns of the decoder's input weights start at zero: the child's logits are the
    parent's until it trains (continued training, so both vocabularies are the parent's)."""
    trainer = child_trainer(tmp_path, luong_parent_run, tgt_lang="mr", model={**LUONG, "input_feeding": True})
    parent = load_parent(luong_parent_run)
    state = trainer.model.state_dict()
    fed = state[FED_WEIGHT]  # (3·H, E + O)
    embed_dim = parent.config.model.embed_dim
    assert fed.shape[1] == embed_dim + parent.config.model.output_dim
    assert torch.equal(fed[:, :embed_dim], parent.weights[FED_WEIGHT]) and not fed[:, embed_dim:].any()
    assert any("input feeding added" in note for note in trainer.notes)
    assert_starts_as_the_parent(trainer, parent)


def test_a_child_may_add_the_lexical_model_and_starts_as_the_parent(tmp_path, luong_parent_run):
    """model.lexical's tensors are new to the parent; its output starts at zero, so the child's
    logits are the parent's until it trains, and the term then learns (its output moves)."""
    trainer = child_trainer(tmp_path, luong_parent_run, tgt_lang="mr", model={**LUONG, "lexical": True})
    parent = load_parent(luong_parent_run)
    lexical = trainer.model.decoder.lexical
    assert lexical is not None and not lexical.output.weight.any() and not lexical.output.bias.any()
    assert any("lexical model added" in note for note in trainer.notes)
    assert_starts_as_the_parent(trainer, parent)
    trainer.run()
    assert trainer.model.decoder.lexical.output.weight.abs().sum() > 0


@pytest.mark.parametrize("key", ["input_feeding", "lexical"])
def test_a_child_may_not_drop_what_its_parent_added(tmp_path, luong_parent_run, key):
    """The other way round, the parent's fed columns or lexical model would be dropped: refused,
    naming the key."""
    added = write_config(tmp_path, "added", synthetic_pairs(), model={**LUONG, key: True}, train={"epochs": 1})
    nmt("prepare", "--config", str(added), "--init-from", str(luong_parent_run))
    nmt("train", "--config", str(added), "--init-from", str(luong_parent_run))
    (tmp_path / "child").mkdir()
    with pytest.raises(NmtError, match=rf"model\.{key}: parent has True, config has False"):
        child_trainer(tmp_path / "child", tmp_path / "added", tgt_lang="mr", model=LUONG)


def test_a_damaged_parent_or_no_model_is_refused_and_nothing_is_written(tmp_path, parent_run):
    damaged = tmp_path / "damaged"
    nmt("export", str(parent_run), str(damaged))
    (damaged / "model.safetensors").write_bytes(b"not a safetensors file")
    plain = tmp_path / "plain"
    plain.mkdir()
    child = write_config(tmp_path, "child", hindi_like(synthetic_pairs(seed=1)), tgt_lang="hi")
    ensemble = tmp_path / "ensemble"  # a train.members run: one folder per member
    for k in (1, 2):
        shutil.copytree(parent_run, ensemble / f"member-{k}")
    shutil.copy(parent_run / "config.yaml", ensemble / "config.yaml")
    refusals = (
        (damaged, "Cannot read the weights"),
        (plain, "neither a run directory"),
        (
            ensemble,
            f"an ensemble of 2 members (train.members); a parent is one model: start from one of them, "
            f"e.g. {ensemble / 'member-1'}",
        ),
    )
    for parent, expected in refusals:
        result = runner.invoke(app, ["prepare", "--config", str(child), "--init-from", str(parent)])
        assert result.exit_code != 0 and expected in result.output and "Traceback" not in result.output
        assert not (tmp_path / "child" / "data").exists()
    broken = tmp_path / "broken-run"
    nmt("export", str(parent_run), str(tmp_path / "unused"))  # (the run itself stays intact)
    (broken / "checkpoints").mkdir(parents=True)
    (broken / "config.yaml").write_text((parent_run / "config.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (broken / "checkpoints" / "best.pt").write_bytes(b"\x00" * 100)
    result = runner.invoke(app, ["prepare", "--config", str(child), "--init-from", str(broken)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "damaged" in result.output or "Cannot read" in result.output


def test_shared_pieces_pair_the_same_strings(tmp_path, parent_run):
    parent = load_parent(parent_run)
    trainer_config = load_config(parent_run / "config.yaml", [])
    src_tok, _ = load_tokenizers(trainer_config)
    child_ids, parent_ids = shared_pieces(src_tok, parent.src_tok)
    assert child_ids == parent_ids == list(range(src_tok.vocab_size))  # the same model: every piece


SHARED_HINDI = Path(__file__).resolve().parents[1] / "data" / "eng-hin" / "hin.txt"


@pytest.mark.slow
def test_the_shipped_eng_hin_configs_prepare_and_train_on_the_shared_file(tmp_path, parent_run):
    """configs/eng-hin-scratch.yaml, configs/eng-hin.yaml and configs/eng-hin-mixed.yaml (beside
    the shipped eng-mar corpus) on the real 2,549-pair file, with the model cut to the tiny
    parent's size so that the run takes seconds."""
    root = Path(__file__).resolve().parents[1]
    parent_model = yaml.safe_load((parent_run / "config.yaml").read_text(encoding="utf-8"))["model"]
    sizes = (
        "embed_dim",
        "encoder_hidden",
        "decoder_hidden",
        "attention_dim",
        "output_dim",
        "attention",
        "input_feeding",
    )
    tiny = [f"model.{key}={str(parent_model[key]).lower()}" for key in sizes]
    budget = ["train.max_minutes=0", "train.epochs=1"]  # an epoch, not a budget: seconds on any machine
    # epoch 3 starts past 60 %: alone; a tenth of the config's eng-mar pairs an epoch and the Hindi ones
    # once, not three times, for seconds
    alone_at_3 = ["train.max_minutes=0", "train.epochs=3", "train.probes=0", "train.related_per_epoch=300"]
    alone_at_3 += ["data.oversample=1"]
    runs = [("eng-hin-scratch", budget), ("eng-hin", [f"init_from={parent_run}", *budget])]
    for name, extra in [*runs, ("eng-hin-mixed", [f"init_from={parent_run}", *alone_at_3])]:
        overrides = [*tiny, *extra, f"run_dir={tmp_path / name}", f"data.path={SHARED_HINDI}"]
        sets = [part for override in overrides for part in ("--set", override)]
        config = str(root / "configs" / f"{name}.yaml")
        prepared = nmt("prepare", "--config", config, *sets)
        assert "Skipped the header row" in prepared or "header" in prepared.lower()
        nmt("train", "--config", config, *sets)
        assert all(best.is_file() for best in trained_weights_files(tmp_path / name))
    children = trained_weights_files(tmp_path / "eng-hin")
    assert len(children) == 4  # configs/eng-hin.yaml trains four children and ensembles them
    for best in children:
        assert torch.load(best, weights_only=True)["parent"]["pair"] == "en-mr"
    mixed = (tmp_path / "eng-hin-mixed" / "train.log").read_text(encoding="utf-8")
    assert "tgt vocabulary new: " in mixed and "Epoch " in mixed and "training pairs alone" in mixed


def test_a_mixed_child_keeps_the_parents_vocabularies_extended(tmp_path, parent_run):
    """Related corpora from a parent of the related target (mixed fine-tuning): the source is the
    parent's tokenizer with the tags appended, the target the parent's with the pair's own pieces
    appended; every parent piece keeps its id, so its rows carry over whole."""
    parent = load_parent(parent_run)
    related = write_anki(tmp_path / "mar.tsv", synthetic_pairs(seed=2))
    trainer = child_trainer(tmp_path, parent_run, data={"related": {"mr": str(related)}, "oversample": 2})
    src_tok, tgt_tok = trainer.src_tok, trainer.tgt_tok
    assert src_tok.vocab_size == parent.src_tok.vocab_size + 2  # <2hi>, <2mr>
    assert src_tok.piece_ids(["<2hi>", "<2mr>"]) == [parent.src_tok.vocab_size, parent.src_tok.vocab_size + 1]
    english = "I see the tea ."
    assert (
        src_tok.encode([f"<2hi> {english}"])[0][-len(parent.src_tok.encode([english])[0]) :]
        == (parent.src_tok.encode([english])[0])
    )  # the English after the tag is cut as the parent cut it
    parent_pieces = parent.tgt_tok.id_to_piece(list(range(parent.tgt_tok.vocab_size)))
    assert tgt_tok.id_to_piece(list(range(parent.tgt_tok.vocab_size))) == parent_pieces
    assert tgt_tok.vocab_size > parent.tgt_tok.vocab_size  # Hindi's own pieces, appended
    state = trainer.model.state_dict()
    for name, side in (("encoder.embedding.weight", "src"), ("decoder.output.weight", "tgt")):
        rows = parent.tokenizer(side).vocab_size
        assert torch.equal(state[name][:rows], parent.weights[name]), name
