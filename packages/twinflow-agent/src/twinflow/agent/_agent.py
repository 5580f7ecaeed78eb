"""The agent loop: ask the model, run the tools it asks for under the policy, repeat, answer.

Synchronous and deterministic given its ports: the model, the clock, the ids and the trace
sink are injected (the real clock and ids by default). Each step records only its delta (new
messages, the response, the decisions and results) as typed events handed to the writer, so a
step's cost does not grow with the length of the run.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Generic, Literal

from pydantic import BaseModel
from typing_extensions import TypeVar

from twinflow.agent._errors import (
    AgentConfigError,
    InvalidModelReply,
    MaxStepsExceeded,
    OutputValidationFailed,
)
from twinflow.agent._events import (
    AgentConfig,
    ApprovalDecided,
    ApprovalRequested,
    Environment,
    EventBody,
    ForkParent,
    ModelRequested,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    PartKindRecord,
    RunFailed,
    RunFinished,
    RunStarted,
    SteeringReceived,
)
from twinflow.agent._mcp import McpTools
from twinflow.agent._observe import Observer, Steering, poll_steering
from twinflow.agent._policy import Policy, RecordedResults, ToolRunner
from twinflow.agent._replay import REPLAY_KINDS, ReplayMode, ReplayPorts, ReplayResult, replay
from twinflow.agent._resume import Decision, Paused, RunPaused
from twinflow.agent._run import (
    RunResult,
    RunState,
    UsageLimits,
    bad_output_type,
    check_call_ids,
    check_limits,
    class_path,
    emission,
    part_kinds_of,
    typed_parts,
)
from twinflow.agent._structured import PydanticStructuredOutput
from twinflow.agent._tools import Tool
from twinflow.agent._trace import TraceWriter
from twinflow.agent._verify import Trace
from twinflow.kernel import Clock, Closing, Ids, SystemClock, SystemIds
from twinflow.trace import FileTraceSink, FsyncPolicy, MemoryTraceSink, TraceSink
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
    ToolSpec,
    Transcript,
    digest,
    envelope,
    reask_message,  # the one re-ask message, shared with the model clients
)

__all__ = ["Agent", "RunResult", "UsageLimits"]

# Defaults to str, so a bare `Agent` (and `Agent(model, ...)` without an output type) is a
# text agent: one constructor, no overloads.
OutputT = TypeVar("OutputT", default=str)


def _opened_model(model: ChatModel | str) -> tuple[ChatModel, bool]:
    """The model, and whether the agent opened it (then `Agent.close` closes it)."""
    if not isinstance(model, str):
        return model, False
    try:
        models = importlib.import_module("twinflow.models")
    except ImportError:
        raise AgentConfigError(
            f"model={model!r} names a model, and opening one by name needs the "
            "twinflow-models distribution (pip install twinflow-models); or pass a ChatModel"
        ) from None
    opened: ChatModel = models.open_model(model)
    return opened, True


def _sink(trace: TraceSink | str | os.PathLike[str] | None) -> TraceSink:
    """The sink a ``trace`` argument names: a path is a new trace file (its folder made)."""
    if trace is None:
        return MemoryTraceSink()
    if isinstance(trace, str | os.PathLike):
        Path(trace).parent.mkdir(parents=True, exist_ok=True)
        return FileTraceSink(trace)
    return trace


class Agent(Closing, Generic[OutputT]):
    """Runs a model with tools under a deny-by-default policy, tracing every event.

    Args:
        model: The chat model: any `ChatModel`, or a name `twinflow.models.open_model` opens
            (``"embedded"``, ``"http://host:8080/v1"``, ``"openai:gpt-4o-mini"``); a model
            opened here is closed by `close` (use the agent in a ``with`` block).
        clock: Clock port; every event's ``at`` comes from it (default: `SystemClock`).
        ids: Ids port; run ids come from it (default: `SystemIds`).
        tools: Tools, typed callables turned into tools, and MCP servers (`McpTools`,
            each started here if it was not: its tools are named ``<server>.<tool>``).
        policy: Tool policy (default: deny every tool).
        output_type: Pydantic model of the final answer; ``str`` (the default) for the
            model's final text.
        structured: Adapter validating the answer (default `PydanticStructuredOutput`).
        max_steps: Model requests allowed while the model keeps calling tools.
        usage_limits: Limits on requests and tokens.
        system: System message opening every run (the spec's `system`).
        settings: Model settings sent with every request.
        trace: Where trace lines go: a `TraceSink`, or the path of a new trace file
            (default: an in-memory sink). Runs append to it.
        fsync: When trace lines are made durable.
        observer: Watches the run: every event as recorded and, when the model has
            `stream` (a `StreamingChatModel`), every raw chunk of its replies as they
            arrive. The trace is the same with or without it.
        steering: Messages to add between steps (a callback of the step, or a queue);
            each is recorded as `steering_received` and sent as a tagged user turn.
        model_label: The model's name in the trace's configuration (default: the model's
            class name); replay passes the recorded one (`ReplayPorts.model_label`).
        tool_results: Serve each allowed call's result from a record instead of running
            the tool (replay's recorded mode, `ReplayPorts.tool_results`). Every policy
            decision is still made and traced; only the function call is replaced.
        part_kinds: The extension part classes (`twinflow.vocab.ExtensionPart`
            subclasses) the model's replies may hold; recorded in ``run_started``. A reply
            holding a part of any other extension kind fails the run (`InvalidModelReply`).
        environment: Where the agent runs (`Environment`), recorded in ``run_started``;
            replay passes the recorded one (`ReplayPorts.environment`).

    Raises:
        AgentConfigError: Duplicate tool names, a policy naming unknown tools, a bad
            ``max_steps``, an ``output_type`` that is neither ``str`` nor a pydantic model
            class, ``part_kinds`` holding something other than extension part classes (or one
            kind twice), or a model name with no models distribution to open it.
    """

    def __init__(
        self,
        model: ChatModel | str,
        *,
        clock: Clock | None = None,
        ids: Ids | None = None,
        tools: Sequence[Tool | McpTools | Callable[..., Any]] = (),
        policy: Policy | None = None,
        output_type: type[OutputT] = str,  # type: ignore[assignment]  # the default binds OutputT to str (PEP 696), which mypy cannot see
        structured: StructuredOutputAdapter | None = None,
        max_steps: int = 10,
        usage_limits: UsageLimits | None = None,
        system: str | None = None,
        settings: ModelSettings | None = None,
        trace: TraceSink | str | os.PathLike[str] | None = None,
        fsync: FsyncPolicy = "step",
        observer: Observer | None = None,
        steering: Steering | None = None,
        model_label: str | None = None,
        tool_results: RecordedResults | None = None,
        part_kinds: Sequence[type[ExtensionPart]] = (),
        environment: Environment | None = None,
    ) -> None:
        """Configure an agent (the arguments are described on the class)."""
        if max_steps < 1:
            raise AgentConfigError(f"max_steps must be at least 1, not {max_steps}")
        if output_type is not str and not (
            isinstance(output_type, type) and issubclass(output_type, BaseModel)
        ):
            raise bad_output_type(output_type)
        # What a replay of this agent is built with again (`replay`), its ports aside.
        self._options: dict[str, Any] = {
            "tools": tools,
            "policy": policy,
            "output_type": output_type,
            "structured": structured,
            "max_steps": max_steps,
            "usage_limits": usage_limits,
            "system": system,
            "settings": settings,
            "part_kinds": part_kinds,
        }
        self.model, self._owns_model = _opened_model(model)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.ids: Ids = ids if ids is not None else SystemIds()
        self.policy = policy if policy is not None else Policy()
        self.output_type = output_type
        self.structured: StructuredOutputAdapter = structured or PydanticStructuredOutput()
        self.max_steps = max_steps
        self.usage_limits = usage_limits or UsageLimits()
        self.system = system
        self.settings = settings or ModelSettings()
        self.observer = observer
        self.steering = steering
        self.writer = TraceWriter(_sink(trace), fsync=fsync)
        self.tool_results = tool_results
        self.part_kinds = part_kinds_of(part_kinds)
        self.environment = environment
        # The environment run_started records: this agent's, or a resumed run's recorded one.
        self._started_in = environment
        self._add_tools(tools)
        self._schema = (
            OutputSchema.for_model(output_type) if issubclass(output_type, BaseModel) else None
        )
        self._configure(model_label)
        # Events written where a record has them (a resume's run_resumed, say), by sequence
        # number, and a person's decisions by call id: both empty for a fresh run.
        self._inserts: dict[int, EventBody] = {}
        self._decisions: dict[str, ApprovalDecided] = {}
        self._parent: ForkParent | None = None

    def _add_tools(self, tools: Sequence[Tool | McpTools | Callable[..., Any]]) -> None:
        """Register the tools and MCP servers; check the policy names only registered tools."""
        self.tools: dict[str, Tool] = {}
        self.servers: tuple[McpTools, ...] = tuple(t for t in tools if isinstance(t, McpTools))
        """The MCP servers whose tools the agent offers (their lists are traced)."""
        if len({server.name for server in self.servers}) < len(self.servers):
            names = sorted(server.name for server in self.servers)
            raise AgentConfigError(f"two MCP servers share a name ({names}); names must be unique")
        for item in tools:
            if isinstance(item, McpTools):
                self._register(item.tools)
            else:
                self._register([item if isinstance(item, Tool) else Tool.from_function(item)])
        unknown = sorted(
            (self.policy.allow | self.policy.ask | self.policy.repeat_safe) - set(self.tools)
        )
        if unknown:
            raise AgentConfigError(
                f"the policy allows tools that are not registered: {unknown}; "
                f"registered: {sorted(self.tools)}"
            )
        self._specs = tuple(t.spec for t in self.tools.values())
        self.denied_tools = tuple(
            sorted(name for name in self.tools if not self.policy.allows(name))
        )
        """Registered tools the policy does not allow: every call to them will be denied."""

    def _configure(self, model_label: str | None) -> None:
        """The configuration every run records, and the digests every request records."""
        self.config = AgentConfig(
            part_kinds=tuple(
                PartKindRecord(kind=kind, type=class_path(cls))
                for kind, cls in self.part_kinds.items()
            ),
            model=type(self.model).__name__ if model_label is None else model_label,
            system_prompt=self.system,
            tools=self._specs,
            policy=self.policy.record(),
            output_schema=self._schema,
            max_steps=self.max_steps,
            usage_limits=self.usage_limits.model_dump(),
            settings=self.settings,
        )
        self.config_digest = digest(self.config)
        # By the offered tools' names: the specs behind a name change only when a server lists
        # again, and `_relist` empties it then.
        self._offer_digests: dict[tuple[str, ...], str] = {}
        self._schema_digest = None if self._schema is None else digest(self._schema)

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

    def close(self) -> None:
        """Close the trace writer (and its sink), and a model the agent opened by name."""
        try:
            self.writer.close()
        finally:
            if self._owns_model:
                self._owns_model = False
                close = getattr(self.model, "close", None)
                if close is not None:
                    close()

    @property
    def trace_path(self) -> str | None:
        """The trace file runs are written to; None for a sink that is not a file."""
        path = getattr(self.writer.sink, "path", None)
        return None if path is None else os.fspath(path)

    def _emit(self, body: EventBody) -> None:
        inserts = self._inserts
        while inserts and self.writer.size in inserts:
            self._write(inserts.pop(self.writer.size))
        self._write(body)

    def _write(self, body: EventBody) -> None:
        self.writer.append(self.clock.now(), body)
        if self.observer is not None:
            self.observer(body)

    def run(self, prompt: str) -> RunResult[OutputT]:
        """Run the agent on one prompt.

        Args:
            prompt: The user's message.

        Returns:
            The output, transcript, trace head and trace path.

        Raises:
            MaxStepsExceeded: The model still called tools after ``max_steps`` requests.
            UsageLimitExceeded: A usage limit was crossed.
            OutputValidationFailed: The structured output never validated.
            RunPaused: The model called a tool in ``policy.ask``: the run waits for a person
                (``.paused`` lists the calls; `resume` with ``decisions=`` goes on).
            Exception: Whatever the model raised (a transport failure, say), unchanged.
        """
        return self._run(prompt)

    def _run(self, prompt: str) -> RunResult[OutputT]:
        state = self._start(prompt)
        runner = ToolRunner(
            self.tools,
            self.policy,
            self._emit,
            recorded=self.tool_results,
            decisions=self._decisions,
            before_call=self.writer.before_effect,
        )
        try:
            output = self._loop(state, runner)
        except RunPaused:
            self.writer.end_step()
            raise
        except BaseException as exc:
            try:
                self._emit(
                    RunFailed(
                        run_id=state.run_id,
                        steps=state.requests,
                        error_type=type(exc).__name__,
                        message=str(exc),
                    )
                )
            finally:
                # Even if recording the failure fails, what was written is made durable.
                self.writer.end_step()
            raise
        return self._finished(state, output)

    def _start(self, prompt: str) -> RunState:
        """Record the run's start (and its MCP servers' lists); the state of the new run."""
        run_id = self.ids.run_id()
        self._emit(
            RunStarted(
                run_id=run_id,
                config_digest=self.config_digest,
                config=self.config,
                prompt=prompt,
                parent=self._parent,
                environment=self._started_in,
            )
        )
        for server in self.servers:
            self._emit(server.announce())
        opening = (Message.system(self.system),) if self.system is not None else ()
        return RunState(run_id, Transcript(messages=(*opening, Message.user(prompt))))

    def _finished(self, state: RunState, output: OutputT) -> RunResult[OutputT]:
        """Record the run's end; its result."""
        usage = state.usage()
        self._emit(
            RunFinished(
                run_id=state.run_id,
                steps=state.requests,
                usage=usage,
                transcript_digest=digest(state.transcript),
            )
        )
        self.writer.end_step()
        return RunResult(
            output=output,
            transcript=state.transcript,
            head=self.writer.checkpoint(),
            run_id=state.run_id,
            usage=usage,
            steps=state.requests,
            trace_path=self.trace_path,
        )

    def _loop(self, state: RunState, runner: ToolRunner) -> OutputT:
        for step in range(1, self.max_steps + 1):
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
            self._ask_people(state, calls)
            results = tuple(runner.run(call) for call in calls)
            answered = Message(role="tool", parts=results)
            # One append per step (the reply and its results): one copy of the messages tuple.
            state.transcript = state.transcript.append(response.message, answered)
            self.writer.end_step()
        raise MaxStepsExceeded(
            f"run {state.run_id}: the model was still calling tools after max_steps={self.max_steps} "
            f"requests; {self._max_steps_hint(runner)}"
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
        stream = getattr(self.model, "stream", None) if self.observer is not None else None
        try:
            if stream is not None:
                # A StreamingChatModel: the observer sees the chunks, the trace the assembled reply.
                response: ModelResponse = stream(request, self.observer)
            else:
                response = self.model.request(request)
        except StructuredOutputError as exc:
            raise self._no_valid_reply(state, exc) from exc
        self._emit(ModelResponded(step=state.step, response=response))
        response = typed_parts(self.part_kinds, state, response)
        state.requests += 1
        state.usage_in += response.usage.input_tokens
        state.usage_out += response.usage.output_tokens
        check_limits(self.usage_limits, state)
        if purpose == "reask":
            state.transcript = state.transcript.append(response.message)
        return response

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
        state.sent = len(state.transcript)
        # Every field is an already validated value and tool names were checked unique in
        # __init__; validating again would re-walk the whole transcript each step (O(n)).
        return ModelRequest.of_valid(state.transcript, state.offered, self._schema, self.settings)

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

    def resume(
        self,
        trace: str | os.PathLike[str],
        *,
        decisions: Iterable[Decision] = (),
    ) -> RunResult[OutputT]:
        """Continue the run recorded in ``trace``, appending to it.

        The recorded prefix is re-run with this agent's code against the record, as
        `replay` does in recorded mode: no model request and no tool call is made for anything
        the trace holds. Once every recorded event is matched, ``run_resumed`` is appended and
        the run goes on with this agent's model, clock and tools, into the same file. The
        trace's writer lock is held throughout; a torn last line is first moved aside (as
        `repair_trace` does).

        Args:
            trace: The trace file of a run that has no terminal event, failed for a reason that
                can pass (a transport error, a timeout), or waits for approval.
            decisions: Decisions on calls waiting for approval (see `Paused`).

        Returns:
            The run's result, as `run` returns it.

        Raises:
            TraceLockedError: Another process is writing the trace; nothing was written.
            TraceCorruptError: The trace does not verify (``.report`` names the event).
            CannotResume: The run finished, failed for good, stopped inside a tool that is
                not safe to repeat, or a decision names a call that is not waiting.
            ReplayDivergenceError: This agent's code does not reproduce the recorded prefix.
            RunPaused: The run reached another call that waits for a person.
        """
        from twinflow.agent._continue import resume_run  # it drives this class's loop

        return resume_run(self, trace, decisions)

    def fork(self, parent: str | os.PathLike[str], *, at_step: int) -> RunResult[OutputT]:
        """Start a new run that takes the first ``at_step - 1`` steps from ``parent``'s trace.

        The parent's model responses, tool results, steering and decisions for those steps are
        served from its (verified) trace: no model request and no tool call is made for them.
        From step ``at_step`` on, this agent's model and tools (another model, prompt steering,
        tools or policy) run live. The new run is written to this agent's own trace, whose
        ``run_started`` names the parent (`ForkParent`: its root, size and the step).

        Args:
            parent: The parent run's trace file (not changed).
            at_step: The first step asked of this agent's model (from 1).

        Returns:
            The new run's result.

        Raises:
            TraceCorruptError: The parent trace does not verify.
            CannotResume: The parent has no step ``at_step``.
            RunPaused: The new run reached a call that waits for a person.
        """
        from twinflow.agent._continue import fork_run  # it drives this class's loop

        return fork_run(self, parent, at_step)

    def replay(
        self, trace: str | os.PathLike[str] | bytes, *, mode: ReplayMode = "recorded"
    ) -> ReplayResult:
        """Re-run this agent's configuration against a recorded trace, event by event.

        An agent configured as this one (tools, policy, output type, settings...) is built on
        replaying ports (`ReplayPorts`) and run on the recorded prompt; `replay` has the rest.

        Args:
            trace: A trace file (or its bytes) recorded by an agent configured as this one.
            mode: ``recorded`` serves tool results from the trace; ``live`` runs the tools.

        Returns:
            The result, when every event matched (``.root`` is the shared Merkle root).

        Raises:
            TraceCorruptError: The trace does not verify.
            ReplayDivergenceError: The first event that differs.
            NondeterminismError: Replayed code reached time, randomness or the network.
        """
        return replay(Trace.load(trace, keep=REPLAY_KINDS), self._on_ports, mode=mode)

    def _on_ports(self, ports: ReplayPorts) -> Agent[Any]:
        """An agent configured as this one, on the replaying ports."""
        return Agent(
            ports.model,
            clock=ports.clock,
            ids=ports.ids,
            trace=ports.trace,
            model_label=ports.model_label,
            tool_results=ports.tool_results,
            steering=ports.steering,
            environment=ports.environment,
            **self._options,
        )

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

    def _no_valid_reply(self, state: RunState, exc: StructuredOutputError) -> InvalidModelReply:
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
        return InvalidModelReply(
            f"run {state.run_id}: the model never produced a valid action at step {state.step} "
            f"in {len(exc.attempts)} attempt(s); last error: {last}. Every reply is in the trace "
            "(output_rejected events); offer fewer or simpler tools, or use a stronger model",
            exc.attempts,
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
            raise OutputValidationFailed(
                f"run {state.run_id}: the {schema_name} output did not validate: {exc}"
            ) from exc
        self._emit(
            OutputAccepted(
                attempts=len(result.attempts),
                schema_name=schema_name,
                value=result.output.model_dump(mode="json"),
            )
        )
        return result.output
