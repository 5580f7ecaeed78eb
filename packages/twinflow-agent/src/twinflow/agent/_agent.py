"""The agent loop: ask the model, run the tools it asks for under the policy, repeat, answer.

Synchronous and deterministic given its ports: the model, the clock, the ids and the trace
sink are injected. Each step records only its delta (new messages, the response, the
decisions and results), so a step's cost does not grow with the length of the run.
"""

from __future__ import annotations

import hashlib
import os
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypeVar

from twinflow.agent._encode import (
    declared_bytes,
    integer_bytes,
    layout,
    message_bytes,
    responded_bytes,
    text_bytes,
)
from twinflow.agent._errors import (
    AgentConfigError,
    InvalidModelReply,
    MaxStepsExceeded,
    OutputValidationFailed,
    UsageLimitExceeded,
)
from twinflow.agent._events import (
    AgentConfig,
    ApprovalDecided,
    ApprovalRequested,
    Environment,
    EventBody,
    ForkParent,
    MessageChain,
    ModelRequested,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    PartKindRecord,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    SteeringReceived,
    _Frozen,
)
from twinflow.agent._mcp import McpTools
from twinflow.agent._observe import Observer, Steering, poll_steering
from twinflow.agent._policy import Policy, RecordedResults, ToolRunner
from twinflow.agent._resume import (
    Decision,
    Gate,
    Paused,
    RecordedRunIds,
    ResumeSink,
    RunPaused,
    ThenLiveClock,
    ThenLiveModel,
    ThenLiveResults,
    ThenLiveSteering,
    plan,
    plan_fork,
    recorded_decisions,
    recorded_tool_results,
)
from twinflow.agent._structured import PydanticStructuredOutput
from twinflow.agent._tools import Tool
from twinflow.agent._trace import TraceWriter
from twinflow.agent._verify import Trace
from twinflow.kernel import Clock, Closing, Ids
from twinflow.trace import CanonicalError as TraceCanonicalError
from twinflow.trace import (
    Checkpoint,
    FileTraceSink,
    FsyncPolicy,
    MemoryTraceSink,
    TraceSink,
    canonical_dump_bytes,
    repair_trace,
)
from twinflow.vocab import (
    ChatModel,
    ExtensionPart,
    GenericPart,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    RunId,
    StructuredOutputAdapter,
    StructuredOutputError,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolSpec,
    Transcript,
    Usage,
    assembled,
    digest,
    envelope,
    reask_message,
    validation_error_text,
)
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["Agent", "RunResult", "UsageLimits"]

# Defaults to str, so a bare `Agent` (and `Agent(model, ...)` without an output type) is a
# text agent: one constructor, no overloads.
OutputT = TypeVar("OutputT", default=str)
# RunResult keeps a TypeVar without a default: pydantic validates an unparametrized generic
# model's field against the default, which would refuse a model output as "not a str".
ResultT = typing.TypeVar("ResultT")


class UsageLimits(_Frozen):
    """Limits on one run's usage; None means no limit."""

    requests: int | None = Field(default=None, ge=1)
    """Model requests, re-asks included."""
    input_tokens: int | None = Field(default=None, ge=0)
    """Prompt tokens, summed over requests."""
    output_tokens: int | None = Field(default=None, ge=0)
    """Generated tokens, summed over requests."""
    total_tokens: int | None = Field(default=None, ge=0)
    """Input plus output tokens."""


_LIMITS = tuple(UsageLimits.model_fields)
"""Every usage limit's name: a run is checked against each (a limit added is never skipped)."""


class RunResult(_Frozen, Generic[ResultT]):
    """What a run produced."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    output: ResultT
    """The validated output (a pydantic model), or the final text for a ``str`` output type."""
    transcript: Transcript
    """The whole conversation."""
    head: Checkpoint
    """Trace checkpoint after the run's last event (signed if the agent has a key)."""
    run_id: RunId
    """The run's id."""
    usage: Usage
    """Total usage."""
    steps: int
    """Model requests made, re-asks included."""


