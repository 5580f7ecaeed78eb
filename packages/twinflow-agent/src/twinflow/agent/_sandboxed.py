"""Tools that run in the kernel's sandbox: the spec's settings and the call that crosses in.

A sandboxed tool's module and arguments cross into the sandbox as JSON (`_RUNNER`, run by the
same interpreter inside), its result comes back as JSON and is then bounded like any reply. A
run's sandboxed calls share one `SandboxSession`: one work directory that persists across the
run's calls. A limit hit or a failure inside is an exception here, so the runner records it as
the call's error result and the run goes on (docs/adr/0173, 0174).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_core import to_jsonable_python

from twinflow._base._untrusted import scrub
from twinflow.agent._code_record import SpecValue
from twinflow.agent._errors import AgentConfigError
from twinflow.kernel import (
    BubblewrapSandbox,
    LaunchError,
    Sandbox,
    SandboxLimits,
)
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["SandboxSession", "SandboxSpec", "ToolEntry", "sandboxed"]

_DEFAULTS = SandboxLimits()

# Inside the sandbox: import the tool by module and name, call it with the arguments the host
# validated (plain values as they are, others rebuilt by pydantic), print one JSON line. Only
# the standard library for plain tools, so a call does not pay for importing twinflow.
_RUNNER = """
import importlib, json, sys, typing
request = json.loads(sys.stdin.read())
sys.path[:0] = request["path"]
try:
    target = importlib.import_module(request["module"])
    for part in request["qualname"].split("."):
        target = getattr(target, part)
    hints = typing.get_type_hints(target)
    kwargs = {}
    for name, value in request["arguments"].items():
        hint = hints.get(name)
        if hint in (str, int, float, bool, type(None)):
            kwargs[name] = value
        else:  # a model or a container: pydantic rebuilds it as the host validated it
            from pydantic import TypeAdapter
            kwargs[name] = TypeAdapter(hint).validate_python(value)
    value = target(**kwargs)
    if isinstance(value, str):
        answer = {"text": value}
    else:
        try:
            answer = {"value": json.loads(json.dumps(value, allow_nan=False))}
        except (TypeError, ValueError):
            from pydantic_core import to_jsonable_python
            answer = {"value": to_jsonable_python(value)}
except BaseException as error:
    answer = {"error": type(error).__name__, "message": str(error)}
print("\\n" + json.dumps(answer))
"""


class SandboxSpec(SpecValue):
    """The ``sandbox:`` settings: the limits of each sandboxed call (a default for each)."""

    cpu_seconds: int = Field(default=_DEFAULTS.cpu_seconds, ge=1, le=86_400)
    """CPU seconds of one call."""
    wall_seconds: float = Field(default=_DEFAULTS.wall_seconds, gt=0, le=86_400)
    """Seconds from start to stop of one call."""
    memory_bytes: int = Field(default=_DEFAULTS.memory_bytes, ge=16 * 1024 * 1024)
    """Address space of each process of the call."""
    processes: int = Field(default=_DEFAULTS.processes, ge=1, le=100_000)
    """Processes the call may run at once."""
    file_bytes: int = Field(default=_DEFAULTS.file_bytes, ge=1)
    """Size of any one file the call writes."""
    output_bytes: int = Field(default=_DEFAULTS.output_bytes, ge=1)
    """Standard output and error of one call, together."""
    work_dir_bytes: int = Field(default=_DEFAULTS.work_dir_bytes, ge=4096)
    """Size of the run's work directory (and of the call's ``/tmp``)."""
    loopback_ports: tuple[int, ...] = ()
    """Not offered yet: the sandbox has no network at all; a spec naming ports is refused."""

    @field_validator("loopback_ports")
    @classmethod
    def _no_ports_yet(cls, ports: tuple[int, ...]) -> tuple[int, ...]:
        if ports:
            raise ValueError(
                "the sandbox has no network: loopback ports cannot be offered inside it yet; "
                "remove sandbox.loopback_ports (a tool that needs a server runs unsandboxed)"
            )
        return ports

    def limits(self) -> SandboxLimits:
        """These settings as the kernel's limits."""
        return SandboxLimits(**self.model_dump(exclude={"loopback_ports"}))


class ToolEntry(SpecValue):
    """A tool of the spec written as a mapping: its dotted path and whether it is sandboxed."""

    name: str = Field(min_length=1)
    """The dotted path of the callable (``package.module:function``)."""
    sandbox: bool | SandboxSpec = False
    """Run it in the sandbox: ``true`` with the spec's ``sandbox:`` settings, or its own."""


