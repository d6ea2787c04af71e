#!/usr/bin/env python
"""The pictures of docs/tutorials/bahdanau-to-transformer.md: an RNN package and a Transformer
package served side by side, and the lab's views of each, taken by the browser the page tests use
(Debian's chromium, headless, through chromedriver).

    python scripts/dev/screenshot_tour.py --model pkg/rnn --model pkg/transformer \\
        --text "Where is the station?" --out docs/img/tour

The first --model is the RNN, the second the Transformer; the models are named after their
folders. Writes tour-side-by-side.png, tour-rnn-playback.png, tour-heads.png,
tour-self-attention.png and tour-head-playback.png into --out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from screenshot_page import served_page, wait_in
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", required=True, help="the RNN's package, then the Transformer's")
    parser.add_argument("--text", default="Where is the station?")
    parser.add_argument("--out", default="docs/img/tour")
    parser.add_argument("--head", type=int, nargs=2, default=[1, 0], metavar=("LAYER", "HEAD"))
    args = parser.parse_args(argv)
    rnn, transformer = (Path(p).name for p in args.model)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def shot(driver, name: str, scroll_to: str | None = None) -> None:
        time.sleep(0.5)
        if scroll_to:
            driver.execute_script(f"document.getElementById('{scroll_to}').scrollIntoView();")
        driver.save_screenshot(str(out / f"{name}.png"))
        print(f"wrote {out / name}.png")

    with served_page([part for p in args.model for part in ("--model", p)], "1300,1000") as driver:
        WebDriverWait(driver, 30).until(lambda d: transformer in d.find_element(By.ID, "model-list").text)
        driver.find_element(By.ID, "source").send_keys(args.text)
        WebDriverWait(driver, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".panel .heatmap svg")) == 2)
        driver.execute_async_script("document.fonts.ready.then(arguments[0]);")  # the served Devanagari font
        shot(driver, "tour-side-by-side")

        lab = driver.find_element(By.ID, "lab")
        Select(driver.find_element(By.ID, "lab-model")).select_by_value(rnn)
        time.sleep(1)
        lab.find_element(By.CSS_SELECTOR, ".tabs button[data-view='playback']").click()
        playback = driver.find_element(By.ID, "lab-playback")
        wait_in(driver, playback, ".pb-next").click()
        wait_in(driver, playback, ".pb-table td.weight")
        shot(driver, "tour-rnn-playback", "lab")

        Select(driver.find_element(By.ID, "lab-model")).select_by_value(transformer)
        time.sleep(1)
        lab.find_element(By.CSS_SELECTOR, ".tabs button[data-view='heads']").click()
        heads = driver.find_element(By.ID, "lab-heads")
        wait_in(driver, heads, "svg.heads-figure g.head")
        shot(driver, "tour-heads", "lab")
        Select(heads.find_element(By.CSS_SELECTOR, ".heads-kind")).select_by_value("encoder_self")
        time.sleep(1)
        shot(driver, "tour-self-attention", "lab")
        Select(heads.find_element(By.CSS_SELECTOR, ".heads-kind")).select_by_value("cross")
        layer, head = args.head
        wait_in(driver, heads, f"g.head.playable[data-layer='{layer}'][data-head='{head}']").click()
        wait_in(driver, playback, ".pb-step")
        wait_in(driver, playback, ".pb-next").click()
        wait_in(driver, playback, ".pb-table td.weight")
        shot(driver, "tour-head-playback", "lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())
