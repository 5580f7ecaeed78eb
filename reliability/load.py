"""Load campaign: concurrent eval cases against one real local model server on loopback,
with faults injected into a share of them.

One SmolLM2-135M-Instruct server (llama-cpp-python, started by the kernel's
`SubprocessLauncher`) serves every case; `run_eval` runs them on a `ThreadExecutor` with
every case in flight at once. Tiny prompts, ``max_tokens`` 8.

1. Transport faults (`FaultTransport`: refuse, reset, server_error, timeout...) in a share of
   the cases: the runner must stop with `RunAborted` (a transport failure is not a model
   failure), keeping every finished case, with no trace corrupt.
2. The same command again, resuming, with model-level faults in a share of the cases (a 2xx
   body that is not the wire format, a reply cut to garbage): every case must end passed,
   failed or errored with its reason, none lost or run twice, every trace verifying
   (`rescore` flags none and agrees with the run).

    .venv/bin/python reliability/load.py --short | --full
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import Figures, parse_mode

from twinflow.agent import Agent, Policy, verify_agent_trace
from twinflow.eval import Case, Dataset, RunAborted, run_eval
from twinflow.eval._rescore import rescore
from twinflow.kernel import (
    CountingIds,
    HttpTransport,
    SubprocessLauncher,
    SystemClock,
    ThreadExecutor,
    Transport,
)
from twinflow.kernel._fault import FaultTransport
from twinflow.kernel._netpolicy import free_port
from twinflow.models import OpenAICompatibleChatModel
from twinflow.trace import TraceSink
from twinflow.vocab import JsonValue, ModelSettings

TRANSPORT_FAULTS = ("refuse", "reset", "server_error", "garbage", "invalid_json")


class Malformed:
    """A transport whose server answers 2xx with a body that is not the wire format."""

    def __init__(self, inner: Transport, body: JsonValue) -> None:
        """Answer ``body`` instead of asking ``inner``."""
        self.inner = inner
        self.body = body
        self.calls = 0

    def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
        """Answer the malformed body."""
        self.calls += 1
        return self.body

    def close(self) -> None:
        """Close the inner transport."""
        self.inner.close()


MALFORMED: tuple[JsonValue, ...] = (
    {"choices": []},
    {"choices": [{"message": {"role": "assistant", "content": 7}}]},
    {"object": "error", "message": "out of memory"},
)


def dataset(cases: int) -> Dataset:
    """Tiny cases; half scored by exact match (the small model mostly fails those)."""
    return Dataset.model_validate(
        {
            "name": "load",
            "cases": [
                {
                    "id": f"l{i:03d}",
                    "input": f"Say the number {i}.",
                    "expected": str(i),
                    "assertions": [{"kind": "exact"} if i % 2 else {"kind": "no_denied_calls"}],
                }
                for i in range(cases)
            ],
        }
    )


def factory(
    base: str, transport_faults: dict[str, str], malformed: dict[str, JsonValue], built: list[str]
) -> Any:
    """Builds each case's agent; a chosen share of the cases gets a faulty transport."""

    def make(case: Case, sink: TraceSink, seed: int = 0) -> Agent[Any]:
        built.append(case.id)
        transport: Transport = HttpTransport()
        if case.id in transport_faults:
            transport = FaultTransport(transport, [transport_faults[case.id]])
        elif case.id in malformed:
            transport = Malformed(transport, malformed[case.id])
        model = OpenAICompatibleChatModel(
            transport, base_url=base, dialect="llama-cpp-python", mode="native", timeout=120.0
        )
        return Agent(
            model,
            clock=SystemClock(),
            ids=CountingIds(prefix=f"{case.id}-"),
            policy=Policy(),
            max_steps=1,
            settings=ModelSettings(temperature=0, max_tokens=8, seed=0),
            trace=sink,
        )

    return make