class SandboxSession:
    """One run's sandbox: the port, the limits and the work directory its calls share."""

    def __init__(
        self,
        settings: SandboxSpec | None = None,
        *,
        sandbox: Sandbox | None = None,
        work_dir: Path | None = None,
    ) -> None:
        """Create the session; the work directory is made when the first call runs.

        Args:
            settings: The limits (default: every default).
            sandbox: The sandbox port (default: bubblewrap).
            work_dir: The host directory holding the work directory (default: a new
                temporary one, removed with the session).
        """
        self.settings = settings or SandboxSpec()
        self.sandbox: Sandbox = sandbox or BubblewrapSandbox()
        self._work_dir = work_dir
        self.files: dict[str, tuple[int, str]] = {}
        """The work directory after the last call: path to (size, sha256)."""
        self.pending: list[Callable[[], None]] = []
        """Recorded calls to run again before the first live one (a resumed run)."""
        self._refusal: str | None = None

    def catch_up(self) -> None:
        """Run the recorded calls again, so the work directory is the one the trace built.

        Raises:
            LaunchError: A call run again changed other files than its record says; every
                later call is refused with the same message.
        """
        if self._refusal is not None:
            raise LaunchError(self._refusal, reason="protocol")
        while self.pending:
            try:
                self.pending.pop(0)()
            except LaunchError as error:
                self._refusal = (
                    f"the work directory cannot be restored from the trace: {error}; start a "
                    "new run instead of resuming this one"
                )
                raise LaunchError(self._refusal, reason="protocol") from None

    @property
    def work_dir(self) -> Path:
        """The host directory that holds the run's work directory between calls."""
        if self._work_dir is None:
            self._work_dir = self.sandbox.work_directory(self)
        return self._work_dir


def _module_paths(function: Callable[..., Any]) -> tuple[list[str], tuple[Path, ...]]:
    """Where the function's module is imported from inside, and what to show read-only."""
    try:
        file = inspect.getsourcefile(function)
    except TypeError:
        file = None
    if not file:
        return [], ()
    top = function.__module__.split(".")
    here = Path(file).resolve()
    root = here.parents[len(top) - (0 if here.name == "__init__.py" else 1)]
    shown = root / top[0] if len(top) > 1 or here.name == "__init__.py" else here
    return [str(root)], (shown,)


_BUILTIN_ERRORS: dict[str, type[Exception]] = {
    error.__name__: error
    for error in (
        ArithmeticError,
        AssertionError,
        FileNotFoundError,
        IndexError,
        KeyError,
        NotImplementedError,
        OSError,
        PermissionError,
        RuntimeError,
        TimeoutError,
        TypeError,
        ValueError,
        ZeroDivisionError,
    )
}
"""The exceptions a sandboxed tool raises that come back as themselves (others: RuntimeError)."""


def _raise_inner(answer: dict[str, Any], name: str) -> None:
    kind = str(answer.get("error", "Error"))
    message = scrub(str(answer.get("message", "")))
    builtin = _BUILTIN_ERRORS.get(kind)
    if builtin is not None:
        raise builtin(message)
    raise RuntimeError(f"{kind} in the sandboxed tool {name!r}: {message}")


def _tool_text(stdout: str, stderr: str, returncode: int, name: str) -> str:
    """The sandboxed tool's result as text, read from the runner's last line of output.

    Raises:
        LaunchError (``protocol``): The runner printed no result.
        RuntimeError: The tool raised inside the sandbox (`_raise_inner`).
    """
    last = stdout.rstrip("\n").rpartition("\n")[2]
    try:
        answer = json.loads(last)
    except ValueError:
        tail = scrub(stderr.strip()[-500:])
        raise LaunchError(
            f"the sandboxed tool {name!r} gave no result (exit status {returncode}): "
            f"{tail or 'no output'}",
            reason="protocol",
        ) from None
    if not isinstance(answer, dict) or not {"text", "value"} & set(answer):
        _raise_inner(answer if isinstance(answer, dict) else {}, name)
    if "text" in answer:
        return scrub(str(answer["text"]))
    # Rendered as `Tool.call` renders a value: its canonical JSON.
    return scrub(canonical_bytes(answer["value"]).decode())


