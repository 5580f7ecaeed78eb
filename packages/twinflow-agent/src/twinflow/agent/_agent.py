"""The agent loop: ask the model, run the tools it asks for under the policy, repeat, answer.

Synchronous and deterministic given its ports: the model, the clock, the ids and the trace
sink are injected (the real clock and ids by default). Each step records only its delta (new
messages, the response, the decisions and results) as typed events handed to the writer, so a
step's cost does not grow with the length of the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from twinflow.agent._agent_config import function_tool, run_config
from twinflow.agent._agent_setup import (
    check_policy_names,
    check_server_names,
    opened_model,
    trace_sink,
)
from twinflow.agent._errors import AgentConfigError, RunPaused
from twinflow.agent._events import (
    FORMAT,
    ApprovalDecided,
    Environment,
    EventBody,
    ForkParent,
    InputAnswered,
    InputRequested,
    RunFinished,
    RunStarted,
    UserTurn,
)
from twinflow.agent._inputs import InputAsker
from twinflow.agent._mcp import McpTools
from twinflow.agent._observe import Observer, Steering
from twinflow.agent._policy import Policy, RecordedResults, ToolRunner
from twinflow.agent._replay import REPLAY_KINDS, ReplayMode, ReplayPorts, ReplayResult, replay
from twinflow.agent._resume import Decision
from twinflow.agent._retry import RetryLimits
from twinflow.agent._run import (
    Conversation,
    RunResult,
    RunState,
    UsageLimits,
    check_arguments,
    part_kinds_of,
    run_failed,
)
from twinflow.agent._step import OutputT, Steps
from twinflow.agent._structured import PydanticStructuredOutput
from twinflow.agent._subagent import AgentTool, Budget, delegate_for
from twinflow.agent._tools import Tool
from twinflow.agent._trace import TraceWriter
from twinflow.agent._verify import Trace
from twinflow.kernel import Clock, Ids, SystemClock, SystemIds, ThreadExecutor
from twinflow.kernel._ports import Closing
from twinflow.trace import FsyncPolicy, TraceSink
from twinflow.vocab import (
    ChatModel,
    ExtensionPart,
    Message,
    ModelSettings,
    StructuredOutputAdapter,
    Transcript,
    digest,
)

__all__ = ["Agent", "RunResult", "UsageLimits"]

_WORKERS = ThreadExecutor()
"""The worker threads `Agent.run_async` runs on (bounded: `twinflow.kernel.ThreadExecutor.call`)."""


class Agent(Steps[OutputT], Closing):
    """Runs a model with tools under a deny-by-default policy, tracing every event.

    Args:
        model: The chat model: any `ChatModel`, or a name `twinflow.models.open_model` opens
            (``"embedded"``, ``"http://host:8080/v1"``, ``"openai:gpt-4o-mini"``), or a list
            of names asked in turn when one is busy or away (each switch a ``model_fell_back``
            event); a model opened here is closed by `close` (use the agent in a ``with`` block).
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
        retries: How a request refused for now (429, 503, 529, a reset before it was sent)
            is sent again (default: 4 sends, waits from 1 s, 300 s of waiting a run); each
            wait is a ``model_waited`` event and goes through the clock's ``sleep``.
        system: System message opening every run (the spec's `system`).
        settings: Model settings sent with every request.
        trace: Where trace lines go: a `TraceSink`, or the path of a new trace file (taken
            if free, else the first free ``NAME.N.jsonl`` beside it; the result's
            ``trace_path`` says which). Default: an in-memory sink. Runs append to it.
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
            holding a part of any other extension kind fails the run (`RunError`, ``reason="invalid_reply"``).
        environment: Where the agent runs (`Environment`), recorded in ``run_started``;
            replay passes the recorded one (`ReplayPorts.environment`).

    Raises:
        AgentConfigError: Duplicate tool names, a policy naming unknown tools, a bad
            ``max_steps``, an ``output_type`` that is neither ``str`` nor a pydantic model
            class, ``part_kinds`` holding something other than extension part classes (or one
            kind twice).
    """

    def __init__(
        self,
        model: ChatModel | str | Sequence[str],
        *,
        clock: Clock | None = None,
        ids: Ids | None = None,
        tools: Sequence[Tool | McpTools | Callable[..., Any]] = (),
        policy: Policy | None = None,
        output_type: type[OutputT] = str,  # type: ignore[assignment]  # the default binds OutputT to str (PEP 696), which mypy cannot see
        structured: StructuredOutputAdapter | None = None,
        max_steps: int = 10,
        usage_limits: UsageLimits | None = None,
        retries: RetryLimits | None = None,
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
        check_arguments(max_steps, output_type)
        # What a replay of this agent is built with again (`replay`), its ports aside.
        self._options: dict[str, Any] = {
            "tools": tools,
            "policy": policy,
            "output_type": output_type,
            "structured": structured,
            "max_steps": max_steps,
            "usage_limits": usage_limits,
            "retries": retries,
            "system": system,
            "settings": settings,
            "part_kinds": part_kinds,
        }
        self._open(model, clock, ids, trace, fsync)
        self._running = False
        self.policy = policy if policy is not None else Policy()
        self.output_type = output_type
        self.structured: StructuredOutputAdapter = structured or PydanticStructuredOutput()
        self.max_steps = max_steps
        self.usage_limits = usage_limits or UsageLimits()
        self.retries = retries or RetryLimits()
        self.system = system
        self.settings = settings or ModelSettings()
        self.observer = observer
        self.steering = steering
        self.tool_results = tool_results
        self.part_kinds = part_kinds_of(part_kinds)
        self.environment = environment
        # The environment run_started records: this agent's, or a resumed run's recorded one.
        self._started_in = environment
        self._add_tools(tools)
        self._configure(model_label)

    def _open(
        self,
        model: ChatModel | str | Sequence[str],
        clock: Clock | None,
        ids: Ids | None,
        trace: TraceSink | str | os.PathLike[str] | None,
        fsync: FsyncPolicy,
    ) -> None:
        """The ports: the trace claimed first, then the model opened (a server started)."""
        self.writer = TraceWriter(trace_sink(trace), fsync=fsync)
        try:
            self.model, self._owns_model = opened_model(model)
        except BaseException:
            self.writer.close()
            raise
        self.clock: Clock = clock if clock is not None else SystemClock()
        # How a retry waits on a clock without `sleep` (one written before it existed).
        self._real_sleep = SystemClock().sleep
        self.ids: Ids = ids if ids is not None else SystemIds()

    def _add_tools(self, tools: Sequence[Tool | McpTools | Callable[..., Any]]) -> None:
        """Register the tools and MCP servers; check the policy names only registered tools."""
        self.tools: dict[str, Tool] = {}
        # The tools as given, each callable built into its Tool once: what a child run or a
        # replay of this agent is built with again, so no run regenerates a schema.
        self._built: list[Tool | McpTools] = []
        self.servers: tuple[McpTools, ...] = tuple(t for t in tools if isinstance(t, McpTools))
        """The MCP servers whose tools the agent offers (their lists are traced)."""
        check_server_names(self.servers)
        for item in tools:
            if isinstance(item, McpTools):
                self._register(item.tools)
                self._built.append(item)
            else:
                tool = item if isinstance(item, Tool) else function_tool(item)
                self._register([tool])
                self._built.append(tool)
        check_policy_names(self.policy, self.tools)
        self._specs = tuple(t.spec for t in self.tools.values())
        # Levels of sub-agents below this agent (`as_tool` refuses to nest past the limit).
        self._depth = max(
            (t.depth for t in self.tools.values() if isinstance(t, AgentTool)), default=0
        )
        self.denied_tools = tuple(
            sorted(name for name in self.tools if not self.policy.allows(name))
        )
        """Registered tools the policy does not allow: every call to them will be denied."""

    def _configure(self, model_label: str | None) -> None:
        """The configuration every run records, and the digests every request records."""
        self._schema, self._schema_digest, self.config = run_config(self, model_label)
        self.config_digest = digest(self.config)
        # By the offered tools' names: the specs behind a name change only when a server lists
        # again, and `_relist` empties it then.
        self._offer_digests: dict[tuple[str, ...], str] = {}
        # Events written where a record has them (a resume's run_resumed, say), by sequence
        # number, and a person's decisions by call id: both empty for a fresh run.
        self._inserts: dict[int, EventBody] = {}
        self._decisions: dict[str, ApprovalDecided] = {}
        # The requests MCP servers made during calls, and their answers, by call id.
        self._inputs: dict[str, list[InputRequested | InputAnswered]] = {}
        self._parent: ForkParent | None = None
        # The steps a fork serves from its parent (`Steps._serve`): empty for a fresh run.
        self._served: dict[int, tuple[EventBody, ...]] = {}
        # The format run_started records: this code's, or a replayed or resumed run's.
        self._format: int | None = FORMAT
        # The run whose last turn finished last in this agent's trace: the one a next turn
        # may go on with in process (`Agent.run` with ``continue_from``).
        self._going_on: Conversation | None = None

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

    def run(
        self,
        prompt: str,
        *,
        continue_from: RunResult[Any] | str | os.PathLike[str] | None = None,
        simulator: RunResult[Any] | None = None,
    ) -> RunResult[OutputT]:
        """Run the agent on one prompt, or answer the next user turn of a run.

        Args:
            prompt: The user's message.
            continue_from: The run this prompt is the next turn of: the result of its last
                turn, or its trace file. The turn is written to that run's trace, one hash
                chain: a ``user_turn`` event, then the usual steps, with the whole
                conversation before it in the model's context. A result this agent returned
                goes on in process (no other turn may have been written after it); any other
                result, or a trace file, first re-runs the recorded turns against the record,
                as `resume` does (no model request and no tool call is made for them).
                ``max_steps`` bounds each turn's requests; usage limits and tool budgets hold
                for the run, all turns together.
            simulator: The simulated user's result that wrote ``prompt`` (a next turn only):
                its run, trace file, size and root go into the ``user_turn`` (`verify --tree`).

        Returns:
            The output, transcript (the whole conversation), trace head and trace path.

        Raises:
            RunError: The run ended without an output; ``.reason`` says why: ``max_steps``
                (the model still called tools after ``max_steps`` requests), ``usage_limit``,
                ``output_invalid`` (the structured output never validated) or ``invalid_reply``.
            RunPaused: The model called a tool in ``policy.ask``: the run waits for a person
                (``.paused`` lists the calls; `resume` with ``decisions=`` goes on).
            CannotResume: ``continue_from`` is a run that cannot take another turn: it failed,
                waits for a decision, or stopped mid-turn (the message says which and what to
                do), or a result whose trace this agent has written past.
            Exception: Whatever the model raised (a transport failure, say), unchanged.
        """
        if continue_from is None:
            if simulator is not None:
                raise AgentConfigError("a simulated user's link belongs to a next turn")
            return self._run((prompt,))
        from twinflow.agent._continue import next_turn  # it drives this class's loop

        return next_turn(self, continue_from, prompt, simulator)

    async def run_async(self, prompt: str) -> RunResult[OutputT]:
        """Run the agent on one prompt, awaited: the same run, and the same trace byte for
        byte, as `run`, on a bounded pool of worker threads so hundreds of runs can wait on one
        model server together (``asyncio.gather`` over one agent per run).

        Args:
            prompt: The user's message.

        Returns:
            The run's result, as `run` returns it.

        Raises:
            AgentConfigError: This agent has a run in flight already (one agent per run).
            RunError, RunPaused, Exception: As `run`.
        """
        from twinflow.agent._fleet import run_async

        return await run_async(self, prompt, _WORKERS.call)

    def _run(
        self, prompts: Sequence[str | UserTurn], going_on: Conversation | None = None
    ) -> RunResult[OutputT]:
        """Run each prompt as one turn of a run: the first starts it unless it is ``going_on``.

        A prompt given as a ``user_turn`` (a recorded one, or one a simulated user wrote)
        is a next turn recorded with its ``simulator`` link."""
        result: RunResult[OutputT] | None = None
        for given in prompts:
            prompt = given if isinstance(given, str) else given.text
            if going_on is None:
                state = self._start(prompt)
                runner = ToolRunner(
                    self.tools,
                    self.policy,
                    self._emit,
                    recorded=self.tool_results,
                    decisions=self._decisions,
                    before_call=self.writer.before_effect,
                    delegate=delegate_for(self, state),
                    inputs=InputAsker(self._emit, self._inputs, self._pauser(state)),
                )
                going_on = Conversation(state, runner, self.writer)
            else:
                going_on.state.turn += 1
                link = None if isinstance(given, str) else given.simulator
                self._emit(UserTurn(turn=going_on.state.turn, text=prompt, simulator=link))
                going_on.state.transcript = going_on.state.transcript.append(Message.user(prompt))
            result = self._turn(going_on)
        if result is None:
            raise AgentConfigError("a run needs a prompt")
        return result

    def _turn(self, going_on: Conversation) -> RunResult[OutputT]:
        """Answer the run's last user message: steps until an output, or the run's failure."""
        state = going_on.state
        try:
            output = self._loop(state, going_on.runner)
        except RunPaused:
            self.writer.end_step()
            raise
        except BaseException as exc:
            try:
                self._emit(run_failed(state, exc))
            finally:
                # Even if recording the failure fails, what was written is made durable.
                self.writer.end_step()
            raise
        result = self._finished(state, output)
        going_on.head = result.head
        self._going_on = going_on
        return result

    def _start(self, prompt: str) -> RunState:
        """Record the run's start (and its MCP servers' lists); the state of the new run."""
        run_id = self.ids.run_id()
        self._emit(
            RunStarted(
                run_id=run_id,
                config_digest=self.config_digest,
                config=self.config,
                prompt=prompt,
                format=self._format,
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
            turn=state.turn,
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
            decisions: Decisions on calls waiting for approval (see `Paused`), or answers to
                the form an MCP server asked for during a call (`Decision.answer`): that call
                is sent again from its start and the server's same question answered.

        Returns:
            The run's result, as `run` returns it.

        Raises:
            FileWriteError (``locked``): Another process is writing the trace; nothing was written.
            TraceCorruptError: The trace does not verify (``.report`` names the event).
            CannotResume: The run finished, failed for good, stopped inside a tool that is
                not safe to repeat, waits for an answer none was given for, or a decision
                names a call (or an answer a request, or values the schema) that is not waiting.
            ReplayDivergenceError: This agent's code does not reproduce the recorded prefix.
            RunPaused: The run reached another call that waits for a person.
        """
        from twinflow.agent._continue import resume_run  # it drives this class's loop

        return resume_run(self, trace, decisions)

    def fork(
        self,
        parent: str | os.PathLike[str],
        *,
        at_step: int | None = None,
        at_turn: int | None = None,
    ) -> RunResult[OutputT]:
        """Start a new run that takes the first ``at_step - 1`` steps from ``parent``'s trace.

        The parent's model responses, tool results, steering and decisions for those steps are
        served from its (verified) trace: no model request and no tool call is made for them.
        From step ``at_step`` on, this agent's model and tools (another model, prompt steering,
        tools or policy) run live. The new run is written to this agent's own trace, whose
        ``run_started`` names the parent (`ForkParent`: its root, size and the step).

        Args:
            parent: The parent run's trace file (not changed).
            at_step: The first step asked of this agent's model (from 1; steps are numbered
                through a conversation's turns).
            at_turn: Instead of ``at_step``: the conversation's turn (from 1) whose first step
                is asked of this agent's model; the turns before it are the parent's.

        Returns:
            The new run's result.

        Raises:
            TraceCorruptError: The parent trace does not verify.
            AgentConfigError: Neither or both of ``at_step`` and ``at_turn``.
            CannotResume: The parent has no step ``at_step`` (no turn ``at_turn``).
            RunPaused: The new run reached a call that waits for a person.
        """
        from twinflow.agent._continue import fork_run  # it drives this class's loop

        if (at_step is None) == (at_turn is None):
            raise AgentConfigError("fork takes one of at_step and at_turn")
        return fork_run(self, parent, at_step, at_turn)

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
        directory = None if isinstance(trace, bytes) else Path(trace).parent
        return replay(
            Trace.load(trace, keep=REPLAY_KINDS), self._on_ports, mode=mode, directory=directory
        )

    def as_tool(self, *, name: str, description: str, budget: Budget = "own") -> Tool:
        """This agent, offered to another agent as a tool taking one argument, ``prompt``.

        Each call is a new run of this agent's configuration (its tools, its own policy, its
        model, clock and ids) into a new trace file beside the calling run's
        (``<trace stem>.<name>.jsonl``; in memory when the caller's trace is not a file). The
        caller's ``tool_returned`` records the child's run id, trace file name, size and Merkle
        root; a child that fails is the caller's error result, and the caller goes on.

        Args:
            name: The tool's name: the one the caller's policy allows.
            description: What the caller's model is told this agent does.
            budget: ``own`` (this agent's limits); ``shared``: also bounded by the steps (model
                requests), tokens and tool calls the calling run has left, and counted
                against it; or a split, a mapping of ``steps``, ``tokens``, ``tool_calls`` to
                the most of the calling run's budget one call may use (counted likewise).

        Returns:
            The tool, for the calling agent's ``tools``.

        Raises:
            AgentConfigError: Sub-agents would nest deeper than four levels, or ``budget`` is
                none of those.
        """
        return AgentTool(
            self._child, name=name, description=description, depth=self._depth + 1, budget=budget
        )

    def _child(self, trace: TraceSink | os.PathLike[str]) -> Agent[Any]:
        """An agent configured as this one, on its ports, writing a new trace (one child run)."""
        return Agent(
            self.model,
            clock=self.clock,
            ids=self.ids,
            trace=trace,
            fsync=self.writer.fsync,
            model_label=self.config.model,
            environment=self.environment,
            **{**self._options, "tools": self._built},
        )

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
            **{**self._options, "tools": self._built},
        )
