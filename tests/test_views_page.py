"""The lab's views as a notebook shows them (nmt.api.views): several fragments in one page, drawn
offline in Chromium from file:// — each view drawn (its elements present), a hover, key or click
changing the numbers shown, no request leaving the page, no console error. The same fragments are
what a notebook holds after ``display(view)``, saved, reopened or exported to HTML."""

from __future__ import annotations

from pathlib import Path

import pytest

import nmt

from .helpers import small_trained_models
from .test_api import MARATHI
from .test_page import (  # noqa: F401 - the shared chromium fixture
    MISSING,
    REQUIRED,
    arrow_keys_move_the_readout,
    browser,
    requested_urls,
    wait_for,
)

VARIANTS = {  # nmt compare's numbers, as compare.json holds them
    "config": "c.yaml",
    "minutes": 10,
    "variants": [
        {"name": "bahdanau", "arch": "rnn", "bleu": 20.5, "chrf": 40.1, "aer": 0.41, "precision": 0.6, "recall": 0.6},
        {
            "name": "transformer",
            "arch": "transformer",
            "bleu": 22.0,
            "chrf": 41.0,
            "aer": 0.52,
            "precision": 0.5,
            "recall": 0.5,
            "heads": [[0.6, 0.7], [0.35, 0.8]],
        },
    ],
}
TEXT = "I see tea."

if MISSING and not REQUIRED:
    pytest.skip(MISSING, allow_module_level=True)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """One page of fragments, as an exported notebook is: the RNN's attention, tree, playback and
    alignment, the Transformer's heads and playback, both side by side."""
    root = tmp_path_factory.mktemp("views")
    trained = small_trained_models(root)
    rnn, transformer = nmt.load(trained["rnn-run"]), nmt.load(trained["transformer-package"])
    views = [
        rnn.attention(TEXT),
        rnn.tree(TEXT),
        rnn.playback(TEXT),
        rnn.alignment(TEXT),
        transformer.heads(TEXT),
        transformer.playback(TEXT),
        nmt.compare({"rnn": rnn, "transformer": transformer}, TEXT),
        nmt.View("variants", VARIANTS),
        nmt.View("attention", MARATHI),  # its glyphs inline: no Devanagari font is asked of the system
    ]
    body = "\n".join(f'<section class="cell">{view._repr_html_()}</section>' for view in views)
    path = root / "views.html"
    path.write_text(f'<!doctype html><html><head><meta charset="utf-8"></head><body>{body}</body></html>', "utf-8")
    return path


def view_count(driver, kind: str, selector: str) -> int:
    return driver.execute_script(
        "return document.querySelectorAll(`.nmt-view[data-kind='${arguments[0]}'] ${arguments[1]}`).length",
        kind,
        selector,
    )


def test_every_view_draws_offline_and_answers_the_reader(page, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get_log("performance")
    browser.get_log("browser")
    browser.get(page.as_uri())
    wait_for(browser, lambda d: view_count(d, "heads", "svg.heads-chosen-figure") == 1)
    assert view_count(browser, "attention", "rect.cell") >= 4 + 30
    # the Marathi labels drawn in the font the fragment carries, loaded from the page itself
    faces = browser.execute_script(
        "return [...document.fonts].map((face) => [face.family.replace(/\"/g, ''), face.status])"
    )
    devanagari = {status for family, status in faces if family.startswith("nmt Devanagari")}
    assert devanagari == {"loaded"}, faces
    marathi = browser.find_elements(By.CSS_SELECTOR, ".nmt-view[data-kind='attention']")[-1]
    label = marathi.find_element(By.XPATH, ".//*[local-name()='text'][contains(., 'उद्या')]")
    assert browser.execute_script("return getComputedStyle(arguments[0]).fontFamily", label).startswith(
        '"nmt Devanagari'
    )
    assert view_count(browser, "tree", "g.node") >= 3
    assert view_count(browser, "playback", ".pb-slider") == 2 and view_count(browser, "align", "circle.link") >= 1
    assert view_count(browser, "compare", "svg.heatmap-figure") == 2  # the two models side by side
    assert view_count(browser, "variants", "tr[data-variant]") == 2
    assert view_count(browser, "variants", "td.best") == 3  # BLEU and chrF of one, AER of the other
    assert view_count(browser, "variants", "rect.cell") == 4  # the Transformer's layers x heads
    arrow_keys_move_the_readout(browser, ".nmt-view[data-kind='attention']")
    # the tree: a node clicked shows its attention row
    node = browser.find_elements(By.CSS_SELECTOR, ".nmt-view[data-kind='tree'] g.node")[1]
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", node)
    detail = browser.find_element(By.CSS_SELECTOR, ".nmt-view[data-kind='tree'] .node-detail")
    assert "step 1" in detail.text and detail.find_elements(By.CSS_SELECTOR, "rect.bar")
    # the playback: next shows step 2's numbers
    playback = browser.find_elements(By.CSS_SELECTOR, ".nmt-view[data-kind='playback']")[0]
    before = playback.find_element(By.CSS_SELECTOR, ".pb-step").text
    playback.find_element(By.CSS_SELECTOR, ".pb-next").click()
    assert before.startswith("step 1 /") and playback.find_element(By.CSS_SELECTOR, ".pb-step").text.startswith(
        "step 2 /"
    )
    # the heads: a thumbnail chosen is drawn large
    heads = browser.find_element(By.CSS_SELECTOR, ".nmt-view[data-kind='heads']")
    thumbnail = heads.find_element(By.CSS_SELECTOR, "g.head[data-layer='0'][data-head='1']")
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", thumbnail)
    chosen = heads.find_element(By.CSS_SELECTOR, "svg.heads-chosen-figure")
    assert (chosen.get_attribute("data-layer"), chosen.get_attribute("data-head")) == ("0", "1")
    assert not heads.find_elements(By.CSS_SELECTOR, ".heads-play")  # playing a head back needs the served lab
    assert {url for url in requested_urls(browser) if not url.startswith("data:")} == {page.as_uri()}
    browser.execute_script("console.error('the probe of this check')")  # the log does catch an error
    logged = [entry["message"] for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]
    assert len(logged) == 1 and "the probe of this check" in logged[0], logged
