"""The whole CLI on a small synthetic Anki file: exit codes, messages and outputs."""

import json
import os
import subprocess
import sys

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app

from .helpers import tiny_config

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def write_config(tmp_path, anki_file, name="tiny.yaml", **sections):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(tiny_config(tmp_path, anki_file, **sections)), encoding="utf-8")
    return path


@pytest.mark.slow
def test_prepare_train_translate_evaluate(tmp_path, config_file):
    result = run("prepare", "--config", config_file)
    assert result.exit_code == 0, result.output
    assert "distinct sources" in result.stdout

    result = run("train", "--config", config_file)
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "run"
    for name in ("checkpoints/best.pt", "checkpoints/last.pt", "config.yaml", "train.log", "learning_curves.png"):
        assert (run_dir / name).is_file(), name
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [m["epoch"] for m in metrics] == [1, 2]
    assert {"dev_loss", "dev_ppl", "dev_bleu", "dev_chrf", "lr", "tokens_per_s"} <= set(metrics[0])
    assert yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))["train"]["epochs"] == 2

    src = tmp_path / "in.en"
    src.write_text("I see apples.\n\nwe like tea.\n", encoding="utf-8")
    src2 = tmp_path / "s.en"
    src2.write_text("I see apples.\nwe like tea.\n", encoding="utf-8")
    out = tmp_path / "out.mr"
    result = run(
        "translate", "--config", config_file, "--input", src, "--output", out, "--plot-attention", tmp_path / "plots"
    )
    assert result.exit_code == 0, result.output
    lines = out.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # 3 lines + final newline
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["attention_0001.png", "attention_0003.png"]

    best_of_each = out.read_text(encoding="utf-8").splitlines()[0::2]  # "I see apples.", "we like tea."
    svg = tmp_path / "one.svg"
    result = run("translate", "--config", config_file, "--text", "I see apples.", "--plot-attention", svg)
    assert result.exit_code == 0 and svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")
    result = run("translate", "--config", config_file, "--input", src, "--plot-attention", tmp_path / "x.png")
    assert result.exit_code == 1 and "use it with --text" in result.stderr

    # --text repeated: each sentence, in order (the last alone was translated before)
    result = run("translate", "--config", config_file, "--text", "I see apples.", "--text", "we like tea.")
    assert result.exit_code == 0 and result.stdout.splitlines() == best_of_each
    result = run("translate", "--config", config_file, "--text", "hi", "--input", src)
    assert result.exit_code == 1 and "not both" in result.stderr

    result = runner.invoke(app, ["translate", "--config", str(config_file), "--beam-size", "1"], input="we like tea.\n")
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 1

    # n-best: K TSV rows per input line (line number, score, text), best first; a blank line gives one empty row.
    result = run("translate", "--config", config_file, "--input", src, "--n-best", 3, "--beam-size", 4)
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [row[0] for row in rows] == ["1", "1", "1", "2", "3", "3", "3"] and rows[3][1:] == ["0.0000", ""]
    for number in ("1", "3"):
        scores = [float(row[1]) for row in rows if row[0] == number]
        assert scores == sorted(scores, reverse=True) and all(score < 0 for score in scores)
    result = run("translate", "--config", config_file, "--text", "hi", "--n-best", 3, "--beam-size", 2)
    assert result.exit_code == 1 and "between 1 and the beam size (2)" in result.stderr

    # score: forced decoding of given translations (tests/test_forced.py checks the figures against search).
    best = run("translate", "--config", config_file, "--input", src2, "--n-best", 1, "--beam-size", 1)
    hyps = tmp_path / "greedy.mr"
    hyps.write_text("".join(line.split("\t")[2] + "\n" for line in best.stdout.splitlines()), encoding="utf-8")
    result = run("score", "--config", config_file, "--src", src2, "--tgt", hyps)
    assert result.exit_code == 0, result.output
    scored = [line.split("\t") for line in result.stdout.splitlines()]
    assert len(scored) == 2 and "perplexity" in result.stderr
    for total, per_token, count in scored:
        assert float(total) < 0 and int(count) >= 1
        assert float(per_token) == pytest.approx(float(total) / int(count), abs=1e-3)
    result = run("score", "--config", config_file, "--src", src, "--tgt", hyps)
    assert result.exit_code == 1 and "has 3 lines but" in result.stderr and "has 2" in result.stderr

    result = run("evaluate", "--config", config_file, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {"bleu", "chrf", "ter", "signature"} <= set(report) and 0 <= report["bleu"] <= 100
    assert (run_dir / "eval" / "test.hyp").is_file() and (run_dir / "eval" / "test.report.json").is_file()

    ref1, ref2 = tmp_path / "r1.mr", tmp_path / "r2.mr"
    ref1.write_text("मी सफरचंद पाहतो.\nआम्ही चहा आवडते.\n", encoding="utf-8")
    ref2.write_text("\nआम्ही चहा आवडते!\n", encoding="utf-8")
    result = run("evaluate", "--config", config_file, "--src", src2, "--ref", ref1, "--ref", ref2)
    assert result.exit_code == 0, result.output
    assert "BLEU" in result.stdout and "nrefs:var" in result.stdout
    assert "Outputs with a word repeated back to back:" in result.stdout and "(references: 0.0 %)" in result.stdout
    report = json.loads((tmp_path / "run" / "eval" / "s.report.json").read_text(encoding="utf-8"))
    assert report["repeated_words"]["references"] == 0.0 and 0.0 <= report["repeated_words"]["hypotheses"] <= 100.0

    # A second train without --resume refuses to overwrite the run.
    result = run("train", "--config", config_file)
    assert result.exit_code == 1 and "--resume" in result.stderr
    # A checkpoint that does not match the config is refused, naming the difference.
    result = run("translate", "--config", config_file, "--text", "hi", "--set", "model.embed_dim=48")
    assert result.exit_code == 1 and "model.embed_dim: checkpoint has 32, config has 48" in result.stderr


@pytest.mark.slow
def test_resume_gives_same_weights_as_uninterrupted(tmp_path, anki_file):
    shared = {"prepared_dir": str(tmp_path / "prepared")}
    straight = write_config(tmp_path, anki_file, "a.yaml", run_dir=str(tmp_path / "a"), data=shared)
    split = write_config(tmp_path, anki_file, "b.yaml", run_dir=str(tmp_path / "b"), data=shared)
    assert run("train", "--config", straight, "--set", "model.dropout=0.2").exit_code == 0
    assert run("train", "--config", split, "--set", "train.epochs=1", "--set", "model.dropout=0.2").exit_code == 0
    result = run("train", "--config", split, "--resume", "--set", "model.dropout=0.2")
    assert result.exit_code == 0, result.output
    a = torch.load(tmp_path / "a" / "checkpoints" / "last.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "checkpoints" / "last.pt", weights_only=True)
    assert a["progress"]["step"] == b["progress"]["step"]
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    lines = (tmp_path / "b" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "train.bach_size=3"], "Did you mean 'train.batch_size'"),
        (["--set", "model.attention=luong-dotty"], "expected one of 'bahdanau'"),
        (["--set", "decode.beam_size=0"], "'decode.beam_size': got 0"),
    ],
)
def test_config_mistakes_exit_1_without_traceback(config_file, args, message):
    result = run("prepare", "--config", config_file, *args)
    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.output


