"""Installed, not cloned: the wheel built from this repository, installed into a fresh virtual
environment, used from an empty folder on a small file of the user's own — init (the languages
from the file's name), prepare, train, translate, evaluate, serve (the page and the JSON API on
loopback) and export — and the example corpus the wheel carries (`nmt init --example`). No
command may reach into the checkout: the environment holds the wheel's `nmt`, not this one.

The environment borrows this one's installed dependencies (a path file), so nothing is
downloaded: the wheel itself is installed with --no-deps."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from .helpers import synthetic_pairs, write_anki

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
SHRINK = ["train.max_minutes=0.1", "train.epochs=2", "data.max_pairs=300"]
SHRINK += [
    f"model.{key}=32" for key in ("embed_dim", "encoder_hidden", "decoder_hidden", "attention_dim", "output_dim")
]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A virtual environment holding the wheel of this checkout (its bin/ folder)."""
    root = tmp_path_factory.mktemp("wheel")
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(root),
        str(ROOT),
    ]
    subprocess.run(build, check=True, capture_output=True, timeout=300)
    (wheel,) = root.glob("nmt_kit-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (packages,) = venv.glob("lib/python*/site-packages")
    (packages / "borrowed.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    install = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps", "-q"]
    subprocess.run([*install, str(wheel)], check=True, capture_output=True, timeout=300)
    return venv / "bin"


def nmt(bin_: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(bin_ / "nmt"), *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=environment
    )
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    return done


def test_the_wheel_runs_from_an_empty_folder_on_a_file_of_ones_own(installed, tmp_path):
    python = installed / "python"
    where = subprocess.run(
        [str(python), "-c", "import nmt; print(nmt.__file__)"], capture_output=True, text=True, cwd=tmp_path
    )
    assert str(installed.parent) in where.stdout, where.stdout  # the wheel's nmt, not the checkout's
    work = tmp_path / "work"
    work.mkdir()
    rows = [(s, " ".join(reversed(s.rstrip(".").split())) + ".") for s, _ in synthetic_pairs()]  # Latin both sides
    write_anki(work / "eng-spa.tsv", rows)
    written = nmt(installed, "init", "eng-spa.tsv", cwd=work)
    assert "Wrote en-es.yaml" in written.stdout  # the languages from the name, checked against the scripts
    config = ["--config", "en-es.yaml", *[part for item in SHRINK for part in ("--set", item)]]
    nmt(installed, "prepare", *config, cwd=work)
    nmt(installed, "train", *config, cwd=work)
    assert nmt(installed, "translate", *config, "--text", "I see tea.", cwd=work).stdout.strip()
    assert "BLEU" in nmt(installed, "evaluate", *config, cwd=work).stdout
    nmt(installed, "export", "runs/en-es", "package", cwd=work)
    assert nmt(installed, "translate", "--model", "package", "--text", "we like rice.", cwd=work).stdout.strip()
    server = subprocess.Popen(
        [str(installed / "nmt"), "serve", "--model", "package", "--port", "0", "--token", "t0ken"],
        cwd=work,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        address = server.stderr.readline().split(" on ")[1].split(" ")[0]
        base = address.split("?")[0]
        with urllib.request.urlopen(address, timeout=30) as page:
            assert b"<html" in page.read().lower()
        request = urllib.request.Request(
            f"{base}api/translate",
            json.dumps({"text": "I see tea."}).encode(),
            {"Content-Type": "application/json", "Authorization": "Bearer t0ken"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert json.loads(answer.read())["translations"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_wheel_carries_the_example_corpus_and_its_configs(installed, tmp_path):
    copied = nmt(installed, "init", "--example", "eng-mar", cwd=tmp_path)
    assert "configs/eng-mar-cpu.yaml" in copied.stdout
    assert (tmp_path / "data" / "eng-mar" / "mar.txt").stat().st_size > 3_000_000
    prepared = nmt(
        installed, "prepare", "--config", "configs/eng-mar-cpu.yaml", "--set", "data.max_pairs=2000", cwd=tmp_path
    )
    assert "kept 2000" in prepared.stdout, prepared.stdout  # the shipped file read, and the cap honoured


def test_the_release_check_passes_on_the_wheel_and_every_example_path_exists(installed, tmp_path):
    """The release workflow's check (scripts/dev/release_check.sh) on this wheel, as it runs before an
    upload; and the paths the docs give an installed user (the eng-hin example, its configs, init
    reading its header row) exist there."""
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    check = subprocess.run(
        ["bash", str(ROOT / "scripts" / "dev" / "release_check.sh"), str(installed)],
        capture_output=True,
        text=True,
        timeout=900,
        env=environment,
    )
    assert check.returncode == 0 and "release check passed" in check.stdout, check.stdout[-2000:] + check.stderr[-3000:]
    nmt(installed, "init", "--example", "eng-hin", cwd=tmp_path)
    for path in (
        "data/eng-hin/hin.txt",
        "data/eng-hin/README.md",
        "configs/eng-hin-scratch.yaml",
        "configs/eng-hin.yaml",
    ):
        assert (tmp_path / path).is_file(), path
    written = nmt(installed, "init", "data/eng-hin/hin.txt", "--to", "mine.yaml", cwd=tmp_path)
    assert "en (English)" in written.stdout and "hi (Hindi)" in written.stdout  # its header row: Eng, Hin
