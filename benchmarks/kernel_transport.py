"""Benchmark: twinflow.kernel's transport and import cost, against named peers in the same run.

1. `HttpTransport.post_json` round trip to a loopback JSON echo server, against the
   `httpx2` sync client (or `httpx` when httpx2 is not installed) posting the same body to the
   same server. Both keep their connection alive between requests (the kernel's transport keeps
   one idle connection per origin, docs/adr/0011); the peer with `Connection: close` is printed
   too, as the cost of one connection per call. Target: ratio <= 1 (no slower).
2. `python -c "import twinflow.kernel"` against `python -c "pass"` (best of N fresh interpreters).

Run: .venv/bin/python benchmarks/kernel_transport.py [--requests N]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from _bench import add_smoke  # this folder: sys.path[0]

from twinflow.kernel import HttpTransport, LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse

BODY = {
    "model": "smollm2",
    "messages": [{"role": "user", "content": "Say hello in five words. " * 4}],
    "temperature": 0.0,
}


def echo(request: LoopbackRequest) -> LoopbackResponse:
    """Answer like a small chat completion."""
    return LoopbackResponse.json_body(
        {
            "choices": [{"message": {"role": "assistant", "content": "hello " * 5}}],
            "n": len(request.body),
        }
    )


def interleaved(
    functions: dict[str, Callable[[], Any]], requests: int, rounds: int
) -> dict[str, float]:
    """Median over `rounds` of the mean seconds per call, the functions taking turns each round.

    Taking turns spreads the noise of a busy machine over every contender alike.
    """
    for function in functions.values():
        for _ in range(20):
            function()
    samples: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            start = time.perf_counter()
            for _ in range(requests):
                function()
            samples[name].append((time.perf_counter() - start) / requests)
    return {name: statistics.median(values) for name, values in samples.items()}


def peer_client() -> tuple[str, Any]:
    """The httpx2 sync client if installed, else httpx's."""
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return f"{name} {getattr(module, '__version__', '?')}", module.Client(trust_env=False)
    raise SystemExit("neither httpx2 nor httpx is installed")


def bench_transport(requests: int, rounds: int) -> None:
    """Round-trip time, ours vs the peer's, against one loopback server."""
    name, client = peer_client()
    peer = name.split()[0]
    transport = HttpTransport()
    close = {"Connection": "close"}
    with LoopbackServer(echo) as server, client:
        url = server.url_for("/v1/chat/completions")
        assert transport.post_json(url, BODY, timeout=5) == client.post(url, json=BODY).json()
        times = interleaved(
            {
                "twinflow": lambda: transport.post_json(url, BODY, timeout=5),
                "peer": lambda: client.post(url, json=BODY, timeout=5).json(),
                "peer-close": lambda: client.post(url, json=BODY, headers=close, timeout=5).json(),
            },
            requests,
            rounds,
        )
    ours, theirs, theirs_close = times["twinflow"], times["peer"], times["peer-close"]
    print(
        f"post_json round trip: twinflow {ours * 1e6:.0f} us, {name} {theirs * 1e6:.0f} us "
        f"(keep-alive), {theirs_close * 1e6:.0f} us (Connection: close)"
    )
    print(f"  ratio twinflow / {peer} = {ours / theirs:.2f}  (target <= 1.00)")
    print(f"  ratio twinflow / {peer} with Connection: close = {ours / theirs_close:.2f}")


def import_time(code: str, runs: int) -> float:
    """Best wall time of `python -c code` over `runs` fresh interpreters."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        best = min(best, time.perf_counter() - start)
    return best


def bench_import(runs: int) -> None:
    """`import twinflow.kernel` against an empty interpreter (and against pydantic, which it loads)."""
    empty = import_time("pass", runs)
    pydantic = import_time("import pydantic; pydantic.BaseModel", runs)
    kernel = import_time("import twinflow.kernel", runs)
    print(
        f"interpreter start: empty {empty * 1e3:.1f} ms, import pydantic {pydantic * 1e3:.1f} ms, "
        f"import twinflow.kernel {kernel * 1e3:.1f} ms"
    )
    print(f"  ratio import twinflow.kernel / empty interpreter = {kernel / empty:.2f}")
    print(f"  ratio import twinflow.kernel / import pydantic = {kernel / pydantic:.2f}")


def main() -> None:
    """Run both benchmarks and print the ratios."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=300, help="requests per timing round")
    parser.add_argument("--rounds", type=int, default=7, help="timing rounds (median reported)")
    parser.add_argument(
        "--imports", type=int, default=15, help="fresh interpreters per import timing"
    )
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.requests, args.rounds, args.imports = 5, 1, 1
    bench_transport(args.requests, args.rounds)
    bench_import(args.imports)


if __name__ == "__main__":
    main()
