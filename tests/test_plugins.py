"""A user's plugin from the command line (nmt/core/plugins.py): one module with an attention and
a callback, imported with --plugin and kept in the run's config.yaml; or by an installed
package's entry point. A config, a run or a package that names it is refused until --plugin
names it (a file never runs code). Every command runs as a process of its own, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from nmt.core.errors import NmtError
from nmt.core.plugins import load_plugins

from .helpers import synthetic_pairs, tiny_config, write_anki

PLUGIN = '''
"""A plugin as a user writes one: an attention and a callback, registered when it is imported."""
import math

from nmt.core.registry import ATTENTIONS, CALLBACKS
from nmt.model.rnn.attention import SOFT, AttentionKind, DotAttention
from nmt.training.callbacks import Callback


class ScaledDotAttention(DotAttention):  # e_j = q . h_j / sqrt(d)
    def score(self, query, keys):
        return super().score(query, keys) / math.sqrt(query.size(-1))


ATTENTIONS.register(
    "demo-scaled-dot",
    AttentionKind(lambda c, q, e, w: ScaledDotAttention(w), "recur-then-attend", ("e_j = q . h_j / sqrt d", *SOFT),
                  needs_equal_widths=True),
)


@CALLBACKS.register("demo-marker")
class Marker(Callback):
    def after_validation(self, trainer, record):
        with open(trainer.run_dir.root / "marker.txt", "a", encoding="utf-8") as handle:
            handle.write(f"{record.step} {record.dev_bleu} {type(trainer.model.decoder.attention).__name__}\\n")
        return None
'''


def nmt(*args: str, path: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), str(Path(__file__).resolve().parents[1])])}
    return subprocess.run(
        [sys.executable, "-m", "nmt", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run trained with the plugin's attention and callback, named with --plugin only."""
    root = tmp_path_factory.mktemp("plugin")
    plugins = root / "plugins"
    plugins.mkdir()
    (plugins / "nmt_demo_plugin.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    raw = tiny_config(root, write_anki(root / "pairs.txt", synthetic_pairs()), train={"epochs": 1, "patience": 0})
    raw["model"] |= {"attention": "demo-scaled-dot", "decoder_hidden": 64, "output_dim": 64}
    raw["train"]["callbacks"] = ["demo-marker"]
    config = root / "demo.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    done = nmt("--plugin", "nmt_demo_plugin", "train", "--config", str(config), path=plugins, cwd=root)
    assert done.returncode == 0, done.stderr
    return root, plugins, config, Path(raw["run_dir"])


def test_a_plugins_attention_and_callback_train_from_the_command_line(trained):
    root, plugins, config, run = trained
    assert (run / "marker.txt").read_text(encoding="utf-8").split()[2] == "ScaledDotAttention"
    saved = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    assert saved["plugins"] == ["nmt_demo_plugin"] and saved["model"]["attention"] == "demo-scaled-dot"
    without = nmt("train", "--config", str(config), "--resume", path=plugins, cwd=root)  # the file names no plugin
    assert without.returncode == 1 and "'model.attention': got 'demo-scaled-dot'" in without.stderr
    (root / "in.txt").write_text("hello\n", encoding="utf-8")
    translate = ["translate", "--config", str(run / "config.yaml"), "--input", str(root / "in.txt")]
    refused = nmt(*translate, path=plugins, cwd=root)  # the run's config.yaml names it: not enough to run it
    assert refused.returncode == 1 and "--plugin nmt_demo_plugin" in refused.stderr and not refused.stdout
    done = nmt("--plugin", "nmt_demo_plugin", *translate, path=plugins, cwd=root)
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done.stderr


def test_a_shared_package_runs_a_plugin_only_when_the_user_names_it(trained):
    root, plugins, _, run = trained
    package = root / "package"
    refused = nmt("export", str(run), str(package), path=plugins, cwd=root)  # a run is read as a package is
    assert refused.returncode == 1 and "--plugin nmt_demo_plugin" in refused.stderr and not package.exists()
    assert nmt("--plugin", "nmt_demo_plugin", "export", str(run), str(package), path=plugins, cwd=root).returncode == 0
    (root / "in.txt").write_text("hello\n", encoding="utf-8")
    refused = nmt("translate", "--model", str(package), "--input", str(root / "in.txt"), path=plugins, cwd=root)
    assert refused.returncode == 1
    assert "needs the plugin(s) nmt_demo_plugin" in refused.stderr and "--plugin nmt_demo_plugin" in refused.stderr
    named = ["--plugin", "nmt_demo_plugin", "translate", "--model", str(package), "--input", str(root / "in.txt")]
    done = nmt(*named, path=plugins, cwd=root)
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done.stderr


def test_an_installed_package_declares_its_plugin_as_an_entry_point(trained):
    root, plugins, _, _ = trained
    site = root / "site"
    info = site / "nmt_demo_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nmt-demo-plugin\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[nmt.plugins]\ndemo = nmt_demo_plugin\n", encoding="utf-8")
    probe = (
        "from nmt.core.registry import ATTENTIONS, CALLBACKS; "
        "print('demo-scaled-dot' in ATTENTIONS, 'demo-marker' in CALLBACKS)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugins), str(Path(__file__).resolve().parents[1])])}
    plain = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    env["PYTHONPATH"] += os.pathsep + str(site)
    installed = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert plain.stdout.split() == ["False", "False"] and installed.stdout.split() == ["True", "True"]


def test_a_shared_config_naming_something_odd_as_a_plugin_is_refused_not_a_traceback(tmp_path):
    from nmt.runtime.loading import load_run_config

    (tmp_path / "config.yaml").write_text("plugins: [os, {a: 1}]\n", encoding="utf-8")
    with pytest.raises(NmtError, match=r"needs the plugin\(s\) \{'a': 1\}, which are code"):
        load_run_config(tmp_path, shared=True)


def test_a_plugin_is_a_module_name_never_a_path():
    with pytest.raises(NmtError, match=r"'\.\./evil\.py' is not a module name"):
        load_plugins(["../evil.py"])
    with pytest.raises(NmtError, match=r"no module named 'nmt_no_such_plugin' on the Python path"):
        load_plugins(["nmt_no_such_plugin"])


def test_a_plugins_callback_reaches_every_member(trained):
    root, plugins, config, _ = trained
    members = root / "members"
    done = nmt(
        "--plugin",
        "nmt_demo_plugin",
        "train",
        "--config",
        str(config),
        "--set",
        "train.members=2",
        "--set",
        f"run_dir={members}",
        path=plugins,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    for member in ("member-1", "member-2"):  # each member's process imported the plugin from the config
        assert (members / member / "marker.txt").read_text(encoding="utf-8").split()[2] == "ScaledDotAttention"
