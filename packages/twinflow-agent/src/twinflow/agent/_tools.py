"""Tools: a schema-only `ToolSpec` for the model, a validator and a function for the runner."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, JsonValue, create_model
from pydantic_core import to_json, to_jsonable_python

from twinflow.agent._errors import AgentConfigError
from twinflow.agent._sandboxed import SandboxSession, SandboxSpec, sandboxed
from twinflow.vocab import Part, ToolSpec
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["Tool"]


def _arguments_model(name: str, function: Callable[..., object]) -> type[BaseModel]:
    try:
        signature = inspect.signature(function)
        hints = get_type_hints(function)
    except (TypeError, ValueError, NameError) as exc:
        raise AgentConfigError(
            f"tool {name!r}: cannot read the signature of {function!r}: {exc}"
        ) from None
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise AgentConfigError(
                f"tool {name!r}: parameter {param.name!r} is {param.kind.description}; "
                "tools take named parameters only, so every argument can be validated"
            )
        if param.name not in hints:
            raise AgentConfigError(
                f"tool {name!r}: parameter {param.name!r} has no type annotation; annotate it "
                "so its arguments can be validated before the function runs"
            )
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints[param.name], default)
    model: type[BaseModel] = create_model(
        f"{name}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    return model


def _first_paragraph(function: Callable[..., object]) -> str:
    doc = inspect.getdoc(function) or ""
    return doc.split("\n\n", 1)[0].strip()


class Tool:
    """A tool: what the model is shown (`spec`) and what the runner validates and calls.

    Arguments are validated against a pydantic model derived from the function's
    signature, in strict JSON mode (a string is not an integer), before the function runs.
    """

    __slots__ = ("_arguments", "function", "spec")

    def __init__(self, spec: ToolSpec, function: Callable[..., object]) -> None:
        """Pair an explicit spec with its function.

        The spec's top-level properties must be the function's parameters, and its
        ``required`` list the parameters without defaults, so the schema the model sees
        and the validation the runner applies agree.

        Args:
            spec: What the model is shown.
            function: The callable, with annotated named parameters.

        Raises:
            AgentConfigError: The spec and the signature disagree, or the signature
                cannot be validated.
        """
        self.spec = spec
        self.function = function
        self._arguments = _arguments_model(spec.name, function)
        derived = self._arguments.model_json_schema()
        props = spec.parameters.get("properties", {})
        spec_names = set(props) if isinstance(props, dict) else set()
        required = spec.parameters.get("required", [])
        spec_required = set(required) if isinstance(required, list) else set()
        derived_required = set(derived.get("required", []))
        if spec_names != set(derived.get("properties", {})) or spec_required != derived_required:
            raise AgentConfigError(
                f"tool {spec.name!r}: the spec's properties {sorted(spec_names)} / required "
                f"{sorted(map(str, spec_required))} do not match the function's parameters "
                f"{sorted(derived.get('properties', {}))} / required {sorted(derived_required)}"
            )

    @classmethod
    def from_function(
        cls,
        function: Callable[..., object],
        *,
        name: str | None = None,
        description: str | None = None,
        sandbox: bool | SandboxSpec | SandboxSession = False,
    ) -> Tool:
        """Build a tool from a typed callable; the schema comes from its signature.

        Args:
            function: The callable, with annotated named parameters.
            name: Tool name (default: the function's ``__name__``).
            description: Description (default: the docstring's first paragraph).
            sandbox: Run each call in the kernel's sandbox (docs/how-to/sandboxed-tools.md):
                ``True`` with the default limits, a ``sandbox:`` settings value, or a session
                whose work directory other tools share.

        Returns:
            The tool.

        Raises:
            AgentConfigError: A parameter is unannotated, positional-only or variadic.
        """
        tool_name: str = name or str(getattr(function, "__name__", ""))
        if sandbox is not False:
            session = sandbox if isinstance(sandbox, SandboxSession) else None
            if session is None:
                session = SandboxSession(sandbox if isinstance(sandbox, SandboxSpec) else None)
            function = sandboxed(function, session, tool_name)
        model = _arguments_model(tool_name, function)
        schema = model.model_json_schema()
        schema.pop("title", None)
        spec = ToolSpec(
            name=tool_name,
            description=_first_paragraph(function) if description is None else description,
            parameters=schema,
        )
        return cls(spec, function)

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.spec.name

    def validate(self, arguments: dict[str, JsonValue]) -> dict[str, object]:
        """Validate arguments and return the keyword arguments to call the function with.

        Args:
            arguments: The arguments the model sent.

        Returns:
            Validated keyword arguments.

        Raises:
            ValidationError: The arguments do not satisfy the schema.
        """
        validated = self._arguments.model_validate_json(to_json(arguments), strict=True)
        return {name: getattr(validated, name) for name in type(validated).model_fields}

    def call(self, kwargs: dict[str, object]) -> str | tuple[Part, ...]:
        """Call the function and render its return value as text.

        Args:
            kwargs: Validated keyword arguments (from `validate`).

        Returns:
            The value if it is a string, otherwise its canonical JSON. (A tool whose results
            can hold more than text, an MCP server's, returns those as content parts.)
        """
        value = self.function(**kwargs)
        if isinstance(value, str):
            return value
        return canonical_bytes(to_jsonable_python(value)).decode()
