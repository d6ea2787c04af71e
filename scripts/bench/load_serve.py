#!/usr/bin/env python
"""A bounded load test of `nmt serve`: N concurrent clients x M requests each to a server on a
loopback port, then the server is stopped. Prints requests/s, p50/p95/max latency and errors.

    python scripts/bench/load_serve.py --config configs/eng-mar-cpu.yaml --clients 4 --requests 50
    python scripts/bench/load_serve.py --model runs/eng-mar-cpu/package --beam-size 1
    python scripts/bench/load_serve.py --scenario classroom
    python scripts/bench/load_serve.py --scenario lab-flood --config configs/eng-mar-transformer.yaml

Each request is POST /api/translate with one sentence of the eng-mar sample (n-best 1, the
attention included, as the page asks for it). Run it alone on the machine: it times the CPU.

The classroom scenario, in one run against one server: one client alone, then 30 at once
(throughput, p50/p95), then a short request sent while two requests within the default
limits (64 texts of 204 characters at beam 3) are being decoded, then while two heavy ones
(64 texts of 1,000 characters at beam 16, admitted with --max-work) are: its latency, and
whether the heavy ones' work is cancelled when their clients hang up.
"""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

SENTENCES = Path("data/eng-mar/sample.en")
TOKEN = secrets.token_urlsafe(12)  # the server's token (it has one by default): every request carries it
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(args, port: int, *extra: str) -> subprocess.Popen:
    source = ["--model", args.model] if args.model else ["--config", args.config]
    command = [sys.executable, "-m", "nmt", "serve", *source, "--port", str(port), "--device", "cpu", "--token", TOKEN]
    command += extra
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"the server exited: {server.stderr.read()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1) as response:
                if response.status == 200:
                    return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    sys.exit("the server did not answer within 120 s")


def client(url: str, bodies: list[bytes], latencies: list[float], errors: list[str]) -> None:
    for body in bodies:
        request = urllib.request.Request(url, body, HEADERS)
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                json.loads(response.read())
            latencies.append(time.perf_counter() - start)
        except (urllib.error.URLError, OSError, ValueError) as error:
            errors.append(str(error))


def run_clients(url: str, bodies_per_client: list[list[bytes]]) -> tuple[float, list[float], list[str]]:
    """(seconds, sorted latencies, errors) of the clients sending their bodies concurrently."""
    latencies: list[float] = []
    errors: list[str] = []
    threads = [threading.Thread(target=client, args=(url, bodies, latencies, errors)) for bodies in bodies_per_client]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, sorted(latencies), errors


def page_bodies(sentences: list[str], clients: int, requests: int, beam: int) -> list[list[bytes]]:
    """What the page sends: one sentence, the attention asked for."""
    return [
        [
            json.dumps(
                {"text": sentences[(c * requests + r) % len(sentences)], "beam_size": beam, "attention": True}
            ).encode()
            for r in range(requests)
        ]
        for c in range(clients)
    ]


def percentile(latencies: list[float], share: float) -> float:
    return latencies[int(share * (len(latencies) - 1))] * 1000 if latencies else float("nan")


def raw_post(port: int, body: bytes, path: str = "/api/translate") -> socket.socket:
    """A request on a socket of its own, so that the client can hang up before the answer."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=600)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}"
    sock.sendall(head.encode() + b"\r\n\r\n" + body)
    return sock


def health(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=10) as response:
        return json.loads(response.read())


def settle(port: int, seconds: float = 60) -> None:
    """Wait until no text is queued or being decoded."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(q["queued_texts"] for q in health(port)["queues"].values()):
        time.sleep(0.05)


