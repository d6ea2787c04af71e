"""notebooks/attention_lab.ipynb runs from top to bottom (nbclient, this Python's kernel) and
shows what it promises: heatmaps as images, and one step played back whose softmax,
recomputed in the notebook, equals the model's weights."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "attention_lab.ipynb"


@pytest.mark.slow
def test_the_attention_lab_notebook_executes_and_shows_the_heatmap_and_a_step(tmp_path, monkeypatch):
    """Run where a user has it: in a folder `nmt init --example eng-mar` wrote (outside a checkout
    it stopped in its first cell, StopIteration, looking for configs/tiny.yaml that init did not copy)."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient
    from typer.testing import CliRunner

    from nmt.cli import app

    folder = tmp_path / "class"
    folder.mkdir()
    monkeypatch.chdir(folder)
    assert CliRunner().invoke(app, ["init", "--example", "eng-mar"]).exit_code == 0
    copied = folder / "notebooks" / NOTEBOOK.name
    assert copied.read_bytes() == NOTEBOOK.read_bytes() and (folder / "configs" / "tiny.yaml").is_file()
    monkeypatch.setenv("NMT_NOTEBOOK_RUNS", str(tmp_path / "runs"))
    notebook = nbformat.read(copied, as_version=4)
    for cell in notebook.cells:  # run what is written, not what was saved
        if cell.cell_type == "code":
            cell.outputs = []
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(copied.parent)}}
    ).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 4  # the heatmap, Bahdanau and Luong side by side, the timeline
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "e_j = vᵀ tanh(W q + U h_j)" in text and "softmax of the scores, recomputed here" in text
    difference = float(text.split("largest difference from the model's weights: ")[1].split()[0])
    assert difference < 1e-5
    assert (tmp_path / "runs" / "bahdanau" / "timeline.jsonl").is_file()
