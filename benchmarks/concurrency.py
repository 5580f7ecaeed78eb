"""Benchmark: many runs at once against one model server, twinflow and pydantic-ai in the same run.

A stub OpenAI-compatible server (the kernel's `LoopbackServer`, in a process of its own so its
CPU is not counted) answers every chat completion after ``--delay`` seconds with a native tool
call to ``add``, ``--tools`` times per run, then a final answer: ``--tools + 1`` requests a run.
Its listen backlog is the system's: with socketserver's 5, 128 connections opened at once had
their connects dropped and retried a second later, and the stub, not the client, set the pace.

Measured for each concurrency N (every run writes its own trace file, fsync per step, the
default), in this process:

- ``async``: N agents gathered with ``asyncio.gather(agent.run_async(...))``, one shared
  transport keeping N connections;
- ``threads``: the same agents' ``run`` through the kernel's `ThreadExecutor` at N;
- ``eval run``: ``twinflow eval run --concurrency N`` on a dataset of ``--runs`` cases, in a
  fresh interpreter (its CPU per case is the difference between ``--runs`` and a few cases,
  so the start-up is not counted);
- the peer, ``pydantic-ai``: ``asyncio.gather(agent.run(...))`` on its OpenAI model.

Printed: CPU ms per run (target at most 8 ms for twinflow's three), runs per second against
the ideal (N / (requests x delay)), and the load average before and after (the machine may be
shared: CPU per run rises when a run's bursts of work are spread between waits on a busy box).
Then, with a slow stub (``--slow-delay``, 500 ms), 32 and 128 concurrent runs against the
ideal (target within 80%), the peak Python memory per concurrent run (`tracemalloc`, in a
run of its own), and the cost of fsync per step at 128 (the same runs with
``fsync="none"``). No figure is asserted: the table is read.

Usage: .venv/bin/python benchmarks/concurrency.py [--runs 256] [--delay 0.05] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from _bench import add_smoke  # this folder: sys.path[0]

from twinflow.agent import Agent, Policy
from twinflow.kernel import HttpTransport, ThreadExecutor
from twinflow.models import OpenAICompatibleChatModel

HERE = Path(__file__).resolve().parent


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


# -- the stub server (run in a process of its own) -----------------------------------------


def serve(port_file: Path, delay: float, tools: int) -> None:
    """Serve chat completions on loopback until stdin closes; write the URL to ``port_file``."""
    from twinflow.kernel import LoopbackServer
    from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse

    def answer(request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        assert isinstance(body, dict)
        messages = body["messages"]
        done = sum(1 for m in messages if m.get("role") == "tool")
        time.sleep(delay)
        if done < tools:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{done}",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "3"}, "stop"
        return LoopbackResponse.json_body(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "stub",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )

    with LoopbackServer(answer) as server:
        port_file.write_text(server.url)
        sys.stdin.read()


class Stub:
    """The stub server in a child process, for a ``with`` block."""

    def __init__(self, delay: float, tools: int, directory: Path) -> None:
        self.file = directory / f"stub-{len(list(directory.glob('stub-*')))}.url"
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.file), str(delay), str(tools)],
            stdin=subprocess.PIPE,
        )
        while not self.file.exists() or not self.file.read_text():
            time.sleep(0.01)
        self.url = self.file.read_text()

    def __enter__(self) -> Stub:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


# -- the clients ---------------------------------------------------------------------------


def agent(url: str, transport: HttpTransport, trace: Path, fsync: str) -> Agent[str]:
    """One run's agent: native tool calls on the stub, its own trace file."""
    model = OpenAICompatibleChatModel(
        transport, base_url=url, model="stub", dialect="vllm", mode="native"
    )
    return Agent(
        model,
        tools=[add],  # as a user writes it: the function, not a tool built once by hand
        policy=Policy(allow=frozenset({"add"})),
        trace=trace,
        fsync=fsync,  # type: ignore[arg-type]  # "step" or "none"
        max_steps=20,
    )


