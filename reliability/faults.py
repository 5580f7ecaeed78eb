"""Faults campaign: the local-model clients and the agent loop against every fault the
kernel's `FaultTransport` injects, and against a real llama-cpp-python server stopped mid-run.

For every `Fault` kind, and each client (OpenAI-compatible native and structured-action,
Ollama native, the structured-output adapter) and the agent loop (fault on the first and on
a later request):

- the error is the kernel's typed `TransportError` subclass the fault maps to, unwrapped;
- exactly one request was sent for the failing call (transport errors are never retried);
- in the loop, the trace ends with `run_failed` naming the error, and verifies.

Then a real server (SmolLM2 under llama-cpp-python, started by the kernel's
`SubprocessLauncher`) is stopped after the first answer: the next request fails with
`TransportError` (reason ``connect``), once, and the trace records it and verifies.

    .venv/bin/python reliability/faults.py --short | --full
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from _common import Answer, Figures, agent, parse_mode

from twinflow.agent import Trace, verify_agent_trace
from twinflow.kernel import (
    HttpTransport,
    MockTransport,
    SubprocessLauncher,
    Transport,
    TransportError,
)
from twinflow.kernel._fault import FaultTransport
from twinflow.kernel._netpolicy import free_port
from twinflow.models import OllamaChatModel, OpenAICompatibleChatModel
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import (
    JsonValue,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Transcript,
)

EXPECTED: dict[str, str] = {
    "refuse": "connect",
    "timeout": "timeout",
    "reset": "connect",
    "server_error": "status",
    "garbage": "decode",
    "invalid_json": "decode",
    "oversize": "too_large",
}
"""Each fault and the `TransportError.reason` it must surface as."""
BASE = "http://127.0.0.1:9"
TIMEOUT = 0.5


def openai_reply(content: str) -> JsonValue:
    """A chat-completions answer holding ``content``."""
    return {
        "choices": [
            {"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }


def ollama_reply(content: str) -> JsonValue:
    """An Ollama /api/chat answer holding ``content``."""
    return {"message": {"role": "assistant", "content": content}, "done": True}


class Counting:
    """A transport that counts the calls it forwards."""

    def __init__(self, inner: Transport) -> None:
        """Wrap ``inner``."""
        self.inner = inner
        self.calls = 0

    def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
        """Count and forward."""
        self.calls += 1
        return self.inner.post_json(url, body, timeout=timeout)

    def close(self) -> None:
        """Close the inner transport."""
        self.inner.close()


def clients(transport: Transport) -> dict[str, Any]:
    """Every client under test, by name, over ``transport``."""
    return {
        "openai-native": OpenAICompatibleChatModel(
            transport, base_url=BASE, dialect="llama-cpp-python", mode="native", timeout=TIMEOUT
        ),
        "openai-structured-action": OpenAICompatibleChatModel(
            transport,
            base_url=BASE,
            dialect="llama-cpp-python",
            mode="structured-action",
            timeout=TIMEOUT,
        ),
        "ollama-native": OllamaChatModel(
            transport, model="m", base_url=BASE, mode="native", timeout=TIMEOUT
        ),
    }


def answer_for(name: str, step: int) -> JsonValue:
    """A valid reply for the named client: a tool call at step 0, then a final answer."""
    if name == "ollama-native":
        if step == 0:
            call = {"function": {"name": "add", "arguments": {"a": 1, "b": 2}}}
            return {
                "message": {"role": "assistant", "content": "", "tool_calls": [call]},
                "done": True,
            }
        return ollama_reply("3")
    if name == "openai-structured-action":
        if step == 0:
            return openai_reply(
                '{"action": "call_tool", "tool": "add", "arguments": {"a": 1, "b": 2}}'
            )
        return openai_reply('{"action": "final", "answer": "3"}')
    if step == 0:
        call = {
            "id": "x",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"choices": [{"message": message, "finish_reason": "tool_calls"}]}
    return openai_reply("3")


def fault_matrix(figures: Figures, rounds: int) -> None:
    """Every fault x every client, direct and inside the loop."""
    tried: Counter[str] = Counter()
    typed: Counter[str] = Counter()
    for _ in range(rounds):
        for fault, expected in EXPECTED.items():
            # A direct request and a structured generate: one call, the fault, no retry.
            for name in (*clients(MockTransport(lambda u, b: None)), "structured-output"):
                inner = Counting(MockTransport(lambda url, body: openai_reply('{"value": 1}')))
                transport = FaultTransport(inner, [fault])
                tried["direct"] += 1
                try:
                    if name == "structured-output":
                        OpenAICompatibleChatModel(
                            transport, base_url=BASE, dialect="llama-cpp-python", timeout=TIMEOUT
                        ).generate([Message.user("hi")], Answer)
                    else:
                        request = ModelRequest(
                            transcript=Transcript(messages=(Message.user("hi"),))
                        )
                        clients(transport)[name].request(request)
                    figures.fail(f"{fault} / {name}: no error")
                except TransportError as exc:
                    if exc.reason != expected:
                        figures.fail(f"{fault} / {name}: {exc.reason}, expected {expected}")
                        continue
                    sent = len(transport.injected) + inner.calls
                    if sent != 1:
                        figures.fail(f"{fault} / {name}: {sent} requests sent, expected 1")
                    else:
                        typed["direct"] += 1
                except Exception as exc:
                    figures.fail(f"{fault} / {name}: {type(exc).__name__}: {exc}")
                finally:
                    transport.close()
            # The loop: the fault on the first request, or on the request after a tool call.
            for name in clients(MockTransport(lambda u, b: None)):
                for at in (0, 1):
                    steps = iter(range(10))
                    inner = Counting(
                        MockTransport(
                            lambda url, body, name=name, steps=steps: answer_for(name, next(steps))
                        )
                    )
                    transport = FaultTransport(inner, [None] * at + [fault])
                    sink = MemoryTraceSink()
                    worker = agent(clients(transport)[name], trace=sink)
                    tried["loop"] += 1
                    try:
                        worker.run("add 1 and 2")
                        figures.fail(f"loop {fault} / {name} @ {at}: the run succeeded")
                        continue
                    except TransportError as exc:
                        if exc.reason != expected:
                            figures.fail(f"loop {fault} / {name} @ {at}: {exc.reason}")
                            continue
                    except Exception as exc:
                        figures.fail(f"loop {fault} / {name} @ {at}: {type(exc).__name__}: {exc}")
                        continue
                    finally:
                        transport.close()
                    sent = len(transport.injected) + inner.calls
                    report = verify_agent_trace(sink.data)
                    last = Trace.load(sink.data).events[-1].body if report.ok else None
                    if sent != at + 1:
                        figures.fail(
                            f"loop {fault} / {name} @ {at}: {sent} requests, expected {at + 1}"
                        )
                    elif not report.ok:
                        figures.fail(f"loop {fault} / {name} @ {at}: trace: {report.problem}")
                    elif (
                        last is None
                        or last.kind != "run_failed"
                        or "TransportError" not in str(last)
                    ):
                        figures.fail(f"loop {fault} / {name} @ {at}: last event {last}")
                    else:
                        typed["loop"] += 1
    figures.values["fault_kinds"] = len(EXPECTED)
    figures.values["direct_calls_faulted"] = tried["direct"]
    figures.values["direct_typed_unretried"] = typed["direct"]
    figures.values["loop_runs_faulted"] = tried["loop"]
    figures.values["loop_typed_unretried_trace_ok"] = typed["loop"]


def stopped_server(figures: Figures) -> None:
    """A real server, stopped after its first answer, mid-run."""
    from twinflow.models._embedded import embedded_model_file, server_command

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="twinflow-faults-") as tmp:
        server = SubprocessLauncher().launch(
            server_command(embedded_model_file(), port),
            health_url=f"{base}/v1/models",
            deadline=120.0,
            log_path=Path(tmp) / "server.log",
        )
        with server:
            transport = Counting(HttpTransport())
            client = OpenAICompatibleChatModel(
                transport,
                base_url=base,
                dialect="llama-cpp-python",
                mode="structured-action",
                timeout=60.0,
            )

            class StopAfterFirst:
                """Forwards to the real client; stops the server once it has answered."""

                def request(self, request: ModelRequest) -> ModelResponse:
                    response = client.request(request)
                    server.stop()
                    return response

            sink = MemoryTraceSink()
            worker = agent(StopAfterFirst(), trace=sink)
            worker.settings = ModelSettings(temperature=0, max_tokens=48, seed=0)
            outcome = "no error"
            runs = 0
            for prompt in ("Call add with a=1 and b=2.", "Say hi."):
                runs += 1
                try:
                    worker.run(prompt)
                except TransportError as exc:
                    outcome = f"TransportError {exc.reason}"
                    break
                except Exception as exc:
                    outcome = f"{type(exc).__name__}: {exc}"
                    break
            report = verify_agent_trace(sink.data)
            events = Trace.load(sink.data).events if report.ok else ()
            kinds = [e.body.kind for e in events]
            figures.values["real_server_requests_sent"] = transport.calls
            figures.values["real_server_failure"] = outcome
            figures.values["real_server_failed_in_run"] = runs
            figures.values["real_server_trace"] = "verifies" if report.ok else str(report.problem)
            if outcome != "TransportError connect":
                figures.fail(f"stopped server: {outcome}")
            if transport.calls != 2:
                figures.fail(f"stopped server: {transport.calls} requests, expected 2 (no retry)")
            if not report.ok or not kinds or kinds[-1] != "run_failed":
                figures.fail(f"stopped server: trace {report.problem}, last {kinds[-1:]}")


def main(argv: list[str] | None = None) -> int:
    """Run the campaign and print the figures."""
    args = parse_mode(__doc__ or "", argv)
    figures = Figures("faults", args.mode)
    fault_matrix(figures, 3 if args.mode == "full" else 1)
    stopped_server(figures)
    return figures.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
