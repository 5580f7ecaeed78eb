"""pydantic-ai messages as twinflow trace events, both ways, and the state a run carries.

One `Chain` turns each request a pydantic-ai agent makes, and each response it gets, into the
bodies of twinflow events (``run_started``, ``tool_called``, ``tool_returned``,
``model_requested``, ``model_responded``), the agent's own kinds, so ``twinflow show`` and
``twinflow verify`` read a recording as they read a twinflow run. The recorder writes the
bodies; the replay computes the same bodies from the replayed run and compares them with the
recorded ones, so the two can only agree through this one module.

What a trace cannot represent is refused here, naming it, before the request is sent or anything
of it is written: a part kind without a twinflow counterpart (files, audio, native tool calls,
compaction), multimodal user content, a tool call whose arguments are not a JSON object, a
model setting other than temperature, max_tokens and seed, native tools, a streamed request,
a response that did not complete, and a history rewritten between requests (a history
processor that drops or edits earlier messages).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage
from twinflow.agent import typed_event
from twinflow.trace import canonical_bytes
from twinflow.trace._format import GENESIS
from twinflow.vocab import PartNotCarriedError

__all__ = ["Chain", "response_from_body"]

# The settings a twinflow event carries (vocab's ModelSettings); any other is refused.
_SETTINGS = ("temperature", "max_tokens", "seed")
# pydantic-ai's finish reasons and the agent's; content_filter has none and is refused.
_FINISH = {"stop": "stop", "length": "length", "tool_call": "tool_calls", "error": "error"}
_EPOCH = "2000-01-01T00:00:00Z"
_FINISH_BACK = {twinflow: ours for ours, twinflow in _FINISH.items()}


def _digest(value: object) -> str:
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


ADAPTER = "twinflow trace (pydantic-ai recorder)"
"""How `PartNotCarriedError` names the recorder (``.adapter``)."""


def _unsupported(what: str) -> PartNotCarriedError:
    return PartNotCarriedError(
        ADAPTER,
        what,
        "a twinflow trace cannot represent it, so the run would not replay; nothing of this "
        "request was sent or written: record a run without it",
    )


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"kind": "text", "text": text}]}


def _user(part: UserPromptPart) -> dict[str, Any]:
    if isinstance(part.content, str):
        return _text("user", part.content)
    texts = []
    for item in part.content:
        if not isinstance(item, str):
            raise _unsupported(f"multimodal user content ({type(item).__name__})")
        texts.append({"kind": "text", "text": item})
    return {"role": "user", "parts": texts}


def _tool_return(part: ToolReturnPart) -> dict[str, Any]:
    if type(part) is not ToolReturnPart:
        raise _unsupported(f"request part {type(part).__name__}")
    text, files = part.model_response_str_and_user_content()
    if files:
        raise _unsupported(f"tool return carrying files (tool {part.tool_name!r})")
    result = {
        "kind": "tool_result",
        "call_id": part.tool_call_id,
        "name": part.tool_name,
        "content": text,
        "is_error": part.outcome != "success",
    }
    return {"role": "tool", "parts": [result]}


def request_messages(message: ModelRequest) -> list[dict[str, Any]]:
    """A pydantic-ai request as twinflow messages (its instructions first, as a system message)."""
    if message.state != "complete":
        raise _unsupported(f"request in state {message.state!r}")
    messages = [] if message.instructions is None else [_text("system", message.instructions)]
    for part in message.parts:
        if isinstance(part, SystemPromptPart):
            messages.append(_text("system", part.content))
        elif isinstance(part, UserPromptPart):
            messages.append(_user(part))
        elif isinstance(part, ToolReturnPart):
            messages.append(_tool_return(part))
        elif isinstance(part, RetryFeedbackPart):
            messages.append(_text("user", part.model_response()))
        else:
            raise _unsupported(f"request part {type(part).__name__}")
    return messages


def _call(part: ToolCallPart) -> dict[str, Any]:
    try:
        arguments = part.args_as_dict(raise_if_invalid=True)
    except ValueError as exc:
        raise _unsupported(
            f"tool call whose arguments are not a JSON object ({part.tool_name!r}: {exc})"
        ) from None
    return {
        "kind": "tool_call",
        "id": part.tool_call_id,
        "name": part.tool_name,
        "arguments": arguments,
    }


def response_body(response: ModelResponse) -> dict[str, Any]:
    """A pydantic-ai response as the agent's `ModelResponse` value (plain JSON)."""
    if response.state != "complete":
        raise _unsupported(f"response in state {response.state!r}")
    parts: list[dict[str, Any]] = []
    for part in response.parts:
        if type(part) is TextPart:
            parts.append({"kind": "text", "text": part.content})
        elif type(part) is ThinkingPart:
            parts.append({"kind": "reasoning", "text": part.content})
        elif type(part) is ToolCallPart:
            parts.append(_call(part))
        else:
            raise _unsupported(f"response part {type(part).__name__}")
    finish = response.finish_reason or "stop"
    if finish not in _FINISH:
        raise _unsupported(f"finish reason {finish!r}")
    return {
        "message": {"role": "assistant", "parts": parts},
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
        "finish_reason": _FINISH[finish],
        "model_name": response.model_name or "",
    }


