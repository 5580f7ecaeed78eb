"""Benchmark: the embedded SmolLM2 server's thread count, idle and beside busy processes.

The embedded server (`twinflow.models._embedded.server_command`) computes with one thread
(`EMBEDDED_THREADS`, ADR 0034). This prints, for one and for two threads, the seconds four
invoice-sized requests take (a 300-token prompt, 64 tokens out), first on the machine as it is,
then beside as many spinning processes as the machine has cores (what CI's busy run adds). The
figure that holds the decision is the ratio two threads / one thread under load: above 1 means
one thread is the steadier choice.

Run: .venv/bin/python benchmarks/embedded_threads.py [--rounds N] [--requests N]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from _bench import add_smoke  # this folder: sys.path[0]

from twinflow.kernel._netpolicy import free_port
from twinflow.models._embedded import embedded_model_file, server_command

PROMPT = "Extract the invoice below as JSON with vendor, currency and total.\n" + (
    "Invoice line: widget, 12.50 EUR\n" * 30
)


def _spin() -> None:
    while True:
        pass


@contextmanager
def busy(processes: int) -> Iterator[None]:
    """`processes` CPU-bound processes running for the duration of the block."""
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
    for hog in hogs:
        hog.start()
    try:
        yield
    finally:
        for hog in hogs:
            hog.terminate()
            hog.join()


def timed(threads: int, requests: int) -> float:
    """Seconds for `requests` chat completions from a fresh server computing with `threads`."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = server_command(embedded_model_file(), port, threads=threads)
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as server:
        try:
            while True:
                try:
                    urllib.request.urlopen(f"{base}/v1/models", timeout=5).read()
                    break
                except OSError:
                    if server.poll() is not None:
                        raise SystemExit(f"the server exited with {server.returncode}") from None
                    time.sleep(0.2)
            start = time.perf_counter()
            for i in range(requests):
                body = {
                    "messages": [{"role": "user", "content": f"{PROMPT}{i}"}],
                    "max_tokens": 64,
                    "temperature": 0,
                    "seed": 0,
                }
                request = urllib.request.Request(
                    f"{base}/v1/chat/completions",
                    json.dumps(body).encode(),
                    {"Content-Type": "application/json"},
                )
                urllib.request.urlopen(request, timeout=1800).read()
            return time.perf_counter() - start
        finally:
            server.terminate()


def main() -> None:
    """Print seconds per thread count, idle and busy, and the two-thread / one-thread ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=4)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.requests = 1, 1
    cores = os.cpu_count() or 2
    halves = (("as is", 0), (f"beside {cores} busy processes", cores))
    for label, hogs in halves[:1] if args.smoke else halves:
        seconds: dict[int, list[float]] = {1: [], 2: []}
        with busy(hogs):
            for _ in range(args.rounds):
                # Interleaved, so drift in the load hits both. A smoke run starts one server:
                # two threads on a loaded machine take minutes, which is what this measures.
                for threads in (1,) if args.smoke else (1, 2):
                    seconds[threads].append(timed(threads, args.requests))
        if args.smoke:
            print(f"{label}: 1 thread {seconds[1][0]:.1f} s (smoke: two threads not run)")
            continue
        one, two = statistics.median(seconds[1]), statistics.median(seconds[2])
        print(f"{label}: 1 thread {one:.1f} s, 2 threads {two:.1f} s, ratio 2/1 {two / one:.2f}")
        print(f"  rounds: 1 thread {seconds[1]}, 2 threads {seconds[2]}")


if __name__ == "__main__":
    main()