def classroom(args, sentences: list[str]) -> int:
    heavy_texts = []
    for i in range(64):  # 1,000 characters each, from the sample's sentences
        text = ""
        while len(text) < 1000:
            text += sentences[(i * 7 + len(text)) % len(sentences)] + " "
        heavy_texts.append(text[:1000])
    heavy = json.dumps({"texts": heavy_texts, "beam_size": 16}).encode()
    port = free_port()
    server = start_server(args, port, "--max-work", "1100000")
    url = f"http://127.0.0.1:{port}/api/translate"
    try:
        run_clients(url, page_bodies(sentences, 4, 5, args.beam_size))  # warm up
        alone = run_clients(url, page_bodies(sentences, 1, 60, args.beam_size))
        crowd = run_clients(url, page_bodies(sentences, 30, args.requests, args.beam_size))
        short = json.dumps({"text": "Hello.", "attention": True}).encode()
        flood = [raw_post(port, json.dumps({"texts": [t[:204] for t in heavy_texts], "beam_size": 3}).encode())]
        flood += [raw_post(port, json.dumps({"texts": [t[:204] for t in heavy_texts], "beam_size": 3}).encode())]
        time.sleep(1.0)  # within the default limits: 64 texts of 204 characters at beam 3, twice
        start = time.perf_counter()
        client(url, [short], [], [])
        flood_seconds = time.perf_counter() - start
        for sock in flood:
            sock.close()
        settle(port)  # the flood cancelled (or done) before the heavy ones come
        cancelled_before = sum(q["cancelled"] for q in health(port)["queues"].values())
        heavies = [raw_post(port, heavy) for _ in range(2)]
        time.sleep(1.0)  # both are being decoded
        start = time.perf_counter()
        client(url, [short], [], [])
        short_seconds = time.perf_counter() - start
        waiting = health(port)["queues"]
        for sock in heavies:  # the clients give up
            sock.close()
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and sum(q["cancelled"] for q in health(port)["queues"].values()) < cancelled_before + 2
        ):
            time.sleep(0.1)
        after = health(port)["queues"]
    finally:
        server.terminate()
        server.wait(timeout=30)
    rates = {}
    for name, (seconds, latencies, errors) in (("1 client", alone), ("30 clients", crowd)):
        rates[name] = len(latencies) / seconds
        print(
            f"{name:10s}: {len(latencies)} answered, {len(errors)} errors in {seconds:.1f} s: "
            f"{rates[name]:.1f} requests/s, p50 {percentile(latencies, 0.5):.0f} ms, "
            f"p95 {percentile(latencies, 0.95):.0f} ms"
        )
    print(f"30 clients / 1 client throughput: {rates['30 clients'] / rates['1 client']:.1f}x")
    model = next(iter(after))
    print(f"a short request behind two of 64 x 204 characters at beam 3: {flood_seconds * 1000:.0f} ms")
    print(
        f"a short request behind two heavy ones (64 x 1,000 characters, beam 16): {short_seconds * 1000:.0f} ms "
        f"(queued texts then: {waiting[model]['queued_texts']}); heavy clients hung up: "
        f"{after[model]['cancelled'] - cancelled_before} cancelled, queue {after[model]['queued_texts']} texts"
    )
    return 1 if alone[2] or crowd[2] else 0


def answer_of(sock: socket.socket) -> tuple[int, int]:
    """(status, body bytes) of the answer on ``sock``, read to its end."""
    data = b""
    while chunk := sock.recv(1 << 20):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), len(body)


def lab_flood(args, sentences: list[str]) -> int:
    """Eight of the biggest lab requests the limits allow at once (heads of a 1,000-character text
    with 1,000 tokens; trees at beam 16; playbacks of 1,000 tokens), then a one-word translation
    and health while they run or are refused: their latency, and what each flood request got."""
    text = ""
    while len(text) < 1000:
        text += sentences[len(text) % len(sentences)] + " "
    text = text[:1000]
    tokens = ["▁"] * 1000
    bodies = [("/api/lab/heads", {"text": text, "tokens": tokens}), ("/api/lab/tree", {"text": text, "beam_size": 16})]
    bodies += [("/api/lab/playback", {"text": text, "tokens": tokens}), ("/api/lab/heads", {"text": text})]
    port = free_port()
    server = start_server(args, port)
    url = f"http://127.0.0.1:{port}/api/translate"
    try:
        run_clients(url, page_bodies(sentences, 2, 3, args.beam_size))  # warm up
        flood = [raw_post(port, json.dumps(body).encode(), path) for path, body in bodies * 2]
        time.sleep(0.5)
        start = time.perf_counter()
        health(port)
        health_seconds = time.perf_counter() - start
        start = time.perf_counter()
        client(url, [json.dumps({"text": "Hello."}).encode()], [], [])
        short_seconds = time.perf_counter() - start
        answers = [answer_of(sock) for sock in flood]
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"health during the flood: {health_seconds * 1000:.0f} ms")
    print(f"a one-word translation during the flood: {short_seconds * 1000:.0f} ms")
    for (path, body), (status, size) in zip(bodies * 2, answers):
        what = "text + 1,000 tokens" if "tokens" in body else f"text, beam {body.get('beam_size', '-')}"
        print(f"  {path} ({what}): {status}, {size:,} bytes")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/eng-mar-cpu.yaml", help="a trained run's config")
    parser.add_argument("--model", help="a model package folder (instead of --config)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--requests", type=int, default=50, help="requests per client (classroom: 10)")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--scenario", choices=["clients", "classroom", "lab-flood"], default="clients")
    args = parser.parse_args(argv)
    sentences = [s for s in SENTENCES.read_text(encoding="utf-8").splitlines() if s.strip()]
    if args.scenario == "lab-flood":
        return lab_flood(args, sentences)
    if args.scenario == "classroom":
        args.requests = 10 if args.requests == 50 else args.requests
        return classroom(args, sentences)
    port = free_port()
    server = start_server(args, port)
    url = f"http://127.0.0.1:{port}/api/translate"
    try:
        bodies = page_bodies(sentences, args.clients, args.requests, args.beam_size)
        elapsed, latencies, errors = run_clients(url, bodies)
    finally:
        server.terminate()
        server.wait(timeout=30)
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    print(
        f"{args.clients} clients x {args.requests} requests, beam {args.beam_size}: {len(latencies)} answered, "
        f"{len(errors)} errors in {elapsed:.1f} s"
    )
    print(
        f"requests/s {len(latencies) / elapsed:.1f}   latency p50 {p50:.0f} ms   p95 {p95:.0f} ms   "
        f"max {latencies[-1] * 1000 if latencies else float('nan'):.0f} ms"
    )
    for error in errors[:5]:
        print("error:", error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
