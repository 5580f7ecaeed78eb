"""The sandbox port and its bubblewrap adapter (docs/adr/0173).

`Sandbox` is one method, `run`, plus `close`: a command, its standard input, a work directory
that persists across calls, and the limits. `BubblewrapSandbox` runs it under Linux's namespaces
with ``bwrap``; a Docker adapter would implement the same `run` and nothing above the port
would change. There is no fallback: where ``bwrap`` is missing, `run` raises `LaunchError`
(``reason="unavailable"``) naming what to install.

Inside the sandbox (`_sandbox_init.py`): no network (a new, empty network namespace), new PID,
IPC and UTS namespaces, a read-only view of the system (``/usr``, ``/bin``, ``/lib*``) and of the
interpreter and its import path, a scrubbed environment, ``/tmp`` and ``/sandbox`` on sized tmpfs
mounts, no home, no keys, no run directory, no capabilities for the command, and an unprivileged
uid where the host runs as root. The work directory travels in (bound read-only, copied) and out
(a tar stream read as untrusted input: bounded, members that are links out, devices or absolute
paths refused) so what the code leaves there is all it can change.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from twinflow._base._untrusted import for_terminal
from twinflow.kernel._errors import LaunchError

_INIT = Path(__file__).with_name("_sandbox_init.py")
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc/alternatives")
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime")
_ROOT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_KILL", "CAP_DAC_OVERRIDE")
"""What the launcher inside keeps when the host is root: enough to copy the work directory in
and out and to drop the command to an unprivileged uid (which clears them for the command)."""
_INSTALL = (
    "a sandboxed tool needs bubblewrap (`bwrap`), which is not on PATH: install it "
    "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap); twinflow never "
    "runs a sandboxed tool without its sandbox"
)


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one call in a sandbox may use; every field has a default and a spec key."""

    cpu_seconds: int = 10
    """CPU time of the command (SIGXCPU, then SIGKILL a second later)."""
    wall_seconds: float = 30.0
    """Time from start to stop, however the command spends it."""
    memory_bytes: int = 512 * 1024 * 1024
    """Address space of each process (``RLIMIT_AS``)."""
    processes: int = 64
    """Processes of the sandbox's user (``RLIMIT_NPROC``): a fork bomb stops here."""
    file_bytes: int = 16 * 1024 * 1024
    """Size of any one file written (``RLIMIT_FSIZE``)."""
    output_bytes: int = 1024 * 1024
    """Standard output and error together; the command is stopped past it."""
    work_dir_bytes: int = 64 * 1024 * 1024
    """Size of ``/sandbox`` (and separately of ``/tmp``): both are tmpfs mounts of this size."""

    def __post_init__(self) -> None:
        for key, value in asdict(self).items():
            if not value > 0:
                raise ValueError(f"sandbox limit {key} must be positive, not {value!r}")

    def describe(self, names: Sequence[str]) -> str:
        """One line naming the limits a call hit, with their values, and what to do."""
        named = ", ".join(f"{name} ({getattr(self, name):g})" for name in names)
        return f"the sandboxed call hit its limit: {named}; raise it in the spec's sandbox settings"


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """How a command in a sandbox ended."""

    returncode: int
    """Its exit status (negative: the signal that ended it)."""
    stdout: str
    """What it printed, up to the output limit (UTF-8, undecodable bytes replaced)."""
    stderr: str
    """What it printed on standard error, up to the output limit."""
    limits_hit: tuple[str, ...]
    """The `SandboxLimits` fields it ran into, in the order found (empty: none)."""
    files: dict[str, tuple[int, str]] = field(default_factory=dict)
    """The work directory afterwards: relative path to (size, sha256) of each regular file."""
    refused: tuple[str, ...] = ()
    """Entries of the work directory not carried out (links pointing out, devices)."""

    def outcome(self, before: dict[str, tuple[int, str]]) -> dict[str, Any]:
        """As JSON: output, exit status, the files changed since ``before``, the limits hit."""
        changed = [
            {"name": name, "size": size, "sha256": sha}
            for name, (size, sha) in sorted(self.files.items())
            if before.get(name) != (size, sha)
        ]
        return {
            "exit_status": self.returncode,
            # Scrubbed of secrets, and no control reaches a terminal that shows the result.
            "stdout": for_terminal(self.stdout),
            "stderr": for_terminal(self.stderr),
            "files_changed": changed,
            "files_removed": sorted(set(before) - set(self.files)),
            "links_refused": list(self.refused),
            "limits_hit": list(self.limits_hit),
        }


