"""Every notebook in notebooks/ runs from top to bottom (nbclient, this Python's kernel) where a
user has it, on a budget of one environment variable (NMT_NOTEBOOK_EPOCHS), and shows what it
promises: its views drawn inline (the attention lab's: one step played back whose softmax,
recomputed in the notebook, equals the model's weights). Exported to HTML (nbconvert, its default
template) and opened in Chromium with the network blocked, every view draws and answers the
reader, and nothing of the notebook's own asks the network."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .test_page import (  # noqa: F401 - the shared chromium fixture
    MISSING,
    REQUIRED,
    arrow_keys_move_the_readout,
    browser,
    requested_urls,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# each notebook's views, in order (a new notebook adds its line)
VIEWS = {
    "attention_lab.ipynb": ["attention", "playback", "attention", "attention", "tree", "timeline"],
    "does_attention_align.ipynb": ["align", "align", "align", "compare"],
    "bahdanau_to_transformer.ipynb": ["compare", "heads", "playback"],
}
# a URL an output names for a script, a style or a font (the template's own are nbconvert's business)
FETCHED = re.compile(r"""(?:src|href)\s*=\s*["']?https?://|@import|url\(\s*["']?https?://""")


@pytest.fixture(scope="module")
def class_folder(tmp_path_factory) -> Path:
    """Where a user has the notebooks: a folder `nmt init --example eng-mar` wrote (outside a
    checkout the lab's once stopped in its first cell, looking for configs/tiny.yaml)."""
    from typer.testing import CliRunner

    from nmt.cli import app

    folder = tmp_path_factory.mktemp("class")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        assert CliRunner().invoke(app, ["init", "--example", "eng-mar"]).exit_code == 0
    return folder


@pytest.fixture(scope="module", params=[path.name for path in NOTEBOOKS])
def executed(request, class_folder):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    copied = class_folder / "notebooks" / request.param
    assert copied.read_bytes() == (ROOT / "notebooks" / request.param).read_bytes()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NMT_NOTEBOOK_RUNS", str(class_folder / "runs"))
        # its budget here: two epochs where the timeline is drawn (it needs two validations), else one;
        # ten by hand (docs/lab.md)
        patch.setenv("NMT_NOTEBOOK_EPOCHS", "2" if "nmt.timeline" in copied.read_text(encoding="utf-8") else "1")
        notebook = nbformat.read(copied, as_version=4)
        for cell in notebook.cells:  # run what is written, not what was saved
            if cell.cell_type == "code":
                cell.outputs = []
        NotebookClient(
            notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(copied.parent)}}
        ).execute()
    return request.param, notebook


def test_every_notebook_has_its_line_here():
    assert sorted(VIEWS) == [path.name for path in NOTEBOOKS]


@pytest.mark.slow
def test_each_notebook_executes_and_shows_its_views(executed, class_folder):
    name, notebook = executed
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    views = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert [re.search(r'data-kind="(\w+)"', view).group(1) for view in views] == VIEWS[name]
    assert not [view for view in views if FETCHED.search(view)]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    if name == "attention_lab.ipynb":
        assert "e_j = vᵀ tanh(W q + U h_j)" in text and "softmax of the scores, recomputed here" in text
        assert float(text.split("largest difference from the model's weights: ")[1].split()[0]) < 1e-5
        assert (class_folder / "runs" / "bahdanau" / "timeline.jsonl").is_file()
    if name == "bahdanau_to_transformer.ipynb":
        assert float(text.split("largest difference from the head's weights: ")[1].split()[0]) < 1e-5
    if name == "does_attention_align.ipynb":
        rows = [line.split() for line in text.splitlines() if line.startswith(("bahdanau", "luong")) and " " in line]
        assert [row[0] for row in rows] == ["bahdanau", "luong-general", "luong-concat"]
        assert all(0.0 <= float(row[3]) <= 1.0 for row in rows)  # each AER against eflomal


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING) and not REQUIRED, reason=str(MISSING))
def test_each_notebook_exported_to_html_draws_every_view_offline(executed, browser, tmp_path):  # noqa: F811
    from nbconvert import HTMLExporter

    name, notebook = executed
    body, _ = HTMLExporter().from_notebook_node(notebook)
    page = tmp_path / name.replace(".ipynb", ".html")
    page.write_text(body, encoding="utf-8")
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*"]})
    try:
        browser.get_log("performance")
        browser.get_log("browser")
        browser.get(page.as_uri())
        drawn = "return [...document.querySelectorAll('.nmt-view')].map((v) => v.querySelectorAll('svg').length)"
        wait_for(browser, lambda d: len(d.execute_script(drawn)) == len(VIEWS[name]) and all(d.execute_script(drawn)))
        answers_the_reader(browser)
        requested = {url for url in requested_urls(browser) if not url.startswith("data:")}
        template = set(re.findall(r"""<script[^>]+src="(https?://[^"]+)""", body.split("<body", 1)[0]))
        assert requested - {page.as_uri()} <= template  # nbconvert's template's own CDN scripts, blocked
        errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert [e for e in errors if not any(url.split("?")[0] in e for url in template)] == []
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})


def answers_the_reader(driver) -> None:
    """A key, a click or a slider changes the numbers a view shows."""
    from selenium.webdriver.common.by import By

    arrow_keys_move_the_readout(driver, ".nmt-view")
    for playback in driver.find_elements(By.CSS_SELECTOR, ".nmt-view[data-kind='playback']"):
        playback.find_element(By.CSS_SELECTOR, ".pb-next").click()
        assert playback.find_element(By.CSS_SELECTOR, ".pb-step").text.startswith("step 2 /")
    for timeline in driver.find_elements(By.CSS_SELECTOR, ".nmt-view[data-kind='timeline']"):
        label = timeline.find_element(By.CSS_SELECTOR, ".tl-label").text
        driver.execute_script(
            "const s = arguments[0]; s.value = 0; s.dispatchEvent(new Event('input'))",
            timeline.find_element(By.CSS_SELECTOR, "input[type=range]"),
        )
        assert label != timeline.find_element(By.CSS_SELECTOR, ".tl-label").text
