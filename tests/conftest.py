"""Shared fixtures: a small synthetic Anki corpus and a config file pointing at it.

The suite runs on the CPU wherever it runs: ``device: auto`` means the CPU here (and in the
processes the tests start), so that no result depends on the machine's GPU. The GPU tier
(``pytest -m gpu``, tests/test_gpu.py) names its device outright.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
import yaml

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Tests run side by side on a 2-core CI machine (scripts/test.sh): each on one thread, and so are the
    # processes it starts (OMP_NUM_THREADS, set before torch loads, caps `threads: auto` too). Two
    # threads a test wait at every barrier for the core the other test holds (nmt/core/threads.py):
    # a file of training tests took 215 to 352 s so, 153 s on one thread. Tests of the thread tuner
    # itself unset it.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

SIMULATED_CUDA = os.environ.get("NMT_SIMULATED_CUDA") == "1"
if SIMULATED_CUDA:  # the simulated-CUDA tier (tests/simcuda): its C++ shim loads before torch does
    from .simcuda import shim

    shim.load()

from .helpers import synthetic_pairs, tiny_config, write_anki  # noqa: E402  (imports torch: after the shim)

# The tier runs as a process of its own (scripts/test.sh: NMT_SIMULATED_CUDA=1 pytest tests/simcuda):
# its shim makes every torch in the process report a CUDA device, which the rest of the suite must not see.
collect_ignore = [] if SIMULATED_CUDA else ["simcuda"]

os.environ.setdefault("NMT_DEVICE", "cpu")  # what device 'auto' means (nmt/core/device.py)
# torch.compile's on-disk kernel cache, fresh for each run of the suite (and the processes it
# starts): a kernel cached by an earlier run under another ATEN_CPU_CAPABILITY was seen to abort
# the compiled step's test, so no test may depend on what an earlier run left in /tmp.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="nmt-tests-inductor-"))


@pytest.fixture
def anki_file(tmp_path: Path) -> Path:
    return write_anki(tmp_path / "pairs.txt", synthetic_pairs(), attribution=True)


@pytest.fixture
def config_file(tmp_path: Path, anki_file: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path, anki_file)), encoding="utf-8")
    return path


# seconds each file took when last measured (scripts/dev/test_file_seconds.py writes it)
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def pytest_collection_modifyitems(config, items):
    """The longest files first, each file's tests kept together and in order. Each file runs on one
    worker (scripts/test.sh, with --no-loadscope-reorder so that this order holds): a long file
    started last kept the run going for minutes while the other workers waited. A file not in
    FILE_SECONDS (a new one, or one under its threshold) runs after, in collection order."""
    measured = json.loads(FILE_SECONDS.read_text(encoding="utf-8"))

    def file_of(item) -> str:
        return item.nodeid.split("::")[0]

    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(file_of(item), index)
    items.sort(key=lambda item: (-measured.get(file_of(item), 0), first_seen[file_of(item)]))
