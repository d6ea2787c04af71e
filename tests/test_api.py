"""The Python API at the top of the package (nmt/api): ``import nmt``, ``nmt.load`` of a run, a
package, a config file or several, ``nmt.train`` from a mapping, and the lab's views as objects
whose ``.data`` is the served lab's JSON and whose ``_repr_html_`` draws them offline."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import nmt
from nmt.core.errors import NmtError
from nmt.pipelines.lab import Lab
from nmt.pipelines.lab_views import compact
from nmt.pipelines.translate import Translator
from nmt.runtime.loading import load_trained

from .helpers import small_trained_models, synthetic_pairs, tiny_config, write_anki

TEXT = "I see tea."


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """A trained RNN run and a Transformer package, trained in seconds on the synthetic pairs."""
    return small_trained_models(tmp_path_factory.mktemp("api"))


def test_import_nmt_is_light_and_its_api_is_there_on_first_use():
    code = "import sys, nmt; print('torch' in sys.modules); nmt.load; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
    with pytest.raises(AttributeError, match="no attribute 'lod'"):
        nmt.lod  # noqa: B018


def test_three_lines_from_import_to_a_translation(models):
    run = models["rnn-run"]
    expected = Translator(load_trained(run, torch.device("cpu"))).translate([TEXT, "I like apples."])
    model = nmt.load(run)
    assert model.translate(TEXT) == expected[0]  # one text, one string
    assert model.translate([TEXT, "I like apples."]) == expected  # a list, a list
    best = model.translate(TEXT, n_best=2)
    assert len(best) == 2 and best[0][0] == expected[0] and best[0][1] >= best[1][1]
    assert repr(model).startswith("<nmt.Model en->mr rnn at ")


def test_load_reads_a_package_a_config_file_and_an_ensemble(models):
    package, run = models["transformer-package"], models["rnn-run"]
    alone = nmt.load(package).translate(TEXT)
    assert nmt.load(str(package)).translate(TEXT) == alone
    assert nmt.load(run / "config.yaml").translate(TEXT) == nmt.load(run).translate(TEXT)
    both = nmt.load([package, package])  # an ensemble of two (equal) members translates as one
    assert type(both.translator.model).__name__ == "Ensemble" and both.translate(TEXT) == alone
    with pytest.raises(NmtError, match="of packages or of runs, not both"):
        nmt.load([package, run])
    with pytest.raises(NmtError, match="neither a run folder"):
        nmt.load(run / "checkpoints")


def test_each_views_data_is_the_labs_json_for_the_same_sentence(models):
    model = nmt.load(models["rnn-run"])
    lab = Lab(model.translator)
    tokens = lab.labels(lab.target_ids(TEXT, None))
    assert model.tree(TEXT).data == lab.tree(TEXT).to_json()
    assert model.playback(TEXT).data == lab.playback(TEXT, tokens).to_json()
    assert model.alignment(TEXT).data == lab.align(TEXT, tokens).to_json()
    transformer = nmt.load(models["transformer-package"])
    lab = Lab(transformer.translator)
    tokens = lab.labels(lab.target_ids(TEXT, None))
    assert transformer.heads(TEXT).data == lab.heads(TEXT, tokens).to_json()
    with pytest.raises(NmtError, match=r"heads"):
        model.heads(TEXT)


def test_the_attention_view_is_the_heatmap_of_the_translation(models):
    model = nmt.load(models["rnn-run"])
    (heatmap,) = model.translator.heatmaps([TEXT])
    view = model.attention(TEXT)
    assert view.data["translation"] == model.translate(TEXT)
    assert torch.tensor(view.data["weights"]).allclose(heatmap.weights)
    assert torch.tensor(view.data["weights"]).sum(1).allclose(torch.ones(len(view.data["tokens"])), atol=1e-4)


def test_compare_puts_each_models_translation_and_attention_side_by_side(models):
    rnn, transformer = nmt.load(models["rnn-run"]), nmt.load(models["transformer-package"])
    view = nmt.compare({"rnn": rnn, "transformer": transformer}, TEXT)
    assert [entry["name"] for entry in view.data["models"]] == ["rnn", "transformer"]
    assert [entry["translation"] for entry in view.data["models"]] == [rnn.translate(TEXT), transformer.translate(TEXT)]
    assert [entry["name"] for entry in nmt.compare([rnn], TEXT).data["models"]] == ["rnn-run"]  # its folder's name
    with pytest.raises(NmtError, match="empty"):
        nmt.compare([rnn], " ")


def test_a_view_too_big_is_refused_before_any_work_naming_what_to_narrow(models, monkeypatch):
    monkeypatch.setattr("nmt.api.views.MOST_BYTES", 100)
    with pytest.raises(NmtError, match=r"playback view would hold .* a smaller top_k"):
        nmt.load(models["rnn-run"]).playback(TEXT)


def test_a_fragment_is_self_contained(models, tmp_path):
    """One box, its style and the drawing code inline: nothing fetched, nothing that ends the
    script early, the numbers there as the view holds them."""
    view = nmt.load(models["rnn-run"]).playback(TEXT)
    fragment = view._repr_html_()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", fragment)
    assert "fetch(" not in fragment.split("window.nmtDraw.drawView")[1]
    numbers = fragment.rsplit("document.getElementById(", 1)[1].split(", ", 1)[1].removesuffix("));</script>")
    assert json.loads(numbers.replace("<\\/", "</")) == compact(view.data)  # as the served lab sends them
    page = view.save(tmp_path / "view.html")
    assert page.read_text(encoding="utf-8").count("nmt-view-") >= 2  # its box, found by its script


MARATHI = {  # an attention view's numbers over a Marathi translation: a conjunct (द्य) among them
    "source": "I will meet you tomorrow.",
    "translation": "मी तुला उद्या भेटेन.",
    "source_tokens": ["▁I", "▁will", "▁meet", "▁you", "▁tomorrow", "."],
    "tokens": ["▁मी", "▁तुला", "▁उद्या", "▁भेटेन", "."],
    "weights": [[1 / 6] * 6] * 5,
}


def test_a_fragment_carries_the_glyphs_its_script_needs():
    """Devanagari drawn where the browser has no font for it: the fragment holds a subset of the
    package's Noto font with a glyph for every Devanagari character of the view, and its shaping
    rules; Latin text carries no font."""
    import base64
    import io

    from fontTools.ttLib import TTFont

    fragment = nmt.View("attention", MARATHI)._repr_html_()
    (face,) = re.findall(r"@font-face \{[^}]*\}", fragment)
    family = re.search(r'font-family: "([^"]+)"', face).group(1)
    assert family.startswith("nmt Devanagari ") and f'"{family}", system-ui' in fragment
    font = TTFont(io.BytesIO(base64.b64decode(re.search(r"base64,([A-Za-z0-9+/=]+)", face).group(1))))
    wanted = {ord(char) for token in MARATHI["tokens"] for char in token if "\u0900" <= char <= "\u097f"}
    assert wanted <= set(font.getBestCmap()) and "GSUB" in font  # the conjunct's rules kept
    latin = nmt.View("attention", {**MARATHI, "translation": "", "tokens": ["a"] * 5})._repr_html_()
    assert "@font-face" not in latin and len(fragment) - len(latin) < 40_000  # a sentence's glyphs only


def test_init_writes_the_config_nmt_train_reads(tmp_path, monkeypatch):
    from nmt.config.files import load_config

    monkeypatch.chdir(tmp_path)
    pairs = write_anki(tmp_path / "eng-mar.tsv", synthetic_pairs())
    path = nmt.init(pairs, tmp_path / "mine.yaml", minutes=2)
    config = load_config(path)
    assert path == tmp_path / "mine.yaml" and (config.data.src_lang, config.data.tgt_lang) == ("en", "mr")
    assert config.train.max_minutes == 2
    with pytest.raises(NmtError, match=r"exists"):
        nmt.init(pairs, path)


def test_train_from_a_mapping_returns_the_trained_model(tmp_path):
    pairs = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    raw = tiny_config(tmp_path, pairs, train={"epochs": 1, "probes": 1})
    model = nmt.train(raw, train={"epochs": 2})
    assert model.config.train.epochs == 2 and (tmp_path / "run" / "checkpoints" / "best.pt").is_file()
    assert isinstance(model.translate(TEXT), str)
    timeline = nmt.timeline(tmp_path / "run")
    assert timeline.kind == "timeline" and len(timeline.data["entries"]) == 2
    with pytest.raises(NmtError, match="already holds a training run"):
        nmt.train(raw)
    with pytest.raises(NmtError, match=r"Did you mean 'train\.epochs'"):
        nmt.train(raw, train={"epoch": 3})


def test_progress_shows_in_a_notebooks_kernel_and_not_in_a_log(monkeypatch):
    """In a notebook stderr is no terminal, and the bars of training and translation stayed hidden."""
    import types

    from nmt.core.progress import progress_bar

    assert progress_bar(3, "epoch", "batch").disable  # here (pytest's captured stderr) as in a log
    notebook = types.ModuleType("IPython")
    notebook.get_ipython = lambda: type("ZMQInteractiveShell", (), {})()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", notebook)
    bar = progress_bar(3, "epoch", "batch")
    assert not bar.disable
    bar.close()
    assert progress_bar(3, "epoch", "batch", show=False).disable


def test_an_interrupt_leaves_a_checkpoint_that_train_resumes(tmp_path):
    """A notebook's Kernel > Interrupt is a SIGINT to the kernel: training stops at the next step
    with a checkpoint, as Ctrl-C does on the command line, and nmt.train(resume=True) goes on."""
    import os
    import signal

    from nmt.training.callbacks import Callback
    from nmt.training.state import TrainingInterrupted

    class Interrupt(Callback):
        def after_validation(self, trainer, record):
            os.kill(os.getpid(), signal.SIGINT)

    pairs = write_anki(tmp_path / "pairs.txt", synthetic_pairs())
    raw = tiny_config(tmp_path, pairs, train={"epochs": 3, "probes": 0, "patience": 0})
    with pytest.raises(TrainingInterrupted, match="SIGINT"):
        nmt.train(raw, callbacks=[Interrupt()])
    last = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=True)["progress"]
    assert last["step"] > 0 and last["epoch"] < 3
    model = nmt.train(raw, resume=True)
    resumed = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=True)["progress"]
    assert resumed["epoch"] == 3 and resumed["step"] > last["step"] and isinstance(model.translate(TEXT), str)