class Sandbox(Protocol):
    """Runs a command in isolation from the host; the port a Docker adapter would also fill."""

    def run(
        self,
        command: Sequence[str],
        *,
        work_dir: Path,
        stdin: bytes = b"",
        limits: SandboxLimits = SandboxLimits(),
        read_only: Sequence[Path] = (),
    ) -> SandboxResult:
        """Run `command` in the sandbox with `work_dir`'s files at ``/sandbox`` and return how it ended.

        Args:
            command: The program and its arguments, as seen inside (the interpreter's path is
                the host's).
            work_dir: A host directory holding the work directory's state; replaced by what
                the command left in ``/sandbox``.
            stdin: The command's standard input.
            limits: What the command may use.
            read_only: Further host paths to show read-only, at the same place.

        Raises:
            LaunchError: The sandbox is not available (``reason="unavailable"``) or broke its
                protocol (``reason="protocol"``); a command that fails or hits a limit is a
                result, not an error.
        """
        ...

    def work_directory(self, owner: object) -> Path:
        """A new, empty host directory for a run's work directory, removed with ``owner``."""
        ...

    def close(self) -> None:
        """Release what the sandbox holds."""
        ...


def interpreter_paths() -> tuple[Path, ...]:
    """The interpreter, its standard library and import path: what a Python tool needs to see."""
    found: list[Path] = []
    # Never shown whole: the current directory and the script's (the first entry of the
    # import path) may be a project holding keys and runs, or /tmp.
    hidden = {Path.cwd().resolve(), Path.home(), Path("/"), Path("/tmp")}
    for raw in (sys.base_prefix, sys.prefix, *sys.path[1:]):
        if not raw:
            continue
        path = Path(raw).resolve()
        if path.is_dir() and path not in hidden and path not in found:
            found.append(path)
    return tuple(found)


