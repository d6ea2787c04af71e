"""A view of the attention lab as an object that draws itself: ``.data`` holds the lab's numbers
(the JSON the served lab's API answers), ``_repr_html_`` one self-contained HTML fragment that
draws them in a notebook (Jupyter, VS Code, Colab) and ``.save(path)`` a page of it.

The fragment is the served lab's own drawing code (nmt/serve/static: heat.js, views.js,
heads.js — one source, not a copy) with the numbers inline: no server, no CDN, no request of any
kind, so it draws offline and in a notebook saved, reopened or exported to HTML. Its size is
bounded before any work, by the served lab's sizes and limit.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import secrets
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from nmt.core.errors import NmtError
from nmt.core.fileio import write_text_atomic
from nmt.core.fonts import SCRIPT_FONTS, font_subset, script_of, served_font_faces
from nmt.pipelines.lab import Lab
from nmt.pipelines.lab_views import compact

# the drawing code, in the order the served page loads it (nmt/serve/static/index.html)
SCRIPTS = ("heat.js", "views.js", "heads.js")
MOST_BYTES = 2_000_000  # a view's numbers at most, as the served lab's answers (nmt.serve.requests.Limits)
NARROW = {  # what makes each view's answer smaller
    "heads": "ask for one layer and head (layer=, head=), or a shorter text",
    "tree": "a shorter text or a smaller beam_size",
    "playback": "a shorter text, or a smaller top_k",
    "align": "a shorter text",
}


def sized(lab: Lab, view: str, text: str, tokens: list[str] | None, **asked: Any) -> list[str] | None:
    """The subwords of the translation ``view`` looks at (``tokens``, or the best translation's;
    none for the tree), refused before the view is made if its numbers would pass ``MOST_BYTES``."""
    if tokens is None and view != "tree":
        tokens = lab.labels(lab.target_ids(text, None))
    size = lab.size(view, text, tokens, **asked)
    if size.bytes > MOST_BYTES:
        raise NmtError(
            f"This {view} view would hold {size.bytes:,} bytes of numbers (at most {MOST_BYTES:,}): {NARROW[view]}."
        )
    return tokens


@cache
def _static(name: str) -> str:
    return (resources.files("nmt.serve") / "static" / name).read_text(encoding="utf-8")


@cache
def _drawing_code() -> str:
    """The served lab's drawing code, run once per page: every fragment carries it, the first to
    run defines ``window.nmtDraw`` and the others find it there."""
    code = "\n".join(_static(name) for name in SCRIPTS)
    code = code.replace('"use strict";', "")  # one strict function around all of it instead
    return (
        'if (!window.nmtDraw) { window.nmtDraw = (function () {\n"use strict";\n'
        + code
        + "\nreturn { drawView };\n})(); }"
    )


@cache
def _style() -> str:
    """The served lab's style, each rule scoped to a view (nothing of the notebook's own is restyled);
    the page's layout (body, header, main, fonts fetched from the server) left out."""
    css = re.sub(r"/\*.*?\*/", "", _static("style.css"), flags=re.S)
    rules = []
    for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        selector = selector.strip()
        if selector.startswith("@") or selector.split()[0] in ("body", "header", "main", "textarea", "h1", "*"):
            continue
        if selector == ":root":
            rules.append(f".nmt-view {{{body}}}")
            continue
        scoped = ", ".join(f".nmt-view {part.strip()}" for part in selector.split(","))
        rules.append(f"{scoped} {{{body}}}")
    font = "font: 14px/1.45 system-ui, 'Noto Sans', sans-serif; color: var(--ink);"
    return f".nmt-view {{ {font} }}\n" + "\n".join(rules)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _font_faces(data: dict) -> tuple[list[str], dict[str, str]]:
    """``@font-face`` rules carrying, inline, the glyphs the view's text needs of each script the
    package fonts cover (a machine without a Devanagari font would draw boxes), and their family
    names. Each family is named after its glyphs, so views of different texts in one notebook do
    not take each other's subsets. Families map to the text each draws."""
    served = served_font_faces(_static("style.css"))  # script -> the served page's rule (its unicode-range)
    by_script: dict[str, set[str]] = {}
    for text in _strings(data):
        for char in text:
            if (script := script_of(char)) in SCRIPT_FONTS:
                by_script.setdefault(script, set()).add(char)
    rules, families = [], {}
    for script, chars in sorted(by_script.items()):
        served_rule = served.get(script.lower())
        text = "".join(sorted(chars)) + "\u200c\u200d\u25cc"  # joiners, and the dotted circle of a lone mark
        font = font_subset(script, text) if served_rule else None  # no subset made for a rule-less script
        if font is None or served_rule is None:
            continue
        family = f"nmt {script.title()} {hashlib.sha1(text.encode()).hexdigest()[:10]}"
        url = "data:font/woff;base64," + base64.b64encode(font).decode("ascii")
        rule = re.sub(r'font-family: "[^"]+"', f'font-family: "{family}"', served_rule)
        rules.append(re.sub(r'src: url\("[^"]+"\) format\("truetype"\)', f'src: url("{url}") format("woff")', rule))
        families[family] = text
    return rules, families


class View:
    """One view: ``kind`` (attention, tree, playback, heads, align, edit, saliency) and ``data``,
    the lab's numbers for it."""

    def __init__(self, kind: str, data: dict):
        self.kind, self.data = kind, data

    def __repr__(self) -> str:
        return f"<nmt.View {self.kind}: {self.data.get('source') or ' '.join(self.data.get('source_tokens', []))}>"

    def _repr_html_(self) -> str:
        """One self-contained fragment: a box, the style, the drawing code and the numbers."""
        box = f"nmt-view-{secrets.token_hex(6)}"
        # the numbers as the served lab sends them (6 significant digits), no early </script>
        numbers = json.dumps(compact(self.data), ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
        faces, families = _font_faces(self.data)
        stack = ", ".join([*(f'"{family}"' for family in families), "system-ui", "'Noto Sans'", "sans-serif"])
        # the view's text is laid out once its fonts are in (their widths place the labels)
        loaded = json.dumps([[f'13px "{family}"', text] for family, text in families.items()], ensure_ascii=False)
        return (
            f'<div class="nmt-view" id="{box}" data-kind="{html.escape(self.kind)}"></div>\n'
            f"<style>{_style()}\n{chr(10).join(faces)}\n"
            f"#{box}, #{box} svg text {{ font-family: {stack}; }}</style>\n"
            f"<script>{_drawing_code()}\n"
            f"Promise.all({loaded}.map(([font, text]) =>\n"
            "  document.fonts ? document.fonts.load(font, text).catch(() => null) : null))\n"
            f'.then(() => window.nmtDraw.drawView("{self.kind}", document.getElementById("{box}"), {numbers}));'
            "</script>"
        )

    def save(self, path: str | Path) -> Path:
        """The view as an HTML page of its own (offline, like the fragment)."""
        path = Path(path)
        title = html.escape(f"nmt — {self.kind}")
        page = f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n<body>\n'
        write_text_atomic(path, page + self._repr_html_() + "\n</body></html>\n")
        return path
