"""Input an MCP server asked for during a call, as a trace holds it: each request with its
answer, what a signed answer signs, and the check of an answer against the requested schema
(docs/adr/0199).

A request is named by its call, its round and the server's key for it. An answer's statement
names everything it is about, each recomputed from the trace's events by whoever checks it: the
run (its id, and the trace's size and root just after the request), the call, the tool, the
request, the digest of the schema shown, the action and the digest of the values sent. An
answer copied to another request, or edited after it was signed, does not verify.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from pydantic import JsonValue

from twinflow.agent._errors import CannotResume, McpToolFailed
from twinflow.agent._events import (
    InputAnswered,
    InputRequested,
    RunStarted,
    TraceEvent,
)
from twinflow.agent._mcp_checks import first_error, schema_validator
from twinflow.agent._verify import Trace
from twinflow.kernel import McpError
from twinflow.vocab import CallId, digest

if TYPE_CHECKING:
    from twinflow.agent._mcp import Answer, Ask

__all__ = [
    "InputAsker",
    "InputWait",
    "answer_problem",
    "input_pause",
    "input_waits",
    "recorded_inputs",
    "request_name",
]

CALLBACK = "callback"
"""The ``by`` of an answer the server's Python callback gave (never a person's name)."""

STATEMENT = "twinflow input answer v1"
"""The first line of the statement a signed answer signs."""


def request_name(call_id: str, round_: int, key: str) -> str:
    """How a request is named in messages: its call, round and key."""
    return f"call {call_id!a} round {round_} request {key!a}"


def answer_problem(schema: dict[str, JsonValue], content: JsonValue) -> str | None:
    """Why ``content`` does not answer a form of ``schema``, naming the field by its JSON
    pointer (``/yes``; the empty pointer for the whole value), or None if it does."""
    try:
        validator = schema_validator(schema, "the requested schema", "the server")
    except McpError as exc:
        return f"the requested schema cannot be checked against ({exc})"
    found = first_error(validator, content)
    if found is None:
        return None
    path, why = found
    pointer = "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)
    return f"at {pointer!r}: {why}"


@dataclass(frozen=True, slots=True)
class InputWait:
    """A request a call's server made, and its answer if one is recorded."""

    request_seq: int
    request: InputRequested
    answer_seq: int | None
    answer: InputAnswered | None
    run_id: str
    root: str
    """The trace's root (hex) just after the request."""

    def statement(
        self, action: str | None = None, content: dict[str, JsonValue] | None = None
    ) -> str:
        """What an answer to this request signs (default: the recorded answer)."""
        if action is None:
            assert self.answer is not None, "a waiting request has no recorded answer"
            action, content = self.answer.action, self.answer.content
        request = self.request
        return (
            f"{STATEMENT}\n"
            f"run {json.dumps(self.run_id)}\n"
            f"log {self.request_seq + 1} {self.root}\n"
            f"call {json.dumps(request.call_id)}\n"
            f"tool {json.dumps(request.tool)}\n"
            f"request {request.round} {json.dumps(request.key)}\n"
            f"schema {digest(request.requested_schema)}\n"
            f"answer {action} {digest(content)}\n"
        )


def _key(body: InputRequested | InputAnswered) -> tuple[str, int, str]:
    return body.call_id, body.round, body.key


def input_waits(trace: Trace, path: str) -> tuple[InputWait, ...]:
    """Every request for input the trace records, in order, each with its answer.

    Raises:
        CannotResume: A request is recorded twice, an answer names no earlier request, or
            one request is answered twice: which answer is for which request is not certain.
    """
    kinds: Sequence[str] = trace.kinds
    if not trace.size or kinds[0] != "run_started":
        raise CannotResume(f"{path}: does not start with run_started; it is not a run's trace")
    started = trace.events[0].body
    assert isinstance(started, RunStarted)  # kinds[0] says so
    requests: dict[tuple[str, int, str], tuple[int, InputRequested]] = {}
    answers: dict[tuple[str, int, str], tuple[int, InputAnswered]] = {}
    for seq, kind in enumerate(kinds):
        if kind not in ("input_requested", "input_answered"):
            continue
        body = trace.events[seq].body
        if isinstance(body, InputRequested):
            key = _key(body)
            if key in requests:
                raise CannotResume(
                    f"{path}: {request_name(*key)} is recorded twice (seq {requests[key][0]} "
                    f"and {seq})"
                )
            requests[key] = (seq, body)
        elif isinstance(body, InputAnswered):
            key = _key(body)
            if key not in requests:
                raise CannotResume(
                    f"{path}: the answer at seq {seq} is to {request_name(*key)}, which no "
                    "earlier event asks for"
                )
            if key in answers:
                raise CannotResume(
                    f"{path}: {request_name(*key)} is answered twice (seq {answers[key][0]} "
                    f"and {seq})"
                )
            answers[key] = (seq, body)
    return tuple(
        InputWait(
            request_seq=seq,
            request=request,
            answer_seq=answers.get(key, (None, None))[0],
            answer=answers.get(key, (None, None))[1],
            run_id=started.run_id,
            root=trace.checkpoint(seq + 1).root,
        )
        for key, (seq, request) in requests.items()
    )


