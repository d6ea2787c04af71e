"""A class on one server: concurrent requests batched into one search (with the answers each
would get alone), fair turns for big requests, a bounded queue (503 + Retry-After), a work
budget (413), cancelled work of clients that went away, attention only when asked, a shared
token, and /api/health answering under load."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

import pytest

from nmt.serve.app import build_app
from nmt.serve.requests import Limits
from nmt.serve.scheduler import QueueFull, Scheduler, slices_of

from .helpers import copy_translator, local_client, random_translator, wait_until

TEXTS = ["I see apples.", "we like tea.", "she eats rice.", "they want milk and books.", "you see water."]


class FakeModel:
    """A decode function that records each search and can be held at its start."""

    def __init__(self):
        self.searches: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, texts, settings):
        self.gate.wait(10)
        self.searches.append(list(texts))
        return [f"{text}|{settings}" for text in texts]


def test_slices_bound_their_work_and_keep_at_least_one_text():
    assert list(slices_of([5, 5, 5, 20, 1], 10)) == [[0, 1], [2], [3], [4]]
    assert list(slices_of([3], 1)) == [[0]]


def test_requests_waiting_together_are_decoded_in_one_search_and_split_back():
    model = FakeModel()
    scheduler = Scheduler(model)
    model.gate.clear()
    first = scheduler.submit(["a"], "s", [1])  # the worker takes it and waits at the gate
    wait_until(lambda: scheduler.queued() == 0)
    tickets = [scheduler.submit([f"x{i}", f"y{i}"], "s", [1, 1]) for i in range(3)]
    other = scheduler.submit(["z"], "other settings", [1])
    model.gate.set()
    assert first.future.result(5) == ["a|s"]
    for i, ticket in enumerate(tickets):
        assert ticket.future.result(5) == [f"x{i}|s", f"y{i}|s"]
    assert other.future.result(5) == ["z|other settings"]
    assert model.searches == [["a"], ["x0", "y0", "x1", "y1", "x2", "y2"], ["z"]]  # one search for the three


def test_a_big_request_takes_turns_so_a_short_one_waits_for_one_slice_only():
    model = FakeModel()
    scheduler = Scheduler(model, slice_work=10, batch_work=10)
    model.gate.clear()
    big = scheduler.submit([f"big{i}" for i in range(6)], "s", [10] * 6)  # six slices of one text
    wait_until(lambda: big.queued == 5)  # the first slice is running
    short = scheduler.submit(["short"], "s", [1])
    model.gate.set()
    assert short.future.result(5) == ["short|s"]
    assert big.future.result(5) == [f"big{i}|s" for i in range(6)]
    assert model.searches[:2] == [["big0"], ["short"]]  # right after the slice that was running


class TimedModel:
    """A decode function that takes ``per_text`` seconds a text, like a model whose every text
    is as long to decode: seconds of its own clock (the scheduler's), never the machine's."""

    def __init__(self, per_text: float):
        self.per_text = per_text
        self.searches: list[list[str]] = []
        self.now = 0.0
        self.entered = 0  # searches begun
        self.permits = threading.Semaphore(0)  # each search waits for one: the test steps the worker

    def clock(self) -> float:
        return self.now

    def __call__(self, texts, settings):
        self.entered += 1
        self.permits.acquire(timeout=10)
        self.now += self.per_text * len(texts)
        self.searches.append(list(texts))
        return list(texts)


def test_batches_are_sized_in_seconds_so_a_short_request_never_waits_behind_a_big_one():
    """The first batch is one text, which measures the model; after it every batch is about
    ``batch_seconds`` of decoding, so a short request that comes while a big one is decoded
    waits for one short batch, never for the big request's work (issue 63's flood: 31 s)."""
    model = TimedModel(per_text=0.02)
    scheduler = Scheduler(model, batch_seconds=0.1, clock=model.clock)  # 0.1 s a batch: 5 texts of this model
    big = scheduler.submit([f"big{i}" for i in range(100)], "s", [100] * 100)  # 2 s of decoding in all
    model.permits.release(2)  # two searches, then the third waits at its start
    wait_until(lambda: model.entered == 3)
    searched_before = len(model.searches)  # searches ended before the short request came
    short = scheduler.submit(["short"], "s", [100])
    model.permits.release(1000)
    assert short.future.result(30) == ["short"]
    assert big.future.result(30) == [f"big{i}" for i in range(100)]
    sizes = [len(search) for search in model.searches]
    assert sizes[0] == 1 and max(sizes) <= 6, sizes  # whatever the request's size
    # Counted in searches, not seconds (a loaded machine stretches seconds): the one running when it
    # came (or one that ended as it was submitted), then its own. Before: behind all the big work.
    its_search = next(i for i, search in enumerate(model.searches) if "short" in search)
    assert its_search - searched_before == 1, sizes  # the batch running when it came, then its own


def test_a_full_queue_refuses_with_a_retry_estimate():
    model = FakeModel()
    scheduler = Scheduler(model, max_queued=3)
    model.gate.clear()
    running = scheduler.submit(["a"], "s", [1])
    wait_until(lambda: scheduler.queued() == 0)
    waiting = scheduler.submit(["b", "c", "d"], "s", [1, 1, 1])
    with pytest.raises(QueueFull) as full:
        scheduler.submit(["e"], "s", [1])
    assert full.value.queued == 3 and full.value.retry_after >= 1
    model.gate.set()
    assert running.future.result(5) and waiting.future.result(5)
    assert scheduler.status()["refused"] == 1


def test_a_cancelled_request_leaves_the_queue_and_is_never_decoded():
    model = FakeModel()
    scheduler = Scheduler(model, slice_work=1)
    model.gate.clear()
    running = scheduler.submit(["a", "b", "c"], "s", [1, 1, 1])  # three slices; the first is running
    wait_until(lambda: scheduler.queued() == 2)
    gone = scheduler.submit(["never"], "s", [1])
    scheduler.cancel(running)  # its other two slices go too
    scheduler.cancel(gone)
    assert scheduler.status() == {**scheduler.status(), "queued_texts": 0, "waiting_requests": 0, "cancelled": 2}
    model.gate.set()
    after = scheduler.submit(["after"], "s", [1])  # in turn order, anything left would come before it
    assert after.future.result(10) == ["after|s"]
    assert model.searches == [["a"], ["after"]] and running.future.cancelled() and gone.future.cancelled()


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    return random_translator(tmp_path_factory.mktemp("class"), beam_size=3)


@pytest.fixture(scope="module")
def copier(tmp_path_factory):
    """A trained model (it copies NATO words): confident, so its answers do not hang on the
    last bits that batched matrix products round differently."""
    return copy_translator(tmp_path_factory.mktemp("copier"))


COPY_TEXTS = ["alpha bravo charlie", "delta echo", "foxtrot golf hotel alpha bravo", "echo echo delta", "hotel"]


def same_answer(answer: dict, explanation) -> None:
    """The same translations (text, subwords) as decoding alone; the numbers equal up to float
    rounding (a batch's matrix products add in another order)."""
    translations = [asdict(t) for t in explanation.translations]
    words = [(t["text"], t["tokens"]) for t in translations]
    assert [(t["text"], t["tokens"]) for t in answer["translations"]] == words
    for got, alone in zip(answer["translations"], translations):
        assert got["score"] == pytest.approx(alone["score"], abs=1e-5)
        assert got["token_logprobs"] == pytest.approx(alone["token_logprobs"], abs=1e-5)
    assert answer["source_tokens"] == explanation.source_tokens
    if "attention" in answer:
        for row, alone_row in zip(answer["attention"], explanation.attention, strict=True):
            assert row == pytest.approx(alone_row, abs=1e-5)


def held_batch(app_client, model, bodies):
    """Send ``bodies`` concurrently while the model is busy, so they all wait and are decoded
    together in the next search; returns their answers and the model's scheduler counts."""
    scheduler = model.scheduler
    scheduler.batch_seconds = 60.0  # batched by settings only, however fast this machine measures the model
    before = scheduler.counts["batches"]
    with ThreadPoolExecutor(max_workers=len(bodies) + 1) as pool:
        with model.lock:  # the worker blocks on its first search
            first = pool.submit(app_client.post, "/api/translate", json={"text": "hello."})
            wait_until(lambda: bool(scheduler.running) and not first.done())  # its batch formed, at the lock
            answers = [pool.submit(app_client.post, "/api/translate", json=body) for body in bodies]
            wait_until(lambda: scheduler.status()["waiting_requests"] == len(bodies))
        answers = [answer.result(30) for answer in answers]
        first.result(30)
    return [answer.json() for answer in answers], scheduler.counts["batches"] - before


@pytest.mark.parametrize(
    "settings",
    [
        {"beam_size": 1},
        {"beam_size": 3, "n_best": 2},
        {"beam_size": 3, "prefix": "echo", "attention": True},
    ],
    ids=["greedy", "beam-n-best", "prefix-attention"],
)
def test_batched_answers_equal_the_answers_alone(copier, settings):
    app = build_app({"m": copier})
    with local_client(app) as client:
        bodies = [{"text": text, **settings} for text in COPY_TEXTS] + [{"texts": COPY_TEXTS[:3], **settings}]
        batched, searches = held_batch(client, served_model(app), bodies)
    assert searches == 2  # the held first request, then one search for all the rest
    attention = settings.get("attention", False)
    for body, answer in zip(bodies, batched):
        texts = [body["text"]] if "text" in body else body["texts"]
        results = answer["results"] if "texts" in body else [answer]
        assert len(results) == len(texts) and all(("attention" in r) == attention for r in results)
        for text, result in zip(texts, results):
            beam, n_best, prefix = settings["beam_size"], settings.get("n_best", 1), settings.get("prefix", "")
            same_answer(result, copier.explain([text], beam, n_best, prefix, with_attention=attention)[0])


def served_model(app):
    """The app's one ServedModel (its scheduler and lock)."""
    return app.state.served["m"]


def test_a_full_queue_answers_503_with_retry_after_and_health_answers_meanwhile(translator):
    app = build_app({"m": translator}, Limits(max_queued=2))
    served = served_model(app)
    with local_client(app) as client, ThreadPoolExecutor(max_workers=3) as pool, served.lock:
        running = pool.submit(client.post, "/api/translate", json={"text": "hello."})
        wait_until(lambda: bool(served.scheduler.running) and not running.done())  # its batch formed, at the lock
        waiting = pool.submit(client.post, "/api/translate", json={"texts": TEXTS[:2]})
        wait_until(lambda: served.scheduler.queued() == 2)
        refused = client.post("/api/translate", json={"text": "one more."})
        assert refused.status_code == 503 and refused.json()["field"] == "model"
        assert int(refused.headers["Retry-After"]) >= 1 and "busy" in refused.json()["error"]
        # The event loop is free while the model works: health answers though the lock stays held
        # (were the loop blocked, it would answer only after the release below, and time out here).
        health = pool.submit(client.get, "/api/health").result(60).json()
        assert health["queues"]["m"]["queued_texts"] == 2 and health["queues"]["m"]["refused"] == 1
        served.lock.release()
        try:
            assert running.result(30).status_code == 200 and waiting.result(30).status_code == 200
        finally:
            served.lock.acquire()


def test_a_request_over_the_work_budget_gets_413_naming_the_limit(translator):
    with local_client(build_app({"m": translator}, Limits(max_work=1000))) as client:
        answer = client.post("/api/translate", json={"texts": ["x" * 190] * 2, "beam_size": 3})
        assert answer.status_code == 413 and answer.json()["field"] == "texts"
        assert "1,200 units of work" in answer.json()["error"] and "the limit is 1,000" in answer.json()["error"]
        assert client.post("/api/translate", json={"texts": ["x" * 190] * 2, "beam_size": 2}).status_code == 200


def test_attention_only_when_asked_and_the_answer_is_smaller_for_it(translator):
    with local_client(build_app({"m": translator})) as client:
        plain = client.post("/api/translate", json={"text": TEXTS[3]})
        asked = client.post("/api/translate", json={"text": TEXTS[3], "attention": True})
        assert "attention" not in plain.json() and len(asked.json()["attention"]) > 0
        assert plain.json()["translations"] == asked.json()["translations"]
        assert len(plain.content) < len(asked.content)
        wrong = client.post("/api/translate", json={"text": "x", "attention": "yes"})
        assert wrong.status_code == 422 and wrong.json()["field"] == "attention"


def test_a_shared_token_guards_the_api_but_not_health(translator):
    with local_client(build_app({"m": translator}, token="s3cret")) as client:
        refused = client.post("/api/translate", json={"text": "hello."})
        assert refused.status_code == 401 and refused.json()["field"] == "token"
        assert client.get("/api/models").status_code == 401
        wrong = client.post("/api/translate", json={"text": "hello."}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        good = client.post("/api/translate", json={"text": "hello."}, headers={"Authorization": "Bearer s3cret"})
        assert good.status_code == 200 and good.json()["translations"]
        assert client.get("/api/health").status_code == 200 and client.get("/").status_code == 200


def test_a_client_that_disconnects_has_its_queued_work_cancelled(translator):
    """Over a real socket: while the model is busy, a client sends a request and hangs up."""
    import uvicorn

    app = build_app({"m": translator})
    served = served_model(app)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started)
    try:
        with served.lock:
            running = raw_post(port, {"text": "hello."})
            wait_until(lambda: bool(served.scheduler.running))  # its batch formed, waiting for the lock
            leaving = raw_post(port, {"texts": TEXTS})
            wait_until(lambda: served.scheduler.queued() == len(TEXTS))
            leaving.close()
            wait_until(lambda: served.scheduler.status()["cancelled"] == 1)
            assert served.scheduler.queued() == 0 and not served.scheduler.turn
        running.settimeout(30)
        assert b"200 OK" in running.recv(65536)
        running.close()
        # counted before its answer was released, so nothing is left to wait for
        assert served.scheduler.counts["texts"] == 1  # only the first request was ever decoded
    finally:
        server.should_exit = True
        thread.join(10)


def raw_post(port: int, body: dict) -> socket.socket:
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = "POST /api/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    sock.sendall(head.encode() + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def test_listening_beyond_loopback_warns_who_can_reach_the_page(capsys):
    from nmt.cli.serving import _warn_if_reachable

    _warn_if_reachable("127.0.0.1", "")
    assert capsys.readouterr().err == ""
    _warn_if_reachable("0.0.0.0", "")
    assert "anyone who can reach this machine" in capsys.readouterr().err
    _warn_if_reachable("0.0.0.0", "secret")
    warned = capsys.readouterr().err
    assert "with the token" in warned and "secret" not in warned


def test_a_request_past_its_time_is_dropped_with_503_naming_the_limit(translator):
    """--max-request-seconds bounds a request's time, its wait included: past it, its work leaves
    the queue and the client hears why (before, the work limit bounded tokens, not time)."""
    app = build_app({"m": translator}, Limits(max_seconds=0.5))
    served = served_model(app)
    with local_client(app) as client, served.lock:  # the model is busy for longer than the limit
        started = time.monotonic()
        answer = client.post("/api/translate", json={"texts": TEXTS})
        waited = time.monotonic() - started
    assert answer.status_code == 503 and answer.json()["field"] == "texts"
    assert "longer than 0.5 s" in answer.json()["error"] and "--max-request-seconds" in answer.json()["error"]
    assert waited >= 0.5  # answered while the lock is still held: the limit, not the model, ended it
    wait_until(lambda: served.scheduler.status()["cancelled"] == 1 and served.scheduler.queued() == 0)
    with local_client(app) as client:
        assert client.post("/api/translate", json={"text": "hello."}).status_code == 200  # and it goes on


def test_a_translation_waits_for_the_lab_view_running_not_for_every_one_queued():
    """With 48 lab views queued, a one-word translation waited for all of them (5.5 s, growing with
    the queue); security.md promises the batch running when it came."""
    from nmt.serve.scheduler import SoloWork

    model = FakeModel()  # records each batch's texts: a view's is "view N"
    scheduler = Scheduler(model)
    model.gate.clear()
    views = [scheduler.submit(["view 0"], SoloWork(lambda: None), [1], solo=True)]
    wait_until(lambda: scheduler.queued() == 0)  # the first view runs, held at the gate
    views += [scheduler.submit([f"view {i}"], SoloWork(lambda: None), [1], solo=True) for i in range(1, 49)]
    translation = scheduler.submit(["one word"], "s", [1])
    model.gate.set()
    assert translation.future.result(10) == ["one word|s"]
    for ticket in views:
        ticket.future.result(10)
    assert model.searches[:3] == [["view 0"], ["one word"], ["view 1"]]  # then the views, in their order
    assert model.searches[2:] == [[f"view {i}"] for i in range(1, 49)]
