"""notebooks/attention_lab.ipynb runs from top to bottom (nbclient, this Python's kernel) where
a user has it, shows what it promises — its views drawn inline, one step played back whose
softmax, recomputed in the notebook, equals the model's weights — and, exported to HTML
(nbconvert, its default template) and opened in Chromium with the network blocked, every view
draws and answers the reader, and nothing of the notebook's own asks the network."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .test_page import MISSING, REQUIRED, browser, wait_for  # noqa: F401 - the shared chromium fixture

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "attention_lab.ipynb"
# a URL an output names for a script, a style or a font (the template's own are nbconvert's business)
FETCHED = re.compile(r"""(?:src|href)\s*=\s*["']?https?://|@import|url\(\s*["']?https?://""")


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """Run where a user has it: in a folder `nmt init --example eng-mar` wrote (outside a checkout
    it once stopped in its first cell, looking for configs/tiny.yaml that init did not copy)."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient
    from typer.testing import CliRunner

    from nmt.cli import app

    root = tmp_path_factory.mktemp("notebook")
    folder = root / "class"
    folder.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        assert CliRunner().invoke(app, ["init", "--example", "eng-mar"]).exit_code == 0
        copied = folder / "notebooks" / NOTEBOOK.name
        assert copied.read_bytes() == NOTEBOOK.read_bytes() and (folder / "configs" / "tiny.yaml").is_file()
        patch.setenv("NMT_NOTEBOOK_RUNS", str(root / "runs"))
        patch.setenv("NMT_NOTEBOOK_EPOCHS", "3")  # its budget here; ten by hand (docs/lab.md)
        notebook = nbformat.read(copied, as_version=4)
        for cell in notebook.cells:  # run what is written, not what was saved
            if cell.cell_type == "code":
                cell.outputs = []
        NotebookClient(
            notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(copied.parent)}}
        ).execute()
    return notebook, root


@pytest.mark.slow
def test_the_attention_lab_notebook_executes_and_shows_its_views_and_a_step(executed):
    notebook, root = executed
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    views = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    kinds = [re.search(r'data-kind="(\w+)"', view).group(1) for view in views]
    assert kinds == ["attention", "playback", "attention", "attention", "tree", "timeline"]
    assert not [view for view in views if FETCHED.search(view)]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "e_j = vᵀ tanh(W q + U h_j)" in text and "softmax of the scores, recomputed here" in text
    difference = float(text.split("largest difference from the model's weights: ")[1].split()[0])
    assert difference < 1e-5
    assert (root / "runs" / "bahdanau" / "timeline.jsonl").is_file()


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING) and not REQUIRED, reason=str(MISSING))
def test_the_notebook_exported_to_html_draws_every_view_offline(executed, browser, tmp_path):  # noqa: F811
    from nbconvert import HTMLExporter
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    notebook, _ = executed
    body, _ = HTMLExporter().from_notebook_node(notebook)
    page = tmp_path / "attention_lab.html"
    page.write_text(body, encoding="utf-8")
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*"]})
    try:
        browser.get_log("performance")
        browser.get_log("browser")
        browser.get(page.as_uri())
        drawn = "return [...document.querySelectorAll('.nmt-view')].map((v) => v.querySelectorAll('svg').length)"
        wait_for(browser, lambda d: len(d.execute_script(drawn)) == 6 and all(d.execute_script(drawn)))
        figure = browser.find_element(By.CSS_SELECTOR, ".nmt-view[data-kind='attention'] svg.heatmap-figure")
        readout = browser.find_element(By.CSS_SELECTOR, ".nmt-view[data-kind='attention'] .readout")
        figure.click()
        figure.send_keys(Keys.ARROW_RIGHT)
        first = readout.text
        figure.send_keys(Keys.ARROW_DOWN)
        assert "→" in first and readout.text != first
        playback = browser.find_element(By.CSS_SELECTOR, ".nmt-view[data-kind='playback']")
        playback.find_element(By.CSS_SELECTOR, ".pb-next").click()
        assert playback.find_element(By.CSS_SELECTOR, ".pb-step").text.startswith("step 2 /")
        timeline = browser.find_element(By.CSS_SELECTOR, ".nmt-view[data-kind='timeline']")
        label = timeline.find_element(By.CSS_SELECTOR, ".tl-label").text
        browser.execute_script(
            "const s = arguments[0]; s.value = 0; s.dispatchEvent(new Event('input'))",
            timeline.find_element(By.CSS_SELECTOR, "input[type=range]"),
        )
        assert label != timeline.find_element(By.CSS_SELECTOR, ".tl-label").text
        requested = {
            json.loads(entry["message"])["message"]["params"]["request"]["url"]
            for entry in browser.get_log("performance")
            if '"Network.requestWillBeSent"' in entry["message"]
        }
        template = set(re.findall(r"""<script[^>]+src="(https?://[^"]+)""", body.split("<body", 1)[0]))
        assert requested - {page.as_uri()} <= template  # nbconvert's template's own CDN scripts, blocked
        errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert [e for e in errors if not any(url.split("?")[0] in e for url in template)] == []
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
