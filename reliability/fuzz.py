"""Fuzz campaign: property-based (hypothesis) and coverage-guided (atheris, when importable)
fuzzing of the trace reader, the wire-format readers, the structured-output parser, the
dataset loader and the run-spec loader.

For every input, only the owning package's typed errors may escape (`twinflow.vocab.
TwinflowError` subclasses named below); every input must finish within a per-input deadline
(a CPU-time timer, SIGPROF, turns a hang into a failure) and the peak memory of the whole run is reported.

    .venv/bin/python reliability/fuzz.py --short | --full

atheris is not a project dependency. To add the coverage-guided pass, install it beside the
venv (not into the lockfile) and point the script at it:

    uv pip install --python .venv/bin/python --target /tmp/twinflow-atheris atheris
    TWINFLOW_ATHERIS=/tmp/twinflow-atheris .venv/bin/python reliability/fuzz.py --full
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import Answer, Figures, parse_mode, trace_shapes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinflow.agent import RunSpec, SpecError, Trace, verify_agent_trace
from twinflow.eval import DatasetError, load_dataset
from twinflow.kernel import MockTransport
from twinflow.models import ModelError, OllamaChatModel, OpenAICompatibleChatModel
from twinflow.models._anthropic_wire import from_anthropic
from twinflow.models._ollama_wire import from_ollama_messages
from twinflow.models._openai_wire import from_openai_messages
from twinflow.trace import TraceCorruptError
from twinflow.trace._testing import rechain
from twinflow.vocab import (
    Message,
    ModelRequest,
    OutputSchema,
    StructuredOutputError,
    ToolSpec,
    Transcript,
    WireFormatError,
)

DEADLINE_S = 5.0
ROOT = Path(__file__).resolve().parent.parent


class Hang(BaseException):
    """An input ran past the per-input deadline."""


def _alarm(signum: int, frame: object) -> None:
    raise Hang


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise `Hang` in this thread if the block uses more than ``seconds`` of CPU time.

    CPU time (ITIMER_PROF), not wall time: the parsers under fuzz never wait, so a hang is
    CPU spent, and a busy machine that slows the wall clock cannot make a fast input "hang".
    """
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


class Target:
    """One parser under fuzz: a function of bytes and the errors it may raise."""

    def __init__(
        self, name: str, run: Callable[[bytes], None], allowed: tuple[type[BaseException], ...]
    ) -> None:
        """Name the target; ``run`` takes raw bytes and decodes them as it sees fit."""
        self.name = name
        self.run = run
        self.allowed = allowed
        self.tried = 0
        self.crashes: Counter[str] = Counter()
        self.examples: dict[str, bytes] = {}

    def __call__(self, data: bytes) -> None:
        """Run one input; record an escape of anything but the allowed errors, or a hang."""
        self.tried += 1
        try:
            with deadline(DEADLINE_S):
                self.run(data)
        except self.allowed:
            pass
        except Hang:
            self._crash("hang", data)
        except Exception as exc:
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            self._crash(f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}", data)

    def _crash(self, key: str, data: bytes) -> None:
        self.crashes[key] += 1
        self.examples.setdefault(key, data[:400])


# --- the targets ---------------------------------------------------------------------------


def trace_reader(data: bytes) -> None:
    """verify_agent_trace must never raise; Trace.load only TraceCorruptError, and agree with it."""
    report = verify_agent_trace(data, require_complete=False)
    try:
        trace = Trace.load(data)
    except TraceCorruptError as exc:
        # verify_agent_trace checks digests and the chain, not event schemas: a re-chained forgery
        # passes it and only Trace.load (or a checkpoint) can refuse it, as "edited".
        problem = exc.report.problem
        if report.ok and (problem is None or problem.kind != "edited"):
            raise AssertionError("verify_agent_trace says ok, Trace.load refuses") from None
        return
    if not report.ok or trace.size != report.events:
        raise AssertionError("Trace.load accepted what verify_agent_trace refused")


def json_of(data: bytes) -> Any:
    """Bytes as a JSON value (invalid JSON becomes the string itself)."""
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


def wire_readers(data: bytes) -> None:
    """The three wire readers on one JSON value."""
    value = json_of(data)
    for reader in (from_openai_messages, from_ollama_messages, from_anthropic):
        with contextlib.suppress(WireFormatError):
            reader(value)


TOOLS = (
    ToolSpec(
        name="add",
        description="add",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    ),
)
REQUEST = ModelRequest(transcript=Transcript(messages=(Message.user("hi"),)), tools=TOOLS)
STRUCTURED_REQUEST = ModelRequest(
    transcript=Transcript(messages=(Message.user("hi"),)),
    output_schema=OutputSchema.for_model(Answer),
)