class _Run:
    """Mutable state of one run."""

    __slots__ = (
        "call_ids",
        "chain",
        "encoded",
        "offered",
        "requests",
        "run_id",
        "sent",
        "step",
        "transcript",
        "usage_in",
        "usage_out",
    )

    def __init__(self, run_id: RunId, transcript: Transcript) -> None:
        self.run_id = run_id
        self.transcript = transcript
        self.chain = MessageChain()
        # Each message's canonical bytes by identity (the message kept, so its id is not
        # reused): encoded once for the chain, spliced into model_requested and the final
        # transcript digest (ADR 0135).
        self.encoded: dict[int, tuple[Message, bytes]] = {}
        self.call_ids: set[str] = set()
        self.offered: tuple[ToolSpec, ...] = ()
        self.sent = 0
        self.step = 0
        self.requests = 0
        self.usage_in = 0
        self.usage_out = 0


def _message_bytes(state: _Run, message: Message) -> bytes:
    """``canonical_bytes(message)``, encoded once per run."""
    found = state.encoded.get(id(message))
    if found is not None and found[0] is message:
        return found[1]
    encoded = message_bytes(message)
    state.encoded[id(message)] = (message, encoded)
    return encoded


def _transcript_digest(state: _Run) -> str:
    """``digest(state.transcript)``, from each message's bytes: a transcript is its one member."""
    messages = state.transcript.messages
    joined = b",".join(_message_bytes(state, message) for message in messages)
    return hashlib.sha256(b'{"messages":[' + joined + b"]}").hexdigest()


def _dump_bytes(dump: dict[str, Any]) -> bytes | None:
    """The canonical bytes of a JSON-mode dump (the leaf's screened fast path), or None where
    it has none: the writer then encodes the whole event, and its error names the member."""
    try:
        return canonical_dump_bytes(dump)
    except TraceCanonicalError:
        return None


_REQUESTED = layout(ModelRequested)
_STARTED = layout(RunStarted, without=frozenset({"parent", "environment"}))


def _requested_bytes(
    requested: ModelRequested, encoded: list[bytes], settings: bytes
) -> bytes | None:
    """``canonical_bytes(requested)`` from its members: its new messages' and its settings'
    bytes given, the rest digests, counts and a literal (ADR 0140)."""
    schema = requested.output_schema_digest
    try:
        return _REQUESTED % {
            b"new_messages": b"[" + b",".join(encoded) + b"]",
            b"output_schema_digest": b"null" if schema is None else text_bytes(schema),
            b"prefix_digest": text_bytes(requested.prefix_digest),
            b"prefix_length": integer_bytes(requested.prefix_length),
            b"purpose": text_bytes(requested.purpose),
            b"settings": settings,
            b"step": integer_bytes(requested.step),
            b"tools_digest": text_bytes(requested.tools_digest),
        }
    except TraceCanonicalError:
        return None


def _responded_bytes(state: _Run, responded: ModelResponded) -> bytes | None:
    """``canonical_bytes(responded)`` around its message's bytes, which the run keeps for the
    next request (ADR 0140); None where only the whole encoding decides."""
    try:
        return responded_bytes(responded, _message_bytes(state, responded.response.message))
    except TraceCanonicalError:
        return None


def _emission(message: Message) -> str:
    """The raw text a structured output is validated from."""
    for part in message.parts:
        if isinstance(part, StructuredPart):
            return canonical_bytes(part.value).decode()
    return message.text


def _class_path(cls: type) -> str:
    """``module:QualName`` of a class; vocab's own kinds under their public module."""
    module = cls.__module__
    if module.startswith("twinflow.vocab._"):
        module = "twinflow.vocab"
    return f"{module}:{cls.__qualname__}"


