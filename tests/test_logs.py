"""What a run writes when its output is a file, not a terminal (`bash scripts/main.sh > run.log`):
lines a person reads top to bottom, no progress-bar redraws."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from .helpers import synthetic_pairs, tiny_config, write_anki

ROOT = Path(__file__).resolve().parents[1]


def nmt_to_file(log: Path, *args: str, stdin: str | None = None) -> str:
    """Run `nmt ARGS` with stdout and stderr into ``log`` (not a terminal); the log's text."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(log, "w", encoding="utf-8") as out:
        result = subprocess.run(
            [sys.executable, "-m", "nmt", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            input=stdin,
            text=True,
            timeout=600,
        )
    text = log.read_text(encoding="utf-8")
    assert result.returncode == 0, text
    return text


def test_a_run_logged_to_a_file_has_no_redraws_and_a_few_lines_per_epoch(tmp_path):
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs() * 3)
    epochs = 4
    config = tmp_path / "tiny.yaml"
    raw = tiny_config(tmp_path, data, train={"epochs": epochs, "batch_size": 4})
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    prepared = nmt_to_file(tmp_path / "prepare.log", "prepare", "--config", str(config))
    trained = nmt_to_file(tmp_path / "train.log", "train", "--config", str(config))
    sources = tmp_path / "sources.txt"
    sources.write_text("I see apples.\nwe like tea.\n" * 100, encoding="utf-8")
    translated = nmt_to_file(tmp_path / "translate.log", "translate", "--config", str(config), "--input", str(sources))
    for text in (prepared, trained, translated):
        assert "\r" not in text
    epoch_lines = [line for line in trained.splitlines() if line.startswith("epoch")]
    assert len(epoch_lines) == epochs  # each epoch says how it went, once
    assert len(trained.splitlines()) <= 30 + 3 * epochs  # the setup, a line or few per epoch, the summary
    assert len(translated.splitlines()) == 200  # the translations, nothing else


def test_the_console_the_summary_the_model_card_and_plot_count_epochs_and_seconds_alike(tmp_path):
    """One run, four reports: before, the last console row said "epoch 6.50" and the summary
    "best ... at epoch 7", the console 57 s of training and the card 49, nmt plot "7 epochs"
    for 6.5. Now each is RunSummary's count of the run's records."""
    import re

    import yaml
    from typer.testing import CliRunner

    from nmt.cli import app

    from .helpers import synthetic_pairs, tiny_config, write_anki

    pairs = [(f"{s} ({k})", t) for k in range(12) for s, t in synthetic_pairs()]  # about 120 steps an epoch
    raw = tiny_config(tmp_path, write_anki(tmp_path / "pairs.txt", pairs), train={"epochs": 50, "max_minutes": 0.1})
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    runner = CliRunner()
    trained = runner.invoke(app, ["train", "--config", str(config)])
    assert trained.exit_code == 0, trained.output
    rows = [line for line in trained.stderr.splitlines() if re.match(r"^epoch\s+[\d.]+\s+train loss", line)]
    last_epochs = rows[-1].split()[1]
    done = re.search(r"Training done \(.*\): (best dev BLEU .*); (.* validations?)\.", trained.stderr)
    assert done, trained.stderr[-2000:]
    best, counted = done.groups()
    assert counted.startswith(f"{last_epochs} epochs, ") and f"{len(rows)} validations" in counted
    assert best[0].upper() + best[1:] in trained.stdout  # nmt train's own last line
    plotted = runner.invoke(app, ["plot", str(tmp_path / "run")])
    assert f"({counted}; {best})" in plotted.stdout, plotted.stdout
    assert runner.invoke(app, ["export", str(tmp_path / "run"), str(tmp_path / "pkg")]).exit_code == 0
    card = (tmp_path / "pkg" / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert counted in card and best in card