def model_responses(data: bytes) -> None:
    """Every chat-model client and mode, and the structured-output adapter, on one body."""
    value = json_of(data)
    transport = MockTransport(lambda url, body: value)
    base = "http://127.0.0.1:9"
    for mode in ("native", "structured-action"):
        clients = (
            OpenAICompatibleChatModel(
                transport, base_url=base, dialect="llama-cpp-python", mode=mode, max_attempts=2
            ),
            OllamaChatModel(transport, model="m", base_url=base, mode=mode, max_attempts=2),
        )
        for client in clients:
            for request in (REQUEST, STRUCTURED_REQUEST):
                with contextlib.suppress(ModelError, StructuredOutputError):
                    client.request(request)
    adapter = OpenAICompatibleChatModel(
        transport, base_url=base, dialect="llama-cpp-python", max_attempts=2
    )
    with contextlib.suppress(ModelError, StructuredOutputError):
        adapter.generate([Message.user("hi")], Answer)


def make_dataset_loader(workdir: Path) -> Callable[[bytes], None]:
    """load_dataset on the bytes written as a .yaml and as a .jsonl file."""

    def run(data: bytes) -> None:
        for suffix in (".yaml", ".jsonl"):
            path = workdir / f"dataset{suffix}"
            path.write_bytes(data)
            with contextlib.suppress(DatasetError):
                load_dataset(path)

    return run


def spec_loader(data: bytes) -> None:
    """parse_spec on the text."""
    with contextlib.suppress(SpecError):
        RunSpec.parse(data.decode("utf-8", "replace"), "fuzz.yaml")


# --- seeds and strategies ------------------------------------------------------------------


def rewritten_traces() -> list[bytes]:
    """Traces whose events were changed and then re-chained with recomputed digests: what an
    attacker who rewrites a whole trace produces. They verify, so Trace.load must still cope
    with events that are no longer valid events."""
    out = []
    for data in trace_shapes().values():
        events = [json.loads(line)["event"] for line in data.splitlines()]
        for index in range(len(events)):
            for change in ({"body": {"kind": "run_started"}}, {"at": 5}, {"body": {"kind": "x"}}):
                copy = [dict(e) for e in events]
                copy[index] = {**copy[index], **change}
                out.append(rechain(copy))
    return out


def seeds(workdir: Path) -> dict[str, list[bytes]]:
    """Valid (or nearly valid) inputs each target starts from."""
    from twinflow.models._anthropic_wire import to_anthropic
    from twinflow.models._ollama_wire import to_ollama_messages
    from twinflow.models._openai_wire import to_openai_messages

    shapes = list(trace_shapes().values())
    transcript = Transcript(
        messages=(Message.system("s"), Message.user("hi"), Message.assistant("hello"))
    )
    wire = [
        json.dumps(to_openai_messages(transcript)).encode(),
        json.dumps(to_ollama_messages(transcript)).encode(),
        json.dumps(to_anthropic(transcript)).encode(),
    ]
    replies = [
        {
            "choices": [
                {
                    "message": {"role": "assistant", "content": '{"value": 1}'},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        },
        {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": '{"action": "final", "answer": "x"}',
                        "tool_calls": [
                            {
                                "id": "1",
                                "type": "function",
                                "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        },
        {
            "message": {
                "role": "assistant",
                "content": '{"action": "call_tool", "tool": "add", "arguments": {"a": 1, "b": 2}}',
            },
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 1,
            "eval_count": 1,
        },
        {
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "add", "arguments": {"a": 1}}}],
            },
            "done": True,
        },
    ]
    return {
        "trace reader": shapes + rewritten_traces()[:40],
        "wire readers": wire,
        "structured output": [json.dumps(r).encode() for r in replies],
        "dataset loader": [
            (ROOT / "examples/invoice-extraction/dataset.yaml").read_bytes(),
            b'{"id": "a", "input": "x", "expected": 1}\n{"id": "b", "input": "y"}\n',
        ],
        "spec loader": [(ROOT / "examples/invoice-extraction/spec.yaml").read_bytes()],
    }


@st.composite
def mutated(draw: st.DrawFn, corpus: list[bytes]) -> bytes:
    """A seed with a few byte-level mutations (flip, insert, delete, duplicate a slice)."""
    data = bytearray(draw(st.sampled_from(corpus)))
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(("flip", "insert", "delete", "dup", "splice")))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(max_size=8))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "dup":
            data[at:at] = data[at : at + draw(st.integers(1, 200))]
        else:
            data[at:at] = draw(st.sampled_from(corpus))[: draw(st.integers(0, 300))]
    return bytes(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "tool_calls",
                    "function",
                    "name",
                    "arguments",
                    "id",
                    "type",
                    "message",
                    "choices",
                    "done",
                    "system",
                    "messages",
                    "tool_use",
                    "input",
                    "text",
                    "images",
                    "thinking",
                    "tool_call_id",
                    "finish_reason",
                    "usage",
                    "value",
                    "action",
                    "tool",
                    "answer",
                    "output",
                    "prompt",
                    "model",
                    "cases",
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


def run_hypothesis(target: Target, corpus: list[bytes], examples: int, seed: int) -> None:
    """Drive one target with hypothesis: mutated seeds, arbitrary JSON, arbitrary bytes."""
    inputs = st.one_of(
        mutated(corpus),
        JSON.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=512),
    )

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(inputs)
    def fuzz(data: bytes) -> None:
        target(data)

    import hypothesis

    hypothesis.seed(seed)(fuzz)()


