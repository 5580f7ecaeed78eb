"""Client overhead of twinflow.models vs the official `ollama` client and the `openai` SDK.

Every client asks a loopback stub (the kernel's `LoopbackServer`, answering a canned response
at once, in its own process) for one
schema-constrained chat completion and validates the answer with pydantic. Client overhead is
the CPU time the client process spends per request (`time.process_time`): the stub's time and
any socket wait (the SDKs' httpx/h11 stack waits ~40 ms per request on delayed ACKs against
this HTTP/1.0 stub) are excluded. Wall time per request is printed too. Rounds interleave the
clients; the median per client is reported with ratios to each peer measured in the same run.
Then the import cost, each in a fresh interpreter (shared with benchmarks/vocab_canonical.py):
`import twinflow.models` vs `import pydantic` (lazy: it defers `BaseModel`), vs
`from pydantic import BaseModel`, and the first use of a vocab model name.

Run: .venv/bin/python benchmarks/local_overhead.py [--requests 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import ollama
import openai
from _bench import add_smoke  # this folder: sys.path[0]
from pydantic import BaseModel
from vocab_canonical import import_times, print_import_times  # this folder: sys.path[0]

from twinflow.kernel import HttpTransport
from twinflow.models import OllamaChatModel, OpenAICompatibleChatModel
from twinflow.vocab import Message


class Person(BaseModel):
    """The structured answer every client asks for."""

    name: str
    age: int


CONTENT = '{"name": "Ada", "age": 36}'
OPENAI_ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "smol",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": CONTENT}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22},
}
OLLAMA_ANSWER = {
    "model": "smol",
    "created_at": "2024-12-06T00:46:58.265747Z",
    "message": {"role": "assistant", "content": CONTENT},
    "done_reason": "stop",
    "done": True,
    "prompt_eval_count": 10,
    "eval_count": 12,
}
QUESTION = "Ada is 36. Give her name and age."


STUB = f"""
import sys
from twinflow.kernel import LoopbackResponse, LoopbackServer
OLLAMA, OPENAI = {json.dumps(json.dumps(OLLAMA_ANSWER))}, {json.dumps(json.dumps(OPENAI_ANSWER))}
def stub(request):
    return LoopbackResponse(
        headers=(("Content-Type", "application/json"),),
        body=(OLLAMA if request.path == "/api/chat" else OPENAI).encode(),
    )
server = LoopbackServer(stub)
server.start()
print(server.port, flush=True)
sys.stdin.read()
server.stop()
"""


def clients(base: str, port: int) -> dict[str, Callable[[], object]]:
    schema = Person.model_json_schema()
    transport = HttpTransport()
    ours_openai = OpenAICompatibleChatModel(transport, base_url=base, dialect="llama-cpp-python")
    ours_ollama = OllamaChatModel(transport, model="smol", base_url=base)
    sdk = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0)
    official = ollama.Client(host=base)
    messages = (Message.user(QUESTION),)
    body = json.dumps({"model": "smol", "messages": [{"role": "user", "content": QUESTION}]})

    def floor() -> object:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        data = conn.getresponse().read()
        conn.close()
        return data

    def openai_sdk() -> object:
        reply = sdk.chat.completions.create(
            model="smol",
            messages=[{"role": "user", "content": QUESTION}],
            temperature=0,
            response_format={"type": "json_object", "schema": schema},  # type: ignore[typeddict-unknown-key]  # llama.cpp extension
        )
        return Person.model_validate_json(reply.choices[0].message.content or "")

    def ollama_client() -> object:
        reply = official.chat(
            model="smol",
            messages=[{"role": "user", "content": QUESTION}],
            format=schema,
            options={"temperature": 0},
        )
        return Person.model_validate_json(reply.message.content or "")

    return {
        "floor (http.client)": floor,
        "twinflow OpenAI-compatible": lambda: ours_openai.generate(messages, Person),
        "twinflow Ollama": lambda: ours_ollama.generate(messages, Person),
        "openai SDK": openai_sdk,
        "ollama client": ollama_client,
    }


def per_request(fn: Callable[[], object], n: int) -> tuple[float, float]:
    """Seconds of (CPU, wall) time per call."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        fn()
    return (time.process_time() - cpu) / n, (time.perf_counter() - wall) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per client per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--import-runs", type=int, default=15, help="fresh interpreters per import")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.requests, args.rounds, args.import_runs = 5, 1, 1

    stub = subprocess.Popen(
        [sys.executable, "-c", STUB], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert stub.stdout is not None
        port = int(stub.stdout.readline())
        fns = clients(f"http://127.0.0.1:{port}", port)
        for fn in fns.values():  # warm up: imports, pydantic schema caches
            per_request(fn, 10)
        cpu: dict[str, list[float]] = {name: [] for name in fns}
        wall: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                c, w = per_request(fn, args.requests)
                cpu[name].append(c)
                wall[name].append(w)
    finally:
        stub.communicate("")
    print(f"{'client':28} {'CPU us/request':>15} {'wall us/request':>16}")
    med = {name: statistics.median(v) for name, v in cpu.items()}
    for name in fns:
        print(f"{name:28} {med[name] * 1e6:15.1f} {statistics.median(wall[name]) * 1e6:16.1f}")
    for ours in ("twinflow OpenAI-compatible", "twinflow Ollama"):
        for peer in ("openai SDK", "ollama client"):
            ratio = med[ours] / med[peer]
            print(
                f"client CPU ratio {ours} / {peer}: {ratio:.2f} ({'lower' if ratio < 1 else 'NOT lower'})"
            )

    print_import_times(import_times(runs=args.import_runs), args.import_runs)


if __name__ == "__main__":
    main()
