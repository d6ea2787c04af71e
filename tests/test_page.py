"""The page of `nmt serve` in a real browser: Debian's chromium, headless, through chromedriver.

It loads the page from a server on a loopback port, types a sentence, and checks what a person
would look at: the translation, the heatmap, the n-best list, hovering and choosing an
alternative — and that the page asked nothing of any other host. With NMT_BROWSER_TESTS=required
(set by .ci/run) a missing browser is a failure, not a skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

from nmt.serve.app import build_app

from .helpers import random_translator, wait_until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
NEEDED = "Debian's chromium and chromium-driver are needed (apt-get install chromium chromium-driver)"
MISSING = None if CHROMIUM and CHROMEDRIVER else NEEDED
REQUIRED = os.environ.get("NMT_BROWSER_TESTS") == "required"  # .ci/run: a missing browser fails the test
pytestmark = [pytest.mark.browser, pytest.mark.skipif(bool(MISSING) and not REQUIRED, reason=MISSING or "")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_server(models: dict, token: str = ""):
    """`nmt serve`'s app over ``models`` on a free loopback port, in a thread: its URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(build_app(models, token=token), host="127.0.0.1", port=port, log_level="warning")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    wait_until(lambda: uv.started, what="the server's start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        uv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    models = {
        "bahdanau": random_translator(tmp_path_factory.mktemp("a"), beam_size=4),
        "second": random_translator(tmp_path_factory.mktemp("b"), beam_size=4),
    }
    with running_server(models) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    if MISSING:
        pytest.fail(MISSING)  # only reached with NMT_BROWSER_TESTS=required
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    # every request the page makes, and what it logs on its console
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def requested_urls(driver) -> list[str]:
    """Every URL the page asked for since the performance log was last read (data: URLs too)."""
    return [
        json.loads(entry["message"])["message"]["params"]["request"]["url"]
        for entry in driver.get_log("performance")
        if '"Network.requestWillBeSent"' in entry["message"]
    ]


def wait_for(driver, condition, timeout: float = 30.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: condition(d))


def arrow_keys_move_the_readout(driver, view: str) -> None:
    """A heatmap of ``view`` (a CSS selector) clicked, then the arrow keys: the line under it
    names each cell's weight in turn."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    figure = driver.find_element(By.CSS_SELECTOR, f"{view} svg.heatmap-figure")
    readout = driver.find_element(By.CSS_SELECTOR, f"{view} .readout")
    figure.click()
    figure.send_keys(Keys.ARROW_RIGHT)
    first = readout.text
    figure.send_keys(Keys.ARROW_DOWN)
    assert "→" in first and readout.text != first


def panel_text(driver, index: int = 0) -> str:
    return driver.execute_script(
        "return document.querySelectorAll('.panel .translation')[arguments[0]].textContent;", index
    )


def test_the_page_translates_as_you_type_draws_attention_and_follows_a_chosen_alternative(server, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import staleness_of

    browser.get_log("performance")  # drained: the browser is shared, and other tests' requests are not this page's
    browser.get(server + "/")
    wait_for(browser, lambda d: "bahdanau:" in d.find_element(By.ID, "model-list").text)
    nbest = browser.find_element(By.ID, "nbest")
    nbest.clear()
    nbest.send_keys("3")
    browser.find_element(By.ID, "source").send_keys("I see apples.")

    # Both models' translations and heatmaps appear, side by side.
    wait_for(
        browser,
        lambda d: (
            len(d.find_elements(By.CSS_SELECTOR, ".panel .translation .tok")) > 0
            and all(panel_text(d, i) for i in (0, 1))
        ),
    )
    panels = browser.find_elements(By.CSS_SELECTOR, ".panel")
    assert [p.find_element(By.CSS_SELECTOR, "h2").text for p in panels] == ["bahdanau", "second"]
    first = panels[0]
    cells = first.find_elements(By.CSS_SELECTOR, ".heatmap svg rect.cell")
    rows = first.find_elements(By.CSS_SELECTOR, ".heatmap svg text.tgt")
    columns = first.find_elements(By.CSS_SELECTOR, ".heatmap svg text.src")
    assert len(rows) > 0 and len(columns) > 0 and len(cells) == len(rows) * len(columns)
    assert len(first.find_elements(By.CSS_SELECTOR, ".nbest li")) == 3

    # Hovering a target subword dims the other rows of the heatmap and lights its source.
    token = first.find_element(By.CSS_SELECTOR, ".translation .tok")
    ActionChains(browser).move_to_element(token).perform()
    wait_for(
        browser, lambda d: len(first.find_elements(By.CSS_SELECTOR, ".heatmap rect.dim")) == len(cells) - len(columns)
    )
    assert first.find_elements(By.CSS_SELECTOR, ".heatmap text.lit")

    # Words, not subwords: the same heatmap over fewer or as many cells. The subword heatmap
    # already meets that test, so first wait for the page to replace it.
    subword_heatmap = first.find_element(By.CSS_SELECTOR, ".heatmap svg")
    browser.find_element(By.ID, "words").click()
    wait_for(
        browser,
        lambda d: (
            staleness_of(subword_heatmap)(d)
            and len(first.find_elements(By.CSS_SELECTOR, ".heatmap svg text.src")) <= len(columns)
            and first.find_elements(By.CSS_SELECTOR, ".heatmap svg rect.cell")
        ),
    )

    # Clicking a subword lists alternatives; choosing one re-decodes with the chosen start.
    before = panel_text(browser)
    tokens = first.find_elements(By.CSS_SELECTOR, ".translation .tok")
    position = min(1, len(tokens) - 1)
    kept = [t.get_attribute("data-piece") for t in tokens[:position]]
    tokens[position].click()
    wait_for(browser, lambda d: first.find_elements(By.CSS_SELECTOR, ".alternatives button.alt"))
    current = tokens[position].get_attribute("data-piece")
    choice = next(
        b
        for b in first.find_elements(By.CSS_SELECTOR, ".alternatives button.alt")
        if b.get_attribute("data-token") not in (current, "<eos>")
    )
    chosen = choice.get_attribute("data-token")
    choice.click()
    wait_for(browser, lambda d: panel_text(d) != before)
    pieces = [t.get_attribute("data-piece") for t in first.find_elements(By.CSS_SELECTOR, ".translation .tok")]
    assert pieces[: position + 1] == [*kept, chosen]
    assert not browser.find_element(By.ID, "prefix-bar").get_attribute("hidden")

    screenshot = os.environ.get("NMT_SCREENSHOT")
    if screenshot:
        Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(screenshot)

    # Every request the page made went to this server.
    urls = requested_urls(browser)
    assert urls and all(url.startswith(server + "/") or url.startswith("data:") for url in urls), urls


def test_a_class_page_opened_with_its_token_translates_and_one_without_says_what_is_missing(tmp_path, browser):
    from selenium.webdriver.common.by import By

    with running_server({"m": random_translator(tmp_path)}, token="class-7b") as url:
        browser.get(url + "/")
        wait_for(browser, lambda d: "token" in d.find_element(By.ID, "status").text)
        browser.get(url + "/?token=class-7b")
        wait_for(browser, lambda d: "m:" in d.find_element(By.ID, "model-list").text)
        browser.find_element(By.ID, "source").send_keys("I see apples.")
        wait_for(browser, lambda d: panel_text(d) and d.find_elements(By.CSS_SELECTOR, ".heatmap svg rect.cell"))
