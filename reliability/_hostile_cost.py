"""Hostile-input classes for cost and budgets: budget values, and forged costs in a trace.

Two attacks, each counted:

1. **Budget values.** Generated ``budget:`` mappings (unknown keys, 0, negative, fractional
   counts, strings, lists, NaN and infinities, huge numbers, ``cost_usd`` on models with and
   without a price), read as a run spec's, a dataset's and a case's: each is read or refused
   in one line (`SpecError`, `DatasetError`), never another exception, and a ``cost_usd`` on
   a model without a price is never accepted.
2. **Forged costs.** A priced run's trace, its first reply's ``cost`` replaced by a wrong shape
   (null, a negative, a string, a list, a number past a float, a missing rate) with the hash
   chain left as it was: ``twinflow show --json`` says NOT VERIFIED (exit 1), never a
   traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import Figures

from twinflow.agent import Agent, FunctionModel, RunSpec, UsageLimits
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink, TwinflowError
from twinflow.vocab import Message, ModelRequest, ModelResponse, TextPart, Usage

KEYS = ("tokens", "requests", "wall_seconds", "cost_usd", "dollars", "", "cost_usd ")
VALUES: tuple[Any, ...] = (
    0, -1, 1, 1.5, 1e308, "1", "lots", [], {}, None, True, ".nan", ".inf", "-.inf", 2**70,
)  # fmt: skip
MODELS = ("openai:gpt-4o-mini", "ollama:qwen2.5:0.5b", "http://127.0.0.1:9/v1")
FORGED: tuple[Any, ...] = (
    None, -1.0, "1", [], {}, {"usd": 1e309}, {"usd": 5.0}, {"usd": -5.0, "model": "m"},
)  # fmt: skip


def _budget(rng: random.Random) -> str:
    items = {rng.choice(KEYS): rng.choice(VALUES) for _ in range(rng.randint(1, 3))}
    # YAML's own spellings of NaN and the infinities stay unquoted.
    return (
        "{"
        + ", ".join(
            f"{json.dumps(k)}: {v if isinstance(v, str) and v.startswith(('.', '-.')) else json.dumps(v)}"
            for k, v in items.items()
        )
        + "}"
    )


def _one_line(figures: Figures, what: str, exc: BaseException) -> None:
    if "\n" in str(exc).strip():
        figures.fail(f"{what}: a multi-line error: {exc}")


def budget_values(figures: Figures, work: Path, count: int, rng: random.Random) -> None:
    """Each generated budget, in a spec, a dataset and a case: read, or one typed line."""
    from twinflow.eval import load_dataset

    read = refused = 0
    for index in range(count):
        budget, model = _budget(rng), rng.choice(MODELS)
        text = f"prompt: p\nmodel: {json.dumps(model)}\nbudget: {budget}\n"
        try:
            spec = RunSpec.parse(text, "spec.yaml")
        except TwinflowError as exc:
            refused += 1
            _one_line(figures, f"spec budget {budget}", exc)
        except Exception as exc:  # the invariant: nothing but a typed error
            figures.fail(f"spec budget {budget}: {type(exc).__name__}: {exc}")
        else:
            read += 1
            if spec.budget is not None and spec.budget.cost_usd and not model.startswith("openai"):
                figures.fail(f"a cost budget on unpriced {model} was accepted")
        for dataset in (
            f"budget: {budget}\ncases: [{{id: c, input: x}}]\n",
            f"cases: [{{id: c, input: x, budget: {budget}}}]\n",
        ):
            path = work / f"budget-{index}.yaml"
            path.write_text(dataset)
            try:
                load_dataset(path)
                read += 1
            except TwinflowError as exc:
                refused += 1
                _one_line(figures, f"dataset {dataset!r}", exc)
            except Exception as exc:
                figures.fail(f"dataset {dataset!r}: {type(exc).__name__}: {exc}")
    figures.values["budget values: read / refused in one line"] = f"{read} / {refused}"


def _priced_trace() -> bytes:
    """A run of two replies, each charged as gpt-4o-mini."""
    replies = iter(["a", "b"])

    def answer(request: ModelRequest) -> ModelResponse:
        del request
        return ModelResponse(
            message=Message(role="assistant", parts=(TextPart(text=next(replies, "c")),)),
            usage=Usage(input_tokens=10, output_tokens=5),
        )

    sink = MemoryTraceSink()
    agent: Agent[str] = Agent(
        FunctionModel(answer),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC), timedelta(seconds=1)),
        ids=CountingIds(),
        usage_limits=UsageLimits(cost_usd=1.0),
        trace=sink,
    )
    agent._priced_as = "openai-compatible:gpt-4o-mini@http://127.0.0.1:9"
    agent.run("go")
    return sink.data


def forged_costs(figures: Figures, work: Path) -> None:
    """Each forged cost: show says NOT VERIFIED, never a traceback."""
    from twinflow.cli._main import main

    lines = _priced_trace().splitlines()
    at = next(i for i, line in enumerate(lines) if b'"model_responded"' in line)
    shown = 0
    for index, wrong in enumerate(FORGED):
        record = json.loads(lines[at])
        record["event"]["body"]["cost"] = wrong
        forged = [*lines[:at], json.dumps(record).encode(), *lines[at + 1 :]]
        path = work / f"forged-cost-{index}.jsonl"
        path.write_bytes(b"\n".join(forged) + b"\n")
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                code = main(["show", str(path), "--json"])
        except Exception as exc:
            figures.fail(f"forged cost {wrong!r}: {type(exc).__name__}: {exc}")
            continue
        payload = json.loads(out.getvalue() or "{}")
        if code != 1 or payload.get("verified", True):
            figures.fail(f"forged cost {wrong!r}: exit {code}, verified {payload.get('verified')}")
        shown += 1
    figures.values["forged costs: shown NOT VERIFIED"] = f"{shown} / {len(FORGED)}"


def hostile_cost(figures: Figures, work: Path, full: bool) -> None:
    """The two classes of the module docstring."""
    rng = random.Random(20261205)
    budget_values(figures, work, 600 if full else 80, rng)
    forged_costs(figures, work)