def test_missing_config_data_and_checkpoint(tmp_path, config_file, anki_file):
    result = run("prepare", "--config", tmp_path / "nope.yaml")
    assert result.exit_code == 1 and "Config file not found" in result.stderr
    result = run("prepare", "--config", config_file, "--set", f"data.path={tmp_path / 'missing.txt'}")
    assert result.exit_code == 1 and "Data file not found" in result.stderr
    assert run("prepare", "--config", config_file).exit_code == 0
    result = run("translate", "--config", config_file, "--text", "hello")
    assert result.exit_code == 1 and "Checkpoint not found" in result.stderr


def test_help_lists_every_option():
    for command, options in {
        "prepare": ["--config", "--set", "--force"],
        "train": ["--resume", "--device"],
        "translate": ["--checkpoint", "--input", "--output", "--beam-size", "--plot-attention", "--n-best"],
        "score": ["--src", "--tgt", "--output", "--model"],
        "evaluate": ["--src", "--ref", "--json"],
    }.items():
        result = run(command, "--help")
        assert result.exit_code == 0
        assert all(option in result.stdout for option in options), command


def test_module_entry_point_runs():
    result = subprocess.run([sys.executable, "-m", "nmt", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "translate" in result.stdout


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    """`nmt ... | head -1`: the reader may close the pipe before the command is done. The command
    stops quietly with the status a shell gives a command SIGPIPE ended (before: "Error: Broken pipe
    (while writing output)" and status 1, which made a release check's `| grep -q` fail by chance).
    The pipe here is closed before the command starts, so every write meets it: no race."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "nmt", "init", "--example", "eng-hin"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == "", result.stderr


def test_plot_and_average_commands(tmp_path, anki_file):
    config = write_config(
        tmp_path, anki_file, "avg.yaml", train={"checkpoint_every": 4, "keep_checkpoints": 3, "epochs": 2}
    )
    assert run("train", "--config", config).exit_code == 0
    run_dir = tmp_path / "run"
    result = run("plot", run_dir, "--output", tmp_path / "curves.png")
    assert result.exit_code == 0 and (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    result = run("average", run_dir, "--last", "2")
    assert result.exit_code == 0, result.output
    averaged = run_dir / "checkpoints" / "averaged.pt"
    result = run("translate", "--config", config, "--checkpoint", averaged, "--text", "I see apples.")
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 1
    # An ensemble of two checkpoints, in greedy and beam search.
    for beam in ("1", "3"):
        result = run(
            "translate",
            "--config",
            config,
            "--checkpoint",
            "best",
            "--checkpoint",
            averaged,
            "--beam-size",
            beam,
            "--text",
            "I see apples.",
        )
        assert result.exit_code == 0 and len(result.stdout.splitlines()) == 1, result.output
    result = run("average", run_dir, "--last", "9")
    assert result.exit_code == 1 and "holds 3 step checkpoint(s)" in result.stderr
    result = run("plot", tmp_path / "nowhere")
    assert result.exit_code == 1 and "metrics.jsonl" in result.stderr


def test_export_then_translate_and_evaluate_with_only_the_package(tmp_path, anki_file):
    import shutil

    config = write_config(tmp_path, anki_file, "exp.yaml")
    assert run("train", "--config", config).exit_code == 0
    src = tmp_path / "s.en"
    src.write_text("I see apples.\n\nwe like tea.\n", encoding="utf-8")
    expected = run("translate", "--config", config, "--input", src).stdout
    assert run("evaluate", "--config", config).exit_code == 0

    package = tmp_path / "package"
    result = run("export", tmp_path / "run", package)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in package.iterdir()) == [
        "MODEL_CARD.md",
        "config.yaml",
        "manifest.json",
        "model.safetensors",
        "spm.en.model",
        "spm.mr.model",
        "test.multi.tsv",  # the test split with all its references: `nmt evaluate --model PKG`
        "timeline.jsonl",  # the probe sentences' attention over training (train.probes)
    ]
    card = (package / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "BLEU" in card and "nrefs:" in card and "split by source sentence" in card
    assert run("export", tmp_path / "run", package).exit_code == 1  # refuses to overwrite

    moved = tmp_path / "elsewhere" / "model"
    moved.parent.mkdir()
    shutil.move(package, moved)
    shutil.rmtree(tmp_path / "run")  # nothing of the run is left: the package must be enough
    result = run("translate", "--model", moved, "--input", src)
    assert result.exit_code == 0 and result.stdout == expected
    ref = tmp_path / "r.mr"
    ref.write_text("मी सफरचंद पाहतो.\n-\nआम्ही चहा आवडते.\n", encoding="utf-8")
    result = run("evaluate", "--model", moved, "--src", src, "--ref", ref, "--json")
    assert result.exit_code == 0 and 0 <= json.loads(result.stdout)["bleu"] <= 100
    result = run("translate", "--model", moved, "--config", config, "--text", "hi")
    assert result.exit_code == 1 and "--model alone" in result.stderr
    result = run("translate", "--model", moved, "--model", moved, "--input", src)  # an ensemble of packages
    assert result.exit_code == 0 and result.stdout == expected  # twice the same model: same output
    (moved / "spm.mr.model").write_bytes((moved / "spm.en.model").read_bytes())
    result = run("translate", "--model", moved, "--text", "hi")
    assert result.exit_code == 1 and "does not match the SentencePiece model" in result.stderr


def test_tensorboard_logs_scalars_and_attention_heatmaps(tmp_path, anki_file):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write_config(tmp_path, anki_file, "tb.yaml", train={"tensorboard": True})
    assert run("train", "--config", config).exit_code == 0
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    tags = events.Tags()
    assert {
        "loss/train",
        "loss/dev",
        "dev/bleu",
        "dev/chrf",
        "train/learning_rate",
        "train/tokens_per_s",
        "train/grad_norm",
    } <= set(tags["scalars"])
    assert [event.step for event in events.Scalars("dev/bleu")] == [
        int(json.loads(line)["step"])
        for line in (tmp_path / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert "attention/dev_1" in tags["images"] and len(events.Images("attention/dev_1")) == 2


def test_a_packages_decoding_settings_can_be_set_and_nothing_else(tmp_path, anki_file):
    """`nmt translate --model PKG --set decode.KEY=VALUE` decodes as asked (before: every --set was
    refused with --model, so a package's user could not change its beam); model, tokenizer and
    training keys stay refused."""
    from nmt.pipelines.translate import Translator
    from nmt.runtime.loading import load_packages

    config = write_config(tmp_path, anki_file, "exp.yaml", train={"epochs": 1})
    assert run("train", "--config", config).exit_code == 0
    package = tmp_path / "package"
    assert run("export", tmp_path / "run", package).exit_code == 0
    sentences = [f"{s} {v} {o}." for s in ("I", "we", "they") for v in ("see", "like") for o in ("tea", "rice", "milk")]
    src = tmp_path / "s.en"
    src.write_text("".join(f"{line}\n" for line in sentences), encoding="utf-8")
    loaded = load_packages([package], torch.device("cpu"))
    outputs = {}
    for beam in (1, 5):
        result = run("translate", "--model", package, "--input", src, "--set", f"decode.beam_size={beam}")
        assert result.exit_code == 0, result.output
        outputs[beam] = result.stdout.splitlines()
        assert outputs[beam] == Translator(loaded).translate(sentences, beam_size=beam)  # as that beam decodes
    assert outputs[1] != outputs[5]  # this 1-epoch model's greedy and beam outputs differ somewhere
    capped = run("translate", "--model", package, "--input", src, "--set", "decode.max_len_offset=0", "--set",
                 "decode.max_len_ratio=0.1")  # fmt: skip
    assert capped.exit_code == 0 and all(len(line.split()) <= 2 for line in capped.stdout.splitlines())
    for key, message in (("model.embed_dim=64", "only its decoding settings"), ("decode.beam=3", "Did you mean")):
        refused = run("translate", "--model", package, "--text", "hi", "--set", key)
        assert refused.exit_code == 1 and message in refused.stderr, refused.stderr
    out_of_range = run("translate", "--model", package, "--text", "hi", "--set", "decode.beam_size=100")
    assert out_of_range.exit_code == 1 and "decode.beam_size" in out_of_range.stderr


def test_the_help_names_the_distribution_and_an_install_line_that_works_today():
    """The distribution is nmt-kit (`nmt` is another project's on PyPI); nmt-kit is not published
    yet, so the help names the packages an extra installs (before: `pip install 'nmt-kit[onnx]'`,
    which fails on PyPI), and the terminal's markup eats nothing of the line."""
    import tomllib
    from pathlib import Path

    from nmt import DISTRIBUTION

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["name"] == DISTRIBUTION == "nmt-kit"
    shown = " ".join(runner.invoke(app, ["export", "--help"], terminal_width=200).output.split())
    assert "`pip install onnx onnxruntime`" in shown and "nmt-kit[" not in shown


def test_a_config_read_from_another_folder_says_where_it_looked_and_a_runs_own_works(tmp_path):
    """A config's relative paths are relative to the folder nmt runs in (as JoeyNMT's and
    OpenNMT's are). From elsewhere, the error says so and where it looked (before: "Run `nmt
    prepare` first" for a prepared run); the run's own config.yaml works from any folder."""
    from .helpers import synthetic_pairs, write_anki

    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    raw = tiny_config(home, write_anki(home / "pairs.tsv", synthetic_pairs()), run_dir="runs/en-mr")
    raw["data"]["path"] = "pairs.tsv"  # relative, as nmt init writes it
    raw["train"]["epochs"] = 1
    (home / "en-mr.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")

    def nmt(*args, cwd):
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(cwd)
            return runner.invoke(app, list(args))

    assert nmt("train", "--config", "en-mr.yaml", cwd=home).exit_code == 0
    lost = nmt("translate", "-c", str(home / "en-mr.yaml"), "--text", "I see tea.", cwd=elsewhere)
    assert lost.exit_code == 1 and "Traceback" not in lost.output
    assert f"looked for in {elsewhere}" in lost.stderr and "relative to the folder nmt runs in" in lost.stderr
    assert "Run `nmt prepare` first" not in lost.stderr
    own = nmt("translate", "-c", str(home / "runs" / "en-mr" / "config.yaml"), "--text", "I see tea.", cwd=elsewhere)
    assert own.exit_code == 0 and own.stdout.strip(), own.output
    assert nmt("evaluate", "-c", str(home / "runs" / "en-mr" / "config.yaml"), cwd=elsewhere).exit_code == 0
