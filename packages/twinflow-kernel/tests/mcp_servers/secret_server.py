"""An MCP server (standard library only) that leaks its key and leaves its process group.

    python secret_server.py [--daemon PIDFILE] [--flood BYTES]

It serves two tools, ``echo`` and ``fail``, over stdio. Its key is ``TWINFLOW_TEST_MCP_TOKEN`` (forwarded
with ``pass_env``), and it tries every way to leak it:

- on stderr (its log): the key as is, upper-cased, lower-cased, and split across two writes;
- in ``echo``'s result: the key split across two text blocks, and mixed-case in a third;
- in the JSON-RPC error it answers ``fail`` with: the key upper-cased.

``--daemon PIDFILE``: before it answers anything, it starts a grandchild that leaves its
process group and session (``setsid`` and a double fork), ignores SIGTERM, writes its pid to
PIDFILE and sleeps until killed. ``--flood BYTES``: writes that many bytes to stderr first.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

KEY = os.environ.get("TWINFLOW_TEST_MCP_TOKEN", "unset")
ECHO = {
    "name": "echo",
    "description": "Echo a text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
FAIL = {**ECHO, "name": "fail", "description": "Fail."}


def daemon(pid_file: str) -> None:
    """Start a grandchild outside our group and session; return once its pid is written."""
    ready_read, ready_write = os.pipe()
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        with open(pid_file + ".tmp", "w") as out:
            out.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)
        os.write(ready_write, b"x")
        while True:
            time.sleep(3600)
    os.close(ready_write)
    os.waitpid(child, 0)
    os.read(ready_read, 1)


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> None:
    if "--daemon" in argv:
        daemon(argv[argv.index("--daemon") + 1])
    if "--flood" in argv:
        sys.stderr.write("f" * int(argv[argv.index("--flood") + 1]))
    for form in (KEY, KEY.upper(), KEY.lower()):
        sys.stderr.write(f"secret server: my key is {form}\n")
    sys.stderr.write(f"secret server: split {KEY[:7]}")
    sys.stderr.flush()
    sys.stderr.write(f"{KEY[7:]} done\n")
    sys.stderr.flush()
    for line in sys.stdin:
        request = json.loads(line)
        method, request_id = request.get("method"), request.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": request["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "secret", "version": "1.0.0"},
                    },
                }
            )
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [ECHO, FAIL]}})
        elif method == "tools/call" and request["params"]["name"] == "echo":
            blocks = [
                {"type": "text", "text": f"half {KEY[:9]}"},
                {"type": "text", "text": f"{KEY[9:]} whole"},
                {"type": "text", "text": f"mixed {KEY.swapcase()}"},
            ]
            send({"jsonrpc": "2.0", "id": request_id, "result": {"content": blocks}})
        elif method == "tools/call":
            error = {"code": -32000, "message": f"bad token {KEY.upper()}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})


if __name__ == "__main__":
    main(sys.argv[1:])
