"""Sequence-level knowledge distillation (data.distill_from): the teacher's translations as the
student's training targets."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.config.paths import prepared_paths
from nmt.core.errors import NmtError
from nmt.core.fileio import read_lines
from nmt.data.references import read_references
from nmt.export.package import without_local_paths
from nmt.pipelines.distill import human_targets
from nmt.pipelines.prepare import prepare
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_torch_packages, load_trained
from nmt.training.trainer import build_trainer

from .helpers import TINY_TRANSFORMER, TRANSFORMER_SCHEDULE, synthetic_pairs, tiny_config, write_anki

runner = CliRunner()


def write_config(tmp_path: Path, name: str, **sections) -> Path:
    data = tmp_path / "pairs.tsv"
    if not data.is_file():
        write_anki(data, synthetic_pairs(), attribution=True)
    raw = tiny_config(tmp_path, data, run_dir=str(tmp_path / name), **sections)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    """A teacher trained for a few epochs on the synthetic pairs (it translates some of them wrong)."""
    tmp_path = tmp_path_factory.mktemp("teacher")
    config = write_config(tmp_path, "teacher", train={"epochs": 30})
    result = runner.invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return tmp_path / "teacher"


def teacher_translations(teacher: Path | list[Path], sources: list[str]) -> list[str]:
    """The teacher's beam output for each source (a run or package, or packages ensembled), each
    distinct source translated once (search's length limit is its batch's, so a source's output
    may depend on which others are batched with it when it runs to the limit: the same batches as
    the distiller's)."""
    cpu = torch.device("cpu")
    loaded = load_torch_packages(teacher, cpu) if isinstance(teacher, list) else load_trained(teacher, cpu)
    distinct = list(dict.fromkeys(sources))
    translated = dict(zip(distinct, Translator(loaded).translate(distinct)))
    return [translated[source] for source in sources]


def student(tmp_path: Path, teacher: Path, mode: str = "replace"):
    config = load_config(write_config(tmp_path, "student", data={"distill_from": str(teacher), "distill": mode}), [])
    return config, prepared_paths(config)


def test_the_distilled_training_set_is_the_teachers_beam_output_line_for_line(tmp_path, teacher):
    config, paths = student(tmp_path, teacher)
    plain = load_config(write_config(tmp_path, "plain"), [])
    prepare(plain, log=lambda _: None)
    logged = []
    prepare(config, log=logged.append)
    sources = read_lines(paths.text("train", "src"))
    beam = teacher_translations(teacher, sources)
    plain_paths = prepared_paths(plain)
    assert sources == read_lines(plain_paths.text("train", "src"))  # the same split
    human = read_lines(plain_paths.text("train", "tgt"))
    # the teacher's beam output, in order (where it translates a source to nothing, the human target)
    assert read_lines(paths.text("train", "tgt")) == [b or h for b, h in zip(beam, human)]
    assert read_lines(human_targets(paths)) == human  # kept beside for comparison
    assert beam != human  # the teacher is not perfect: distillation changed something
    for split in ("dev", "test"):  # scored against people, as every model is
        assert read_references(paths.multi(split)) == read_references(plain_paths.multi(split))
    assert any("distinct training sources" in line and "beam 2" in line for line in logged)
    assert any("the teacher's cost" in line for line in logged)


def test_add_keeps_the_human_pairs_and_appends_the_teachers(tmp_path, teacher):
    config, paths = student(tmp_path, teacher, mode="add")
    report = prepare(config, log=lambda _: None)
    sources, targets = read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt"))
    human = read_lines(human_targets(paths))
    half = len(human)
    assert len(sources) == len(targets) == 2 * half == report.split_pairs["train"]
    assert sources[:half] == sources[half:] and targets[:half] == human
    distilled = [b or h for b, h in zip(teacher_translations(teacher, sources[:half]), human)]
    assert targets[half:] == distilled
    assert len(read_lines(paths.attribution("train"))) == 2 * half


def test_the_teacher_is_part_of_the_fingerprint(tmp_path, teacher):
    config, _ = student(tmp_path, teacher)
    prepare(config, log=lambda _: None)
    assert prepare(config, log=lambda _: None).reused
    other = tmp_path / "other-teacher"
    shutil.copytree(teacher, other)
    checkpoint = other / "checkpoints" / "best.pt"
    payload = torch.load(checkpoint, weights_only=False)
    payload["model"] = {k: v + 0.01 if v.is_floating_point() else v for k, v in payload["model"].items()}
    torch.save(payload, checkpoint)
    config.data.distill_from = str(other)
    assert not prepare(config, log=lambda _: None).reused


def test_a_student_trains_on_distilled_data(tmp_path, teacher):
    config, _ = student(tmp_path, teacher)
    prepare(config, log=lambda _: None)
    trainer = build_trainer(config, torch.device("cpu"), show_bar=False)
    trainer.run()
    assert (Path(config.run_dir) / "checkpoints" / "best.pt").is_file()


def test_a_teacher_that_is_not_a_model_or_of_another_pair_is_refused(tmp_path, teacher):
    config, _ = student(tmp_path, tmp_path / "nowhere")
    with pytest.raises(NmtError, match=r"data\.distill_from: .*nowhere is neither a run directory"):
        prepare(config, log=lambda _: None)
    raw = yaml.safe_load(write_config(tmp_path, "student-hi", data={"distill_from": str(teacher)}).read_text())
    raw["data"]["tgt_lang"] = "hi"
    path = tmp_path / "student-hi.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(NmtError, match=r"translates en -> mr, this config en -> hi"):
        prepare(load_config(path, []), log=lambda _: None)


def test_self_training_adds_the_teachers_output_for_another_files_sources_line_for_line(tmp_path, teacher):
    """data.synthetic_from: the teacher translates other sentences (dev/test sources left out), trained
    beside the human pairs (distill: keep); another teacher, another prepared set."""
    plain = load_config(write_config(tmp_path, "plain"), [])
    prepare(plain, log=lambda _: None)
    plain_paths = prepared_paths(plain)
    test_source = read_lines(plain_paths.text("test", "src"))[0]
    extra = ["You see tea.", "They eat rice.", test_source, "You see tea."]  # a test source, a repeat
    (tmp_path / "extra.txt").write_text("".join(f"{line}\tignored column\n" for line in extra), encoding="utf-8")
    data = {"distill_from": str(teacher), "distill": "keep", "synthetic_from": str(tmp_path / "extra.txt")}
    config = load_config(write_config(tmp_path, "self", data=data), [])
    logged = []
    prepare(config, log=logged.append)
    paths = prepared_paths(config)
    human_src, human_tgt = read_lines(plain_paths.text("train", "src")), read_lines(plain_paths.text("train", "tgt"))
    src, tgt = read_lines(paths.text("train", "src")), read_lines(paths.text("train", "tgt"))
    kept = extra[:2]
    assert src == human_src + kept and tgt[: len(human_tgt)] == human_tgt  # the human pairs as they were
    assert tgt[len(human_tgt) :] == teacher_translations(teacher, kept)  # then the teacher's, line for line
    assert read_lines(paths.attribution("train"))[-1].startswith("self-training: distilled by")
    assert any("2 sentences of" in line and "(self-training)" in line for line in logged)
    fingerprint = json.loads(paths.manifest.read_text())["fingerprint"]  # the file's sentences are part of it
    (tmp_path / "extra.txt").write_text("We like milk.\n", encoding="utf-8")
    prepare(config, log=lambda _: None, force=True)
    assert json.loads(paths.manifest.read_text())["fingerprint"] != fingerprint
    assert read_lines(paths.text("train", "src"))[-1] == "We like milk."
    assert prepare(config, log=lambda _: None).reused
    other = tmp_path / "other-teacher"  # the same teacher, one step further: another synthetic set
    shutil.copytree(teacher, other)
    payload = torch.load(other / "checkpoints" / "best.pt", weights_only=False)
    payload["model"] = {k: v + 0.01 if v.is_floating_point() else v for k, v in payload["model"].items()}
    torch.save(payload, other / "checkpoints" / "best.pt")
    config.data.distill_from = str(other)
    assert not prepare(config, log=lambda _: None).reused
    with pytest.raises(NmtError, match=r"'data.synthetic_from' names sentences for a teacher"):
        load_config(write_config(tmp_path, "lone", data={"synthetic_from": str(tmp_path / "extra.txt")}), [])


def test_an_ensemble_distilled_into_a_transformer_translates_on_ctranslate2_as_on_pytorch(tmp_path):
    """configs/eng-hin-distilled.yaml's recipe on a tiny scale: an ensemble (two members, as
    configs/eng-hin.yaml's four) translates the training sources and other English sentences, one
    Transformer learns from its translations beside the human pairs, and that Transformer exports
    to CTranslate2, which translates as PyTorch does."""
    pytest.importorskip("ctranslate2")
    ensemble = write_config(tmp_path, "ensemble", train={"epochs": 20, "members": 2})
    assert runner.invoke(app, ["train", "--config", str(ensemble)]).exit_code == 0
    assert len(load_trained(tmp_path / "ensemble", torch.device("cpu")).model.members) == 2  # an ensemble teaches
    other = tmp_path / "other.en"  # English the pairs do not hold, for the teacher to translate
    other.write_text("I see.\nwe like tea and rice.\nbooks, they eat.\n", encoding="utf-8")  # not S V O: no pair's
    raw = yaml.safe_load(write_config(tmp_path, "student").read_text(encoding="utf-8"))
    raw["model"] = {**TINY_TRANSFORMER, "heads": 2, "dropout": 0.0}
    raw["train"] |= {"epochs": 12, **TRANSFORMER_SCHEDULE}
    raw["data"] |= {"distill_from": str(tmp_path / "ensemble"), "distill": "add", "synthetic_from": str(other)}
    (tmp_path / "student.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    trained = runner.invoke(app, ["train", "--config", str(tmp_path / "student.yaml")])
    assert trained.exit_code == 0, trained.output
    paths = prepared_paths(load_config(tmp_path / "student.yaml"))
    human = read_lines(human_targets(paths))
    taught = read_lines(paths.attribution("train"))[len(human) :]
    assert len(taught) == len(human) + 3  # the training sources and the other sentences, each the teacher's
    assert all("distilled by" in line for line in taught) and taught[-1].startswith("self-training")
    exported = runner.invoke(
        app, ["export", str(tmp_path / "student"), str(tmp_path / "pkg"), "--ctranslate2", "--quantization", "float32"]
    )
    assert exported.exit_code == 0, exported.output
    text = "I see apples.\nwe like tea.\nthey eat rice.\n"
    outputs = {
        engine: runner.invoke(app, ["translate", "--model", str(tmp_path / "pkg"), "--engine", engine], input=text)
        for engine in ("torch", "ctranslate2")
    }
    assert outputs["torch"].exit_code == 0 and outputs["ctranslate2"].exit_code == 0, outputs["ctranslate2"].output
    assert outputs["ctranslate2"].output == outputs["torch"].output
    assert len(outputs["torch"].output.splitlines()) == 3


def test_packages_of_two_families_teach_as_one_ensemble(tmp_path, teacher):
    """data.distill_from as a list: packages ensembled as `nmt translate --model A --model B` does,
    here an RNN and a Transformer on one prepared copy (one pair of SentencePiece models); each
    package's weights are part of the fingerprint, and a run directory in a list is refused."""
    rnn = load_config(teacher / "config.yaml")
    raw = yaml.safe_load((teacher / "config.yaml").read_text(encoding="utf-8"))
    raw["model"] = {**TINY_TRANSFORMER, "heads": 2, "dropout": 0.0}
    raw["train"] |= {"epochs": 6, **TRANSFORMER_SCHEDULE}
    raw["run_dir"] = str(tmp_path / "transformer")
    raw["data"]["prepared_dir"] = str(prepared_paths(rnn).root)  # the RNN's data and tokenizers
    (tmp_path / "transformer.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert runner.invoke(app, ["train", "--config", str(tmp_path / "transformer.yaml")]).exit_code == 0
    packages = [tmp_path / "rnn-pkg", tmp_path / "transformer-pkg"]
    for run, package in zip((teacher, tmp_path / "transformer"), packages):
        assert runner.invoke(app, ["export", str(run), str(package)]).exit_code == 0
    config, paths = student(tmp_path, teacher, "replace")
    config.data.distill_from = [str(p) for p in packages]
    logged = []
    prepare(config, log=logged.append)
    human = read_lines(human_targets(paths))
    taught = teacher_translations(packages, read_lines(paths.text("train", "src")))
    assert read_lines(paths.text("train", "tgt")) == [t or h for t, h in zip(taught, human)]
    assert any(f"the teacher {packages[0]} + {packages[1]} translates" in line for line in logged)
    fingerprint = json.loads(paths.manifest.read_text())["fingerprint"]
    carried = without_local_paths(dataclasses.asdict(config))["data"]["distill_from"]  # a student's package
    assert carried == ["rnn-pkg", "transformer-pkg"]
    config.data.distill_from = [str(packages[0])]  # one member alone: another teacher
    prepare(config, log=lambda _: None)
    assert json.loads(paths.manifest.read_text())["fingerprint"] != fingerprint
    config.data.distill_from = [str(packages[0]), str(teacher)]
    with pytest.raises(NmtError, match=r"an ensemble of model packages; .*teacher is not one"):
        prepare(config, log=lambda _: None, force=True)