def response_from_body(body: dict[str, Any], at: str) -> ModelResponse:
    """The pydantic-ai response a ``model_responded`` body records (replay serves it)."""
    parts: list[TextPart | ThinkingPart | ToolCallPart] = []
    for part in body["message"]["parts"]:
        if part["kind"] == "text":
            parts.append(TextPart(part["text"]))
        elif part["kind"] == "reasoning":
            parts.append(ThinkingPart(part["text"]))
        else:
            parts.append(ToolCallPart(part["name"], dict(part["arguments"]), part["id"]))
    usage = body["usage"]
    return ModelResponse(
        parts=parts,
        usage=RequestUsage(
            input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"]
        ),
        model_name=body["model_name"] or None,
        timestamp=datetime.fromisoformat(at),
        finish_reason=_FINISH_BACK[body["finish_reason"]],  # type: ignore[arg-type]  # a verified trace's reason
    )


def _settings(settings: ModelSettings | None) -> dict[str, Any]:
    given = dict(settings or {})
    for key, value in sorted(given.items()):
        if key not in _SETTINGS and value is not None:
            raise _unsupported(f"model setting {key!r}")
    return {key: given[key] for key in _SETTINGS if given.get(key) is not None}


def _tools(
    parameters: ModelRequestParameters,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    if parameters.native_tools:
        names = ", ".join(type(tool).__name__ for tool in parameters.native_tools)
        raise _unsupported(f"native tools ({names})")
    tools = [
        {
            "name": tool.name,
            "description": tool.description or "",
            "parameters": tool.parameters_json_schema,
        }
        for tool in (*parameters.function_tools, *parameters.output_tools)
    ]
    output = parameters.output_object
    schema = (
        None
        if output is None or parameters.output_mode not in ("native", "prompted")
        else {"name": output.name or "output", "json_schema": output.json_schema}
    )
    return tools, schema


def _usage(total: dict[str, int], response: dict[str, Any]) -> None:
    for key in ("input_tokens", "output_tokens"):
        total[key] += response["usage"][key]


class Chain:
    """What a recorded run has said so far, and the event bodies of what it says next.

    Attributes:
        run_id: The run's id (``run_started`` and the terminal event carry it).
        steps: Requests made so far.
    """

    def __init__(self, run_id: str, model: str) -> None:
        """Start a run.

        Args:
            run_id: The run's id.
            model: What the trace names as the model (``provider:name``).
        """
        self.run_id = run_id
        self.model = model
        self.steps = 0
        self._history: list[list[dict[str, Any]]] = []  # each pydantic-ai message, converted
        self._calls: dict[str, dict[str, Any]] = {}  # call id -> its tool_call part
        self._usage = {"input_tokens": 0, "output_tokens": 0}

    def request(
        self,
        messages: Sequence[ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
    ) -> list[dict[str, Any]]:
        """The bodies a request adds: ``run_started`` first, each tool's call and result, then
        ``model_requested``.

        Raises:
            PartNotCarriedError: The request holds what a trace cannot represent.
        """
        converted = [
            request_messages(m) if isinstance(m, ModelRequest) else [response_body(m)["message"]]
            for m in messages
        ]
        seen = len(self._history)
        if converted[:seen] != self._history:
            raise _unsupported("history changed since the last request (a history processor)")
        tools, schema = _tools(parameters)
        model_settings = _settings(settings)
        new = [message for group in converted[seen:] for message in group]
        bodies: list[dict[str, Any]] = []
        if self.steps == 0:
            bodies.append(self._started(new, tools, schema, model_settings))
        for message in new:
            for part in message["parts"]:
                call = (
                    self._calls.pop(part.get("call_id", ""), None)
                    if message["role"] == "tool"
                    else None
                )
                if call is not None:
                    bodies.append(
                        {
                            "kind": "tool_called",
                            "call_id": call["id"],
                            "tool": call["name"],
                            "arguments": call["arguments"],
                        }
                    )
                    bodies.append({"kind": "tool_returned", "result": part})
        self.steps += 1
        prefix = [message for group in self._history for message in group]
        bodies.append(
            {
                "kind": "model_requested",
                "step": self.steps,
                "purpose": "step",
                "prefix_length": len(prefix),
                "prefix_digest": _digest(prefix),
                "new_messages": new,
                "tools_digest": _digest({"tools": tools, "output_mode": parameters.output_mode}),
                "output_schema_digest": None if schema is None else _digest(schema),
                "settings": model_settings,
            }
        )
        self._history = converted
        return [self._checked(body) for body in bodies]

    def response(self, response: ModelResponse) -> dict[str, Any]:
        """The ``model_responded`` body of the response to the last request.

        Raises:
            PartNotCarriedError: The response holds what a trace cannot represent.
        """
        body = response_body(response)
        for part in body["message"]["parts"]:
            if part["kind"] == "tool_call":
                self._calls[part["id"]] = part
        _usage(self._usage, body)
        self._history.append([body["message"]])
        return self._checked({"kind": "model_responded", "step": self.steps, "response": body})

    def finished(self) -> dict[str, Any]:
        """The ``run_finished`` body."""
        transcript = [message for group in self._history for message in group]
        return self._checked(
            {
                "kind": "run_finished",
                "run_id": self.run_id,
                "steps": self.steps,
                "usage": dict(self._usage),
                "transcript_digest": _digest(transcript),
            }
        )

    def failed(self, error: BaseException) -> dict[str, Any]:
        """The ``run_failed`` body of a run that raised ``error``."""
        body: dict[str, Any] = {
            "kind": "run_failed",
            "run_id": self.run_id,
            "steps": self.steps,
            "error_type": type(error).__name__,
            "message": str(error)[:2000],
        }
        reason = getattr(error, "reason", None)
        if isinstance(reason, str):
            body["reason"] = reason
        return self._checked(body)

    def _started(
        self,
        new: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        schema: dict[str, Any] | None,
        settings: dict[str, Any],
    ) -> dict[str, Any]:
        system = next((m for m in new if m["role"] == "system"), None)
        user = next((m for m in new if m["role"] == "user"), None)
        config: dict[str, Any] = {
            "model": self.model,
            "system_prompt": None if system is None else system["parts"][0]["text"],
            "tools": tools,
            # pydantic-ai runs every tool it was given: the record says so, it decides nothing.
            "policy": {
                "allow": sorted(tool["name"] for tool in tools),
                "tool_budgets": {},
                "run_budget": None,
                "approval": None,
                "max_output_chars": 0,
                "include_traceback": False,
            },
            "output_schema": schema,
            "max_steps": 0,
            "usage_limits": {},
            "settings": settings,
        }
        prompt = "" if user is None else "".join(p["text"] for p in user["parts"])
        return {
            "kind": "run_started",
            "run_id": self.run_id,
            "config_digest": _digest(config),
            "config": config,
            "prompt": prompt,
        }

    def _checked(self, body: dict[str, Any]) -> dict[str, Any]:
        # Every body must be an event the agent reads, or `twinflow show` could not show it; the
        # body kept is the agent's own JSON form of it, the bytes a twinflow run would write.
        try:
            typed = typed_event({"seq": 0, "prev": GENESIS, "at": _EPOCH, "body": body})
        except ValueError as exc:
            raise _unsupported(f"{body['kind']} event the agent cannot read ({exc})") from None
        normal: dict[str, Any] = typed.body.model_dump(mode="json")
        return normal
