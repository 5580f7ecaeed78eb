"""The watchdog between `SubprocessLauncher` and a server process (see docs/adr/0010).

Run as a script, by path, with the standard library only (it must start fast and must not
import twinflow)::

    python -I -S _guard.py <lifeline fd> <grace seconds> -- <command> [args...]

It is the leader of a new session and process group, started by the launcher. It starts the
command inside that group and then watches two things: the lifeline pipe, whose write end only
the launcher holds, and the command. When the lifeline reaches end-of-file (the launcher
stopped it, or the launcher's process died, even by SIGKILL) or the command exits, it sends
SIGTERM to the whole group, waits `grace` seconds, then SIGKILLs the group (itself included).
On Linux the command also gets PR_SET_PDEATHSIG=SIGKILL, so it dies even if the guard is killed.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def _group_alive(pgid: int, child: subprocess.Popen[bytes]) -> bool:
    child.poll()
    try:
        # Our own pid is in the group; the check is whether anyone else still is.
        members = [
            int(entry)
            for entry in os.listdir("/proc")
            if entry.isdigit() and int(entry) != os.getpid() and _pgid_of(int(entry)) == pgid
        ]
    except OSError:
        return child.returncode is None
    return bool(members)


def _pgid_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # Zombies no longer run; they only wait to be reaped.
    return None if fields[0] == b"Z" else int(fields[2])


def _stop_group(child: subprocess.Popen[bytes], grace: float) -> None:
    pgid = os.getpgrp()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(pgid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if not _group_alive(pgid, child):
            return
        time.sleep(0.02)
    child.poll()
    os.killpg(pgid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    """Run the guard; returns the command's exit status."""
    lifeline, grace, separator, *command = argv
    if separator != "--" or not command:
        print("usage: _guard.py <fd> <grace> -- <command> [args...]", file=sys.stderr)
        return 2
    fd = int(lifeline)
    try:
        child = subprocess.Popen(command, preexec_fn=_die_with_parent)
    except OSError as error:
        print(f"twinflow guard: cannot start {command[0]!r}: {error}", file=sys.stderr, flush=True)
        return 127
    while True:
        readable, _, _ = select.select([fd], [], [], 0.05)
        if readable and os.read(fd, 1) == b"":
            break
        if child.poll() is not None:
            break
    code = child.returncode
    _stop_group(child, float(grace))
    child.poll()
    return code if code is not None else -signal.SIGTERM


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
