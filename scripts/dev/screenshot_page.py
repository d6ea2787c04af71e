#!/usr/bin/env python
"""A screenshot of `nmt serve`'s page with a trained model, taken by the browser the page test
uses (Debian's chromium, headless, through chromedriver): README's picture.

    python scripts/dev/screenshot_page.py --config configs/eng-mar-cpu.yaml --text "Where is the station?"

It starts the server on a free loopback port, types the text, hovers one target subword,
saves the picture and stops the server. With ``--lab FOLDER`` it also saves one picture per
view of the attention lab (lab-tree.png, lab-playback.png, lab-edit.png, lab-saliency.png,
lab-timeline.png): README's and docs/lab.md's.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url: str, server: subprocess.Popen) -> None:
    for _ in range(600):
        if server.poll() is not None:
            sys.exit("the server exited")
        try:
            urllib.request.urlopen(url + "api/health", timeout=1)
            return
        except OSError:
            time.sleep(0.2)
    sys.exit("the server did not answer")


@contextlib.contextmanager
def served_page(serve_args: list[str], window: str) -> Iterator:
    """``nmt serve SERVE_ARGS`` on a free loopback port with no token (the page opens at the bare
    address), and headless chromium of ``window`` pixels on its page; both stopped after."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = subprocess.Popen([sys.executable, "-m", "nmt", "serve", *serve_args, "--port", str(port), "--no-token"])
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={window}"):
        options.add_argument(argument)
    driver = None
    try:
        wait_until_up(url, server)
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)
        driver.get(url)
        yield driver
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/eng-mar-cpu.yaml")
    parser.add_argument("--text", default="Where is the station?")
    parser.add_argument("--hover", type=int, default=2, help="which target subword to hover (0-based)")
    parser.add_argument("--out", default="docs/img/serve.png")
    parser.add_argument("--lab", help="also a picture of each attention-lab view, into this folder")
    args = parser.parse_args(argv)
    with served_page(["--config", args.config], "1300,950") as driver:
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "model-list").text)
        driver.find_element(By.ID, "source").send_keys(args.text)
        WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".heatmap svg rect"))
        driver.execute_async_script("document.fonts.ready.then(arguments[0]);")  # the served Devanagari font
        driver.find_element(By.ID, "words").click()  # redraw once the font is there
        driver.find_element(By.ID, "words").click()
        for _ in range(5):  # the page redrawn under the hover (a late translation) is tried again
            try:
                WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".heatmap svg rect"))
                tokens = driver.find_elements(By.CSS_SELECTOR, ".translation .tok")
                if tokens:
                    ActionChains(driver).move_to_element(tokens[min(args.hover, len(tokens) - 1)]).perform()
                break
            except StaleElementReferenceException:
                time.sleep(1)
        time.sleep(0.3)
        driver.save_screenshot(args.out)
        print(f"wrote {args.out}")
        if args.lab:
            time.sleep(2)  # the words switch above re-translates: let the lab settle first
            lab_screenshots(driver, args.lab)
    return 0


# view -> (what to click in it first, the element that shows it is drawn)
LAB_VIEWS = {
    "tree": (None, "svg.tree-figure g.node.ranked"),
    "playback": (".pb-next", ".pb-table td.weight"),
    "edit": (".edit-source[data-col='0']", ".edit-edited"),
    "saliency": (".sal-target[data-position='1']", ".sal-rho"),
    "timeline": (None, "svg.heatmap-figure rect.cell"),
}


def wait_in(driver, host, selector: str):
    """The first element ``selector`` finds in ``host``, once there is one."""
    WebDriverWait(driver, 60).until(lambda d: host.find_elements(By.CSS_SELECTOR, selector))
    return host.find_element(By.CSS_SELECTOR, selector)


def lab_screenshots(driver, folder: str) -> None:
    from pathlib import Path

    Path(folder).mkdir(parents=True, exist_ok=True)
    for view in LAB_VIEWS:
        for _ in range(5):  # a view redrawn under the click (a late translation) is tried again
            try:
                lab_screenshot(driver, folder, view)
                break
            except StaleElementReferenceException:
                time.sleep(3)
        else:
            print(f"no picture of {view}: it kept being redrawn")


def lab_screenshot(driver, folder: str, view: str) -> None:
    from pathlib import Path

    click, drawn = LAB_VIEWS[view]
    driver.find_element(By.CSS_SELECTOR, f"#lab .tabs button[data-view='{view}']").click()
    host = driver.find_element(By.ID, f"lab-{view}")
    if click:
        wait_in(driver, host, click).click()
    wait_in(driver, host, drawn)
    if view == "tree":
        host.find_element(By.CSS_SELECTOR, drawn).click()  # the best hypothesis' attention row
    time.sleep(0.5)
    driver.execute_script("document.getElementById('lab').scrollIntoView();")
    path = Path(folder) / f"lab-{view}.png"
    driver.save_screenshot(str(path))
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
