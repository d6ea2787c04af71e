"""The attention lab on the page, in a real browser (Debian's chromium, as tests/test_page.py):
each view against the API's numbers, an edit a copying model must follow, the timeline's
positions, the main heatmap's legend and keyboard, export to SVG, PNG and JSON, and no
request to any other host. NMT_SCREENSHOT_DIR=folder saves a screenshot of each view."""

from __future__ import annotations

import itertools
import json
import os
import random
import unicodedata
import urllib.request
from pathlib import Path
from xml.etree import ElementTree

import pytest
import torch

from nmt.config.paths import prepared_paths
from nmt.training.timeline import Timeline, probe_translations

from .helpers import COPY_WORDS, copy_translator, random_translator
from .test_page import CHROMEDRIVER, CHROMIUM, MISSING, REQUIRED, requested_urls, running_server, wait_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(bool(MISSING) and not REQUIRED, reason=MISSING or ""),
]
SENTENCE = "alpha bravo golf delta"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("copy")
    copying = copy_translator(root)
    # a timeline as training writes it: three validations of two probe sentences
    timeline = Timeline(root / "timeline.jsonl")
    sources = copying.source_ids(["alpha bravo golf", "echo delta hotel charlie"])
    for epoch in (1, 2, 3):
        probes = probe_translations(
            copying.model, sources, copying.loaded.config, (copying.src_tok, copying.tgt_tok), torch.device("cpu")
        )
        # and the attention's agreement with eflomal, as train.probe_alignment records it
        alignment = {"aer": round(0.8 - 0.2 * epoch, 4), "precision": 0.5, "recall": 0.5, "pairs": 20}
        record = {"epoch": epoch, "step": 10 * epoch, "dev_bleu": 10.0 * epoch, "probes": probes}
        timeline.append({**record, "alignment": alignment})
    # the run's training pairs, as prepare writes them: what the alignment view runs eflomal beside
    paths = prepared_paths(copying.loaded.config)
    paths.root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    copied = [" ".join(rng.choice(COPY_WORDS) for _ in range(rng.randint(3, 6))) for _ in range(400)]
    for side in ("src", "tgt"):
        paths.text("train", side).write_text("\n".join(copied) + "\n", encoding="utf-8")
    models = {"copy": copying, "random": random_translator(tmp_path_factory.mktemp("random"), beam_size=4)}
    with running_server(models) as url:
        yield url


@pytest.fixture(scope="module")
def downloads(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads):
    if MISSING:
        pytest.fail(MISSING)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    yield driver
    driver.quit()


