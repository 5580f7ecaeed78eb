"""A case scored from its verified trace: the one scorer of the runner, rescore and merge.

`score_trace` reads a case's trace through the verifier (a trace that does not verify flags
the case, naming the problem; it is never scored) and runs the case's scorers on what the
trace records, so a run directory can be scored again by anyone, without a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from twinflow._base._files import (
    open_inside,
)
from twinflow.agent import (
    ModelResponded,
    TraceEvent,
)
from twinflow.eval._dataset import Case
from twinflow.eval._details import ScoredTrace, keeps_fact
from twinflow.eval._judge import Judging
from twinflow.eval._observe import Observation, observe_verified
from twinflow.eval._results import (
    CaseResult,
    CaseStatus,
    EvalResults,
)
from twinflow.eval._scorers import ScorerSpec, score_all
from twinflow.trace import Checkpoint, MerkleTree, TraceCorruptError
from twinflow.trace._format import GENESIS
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["score_trace"]


def _encode(value: Any) -> bytes:
    return canonical_bytes(value) + b"\n"


_NO_CASES = b'{"cases":[],'


def _encode_results(results: EvalResults, encoded: Mapping[str, bytes]) -> bytes:
    """`_encode` (results), taking each case's encoding from ``encoded`` (its cases file's
    bytes, by key) where it is there, instead of encoding every result a second time.

    RFC 8785 writes an object as its members in key order, each member's value encoded on its
    own; ``cases`` sorts first of the results' members, so the results are the encoding
    without cases with the cases' encodings spliced into its empty list.
    """
    rest = canonical_bytes(results.model_copy(update={"cases": ()}))
    if not rest.startswith(_NO_CASES):  # not the shape spliced into (a member before cases)
        return _encode(results)
    cases = b",".join(
        encoded[r.key][:-1] if r.key in encoded else canonical_bytes(r) for r in results.cases
    )
    return b'{"cases":[' + cases + b"]," + rest[len(_NO_CASES) :] + b"\n"


def _status(scores: Sequence[Any], run_status: str) -> CaseStatus:
    if any(s.outcome == "errored" for s in scores):
        return "errored"
    # A run that did not finish never passes, whatever scorers that look at part of its trace
    # (no denied calls, say) conclude; its error is on the result as the reason.
    if run_status != "finished":
        return "failed"
    return "passed" if all(s.outcome == "passed" for s in scores) else "failed"


def score_trace(
    run_dir: Path,
    case: Case,
    repeat: int,
    key: str,
    scorers: Sequence[ScorerSpec],
    latency_s: float | None,
    judging: Judging | None = None,
) -> CaseResult:
    """Verify a case's trace and score it from the trace alone.

    Args:
        run_dir: The run directory.
        case: The case.
        repeat: The repeat number.
        key: The case key (names the trace file).
        scorers: The scorers to apply.
        latency_s: The measured latency; None takes the span of the trace's clock readings.
        judging: How judge scorers are scored (live or replayed); None errors them.

    Returns:
        The result; ``flagged`` (and unscored) when the trace is missing or does not verify.
    """
    return _score_read(run_dir, case, repeat, key, scorers, latency_s, judging)[0]


class _Reading:
    """What the reports take from a trace, gathered while it is scored (ADR 0139)."""

    def __init__(self) -> None:
        self.kept: list[TraceEvent] = []
        self.models: set[str] = set()
        self.observation: Observation | None = None

    def keep(self, event: TraceEvent) -> None:
        """Keep a fact's event: every run_started, a reply only when it names a new model."""
        body = event.body
        if isinstance(body, ModelResponded):
            if body.response.model_name in self.models:
                return
            self.models.add(body.response.model_name)
        if keeps_fact(event):
            self.kept.append(event)


def _score_read(
    run_dir: Path,
    case: Case,
    repeat: int,
    key: str,
    scorers: Sequence[ScorerSpec],
    latency_s: float | None,
    judging: Judging | None,
) -> tuple[CaseResult, tuple[bytes, ScoredTrace] | None]:
    """`score_trace`, and when the trace verified, the bytes scored and what the reports take
    from them.

    The file is read whole once `open_inside` has checked the name (no link at any component,
    a regular file: a FIFO or device is refused unread); a read that fails is scored from the
    path, which flags it as before.
    """
    relative = f"traces/{key}.jsonl"
    try:
        with open_inside(run_dir, relative, what="the case's trace") as file:
            try:
                data = file.read()
            except OSError:
                data = None
    except FileNotFoundError:
        return _score_bytes(
            b"", relative, case, repeat, key, scorers, latency_s, judging=judging
        ), None
    if data is None:
        source = run_dir / relative
        return _score_bytes(
            source, relative, case, repeat, key, scorers, latency_s, judging=judging
        ), None
    reading = _Reading()
    result = _score_bytes(
        data, relative, case, repeat, key, scorers, latency_s, judging=judging, reading=reading
    )
    if reading.observation is None:
        return result, None
    # No digest: the runner writes the page from these very bytes (ADR 0146).
    return result, (data, ScoredTrace(None, reading.observation, tuple(reading.kept)))


def _flagged(
    common: dict[str, Any], problem: str, checkpoint: Checkpoint, latency_s: float | None
) -> CaseResult:
    return CaseResult(
        **common,
        status="flagged",
        scores=(),
        checkpoint=checkpoint,
        run_status="incomplete",
        attempts=0,
        steps=0,
        latency_s=latency_s or 0.0,
        problem=problem,
    )


def _score_bytes(
    data: bytes | Path,
    relative: str,
    case: Case,
    repeat: int,
    key: str,
    scorers: Sequence[ScorerSpec],
    latency_s: float | None,
    prompt: str | None = None,
    judging: Judging | None = None,
    reading: _Reading | None = None,
) -> CaseResult:
    """`score_trace` on the trace's bytes or file (``relative`` is where the run directory
    keeps them), verified and observed in one streaming pass (`observe_verified`).

    With ``prompt``, a trace whose run started from another prompt is flagged too: it verifies,
    but it is not this case's. With ``reading``, what the reports take from the trace is kept
    there (its observation once the trace verified).
    """
    common = {
        "key": key,
        "case_id": case.id,
        "repeat": repeat,
        "tags": case.tags,
        "trace": relative,
    }
    try:
        keep = None if reading is None else reading.keep
        obs, checkpoint = observe_verified(data, require_complete=True, keep=keep)
    except TraceCorruptError as exc:
        problem = f"{relative} is missing" if not data else f"{relative}: {exc.report.problem}"
        return _flagged(common, problem, exc.report.checkpoint, latency_s)
    except OSError as exc:
        unread = Checkpoint(size=0, root=MerkleTree().root().hex(), head=GENESIS)
        return _flagged(common, f"{relative}: {exc}", unread, latency_s)
    if prompt is not None and obs.prompt != prompt:
        problem = f"{relative}: its run started from another prompt than this case's"
        return _flagged(common, problem, checkpoint, latency_s)
    if reading is not None:
        reading.observation = obs
    hook = None if judging is None else judging.hook(key)
    scores = score_all(scorers, case.expected, obs, hook)
    return CaseResult(
        **common,
        status=_status(scores, obs.status),
        scores=scores,
        checkpoint=checkpoint,
        run_status=obs.status,
        attempts=obs.attempts,
        steps=obs.steps,
        latency_s=obs.duration_s if latency_s is None else latency_s,
        error=None if obs.error_type is None else f"{obs.error_type}: {obs.error}",
        seed=obs.seed,
    )
