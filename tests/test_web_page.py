"""`nmt export RUN DIR --web`: the static page in a real browser (Debian's chromium), served from
127.0.0.1 by a plain file server. It must translate a sentence to the CLI's words, draw the
heatmap, and ask nothing of any other host. With NMT_BROWSER_TESTS=required (set by .ci/run) a
missing browser or runtime is a failure, not a skip."""

from __future__ import annotations

import contextlib
import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.core.errors import NmtError
from nmt.export.web_page import RUNTIME_FILES, export_web, find_runtime

from .helpers import synthetic_pairs, tiny_config, write_anki
from .test_page import MISSING, REQUIRED, browser, requested_urls, wait_for  # noqa: F401 - the shared chromium fixture

runner = CliRunner()
try:
    RUNTIME_MISSING = None
    find_runtime()
except NmtError as error:
    RUNTIME_MISSING = str(error)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(bool(MISSING or RUNTIME_MISSING) and not REQUIRED, reason=MISSING or RUNTIME_MISSING or ""),
]


class StaticFiles(SimpleHTTPRequestHandler):
    """A plain static host, with the types a module script and WebAssembly need."""

    extensions_map: ClassVar[dict] = {
        **SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".wasm": "application/wasm",
    }

    def log_message(self, *args):  # quiet
        pass


