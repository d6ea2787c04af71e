"""Fonts for the scripts of the data: heatmap labels (PNG) and the page show every script the
installed fonts cover, and a script none covers is named in a warning instead of drawn as boxes.

matplotlib's DejaVu Sans covers Latin, Greek, Cyrillic, Armenian, Georgian, Hebrew and more; the
Noto fonts below are the ones PyPI packages ship (``fontpkg-noto-sans-*``, dependencies of nmt).
"""

from __future__ import annotations

import functools
import importlib
import io
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

# script (the first word of its characters' Unicode names) -> the package of its Noto font
SCRIPT_FONTS = {
    "DEVANAGARI": "fontpkg_noto_sans_devanagari",
    "ARABIC": "fontpkg_noto_sans_arabic",
    "TAMIL": "fontpkg_noto_sans_tamil",
    "TELUGU": "fontpkg_noto_sans_telugu",
    "THAI": "fontpkg_noto_sans_thai",
    "KHMER": "fontpkg_noto_sans_khmer",
}


def script_font(script: str) -> Path | None:
    """The font file of ``script`` (e.g. "DEVANAGARI") from its package, or None if not installed."""
    package_name = SCRIPT_FONTS.get(script.upper())
    if package_name is None:
        return None
    try:
        package = importlib.import_module(package_name)
    except ImportError:
        return None
    return next(iter(sorted(Path(package.ROOT, "files").glob("*.ttf"))), None)


def installed_fonts() -> list[Path]:
    """Every installed script font, in SCRIPT_FONTS order."""
    return [path for script in SCRIPT_FONTS if (path := script_font(script)) is not None]


@functools.cache
def _regular_font(script: str) -> bytes | None:
    """``script``'s Noto font at its regular weight and width, as static TrueType (the packages
    ship variable fonts: a subset of the static one is an eighth of the size)."""
    from fontTools.ttLib import TTFont
    from fontTools.varLib import instancer

    path = script_font(script)
    if path is None:
        return None
    font = TTFont(path)
    if "fvar" in font:
        axes = {axis.axisTag: axis.defaultValue for axis in font["fvar"].axes}
        font = instancer.instantiateVariableFont(font, axes | {"wght": 400, "wdth": 100})
    buffer = io.BytesIO()
    font.save(buffer)
    return buffer.getvalue()


def font_subset(script: str, text: str) -> bytes | None:
    """A WOFF font with the glyphs ``text`` needs from ``script``'s font, its shaping rules kept (a
    Devanagari conjunct is drawn from glyphs the text's characters do not name), or None where the
    script's font is not installed. About 13 kB for a Marathi sentence of 60 characters."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    regular = _regular_font(script)
    if regular is None:
        return None
    font = TTFont(io.BytesIO(regular))
    options = subset.Options()
    options.layout_features = ["*"]  # every shaping feature: conjuncts, reordering, marks
    options.hinting = False
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=text)
    subsetter.subset(font)
    font.flavor = "woff"  # zlib: half the size (WOFF2 would need brotli)
    buffer = io.BytesIO()
    font.save(buffer)
    return buffer.getvalue()


SERVED_FONT = re.compile(r'url\("/fonts/(\w+)\.ttf"\)')  # how the served page's rules name a script's font


def served_font_faces(css: str) -> dict[str, str]:
    """The served page's ``@font-face`` rules (nmt/serve/static/style.css, one a line), by the
    script whose font each fetches (``devanagari``): what the offline page and a notebook view
    copy, each with its own source for the font."""
    faces = {}
    for rule in css.splitlines():
        found = SERVED_FONT.search(rule) if rule.startswith("@font-face") else None
        if found:
            faces[found.group(1)] = rule
    return faces


def script_of(char: str) -> str:
    """ "अ" -> "DEVANAGARI", "a" -> "LATIN", "中" -> "CJK"."""
    return unicodedata.name(char, "UNKNOWN").split(" ")[0]


@functools.cache
def _covered_characters() -> frozenset[int]:
    """Code points the font chain (DejaVu Sans, then the script fonts) has glyphs for."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    files = [Path(font_manager.findfont("DejaVu Sans")), *installed_fonts()]
    covered: set[int] = set()
    for path in files:
        covered.update(FT2Font(str(path)).get_charmap())
    return frozenset(covered)


def missing_scripts(texts: Iterable[str]) -> dict[str, str]:
    """Scripts in ``texts`` with characters no font of the chain draws: script -> an example
    character. Spaces and control or format characters (zero-width joiners) are not counted."""
    missing: dict[str, str] = {}
    covered = _covered_characters()
    for char in set().union(*(set(text) for text in texts)):
        if ord(char) in covered or unicodedata.category(char)[0] in "ZC":
            continue
        missing.setdefault(script_of(char), char)
    return dict(sorted(missing.items()))


def missing_font_warning(missing: dict[str, str]) -> str:
    scripts = ", ".join(f"{script.title()} (e.g. {char!r})" for script, char in missing.items())
    return (
        f"No installed font draws {scripts}: heatmap labels will show empty boxes for these characters. "
        "Translation is not affected; install a font for the script and register it with matplotlib "
        "(font_manager.fontManager.addfont) to fix the pictures."
    )
