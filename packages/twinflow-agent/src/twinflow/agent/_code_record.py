"""Where a run's code came from: the modules its spec imported, each with its digest.

``twinflow run`` writes the record beside the spec copy (``code.N.json``); ``twinflow replay
--trust-spec`` reads it back and refuses to import a module whose file changed since the run.
A spec's sub-agents (``agents``) import their own modules from their own directories: each
child's record is kept under its name (``agents``), nested as the specs are.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, ValidationError, field_validator

from twinflow._base._code import module_file
from twinflow._base._json import refuse_repeated_keys
from twinflow.agent._errors import SpecError
from twinflow.kernel._environment import file_sha256
from twinflow.trace import UserError
from twinflow.vocab import FrozenValue

if TYPE_CHECKING:
    from twinflow.agent._spec import RunSpec

__all__ = [
    "CodeRecord",
    "ModuleDigest",
    "SpecValue",
    "check_code",
    "read_code_record",
    "record_code",
]

MAX_CODE_RECORD_BYTES = 256 * 1024
"""Largest code record read (it sits in a run directory: untrusted input like the spec)."""

_SHA256 = r"^[0-9a-f]{64}$"


class SpecValue(FrozenValue):
    """Base of the spec's values and the code record's: frozen, no extra keys, `SpecError` on
    bad input."""

    # Declared again: mypy reads a class attribute holding a class with its own __init__ as a
    # method otherwise.
    _invalid_error: ClassVar[Callable[[str], Exception]] = SpecError


class ModuleDigest(SpecValue):
    """One module a run imported for its tools or output model, as it was when the run began."""

    module: str = Field(min_length=1, max_length=1000)
    """The dotted module name the spec names."""
    origin: Literal["code_dir", "installed"]
    """Found in the run's code directory, or in the installed packages."""
    sha256: str = Field(pattern=_SHA256)
    """The sha256 of the module's source file (hex)."""


class CodeRecord(SpecValue):
    """Where a run's spec took its code from: written beside the spec copy as ``code.N.json``.

    ``code_dir`` is absolute, as the run resolved it, so a run directory can be moved and still
    replay; it is only ever read under ``replay --trust-spec``, and a module is imported from it
    only if its file has the digest recorded here.
    """

    code_dir: str | None = Field(default=None, max_length=4096)
    """The directory the spec's modules were imported from first (the spec file's directory)."""
    modules: tuple[ModuleDigest, ...] = Field(default=(), max_length=1000)
    """The tool and output modules that ran, with their digests."""
    agents: dict[str, CodeRecord] = Field(
        default_factory=dict, max_length=64, exclude_if=lambda value: not value
    )
    """Each sub-agent's code, by its name in the spec's ``agents`` (absent without any)."""

    @field_validator("agents")
    @classmethod
    def _shallow(cls, agents: dict[str, CodeRecord]) -> dict[str, CodeRecord]:
        if _depth(agents) > _MAX_AGENT_DEPTH:
            raise ValueError(f"sub-agents' code nests deeper than {_MAX_AGENT_DEPTH} levels")
        return agents


_MAX_AGENT_DEPTH = 4
"""As deep as sub-agents nest (`twinflow.agent._subagent.MAX_DEPTH`)."""


def _depth(agents: dict[str, CodeRecord]) -> int:
    return max((1 + _depth(child.agents) for child in agents.values()), default=0)


def _children(spec: RunSpec, depth: int) -> list[tuple[str, RunSpec]]:
    """The spec's sub-agents' specs by name, read as resolving them read them (their cycles
    and depth were refused then; the depth is bounded here again)."""
    if not spec.agents or depth >= _MAX_AGENT_DEPTH:
        return []
    base = spec.code_dir if spec.code_dir is not None else Path.cwd()
    children = []
    for entry in spec.agents:
        path = (base / entry.spec).resolve()
        children.append(
            (
                entry.name,
                type(spec).parse(type(spec).read_text(path), str(path), code_dir=path.parent),
            )
        )
    return children


def record_code(spec: RunSpec, _depth: int = 0) -> CodeRecord:
    """The record of ``spec``'s code and its sub-agents': call after its modules were imported
    (the agent built).

    Raises:
        SpecError: a module's file cannot be found or read.
    """
    agents = {name: record_code(child, _depth + 1) for name, child in _children(spec, _depth)}
    code_dir = spec.code_dir.resolve() if spec.code_dir is not None else None
    modules = []
    for name in _executed_modules(spec):
        path = _file_of(name, spec)
        if path is None:
            continue  # a built-in or namespace module has no file to digest
        try:
            digest = file_sha256(path)
        except OSError as exc:
            raise SpecError(f"cannot read module {name!r} at {path}: {exc}") from None
        inside = code_dir is not None and path.resolve().is_relative_to(code_dir)
        origin: Literal["code_dir", "installed"] = "code_dir" if inside else "installed"
        modules.append(ModuleDigest(module=name, origin=origin, sha256=digest))
    return CodeRecord(
        code_dir=None if code_dir is None else str(code_dir),
        modules=tuple(modules),
        agents=agents,
    )


