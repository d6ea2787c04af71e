"""`nmt serve`'s JSON API: every field, the attention it returns, prefixes, alternatives, and
4xx/413 answers that name the field for every kind of bad request."""

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nmt.serve.app import build_app
from nmt.serve.requests import Limits

from .helpers import local_client, random_translator, wait_until

LIMITS = Limits(max_chars=200, max_texts=4, max_beam=8, max_alternatives=10, max_body_bytes=5000)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    first = random_translator(tmp_path_factory.mktemp("a"), beam_size=3)
    second = random_translator(tmp_path_factory.mktemp("b"))
    with local_client(build_app({"first": first, "second": second}, LIMITS)) as test_client:
        yield test_client


def post(client, path, body):
    return client.post(path, json=body)


def test_health_and_models(client):
    health = client.get("/api/health").json()
    assert health["status"] == "ok" and set(health["queues"]) == {"first", "second"}
    assert health["queues"]["first"]["queued_texts"] == 0
    models = client.get("/api/models").json()["models"]
    assert [m["name"] for m in models] == ["first", "second"]
    assert models[0]["attention"] == "bahdanau" and models[0]["parameters"] > 1000 and models[0]["beam_size"] == 3
    assert models[0]["scripts_without_font"] == []  # English and Devanagari: both drawn


def test_translate_returns_sorted_n_best_with_scores_token_logprobs_and_attention(client):
    body = {"text": "I see apples.", "beam_size": 4, "n_best": 3, "attention": True}
    result = post(client, "/api/translate", body).json()
    translations = result["translations"]
    assert len(translations) == 3 and result["model"] == "first"
    scores = [t["score"] for t in translations]
    assert scores == sorted(scores, reverse=True)
    for t in translations:
        assert len(t["tokens"]) == len(t["token_logprobs"])  # "<eos>" included when it ended
        assert t["score"] == pytest.approx(sum(t["token_logprobs"]) / len(t["token_logprobs"]), abs=1e-5)
    attention, best = result["attention"], translations[0]
    assert result["source_tokens"][-1] == "<eos>" and len(attention) == len(best["tokens"])
    for row in attention:
        assert len(row) == len(result["source_tokens"]) and math.isclose(sum(row), 1.0, abs_tol=1e-4)


def test_a_batch_of_texts_gives_one_result_each_and_a_model_can_be_chosen(client):
    body = {"texts": ["I see apples.", "we like tea."], "model": "second", "beam_size": 1, "attention": True}
    result = post(client, "/api/translate", body).json()
    assert result["model"] == "second" and len(result["results"]) == 2
    # (a batch's output limit follows its longest source: compare a batch of one with the single text)
    batch_of_one = post(client, "/api/translate", {**body, "texts": ["we like tea."]}).json()["results"][0]
    alone_body = {"text": "we like tea.", "model": "second", "beam_size": 1, "attention": True}
    alone = post(client, "/api/translate", alone_body).json()
    assert batch_of_one["translations"] == alone["translations"] and batch_of_one["attention"] == alone["attention"]


def test_a_prefix_is_kept_and_scored_as_part_of_the_translation(client):
    body = {"text": "I see apples.", "prefix": "ती दूध", "n_best": 2, "attention": True}
    result = post(client, "/api/translate", body).json()
    for t in result["translations"]:
        assert t["text"].startswith("ती दूध")
        assert t["score"] == pytest.approx(sum(t["token_logprobs"]) / len(t["token_logprobs"]), abs=1e-5)
    assert len(result["attention"]) == len(result["translations"][0]["tokens"])


def test_a_prefix_of_subwords_is_taken_as_given(client):
    best = post(client, "/api/translate", {"text": "we like tea."}).json()["translations"][0]["tokens"]
    alternatives = post(client, "/api/alternatives", {"text": "we like tea.", "prefix_tokens": best[:1], "k": 3})
    second = next(a["token"] for a in alternatives.json()["alternatives"] if a["token"] != best[1])
    forced = post(client, "/api/translate", {"text": "we like tea.", "prefix_tokens": [best[0], second]}).json()
    assert forced["translations"][0]["tokens"][:2] == [best[0], second]


