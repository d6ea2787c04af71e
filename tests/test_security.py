"""Safe to share: a model, a run or a study someone hands you cannot make a command read outside
it, allocate beyond its weights, overwrite your work or answer another site; a refused command
changes nothing (docs/explanation/security.md). Each test failed before its fix."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from starlette.requests import Request
from typer.testing import CliRunner

from nmt.cli import app
from nmt.config.parsing import config_from_dict
from nmt.config.schema import DecodeConfig
from nmt.core.errors import NmtError
from nmt.core.locking import LOCK_NAME
from nmt.data.tokenizer import EOS_ID
from nmt.decoding.search import search_sentences
from nmt.pipelines.translate import Translator
from nmt.runtime.checkpoint import load_checkpoint, save_checkpoint
from nmt.runtime.loading import load_trained
from nmt.serve.app import SERVED_MAX_LEN_RATIO, HideToken, build_app
from nmt.serve.requests import RequestError, read_body

from .helpers import local_client, random_translator, small_model, synthetic_pairs, tiny_config, write_anki

runner = CliRunner()


def nmt(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def tree_hashes(folder: Path) -> dict[str, str]:
    """Every file's hash but the lock's, which names the last command that held the run."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Two tiny trained runs of the same data (seeds 7 and 8), their configs, and a package of the first."""
    root = tmp_path_factory.mktemp("shared")
    data = write_anki(root / "pairs.tsv", synthetic_pairs())
    found = {}
    for name, seed in (("a", 7), ("b", 8)):
        raw = tiny_config(root, data, run_dir=str(root / name), train={"epochs": 2, "seed": seed, "probes": 2})
        config = root / f"{name}.yaml"
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        nmt("train", "--config", str(config))
        found[name], found[f"{name}.yaml"] = root / name, config
    nmt("export", str(found["a"]), str(root / "package"))
    found["package"] = root / "package"
    return found


def best_weights_hash(run: Path) -> str:
    payload = load_checkpoint(run / "checkpoints" / "best.pt")
    return hashlib.sha256(
        b"".join(t.contiguous().numpy().tobytes() for _, t in sorted(payload["model"].items()))
    ).hexdigest()


def package_weights_hash(package: Path) -> str:
    from safetensors.torch import load_file

    weights = load_file(str(package / "model.safetensors"))
    return hashlib.sha256(b"".join(t.numpy().tobytes() for _, t in sorted(weights.items()))).hexdigest()