def _executed_modules(spec: RunSpec) -> tuple[str, ...]:
    """Every module whose file runs when the spec's modules are imported, parents first.

    Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` before ``c``: each is
    recorded, and checked before the next is looked up (looking up ``a.b`` imports ``a``).
    """
    names: dict[str, None] = {}
    for module in spec.modules():
        parts = module.split(".")
        for end in range(1, len(parts) + 1):
            names[".".join(parts[:end])] = None
    return tuple(names)


def read_code_record(path: Path) -> CodeRecord | None:
    """The code record at ``path``, or None if the run wrote none (a run from before records).

    Raises:
        SpecError: the record is unreadable, too large, not the record's JSON, or names a
            code directory that is not an absolute, link-free path.
    """
    try:
        with path.open("rb") as file:
            data = file.read(MAX_CODE_RECORD_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the code record ({exc})") from None
    if len(data) > MAX_CODE_RECORD_BYTES:
        raise SpecError(
            f"{path}: over the limit of {MAX_CODE_RECORD_BYTES} bytes for a code record"
        )
    try:
        refuse_repeated_keys(data)
        record = CodeRecord.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the record"
        raise SpecError(f"{path}: not a code record: {where}: {first['msg']}") from None
    except ValueError as exc:
        raise SpecError(f"{path}: not a code record: {exc}") from None
    if record.code_dir is not None:
        recorded = Path(record.code_dir)
        # A received run directory names this path: it is only a place to look (the digests
        # decide what is imported), and never one reached through a link or relative to the cwd.
        try:
            plain = recorded.is_absolute() and os.path.realpath(recorded) == os.path.normpath(
                recorded
            )
        except (OSError, ValueError):  # a NUL byte, a name too long for the system
            plain = False
        if not plain:
            raise SpecError(
                f"{path}: the code directory {record.code_dir!r} is not an absolute path free "
                "of links; replay with --spec PATH naming the spec you trust"
            )
    return record


def _file_of(name: str, spec: RunSpec) -> Path | None:
    """The module's file, looked up from the spec's directories; its error as a spec's."""
    try:
        return module_file(name, spec.directories)
    except UserError as exc:
        raise SpecError(str(exc)) from None


def check_code(spec: RunSpec, record: CodeRecord, _depth: int = 0) -> None:
    """Refuse to rebuild ``spec``'s agent if a module it names differs from the one that ran.

    Every module the spec names must be in ``record``, be found (from ``spec.code_dir`` first,
    then the installed packages) and have the recorded sha256; nothing is imported before all of
    them are checked. Each sub-agent's spec is checked against its own record, the same way.

    Raises:
        SpecError: a module cannot be found (the message lists the directories searched) or
            has no digest in the record.
        SpecError: (``reason`` ``code_changed``, ``module`` naming it) a module's file differs
            from the one the run imported.
    """
    recorded = {m.module: m for m in record.modules}
    for name in _executed_modules(spec):
        path = _file_of(name, spec)
        if path is None:
            continue  # a namespace package: no file of its own runs
        entry = recorded.get(name)
        if entry is None:
            raise SpecError(
                f"the run's code record has no digest for module {name!r}: replay with --spec "
                "PATH naming the spec you trust"
            )
        try:
            digest = file_sha256(path)
        except OSError as exc:
            raise SpecError(f"cannot read module {name!r} at {path}: {exc}") from None
        if digest != entry.sha256:
            raise SpecError(
                f"module {name!r} changed since the run: {path} has sha256 {digest}, the run "
                f"imported {entry.sha256}; restore it, or replay with --spec PATH to use the "
                "code as it is now",
                reason="code_changed",
                module=name,
            )
    for name, child in _children(spec, _depth):
        child_record = record.agents.get(name)
        if child_record is None:
            if not child.modules() and not child.agents:
                continue
            raise SpecError(
                f"the run's code record has no digests for sub-agent {name!r}: replay with "
                "--spec PATH naming the spec you trust"
            )
        check_code(child, child_record, _depth + 1)
