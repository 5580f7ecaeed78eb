"""``eval reproduce --mode live``: each case run again against a model at its recorded settings.

The model, its structured-output mode, temperature, max tokens and seed are read from each case
trace's ``run_started`` (its configuration's settings and its environment's model identity):
``embedded`` when the run's model was the embedded one, else the server the run recorded, or
the model ``--model`` names (an equivalent server: where it differs from the recorded one is an
environment line of the statement). The fresh trace of each case is written to
``OUT/traces/KEY.jsonl`` and compared with the recorded one by behaviour (`twinflow diff`'s
comparison: clock readings, ids, digests, usage and where the run ran are not behaviour).

A model that cannot be reached (no server listening, an unknown model, the embedded model not
installed, an API key variable unset) is refused in one line before any case runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from twinflow._base._code import importing_from
from twinflow.agent import ModelSpec, RunSpec, RunStarted, Trace
from twinflow.agent._connect import Resolved
from twinflow.agent._events import Environment, UserTurn
from twinflow.cli._output import say
from twinflow.cli._traces import parse_trace, read_trace_bytes
from twinflow.trace import UserError

__all__ = ["LiveModels", "first_divergence", "place_of"]

# `ModelSpec.identity`: "KIND DIALECT URL name=NAME mode=MODE", or "anthropic URL ..." and
# "gemini URL ..." (no dialect); the embedded model's URL is "embedded FILE sha256:HEX".
_IDENTITY = re.compile(
    r"(?:(?P<kind>openai-compatible|ollama) (?P<dialect>[\w.-]+)|(?P<wire>anthropic|gemini)) "
    r"(?P<url>embedded \S+ sha256:[0-9a-f]{64}|\S+) name=(?P<name>\S+) mode=(?P<mode>[\w-]+)"
)
_PROBE_SECONDS = 5.0


def _refused(message: str) -> UserError:
    """The one line a live reproduction that cannot start is refused with (exit 2)."""
    return UserError(
        f"eval reproduce --mode live: {message}; or reproduce without a model: --mode recorded"
    )


def _identity_keys(identity: str | None) -> dict[str, Any] | None:
    """A recorded model identity (its first model) as a spec's ``model:`` keys, or None."""
    found = None if identity is None else _IDENTITY.fullmatch(identity.split(" then ", 1)[0])
    if found is None:
        return None
    url = found["url"]
    keys: dict[str, Any] = {
        "kind": found["kind"] or found["wire"],
        "url": "embedded" if url.startswith("embedded ") else url,
        "name": found["name"],
        "mode": found["mode"],
    }
    if found["dialect"] is not None:
        keys["dialect"] = found["dialect"]
    return keys


def _recorded_model(identity: str | None, base: ModelSpec) -> ModelSpec:
    """The model a run recorded (its environment's identity), with ``base``'s connection keys
    (timeout, API key variable, headers) where the identity names the same server."""
    if identity is None:
        raise _refused(
            "the case trace does not record its model: pass --model URL (an equivalent server)"
        )
    if identity == base.identity():
        return base  # the spec's own model (its fallbacks too)
    keys = _identity_keys(identity)
    if keys is None:
        raise _refused(
            f"the run's model {identity[:200]!r} is not one this twinflow reaches: pass "
            "--model URL (an equivalent server)"
        )
    same_server = base.url == keys["url"]
    connection = ("timeout", "api_key_env", "headers") if same_server else ("timeout",)
    return _validated({**keys, **{k: getattr(base, k) for k in connection}}, identity)


def _validated(keys: dict[str, Any], what: str) -> ModelSpec:
    try:
        return ModelSpec.model_validate(keys)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"] if exc.errors() else str(exc)
        raise _refused(f"the model {what[:200]!r} cannot be built ({problem})") from None


def case_model(started: RunStarted, base: ModelSpec, override: str | None) -> ModelSpec:
    """The model one case runs against, at the recorded structured-output mode, temperature
    and max tokens (the seed is the agent's): the recorded one; or ``override``, a server's
    URL standing in for the recorded server (its API, dialect and model name kept), or a
    model string of its own."""
    recorded = None if started.environment is None else started.environment.model
    keys = _identity_keys(recorded)
    if override is None:
        model = _recorded_model(recorded, base)
    elif keys is not None and override.startswith(("http://", "https://")):
        model = _validated({**keys, "url": override, "timeout": base.timeout}, override)
    else:
        model = _parsed(override, base)
    settings = started.config.settings
    return _validated(
        {
            **model.model_dump(exclude_defaults=True),
            **({"mode": keys["mode"]} if keys is not None else {}),
            **({"temperature": settings.temperature} if settings.temperature is not None else {}),
            **({"max_tokens": settings.max_tokens} if settings.max_tokens is not None else {}),
        },
        override or str(recorded),
    )


def _parsed(override: str, base: ModelSpec) -> ModelSpec:
    """``--model``'s model string, with the spec's timeout."""
    try:
        model = ModelSpec.model_validate(override)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"] if exc.errors() else str(exc)
        raise _refused(f"the model {override[:200]!r} cannot be built ({problem})") from None
    return model.model_copy(update={"timeout": base.timeout})


