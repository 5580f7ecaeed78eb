"""The step: what one run does between its start and its end, written once for every run.

`Steps` is the loop's half of `twinflow.agent.Agent` (which adds the configuration and the
front door): ask the model with what is new in the conversation, check its reply, run the
calls it makes under the policy (after a person decided, for those that wait), and accept or
re-ask the final answer. Every event goes to the writer as a typed value (`_emit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Generic, Literal, NoReturn

from pydantic import BaseModel
from typing_extensions import TypeVar

from twinflow.agent._errors import AgentConfigError, CannotResume, RunError, RunPaused
from twinflow.agent._events import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetExceeded,
    EventBody,
    InputAnswered,
    InputRequested,
    ModelFellBack,
    ModelRequested,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    ReplyCost,
    RunStarted,
    SteeringReceived,
    ToolCalled,
    ToolReturned,
)
from twinflow.agent._mcp import McpTools
from twinflow.agent._observe import Observer, Steering, poll_steering
from twinflow.agent._policy import Policy, ToolRunner
from twinflow.agent._resume import Paused
from twinflow.agent._retry import RetryLimits, next_wait, refusal, waited_event
from twinflow.agent._run import (
    RunState,
    UsageLimits,
    bad_output_type,
    check_call_ids,
    emission,
    over_limit,
    typed_parts,
)
from twinflow.agent._tools import Tool
from twinflow.agent._trace import TraceWriter
from twinflow.kernel import Clock, Ids, TransportError
from twinflow.models._providers import PROVIDERS
from twinflow.vocab import (
    ChatModel,
    ExtensionPart,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    StructuredOutputAdapter,
    StructuredOutputError,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    digest,
)
from twinflow.vocab._envelope import envelope
from twinflow.vocab._reask import reask_message

__all__ = ["OutputT", "Steps"]

# Defaults to str, so a bare `Agent` (and `Agent(model, ...)` without an output type) is a
# text agent: one constructor, no overloads.
OutputT = TypeVar("OutputT", default=str)


class Steps(Generic[OutputT]):
    """The loop of a run, over the configuration `Agent` sets (declared here)."""

    model: ChatModel
    clock: Clock
    ids: Ids
    policy: Policy
    output_type: type[OutputT]
    structured: StructuredOutputAdapter
    max_steps: int
    usage_limits: UsageLimits
    retries: RetryLimits
    settings: ModelSettings
    observer: Observer | None
    steering: Steering | None
    writer: TraceWriter
    tools: dict[str, Tool]
    servers: tuple[McpTools, ...]
    part_kinds: dict[str, type[ExtensionPart]]
    _specs: tuple[ToolSpec, ...]
    _schema: OutputSchema | None
    _schema_digest: str | None
    _offer_digests: dict[tuple[str, ...], str]
    _inserts: dict[int, EventBody]
    _decisions: dict[str, ApprovalDecided]
    _inputs: dict[str, list[InputRequested | InputAnswered]]
    _served: dict[int, tuple[EventBody, ...]]
    _last_at: datetime | None = None
    _started_at: datetime | None = None
    _real_sleep: Callable[[float], None]

    def _register(self, tools: Sequence[Tool]) -> None:
        for tool in tools:
            if tool.name in self.tools:
                raise AgentConfigError(
                    f"two tools are named {tool.name!r}; tool names must be unique"
                )
            self.tools[tool.name] = tool

    def _relist(self, step: int) -> None:
        """Before a step: a server whose tool list changed is listed again, traced, and offered."""
        for server in self.servers:
            listed = server.relist(step)
            if listed is None:
                continue
            self._emit(listed)
            prefix = f"{server.name}."
            kept = {n: t for n, t in self.tools.items() if not n.startswith(prefix)}
            self.tools.clear()
            self.tools.update(kept)
            self._register(server.tools)
            self._specs = tuple(t.spec for t in self.tools.values())
            # The digests kept are of the old listing: a tool listed again under its name may
            # have a new schema (and a server listing at every step must not grow the table).
            self._offer_digests.clear()

    def _emit(self, body: EventBody) -> None:
        inserts = self._inserts
        while inserts and self.writer.size in inserts:
            self._write(inserts.pop(self.writer.size))
        self._write(body)

    # Sees every event as the observer does, without asking a streaming model to stream:
    # what a sub-agent call learns of its child run (`twinflow.agent._subagent`).
    _tap: Callable[[EventBody], None] | None = None

    def _write(self, body: EventBody) -> None:
        self._last_at = at = self.clock.now()
        if isinstance(body, RunStarted):
            self._started_at = at
        self.writer.append(at, body)
        if self.observer is not None:
            self.observer(body)
        if self._tap is not None:
            self._tap(body)

    def _loop(self, state: RunState, runner: ToolRunner) -> OutputT:
        # Steps are numbered through the run: a later turn's first step follows the last one.
        first = state.step + 1
        for step in range(first, first + self.max_steps):
            state.step = step
            if step > 1:
                self._relist(step)
            state.offered = tuple(s for s in self._specs if runner.may_call(s.name))
            if self.steering is not None:
                self._steer(state, poll_steering(self.steering, step))
            response = self._ask(state, "step")
            calls = response.message.tool_calls
            if not calls:
                state.transcript = state.transcript.append(response.message)
                return self._finish(state, response)
            check_call_ids(state, calls)
            served = self._served.pop(step, None)
            if served is not None:
                results = self._serve(state, calls, served, runner)
            else:
                self._ask_people(state, calls)
                results = tuple(runner.run(call) for call in calls)
            state.tool_calls += len(calls)
            self._check_limits(state)
            answered = Message(role="tool", parts=results)
            # One append per step (the reply and its results): one copy of the messages tuple.
            state.transcript = state.transcript.append(response.message, answered)
            self.writer.end_step()
        raise RunError(
            f"run {state.run_id}: the model was still calling tools after max_steps={self.max_steps} "
            f"requests; {self._max_steps_hint(runner)}",
            reason="max_steps",
        )

    def _max_steps_hint(self, runner: ToolRunner) -> str:
        """What to do about a run that ran out of steps: refused calls come before more steps."""
        if not runner.refused:
            return "raise max_steps or check the tools' results"
        refused = sum(runner.refused.values())
        which = ", ".join(
            f"{name} {error_type} x{count}" for (name, error_type), count in runner.refused.items()
        )
        allowed = ", ".join(sorted(self.policy.allow)) or "no tool"
        if refused == runner.decided:
            return (
                f"all {refused} tool calls were refused ({which}; the policy allows {allowed}): "
                "fix the policy or the tool calls, more steps will not help"
            )
        return (
            f"{refused} of {runner.decided} tool calls were refused ({which}; the policy allows "
            f"{allowed}): check the policy before raising max_steps"
        )

    def _ask(self, state: RunState, purpose: Literal["step", "reask"]) -> ModelResponse:
        """Send the transcript; a re-ask's reply joins it here, a step's with its tool results."""
        request = self._record_request(state, purpose)
        try:
            try:
                response = self._send(state, request)
            finally:
                answered_by = self._fell_back(state.step)
        except StructuredOutputError as exc:
            raise self._no_valid_reply(state, exc) from exc
        cost = self._cost(response, answered_by)
        self._emit(
            ModelResponded(step=state.step, response=response, answered_by=answered_by, cost=cost)
        )
        response = typed_parts(self.part_kinds, state, response)
        state.requests += 1
        state.usage_in += response.usage.input_tokens
        state.usage_out += response.usage.output_tokens
        if cost is not None:
            state.cost_usd += cost.usd
        elif state.unpriced is None:
            state.unpriced = answered_by or self._priced_as or response.model_name or "the model"
        self._check_limits(state)
        if purpose == "reask":
            state.transcript = state.transcript.append(response.message)
        return response

    # The model a reply is charged as (``KIND:NAME@URL``, `twinflow.agent._connect.model_label`):
    # a spec's agent sets it; None for an agent built in Python, whose replies are unpriced.
    _priced_as: str | None = None

    def _cost(self, response: ModelResponse, answered_by: str | None) -> ReplyCost | None:
        """What a reply cost by the shipped price table (None: the model's price is unknown);
        a replay's model serves the recorded cost instead, so a newer table changes nothing."""
        take = getattr(self.model, "take_cost", None)
        if take is not None:
            served, recorded = take()
            if served:
                return recorded  # type: ignore[no-any-return]  # the replaying model's record
        label = answered_by or self._priced_as
        if label is None:
            return None
        price = PROVIDERS.price(label)
        if price is None:
            return None
        usage = response.usage
        return ReplyCost(
            usd=price.cost(usage.input_tokens, usage.output_tokens),
            model=price.model,
            input_per_mtok=price.input_per_mtok,
            output_per_mtok=price.output_per_mtok,
            table=price.table,
        )

    def _fell_back(self, step: int) -> str | None:
        """A fallback list's switches on the last request, each a ``model_fell_back`` event,
        and the label of the model that answered (None for a model that is not a list)."""
        take = getattr(self.model, "take_fallbacks", None)
        if take is None:
            return None
        switches, answered_by = take()
        for switch in switches:
            self._emit(
                ModelFellBack(
                    step=step,
                    model=switch.model,
                    failure=switch.failure,
                    error=switch.error,
                    next=switch.next,
                )
            )
        return None if answered_by is None else str(answered_by)

    def _send(self, state: RunState, request: ModelRequest) -> ModelResponse:
        """The model's reply, the request sent again after each refusal worth a retry (each
        wait a ``model_waited`` event, on the clock port); any other failure is raised."""
        stream = getattr(self.model, "stream", None) if self.observer is not None else None
        attempt = 1
        while True:
            try:
                if stream is not None:
                    # A StreamingChatModel: the observer sees the chunks, the trace the reply.
                    response: ModelResponse = stream(request, self.observer)
                else:
                    response = self.model.request(request)
                return response
            except TransportError as exc:
                found = refusal(exc)
                if found is None:
                    raise
                draw = getattr(self.ids, "jitter", None)
                jitter = draw() if draw is not None else 0.5
                wait = next_wait(
                    self.retries, exc, found, attempt, state.waited, self._last_at, jitter
                )
            self._emit(waited_event(state.step, attempt, found, jitter, wait))
            state.waited += wait
            # A clock without `sleep` (one written before it existed) waits on the real one.
            getattr(self.clock, "sleep", self._real_sleep)(wait)
            attempt += 1

    def _check_limits(self, state: RunState) -> None:
        """End the run once its usage is over a limit: a ``budget_exceeded`` event, then
        the run's error.

        Raises:
            RunError (``usage_limit``): Naming the limit, what was used and the limit.
        """
        started, last = self._started_at, self._last_at
        wall = 0.0 if started is None or last is None else (last - started).total_seconds()
        if self.usage_limits.cost_usd is not None and state.unpriced is not None:
            raise RunError(
                f"run {state.run_id}: {state.unpriced} has no price in the price table "
                f"({PROVIDERS.price_table()}), so the cost_usd limit cannot be kept: "
                "bound tokens instead",
                reason="usage_limit",
            )
        found = over_limit(self.usage_limits, state, wall)
        if found is None:
            return
        name, used, limit = found
        self._emit(BudgetExceeded(budget=name, used=used, limit=limit))
        raise RunError(
            f"run {state.run_id}: {name} reached {used:g}, over the limit of {limit:g} "
            "(budget_exceeded)",
            reason="usage_limit",
        )

    def _record_request(self, state: RunState, purpose: Literal["step", "reask"]) -> ModelRequest:
        """Record what is new since the last request (``model_requested``); the request."""
        # Only what was not sent yet: reading `.messages` would build the whole tuple each step.
        new = state.transcript.messages_from(state.sent)
        self._emit(
            ModelRequested(
                step=state.step,
                purpose=purpose,
                prefix_length=state.chain.length,
                prefix_digest=state.chain.hexdigest,
                new_messages=new,
                tools_digest=self._offer_digest(state.offered),
                output_schema_digest=self._schema_digest,
                settings=self.settings,
            )
        )
        state.chain.update(new)
        state.sent += len(new)  # the transcript's length, without reading it again
        # Every field is an already validated value and tool names were checked unique in
        # __init__; validating again would re-walk the whole transcript each step (O(n)).
        return ModelRequest.of_valid(state.transcript, state.offered, self._schema, self.settings)

    def _serve(
        self,
        state: RunState,
        calls: Sequence[ToolCallPart],
        served: tuple[EventBody, ...],
        runner: ToolRunner,
    ) -> tuple[ToolResultPart, ...]:
        """A step a fork takes from its parent: the parent's decisions and results, as recorded.

        Nothing is decided again and nothing runs: a call the parent's policy (or a person)
        denied stays denied whatever this run's policy says, and a call that ran is answered
        with its recorded result. The events are written as the parent recorded them (the
        child's ``run_started.parent.step`` says which steps are served).

        Raises:
            CannotResume: The recorded step does not answer each call of its reply, in order.
        """
        results = tuple(b.result for b in served if isinstance(b, ToolReturned))
        if tuple(r.call_id for r in results) != tuple(c.id for c in calls):
            raise CannotResume(
                f"run {state.run_id}: step {state.step} of the parent does not answer the calls "
                "of its reply one by one, in order; it cannot be served"
            )
        contents = {r.call_id: r.content for r in results}
        for body in served:
            if isinstance(body, ToolCalled):
                runner.served(body.tool, body.arguments, contents.get(body.call_id))
            self._emit(body)
        return results

    def _ask_people(self, state: RunState, calls: Sequence[ToolCallPart]) -> None:
        """Record the calls that wait for a person; stop unless each has its decision.

        Nothing of the reply runs before every call in it that waits is decided, so a decision
        is taken knowing the whole reply, and a resume re-runs the reply from its start.
        """
        asked = [call for call in calls if call.name in self.policy.ask]
        if not asked:
            return
        requested = []
        for call in asked:
            request = ApprovalRequested(
                call_id=call.id,
                tool=call.name,
                arguments=call.arguments,
                digest=digest({"call_id": call.id, "tool": call.name, "arguments": call.arguments}),
            )
            self._emit(request)
            requested.append(request)
        # Decisions go in the order they were recorded (then the order given): a decision
        # taken on its own, before the others of the reply, keeps its place in the trace.
        waiting = {r.call_id for r in requested}
        for call_id, decided in list(self._decisions.items()):
            if call_id in waiting:
                self._emit(decided)
        pending = tuple(r for r in requested if r.call_id not in self._decisions)
        if pending:
            names = ", ".join(f"{p.call_id} ({p.tool})" for p in pending)
            raise RunPaused(
                f"run {state.run_id} waits for a decision on {names}",
                Paused(run_id=state.run_id, pending=pending, events=self.writer.size),
            )

    def _pauser(self, state: RunState) -> Callable[[tuple[InputRequested, ...]], NoReturn]:
        """What stops the run when a call's server waits for a person's answer."""

        def pause(waiting: tuple[InputRequested, ...]) -> NoReturn:
            names = ", ".join(f"{w.key!a} of call {w.call_id} ({w.tool})" for w in waiting)
            raise RunPaused(
                f"run {state.run_id} waits for an answer to {names}",
                Paused(run_id=state.run_id, pending=waiting, events=self.writer.size),
            )

        return pause

    def _steer(self, state: RunState, texts: list[str]) -> None:
        """Record each steering message and add it to the conversation as a tagged user turn."""
        for text in texts:
            self._emit(SteeringReceived(step=state.step, text=text))
            state.transcript = state.transcript.append(envelope("steering", text))

    def _offer_digest(self, offered: tuple[ToolSpec, ...]) -> str:
        names = tuple(spec.name for spec in offered)
        found = self._offer_digests.get(names)
        if found is None:
            found = digest([spec.model_dump(mode="json") for spec in offered])
            self._offer_digests[names] = found
        return found

    def _no_valid_reply(self, state: RunState, exc: StructuredOutputError) -> RunError:
        """Record every refused reply, then the run's error: one failure path with the others."""
        for attempt in exc.attempts:
            self._emit(
                OutputRejected(
                    attempt=attempt.number,
                    emission=attempt.emission,
                    error=attempt.error or "refused",
                )
            )
        last = exc.attempts[-1].error if exc.attempts else None
        return RunError(
            f"run {state.run_id}: the model never produced a valid action at step {state.step} "
            f"in {len(exc.attempts)} attempt(s); last error: {last}. Every reply is in the trace "
            "(output_rejected events); offer fewer or simpler tools, or use a stronger model",
            reason="invalid_reply",
            attempts=exc.attempts,
        )

    def _finish(self, state: RunState, response: ModelResponse) -> OutputT:
        output_type = self.output_type
        if self._schema is None or not issubclass(output_type, BaseModel):
            text = response.message.text
            # str is the only other output type the constructor accepts; the check is what
            # lets the text be returned as OutputT, and it refuses an output_type changed since.
            if not isinstance(text, output_type):
                raise bad_output_type(output_type)
            self._emit(OutputAccepted(attempts=1, schema_name=None, value=text))
            return text
        emissions = [emission(response.message)]
        schema_name = self._schema.name

        def reask(error: str) -> str:
            self._emit(OutputRejected(attempt=len(emissions), emission=emissions[-1], error=error))
            state.transcript = state.transcript.append(Message.user(reask_message(error)))
            emissions.append(emission(self._ask(state, "reask").message))
            return emissions[-1]

        try:
            result = self.structured.validate(emissions[0], output_type, reask)
        except StructuredOutputError as exc:
            last = exc.attempts[-1] if exc.attempts else None
            if last is not None and last.error is not None:
                self._emit(
                    OutputRejected(attempt=last.number, emission=last.emission, error=last.error)
                )
            raise RunError(
                f"run {state.run_id}: the {schema_name} output did not validate: {exc}",
                reason="output_invalid",
            ) from exc
        self._emit(
            OutputAccepted(
                attempts=len(result.attempts),
                schema_name=schema_name,
                value=result.output.model_dump(mode="json"),
            )
        )
        return result.output
