"""The documentation: a README that is a front door, a config reference generated from the code
and no hand-written copy of it, links that resolve. (`mkdocs build --strict` in .ci/run checks
the site's own links and pages.)"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

from nmt.config import _RANGES, Config
from nmt.config_doc import key_docs, markdown

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
KEY_ROW = re.compile(r"^\|\s*`(data|tokenizer|model|train|decode|tune)\.[a-z_]+`")


def dataclass_keys() -> list[str]:
    """Every leaf key of the config dataclasses, dotted."""
    keys = []
    hints = typing.get_type_hints(Config)
    for field in dataclasses.fields(Config):
        section = hints[field.name]
        if dataclasses.is_dataclass(section):
            keys += [f"{field.name}.{f.name}" for f in dataclasses.fields(section)]
        else:
            keys.append(field.name)
    return keys


def test_every_config_key_is_in_the_generated_reference_with_type_default_and_range():
    page = markdown()
    rows = {line.split("`")[1]: line for line in page.splitlines() if line.startswith("| `")}
    documented = {d.key: d for d in key_docs()}
    for key in dataclass_keys():
        assert key in rows, f"{key} is missing from the config reference"
        doc = documented[key]
        assert doc.type and doc.description, key  # a type, and what it does
        assert doc.type.replace("|", "\\|") in rows[key]
        assert f"`{doc.default}`" in rows[key] or "*required*" in rows[key]
        if key in _RANGES:
            assert _RANGES[key][1] in rows[key], f"{key}'s range is not shown"
    assert rows["train.batch_size"].count("*required*") == 1  # required keys say so
    assert "a number > 0" in rows["train.learning_rate"] and "`0.001`" in rows["train.learning_rate"]


def test_no_hand_written_copy_of_the_config_keys_remains():
    """No page tabulates config keys with their defaults, as the generated reference does (the
    README's tables once spelled each key a third time)."""
    copies = []
    for path in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        header = ""
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.startswith("|"):
                header = ""
            elif not header:
                header = line.lower()
            elif "default" in header and KEY_ROW.match(line):
                copies.append(f"{path.relative_to(ROOT)}:{number}")
    assert not copies, f"config keys and defaults tabulated by hand (the reference is generated): {copies}"


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)  # not inside code
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"^(https?:|mailto:|#)", t)]


def test_the_readme_is_a_front_door_whose_links_all_resolve():
    readme = ROOT / "README.md"
    assert len(readme.read_text(encoding="utf-8")) < 12_000
    links = relative_links(readme)
    assert len(links) >= 10
    missing = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, missing


def test_every_docs_link_to_a_file_resolves():
    missing = [
        f"{page.relative_to(ROOT)} -> {link}"
        for page in DOCS.rglob("*.md")
        for link in relative_links(page)
        if link.split("#")[0] and not (page.parent / link.split("#")[0]).exists()
        and link.split("#")[0] not in ("reference/config.md", "reference/cli.md", "config.md", "cli.md",
                                       "../reference/config.md", "../reference/cli.md")  # generated at build
    ]  # fmt: skip
    assert not missing, missing
