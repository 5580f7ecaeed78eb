"""The one reader of the YAML files users write (run specs, datasets), and its wording.

`read_yaml` is the only place a spec or a dataset is parsed: it is bounded (characters,
nesting depth, nodes with aliases followed, digits of an integer) and total (a value or the
caller's one-line error, never a `RecursionError` or a traceback). Both readers
(the run spec loader and the dataset loader) word their problems through here, so a
YAML syntax error or a misspelt key reads the same in either file:
``spec.yaml:4:12: not valid YAML: mapping values are not allowed here`` and
``dataset.yaml:7: cases.0.expcted: unknown key (did you mean 'expected'?)``.

Standard library only at import time: PyYAML and pydantic are imported by the functions that
use them, so the trace leaf that ships this module needs neither.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twinflow._base._errors import NotRegularFileError, UserError, _Refused
from twinflow._base._open import read_regular
from twinflow._base._suggest import did_you_mean

# Not `typing.TYPE_CHECKING` (mypy reads any `TYPE_CHECKING` as true); the names are only
# annotations here, and PyYAML and pydantic are imported where they are used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import yaml
    from pydantic import BaseModel, ValidationError
    from pydantic_core import ErrorDetails

__all__ = [
    "YamlLimits",
    "known_keys",
    "located_problem",
    "read_user_file",
    "read_yaml",
    "unknown_key_message",
    "validation_problem",
    "validation_problems",
    "yaml_line",
    "yaml_syntax_problem",
]


MAX_INT_DIGITS = 4300
"""Most digits of an integer in a YAML file: Python's own limit for turning text into an int
and back (`sys.get_int_max_str_digits`), so every integer read can also be printed."""

_INT_BOUND = 10**MAX_INT_DIGITS


@dataclass(frozen=True)
class YamlLimits:
    """The bounds of one kind of YAML document (a run spec, a dataset)."""

    what: str
    """What the document is, for the messages (``run spec``, ``dataset``)."""
    max_chars: int
    """Longest text read."""
    max_depth: int
    """Deepest nesting of sequences and mappings, aliases followed."""
    max_nodes: int
    """Most nodes the document expands to, aliases followed (a billion-laughs file stops here)."""


class _Bounded:
    """The rules every reader here adds to PyYAML's safe loader: integers held to
    `MAX_INT_DIGITS` digits, and a key written twice in one mapping refused."""

    def construct_bounded_int(self: Any, node: yaml.ScalarNode) -> int:
        # int() of more digits raises a ValueError with a traceback's worth of text; a hex
        # or sexagesimal integer can be short and still too long to print: both bounds
        # are checked.
        text = str(node.value)
        if len(text) <= MAX_INT_DIGITS:
            value: int = self.construct_yaml_int(node)
            if abs(value) < _INT_BOUND:
                return value
        raise _Refused(
            node.start_mark,
            f"an integer of more than {MAX_INT_DIGITS} digits (the most a number may have): "
            "write it as a string",
        )

    def construct_mapping(self: Any, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        import yaml

        # PyYAML keeps the last of two equal keys (and a spec or a dataset in JSON syntax is
        # YAML): a key written twice is refused, as every received JSON reader does. A merge
        # (``<<``) may still be overridden by a key of the mapping itself.
        seen: set[object] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise _Refused(
                    key_node.start_mark,
                    f"the key {str(key)[:64]!r} appears twice in one mapping; readers that "
                    "keep the first and the last read different values: write it once",
                )
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep)  # type: ignore[misc]  # the loader's, after this mixin
        return mapping


@functools.cache
def _bounded_loader(fast: bool = False) -> type[yaml.SafeLoader]:
    """PyYAML's safe loader with `_Bounded`'s rules (built on first use). ``fast``: on
    libyaml's parser (`yaml.CSafeLoader`), where PyYAML was built with it; else the plain one."""
    import yaml

    base = yaml.CSafeLoader if fast and yaml.__with_libyaml__ else yaml.SafeLoader
    loader: type[yaml.SafeLoader] = type("_BoundedLoader", (_Bounded, base), {})
    loader.add_constructor("tag:yaml.org,2002:int", _Bounded.construct_bounded_int)
    return loader