def _part_kinds(classes: Sequence[type[ExtensionPart]]) -> dict[str, type[ExtensionPart]]:
    """The declared extension kinds by name, sorted (so the record does not depend on order).

    Raises:
        AgentConfigError: Not an `ExtensionPart` subclass with its own kind, or a kind twice.
    """
    kinds: dict[str, type[ExtensionPart]] = {}
    for index, cls in enumerate(classes):
        if (
            not isinstance(cls, type)
            or not issubclass(cls, ExtensionPart)
            or cls in (ExtensionPart, GenericPart)
            or issubclass(cls, GenericPart)
        ):
            raise AgentConfigError(
                f"part_kinds[{index}]: {cls!r} is not an extension part class (a subclass of "
                "twinflow.vocab.ExtensionPart declaring its kind)"
            )
        kind = cls.model_fields["kind"].default
        if kind in kinds:
            raise AgentConfigError(
                f"part_kinds[{index}]: kind {kind!r} is declared twice ({_class_path(kinds[kind])} "
                f"and {_class_path(cls)})"
            )
        kinds[kind] = cls
    return dict(sorted(kinds.items()))


def _bad_output_type(output_type: object) -> AgentConfigError:
    return AgentConfigError(
        f"output_type must be str or a pydantic model class, not {output_type!r}"
    )