def post(server: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        server + path, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def get(server: str, path: str) -> dict:
    with urllib.request.urlopen(server + path, timeout=30) as answer:
        return json.loads(answer.read())


def shown_weight(host, selector: str) -> float | None:
    """The weight a heatmap cell shows, or None while it is (re)drawn."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    try:
        return float(host.find_element("css selector", selector).get_attribute("data-weight"))
    except (NoSuchElementException, StaleElementReferenceException):
        return None


def screenshot(browser, name: str) -> None:
    folder = os.environ.get("NMT_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.execute_script("document.getElementById('lab').scrollIntoView();")
        browser.save_screenshot(str(Path(folder) / f"{name}.png"))


def open_tab(browser, view: str):
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, f"#lab .tabs button[data-view='{view}']").click()
    return browser.find_element(By.ID, f"lab-{view}")


def test_every_lab_view_shows_the_models_numbers_and_exports(server, browser, downloads):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(server + "/")
    wait_for(browser, lambda d: "copy:" in d.find_element(By.ID, "model-list").text)
    browser.find_element(By.ID, "source").send_keys(SENTENCE)

    # The main heatmap: a legend, and arrow keys read the weights cell by cell (fonts loaded first).
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".panel .heatmap svg rect.cell"))
    heatmap = browser.find_element(By.CSS_SELECTOR, ".panel .heatmap svg")
    assert heatmap.find_elements(By.CSS_SELECTOR, "g.legend") and heatmap.get_attribute("data-fonts-ready") == "true"
    heatmap.click()
    heatmap.send_keys(Keys.ARROW_RIGHT)
    wait_for(browser, lambda d: heatmap.get_attribute("data-focus") == "0,1")
    assert "→" in browser.find_element(By.CSS_SELECTOR, ".panel .readout").text

    # Beam tree: one node drawn per node of the API's tree.
    tree = post(server, "/api/lab/tree", {"text": SENTENCE, "model": "copy", "beam_size": 3})
    view = browser.find_element(By.ID, "lab-tree")
    wait_for(
        browser, lambda d: len(view.find_elements(By.CSS_SELECTOR, "svg.tree-figure g.node")) == len(tree["nodes"])
    )
    ranked = view.find_elements(By.CSS_SELECTOR, "g.node.ranked")
    assert len(ranked) == sum(1 for n in tree["nodes"] if n["rank"])
    ranked[0].click()
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, ".node-detail svg rect.bar"))
    screenshot(browser, "lab-tree")

    # Step by step: stepping changes the shown step, and its numbers are the API's.
    playback = post(server, "/api/lab/playback", {"text": SENTENCE, "model": "copy"})
    view = open_tab(browser, "playback")
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, ".pb-step"))
    assert view.find_element(By.CSS_SELECTOR, ".pb-step").text.startswith(f"step 1 / {len(playback['steps'])}")
    view.find_element(By.CSS_SELECTOR, ".pb-next").click()
    wait_for(browser, lambda d: view.find_element(By.CSS_SELECTOR, ".pb-step").text.startswith("step 2 /"))
    shown = [
        float(td.get_attribute("data-weight")) for td in view.find_elements(By.CSS_SELECTOR, ".pb-table td.weight")
    ]
    assert shown == pytest.approx(playback["steps"][1]["weights"], abs=1e-6)
    assert playback["formula"][0] in view.text
    screenshot(browser, "lab-playback")

    # Edit: all attention of step 0 on "golf" — the copying model writes "golf" first.
    view = open_tab(browser, "edit")
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, ".edit-source"))
    assert view.find_element(By.CSS_SELECTOR, ".edit-step").get_attribute("value") == "1"  # playback's step
    step = view.find_element(By.CSS_SELECTOR, ".edit-step")
    step.clear()
    step.send_keys("0")
    view.find_element(By.CSS_SELECTOR, ".edit-source[data-col='2']").click()
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, ".edit-edited"))
    assert view.find_element(By.CSS_SELECTOR, ".edit-edited").text.split("‖")[1].split()[0] == "golf"
    assert view.find_element(By.CSS_SELECTOR, ".edit-original").text.split("‖")[1].split()[0] == "alpha"
    screenshot(browser, "lab-edit")

    # Saliency beside attention, for the third target subword.
    view = open_tab(browser, "saliency")
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, ".sal-target"))
    view.find_element(By.CSS_SELECTOR, ".sal-target[data-position='2']").click()
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, ".sal-rho"))
    expected = post(server, "/api/lab/saliency", {"text": SENTENCE, "model": "copy", "position": 2})
    assert f"{expected['rank_correlation']:.2f}" in view.find_element(By.CSS_SELECTOR, ".sal-rho").text
    screenshot(browser, "lab-saliency")

    # Timeline: one slider position per validation; moving it shows that validation.
    view = open_tab(browser, "timeline")
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, "#timeline-slider"))
    slider = view.find_element(By.ID, "timeline-slider")
    assert int(slider.get_attribute("max")) + 1 == 3
    wait_for(browser, lambda d: "epoch 3" in view.find_element(By.CSS_SELECTOR, ".tl-label").text)
    browser.execute_script("arguments[0].value = 0; arguments[0].dispatchEvent(new Event('input'));", slider)
    wait_for(browser, lambda d: "epoch 1" in view.find_element(By.CSS_SELECTOR, ".tl-label").text)
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, "svg.heatmap-figure rect.cell"))
    # the agreement with eflomal by validation: one point each, the file's AER, the one shown marked
    assert "AER 0.600 against eflomal" in view.find_element(By.CSS_SELECTOR, ".tl-label").text
    points = view.find_elements(By.CSS_SELECTOR, "svg.tl-agreement circle.tl-aer")
    assert [float(p.get_attribute("data-aer")) for p in points] == pytest.approx([0.6, 0.4, 0.2])
    assert [float(p.get_attribute("r")) for p in points] == [5, 3, 3]  # validation 1 is the one shown
    screenshot(browser, "lab-timeline")

    # Export the timeline view: the SVG parses, the PNG opens, the JSON is the API's data.
    bar = browser.find_element(By.CSS_SELECTOR, "#lab .export[data-view='timeline']")
    for kind in ("svg", "png", "json"):
        bar.find_element(By.CSS_SELECTOR, f"button[data-export='{kind}']").click()
    # Chromium writes a download as NAME.crdownload and renames it when it is whole: none left, all three there
    wait_for(
        browser,
        lambda d: (
            all((downloads / f"nmt-timeline.{k}").is_file() for k in ("svg", "png", "json"))
            and not list(downloads.glob("*.crdownload"))
        ),
    )
    assert ElementTree.parse(downloads / "nmt-timeline.svg").getroot().tag.endswith("svg")
    from PIL import Image

    with Image.open(downloads / "nmt-timeline.png") as image:
        assert image.size[0] > 100 and image.size[1] > 100
    assert len(json.loads((downloads / "nmt-timeline.json").read_text(encoding="utf-8"))["entries"]) == 3

    # Every request went to this server (downloads are blob: URLs the page made itself).
    urls = requested_urls(browser)
    assert urls and all(url.startswith((server + "/", "data:", "blob:" + server)) for url in urls), urls


def test_the_alignment_view_marks_the_attentions_links_beside_eflomals(server, browser):
    """A model that copies attends to each word as it writes it: its links and eflomal's (over the
    copying pairs) are the diagonal, drawn as dots inside rings, AER 0."""
    pytest.importorskip("eflomal")
    from selenium.webdriver.common.by import By

    answer = post(server, "/api/lab/align", {"text": SENTENCE, "model": "copy"})
    words = len(SENTENCE.split())
    assert answer["source_words"] == SENTENCE.split() and len(answer["weights"]) == len(answer["target_words"])
    assert answer["links"] == answer["reference"] == [[i, i] for i in range(words)]
    assert answer["pharaoh"] == answer["reference_pharaoh"] == " ".join(f"{i}-{i}" for i in range(words))
    assert answer["agreement"]["aer"] == 0.0 and answer["heads"] is None  # an RNN: no heads
    browser.get(server + "/")
    wait_for(browser, lambda d: "copy:" in d.find_element(By.ID, "model-list").text)
    browser.find_element(By.ID, "source").send_keys(SENTENCE)
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".panel .heatmap svg rect.cell"))
    view = open_tab(browser, "align")
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, "svg.align-figure circle.link.reference"))
    model_links = view.find_elements(By.CSS_SELECTOR, "svg.align-figure circle.link.model")
    assert sorted((int(c.get_attribute("data-source")), int(c.get_attribute("data-target"))) for c in model_links) == [
        (i, i) for i in range(words)
    ]
    assert len(view.find_elements(By.CSS_SELECTOR, "circle.link.reference")) == words
    ticks = browser.execute_script(  # the colour bar's numbers, apart on a short sentence (they ran together)
        "return [...arguments[0].querySelectorAll('svg.align-figure .legend text.tick')].slice(0, 5)"
        ".map((t) => { const b = t.getBBox(); return [b.x, b.x + b.width]; });",
        view,
    )
    assert len(ticks) == 5 and all(right + 4 <= left for (_, right), (left, _) in itertools.pairwise(ticks)), ticks
    summary = view.find_element(By.CSS_SELECTOR, ".align-summary").text
    assert "AER 0.00 against eflomal" in summary
    assert "not whether the translation is right" in summary  # a number on the model's own words, said so
    screenshot(browser, "lab-align")


def test_the_beam_tree_of_a_long_sentence_fits_its_box_and_zooms(server, browser):
    """A 40-subword sentence at beam 5 (the untrained model runs every hypothesis to the length
    limit: the widest tree): at first sight every node lies inside the view's box, each label to
    the right of its node; the wheel zooms in, a double click fits again."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    words = ["they", "like", "tea", "and", "we", "eat", "rice", "while", "you", "see", "apples"]
    sentence = ""
    for count in range(1, 200):  # as many words as make about 40 subwords for this model
        sentence = " ".join(words[i % len(words)] for i in range(count))
        tokens = post(server, "/api/lab/tree", {"text": sentence, "model": "random", "beam_size": 1})["source_tokens"]
        if len(tokens) >= 40:
            break
    browser.get(server + "/")
    wait_for(browser, lambda d: "copy:" in d.find_element(By.ID, "model-list").text)
    Select(browser.find_element(By.ID, "lab-model")).select_by_value("random")
    beam = browser.find_element(By.ID, "beam")
    beam.clear()
    beam.send_keys("5")
    browser.find_element(By.ID, "source").send_keys(sentence)
    view = browser.find_element(By.ID, "lab-tree")
    wait_for(browser, lambda d: len(view.find_elements(By.CSS_SELECTOR, "svg.tree-figure g.node")) > 100, timeout=60)
    tree = post(server, "/api/lab/tree", {"text": sentence, "model": "random", "beam_size": 5})
    assert 40 <= len(tree["source_tokens"]) <= 50 and max(n["step"] for n in tree["nodes"]) >= 40
    box = browser.execute_script(
        "return document.querySelector('#lab-tree .tree-frame').getBoundingClientRect().toJSON()"
    )
    nodes = browser.execute_script(
        "const rect = (e) => e.getBoundingClientRect().toJSON();"
        "return [...document.querySelectorAll('#lab-tree svg.tree-figure g.node')].map(g => "
        "[rect(g.querySelector('circle')), rect(g.querySelector('text'))])"
    )
    slack = 1.0
    for circle, label in nodes:
        assert box["left"] - slack <= circle["left"] and circle["right"] <= box["right"] + slack, (circle, box)
        assert box["top"] - slack <= circle["top"] and circle["bottom"] <= box["bottom"] + slack, (circle, box)
        assert label["left"] >= circle["left"] + circle["width"] / 2 - 0.5  # beside the node, not under it
    svg = view.find_element(By.CSS_SELECTOR, "svg.tree-figure")

    def view_box() -> list[float]:
        return [float(v) for v in browser.execute_script("return arguments[0].getAttribute('viewBox')", svg).split()]

    fitted = view_box()
    ActionChains(browser).scroll_to_element(svg).perform()
    browser.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "arguments[0].dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + 50, clientY: r.top + 20,"
        " bubbles: true, cancelable: true}));",
        svg,
    )
    assert view_box()[2] < fitted[2]  # the wheel zoomed in
    ActionChains(browser).double_click(svg).perform()
    assert view_box() == fitted
    screenshot(browser, "lab-tree-long")


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory):
    """An RNN and a Transformer on the same vocabularies, served together."""
    from .helpers import transformer_translator

    root = tmp_path_factory.mktemp("transformer")
    transformer = transformer_translator(root)
    timeline = Timeline(root / "timeline.jsonl")  # two validations, every head recorded as training does
    sources = transformer.source_ids(["I see apples.", "we like tea."])
    for epoch in (1, 2):
        tokenizers = (transformer.src_tok, transformer.tgt_tok)
        probes = probe_translations(
            transformer.model, sources, transformer.loaded.config, tokenizers, torch.device("cpu")
        )
        timeline.append({"epoch": epoch, "step": 10 * epoch, "dev_bleu": 1.0 * epoch, "probes": probes})
    models = {"rnn": random_translator(tmp_path_factory.mktemp("rnn"), beam_size=3), "transformer": transformer}
    with running_server(models) as url:
        yield url


