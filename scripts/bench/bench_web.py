#!/usr/bin/env python
"""The in-browser page of `nmt export --web` in Debian's headless chromium: the folder's size,
the time from opening the page to the model being ready, the first translation's time, and
sentences/s over test sentences, beside the CLI's translations of the same sentences.

    python scripts/bench/bench_web.py --run runs/eng-mar-cpu --sentences 100

Needs chromium, chromium-driver and the runtime (`npm ci --prefix web`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from nmt.config.paths import prepared_paths  # noqa: E402
from nmt.core.device import select_device  # noqa: E402
from nmt.core.hardware import hardware_description  # noqa: E402
from nmt.data.references import read_references  # noqa: E402
from nmt.export.web_page import export_web, folder_size  # noqa: E402
from nmt.pipelines.translate import Translator  # noqa: E402
from nmt.runtime.loading import load_trained  # noqa: E402
from tests.test_page import CHROMEDRIVER, CHROMIUM  # noqa: E402
from tests.test_web_page import static_server  # noqa: E402


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default="runs/eng-mar-cpu")
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--beam", type=int, default=0, help="0: the model's own beam size")
    args = parser.parse_args()
    loaded = load_trained(Path(args.run), select_device("cpu"))
    sources = read_references(prepared_paths(loaded.config).multi("test")).sources[: args.sentences]
    beam = args.beam or loaded.config.decode.beam_size
    cli = Translator(loaded).translate(sources, beam_size=beam)
    folder = Path(tempfile.mkdtemp(prefix="bench-web-")) / "page"
    export_web(Path(args.run), folder)
    driver = browser()
    try:
        with static_server(folder) as url:
            opened = time.perf_counter()
            driver.get(f"{url}/index.html")
            while driver.execute_script("return document.body.dataset.ready") is None:
                time.sleep(0.02)
            ready = time.perf_counter() - opened
            driver.set_script_timeout(3600)
            first = driver.execute_async_script(
                "const done = arguments[arguments.length - 1]; const t = performance.now();"
                "nmtTranslate(arguments[0], arguments[1]).then(r => done([r.translation, performance.now() - t]));",
                sources[0],
                beam,
            )
            started = time.perf_counter()
            outputs = driver.execute_async_script(
                "const done = arguments[arguments.length - 1]; (async () => { const out = [];"
                "for (const s of arguments[0]) out.push((await nmtTranslate(s, arguments[1])).translation);"
                "done(out); })();",
                sources,
                beam,
            )
            seconds = time.perf_counter() - started
    finally:
        driver.quit()
    same = sum(a == b for a, b in zip(outputs, cli))
    print(f"Hardware: {hardware_description()}; chromium headless, onnxruntime-web on one thread")
    print(f"folder: {folder_size(folder) / 1e6:.1f} MB ({folder})")
    print(f"open to ready: {ready:.2f} s; first translation: {first[1]:.0f} ms")
    print(f"{len(sources)} test sentences, beam {beam}: {len(sources) / seconds:.1f} sentences/s in the page")
    print(f"the same words as the CLI: {same}/{len(sources)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