def _check_events(loader: yaml.SafeLoader, limits: YamlLimits) -> None:
    """Refuse nesting past ``max_depth`` from the event stream, before any recursion."""
    import yaml

    depth = 0
    while loader.check_event():
        event = loader.get_event()  # type: ignore[no-untyped-call]  # types-pyyaml leaves it untyped
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.max_depth:
                raise _Refused(event.start_mark, f"nested deeper than {limits.max_depth} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_nodes(root: yaml.Node | None, limits: YamlLimits) -> None:
    """Refuse a document nested too deeply or expanding to too many nodes, aliases followed."""
    import yaml

    stack: list[tuple[yaml.Node, int]] = [] if root is None else [(root, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > limits.max_nodes:
            raise _Refused(
                None, f"expands to more than {limits.max_nodes} YAML nodes (aliases included)"
            )
        if depth > limits.max_depth:
            raise _Refused(
                node.start_mark, f"nested deeper than {limits.max_depth} levels (aliases followed)"
            )
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.extend(((key, depth + 1), (value, depth + 1)))


def read_user_file(path: Path, max_bytes: int, error: type[UserError], what: str) -> str:
    """The UTF-8 text of a file a user names (a spec, a dataset), read at most ``max_bytes``.

    Bounded: a named file may be hostile or a mistake (a huge file); a FIFO or a device
    (``/dev/zero``) is refused without reading it.

    Raises:
        UserError: As ``error``, naming ``path``: missing, a directory, unreadable, not UTF-8,
            or over ``max_bytes``.
    """
    try:
        # A FIFO or a device is refused unread (`read_regular`), never waited on or read forever.
        data = read_regular(path, max_bytes)
        if len(data) > max_bytes:
            raise error(f"{path}: over the limit of {max_bytes} bytes for a {what}")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, expected a {what} file") from None
    except NotRegularFileError as exc:
        raise error(f"{path}: {exc.strerror}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read the {what} ({exc})") from None


def read_yaml(
    text: str, source: str, limits: YamlLimits, error: type[UserError]
) -> tuple[yaml.Node | None, Any]:
    """Parse one YAML document within ``limits``: its node tree (for lines) and its value.

    Args:
        text: The document.
        source: Names it in messages (the file's path).
        limits: Its bounds.
        error: The caller's error type, raised with one line naming ``source``.

    Returns:
        The composed node tree (None for an empty document) and the plain value it holds.

    Raises:
        UserError: As ``error``: the text is over a bound, or not YAML.
    """
    import yaml

    if len(text) > limits.max_chars:
        raise error(
            f"{source}: {len(text)} characters, over the limit of {limits.max_chars} "
            f"for a {limits.what}"
        )
    try:
        # libyaml's parser reads a dataset of thousands of cases ten times faster. Any
        # problem it meets is read again by the plain parser, whose messages (and verdict)
        # are the ones users get; the two agree on every document both accept
        # (twinflow-eval's tests/test_yaml_parsers.py holds them equal).
        return _parse(text, limits, _bounded_loader(fast=True))
    except (yaml.YAMLError, _Refused, RecursionError):
        pass
    try:
        return _parse(text, limits, _bounded_loader())
    except yaml.YAMLError as exc:
        raise error(yaml_syntax_problem(exc, source)) from None
    except _Refused as exc:
        where = source if exc.line is None else f"{source}:{exc.line}"
        raise error(f"{where}: {exc.problem}") from None
    except RecursionError:  # pragma: no cover - the event pass bounds the depth first
        raise error(f"{source}: nested too deeply to be a {limits.what}") from None


def _parse(
    text: str, limits: YamlLimits, loader: type[yaml.SafeLoader]
) -> tuple[yaml.Node | None, Any]:
    """Three steps on one text: events (depth, without recursion), nodes (aliases followed,
    counted), then values from the nodes already composed."""
    scan = loader(text)
    try:
        _check_events(scan, limits)
    finally:
        scan.dispose()
    reader = loader(text)
    try:
        root = reader.get_single_node()
        _check_nodes(root, limits)
        data = None if root is None else reader.construct_document(root)
    finally:
        reader.dispose()
    return root, data


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


def _is_model(candidate: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(candidate, type) and issubclass(candidate, BaseModel)


def _tag(model: type[BaseModel]) -> object:
    field = model.model_fields.get("kind")
    return None if field is None else field.default


def _step(annotation: Any, key: int | str) -> Any:
    """The annotation of the value found at ``key`` inside a value of ``annotation``."""
    candidates = _models_in(annotation)
    for candidate in candidates:
        origin = typing.get_origin(candidate)
        args = typing.get_args(candidate)
        if _is_model(candidate):
            field = candidate.model_fields.get(str(key))
            if field is not None:
                return field.annotation
        elif origin in (tuple, list) and isinstance(key, int) and args:
            return args[0]
        elif origin is dict and len(args) == 2:
            return args[1]
    # A tagged union puts the tag in the location: `scorers.0.fields.nme`.
    tagged = [c for c in candidates if _is_model(c) and _tag(c) == key]
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
        if _is_model(candidate):
            names.extend(candidate.model_fields)
    return tuple(dict.fromkeys(names))


def unknown_key_message(model: type[BaseModel], loc: Sequence[int | str]) -> str:
    """``unknown key``, with the closest key the mapping accepts, if one is close."""
    return "unknown key" + did_you_mean(str(loc[-1]), known_keys(model, loc))


def yaml_line(node: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (or of its nearest existing parent).

    A mapping entry is placed at its key, where an unknown or bad key is written.
    """
    import yaml

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