def test_a_transformers_heads_beside_an_rnns_attention(side_by_side, browser):
    """Both models translate the sentence side by side; for the Transformer the lab shows a grid
    of every layer's heads (the API's numbers), a head clicked plays back with its scaled dot-products,
    and the RNN's edit view gives way to the heads."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    text = "I see apples."
    browser.get(side_by_side + "/")
    wait_for(browser, lambda d: "Transformer 3+2 layers, 4 heads" in d.find_element(By.ID, "model-list").text)
    browser.find_element(By.ID, "source").send_keys(text)
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".panel .heatmap svg rect.cell")) > 0)
    wait_for(
        browser,
        lambda d: all(
            p.find_elements(By.CSS_SELECTOR, ".heatmap svg") for p in d.find_elements(By.CSS_SELECTOR, ".panel")
        ),
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, ".panel")) == 2  # the two models side by side

    assert not browser.find_element(By.CSS_SELECTOR, "#lab .tabs button[data-view='heads']").is_displayed()
    Select(browser.find_element(By.ID, "lab-model")).select_by_value("transformer")
    wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#lab .tabs button[data-view='heads']").is_displayed())
    assert not browser.find_element(By.CSS_SELECTOR, "#lab .tabs button[data-view='edit']").is_displayed()
    view = open_tab(browser, "heads")
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, "svg.heads-figure g.head"))
    translation = post(side_by_side, "/api/translate", {"text": text, "model": "transformer"})
    expected = post(
        side_by_side,
        "/api/lab/heads",
        {"text": text, "model": "transformer", "tokens": translation["translations"][0]["tokens"]},
    )
    heads = view.find_elements(By.CSS_SELECTOR, "svg.heads-figure g.head")
    assert len(heads) == 2 * (4 + 1)  # decoder layers x (heads + their mean)
    cell = view.find_element(
        By.CSS_SELECTOR, "g.head[data-layer='1'][data-head='2'] rect.cell[data-row='0'][data-col='1']"
    )
    assert float(cell.get_attribute("data-weight")) == pytest.approx(expected["cross"][1][2][0][1], abs=1e-6)
    # the grid is a chooser: at first the last layer's mean is drawn large, its words on both axes
    large = "svg.heads-chosen-figure"
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, large))
    chosen = view.find_element(By.CSS_SELECTOR, large)
    assert (chosen.get_attribute("data-layer"), chosen.get_attribute("data-head")) == ("1", "mean")
    assert len(chosen.find_elements(By.CSS_SELECTOR, "text.src")) == len(expected["source_tokens"])
    assert len(chosen.find_elements(By.CSS_SELECTOR, "text.tgt")) == len(expected["tokens"])
    assert "brightest cell" in view.find_element(By.CSS_SELECTOR, ".heads-look").text  # what to look for
    view.find_element(By.CSS_SELECTOR, "g.head[data-layer='1'][data-head='2']").click()
    wait_for(browser, lambda d: view.find_element(By.CSS_SELECTOR, large).get_attribute("data-head") == "2")
    big = view.find_element(By.CSS_SELECTOR, f"{large} rect.cell[data-row='0'][data-col='1']")
    assert float(big.get_attribute("data-weight")) == pytest.approx(expected["cross"][1][2][0][1], abs=1e-6)
    # labels as the script shapes them: a piece that starts with a vowel sign on a dotted circle, never alone
    labels = browser.execute_script(
        "return [...arguments[0].querySelectorAll('text')].map((t) => t.textContent)",
        view.find_element(By.CSS_SELECTOR, large),
    )
    assert labels and not any(label[:1] and unicodedata.category(label[0]).startswith("M") for label in labels)
    assert (
        browser.execute_script("return clean('\u2581\u0940') + '|' + clean('\u2581\u092e\u0940')")
        == "\u25cc\u0940|\u092e\u0940"
    )
    Select(view.find_element(By.CSS_SELECTOR, ".heads-kind")).select_by_value("encoder_self")
    wait_for(browser, lambda d: len(view.find_elements(By.CSS_SELECTOR, "svg.heads-figure g.head")) == 3 * 5)
    screenshot(browser, "lab-heads")

    Select(view.find_element(By.CSS_SELECTOR, ".heads-kind")).select_by_value("cross")
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, "g.head[data-layer='0'][data-head='3']"))
    view.find_element(By.CSS_SELECTOR, "g.head[data-layer='0'][data-head='3']").click()
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, ".heads-play"))
    view.find_element(By.CSS_SELECTOR, ".heads-play").click()
    playback = browser.find_element(By.ID, "lab-playback")
    wait_for(browser, lambda d: playback.find_elements(By.CSS_SELECTOR, ".pb-step") and playback.is_displayed())
    assert Select(playback.find_element(By.CSS_SELECTOR, ".pb-head")).first_selected_option.text == "head 3"
    played = post(
        side_by_side,
        "/api/lab/playback",
        {
            "text": text,
            "model": "transformer",
            "layer": 0,
            "head": 3,
            "tokens": translation["translations"][0]["tokens"],
        },
    )
    shown = [
        float(td.get_attribute("data-weight")) for td in playback.find_elements(By.CSS_SELECTOR, ".pb-table td.weight")
    ]
    assert shown == pytest.approx(played["steps"][0]["weights"], abs=1e-6)
    assert "√d_k" in playback.text and "head 3's share" in playback.text
    screenshot(browser, "lab-head-playback")

    # The timeline follows one chosen head of one layer over the epochs (the file's numbers)
    view = open_tab(browser, "timeline")
    wait_for(browser, lambda d: view.find_elements(By.CSS_SELECTOR, ".tl-head"))
    Select(view.find_element(By.CSS_SELECTOR, ".tl-head")).select_by_value("1.2")
    heads = get(side_by_side, "/api/timeline?model=transformer")["entries"][-1]["probes"][0]["heads"]
    cell = "rect.cell[data-row='0'][data-col='1']"
    wait_for(browser, lambda d: shown_weight(view, cell) == pytest.approx(heads[1][2][0][1], abs=1e-6))
    Select(view.find_element(By.CSS_SELECTOR, ".tl-head")).select_by_value("0.3")
    wait_for(browser, lambda d: shown_weight(view, cell) == pytest.approx(heads[0][3][0][1], abs=1e-6))
