#!/usr/bin/env python
"""A bounded load test of `nmt serve`: N concurrent clients x M requests each to a server on a
loopback port, then the server is stopped. Prints requests/s, p50/p95/max latency and errors.

    python scripts/load_serve.py --config configs/eng-mar-cpu.yaml --clients 4 --requests 50
    python scripts/load_serve.py --model runs/eng-mar-cpu/package --beam-size 1

Each request is POST /api/translate with one sentence of the eng-mar sample (n-best 1, the
attention included, as the page asks for it). Run it alone on the machine: it times the CPU.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

SENTENCES = Path("data/eng-mar/sample.en")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(args, port: int) -> subprocess.Popen:
    source = ["--model", args.model] if args.model else ["--config", args.config]
    command = [sys.executable, "-m", "nmt", "serve", *source, "--port", str(port), "--device", "cpu"]
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
        request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                json.loads(response.read())
            latencies.append(time.perf_counter() - start)
        except (urllib.error.URLError, OSError, ValueError) as error:
            errors.append(str(error))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/eng-mar-cpu.yaml", help="a trained run's config")
    parser.add_argument("--model", help="a model package folder (instead of --config)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--requests", type=int, default=50, help="requests per client")
    parser.add_argument("--beam-size", type=int, default=5)
    args = parser.parse_args(argv)
    sentences = [s for s in SENTENCES.read_text(encoding="utf-8").splitlines() if s.strip()]
    port = free_port()
    server = start_server(args, port)
    url = f"http://127.0.0.1:{port}/api/translate"
    try:
        work = [
            [
                json.dumps(
                    {"text": sentences[(c * args.requests + r) % len(sentences)], "beam_size": args.beam_size}
                ).encode()
                for r in range(args.requests)
            ]
            for c in range(args.clients)
        ]
        latencies: list[float] = []
        errors: list[str] = []
        threads = [threading.Thread(target=client, args=(url, bodies, latencies, errors)) for bodies in work]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
    finally:
        server.terminate()
        server.wait(timeout=30)
    latencies.sort()
    p50 = statistics.median(latencies) * 1000 if latencies else float("nan")
    p95 = latencies[int(0.95 * (len(latencies) - 1))] * 1000 if latencies else float("nan")
    print(f"{args.clients} clients x {args.requests} requests, beam {args.beam_size}: {len(latencies)} answered, "
          f"{len(errors)} errors in {elapsed:.1f} s")  # fmt: skip
    print(f"requests/s {len(latencies) / elapsed:.1f}   latency p50 {p50:.0f} ms   p95 {p95:.0f} ms   "
          f"max {latencies[-1] * 1000 if latencies else float('nan'):.0f} ms")  # fmt: skip
    for error in errors[:5]:
        print("error:", error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