@contextlib.contextmanager
def static_server(folder: Path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(StaticFiles, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny trained run that has learned (dev BLEU 37 in 20 epochs; the font test needs
    Devanagari in its output): (its config file, its run directory). With the lexical model,
    the graphs carry a fourth memory tensor (the source embeddings) that the page must pass on."""
    tmp_path = tmp_path_factory.mktemp("web")
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    train = {"epochs": 20, "learning_rate": 0.005, "patience": 0}
    sections = dict(model={"lexical": True}, train=train, decode={"beam_size": 3, "no_repeat_span": 2})
    raw = tiny_config(tmp_path, data, **sections)
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = runner.invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return config, Path(raw["run_dir"])


@pytest.fixture(scope="module")
def page(run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("page") / "page"
    result = runner.invoke(app, ["export", str(run[1]), str(out), "--web"])
    assert result.exit_code == 0, result.output
    assert "python3 -m http.server" in result.output
    return out


def test_the_folder_holds_the_page_the_graphs_the_tokenizers_and_the_runtime(page):
    runtime = [f"runtime/{name}" for name in RUNTIME_FILES.values()]
    page_files = ["index.html", "translate.js", "heat.js", "page.css"]
    model_files = ["model/encoder.onnx", "model/decoder_step.onnx", "model/config.json", "fonts/devanagari.ttf"]
    for name in [*page_files, *model_files, *runtime]:
        assert (page / name).is_file(), name
    assert len(list((page / "model").glob("spm.*.model"))) == 2
    for path in [page, *page.rglob("*")]:  # a web server running as another user can read every file
        assert path.stat().st_mode & 0o004, path


SENTENCES = ["I see apples.", "they like tea.", "we eat rice."]


def cli_translations(config: Path) -> dict[str, str]:
    """What `nmt translate --config` writes for each of SENTENCES: what the page must show."""
    expected = {}
    for sentence in SENTENCES:
        result = runner.invoke(app, ["translate", "--config", str(config), "--text", sentence])
        assert result.exit_code == 0, result.output
        expected[sentence] = result.output.strip()
    return expected


def assert_page_translates(driver, url: str, expected: dict[str, str], each=None) -> None:
    """The page at ``url`` loads its model and shows ``expected``'s translation of each sentence typed
    (``each()``: more checks on the page after every sentence)."""
    driver.get(f"{url}/index.html")
    wait_for(driver, lambda d: d.execute_script("return document.body.dataset.ready"), timeout=60)
    assert driver.execute_script("return document.body.dataset.ready") == "true", driver.find_element(
        "id", "status"
    ).text
    box = driver.find_element("id", "source")
    for sentence, translation in expected.items():
        before = driver.execute_script("return document.body.dataset.translated || '0'")
        box.clear()
        box.send_keys(sentence)
        wait_for(
            driver,
            lambda d, b=before: d.execute_script("return document.body.dataset.translated") not in (None, b),
        )
        assert driver.find_element("id", "translation").text == translation, sentence
        if each is not None:
            each()


def test_the_page_translates_like_the_cli_draws_attention_and_asks_no_other_host(page, run, browser):  # noqa: F811
    config, _ = run
    expected = cli_translations(config)

    def draws_attention():
        rows = browser.execute_script("return document.querySelectorAll('#heatmap text.tgt').length")
        cols = browser.execute_script("return document.querySelectorAll('#heatmap text.src').length")
        cells = browser.execute_script("return document.querySelectorAll('#heatmap rect.cell').length")
        assert rows >= 1 and cols >= 2 and cells == rows * cols

    browser.get_log("performance")  # drained: the browser is shared with other tests
    with static_server(page) as url:
        assert_page_translates(browser, url, expected, draws_attention)
        urls = set(requested_urls(browser))
    assert urls and all(u.startswith(url) or u.startswith(("data:", "blob:")) for u in urls), urls


# The translation paragraph as it is on screen, and the same paragraph with its Devanagari replaced
# one for one by U+0378 (unassigned: always the missing-glyph box), drawn with the same style:
# their widths, and each as a PNG of the element.
PARAGRAPH_AND_BOXES = """
const shown = document.getElementById("translation");
const boxes = shown.cloneNode(true);
boxes.id = "as-boxes";
boxes.textContent = shown.textContent.replace(/[\u0900-\u097f]/g, "\u0378");
shown.after(boxes);
const width = (element) => {
  const range = document.createRange();
  range.selectNodeContents(element);
  return range.getBoundingClientRect().width;
};
return [shown.textContent, width(shown), width(boxes)];
"""


def test_the_page_draws_the_translation_in_its_own_font_not_boxes(page, browser):  # noqa: F811
    """The folder carries the Noto font of the target's script, and the paragraph a person reads
    is drawn with it on a machine with no Devanagari font (as CI's chromium). Before, the page
    listed system-ui first: its fallback drew the paragraph as missing-glyph boxes though the
    face had loaded (the heatmap's labels were fine, and a canvas test in the face passed)."""
    import io

    from matplotlib import image

    assert "fonts/devanagari.ttf" in (page / "page.css").read_text(encoding="utf-8")
    with static_server(page) as url:
        browser.get(f"{url}/index.html")
        wait_for(browser, lambda d: d.execute_script("return document.body.dataset.ready"), timeout=60)
        box = browser.find_element("id", "source")
        box.clear()
        box.send_keys("we like tea.")
        wait_for(browser, lambda d: d.execute_script("return document.body.dataset.translated") not in (None, "0"))
        browser.execute_async_script("document.fonts.ready.then(arguments[0]);")
        text, drawn, boxes = browser.execute_script(PARAGRAPH_AND_BOXES)
        shots = [browser.find_element("id", name).screenshot_as_png for name in ("translation", "as-boxes")]
    assert any("\u0900" <= char <= "\u097f" for char in text), text
    assert abs(drawn - boxes) > 2.0, (text, drawn, boxes)  # boxes are as wide as boxes
    pixels = [image.imread(io.BytesIO(shot), format="png") for shot in shots]
    height = min(p.shape[0] for p in pixels)
    width = min(p.shape[1] for p in pixels)
    differing = (abs(pixels[0][:height, :width] - pixels[1][:height, :width]).sum(-1) > 0.1).mean()
    assert differing > 0.01, differing  # what a person sees is not the row of boxes


def test_a_missing_runtime_is_a_clear_error_before_anything_is_written(run, tmp_path):
    out = tmp_path / "page"
    with pytest.raises(NmtError, match=r"looked in .*nowhere.*npm install onnxruntime-web@1.30.0 sentencepiece-js"):
        export_web(run[1], out, runtime=tmp_path / "nowhere")
    assert not out.exists()


def test_the_runtime_is_found_where_npm_install_puts_it_in_the_working_folder(tmp_path, monkeypatch):
    """An installed user runs `npm install ...` in their folder; before, nmt looked only in
    site-packages/web/node_modules (the checkout's layout), where nothing ever is."""
    from nmt.export import web_page

    for name in RUNTIME_FILES:
        (tmp_path / "node_modules" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "node_modules" / name).write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NMT_WEB_RUNTIME", raising=False)
    monkeypatch.setattr(web_page, "CHECKOUT", tmp_path / "not-a-checkout")
    assert find_runtime() == Path("node_modules")


def test_the_files_the_export_copies_are_where_it_looks():
    """The page, the heat map script and the served fonts' rules, found from the module's own place."""
    from nmt.export import web_page

    assert (web_page.PAGE / "index.html").is_file() and web_page.HEATMAP.is_file()
    assert web_page.SERVED_FONT_FACES.is_file() and (web_page.CHECKOUT / "web" / "package.json").is_file()


@pytest.fixture(scope="module")
def transformer_page(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny Transformer that has learned the synthetic pairs, as an offline page: (its config, the page)."""
    tmp_path = tmp_path_factory.mktemp("web-transformer")
    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    model = {"arch": "transformer", "heads": 4, "ff_dim": 64, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.1}
    train = {"epochs": 40, "learning_rate": 0.003, "lr_schedule": "inverse_sqrt", "lr_warmup": 50, "patience": 0}
    raw = tiny_config(tmp_path, data, model=model, train=train, decode={"beam_size": 3})
    config = tmp_path / "transformer.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert runner.invoke(app, ["train", "--config", str(config)]).exit_code == 0
    out = tmp_path / "page"
    result = runner.invoke(app, ["export", raw["run_dir"], str(out), "--web"])
    assert result.exit_code == 0, result.output
    return config, out


def test_the_offline_page_translates_with_a_transformer_and_draws_each_head(transformer_page, browser):  # noqa: F811
    config, page = transformer_page
    expected = cli_translations(config)
    with static_server(page) as url:
        assert_page_translates(browser, url, expected)
        choices = browser.execute_script(
            "return [...document.querySelectorAll('#head-choice option')].map(o => o.value)"
        )
        assert choices[0] == "1,-1" and len(choices) == 2 * (4 + 1)  # each layer's mean, then its four heads
        mean = browser.execute_script(
            "return [...document.querySelectorAll('#heatmap rect.cell')].map(r => r.getAttribute('data-weight'))"
        )
        browser.execute_script(
            "const s = document.getElementById('head-choice'); s.value = '0,2'; s.dispatchEvent(new Event('change'));"
        )
        label = "return document.querySelector('#heatmap svg').getAttribute('aria-label')"
        wait_for(browser, lambda d: d.execute_script(label) == "layer 0, head 2")
        head = browser.execute_script(
            "return [...document.querySelectorAll('#heatmap rect.cell')].map(r => r.getAttribute('data-weight'))"
        )
        assert len(head) == len(mean) and head != mean