def twinflow_async(url: str, n: int, runs: int, directory: Path, fsync: str = "step") -> None:
    """``runs`` runs, ``n`` at a time, gathered on one event loop."""
    transport = HttpTransport(connections=n)

    async def main() -> None:
        gate = asyncio.Semaphore(n)

        async def one(i: int) -> None:
            async with gate:
                with agent(url, transport, directory / f"a{i}.jsonl", fsync) as a:
                    await a.run_async("add")

        await asyncio.gather(*(one(i) for i in range(runs)))

    asyncio.run(main())
    transport.close()


def twinflow_threads(url: str, n: int, runs: int, directory: Path) -> None:
    """``runs`` runs through the kernel's thread executor at ``n``."""
    transport = HttpTransport(connections=n)

    def one(i: int) -> None:
        with agent(url, transport, directory / f"t{i}.jsonl", "step") as a:
            a.run("add")

    for _ in ThreadExecutor().map_bounded(one, range(runs), n):
        pass
    transport.close()


def pydantic_ai(url: str, n: int, runs: int) -> None:
    """The peer: ``runs`` pydantic-ai runs, ``n`` at a time, gathered."""
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("stub", provider=OpenAIProvider(base_url=f"{url}/v1", api_key="x"))
    peer = PydanticAgent(model, tools=[add])

    async def main() -> None:
        gate = asyncio.Semaphore(n)

        async def one() -> None:
            async with gate:
                await peer.run("add")

        await asyncio.gather(*(one() for _ in range(runs)))

    asyncio.run(main())


