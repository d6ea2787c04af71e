"""The documentation: a README that is a front door, a config reference generated from the code
and no hand-written copy of it, links that resolve. (`mkdocs build --strict` in .ci/run checks
the site's own links and pages.)"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

from nmt.config.ranges import RANGES
from nmt.config.reference import key_docs, markdown
from nmt.config.schema import Config

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
        if key in RANGES:
            assert RANGES[key][1] in rows[key], f"{key}'s range is not shown"
    assert rows["train.batch_size"].count("*required*") == 1  # required keys say so
    assert "a number > 0" in rows["train.learning_rate"] and "`0.001`" in rows["train.learning_rate"]


def test_the_committed_reference_pages_are_current():
    """docs/reference/config.md and cli.md are what the code declares today (before, they were made
    at build time only, and the README's link to the config reference was dead on a repository host)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("reference_pages", DOCS / "reference_pages.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    for name, make in hooks.GENERATED.items():
        committed = (DOCS / name).read_text(encoding="utf-8")
        assert committed == make(), f"docs/{name} is not current: run python docs/reference_pages.py"


def test_no_hand_written_copy_of_the_config_keys_remains():
    """No page tabulates config keys with their defaults, as the generated reference does (the
    README's tables once spelled each key a third time)."""
    copies = []
    generated = {DOCS / "reference" / "config.md", DOCS / "reference" / "cli.md"}
    for path in [ROOT / "README.md", *(p for p in DOCS.rglob("*.md") if p not in generated)]:
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
    ]
    assert not missing, missing


ARCHITECTURE = DOCS / "explanation" / "architecture.md"


def module_table_names() -> set[str]:
    """Every module the architecture page's table names: `nmt/x/a.py`, and `b.py` after it in the same cell."""
    names = set()
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `nmt/"):
            cell = line.split("|")[1]
            paths = re.findall(r"`([\w/]+\.py)`", cell)
            folder = paths[0].rsplit("/", 1)[0]
            names |= {path if "/" in path else f"{folder}/{path}" for path in paths}
    return names


def test_the_architecture_page_opens_with_the_tree_and_names_every_module():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    tree = text.split("```")[1]
    folders = sorted(p.name for p in (ROOT / "nmt").iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert all(f"├── {folder}/" in tree or f"└── {folder}/" in tree for folder in folders), folders
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "nmt").rglob("*.py") if p.name != "__init__.py"} - {
        "nmt/__init__.py"
    }
    assert modules - module_table_names() == set(), "modules missing from the architecture page's table"
    assert module_table_names() - modules == set(), "the table names modules that do not exist"


def recipes() -> dict[str, str]:
    """The plugin modules of the page's "Adding a ..." recipes, by file name (their first line)."""
    found = {}
    for block in re.findall(r"```python\n(.*?)```", ARCHITECTURE.read_text(encoding="utf-8"), re.S):
        first = block.splitlines()[0]
        if first.startswith("# my_") and first.endswith(".py"):
            found[first[2:]] = block
    return found


