"""``model.rnn: lstm`` through the whole product: every attention trains via the CLI in its
decoder order, stacked layers too; resume, export, translate, serve and old checkpoints."""

from __future__ import annotations

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.core.registry import ATTENTIONS
from nmt.runtime.checkpoint import upgrade_weight_names

from .helpers import local_client, small_model, tiny_config

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One prepared synthetic corpus for every run of this module."""
    from .helpers import synthetic_pairs, write_anki

    root = tmp_path_factory.mktemp("lstm")
    return root, write_anki(root / "pairs.txt", synthetic_pairs()), root / "prepared"


def lstm_config(shared, name: str, model: dict, epochs: int = 1):
    root, anki, prepared = shared
    raw = tiny_config(root / name, anki, data={"prepared_dir": str(prepared)}, train={"epochs": epochs})
    raw["run_dir"] = str(root / name / "run")
    raw["model"].update({"rnn": "lstm", **model})
    (root / name).mkdir(exist_ok=True)
    path = root / name / "config.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def attention_settings(name: str) -> dict:
    settings = {"attention": name}
    if ATTENTIONS[name].needs_equal_widths:
        settings["encoder_hidden"] = 16  # 2 x 16 = decoder_hidden
    return settings


@pytest.mark.slow
@pytest.mark.parametrize("attention", sorted(ATTENTIONS))
def test_every_attention_trains_with_an_lstm(shared, attention):
    config = lstm_config(shared, f"att-{attention}", attention_settings(attention))
    result = run("train", "--config", config)
    assert result.exit_code == 0, result.output
    checkpoint = torch.load(config.parent / "run" / "checkpoints" / "last.pt", weights_only=True)
    assert "decoder.rnn.weight_ih_l0" in checkpoint["model"]
    assert checkpoint["model"]["decoder.rnn.weight_hh_l0"].shape[0] == 4 * 32  # an LSTM's four gates
    result = run("translate", "--config", config, "--text", "I see apples.")
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 1, (
        result.output
    )  # (an untrained model may say nothing)


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    [
        {"attention": "luong-general", "input_feeding": True, "decoder_layers": 2, "encoder_layers": 2},
        {"attention": "bahdanau", "decoder_layers": 2, "attention_window": "local-p", "rnn_input": "padded"},
    ],
    ids=["luong-feeding-stacked", "bahdanau-local-p-stacked-padded"],
)
def test_stacked_lstms_train_and_resume_to_the_same_weights(shared, model):
    straight = lstm_config(shared, f"straight-{model['attention']}", model, epochs=2)
    split = lstm_config(shared, f"split-{model['attention']}", model, epochs=2)
    settings = ["--set", "model.dropout=0.2"]  # dropout between the stacked layers too
    assert run("train", "--config", straight, *settings).exit_code == 0
    assert run("train", "--config", split, *settings, "--set", "train.epochs=1").exit_code == 0
    result = run("train", "--config", split, *settings, "--resume")
    assert result.exit_code == 0, result.output
    a = torch.load(straight.parent / "run" / "checkpoints" / "last.pt", weights_only=True)
    b = torch.load(split.parent / "run" / "checkpoints" / "last.pt", weights_only=True)
    assert "decoder.rnn.weight_ih_l1" in a["model"]
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


@pytest.mark.slow
def test_an_lstm_exports_translates_and_serves_from_its_package(shared):
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import load_packages
    from nmt.serve.app import build_app

    config = lstm_config(shared, "package", {"attention": "luong-concat", "decoder_layers": 2})
    assert run("train", "--config", config).exit_code == 0
    expected = run("translate", "--config", config, "--text", "we like tea.").stdout
    package = config.parent / "package"
    assert run("export", config.parent / "run", package).exit_code == 0
    assert "LSTM decoder 32 × 2 layer(s)" in (package / "MODEL_CARD.md").read_text(encoding="utf-8")
    result = run("translate", "--model", package, "--text", "we like tea.")
    assert result.exit_code == 0 and result.stdout == expected
    translator = Translator(load_packages([package], torch.device("cpu")))
    with local_client(build_app({"lstm": translator})) as client:
        info = client.get("/api/models").json()["models"][0]
        assert info["rnn"] == "lstm" and info["layers"] == [1, 2]
        answer = client.post("/api/translate", json={"text": "we like tea.", "beam_size": 5, "attention": True}).json()
    assert answer["translations"][0]["text"] + "\n" == expected
    assert len(answer["attention"]) == len(answer["translations"][0]["tokens"])


def test_a_checkpoint_from_before_the_shared_cell_loads():
    """Bahdanau decoders once held an nn.GRUCell (no layer suffix in its parameter names)."""
    model = small_model(seed=5)
    old_names = {
        name.removesuffix("_l0") if name.startswith("decoder.rnn.") else name: tensor
        for name, tensor in model.state_dict().items()
    }
    assert "decoder.rnn.weight_ih" in old_names
    fresh = small_model(seed=6)
    fresh.load_state_dict(upgrade_weight_names(old_names))
    for name, tensor in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], tensor), name
