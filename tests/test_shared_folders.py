"""A class's folder of models: packages whose settings must match their weights, no write through
a link in a run folder or an example's files, a model's size checked before it is built, a
package without this machine's paths, and the smaller findings of the third probe."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.files import load_config
from nmt.config.parsing import config_from_dict
from nmt.core.errors import NmtError
from nmt.core.fileio import sha256_file
from nmt.core.locking import LOCK_NAME, holding
from nmt.pipelines.prepare import prepare
from nmt.runtime import loading
from nmt.runtime.loading import load_trained
from nmt.training.callbacks import Callback
from nmt.training.metrics import MetricsFile
from nmt.training.state import TrainingInterrupted
from nmt.training.trainer import build_trainer

from .helpers import synthetic_pairs, tiny_config, write_anki

runner = CliRunner()


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """A tiny trained Transformer, its config, and a package of it."""
    root = tmp_path_factory.mktemp("folders")
    data = write_anki(root / "pairs.tsv", synthetic_pairs())
    model = dict(arch="transformer", embed_dim=32, heads=4, ff_dim=64, encoder_layers=1, decoder_layers=1)
    train = dict(epochs=1, lr_schedule="inverse_sqrt", lr_warmup=20, learning_rate=0.003)
    raw = tiny_config(root, data, run_dir=str(root / "run"), model=model, train=train)
    config = root / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    for args in (["train", "--config", str(config)], ["export", str(root / "run"), str(root / "package")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    return {"root": root, "config": config, "run": root / "run", "package": root / "package", "data": data}


def copy_package(trained, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(trained["package"], tmp_path / "package"))


@pytest.mark.parametrize(
    "key, value", [("heads", 1), ("heads", 2), ("heads", 8), ("tie_embeddings", True), ("positions", "learned")]
)
def test_a_package_whose_config_does_not_describe_its_weights_is_refused(trained, tmp_path, key, value):
    """Before: heads 4 -> 2 in a package's config.yaml loaded silently and translated garbage."""
    package = copy_package(trained, tmp_path)
    config = yaml.safe_load((package / "config.yaml").read_text(encoding="utf-8"))
    if config["model"].get(key) == value:
        pytest.skip(f"{key} is {value} already")
    config["model"][key] = value
    (package / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(NmtError, match=rf"model\.{key}: the weights were exported with .*, config has {value!r}"):
        load_trained(package, torch.device("cpu"))


def relabel_dtype(path: Path, tensor: str, dtype: str) -> None:
    """Rewrite one tensor's dtype in a safetensors header (same byte size: F32 -> I32)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header[tensor]["dtype"] = dtype
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (length - len(encoded))  # the same length: offsets stay right
    assert len(encoded) == length
    path.write_bytes(data[:8] + encoded + data[8 + length :])


def test_a_weights_header_relabelled_to_another_dtype_is_refused(trained, tmp_path):
    package = copy_package(trained, tmp_path)
    weights = package / "model.safetensors"
    (length,) = struct.unpack("<Q", weights.read_bytes()[:8])
    header = json.loads(weights.read_bytes()[8 : 8 + length])
    name = next(key for key, value in header.items() if key != "__metadata__" and value["dtype"] == "F32")
    relabel_dtype(weights, name, "I32")
    with pytest.raises(NmtError, match=r"model\.safetensors is not the file `nmt export` wrote"):
        load_trained(package, torch.device("cpu"))  # its hash, first
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest["files_sha256"]["model.safetensors"] = sha256_file(weights)  # a crafter who edits both
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(NmtError, match=rf"{name}: stored as I32, the model takes F32"):
        load_trained(package, torch.device("cpu"))


def test_a_package_carries_no_path_of_this_machine(trained):
    root = str(trained["root"])
    for name in ("config.yaml", "MODEL_CARD.md", "manifest.json"):
        text = (trained["package"] / name).read_text(encoding="utf-8")
        assert root not in text, name
    config = yaml.safe_load((trained["package"] / "config.yaml").read_text(encoding="utf-8"))
    assert config["data"]["path"] == "pairs.tsv" and config["run_dir"] == "." and config["data"]["prepared_dir"] == "."
    assert load_trained(trained["package"], torch.device("cpu")).config.run_dir == str(trained["package"])


# ---- no write through a link ----


def test_a_linked_train_log_is_refused_and_its_target_untouched(trained, tmp_path):
    import shutil

    run = Path(shutil.copytree(trained["run"], tmp_path / "run"))
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n", encoding="utf-8")
    (run / "train.log").unlink()
    (run / "train.log").symlink_to(target)
    raw = yaml.safe_load(trained["config"].read_text(encoding="utf-8"))
    raw["run_dir"], raw["data"]["prepared_dir"] = str(run), str(trained["run"] / "data")
    raw["train"]["epochs"] = 2
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = runner.invoke(app, ["train", "--config", str(config), "--resume"])
    assert result.exit_code == 1 and "train.log is a symbolic link" in result.output, result.output
    assert target.read_text(encoding="utf-8") == "keep me\n"


def test_a_linked_eval_folder_is_refused_and_nothing_is_written_there(trained, tmp_path):
    import shutil

    run = Path(shutil.copytree(trained["run"], tmp_path / "run"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(run / "eval", ignore_errors=True)
    (run / "eval").symlink_to(elsewhere, target_is_directory=True)
    raw = yaml.safe_load(trained["config"].read_text(encoding="utf-8"))
    raw["run_dir"], raw["data"]["prepared_dir"] = str(run), str(trained["run"] / "data")
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = runner.invoke(app, ["evaluate", "--config", str(config)])
    assert result.exit_code == 1 and "eval is a symbolic link" in result.output, result.output
    assert list(elsewhere.iterdir()) == []


def test_init_example_writes_through_no_link(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    target = tmp_path / "outside.yaml"
    (tmp_path / "configs" / "eng-mar.yaml").symlink_to(target)  # dangling: nothing there yet
    result = runner.invoke(app, ["init", "--example", "eng-mar"])
    assert result.exit_code == 1 and "is a symbolic link" in result.output, result.output
    assert not target.exists() and not (tmp_path / "data").exists()  # nothing copied


def test_a_fifo_at_the_lock_is_a_clear_error(tmp_path):
    os.mkfifo(tmp_path / LOCK_NAME)
    refused = pytest.raises(NmtError, match=r"\.lock is not a file: a run folder's lock is a file nmt writes")
    with refused, holding(tmp_path, "nmt train"):
        pass


# ---- a model's size, before it is built ----


def test_a_model_too_big_for_the_memory_is_refused_with_its_figures_before_it_is_built(trained, tmp_path, monkeypatch):
    """Before: embed 4096, ff 16384, 8 + 8 layers, 64 heads prepared, then ended in a 40-line
    allocator traceback under an 8 GB limit."""
    raw = yaml.safe_load(trained["config"].read_text(encoding="utf-8"))
    raw["run_dir"], raw["data"]["prepared_dir"] = str(tmp_path / "big"), str(trained["run"] / "data")
    raw["model"] |= dict(embed_dim=4096, ff_dim=16384, encoder_layers=8, decoder_layers=8, heads=64)
    config_path = tmp_path / "big.yaml"
    config_path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    config = load_config(config_path, [])
    prepare(config, log=lambda _: None)
    monkeypatch.setattr(loading, "available_memory", lambda device: 8 * 2**30)
    built = []
    monkeypatch.setattr(loading, "new_model", _counting(loading.new_model, built))
    with pytest.raises(NmtError, match=r"has 3,\d{3}\.\d M parameters: training it needs about \d+\.\d GiB") as refused:
        build_trainer(config, torch.device("cpu"), show_bar=False, echo=False)
    assert "model.embed_dim: 4096" in str(refused.value) and "8.0 GiB free" in str(refused.value)
    assert built == ["meta"]  # counted on the meta device only: nothing allocated


def _counting(new_model, built: list):
    def counted(*args, **kwargs):
        model = new_model(*args, **kwargs)
        built.append(next(model.parameters()).device.type)
        return model

    return counted


# ---- smaller ----


def test_minutes_must_be_a_number_of_minutes(trained):
    result = runner.invoke(app, ["train", "--config", str(trained["config"]), "--minutes", "inf"])
    assert result.exit_code == 1 and "--minutes: got inf, expected a number of minutes" in result.output
    raw = yaml.safe_load(trained["config"].read_text(encoding="utf-8"))
    raw["train"]["max_minutes"] = float("inf")
    with pytest.raises(NmtError, match=r"'train\.max_minutes': got inf, expected a finite number"):
        config_from_dict(raw)


def test_init_chooses_the_family_by_the_pairs_left_after_duplicates(tmp_path):
    """Before: 10,001 lines that prepare dedupes to 9,999 pairs got the RNN (init counted lines)."""
    pairs = [(f"sentence number {i} here.", f"वाक्य क्रमांक {i} येथे.") for i in range(9_999)]
    data = write_anki(tmp_path / "pairs.tsv", [*pairs, pairs[0], pairs[1]])
    result = runner.invoke(
        app, ["init", str(data), "--to", str(tmp_path / "c.yaml"), "--src-lang", "en", "--tgt-lang", "mr"]
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "c.yaml").read_text(encoding="utf-8")
    assert "9,999 pairs" in text and "2 exact duplicate(s) dropped" in text
    assert yaml.safe_load(text)["model"]["arch"] == "transformer"


class StopAt(Callback):
    """A stop as Ctrl-C gives it, after step ``step`` (inside the first epoch)."""

    every_steps = 1

    def __init__(self, step: int):
        self.step = step

    def after_step(self, trainer, step: int) -> None:
        if step == self.step:
            trainer.control.signal.signal_name = "SIGINT"


def test_an_epoch_resumed_in_its_middle_records_the_gradient_norm_of_all_its_steps(trained, tmp_path):
    """Before: that epoch's grad_norm was its second session's steps' alone (0.894 against 0.948)."""
    raw = yaml.safe_load(trained["config"].read_text(encoding="utf-8"))
    raw["data"]["prepared_dir"] = str(trained["run"] / "data")
    raw["train"] |= {"epochs": 1, "checkpoint_minutes": 0, "threads": 1, "probes": 0}
    records = {}
    for name, stop in (("straight", 0), ("stopped", 3)):
        raw["run_dir"] = str(tmp_path / name)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw), encoding="utf-8")
        config = load_config(path, [])
        if stop:
            with pytest.raises(TrainingInterrupted):
                build_trainer(config, torch.device("cpu"), show_bar=False, echo=False, callbacks=[StopAt(stop)]).run()
        build_trainer(config, torch.device("cpu"), show_bar=False, echo=False).run(resume=bool(stop))
        records[name] = MetricsFile(tmp_path / name / "metrics.jsonl").read()[-1]
    assert records["stopped"]["grad_norm"] == pytest.approx(records["straight"]["grad_norm"], rel=1e-5)
    assert records["stopped"]["train_loss"] == pytest.approx(records["straight"]["train_loss"], rel=1e-5)


def test_a_staged_folder_appears_whole_or_not_at_all(tmp_path):
    """Every export writes its folder under a temporary name and renames it at the end: a
    failure half-way leaves neither the folder nor the temporary one."""
    import pytest

    from nmt.core.fileio import staged_folder

    with pytest.raises(RuntimeError), staged_folder(tmp_path / "out") as staging:
        (staging / "half.txt").write_text("written", encoding="utf-8")
        raise RuntimeError("the export failed here")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "empty").mkdir()  # an empty folder given is replaced
    with staged_folder(tmp_path / "empty") as staging:
        (staging / "whole.txt").write_text("written", encoding="utf-8")
        assert not (tmp_path / "empty" / "whole.txt").exists()  # nothing shows before the end
    assert [p.name for p in tmp_path.iterdir()] == ["empty"] and (tmp_path / "empty" / "whole.txt").is_file()