def test_each_extension_recipe_is_one_plugin_that_works_from_the_command_line(tmp_path):
    """The four recipes, copied from the page: train with the cell, the attention and the callback
    named by --plugin, then translate with the engine's package, each a command of its own."""
    import os
    import subprocess
    import sys

    import yaml

    from .helpers import synthetic_pairs, tiny_config, write_anki

    chosen = {name: code for name, code in recipes().items() if name != "my_family.py"}  # its own test below
    assert sorted(chosen) == ["my_attention.py", "my_callback.py", "my_cells.py", "my_engine.py"]
    for name, code in chosen.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    raw = tiny_config(tmp_path, write_anki(tmp_path / "pairs.txt", synthetic_pairs()), train={"epochs": 1})
    raw["model"] |= {"rnn": "elman", "attention": "scaled-dot", "decoder_hidden": 64, "output_dim": 64}
    raw["train"]["callbacks"] = ["bleu-file"]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}

    def nmt(*args):
        done = subprocess.run(
            [sys.executable, "-m", "nmt", *args], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done

    plugins = ["--plugin", "my_cells", "--plugin", "my_attention", "--plugin", "my_callback"]
    nmt(*plugins, "train", "--config", "c.yaml")
    run = Path(raw["run_dir"])
    assert len((run / "bleu.txt").read_text().splitlines()) == 1  # one validation
    nmt(*plugins, "export", str(run), "pkg")  # the run names its plugins; the command vouches for them
    (tmp_path / "in.txt").write_text("hello\nthere\n", encoding="utf-8")
    torch_out = nmt(*plugins, "translate", "--model", "pkg", "--input", "in.txt").stdout
    engine_out = nmt(
        *plugins, "--plugin", "my_engine", "translate", "--model", "pkg", "--engine", "one-thread", "--input", "in.txt"
    ).stdout
    assert engine_out == torch_out and engine_out.count("\n") == 2


def test_a_model_family_from_a_plugin_trains_translates_packages_and_is_refused_by_name(tmp_path):
    """The page's fifth recipe, a family with none of the optional facts: it trains, averages,
    packages and translates through the same commands as the built-ins; ONNX export and a tune
    without a space name it and what it does not declare (before: an assert in the ONNX graphs,
    the RNN's model card and the RNN's tune space)."""
    import os
    import subprocess
    import sys

    import yaml

    from .helpers import synthetic_pairs, tiny_config, write_anki

    (tmp_path / "my_family.py").write_text(recipes()["my_family.py"], encoding="utf-8")
    raw = tiny_config(tmp_path, write_anki(tmp_path / "pairs.txt", synthetic_pairs()), train={"epochs": 2})
    raw["model"] = {"arch": "bag", "embed_dim": 32, "pooling": "max", "attention": "luong-dot"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}

    def nmt(*args, ok=True):
        done = subprocess.run(
            [sys.executable, "-m", "nmt", "--plugin", "my_family", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert (done.returncode == 0) == ok, done.stderr
        return done

    trained = nmt("train", "--config", "c.yaml")
    assert "Model: " in trained.stdout + trained.stderr
    # its own key is a key like any (kept, checked); an RNN's is not read, and the log says so
    log = (Path(raw["run_dir"]) / "train.log").read_text(encoding="utf-8")
    assert "Not read by model.arch bag: model.attention: luong-dot" in log
    for wrong, message in (("poolin=max", "Did you mean 'model.pooling'"), ("pooling=sum", "one of 'mean', 'max'")):
        refused = nmt("train", "--config", "c.yaml", "--set", f"model.{wrong}", ok=False)
        assert message in refused.stderr and "Traceback" not in refused.stderr
    run = Path(raw["run_dir"])
    nmt("export", str(run), "pkg")
    assert yaml.safe_load((tmp_path / "pkg" / "config.yaml").read_text(encoding="utf-8"))["model"]["pooling"] == "max"
    card = (tmp_path / "pkg" / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "bag-of-words translation model" in card and "max of 32-wide source embeddings" in card
    (tmp_path / "in.txt").write_text("hello\nthere\n", encoding="utf-8")
    from_run = nmt("translate", "--config", "c.yaml", "--input", "in.txt").stdout
    from_package = nmt("translate", "--model", "pkg", "--input", "in.txt").stdout
    assert from_run == from_package and from_run.count("\n") == 2
    refused = nmt("export", str(run), "onnx-pkg", "--onnx", ok=False)
    assert "cannot be exported to ONNX" in refused.stderr and "bag" in refused.stderr
    assert "Traceback" not in refused.stderr
    untuned = nmt("tune", "--config", "c.yaml", "--trials", "1", "--minutes", "5", ok=False)
    assert "model.arch 'bag' has no default search space" in untuned.stderr and "Traceback" not in untuned.stderr


def test_every_page_is_in_the_sites_nav_or_excluded_as_mkdocs_strict_requires():
    """`mkdocs build` as the README says aborted in strict mode (alignment/guided.md and
    alignment/results.md outside the nav); CI passed only because --quiet hid the warning."""
    import fnmatch

    import yaml

    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(nav) -> list[str]:
        found = []
        for item in nav:
            for value in item.values() if isinstance(item, dict) else [item]:
                found += pages(value) if isinstance(value, list) else [value]
        return found

    listed = set(pages(site["nav"]))
    excluded = [line.strip() for line in site.get("exclude_docs", "").splitlines() if line.strip()]
    outside = [
        page
        for page in (p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
        if page not in listed and not any(fnmatch.fnmatch(page, rule) or page.startswith(rule) for rule in excluded)
    ]
    assert not outside, f"pages neither in mkdocs.yml's nav nor excluded: {outside}"
    assert "mkdocs build --strict --quiet" not in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


TINY_BUDGET = [  # what makes python.md's recipe a few seconds' run in a test (the blocks are run as written)
    "data.max_pairs=400",
    "tokenizer.src_vocab_size=400",
    "tokenizer.tgt_vocab_size=400",
    "model.embed_dim=16",
    "model.encoder_hidden=16",
    "model.decoder_hidden=16",
    "model.attention_dim=16",
    "model.output_dim=16",
    "train.max_minutes=0",
    "train.epochs=1",
    "train.threads=1",
]


@pytest.mark.slow
def test_the_python_api_pages_code_runs_in_a_fresh_folder(tmp_path, monkeypatch):
    """Its training example failed in a fresh folder: train() does not prepare, and the error
    pointed at the wrong fix. Each ```python block, in order, in one namespace, in a folder that
    `nmt init --example eng-mar` wrote, on a tiny budget."""
    from typer.testing import CliRunner

    from nmt.cli import app
    from nmt.config import files

    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(app, ["init", "--example", "eng-mar"]).exit_code == 0
    original = files.load_config
    tiny = lambda path, overrides=(): original(path, [*TINY_BUDGET, *overrides])  # noqa: E731
    # every module that holds load_config by name, imported (by monkeypatch) before files.load_config is
    # patched, so that each is restored to the real one: a module first imported while it was patched
    # kept the patched one for the tests after this (test_cli's runs then read width 16)
    for holder in ("nmt.api.runs", "nmt.pipelines.translators", "nmt.pipelines.variants", "nmt.cli.common"):
        monkeypatch.setattr(f"{holder}.load_config", tiny)
    monkeypatch.setattr(files, "load_config", tiny)
    page = (DOCS / "reference" / "python.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) >= 3
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "python.md", "exec"), namespace)
    assert (tmp_path / "runs" / "eng-mar-cpu" / "checkpoints" / "best.pt").is_file()
    assert isinstance(namespace["translator"].translate(["Hello."])[0], str)
    assert namespace["view"].data["source"] == "Where is the station?" and (tmp_path / "attention.html").is_file()


def test_a_missing_tokenizer_of_a_run_never_prepared_says_to_prepare(tmp_path):
    from nmt.core.errors import NmtError
    from nmt.data.tokenizer import Tokenizer

    with pytest.raises(NmtError, match=r"No prepared data there: .*nmt prepare --config"):
        Tokenizer(tmp_path / "runs" / "x" / "data" / "spm.en.model")


def _doc_commands() -> list[tuple[str, list[str]]]:
    """Every `nmt ...` command of the README's and the docs' shell blocks (a pipe's or a `&&`
    chain's parts each, redirections dropped), skipping synopsis lines (`[...]`, `...`, `$VAR`)."""
    import shlex

    found = []
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #")[0].strip().removeprefix("$ ")
                if "[" in line or "..." in line or "…" in line or "$" in line:
                    continue
                for part in re.split(r"&&|\|\||;|\|", line):
                    if not part.strip().startswith("nmt "):
                        continue
                    words = shlex.split(part)
                    if words[:1] == ["nmt"]:
                        cut = next((i for i, w in enumerate(words) if w[:1] in "<>" or w[:2] == "2>"), len(words))
                        found.append((str(page.relative_to(ROOT)), words[1:cut]))
    return found


def test_every_nmt_command_line_in_the_docs_parses():
    """Each command line of the docs is parsed by the CLI itself (options, arguments, required
    ones), not run: a renamed or dropped option fails here before a user meets it."""
    import typer
    from typer._click import exceptions

    from nmt.cli import app

    cli = typer.main.get_command(app)
    commands = _doc_commands()
    assert len(commands) > 50
    wrong = []
    for page, args in commands:
        try:
            context = cli.make_context("nmt", list(args), resilient_parsing=True)
            rest = [*getattr(context, "_protected_args", []), *context.args]
            if rest:
                command = cli.get_command(context, rest[0])
                if command is None:
                    wrong.append((page, args, "no such command"))
                    continue
                command.make_context(rest[0], rest[1:], parent=context)
        except (exceptions.NoArgsIsHelpError, SystemExit):
            continue
        except exceptions.UsageError as error:
            wrong.append((page, " ".join(args), error.format_message()))
    assert not wrong, wrong
