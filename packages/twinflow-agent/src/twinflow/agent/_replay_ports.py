"""The replaying ports' parts: the clock, ids, model, tool results and steering replay serves."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from twinflow.agent._errors import AgentError, RecordedFailure
from twinflow.agent._events import ModelWaited, ReplyCost, RunFailed, SteeringReceived, ToolReturned
from twinflow.agent._resume import Fallbacks
from twinflow.agent._retry import recorded_refusal
from twinflow.vocab import (
    Attempt,
    CallId,
    ModelRequest,
    ModelResponse,
    RunId,
    StructuredOutputError,
    ToolCallPart,
)


class _ReplayClock:
    """Serves the recorded ``at`` of each event, in order."""

    def __init__(self, ats: list[datetime]) -> None:
        self._ats = iter(ats)
        self._last = ats[-1] if ats else None

    def now(self) -> datetime:
        at = next(self._ats, None)
        if at is None:
            # One clock reading past the record: the extra event it is for will be reported
            # by the comparing sink, with its content; give it a plausible time meanwhile.
            if self._last is None:
                raise AgentError("the recorded trace holds no events to replay")
            return self._last
        self._last = at
        return at

    def monotonic(self) -> float:
        return 0.0 if self._last is None else self._last.timestamp()

    def sleep(self, seconds: float) -> None:
        del seconds  # a replay waits for nothing: the recorded model_waited is compared


class _ReplayIds:
    """Serves the recorded run id, tool-call ids and retry jitters."""

    def __init__(self, run_id: RunId, call_ids: list[CallId], jitters: list[float]) -> None:
        self._run_id = run_id
        self._call_ids = iter(call_ids)
        self._jitters = iter(jitters)

    def jitter(self) -> float:
        # One past the record: the extra wait it is for is reported by the comparing sink.
        return next(self._jitters, 0.5)

    def run_id(self) -> RunId:
        return self._run_id

    def call_id(self) -> CallId:
        call_id = next(self._call_ids, None)
        if call_id is None:
            raise AgentError("the re-run asked for more call ids than the recorded run used")
        return call_id


class _ReplayModel:
    """Serves the recorded model responses in order; re-raises a recorded model failure."""

    def __init__(
        self,
        responses: list[ModelResponse | ModelWaited],
        failure: RunFailed | None,
        refused: tuple[Attempt, ...] = (),
        fallbacks: list[Fallbacks] | None = None,
        costs: Sequence[ReplyCost | None] = (),
    ):
        self._responses = iter(responses)
        self._costs = iter(costs)
        self._cost: ReplyCost | None = None
        self._failure = failure
        self._refused = refused
        self._fallbacks = iter(fallbacks or ())

    def take_cost(self) -> tuple[bool, ReplyCost | None]:
        """The recorded cost of the response just served (the recorded price, not today's)."""
        return True, self._cost

    def take_fallbacks(self) -> Fallbacks:
        """A fallback list's recorded switches on the request just served, and who answered."""
        return next(self._fallbacks, ((), None))

    def request(self, request: ModelRequest) -> ModelResponse:
        del request  # compared as the model_requested event the agent wrote just before
        response = next(self._responses, None)
        if isinstance(response, ModelWaited):
            # The record waited here: refuse as the server did; the agent waits (for nothing).
            raise recorded_refusal(response)
        if response is not None:
            self._cost = next(self._costs, None)
            return response
        if self._failure is not None and self._refused:
            # The recorded model never gave a valid action: refuse with the recorded replies,
            # so the agent records them (and fails) exactly as it did.
            raise StructuredOutputError("recorded refusals", attempts=self._refused)
        if self._failure is not None:
            # The recorded run failed here (a transport error, say): fail the same way, with
            # the recorded type name and message, so the run_failed events match.
            failure_type = type(
                self._failure.error_type,
                (RecordedFailure,),
                {"recorded_reason": self._failure.reason},
            )
            raise failure_type(self._failure.message)
        raise AgentError("the re-run asked the model more often than the recorded run did")


class _RecordedToolResults:
    """In ``recorded`` mode: the results that followed each recorded tool call, in order."""

    def __init__(self, returned: list[ToolReturned]) -> None:
        self._returned = iter(returned)

    def __call__(self, call: ToolCallPart) -> ToolReturned:
        returned = next(self._returned, None)
        if returned is None:
            raise AgentError(f"no recorded result for tool call {call.id} ({call.name})")
        return returned


class _RecordedSteering:
    """Serves the recorded steering messages, each before the step it was recorded at."""

    def __init__(self, received: list[SteeringReceived]) -> None:
        self._by_step: dict[int, list[str]] = {}
        for event in received:
            self._by_step.setdefault(event.step, []).append(event.text)

    def __call__(self, step: int) -> list[str]:
        return self._by_step.pop(step, [])
