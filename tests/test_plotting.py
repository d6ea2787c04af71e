import warnings

import torch

from nmt.core.fonts import missing_scripts
from nmt.core.plotting import plot_attention, plot_bleu_by_length, plot_learning_curves


def test_devanagari_heatmap_renders_without_font_warnings(tmp_path):
    weights = torch.softmax(torch.randn(4, 3), dim=-1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_attention(
            ["▁Where", "▁is", "</s>"], ["▁स्टेशन", "▁कुठे", "▁आहे?", "</s>"], weights, tmp_path / "a.png", "क्षमा श्री त्रि"
        )
        plot_attention(["a", "</s>"], ["▁क्ष", "</s>"], weights[:2, :2], tmp_path / "a.svg")
    assert not [w for w in caught if "Glyph" in str(w.message) or "font" in str(w.message).lower()]
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "a.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_learning_curves_and_length_plot(tmp_path):
    records = [
        {"epoch": e, "train_loss": 3 - e * 0.1, "dev_loss": 3.1 - e * 0.1, "dev_bleu": e, "dev_chrf": 2 * e}
        for e in (1, 2)
    ]
    plot_learning_curves(records, tmp_path / "curves.png")
    rows = [{"bucket": "1-3", "bleu": 30.0}, {"bucket": "4-5", "bleu": 20.0}]
    plot_bleu_by_length({"bahdanau": rows, "none": rows}, tmp_path / "length.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000 and (tmp_path / "length.png").stat().st_size > 1000


def test_font_chain_draws_the_scripts_pypi_fonts_cover_and_names_the_others():
    covered = ["मराठी हिंदी", "தமிழ்", "తెలుగు", "ภาษาไทย", "العربية", "ភាសាខ្មែរ", "English", "Ελληνικά", "русский"]
    assert missing_scripts(covered) == {}
    missing = missing_scripts(["日本語", "中文", "বাংলা", "ok"])
    assert set(missing) == {"CJK", "HIRAGANA", "BENGALI"} or set(missing) == {"CJK", "BENGALI"}
    assert missing["BENGALI"] in "বাংলা"


def test_heatmap_of_a_script_without_a_font_warns_naming_it_once(tmp_path):
    weights = torch.softmax(torch.randn(2, 2), dim=-1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_attention(["▁বাংলা", "</s>"], ["▁ok", "</s>"], weights, tmp_path / "a.png")
        plot_attention(["▁বাংলা", "</s>"], ["▁ok", "</s>"], weights, tmp_path / "b.png")
    named = [w for w in caught if "Bengali" in str(w.message)]
    assert len(named) == 1 and "empty boxes" in str(named[0].message)


def test_importing_the_toolkit_leaves_a_notebooks_matplotlib_backend_as_it_was():
    """nmt/core/plotting.py called matplotlib.use("Agg") at import: in Jupyter a figure as a cell's
    last line then showed "<Figure size …>" and plt.show() nothing. A process of its own, with the
    backend a notebook kernel sets (matplotlib_inline's, or any other)."""
    import subprocess
    import sys

    script = (
        "import matplotlib; matplotlib.use('svg'); import nmt, nmt.core.plotting, nmt.cli\n"
        "import nmt.pipelines.tune\n"
        "from nmt.core.plotting import attention_figure; import torch\n"
        "figure = attention_figure(['a', 'b'], ['c'], torch.tensor([[0.5, 0.5]]))\n"
        "import matplotlib.pyplot as plt\n"
        "print(matplotlib.get_backend(), type(figure).__name__, len(plt.get_fignums()))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["svg", "Figure", "0"]


def test_the_served_page_has_one_font_face_per_script_font_both_copies_read():
    """The offline page and a notebook view copy the served page's @font-face rules (their
    unicode-ranges), found by the script whose font each fetches: one for every script font."""
    from importlib import resources

    from nmt.core.fonts import SCRIPT_FONTS, served_font_faces

    faces = served_font_faces((resources.files("nmt.serve") / "static" / "style.css").read_text(encoding="utf-8"))
    assert set(faces) == {script.lower() for script in SCRIPT_FONTS}
    assert all("unicode-range:" in rule and 'url("/fonts/' in rule for rule in faces.values())