def check_reachable(model: ModelSpec) -> None:
    """Refuse a model this machine cannot reach, in one line, before anything starts.

    Raises:
        UserError: The embedded model is not installed, the API key variable is unset, or
            nothing listens at the server's address.
    """
    if model.url == "embedded":
        from twinflow.models._embedded import embedded_model_file, server_command

        try:
            server_command(embedded_model_file(), 0)  # the weights and the server installed
        except UserError as exc:
            raise _refused(f"the embedded model cannot run here: {exc}") from None
        return
    from twinflow.kernel import TransportError

    try:
        transport = model.transport()
    except UserError as exc:
        raise _refused(str(exc)) from None
    try:
        # Any HTTP answer (an error status for an empty POST included) is a server listening.
        transport.post_json(model.url, {}, timeout=_PROBE_SECONDS)
    except TransportError as exc:
        if exc.reason not in ("status", "decode"):
            raise _refused(
                f"no model server answers at {model.url} ({exc.reason}): start it, or pass "
                "--model URL (an equivalent server)"
            ) from None
    finally:
        transport.close()


@dataclasses.dataclass
class LiveModels:
    """The models a live reproduction runs its cases against, each served once (the embedded
    one started for the reproduction) and each spec resolved once."""

    spec: RunSpec
    override: str | None
    stack: contextlib.ExitStack
    log_dir: Path
    _served: dict[str, tuple[str, Any]] = dataclasses.field(default_factory=dict)
    _resolved: dict[str, Resolved] = dataclasses.field(default_factory=dict)

    def models(self, traces: list[Path]) -> list[tuple[RunStarted, ModelSpec, tuple[str, ...]]]:
        """Each case trace's start, model and further user turns; every model checked
        reachable before the first case runs."""
        found = []
        for path in traces:
            trace = parse_trace(path, read_trace_bytes(path))
            started = next(iter(trace.events)).body
            if not isinstance(started, RunStarted):
                raise _refused(f"{path} does not begin with run_started")
            found.append(
                (started, case_model(started, self.spec.model, self.override), _turns(trace))
            )
        for model in {m.model_dump_json(): m for _, m, _ in found}.values():
            check_reachable(model)
        return found

    def run(
        self, path: Path, started: RunStarted, model: ModelSpec, turns: tuple[str, ...]
    ) -> Environment:
        """Run one case live, its trace written to ``path``; the environment it recorded."""
        from twinflow.cli._wiring import chat_model
        from twinflow.kernel import SystemClock, SystemIds, TransportError
        from twinflow.trace import FileTraceSink

        key = model.model_dump_json()
        if key not in self._served:
            url = self.stack.enter_context(model.serving(self.log_dir, say))
            transport = model.transport()
            self.stack.callback(transport.close)
            self._served[key] = (url, transport)
            spec = self.spec.model_copy(update={"model": model})
            with importing_from(spec.directories):
                self._resolved[key] = spec.resolve()
        url, transport = self._served[key]
        environment = self.spec.environment(model.identity())
        ids = SystemIds()
        served = model.model_copy(update={"url": url})
        sink = FileTraceSink(path)
        seed = started.config.settings.seed
        try:
            with importing_from(self.spec.directories):
                agent = self._resolved[key].agent(
                    model=chat_model(served, transport, ids),
                    clock=SystemClock(),
                    ids=ids,
                    trace=sink,
                    seed=0 if seed is None else seed,
                    environment=environment,
                )
                result = agent.run(started.prompt)
                for turn in turns:
                    result = agent.run(turn, continue_from=result)
        except TransportError as exc:
            raise _refused(
                f"the model stopped answering ({type(exc).__name__}: {exc}) during {path.name}"
            ) from None
        except Exception:  # the trace records the failure (run_failed); it is compared as such
            pass
        finally:
            sink.close()
        return environment


def _turns(trace: Trace) -> tuple[str, ...]:
    """The user turns a recorded conversation took after its prompt, in order."""
    return tuple(e.body.text for e in trace.events if isinstance(e.body, UserTurn))


def first_divergence(recorded: Path, fresh: Path) -> tuple[int | None, int, int, str] | None:
    """Where the fresh trace's behaviour first differs from the recorded one's: its seq in the
    recorded trace (None for an event only the fresh one has), turn, step and what differs;
    None for the same behaviour."""
    from twinflow.cli._diff_cmd import _event_values
    from twinflow.views._behaviour import compare_behaviour

    found = compare_behaviour(_event_values(recorded, []), _event_values(fresh, []))
    if not found:
        return None
    first = found[0]
    detail = first.detail.replace("only in A", "only in the recorded run").replace(
        "only in B", "only in the reproduction"
    )
    more = f" (and {len(found) - 1} more difference(s))" if len(found) > 1 else ""
    return first.seq_a, first.turn, first.step, f"{first.change}: {detail}{more}"


def place_of(trace: Path, seq: int | None) -> tuple[int | None, int | None]:
    """The user turn and model step the event at ``seq`` of a trace belongs to (None, None
    when there is no such event)."""
    from twinflow.cli._diff_cmd import _event_values

    if seq is None:
        return None, None
    turn, step = 1, 0
    for index, event in enumerate(_values(_event_values(trace, []))):
        if event.get("kind") == "user_turn":
            turn += 1
        elif type(event.get("step")) is int:
            step = event["step"]
        if index == seq:
            return turn, step
    return None, None


def _values(events: Iterator[Any]) -> Iterator[dict[str, Any]]:
    for event in events:
        body = event.get("body") if isinstance(event, dict) else None
        yield body if isinstance(body, dict) else {}