def input_pause(trace: Trace) -> tuple[InputRequested, ...] | None:
    """The requests a run paused on input still waits for (none left once each is answered),
    or None if the run is not paused on input.

    It is paused on input only if the trace ends with one round's ``input_requested`` events
    of a call that has no result, followed by nothing but people's answers to them: a retry
    may have been sent once the run went on past an answer (a ``run_resumed`` after the
    requests, a callback's answer), so such a call is in flight, not paused.
    """
    kinds = trace.kinds
    answered: set[str] = set()
    requested: list[InputRequested] = []
    index = trace.size - 1
    while index > 0 and kinds[index] == "input_answered":
        body = trace.events[index].body
        assert isinstance(body, InputAnswered)  # its kind says so
        if body.by == CALLBACK:
            return None
        answered.add(body.key)
        index -= 1
    while index > 0 and kinds[index] == "input_requested":
        body = trace.events[index].body
        assert isinstance(body, InputRequested)  # its kind says so
        if requested and (body.call_id, body.round) != (requested[0].call_id, requested[0].round):
            break
        requested.insert(0, body)
        index -= 1
    if not requested or not answered <= {r.key for r in requested}:
        return None
    return tuple(r for r in requested if r.key not in answered)


def recorded_inputs(
    events: Iterable[TraceEvent],
) -> dict[str, list[InputRequested | InputAnswered]]:
    """Each call's recorded requests and answers, in order, by call id (``events`` must hold
    those kinds typed): a replay serves them with the call's result, a resume's re-run of a
    call answers from them."""
    found: dict[str, list[InputRequested | InputAnswered]] = {}
    for event in events:
        body = event.body
        if isinstance(body, InputRequested | InputAnswered):
            found.setdefault(body.call_id, []).append(body)
    return found


Form = tuple[str, str, dict[str, JsonValue]]
"""One form a round asks for: its key, message and schema."""


class InputAsker:
    """A run's answers to its MCP calls' forms: each request and answer an event, a recorded
    answer taken first, then the server's ``answer`` callback; else the run pauses."""

    def __init__(
        self,
        emit: Callable[[InputRequested | InputAnswered], None],
        recorded: Mapping[str, Sequence[InputRequested | InputAnswered]],
        pause: Callable[[tuple[InputRequested, ...]], NoReturn],
    ) -> None:
        """``recorded``: each call's requests and answers a record holds (a replay's, a
        resume's with the answers given to it), by call id; ``pause`` stops the run."""
        self._emit = emit
        self._recorded = recorded
        self._pause = pause

    def served(self, call_id: str) -> Sequence[InputRequested | InputAnswered]:
        """What a call whose result is served from the record asked and was answered."""
        return self._recorded.get(call_id, ())

    def for_call(self, call_id: str, tool: str) -> Ask:
        """The ``ask`` of one call (`McpTools.call`)."""

        def ask(round_: int, forms: list[Form], answer: Answer | None) -> dict[str, JsonValue]:
            return self._ask(call_id, tool, round_, forms, answer)

        return ask

    def _ask(
        self, call_id: str, tool: str, round_: int, forms: list[Form], answer: Answer | None
    ) -> dict[str, JsonValue]:
        record = [b for b in self._recorded.get(call_id, ()) if b.round == round_]
        asked = {b.key: b for b in record if isinstance(b, InputRequested)}
        requests = []
        for key, message, schema in forms:
            request = InputRequested(
                call_id=CallId(call_id),
                tool=tool,
                round=round_,
                key=key,
                message=message,
                requested_schema=schema,
            )
            before = asked.get(key)
            if before is not None and before != request:
                raise CannotResume(
                    f"{tool} asked {message[:200]!r} in {request_name(call_id, round_, key)}, "
                    f"not {before.message[:200]!r} as recorded: the answer recorded is not "
                    "sent to another question; fork the run before this step"
                )
            self._emit(request)
            requests.append(request)
        keys = {key for key, _, _ in forms}
        given: dict[str, JsonValue] = {}
        for body in record:
            # A callback's recorded answer is not taken from the record: the callback is
            # asked again, and what it answers now is compared with it.
            if isinstance(body, InputAnswered) and body.key in keys and body.by != CALLBACK:
                self._emit(body)
                given[body.key] = body.content if body.action == "accept" else None
        waiting = tuple(r for r in requests if r.key not in given)
        if waiting and answer is not None:
            for request in waiting:
                content = answer(tool, request.message, request.requested_schema)
                if content is not None:
                    problem = answer_problem(request.requested_schema, content)
                    if problem is not None:
                        raise McpToolFailed(
                            f"the answer to {tool}'s form does not match its schema {problem}",
                            reason="answer_invalid",
                        )
                self._emit(
                    InputAnswered(
                        call_id=CallId(call_id),
                        round=round_,
                        key=request.key,
                        action="decline" if content is None else "accept",
                        content=content,
                        by=CALLBACK,
                    )
                )
                given[request.key] = content
            waiting = ()
        if waiting:
            self._pause(waiting)
        return given