def main(argv: list[str] | None = None) -> int:
    """Run the campaign and print the figures."""
    args = parse_mode(__doc__ or "", argv)
    figures = Figures("load", args.mode)
    rng = random.Random(args.seed)
    cases = 50 if args.mode == "full" else 10
    data = dataset(cases)
    ids = [c.id for c in data.cases]
    share = max(1, cases // 5)
    chosen = rng.sample(ids, 2 * share)
    transport_faults = {cid: rng.choice(TRANSPORT_FAULTS) for cid in chosen[:share]}
    malformed = {cid: rng.choice(MALFORMED) for cid in chosen[share:]}
    from twinflow.models._embedded import embedded_model_file, server_command

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="twinflow-load-") as tmp:
        out = Path(tmp) / "run"
        launched = time.perf_counter()
        with SubprocessLauncher().launch(
            server_command(embedded_model_file(), port),
            health_url=f"{base}/v1/models",
            deadline=120.0,
            log_path=Path(tmp) / "server.log",
        ):
            figures.values["server_start_s"] = round(time.perf_counter() - launched, 1)
            # 1. transport faults: the run aborts, finished cases are kept.
            built1: list[str] = []
            started = time.perf_counter()
            try:
                run_eval(
                    data,
                    factory(base, transport_faults, {}, built1),
                    out,
                    clock=SystemClock(),
                    executor=ThreadExecutor(),
                    concurrency=cases,
                )
                figures.fail("phase 1: the run did not abort on a transport fault")
                aborted = "no"
            except RunAborted as exc:
                aborted = str(exc).split(";")[0]
            kept = sorted(p.stem.split("@")[0] for p in (out / "cases").glob("*.json"))
            figures.values["phase1_cases"] = cases
            figures.values["phase1_transport_faults"] = dict(Counter(transport_faults.values()))
            figures.values["phase1_aborted_with"] = aborted
            figures.values["phase1_cases_kept"] = len(kept)
            figures.values["phase1_seconds"] = round(time.perf_counter() - started, 1)
            for trace in (out / "traces").glob("*.jsonl"):
                report = verify_agent_trace(trace, require_complete=False)
                if not report.ok:
                    figures.fail(f"phase 1: {trace.name}: {report.problem}")
            # 2. resume with model-level faults: every case ends with a verdict and a reason.
            built2: list[str] = []
            started = time.perf_counter()
            results = run_eval(
                data,
                factory(base, {}, malformed, built2),
                out,
                clock=SystemClock(),
                executor=ThreadExecutor(),
                concurrency=cases,
            )
            elapsed = time.perf_counter() - started
        again = set(kept) & set(built2)
        if again:
            figures.fail(f"phase 2: finished cases ran again: {sorted(again)}")
        if sorted(set(kept) | set(built2)) != sorted(ids) or len(built2) != len(set(built2)):
            figures.fail("phase 2: a case was lost or run twice")
        statuses = Counter(r.status for r in results.cases)
        reasons: Counter[str] = Counter()
        for r in results.cases:
            if r.status not in {"passed", "failed", "errored"}:
                figures.fail(f"{r.key}: status {r.status} ({r.problem})")
            reason = r.error or next((s.detail for s in r.scores if s.detail), None)
            if r.status != "passed" and not reason:
                figures.fail(f"{r.key}: {r.status} without a reason")
            if r.status != "passed":
                reasons[(reason or "").split(":")[0][:60]] += 1
        for cid in malformed:
            result = next(r for r in results.cases if r.case_id == cid)
            if cid not in kept and (
                result.error is None or "MalformedResponseError" not in result.error
            ):
                figures.fail(f"{cid}: malformed answer not recorded as such: {result.error}")
        rescored = rescore(out)
        if rescored.summary.flagged or rescored.cases != results.cases:
            figures.fail(f"rescore disagrees or flags: {rescored.summary}")
        figures.values["phase2_cases_run"] = len(built2)
        figures.values["phase2_malformed_injected"] = len(malformed)
        figures.values["phase2_seconds"] = round(elapsed, 1)
        figures.values["phase2_throughput_cases_per_s"] = round(len(built2) / elapsed, 2)
        figures.values["complete"] = results.complete
        figures.values["statuses"] = dict(sorted(statuses.items()))
        figures.values["reasons_not_passed"] = dict(reasons.most_common())
        figures.values["rescore_flagged"] = rescored.summary.flagged
        figures.values["interrupted_traces_set_aside"] = len(
            list((out / "traces").glob("*.interrupted*.jsonl"))
        )
    return figures.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