# 1. a run directory is wherever it is
def test_exporting_a_copied_run_packages_that_folders_weights_not_the_original_runs(runs, tmp_path):
    original = tmp_path / "runs" / "x"
    shutil.copytree(runs["a"], original)
    moved = tmp_path / "runs" / "x_moved"
    shutil.copytree(original, moved)
    raw = yaml.safe_load((original / "config.yaml").read_text(encoding="utf-8"))
    raw["run_dir"] = str(original)  # both copies name the original, as a run trained there does
    for folder in (original, moved):
        (folder / "config.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    shutil.rmtree(original)
    shutil.copytree(runs["b"], original)  # the original is now another model (retrained)
    (original / "config.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert best_weights_hash(moved) != best_weights_hash(original)

    nmt("export", str(moved), str(tmp_path / "package"))
    assert package_weights_hash(tmp_path / "package") == best_weights_hash(moved)
    manifest = json.loads((tmp_path / "package" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["exported_from"] == "x_moved (best)"  # the folder's name, never a local path

    shutil.rmtree(original)  # the original gone: the moved run still exports and is a parent
    nmt("export", str(moved), str(tmp_path / "package-2"))
    from nmt.runtime.parent import load_parent

    parent = load_parent(moved)
    assert parent.sha256 == hashlib.sha256((moved / "checkpoints" / "best.pt").read_bytes()).hexdigest()
    assert "path" not in parent.lineage and parent.lineage["name"] == "x_moved"


# 2. the body limit holds while the body streams in
def request_streaming(chunks: list[bytes], headers: dict[str, str], consumed: list[int]) -> Request:
    async def receive():
        consumed.append(1)
        more = len(consumed) < len(chunks)
        return {"type": "http.request", "body": chunks[len(consumed) - 1], "more_body": more}

    raw_headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/", "headers": raw_headers}, receive)


def test_a_body_over_the_limit_is_refused_by_its_length_or_while_it_streams_not_read_whole():
    import asyncio

    consumed: list[int] = []
    declared = request_streaming([b"x" * 10], {"content-length": str(300 * 10**6)}, consumed)
    with pytest.raises(RequestError) as refused:
        asyncio.run(read_body(declared, 1000))
    assert refused.value.status == 413 and consumed == []  # not a byte read
    chunks = [b"x" * 400] * 100  # 40 kB sent without a length (chunked)
    with pytest.raises(RequestError):
        asyncio.run(read_body(request_streaming(chunks, {}, consumed), 1000))
    assert len(consumed) == 3  # refused at the chunk that passed the limit
    assert asyncio.run(read_body(request_streaming([b"{}"], {"content-length": "2"}, []), 1000)) == b"{}"


# 3. a package's config cannot size the model beyond its weights
def test_a_package_whose_config_is_far_bigger_than_its_weights_is_refused_before_allocating(runs, tmp_path):
    package = tmp_path / "package"
    shutil.copytree(runs["package"], package)
    raw = yaml.safe_load((package / "config.yaml").read_text(encoding="utf-8"))
    raw["model"].update(embed_dim=20000)
    (package / "config.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(NmtError, match=r"model\.embed_dim"):  # beyond the ranges
        load_trained(package, torch.device("cpu"))
    # within the ranges, a model of ~1.3 GB float32 over a 0.3 MB weights file: refused on the header
    raw["model"].update(embed_dim=4096, encoder_hidden=2048, decoder_hidden=4096, attention_dim=4096, output_dim=4096)
    (package / "config.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    script = (
        "import re, torch; from nmt.runtime.loading import load_trained; from nmt.core.errors import NmtError\n"
        f"try:\n    load_trained({str(package)!r}, torch.device('cpu'))\nexcept NmtError as e:\n    print(e)\n"
        # VmHWM: this process's own peak (ru_maxrss would count the forked pytest before exec)
        "print('peak', int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "model.embed_dim: the weights were exported with 32, config has 4096" in out  # their own record
    assert int(out.rsplit("peak", 1)[1]) < 900  # MB: torch itself, not the 1.3 GB model
    from safetensors.torch import load_file, save_file  # a package exported before weights recorded settings

    save_file(load_file(str(package / "model.safetensors")), str(package / "model.safetensors"))
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    del manifest["files_sha256"]  # nor hashed its files
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "does not hold the model its config describes" in out and "the config makes" in out  # its shapes
    assert int(out.rsplit("peak", 1)[1]) < 900


# 4. a refused command leaves every file of the run as it was
@pytest.mark.parametrize(
    "command",
    [
        ["train", "--set", "tokenizer.src_vocab_size=500"],
        ["train", "--set", "tokenizer.src_vocab_size=500", "--resume"],
        ["train"],
        ["prepare", "--set", "model.embed_dim=48"],
        ["prepare", "--set", "tokenizer.tgt_vocab_size=400"],
    ],
    ids=["train-new-vocab", "resume-new-vocab", "train-again", "prepare-new-model", "prepare-new-vocab"],
)
def test_a_refused_prepare_or_train_leaves_the_trained_run_byte_identical(runs, tmp_path, command):
    run = tmp_path / "run"
    shutil.copytree(runs["a"], run)
    raw = yaml.safe_load(runs["a.yaml"].read_text(encoding="utf-8"))
    raw["run_dir"] = str(run)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    before = tree_hashes(run)
    result = runner.invoke(app, [command[0], "--config", str(config), *command[1:]])
    assert result.exit_code != 0 and "Nothing was changed" in result.output, result.output
    assert "Traceback" not in result.output
    assert tree_hashes(run) == before
    nmt("translate", "--config", str(config), "--text", "I see apples.")  # still translates


# 5. loaders with known holes are not admitted, and ONNX external data is refused
def test_the_dependency_floors_exclude_the_loaders_with_known_holes():
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert '"torch>=2.10"' in text and "onnxruntime>=1.18" not in text and text.count('"onnxruntime>=1.24"') == 2


def test_an_onnx_graph_with_external_data_is_refused_before_onnxruntime_reads_it(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from nmt.runtime.onnx_engine import graph_bytes

    tensor = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.0] * 4)
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="../../etc/passwd")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [tensor],
    )
    path = tmp_path / "encoder.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(NmtError, match="external data"):
        graph_bytes(path)
    (tmp_path / "link.onnx").symlink_to(path)
    with pytest.raises(NmtError, match="symbolic link"):
        graph_bytes(tmp_path / "link.onnx")


# 6. symbolic links are not followed
def test_a_linked_timeline_is_not_packaged_nor_served(runs, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text('{"epoch": 1, "secret": "do not share"}\n', encoding="utf-8")
    run = tmp_path / "run"
    shutil.copytree(runs["a"], run)
    (run / "timeline.jsonl").unlink()
    (run / "timeline.jsonl").symlink_to(secret)
    result = runner.invoke(app, ["export", str(run), str(tmp_path / "package")])
    assert result.exit_code != 0 and "symbolic link" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "package").exists()
    translator = Translator(load_trained(run, torch.device("cpu")))
    response = local_client(build_app({"m": translator})).get("/api/timeline")
    assert response.status_code == 403 and "do not share" not in response.text


def test_a_package_timeline_is_records_written_anew(runs):
    records = [json.loads(line) for line in (runs["package"] / "timeline.jsonl").read_text().splitlines()]
    assert records and all("probes" in record for record in records)


# 7. only this machine's pages may use the server
@pytest.fixture(scope="module")
def served():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        yield local_client(build_app({"m": random_translator(Path(tmp))}))


def test_another_host_name_is_refused_dns_rebinding(served):
    assert served.get("/", headers={"Host": "attacker.example"}).status_code == 400
    response = served.post("/api/translate", json={"text": "hello"}, headers={"Host": "attacker.example:8000"})
    assert response.status_code == 400 and response.json()["field"] == "host"
    for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000"):
        assert served.get("/api/health", headers={"Host": host}).status_code == 200, host


def test_a_cross_site_post_is_refused_and_a_post_must_be_json(served):
    response = served.post("/api/translate", json={"text": "hello"}, headers={"Origin": "https://evil.example"})
    assert response.status_code == 403 and response.json()["field"] == "origin"
    plain = served.post("/api/translate", content=b'{"text": "hello"}', headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415 and plain.json()["field"] == "body"
    same = served.post("/api/translate", json={"text": "hello"}, headers={"Origin": "http://127.0.0.1:8000"})
    assert same.status_code == 200


def test_nmt_serve_has_a_random_token_by_default_and_hides_it_from_the_log(runs, monkeypatch):
    started = {}

    def run_server(served_app, listening):
        listening.close()
        started.update(app=served_app)

    monkeypatch.setattr("nmt.serve.app.run_server", run_server)
    output = nmt("serve", "--model", str(runs["package"]), "--port", "0")
    token = output.split("?token=", 1)[1].split()[0]
    assert len(token) >= 20
    client = local_client(started["app"])
    assert client.get("/api/models").status_code == 401
    assert client.get("/api/models", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert "?token=" not in nmt("serve", "--model", str(runs["package"]), "--no-token", "--port", "0")
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s"', ("a", "GET", f"/?token={token}"), None
    )
    HideToken().filter(record)
    assert token not in record.getMessage() and "token=…" in record.getMessage()


# 8. decoding settings are bounded, and served output stays in proportion
def test_decoding_settings_have_upper_bounds_and_serve_clamps_the_output_limit(tmp_path):
    raw = {"run_dir": "r", "data": {"path": "x.tsv"}, "train": {"epochs": 1, "batch_size": 8}}
    for key, value in (("max_len_ratio", 400), ("max_len_offset", 100000), ("beam_size", 5000)):
        with pytest.raises(NmtError, match=f"decode.{key}"):
            config_from_dict({**raw, "decode": {"beam_size": 2, key: value}})
    translator = random_translator(tmp_path)
    translator.decode.max_len_ratio = 10.0
    build_app({"m": translator})
    assert translator.decode.max_len_ratio == SERVED_MAX_LEN_RATIO


# 9. nmt tune never trains in a folder the study's storage names
def test_a_trials_run_directory_comes_from_its_number_inside_the_study(tmp_path):
    from nmt.pipelines.tune import trial_run_dir

    study = SimpleNamespace(root=tmp_path / "tune")
    elsewhere = {"run_dir": "/home/someone/other-project/run"}
    assert trial_run_dir(study, SimpleNamespace(number=7, user_attrs=elsewhere)) == study.root / "trial-7"
    retry = SimpleNamespace(number=9, user_attrs={**elsewhere, "run_of": 3})
    assert trial_run_dir(study, retry) == study.root / "trial-3"
    crafted = SimpleNamespace(number=9, user_attrs={"run_of": "../../../x"})
    assert trial_run_dir(study, crafted) == study.root / "trial-9"


# 10. a zip cannot unpack beyond any Anki export
def test_an_anki_zip_that_unpacks_beyond_the_cap_is_refused(tmp_path, monkeypatch):
    from nmt.data import download

    monkeypatch.setattr(download, "MAX_UNPACKED_BYTES", 100_000)
    archive = tmp_path / "mar-eng.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("mar.txt", "Go.\tजा.\n" * 50_000)
    assert archive.stat().st_size < 20_000
    with pytest.raises(NmtError, match="unpacks to more than"):
        download.unpack(archive, tmp_path / "out")
    assert not (tmp_path / "out" / "mar.txt").exists()


# 11. a language code is one path part
@pytest.mark.parametrize("code", ["x/../../../outside/en", "..", "en/", "e n", ""])
def test_a_language_code_that_is_not_one_path_part_is_refused(code):
    raw = {
        "run_dir": "r",
        "data": {"path": "x.tsv", "src_lang": code},
        "train": {"epochs": 1, "batch_size": 8},
        "decode": {"beam_size": 1},
    }
    with pytest.raises(NmtError, match=r"data\.src_lang"):
        config_from_dict(raw)


# 12. damaged inputs get a clear error
def damage(package: Path, name: str, text: str | bytes) -> None:
    path = package / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("manifest.json", '{"format": 1, "parameters": 3}', "spm_sha256"),
        ("manifest.json", '{"format": 1, "spm_sha256": ', "not valid JSON"),
        ("model.safetensors", b"\x00" * 64, "Cannot read the weights"),
        ("config.yaml", "!!python/object/apply:os.system ['true']\n", "not a readable config"),
    ],
    ids=["no-hashes", "bad-json", "bad-safetensors", "yaml-tag"],
)
def test_a_damaged_package_is_a_clear_error(runs, tmp_path, name, content, expected):
    package = tmp_path / "package"
    shutil.copytree(runs["package"], package)
    damage(package, name, content)
    result = runner.invoke(app, ["translate", "--model", str(package), "--text", "hello"])
    assert result.exit_code != 0 and expected in result.output and "Traceback" not in result.output, result.output


def test_a_checkpoint_with_pickled_code_is_named_as_such(tmp_path):
    class Payload:
        def __reduce__(self):
            return (os.system, ("true",))

    path = tmp_path / "evil.pt"
    torch.save({"format_version": 1, "model": Payload()}, path)
    with pytest.raises(NmtError, match=r"contains a pickled object \((posix|os|nt)\.system\)"):
        load_checkpoint(path)


def test_a_full_disk_while_checkpointing_is_a_clear_error_and_the_old_checkpoint_is_intact(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"model": {"w": torch.ones(2)}})
    before = path.read_bytes()

    def full(obj, target):
        Path(target).write_bytes(b"partial")
        failed = "[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file data/0"
        raise RuntimeError(failed) from OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(NmtError, match="intact"):
        save_checkpoint(path, {"model": {"w": torch.zeros(2)}})
    assert path.read_bytes() == before and list(tmp_path.iterdir()) == [path]


# 13. no local paths travel; the weights are on disk before the package appears
def test_models_list_and_manifest_carry_no_local_paths(runs, tmp_path):
    manifest = (runs["package"] / "manifest.json").read_text(encoding="utf-8")
    assert str(tmp_path.parent) not in manifest and str(runs["a"]) not in manifest
    translator = Translator(load_trained(runs["package"], torch.device("cpu")))
    translator.loaded.parent = {"name": "p", "path": "/home/me/secret/run", "pair": "en-mr"}  # an older lineage
    models = local_client(build_app({"m": translator})).get("/api/models").json()["models"]
    assert models[0]["parent"] == {"name": "p", "pair": "en-mr"}


def test_the_exported_weights_are_fsynced_before_the_package_is_renamed_into_place(runs, tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def recording(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    nmt("export", str(runs["a"]), str(tmp_path / "package"))
    assert any(name.endswith("/model.safetensors") for name in synced), synced


# 14. a sentence's translation does not depend on its batch-mates
@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_sentence_is_cut_at_its_own_length_limit_whatever_its_batch(beam_size):
    model = small_model(vocab=20, seed=3)
    with torch.no_grad():
        model.decoder.output.bias[EOS_ID] = -1e4  # it never ends: every sentence runs to its limit
    decode = DecodeConfig(beam_size=beam_size, max_len_ratio=1.5, max_len_offset=2)
    short, long = [5, 6, 7], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    alone = search_sentences(model, [short], decode, torch.device("cpu"))[0][0]
    beside = search_sentences(model, [short, long], decode, torch.device("cpu"))
    assert beside[0][0].tokens == alone.tokens
    assert len(alone.tokens) == int(4 * 1.5) + 2  # its own limit (3 subwords + <eos>)
    assert len(beside[1][0].tokens) == int(13 * 1.5) + 2


def test_files_a_run_writes_have_the_mode_the_umask_asks_for(tmp_path):
    """Under umask 022 a run's files were 0600 (atomic writes rename a private temporary file into
    place) and a package's folder 0700; now what a plain open() and mkdir() would make."""
    import stat

    from nmt.core.fileio import UMASK

    raw = tiny_config(tmp_path, write_anki(tmp_path / "pairs.txt", synthetic_pairs()), train={"epochs": 1})
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    nmt("train", "--config", str(config))
    nmt("export", raw["run_dir"], str(tmp_path / "package"))
    for root in (Path(raw["run_dir"]), tmp_path / "package"):
        for path in [root, *root.rglob("*")]:
            if path.is_symlink():
                continue
            mode = stat.S_IMODE(path.stat().st_mode)
            expected = (0o777 if path.is_dir() else 0o666) & ~UMASK
            assert mode == expected, f"{path}: {oct(mode)}, the umask asks for {oct(expected)}"


def test_a_run_whose_data_folder_is_a_link_is_never_written_through(tmp_path):
    """prepare --force wrote 23 files, and train --resume its lock, into a linked RUN/data's target."""
    from nmt.pipelines.prepare import prepare

    data = write_anki(tmp_path / "pairs.tsv", synthetic_pairs())
    raw = tiny_config(tmp_path, data, run_dir=str(tmp_path / "run"))
    raw["data"].pop("prepared_dir", None)  # the default: RUN/data
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    (tmp_path / "run").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run" / "data").symlink_to(elsewhere)
    for command in (["prepare", "--config", str(config), "--force"], ["train", "--config", str(config), "--resume"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 1 and "symbolic link" in result.output, result.output
        assert list(elsewhere.iterdir()) == [], command
    with pytest.raises(NmtError, match="symbolic link"):
        prepare(config_from_dict(raw), force=True)
    assert list(elsewhere.iterdir()) == []