class Agent(Closing, Generic[OutputT]):
    """Runs a model with tools under a deny-by-default policy, tracing every event."""

    def __init__(
        self,
        model: ChatModel,
        *,
        clock: Clock,
        ids: Ids,
        tools: Sequence[Tool | McpTools | Callable[..., Any]] = (),
        policy: Policy | None = None,
        output_type: type[OutputT] = str,  # type: ignore[assignment]  # the default binds OutputT to str (PEP 696), which mypy cannot see
        structured: StructuredOutputAdapter | None = None,
        max_steps: int = 10,
        usage_limits: UsageLimits | None = None,
        system: str | None = None,
        settings: ModelSettings | None = None,
        trace: TraceSink | None = None,
        fsync: FsyncPolicy = "step",
        observer: Observer | None = None,
        steering: Steering | None = None,
        model_label: str | None = None,
        tool_results: RecordedResults | None = None,
        part_kinds: Sequence[type[ExtensionPart]] = (),
        environment: Environment | None = None,
    ) -> None:
        """Configure an agent.

        Args:
            model: The chat model (injected; any `ChatModel`).
            clock: Clock port; every event's ``at`` comes from it.
            ids: Ids port; run ids come from it.
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
            trace: Where trace lines go (default: an in-memory sink). Runs append to it.
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
                subclasses: a plugin's, or vocab's resource links, cache hints...) the model's
                replies may hold; recorded in ``run_started``. A reply holding a part of any
                other extension kind fails the run (`InvalidModelReply`).
            environment: Where the agent runs (`Environment`), recorded in ``run_started``;
                replay passes the recorded one (`ReplayPorts.environment`).

        Raises:
            AgentConfigError: Duplicate tool names, a policy naming unknown tools, a bad
                ``max_steps``, an ``output_type`` that is neither ``str`` nor a pydantic
                model class, or ``part_kinds`` holding something other than extension part
                classes, or one kind twice.
        """
        if max_steps < 1:
            raise AgentConfigError(f"max_steps must be at least 1, not {max_steps}")
        if output_type is not str and not (
            isinstance(output_type, type) and issubclass(output_type, BaseModel)
        ):
            raise _bad_output_type(output_type)
        self.model = model
        self.clock = clock
        self.ids = ids
        self.policy = policy if policy is not None else Policy()
        self.output_type = output_type
        self.structured: StructuredOutputAdapter = structured or PydanticStructuredOutput()
        self.max_steps = max_steps
        self.usage_limits = usage_limits or UsageLimits()
        self.system = system
        self.settings = settings or ModelSettings()
        self.observer = observer
        self.steering = steering
        self.writer = TraceWriter(trace if trace is not None else MemoryTraceSink(), fsync=fsync)
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
        self._schema = (
            OutputSchema.for_model(output_type) if issubclass(output_type, BaseModel) else None
        )
        self.tool_results = tool_results
        self.part_kinds = _part_kinds(part_kinds)
        self.environment = environment
        # The environment run_started records: this agent's, or a resumed run's recorded one.
        self._started_in = environment
        self.config = AgentConfig(
            part_kinds=tuple(
                PartKindRecord(kind=kind, type=_class_path(cls))
                for kind, cls in self.part_kinds.items()
            ),
            model=type(model).__name__ if model_label is None else model_label,
            system_prompt=system,
            tools=self._specs,
            policy=self.policy.record(),
            output_schema=self._schema,
            max_steps=max_steps,
            usage_limits=self.usage_limits.model_dump(),
            settings=self.settings,
        )
        # Encoded once here for the digest, and again into each run's run_started (ADR 0135).
        self._config_bytes = (self.config, canonical_bytes(self.config))
        # The settings every request records, encoded once, at the first request (ADR 0142).
        self._settings_encoded: tuple[ModelSettings | None, bytes] = (None, b"")
        self.config_digest = hashlib.sha256(self._config_bytes[1]).hexdigest()
        self._offer_digests: dict[tuple[str, ...], str] = {}
        # The usual offer, every tool, digested here with the configuration that holds the same
        # specs, rather than in the first request of each run (ADR 0142).
        self._offer_digest(self._specs)
        self._schema_digest = None if self._schema is None else digest(self._schema)
        # Events written where a record has them (a resume's run_resumed, say), by sequence
        # number, and a person's decisions by call id: both empty for a fresh run.
        self._inserts: dict[int, EventBody] = {}
        self._decisions: dict[str, ApprovalDecided] = {}
        self._parent: ForkParent | None = None

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
            # The digests cached are of the old listing: a tool listed again under its name may
            # have a new schema (and a server listing at every step must not grow the cache).
            self._offer_digests.clear()

    def close(self) -> None:
        """Close the trace writer (and its sink); a ``with`` block does it on exit."""
        self.writer.close()

    def _emit(self, body: EventBody, encoded: bytes | None = None) -> None:
        inserts = self._inserts
        while inserts and self.writer.size in inserts:
            self._write(inserts.pop(self.writer.size))
        self._write(body, encoded)

    def _write(self, body: EventBody, encoded: bytes | None = None) -> None:
        self.writer.append(self.clock.now(), body, encoded=encoded)
        if self.observer is not None:
            self.observer(body)

    def _started_bytes(self, started: RunStarted) -> bytes | None:
        """``canonical_bytes(started)``, its configuration's bytes taken from the encoding done
        for the digest: "config" is the body's first key, and a member's canonical form does
        not depend on what surrounds it."""
        config, encoded = self._config_bytes
        if started.config is not config:  # the configuration was replaced since: encode it
            encoded = declared_bytes(AgentConfig, started.config)
        if started.parent is None and started.environment is None:
            # A run that names neither (both then absent): composed from its members (ADR 0140).
            try:
                return _STARTED % {
                    b"config": encoded,
                    b"config_digest": text_bytes(started.config_digest),
                    b"prompt": text_bytes(started.prompt),
                    b"run_id": text_bytes(started.run_id),
                }
            except TraceCanonicalError:
                return None
        rest = _dump_bytes(started.model_dump(mode="json", exclude={"config"}))
        return None if rest is None else b'{"config":' + encoded + b"," + rest[1:]

    def _settings_bytes(self, settings: ModelSettings) -> bytes:
        """A request's settings' bytes, as its `ModelSettings` field writes them (a subclass's
        own fields dropped), encoded again only for settings other than the last (by identity:
        replaced settings, or a dict validated afresh for each request)."""
        kept, encoded = self._settings_encoded
        if settings is not kept:
            encoded = declared_bytes(ModelSettings, settings)
            self._settings_encoded = (settings, encoded)
        return encoded

    def run(self, prompt: str) -> RunResult[OutputT]:
        """Run the agent on one prompt.

        Args:
            prompt: The user's message.

        Returns:
            The output, transcript and trace head.

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
        run_id = self.ids.run_id()
        started = RunStarted(
            run_id=run_id,
            config_digest=self.config_digest,
            config=self.config,
            prompt=prompt,
            parent=self._parent,
            environment=self._started_in,
        )
        self._emit(started, self._started_bytes(started))
        for server in self.servers:
            self._emit(server.announce())
        opening = (Message.system(self.system),) if self.system is not None else ()
        # The prompt is checked as text; a message of one text part needs nothing more.
        asked = assembled(Message, {"role": "user", "parts": (TextPart(text=prompt),)})
        state = _Run(run_id, Transcript(messages=(*opening, asked)))
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
                        run_id=run_id,
                        steps=state.requests,
                        error_type=type(exc).__name__,
                        message=str(exc),
                    )
                )
            finally:
                # Even if recording the failure fails, what was written is made durable.
                self.writer.end_step()
            raise
        # The run's end is built of values it holds, validated already: sums of validated
        # token counts, the run's id, its transcript and output (ADR 0141).
        usage = assembled(Usage, {"input_tokens": state.usage_in, "output_tokens": state.usage_out})
        self._emit(
            assembled(
                RunFinished,
                {
                    "kind": "run_finished",
                    "run_id": run_id,
                    "steps": state.requests,
                    "usage": usage,
                    "transcript_digest": _transcript_digest(state),
                },
            )
        )
        self.writer.end_step()
        result: RunResult[OutputT] = assembled(
            RunResult,
            {
                "output": output,
                "transcript": state.transcript,
                "head": self.writer.checkpoint(),
                "run_id": run_id,
                "usage": usage,
                "steps": state.requests,
            },
        )
        return result

    def _loop(self, state: _Run, runner: ToolRunner) -> OutputT:
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
            self._check_call_ids(state, calls)
            self._ask_people(state, calls)
            results = tuple(runner.run(call) for call in calls)
            # The runner's results, in a tool message as validation would build it (ADR 0141).
            answered = assembled(Message, {"role": "tool", "parts": results})
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

    def _ask(self, state: _Run, purpose: Literal["step", "reask"]) -> ModelResponse:
        """Send the transcript; a re-ask's reply joins it here, a step's with its tool results."""
        # Only what was not sent yet: reading `.messages` would build the whole tuple each step.
        new = state.transcript.messages_from(state.sent)
        encoded = [_message_bytes(state, message) for message in new]
        fields = {
            "kind": "model_requested",
            "step": state.step,
            "purpose": purpose,
            "prefix_length": state.chain.length,
            "prefix_digest": state.chain.hexdigest,
            "new_messages": new,
            "tools_digest": self._offer_digest(state.offered),
            "output_schema_digest": self._schema_digest,
            "settings": self.settings,
        }
        # Messages the transcript holds, digests and counts of the run's own: validated already,
        # unless the agent's settings are of another type: validated then, as before (a dict
        # into ModelSettings, a subclass kept and written as ModelSettings; ADR 0141).
        requested = (
            assembled(ModelRequested, fields)
            if type(self.settings) is ModelSettings
            else ModelRequested(**fields)
        )
        settings = self._settings_bytes(requested.settings)
        self._emit(requested, _requested_bytes(requested, encoded, settings))
        state.chain.update_encoded(encoded)
        state.sent = len(state.transcript)
        # Every field is an already validated value and tool names were checked unique in
        # __init__; validating again would re-walk the whole transcript each step (O(n)).
        request = ModelRequest.of_valid(
            state.transcript, state.offered, self._schema, self.settings
        )
        response: ModelResponse
        stream = getattr(self.model, "stream", None) if self.observer is not None else None
        try:
            if stream is not None:
                # A StreamingChatModel: the observer sees the chunks, the trace the assembled reply.
                response = stream(request, self.observer)
            else:
                response = self.model.request(request)
        except StructuredOutputError as exc:
            raise self._no_valid_reply(state, exc) from exc
        # The reply was validated where the model built it; anything else is refused as before.
        responded = (
            assembled(
                ModelResponded,
                {"kind": "model_responded", "step": state.step, "response": response},
            )
            if isinstance(response, ModelResponse)
            else ModelResponded(step=state.step, response=response)
        )
        self._emit(responded, _responded_bytes(state, responded))
        response = self._check_part_kinds(state, response)
        state.requests += 1
        state.usage_in += response.usage.input_tokens
        state.usage_out += response.usage.output_tokens
        self._check_limits(state)
        if purpose == "reask":
            state.transcript = state.transcript.append(response.message)
        return response

    def _ask_people(self, state: _Run, calls: Sequence[ToolCallPart]) -> None:
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
        sink = FileTraceSink.append_to(trace)
        try:
            repair_trace(trace)
            loaded = Trace.load(trace)
            resumed = plan(
                loaded, os.fspath(trace), repeat_safe=self.policy.repeat_safe, decisions=decisions
            )
        except BaseException:
            sink.close()
            raise
        writer = ResumeSink(resumed.recorded, sink)
        gate = Gate(writer, resumed.gate)
        saved = (self.model, self.clock, self.ids, self.writer, self.tool_results, self.steering)
        self.model = ThenLiveModel(
            [e.body.response for e in resumed.events if isinstance(e.body, ModelResponded)],
            self.model,
            gate,
        )
        self.clock = ThenLiveClock([e.at for e in resumed.events], self.clock)
        self.ids = RecordedRunIds(resumed.started.run_id, self.ids)
        self.writer = TraceWriter(writer, fsync=self.writer.fsync)
        self.tool_results = ThenLiveResults(recorded_tool_results(resumed.events), gate)
        self.steering = ThenLiveSteering(
            [e.body for e in resumed.events if isinstance(e.body, SteeringReceived)],
            self.steering,
            gate,
        )
        self._inserts = dict(resumed.inserts)
        self._decisions = dict(resumed.decisions)
        # The prefix is re-run as recorded, its environment included; a continuation that runs
        # somewhere else says where in its own run_resumed.
        self._started_in = resumed.started.environment
        marker = self._inserts[len(resumed.events)]
        if (
            isinstance(marker, RunResumed)
            and self.environment is not None
            and self.environment != resumed.started.environment
        ):
            self._inserts[len(resumed.events)] = marker.model_copy(
                update={"environment": self.environment}
            )
        try:
            return self._run(resumed.started.prompt)
        finally:
            try:
                self.writer.close()
            finally:
                (self.model, self.clock, self.ids, self.writer, self.tool_results) = saved[:5]
                self.steering = saved[5]
                self._inserts = {}
                self._decisions = {}
                self._started_in = self.environment

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
        loaded = Trace.load(parent)
        forked = plan_fork(loaded, os.fspath(parent), at_step)
        prefix = forked.prefix
        results = {r.result.call_id: r for r in recorded_tool_results(prefix)}
        saved = (self.model, self.tool_results, self.steering)
        self.model = ThenLiveModel(
            [e.body.response for e in prefix if isinstance(e.body, ModelResponded)],
            self.model,
            None,
        )
        self.tool_results = lambda call: results.get(call.id)
        self.steering = ThenLiveSteering(
            [e.body for e in prefix if isinstance(e.body, SteeringReceived)], self.steering, None
        )
        self._decisions = recorded_decisions(prefix)
        self._parent = forked.parent
        try:
            return self._run(forked.started.prompt)
        finally:
            (self.model, self.tool_results, self.steering) = saved
            self._decisions = {}
            self._parent = None

    def _check_part_kinds(self, state: _Run, response: ModelResponse) -> ModelResponse:
        """Refuse a reply holding a part of an extension kind the run did not declare.

        A declared kind read back from a trace (a resume's or a fork's recorded replies) is a
        `GenericPart`: it is typed here with the declared class, so the adapters see the
        plugin's own fallback when the conversation is sent on. The bytes are the same.
        """
        parts = response.message.parts
        typed: list[Any] = []
        for part in parts:
            if isinstance(part, ExtensionPart):
                cls = self.part_kinds.get(part.kind)
                if cls is None:
                    declared = ", ".join(self.part_kinds) or "none"
                    raise InvalidModelReply(
                        f"run {state.run_id}: the model's reply at step {state.step} holds a "
                        f"{part.kind!r} part, a kind this run did not declare (declared: "
                        f"{declared}); name its class in part_kinds where the agent is built"
                    )
                if isinstance(part, GenericPart):
                    try:
                        part = cls.model_validate({"kind": part.kind, **part.fields})
                    except ValidationError as exc:
                        raise InvalidModelReply(
                            f"run {state.run_id}: the {part.kind!r} part of the reply at step "
                            f"{state.step} is not a valid {_class_path(cls)}: "
                            f"{'; '.join(validation_error_text(exc).splitlines())}"
                        ) from None
            typed.append(part)
        if all(a is b for a, b in zip(typed, parts, strict=True)):
            return response
        message = response.message.model_copy(update={"parts": tuple(typed)})
        return response.model_copy(update={"message": message})

    @staticmethod
    def _check_call_ids(state: _Run, calls: Sequence[ToolCallPart]) -> None:
        """Refuse a reply reusing a tool-call id, before any of its tools runs."""
        for call in calls:
            if call.id in state.call_ids:
                raise InvalidModelReply(
                    f"run {state.run_id}: the model's reply at step {state.step} calls "
                    f"{call.name!r} with id {call.id!r}, an id already used in this run; no tool "
                    "of that reply ran. Tool-call ids must be unique: fix the model adapter"
                )
            state.call_ids.add(call.id)

    def _steer(self, state: _Run, texts: list[str]) -> None:
        """Record each steering message and add it to the conversation as a tagged user turn."""
        for text in texts:
            self._emit(SteeringReceived(step=state.step, text=text))
            state.transcript = state.transcript.append(envelope("steering", text))

    def _offer_digest(self, offered: tuple[ToolSpec, ...]) -> str:
        # By the offered tools' names: the specs behind a name change only when a server lists
        # again, and `_relist` empties the cache then.
        names = tuple(spec.name for spec in offered)
        found = self._offer_digests.get(names)
        if found is None:
            found = digest([spec.model_dump(mode="json") for spec in offered])
            self._offer_digests[names] = found
        return found

    def _no_valid_reply(self, state: _Run, exc: StructuredOutputError) -> InvalidModelReply:
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

    def _check_limits(self, state: _Run) -> None:
        limits = self.usage_limits
        if not any(getattr(limits, name) is not None for name in _LIMITS):
            return  # no limit (the usual case): nothing to count against
        used = {
            "requests": state.requests,
            "input_tokens": state.usage_in,
            "output_tokens": state.usage_out,
            "total_tokens": state.usage_in + state.usage_out,
        }
        for name in _LIMITS:
            value = used[name]
            limit = getattr(limits, name)
            if limit is not None and value > limit:
                raise UsageLimitExceeded(
                    f"run {state.run_id}: {name} reached {value}, over the limit of {limit}"
                )

    def _finish(self, state: _Run, response: ModelResponse) -> OutputT:
        output_type = self.output_type
        if self._schema is None or not issubclass(output_type, BaseModel):
            text = response.message.text
            # str is the only other output type the constructor accepts; the check is what
            # lets the text be returned as OutputT, and it refuses an output_type changed since.
            if not isinstance(text, output_type):
                raise _bad_output_type(output_type)
            # The text of the reply's parts (ADR 0141).
            self._emit(
                assembled(
                    OutputAccepted,
                    {"kind": "output_accepted", "attempts": 1, "schema_name": None, "value": text},
                )
            )
            return text
        emissions = [_emission(response.message)]
        schema_name = self._schema.name

        def reask(error: str) -> str:
            self._emit(OutputRejected(attempt=len(emissions), emission=emissions[-1], error=error))
            state.transcript = state.transcript.append(Message.user(reask_message(error)))
            emissions.append(_emission(self._ask(state, "reask").message))
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
