"""The watchdog between `SubprocessLauncher` and a server process (docs/adr/0010, 0165).

Run as a script, by path, with the standard library only (it must start fast and must not
import twinflow)::

    python -I -S _guard.py <lifeline fd> <grace seconds> -- <command> [args...]

It is the leader of a new session and process group, started by the launcher. On Linux it
first makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``), so every process the command
starts stays in its tree, even one that leaves the group and the session (``setsid`` and a
double fork): an orphan is re-parented to the guard, not to init. It starts the command and then
watches two things: the lifeline pipe, whose write end only the launcher holds, and the command.
When the lifeline reaches end-of-file (the launcher stopped it, or the launcher's process died,
even by SIGKILL) or the command exits, it sends SIGTERM to the whole group and to every process
of its tree (found by walking ``/proc``: each process's parent), waits `grace` seconds, then
SIGKILLs the tree until none is left and the group (itself included). It reaps every orphan it
inherits. On Linux the command also gets PR_SET_PDEATHSIG=SIGKILL, so it dies even if the guard
is killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_KILL_ROUNDS = 1000
"""Most passes of SIGKILL over the tree: each pass kills every process found, so only a
process forked by one still dying is left for the next; a bound, so a guard always ends."""


def _prctl(option: int, value: int) -> bool:
    """``prctl(option, value)`` on Linux; whether it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(option, value, 0, 0, 0) == 0)


def _die_with_parent() -> None:
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _processes() -> dict[int, tuple[int, int, bool]]:
    """Every process: pid -> (parent pid, process group, whether it is a zombie)."""
    found: dict[int, tuple[int, int, bool]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        found[int(entry)] = (int(fields[1]), int(fields[2]), fields[0] == b"Z")
    return found


def _tree() -> tuple[list[int], list[int]]:
    """This guard's descendants: the running ones, and the zombies that are its own children."""
    me = os.getpid()
    try:
        table = _processes()
    except OSError:
        return [], []
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    running: list[int] = []
    zombies: list[int] = []
    todo = list(children.get(me, []))
    while todo:
        pid = todo.pop()
        if table[pid][2]:
            if table[pid][0] == me:
                zombies.append(pid)
        else:
            running.append(pid)
        todo.extend(children.get(pid, []))
    return running, zombies


def _group_members(pgid: int) -> list[int]:
    """The running processes of group ``pgid`` but this guard."""
    try:
        table = _processes()
    except OSError:
        return []
    me = os.getpid()
    return [
        p for p, (_, group, zombie) in table.items() if group == pgid and p != me and not zombie
    ]


def _reap(zombies: list[int], child: subprocess.Popen[bytes]) -> None:
    """Reap the orphans that died as our children (the command itself is `child`'s to reap)."""
    for pid in zombies:
        if pid == child.pid:
            child.poll()
            continue
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _stop_group(child: subprocess.Popen[bytes], grace: float) -> None:
    pgid = os.getpgrp()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(pgid, signal.SIGTERM)
    running, zombies = _tree()
    _signal_all(running, signal.SIGTERM)
    end = time.monotonic() + grace
    while True:
        _reap(zombies, child)
        running, zombies = _tree()
        if not running and not _group_members(pgid):
            _reap(zombies, child)
            return
        if time.monotonic() >= end:
            break
        time.sleep(0.02)
    # A process forked by one being killed is found on the next pass (it is in our tree: we
    # are its subreaper), so the passes end when the tree is empty.
    for _ in range(_KILL_ROUNDS):
        running, zombies = _tree()
        _reap(zombies, child)
        if not running:
            break
        _signal_all(running, signal.SIGKILL)
    child.poll()
    os.killpg(pgid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    """Run the guard; returns the command's exit status."""
    lifeline, grace, separator, *command = argv
    if separator != "--" or not command:
        print("usage: _guard.py <fd> <grace> -- <command> [args...]", file=sys.stderr)
        return 2
    fd = int(lifeline)
    # Before the command starts, so that no process of its tree can be re-parented past us.
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
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
        _reap_orphans(child)
    code = child.returncode
    _stop_group(child, float(grace))
    child.poll()
    return code if code is not None else -signal.SIGTERM


def _reap_orphans(child: subprocess.Popen[bytes]) -> None:
    """Reap the orphans that have died since the last look, leaving the command to `child`."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == child.pid:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