def test_alternatives_are_the_most_probable_next_tokens_and_choosing_one_forces_it(client):
    body = {"text": "I see apples.", "prefix": "ती", "k": 4}
    alternatives = post(client, "/api/alternatives", body).json()["alternatives"]
    logprobs = [a["logprob"] for a in alternatives]
    assert len(alternatives) == 4 and logprobs == sorted(logprobs, reverse=True) and logprobs[0] <= 0
    chosen = alternatives[1]["token"]
    prefix = ("ती" + chosen.replace("\u2581", " ")).strip()
    forced = post(client, "/api/translate", {"text": "I see apples.", "prefix": prefix}).json()
    assert forced["translations"][0]["text"].startswith(prefix)


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"beam_size": 2}, 400, "text"),
        ({"text": "a", "texts": ["b"]}, 400, "text"),
        ({"text": 5}, 422, "text"),
        ({"text": "   "}, 422, "text"),
        ({"text": "a" * 201}, 413, "text"),
        ({"texts": []}, 422, "texts"),
        ({"texts": ["a", 3]}, 422, "texts[1]"),
        ({"texts": ["a"] * 5}, 413, "texts"),
        ({"text": "a", "beam_size": 0}, 422, "beam_size"),
        ({"text": "a", "beam_size": 9}, 422, "beam_size"),
        ({"text": "a", "beam_size": "5"}, 422, "beam_size"),
        ({"text": "a", "beam_size": True}, 422, "beam_size"),
        ({"text": "a", "beam_size": 2, "n_best": 3}, 422, "n_best"),
        ({"text": "a", "prefix": ["x"]}, 422, "prefix"),
        ({"text": "a", "prefix": "x", "prefix_tokens": ["x"]}, 400, "prefix"),
        ({"text": "a", "prefix_tokens": "x"}, 422, "prefix_tokens"),
        ({"text": "a", "prefix_tokens": ["no such piece"]}, 422, "prefix_tokens"),
        ({"text": "a", "model": "third"}, 404, "model"),
        ({"text": "a", "model": 1}, 422, "model"),
    ],
)
def test_bad_translate_requests_get_a_4xx_naming_the_field_and_the_server_keeps_answering(client, body, status, field):
    response = post(client, "/api/translate", body)
    assert response.status_code == status and response.json()["field"] == field and response.json()["error"]
    assert client.get("/api/health").status_code == 200


@pytest.mark.parametrize(
    ("content", "status", "field"),
    [(b"{not json", 400, "body"), (b"[1, 2]", 400, "body"), (b"\xff\xfe", 400, "body"), (b"x" * 5001, 413, "body")],
)
def test_malformed_or_oversized_bodies(client, content, status, field):
    response = client.post("/api/translate", content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == status and response.json()["field"] == field


def test_bad_alternatives_requests(client):
    assert post(client, "/api/alternatives", {"prefix": "ती"}).json()["field"] == "text"
    response = post(client, "/api/alternatives", {"text": "a", "k": 11})
    assert response.status_code == 422 and response.json()["field"] == "k"


def test_the_page_and_its_files_are_served_and_nothing_escapes_the_static_folder(client):
    page = client.get("/")
    assert page.status_code == 200 and '<script src="/static/app.js">' in page.text
    assert "http" not in page.text.replace("http-equiv", "")  # nothing fetched from elsewhere
    assert client.get("/static/app.js").status_code == 200
    for script in ("devanagari", "arabic", "tamil", "telugu", "thai", "khmer"):  # shaped without a system font
        font = client.get(f"/fonts/{script}.ttf")
        assert font.status_code == 200 and font.content[:4] == b"\x00\x01\x00\x00", script
        assert f'url("/fonts/{script}.ttf")' in client.get("/static/style.css").text
    assert client.get("/fonts/klingon.ttf").status_code == 404
    for path in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py", "/static/nope.js"):
        assert client.get(path).status_code == 404, path


def test_concurrent_requests_each_get_an_answer_for_their_own_text(client):
    """(Batched answers equal the answers alone: tests/test_classroom.py, on a trained model.)"""
    texts = ["I see apples.", "we like tea.", "she eats rice.", "they want milk."] * 4
    alone = {t: post(client, "/api/translate", {"text": t, "n_best": 2}).json() for t in set(texts)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda t: post(client, "/api/translate", {"text": t, "n_best": 2}).json(), texts))
    for text, answer in zip(texts, answers):
        assert answer["source_tokens"] == alone[text]["source_tokens"] and len(answer["translations"]) == 2


def test_the_server_stops_cleanly_on_ctrl_c(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = (
        "from pathlib import Path; from tests.helpers import random_translator; "
        "from nmt.serve.app import bind, build_app, run_server; "
        f"run_server(build_app({{'m': random_translator(Path({str(tmp_path)!r}))}}), bind('127.0.0.1', {port}))"
    )
    root = Path(__file__).resolve().parents[1]
    server = subprocess.Popen([sys.executable, "-c", code], cwd=root, stderr=subprocess.PIPE, text=True)
    try:

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_until(healthy, what="the server's health")
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=30)
    finally:
        server.kill()
    assert server.returncode == 0 and "Traceback" not in stderr, stderr


ENDPOINTS = ["/api/translate", "/api/alternatives", "/api/lab/tree", "/api/lab/playback", "/api/lab/edit"]
ENDPOINTS += ["/api/lab/saliency"]


