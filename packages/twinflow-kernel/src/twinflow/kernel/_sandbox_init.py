"""The launcher inside a bubblewrap sandbox (`_sandbox.BubblewrapSandbox`, docs/adr/0173).

Run as a script, by path, with the standard library only, by the sandbox's own interpreter::

    python -I -S _sandbox_init.py        # one JSON request on stdin

It copies the run's work directory (bound read-only at ``/.twinflow/in``) into the sized tmpfs at
``/sandbox``, starts the command with the limits of the request (``setrlimit`` in the child, and an
unprivileged uid when the sandbox was entered as root), reads its stdout and stderr up to the
output bound, and stops it at the wall-time deadline. Then it kills every process left in the
sandbox's PID namespace (a ``setsid`` and double-forked child included) and writes to its stdout
one JSON line (exit status, output, the limits hit) followed by a tar stream of ``/sandbox``, which
the host reads as untrusted input.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time

_IN = "/.twinflow/in"
_WORK = "/sandbox"
_NOBODY = 65534
_RLIMITS = (
    ("cpu_seconds", resource.RLIMIT_CPU),
    ("memory_bytes", resource.RLIMIT_AS),
    ("processes", resource.RLIMIT_NPROC),
    ("file_bytes", resource.RLIMIT_FSIZE),
)
# What a process prints when the kernel refused it more of a limited resource.
_SIGNS = (
    ("memory_bytes", ("MemoryError", "Cannot allocate memory", "std::bad_alloc")),
    ("processes", ("Resource temporarily unavailable", "BlockingIOError")),
    ("file_bytes", ("File too large", "File size limit exceeded")),
    ("work_dir_bytes", ("No space left on device",)),
)


def _child_setup(limits: dict[str, int], drop: bool) -> None:
    """In the child, before exec: its limits, no core files, and no root."""
    os.setsid()
    for key, which in _RLIMITS:
        value = int(limits[key])
        # CPU: SIGXCPU at the soft limit, SIGKILL a second later if it is ignored.
        hard = value + 1 if which == resource.RLIMIT_CPU else value
        resource.setrlimit(which, (value, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if drop:
        os.setgroups([])
        os.setresgid(_NOBODY, _NOBODY, _NOBODY)
        os.setresuid(_NOBODY, _NOBODY, _NOBODY)


def _copy_in(drop: bool) -> None:
    if os.path.isdir(_IN):
        shutil.copytree(_IN, _WORK, symlinks=True, dirs_exist_ok=True)
    if drop:
        for base, dirs, files in os.walk(_WORK):
            for name in (base, *(os.path.join(base, n) for n in dirs + files)):
                os.lchown(name, _NOBODY, _NOBODY)


def _kill_all() -> None:
    """SIGKILL every other process of the namespace (its init, bubblewrap's, is unreachable)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(-1, signal.SIGKILL)


def _collect(child: subprocess.Popen[bytes], limit: int, wall: float) -> tuple[bytes, bytes, str]:
    """Read the child's output until it exits; the limit hit by the reading itself, if any."""
    assert child.stdout is not None and child.stderr is not None
    streams = {child.stdout.fileno(): bytearray(), child.stderr.fileno(): bytearray()}
    deadline = time.monotonic() + wall
    hit = ""
    open_fds = list(streams)
    while open_fds:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            hit = "wall_seconds"
            break
        readable, _, _ = select.select(open_fds, [], [], min(remaining, 0.05))
        for fd in readable:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.remove(fd)
            streams[fd] += chunk
        if sum(map(len, streams.values())) > limit:
            hit = "output_bytes"
            break
        if child.poll() is not None:
            _kill_all()  # a detached child may hold the pipes open; it ends with the call
    _kill_all()
    child.wait()
    out, err = (bytes(streams[s.fileno()][:limit]) for s in (child.stdout, child.stderr))
    return out, err, hit


def _limits_hit(code: int, err: bytes, hit: str, limits: dict[str, int]) -> list[str]:
    found = [hit] if hit else []
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        if code == -signal.SIGXCPU or usage.ru_utime + usage.ru_stime >= limits["cpu_seconds"]:
            found.append("cpu_seconds")
    if code == -signal.SIGXFSZ:
        found.append("file_bytes")
    if code != 0 and not found:
        text = err.decode("utf-8", "replace")
        found.extend(key for key, signs in _SIGNS if any(sign in text for sign in signs))
    return found


def main() -> int:
    """Run the request read from stdin; write the result line and the work directory's tar."""
    request = json.loads(sys.stdin.buffer.readline(1 << 20))
    limits: dict[str, int] = request["limits"]
    drop = os.getuid() == 0
    _copy_in(drop)
    if drop:
        os.lchown(_WORK, _NOBODY, _NOBODY)
    try:
        child = subprocess.Popen(
            request["command"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=_WORK,
            preexec_fn=lambda: _child_setup(limits, drop),
        )
    except (OSError, subprocess.SubprocessError) as error:
        message = base64.b64encode(f"cannot start {request['command'][0]}: {error}".encode())
        result = {"returncode": 127, "stdout": "", "stderr": message.decode(), "hit": []}
    else:
        feed = threading.Thread(target=_feed, args=(child, base64.b64decode(request["input"])))
        feed.daemon = True
        feed.start()
        out, err, hit = _collect(child, int(limits["output_bytes"]), float(limits["wall_seconds"]))
        result = {
            "returncode": child.returncode,
            "stdout": base64.b64encode(out).decode(),
            "stderr": base64.b64encode(err).decode(),
            "hit": _limits_hit(child.returncode, err, hit, limits),
        }
    sink = sys.stdout.buffer
    sink.write(json.dumps(result).encode() + b"\n")
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for base, dirs, files in os.walk(_WORK):
            dirs.sort()
            for name in sorted(dirs + files):
                path = os.path.join(base, name)
                # A file the code made unreadable stays behind; the rest still comes out.
                with contextlib.suppress(OSError):
                    archive.add(path, arcname=os.path.relpath(path, _WORK), recursive=False)
    sink.flush()
    return 0


def _feed(child: subprocess.Popen[bytes], data: bytes) -> None:
    assert child.stdin is not None
    with contextlib.suppress(OSError):
        child.stdin.write(data)
        child.stdin.close()


if __name__ == "__main__":
    sys.exit(main())