def sandboxed(
    function: Callable[..., Any], session: SandboxSession, name: str
) -> Callable[..., Any]:
    """``function`` as a callable of the same signature that runs it in ``session``'s sandbox.

    Raises:
        AgentConfigError: The function cannot be imported by module and name (defined in
            ``__main__``, inside another function, or a lambda).
    """
    qualname = str(getattr(function, "__qualname__", ""))
    if function.__module__ in ("__main__", None) or "<" in qualname:
        raise AgentConfigError(
            f"tool {name!r}: a sandboxed tool is imported inside the sandbox by module and "
            f"name, and {function.__module__}:{qualname} cannot be: define it at the top level "
            "of a module"
        )
    path, shown = _module_paths(function)

    def once(kwargs: dict[str, Any]) -> str:
        request = {
            "module": function.__module__,
            "qualname": function.__qualname__,
            "name": name,
            "path": path,
            "arguments": to_jsonable_python(kwargs),
        }
        stdin = json.dumps(request).encode()
        result = session.sandbox.run(
            [sys.executable, "-c", _RUNNER],
            work_dir=session.work_dir,
            stdin=stdin,
            limits=session.settings.limits(),
            read_only=shown,
        )
        session.files = dict(result.files)
        if result.limits_hit:
            message = session.settings.limits().describe(result.limits_hit)
            raise LaunchError(message, reason="limit")
        return _tool_text(result.stdout, result.stderr, result.returncode, name)

    @functools.wraps(function)
    def call(**kwargs: Any) -> str:
        session.catch_up()
        return once(kwargs)

    def recorded(arguments: dict[str, Any], content: str) -> None:
        session.pending.append(lambda: _ignore(once, arguments))

    call.twinflow_recorded = recorded  # type: ignore[attr-defined]  # resume's hook
    return call


def _ignore(once: Callable[[dict[str, Any]], str], arguments: dict[str, Any]) -> None:
    """Run a recorded call again for its files; its own failure is the trace's, not ours."""
    with contextlib.suppress(Exception):
        once(arguments)


class _Builtin:
    """A built-in tool's call: code in, the outcome out; replays recorded calls before going live.

    A resumed or forked run serves its recorded calls from the trace, so the work directory
    they built is not on disk. Before the first live call, the recorded calls are run again in
    order and each one's changed files are checked against the recorded ``files_changed``;
    the first that differs refuses every later call, naming the file.
    """

    def __init__(self, session: SandboxSession, name: str, program: list[str]) -> None:
        self.session = session
        self.name = name
        self.program = program

    def execute(self, code: str) -> dict[str, Any]:
        session = self.session
        before = dict(session.files)
        result = session.sandbox.run(
            [*self.program, code], work_dir=session.work_dir, limits=session.settings.limits()
        )
        session.files = dict(result.files)
        return result.outcome(before)

    def call(self, code: str) -> str:
        self.session.catch_up()
        done = self.execute(code)
        text = json.dumps(done, ensure_ascii=False)
        if done["limits_hit"]:
            message = self.session.settings.limits().describe(done["limits_hit"])
            raise LaunchError(f"{message}\n{text}", reason="limit")
        return text

    def recorded(self, arguments: dict[str, object], content: str) -> None:
        """Queue a recorded call to be run again before the first live one."""
        code = str(arguments["code"])

        def again() -> None:
            recorded = _recorded_files(content)
            done = self.execute(code)["files_changed"]
            if recorded is not None and done != recorded:
                first = next(
                    (a, b) for a, b in zip([*done, None], [*recorded, None], strict=False) if a != b
                )
                raise LaunchError(
                    f"{self.name} with code {code[:60]!r} changed {first[0]} when run again, "
                    f"where the trace records {first[1]}",
                    reason="protocol",
                )

        self.session.pending.append(again)


def _recorded_files(content: str) -> list[Any] | None:
    """The ``files_changed`` a recorded result holds (after a limit's line, if any)."""
    start = content.find("{")
    try:
        value = json.loads(content[start:]) if start >= 0 else None
    except ValueError:
        return None
    files = value.get("files_changed") if isinstance(value, dict) else None
    return files if isinstance(files, list) else None


def _make(builtin: _Builtin, doc: str) -> Callable[..., Any]:
    def tool(code: str) -> str:
        return builtin.call(code)

    tool.__name__ = tool.__qualname__ = builtin.name
    tool.__doc__ = doc
    tool.twinflow_recorded = builtin.recorded  # type: ignore[attr-defined]  # resume's hook
    return tool


_DOC = (
    "Run {what} in a sandbox with no network; files in the current directory persist between "
    "calls. Returns the exit status, stdout, stderr and the files changed (name, size, sha256)."
)


def builtin_tools(names: tuple[str, ...], session: SandboxSession) -> list[Callable[..., Any]]:
    """The built-in tools named (``run_python``, ``run_shell``), on ``session``'s sandbox."""
    programs = {
        "run_python": ([sys.executable, "-I", "-c"], "Python code"),
        "run_shell": (["/bin/sh", "-c"], "a POSIX shell script"),
    }
    return [
        _make(_Builtin(session, name, programs[name][0]), _DOC.format(what=programs[name][1]))
        for name in dict.fromkeys(names)
    ]