def raw_json(client, path: str, body: str):
    return client.post(path, content=body.encode("ascii"), headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("path", ENDPOINTS)
def test_text_that_is_not_unicode_or_nothing_at_all_is_a_422_on_every_endpoint(client, path):
    """A lone surrogate (JSON's "\\ud800") was a 500 on /api/translate, /api/alternatives and the
    lab; a byte-order mark alone was 200 with an empty translation on one endpoint and 422 on
    another. The same rule now: 422 naming the field."""
    extra = ', "weights": [1.0]' if path.endswith("edit") else ""
    lone = raw_json(client, path, '{"text": "I see \\ud800 apples."' + extra + "}")
    assert lone.status_code == 422 and lone.json()["field"] == "text", lone.text
    assert "surrogate" in lone.json()["error"]
    for blank in ("\\ufeff", " \\u200b ", "\\ufeff\\u2060"):
        empty = raw_json(client, path, '{"text": "' + blank + '"' + extra + "}")
        assert empty.status_code == 422 and empty.json()["field"] == "text", (blank, empty.text)
        assert "is empty" in empty.json()["error"]
    assert post(client, "/api/translate", {"text": "I see apples."}).status_code == 200


def test_a_lone_surrogate_anywhere_in_a_body_is_named(client):
    batch = raw_json(client, "/api/translate", '{"texts": ["fine", "also \\udfff"]}')
    assert batch.status_code == 422 and batch.json()["field"] == "texts[1]"
    tokens = raw_json(client, "/api/lab/playback", '{"text": "hi", "tokens": ["\\ud83d"]}')
    assert tokens.status_code == 422 and tokens.json()["field"] == "tokens[0]"


def test_a_body_nested_deeper_than_the_json_parser_goes_is_a_400(tmp_path):
    """json.loads raises RecursionError (not ValueError) past the interpreter's recursion limit,
    which was a 500; 200,000 levels is past any limit a library in the process may have set."""
    with local_client(build_app({"m": random_translator(tmp_path)})) as client:
        deep = raw_json(client, "/api/translate", '{"texts": ' + "[" * 200_000 + "]" * 200_000 + "}")
    assert deep.status_code == 400 and deep.json()["field"] == "body"


def serve_process(package: Path, *args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "nmt", "serve", "--model", str(package), *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_serve_prints_the_address_it_bound_and_a_busy_port_is_an_error_only(tmp_path):
    """--port 0 printed http://127.0.0.1:0/ (uvicorn bound another); a busy port printed
    "Serving on ..." before the bind error."""
    from .test_security import nmt as run_nmt

    raw_package = tmp_path / "package"
    package_from_tiny_run(tmp_path, raw_package, run_nmt)
    server = serve_process(raw_package, "--port", "0", "--no-token")
    try:
        line = server.stderr.readline()
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        assert port > 0, line
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=30) as answer:
            assert answer.status == 200
        busy = subprocess.run(
            [sys.executable, "-m", "nmt", "serve", "--model", str(raw_package), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (
            busy.returncode == 1
            and "Serving" not in busy.stderr
            and f"Port {port} on 127.0.0.1 is in use" in busy.stderr
        )
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=30)


def package_from_tiny_run(tmp_path: Path, package: Path, nmt) -> None:
    import yaml

    from .helpers import synthetic_pairs, tiny_config, write_anki

    raw = tiny_config(tmp_path, write_anki(tmp_path / "pairs.txt", synthetic_pairs()), train={"epochs": 1})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    nmt("train", "--config", str(tmp_path / "c.yaml"))
    nmt("export", raw["run_dir"], str(package))


def docs_curls(page: Path) -> list[str]:
    """The curl commands of a page's bash blocks, continuation lines joined."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands += [line.split("  #")[0].strip() for line in joined.splitlines() if line.startswith("curl ")]
    return commands


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl on this machine")
def test_every_curl_in_the_docs_works_against_a_default_server(tmp_path):
    """The API and lab pages' curls, run as written against `nmt serve` with its token (before,
    the first examples had none and got 401). The edit example's weights are the eng-mar model's
    six source subwords: they are resized to this tiny model's count of the same sentence."""
    from .test_security import nmt as run_nmt

    package = tmp_path / "eng-mar-cpu"  # the model name the examples use
    package_from_tiny_run(tmp_path, package, run_nmt)
    server = serve_process(package, "--port", "0", "--token", "s3cret")
    try:
        port = int(server.stderr.readline().split("http://127.0.0.1:")[1].split("/")[0])
        root = Path(__file__).resolve().parents[1]
        commands = docs_curls(root / "docs" / "reference" / "api.md") + docs_curls(root / "docs" / "lab.md")
        assert len(commands) >= 10
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=30):
            pass
        for command in commands:
            command = command.replace("localhost:8000", f"127.0.0.1:{port}")
            if "/api/lab/edit" in command:
                probe = subprocess.run(
                    ["curl", "-s", f"127.0.0.1:{port}/api/lab/saliency", "-H", "Authorization: Bearer s3cret", "-H",
                     "Content-Type: application/json", "-d", '{"text": "Where is the station?"}'],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                count = len(json.loads(probe.stdout)["saliency"])  # one weight per source subword
                command = command.replace("[0, 0, 0, 1, 0, 0]", json.dumps([0] * (count - 1) + [1]))
            done = subprocess.run(
                ["bash", "-c", command], capture_output=True, text=True, env={**os.environ, "TOKEN": "s3cret"}
            )
            answer = json.loads(done.stdout)
            assert done.returncode == 0 and "error" not in answer, (command, done.stdout[:300])
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=30)
