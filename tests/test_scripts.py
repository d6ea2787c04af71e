"""Every script a user or the docs run, on a tiny model, so that none can rot unseen: the
benchmarks (each prints its table and exits 0), the load test against a default server (which
has a token: before, every request was a 401 and it printed "0 answered, 60 errors"),
`scripts/main.sh` with another config, the tools that make the docs' pictures and check the
simulated-CUDA tier, and each study's command line. Each runs as a process of its own, from the
repository root, as its docs say to run it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app

from .helpers import synthetic_pairs, tiny_config, write_anki
from .test_page import MISSING, REQUIRED

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A config of seconds, trained one epoch (600-piece vocabularies: eng-mar's characters fit)."""
    root = tmp_path_factory.mktemp("scripts")
    raw = tiny_config(root, write_anki(root / "pairs.txt", synthetic_pairs()), train={"epochs": 1})
    raw["tokenizer"] = {"src_vocab_size": 600, "tgt_vocab_size": 600}
    config = root / "tiny.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return config


def script(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    command = ["bash", *args] if args[0].endswith(".sh") else [sys.executable, *args]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return done


def run_of(config: Path) -> Path:
    return Path(yaml.safe_load(config.read_text(encoding="utf-8"))["run_dir"])


@pytest.mark.parametrize(
    "args, printed",
    [
        (["scripts/bench/bench_train.py", "--steps", "3", "--rows", "default", "fast", "--no-peer"], "fast path /"),
        (["scripts/bench/bench_decode.py", "--sentences", "12", "--beams", "1", "2", "--no-peer"], "| 2 |"),
        (["scripts/bench/profile_train.py", "--steps", "3", "--rows", "5"], "Self CPU time total"),
    ],
    ids=["bench_train", "bench_decode", "profile_train"],
)  # fmt: skip
def test_a_benchmark_on_a_config_prints_its_table(tiny, args, printed):
    assert printed in script(*args, "--config", str(tiny)).stdout


def test_the_attention_kernel_benchmark_prints_its_table():
    done = script("scripts/bench/bench_attention_kernels.py", "--device", "cpu", "--shapes", "1", "--tokens", "40")
    assert "| without cuDNN's: MATH (padding mask), MATH (causal) |" in done.stdout


def test_the_large_corpus_benchmark_prepares_and_trains(tiny, tmp_path):
    done = script("scripts/bench/bench_large.py", "--pairs", "3000", "--train-minutes", "0.05", "--config", str(tiny),
                  "--work", str(tmp_path))  # fmt: skip
    assert "| 3,000 |" in done.stdout and "exit codes" not in done.stdout


def test_onnx_parity_and_the_search_ab_benchmark_on_a_trained_run(tiny):
    run = run_of(tiny)
    assert "the same translation:" in script("scripts/bench/onnx_parity.py", "--run", str(run), "--beam", "2").stdout
    if not (ROOT / ".git").exists():
        pytest.skip("bench_search_ab compares with a commit: not a git checkout")
    checkpoint = str(run / "checkpoints" / "best.pt")
    done = script("scripts/bench/bench_search_ab.py", "--before", "HEAD", "--config", str(tiny), "--checkpoint",
                  checkpoint, "--sentences", "12", "--rounds", "1", "--beams", "1")  # fmt: skip
    assert "| greedy |" in done.stdout


def test_the_load_test_gets_answers_from_a_default_server(tiny):
    """nmt serve has a token by default; the load test sends it (before: 60 errors, 401 each)."""
    done = script("scripts/bench/load_serve.py", "--config", str(tiny), "--clients", "2", "--requests", "3")
    assert "6 answered, 0 errors" in done.stdout
    done = script("scripts/bench/load_serve.py", "--config", str(tiny), "--scenario", "classroom", "--requests", "2")
    assert "0 errors" in done.stdout and "a short request behind two of 64 x 204 characters" in done.stdout


@pytest.mark.browser
@pytest.mark.skipif(bool(MISSING) and not REQUIRED, reason=MISSING or "")
def test_the_browser_benchmark_and_the_docs_screenshot(tiny, tmp_path):
    done = script("scripts/bench/bench_web.py", "--run", str(run_of(tiny)), "--sentences", "4")
    assert "the same words as the CLI: 4/4" in done.stdout
    shot = tmp_path / "page.png"
    script("scripts/dev/screenshot_page.py", "--config", str(tiny), "--out", str(shot), "--text", "I see tea.")
    assert shot.read_bytes().startswith(b"\x89PNG")


def test_main_sh_runs_prepare_train_translate_evaluate_on_another_config(tiny, tmp_path):
    raw = yaml.safe_load(tiny.read_text(encoding="utf-8"))
    raw["run_dir"] = str(tmp_path / "run")
    config = tmp_path / "main.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    done = script("scripts/main.sh", env={"CONFIG": str(config)})
    for part in ("== prepare", "== train", "== translate", "== evaluate", "BLEU", "== done in"):
        assert part in done.stdout, part
    assert (tmp_path / "run" / "eval").is_dir()


def test_the_simulated_cuda_mutants_still_apply_and_the_gpu_script_parses():
    assert "mutants apply" in script("scripts/dev/simcuda_mutants.py", "--check").stdout
    assert subprocess.run(["bash", "-n", "scripts/bench/bench_gpu.sh"], cwd=ROOT).returncode == 0


@pytest.mark.parametrize("study", sorted(p.name for p in (ROOT / "scripts" / "studies").glob("*.py")))
def test_each_study_loads_its_variants(study):
    """A study is the laboratory's, not the product's: tests never import one, but each must still
    load against today's package, every variant's config included (a key it names that the
    package no longer has, or refuses, fails here, not on the day someone runs it). One process a
    study: --check parses the command line as --help does, then loads every variant."""
    if study in (
        "quality.py",
        "small_data.py",
        "transfer.py",
        "learning_curve.py",
        "transformer.py",
        "alignment.py",
        "mixed_members.py",
    ):
        assert "variants load" in script(f"scripts/studies/{study}", "--check").stdout
    else:
        assert "usage:" in script(f"scripts/studies/{study}", "--help").stdout
    if study == "small_data.py":  # its report reads the measured results back
        assert "|" in script("scripts/studies/small_data.py", "--report", "--out", "docs/small-data").stdout


def test_test_sh_prints_the_types_verdict_when_the_suite_fails(tmp_path):
    """scripts/test.sh runs mypy beside the suite; a failing suite still waits for it, prints its
    verdict and removes its log, then fails (before, `set -e` left at the suite: no verdict, a
    log left behind). Its tools are stubs here: ruff passes, the suite and mypy fail."""
    tree, tools, temp = tmp_path / "tree", tmp_path / "tools", tmp_path / "temp"
    for folder in (tree / "scripts", tree / "web" / "node_modules", tools, temp):
        folder.mkdir(parents=True)
    for name in ("test.sh", "setup.sh"):
        shutil.copy(ROOT / "scripts" / name, tree / "scripts" / name)
    (tree / "web" / "node_modules" / ".package-lock.json").write_text("{}", encoding="utf-8")
    stubs = {"ruff": "exit 0", "mypy": "echo 'types: 1 error'; exit 1", "python": "echo 'suite: 1 failed'; exit 1"}
    for name, body in stubs.items():
        (tools / name).write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        (tools / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:/usr/bin:/bin", "NMT_OFFLINE": "1", "TMPDIR": str(temp), "CXX": "absent"}
    done = subprocess.run(["bash", "scripts/test.sh"], cwd=tree, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "suite: 1 failed" in done.stdout and "types: 1 error" in done.stdout
    assert not list(temp.iterdir())  # the types' log removed


def test_the_suites_file_order_comes_from_a_durations_log_and_names_files_that_exist(tmp_path):
    """tests/file_seconds.json (the longest files first, tests/conftest.py) is written from pytest's
    --durations=0 report, setup, call and teardown summed a file; a file that moved or went is
    caught here, not by a run that quietly orders by stale names."""
    log = tmp_path / "suite.log"
    log.write_text(
        "30.00s call     tests/test_b.py::test_one[x-1]\n5.50s setup    tests/test_b.py::test_one[x-1]\n"
        "40.25s call     tests/test_a.py::test_two\n2.00s call     tests/test_c.py::test_three\n",
        encoding="utf-8",
    )
    out = tmp_path / "seconds.json"
    script("scripts/dev/test_file_seconds.py", str(log), "--out", str(out), "--min", "3")
    written = json.loads(out.read_text(encoding="utf-8"))
    assert list(written.items()) == [("tests/test_a.py", 40), ("tests/test_b.py", 36)]  # longest first
    shipped = json.loads((ROOT / "tests" / "file_seconds.json").read_text(encoding="utf-8"))
    assert shipped and all((ROOT / name).is_file() for name in shipped)


def test_scripts_top_level_holds_only_what_a_user_runs():
    top = sorted(p.name for p in (ROOT / "scripts").iterdir() if p.is_file())
    assert top == ["main.sh", "setup.sh", "test.sh"]
    assert shutil.which("bash")