def atheris_child(target: Target, corpus: Path, result: Path, seconds: float, site: str) -> None:
    """In a forked child: fuzz ``target`` with atheris, keeping its figures in ``result``."""
    sys.path.insert(0, site)
    import atheris

    def report() -> None:
        figures = {"tried": target.tried, "crashes": dict(target.crashes)}
        result.write_text(json.dumps(figures))

    def one(data: bytes) -> None:
        target(data)
        if target.crashes:  # stop at the first crash; the parent reports it
            report()
            os._exit(0)
        if target.tried % 200 == 0:  # libFuzzer exits from C: no atexit, so report as we go
            report()

    atheris.instrument_all()  # coverage feedback over every loaded Python function
    atheris.Setup(
        [
            sys.argv[0],
            f"-max_total_time={int(seconds)}",
            "-rss_limit_mb=2048",
            "-max_len=8192",
            str(corpus),
        ],
        one,
    )
    with contextlib.redirect_stdout(sys.stderr):
        atheris.Fuzz()
    report()
    os._exit(0)


def run_atheris(targets: list[Target], corpora: dict[str, list[bytes]], seconds: float) -> str:
    """A coverage-guided pass per target in a child process (atheris exits when done)."""
    site = os.environ.get("TWINFLOW_ATHERIS", "/tmp/twinflow-atheris")
    if not Path(site, "atheris").is_dir():
        return "not installed (see the module docstring); skipped"
    lines = []
    for target in targets:
        corpus = Path(tempfile.mkdtemp(prefix="twinflow-atheris-"))
        for i, seed in enumerate(corpora[target.name]):
            (corpus / f"seed{i}").write_bytes(seed)
        result = corpus.with_suffix(".json")
        pid = os.fork()
        if pid == 0:
            with open(os.devnull, "w") as quiet:
                os.dup2(quiet.fileno(), 2)  # libFuzzer's progress lines
            atheris_child(target, corpus, result, seconds, site)
        os.waitpid(pid, 0)
        found = (
            json.loads(result.read_text())
            if result.exists()
            else {"tried": 0, "crashes": {"no report": 1}}
        )
        lines.append(f"{target.name}: {found['tried']} inputs, crashes {found['crashes'] or 0}")
        for key, count in found["crashes"].items():
            target.crashes[f"atheris: {key}"] += count
            target.examples.setdefault(f"atheris: {key}", b"(see a local atheris run)")
    return "; ".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the campaign and print the figures."""
    args = parse_mode(__doc__ or "", argv)
    full = args.mode == "full"
    figures = Figures("fuzz", args.mode)
    signal.signal(signal.SIGPROF, _alarm)
    examples = 3000 if full else 250
    with tempfile.TemporaryDirectory(prefix="twinflow-fuzz-") as tmp:
        workdir = Path(tmp)
        targets = [
            Target("trace reader", trace_reader, ()),
            Target("wire readers", wire_readers, ()),
            Target("structured output", model_responses, ()),
            Target("dataset loader", make_dataset_loader(workdir), ()),
            Target("spec loader", spec_loader, ()),
        ]
        corpora = seeds(workdir)
        for target in targets:
            started = time.perf_counter()
            for seed in corpora[target.name]:
                target(seed)
            run_hypothesis(target, corpora[target.name], examples, args.seed)
            key = target.name.replace(" ", "_")
            figures.values[f"{key}_inputs"] = target.tried
            figures.values[f"{key}_crashes"] = dict(target.crashes) or 0
            figures.values[f"{key}_seconds"] = round(time.perf_counter() - started, 1)
        if full:
            figures.values["atheris"] = run_atheris(targets, corpora, 60)
        for target in targets:
            for key, example in target.examples.items():
                figures.fail(f"{target.name}: {key} (first input: {example[:200]!r})")
    figures.values["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return figures.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
