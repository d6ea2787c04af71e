#!/usr/bin/env python
"""How big a notebook's lab view is, and how long Chromium takes to draw it: a long sentence's
attention view of one model and the heads view of another (docs/lab.md records the figures).

    python scripts/bench/bench_views.py --attention runs/eng-mar-cpu --heads runs/eng-mar-transformer

Each view is written as a page of its own (View.save) and opened in headless Chromium from
file://; the time is the page's, from navigation to the view's last figure drawn (the median of
--repeats loads).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nmt

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = (  # 30 words, from the shipped corpus's longest sentences
    "Tom tried to sell his old VCR instead of throwing it away, but no one would buy it, "
    "so he ended up throwing it away last week after all that."
)
DRAWN = "return [...document.querySelectorAll('.nmt-view')].every((v) => v.querySelector('svg'))"


def browser():
    sys.path.insert(0, str(ROOT))
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from tests.test_page import CHROMEDRIVER, CHROMIUM

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def draw_seconds(driver, page: Path, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        driver.get(page.as_uri())
        while not driver.execute_script(DRAWN):
            time.sleep(0.005)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attention", required=True, help="a run or package: its attention view")
    parser.add_argument("--heads", required=True, help="a Transformer run or package: its heads view")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    views = {
        "attention": nmt.load(args.attention).attention(SENTENCE),
        "heads": nmt.load(args.heads).heads(SENTENCE),
    }
    driver = browser()
    try:
        with tempfile.TemporaryDirectory() as folder:
            print(f"{len(SENTENCE.split())} source words: {SENTENCE}")
            for name, view in views.items():
                page = view.save(Path(folder) / f"{name}.html")
                fragment = len(view._repr_html_().encode("utf-8"))
                target = len(view.data["tokens"])
                seconds = draw_seconds(driver, page, args.repeats)
                drawn = f"drawn in {seconds * 1000:6.0f} ms"
                print(f"{name:10s} {fragment / 1000:8.1f} kB fragment, {target} target subwords, {drawn}")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