def eval_cpu(url: str, n: int, cases: int, directory: Path) -> float:
    """CPU seconds of ``twinflow eval run --concurrency n`` on ``cases`` cases (fresh process)."""
    work = directory / f"eval-{n}-{cases}"
    work.mkdir()
    (work / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    (work / "spec.yaml").write_text(
        f"prompt: '{{input}}'\nmodel: {{url: '{url}', dialect: vllm, mode: native, name: stub}}\n"
        "tools: [calc:add]\npolicy: {allow: [add]}\nmax_steps: 20\n"
    )
    lines = [f"- {{id: c{i}, input: add, expected: '3'}}" for i in range(cases)]
    (work / "data.yaml").write_text("name: fleet\ncases:\n" + "\n".join(lines) + "\n")
    argv = [
        sys.executable,
        "-m",
        "twinflow.cli",
        "eval",
        "run",
        "data.yaml",
        "--spec",
        "spec.yaml",
        "--out",
        "out",
        "--concurrency",
        str(n),
    ]
    child = subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        assert child.stderr is not None
        raise SystemExit(f"eval run failed: {child.stderr.read().decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime


# -- measuring ------------------------------------------------------------------------------


def measure(fn: Any, *args: Any) -> tuple[float, float]:
    """(CPU s, wall s) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn(*args)
    return time.process_time() - cpu, time.perf_counter() - wall


def peak_mb(fn: Any, *args: Any) -> float:
    """Peak Python memory allocated during one call, in MB (`tracemalloc`: timed apart)."""
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def main() -> None:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=256)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--slow-delay", type=float, default=0.5)
    parser.add_argument("--tools", type=int, default=4, help="tool calls a run (requests - 1)")
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 8, 32, 128])
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    add_smoke(parser)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), float(args.serve[1]), int(args.serve[2]))
        return
    if args.smoke:
        args.runs, args.concurrency, args.tools = 8, [4], 1
        args.delay = args.slow_delay = 0.01
    requests = args.tools + 1
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        with Stub(args.delay, args.tools, directory) as stub:
            # Imports and first-use costs are not per-run costs: each client runs once first.
            for warm in ("warm-a", "warm-t"):
                (directory / warm).mkdir()
            twinflow_async(stub.url, 2, 2, directory / "warm-a")
            twinflow_threads(stub.url, 2, 2, directory / "warm-t")
            pydantic_ai(stub.url, 2, 2)
            print(f"load average {_load()}")
            print(f"{args.runs} runs of {requests} requests, stub delay {args.delay * 1000:g} ms")
            print(f"{'N':>5} {'client':<12} {'CPU ms/run':>10} {'runs/s':>8} {'of ideal':>8}")
            for n in args.concurrency:
                ideal = n / (requests * args.delay)
                rows: list[tuple[str, float, float]] = []
                for name, fn, fargs in (
                    ("async", twinflow_async, (stub.url, n, args.runs, directory)),
                    ("threads", twinflow_threads, (stub.url, n, args.runs, directory)),
                    ("pydantic-ai", pydantic_ai, (stub.url, n, args.runs)),
                ):
                    work = directory / f"{name}-{n}"
                    work.mkdir()
                    call_args = (*fargs[:3], work) if name != "pydantic-ai" else fargs
                    cpu, wall = measure(fn, *call_args)
                    rows.append((name, cpu, wall))
                few = min(8, args.runs - 1)
                eval_runs = eval_cpu(stub.url, n, args.runs, directory) - eval_cpu(
                    stub.url, n, few, directory
                )
                for name, cpu, wall in rows:
                    rate = args.runs / wall
                    print(
                        f"{n:>5} {name:<12} {cpu / args.runs * 1000:>10.2f} {rate:>8.1f} "
                        f"{rate / ideal:>7.0%}"
                    )
                per_eval = eval_runs / max(1, args.runs - few) * 1000
                print(f"{n:>5} {'eval run':<12} {per_eval:>10.2f} {'-':>8} {'-':>8}")
                peer = rows[2][1]
                print(
                    f"      CPU ratio pydantic-ai / async: {peer / max(rows[0][1], 1e-9):.1f}x, "
                    f"/ threads: {peer / max(rows[1][1], 1e-9):.1f}x"
                )
        with Stub(args.slow_delay, args.tools, directory) as slow:
            print(
                f"\nstub delay {args.slow_delay * 1000:g} ms: runs/s against the ideal "
                f"(N / {requests * args.slow_delay:g} s)"
            )
            for n in (4,) if args.smoke else (32, 128):
                ideal = n / (requests * args.slow_delay)
                results = {}
                for name, fn in (("async", twinflow_async), ("pydantic-ai", pydantic_ai)):
                    work = directory / f"slow-{name}-{n}"
                    work.mkdir()
                    call_args = (slow.url, n, n, work) if name == "async" else (slow.url, n, n)
                    _, wall = measure(fn, *call_args)
                    results[name] = n / wall
                    print(
                        f"{n:>5} {name:<12} {n / wall:>8.1f} runs/s  {n / wall / ideal:>5.0%} "
                        "of ideal (target >= 80%)"
                    )
                    work = directory / f"mem-{name}-{n}"
                    work.mkdir()
                    call_args = (slow.url, n, n, work) if name == "async" else (slow.url, n, n)
                    try:
                        per_run = f"{peak_mb(fn, *call_args) / n:.2f} MB"
                    except Exception as exc:  # a client that fails under load is reported
                        per_run = f"not measured ({type(exc).__name__}: {exc})"
                    print(f"{'':>5} {name:<12} peak memory {per_run} per concurrent run")
            n = 4 if args.smoke else 128
            costs = {}
            for fsync in ("step", "none"):
                work = directory / f"fsync-{fsync}"
                work.mkdir()
                costs[fsync] = measure(twinflow_async, slow.url, n, n, work, fsync)
            print(
                f"fsync per step at {n}: CPU {costs['step'][0] / n * 1000:.2f} ms/run vs "
                f"{costs['none'][0] / n * 1000:.2f} without; wall {costs['step'][1]:.2f} s vs "
                f"{costs['none'][1]:.2f} s"
            )
    print(f"load average {_load()}")


def _load() -> str:
    """The 1, 5 and 15 minute load averages, as printed beside the figures."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