class BubblewrapSandbox:
    """The `Sandbox` on bubblewrap: Linux namespaces, no network, limits set inside."""

    def __init__(self, *, bwrap: str | None = None) -> None:
        """Create the adapter.

        Args:
            bwrap: The ``bwrap`` program (default: found on PATH when a call runs).
        """
        self._bwrap = bwrap

    def close(self) -> None:
        """Nothing is held between calls."""

    def work_directory(self, owner: object) -> Path:
        """A new, empty temporary directory, removed when ``owner`` is collected."""
        return new_work_dir(owner)

    def _program(self) -> str:
        found = self._bwrap or shutil.which("bwrap")
        if not found or not os.access(found, os.X_OK):
            raise LaunchError(_INSTALL, reason="unavailable")
        return found

    def command_line(
        self, work_dir: Path, limits: SandboxLimits, read_only: Sequence[Path]
    ) -> list[str]:
        """The ``bwrap`` command that starts the launcher inside (shown by tests and the ADR)."""
        line = [self._program(), "--die-with-parent", "--new-session", "--unshare-ipc"]
        line += ["--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        line += ["--cap-drop", "ALL"]
        if os.getuid() == 0:
            for cap in _ROOT_CAPS:
                line += ["--cap-add", cap]
        line += ["--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin"]
        line += ["--setenv", "HOME", "/sandbox", "--setenv", "LANG", "C.UTF-8"]
        line += ["--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--hostname", "sandbox"]
        # The tmpfs mounts first: a path bound below them (an interpreter under /tmp) stays.
        size = str(limits.work_dir_bytes)
        line += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
        line += ["--perms", "0755", "--size", size, "--tmpfs", "/sandbox"]
        for path in _SYSTEM:
            line += ["--ro-bind-try", path, path]
        for path in _SYSTEM_FILES:
            line += ["--ro-bind-try", path, path]
        system = {Path(path) for path in _SYSTEM}
        made: set[Path] = set()
        for bound in (*interpreter_paths(), *read_only):
            host = Path(bound).resolve()
            # bwrap makes a bound path's missing parents private (0700): an unprivileged
            # command could not reach the interpreter through them.
            for parent in reversed(host.parents[:-1]):
                if parent not in made and not system.intersection((parent, *parent.parents)):
                    made.add(parent)
                    line += ["--perms", "0755", "--dir", str(parent)]
            line += ["--ro-bind", str(host), str(host)]
        line += ["--proc", "/proc", "--dev", "/dev"]
        line += ["--ro-bind", str(work_dir), "/.twinflow/in"]
        line += ["--ro-bind", str(_INIT), "/.twinflow/init.py", "--chdir", "/sandbox"]
        return [*line, "--", os.path.realpath(sys.executable), "-I", "-S", "/.twinflow/init.py"]

    def run(
        self,
        command: Sequence[str],
        *,
        work_dir: Path,
        stdin: bytes = b"",
        limits: SandboxLimits = SandboxLimits(),
        read_only: Sequence[Path] = (),
    ) -> SandboxResult:
        """Run `command` in a fresh sandbox (see `Sandbox.run`)."""
        work_dir = Path(work_dir).resolve()
        work_dir.mkdir(parents=True, exist_ok=True)
        line = self.command_line(work_dir, limits, read_only)
        request = {"command": list(command), "limits": asdict(limits)}
        request["input"] = base64.b64encode(stdin).decode()
        # The launcher stops the command at the wall limit; this is the backstop for the
        # launcher itself (copying the work directory in and out takes its own time).
        backstop = float(limits.wall_seconds) + 30.0
        try:
            done = subprocess.run(
                line,
                input=json.dumps(request).encode() + b"\n",
                capture_output=True,
                timeout=backstop,
                env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise LaunchError(
                f"the sandbox did not finish within {backstop:g} s and was killed (with "
                "everything in it)",
                reason="protocol",
            ) from None
        bound = 4 * (limits.output_bytes + limits.work_dir_bytes) + (1 << 20)
        if len(done.stdout) > bound:
            raise LaunchError(f"the sandbox wrote more than {bound} bytes", reason="protocol")
        return _read_result(done.stdout, done.stderr, work_dir)


def _read_result(raw: bytes, errors: bytes, work_dir: Path) -> SandboxResult:
    header, _, archive = raw.partition(b"\n")
    try:
        result = json.loads(header)
        returncode = int(result["returncode"])
        out = base64.b64decode(result["stdout"]).decode("utf-8", "replace")
        err = base64.b64decode(result["stderr"]).decode("utf-8", "replace")
        hit = tuple(str(name) for name in result["hit"])
    except (ValueError, KeyError, TypeError):
        tail = errors.decode("utf-8", "replace").strip()[-500:]
        raise LaunchError(
            f"the sandbox gave no result (bwrap said: {tail or 'nothing'}); check that "
            "bubblewrap can create namespaces here (`bwrap --ro-bind / / true`)",
            reason="protocol",
        ) from None
    refused = _replace_work_dir(archive, work_dir)
    return SandboxResult(returncode, out, err, hit, manifest(work_dir), refused)


def _replace_work_dir(archive: bytes, work_dir: Path) -> tuple[str, ...]:
    """Make `work_dir` hold exactly what the tar stream holds, refusing unsafe members."""
    refused: list[str] = []
    fresh = Path(tempfile.mkdtemp(prefix=".work-", dir=work_dir.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            for member in tar:
                try:
                    safe = tarfile.data_filter(member, str(fresh))
                except tarfile.FilterError:
                    refused.append(member.name)
                    continue
                tar.extract(safe, fresh, filter="fully_trusted")
    except tarfile.TarError as error:
        shutil.rmtree(fresh, ignore_errors=True)
        raise LaunchError(
            f"the sandbox's work directory is unreadable: {error}", reason="protocol"
        ) from None
    old = work_dir.with_name(fresh.name + "-old")
    work_dir.rename(old)
    fresh.rename(work_dir)
    shutil.rmtree(old, ignore_errors=True)
    return tuple(refused)


def new_work_dir(owner: object) -> Path:
    """A new, empty work directory on the host, removed when ``owner`` is collected."""
    base = Path(tempfile.mkdtemp(prefix="twinflow-sandbox-"))
    weakref.finalize(owner, shutil.rmtree, base, True)
    work = base / "work"
    work.mkdir()
    return work


def manifest(work_dir: Path) -> dict[str, tuple[int, str]]:
    """Each regular file under `work_dir` (relative path, ``/``-separated): (size, sha256)."""
    found: dict[str, tuple[int, str]] = {}
    for base, dirs, files in os.walk(work_dir):
        dirs.sort()
        for name in sorted(files):
            path = Path(base, name)
            if path.is_symlink() or not path.is_file():
                continue
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 16), b""):
                    digest.update(block)
            found[path.relative_to(work_dir).as_posix()] = (path.stat().st_size, digest.hexdigest())
    return found
