"""`nmt prepare --download` against a loopback HTTP server serving archives made here."""

import functools
import http.server
import threading
import zipfile

import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app

from .helpers import synthetic_pairs, tiny_config

runner = CliRunner()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "site"
    root.mkdir()

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(QuietHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def make_archive(path, lang="mar"):
    text = "".join(
        f"{s}\t{t}\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i}\n" for i, (s, t) in enumerate(synthetic_pairs())
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("_about.txt", "About this file")
        archive.writestr(f"{lang}.txt", text)
    return path


def config_file(tmp_path, data_path="unused.txt"):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path, tmp_path / data_path)), encoding="utf-8")
    return path


def test_download_verify_unpack_and_prepare(tmp_path, server, monkeypatch):
    root, base = server
    make_archive(root / "mar-eng.zip")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(
        app, ["prepare", "--config", str(config_file(tmp_path)), "--download", "mar", "--url", base + "/{lang}-eng.zip"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "data" / "mar-eng" / "mar-eng.zip").is_file()
    assert (tmp_path / "run" / "data" / "source" / "mar.txt").is_file()
    assert f"{len(synthetic_pairs())} pairs" in result.stdout
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text(encoding="utf-8"))
    assert saved["data"]["path"].endswith("mar-eng.zip")


def test_local_zip_works_like_a_download(tmp_path):
    archive = make_archive(tmp_path / "mar-eng.zip")
    result = runner.invoke(app, ["prepare", "--config", str(config_file(tmp_path, archive.name))])
    assert result.exit_code == 0, result.output


def test_corrupt_archive_missing_file_and_bad_language(tmp_path, server, monkeypatch):
    root, base = server
    good = make_archive(tmp_path / "good.zip").read_bytes()
    corrupt = bytearray(good)
    offset = good.index(b"mar.txt") + 40  # inside the compressed data of mar.txt
    corrupt[offset : offset + 8] = b"\x00" * 8
    (root / "fra-eng.zip").write_bytes(bytes(corrupt))
    (root / "deu-eng.zip").write_bytes(b"<html>not a zip</html>")
    monkeypatch.chdir(tmp_path)
    config = str(config_file(tmp_path))

    def prepare_download(lang):
        return runner.invoke(
            app, ["prepare", "--config", config, "--download", lang, "--url", base + "/{lang}-eng.zip"]
        )

    result = prepare_download("fra")
    assert result.exit_code == 1 and "is corrupt" in result.stderr, result.output
    result = prepare_download("deu")
    assert result.exit_code == 1 and "not a valid zip" in result.stderr
    result = prepare_download("ita")
    assert result.exit_code == 1 and "HTTP 404" in result.stderr
    result = prepare_download("../x")
    assert result.exit_code == 1 and "language code" in result.stderr
    assert "Traceback" not in result.output
