"""Wording for problems in the YAML files users write (run specs, datasets).

Both readers (``twinflow.cli``'s spec loader and `load_dataset`) word their problems through
here, so a YAML syntax error or a misspelt key reads the same in either file:
``spec.yaml:4:12: not valid YAML: mapping values are not allowed here`` and
``dataset.yaml:7: cases.0.expcted: unknown key (did you mean 'expected'?)``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from twinflow.vocab import did_you_mean

__all__ = [
    "known_keys",
    "located_problem",
    "unknown_key_message",
    "validation_problem",
    "validation_problems",
    "yaml_line",
    "yaml_syntax_problem",
]


def yaml_syntax_problem(exc: yaml.YAMLError, source: str) -> str:
    """One readable line for a YAML syntax error: ``FILE:LINE:COLUMN: not valid YAML: what``.

    PyYAML's own text spans several lines with a caret drawing under the source; flattened
    into one line the caret is noise, so this keeps the problem, its context and the place.
    """
    mark = getattr(exc, "problem_mark", None)
    where = source if mark is None else f"{source}:{mark.line + 1}:{mark.column + 1}"
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if context:
        at = "" if context_mark is None else f" at line {context_mark.line + 1}"
        problem = f"{problem} ({context}{at})"
    return f"{where}: not valid YAML: {problem}"


def _models_in(annotation: Any) -> list[Any]:
    """The types a value of ``annotation`` can be, with Annotated and Optional unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [t for arg in typing.get_args(annotation) for t in _models_in(arg)]
    return [annotation]


def _tag(model: type[BaseModel]) -> object:
    field = model.model_fields.get("kind")
    return None if field is None else field.default


def _step(annotation: Any, key: int | str) -> Any:
    """The annotation of the value found at ``key`` inside a value of ``annotation``."""
    candidates = _models_in(annotation)
    for candidate in candidates:
        origin = typing.get_origin(candidate)
        args = typing.get_args(candidate)
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            field = candidate.model_fields.get(str(key))
            if field is not None:
                return field.annotation
        elif origin in (tuple, list) and isinstance(key, int) and args:
            return args[0]
        elif origin is dict and len(args) == 2:
            return args[1]
    # A tagged union puts the tag in the location: `scorers.0.fields.nme`.
    tagged = [
        c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel) and _tag(c) == key
    ]
    return tagged[0] if tagged else None


def known_keys(model: type[BaseModel], loc: Sequence[int | str]) -> tuple[str, ...]:
    """The keys a mapping at ``loc[:-1]`` inside ``model`` accepts (empty if not a model)."""
    annotation: Any = model
    for key in loc[:-1]:
        annotation = _step(annotation, key)
        if annotation is None:
            return ()
    names: list[str] = []
    for candidate in _models_in(annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            names.extend(candidate.model_fields)
    return tuple(dict.fromkeys(names))


def unknown_key_message(model: type[BaseModel], loc: Sequence[int | str]) -> str:
    """``unknown key``, with the closest key the mapping accepts, if one is close."""
    return "unknown key" + did_you_mean(str(loc[-1]), known_keys(model, loc))


def yaml_line(node: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (or of its nearest existing parent).

    A mapping entry is placed at its key, where an unknown or bad key is written.
    """
    line = None if node is None else node.start_mark.line + 1
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if getattr(k, "value", None) == key), None)
            if pair is None:
                return line
            line = pair[0].start_mark.line + 1
            node = pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def located_problem(source: str, line: int | None, loc: Sequence[int | str], message: str) -> str:
    """``FILE:LINE: dotted.key: message`` (``FILE: ...`` when the line is not known)."""
    where = source if line is None else f"{source}:{line}"
    dotted = ".".join(str(part) for part in loc) or "(top level)"
    return f"{where}: {dotted}: {message}"


def validation_problem(
    source: str, line: int | None, error: ErrorDetails, model: type[BaseModel]
) -> str:
    """One pydantic error against ``model`` as a located problem, worded for a file's author."""
    loc = error["loc"]
    if error["type"] == "extra_forbidden":
        message = unknown_key_message(model, loc)
    elif error["type"] == "missing":
        message = "required key is missing"
    else:
        message = str(error["msg"])
    return located_problem(source, line, loc, message)


def validation_problems(
    exc: ValidationError, root: yaml.Node | None, source: str, model: type[BaseModel]
) -> list[str]:
    """Each error of validating a YAML document against ``model``, located in ``source``.

    Args:
        exc: What ``model.model_validate`` raised for the document.
        root: The document's composed node (`yaml.compose`), for the line of each key.
        source: The file, as problems name it.
        model: The model the document was validated against.
    """
    return [
        validation_problem(source, yaml_line(root, error["loc"]), error, model)
        for error in exc.errors()
    ]
