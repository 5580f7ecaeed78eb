"""An MCP server that misbehaves on purpose (standard library only), for the client's tests.

    python hostile_server.py MODE

It initializes properly, lists one tool ``add`` (or misbehaves there), and answers
``tools/call`` as MODE says:

- ``silent``: never answers; ``garbage``: writes a line that is not JSON; ``exit``: exits (3);
- ``oversize``: a 5 MiB line; ``deep``: JSON nested 100,000 levels;
- ``sampling`` / ``elicitation``: asks the client to sample / elicit, then answers the call
  with the client's reply quoted;
- ``many``: lists 10,000 tools; ``homoglyph``: lists ``\\u0430dd`` (a Cyrillic a);
- ``bad-base64`` / ``bad-mime`` / ``huge-image`` / ``unknown-block``: a result whose image's
  data is not base64, whose image's type is not one, whose image is 2 MiB, or whose block is
  of a type MCP does not define;
- ``paged``: lists ``add`` and ``sub`` on two pages; ``init-garbage``: garbage for initialize.

It writes a marker to stderr, which must reach the server's log and never the trace.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]
ADD = {
    "name": "add",
    "description": "Add two integers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(request_id: object, value: object) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def tools_list(request: dict) -> None:
    if MODE == "many":
        tools = [dict(ADD, name=f"t{i}") for i in range(10_000)]
        result(request["id"], {"tools": tools})
    elif MODE == "homoglyph":
        result(request["id"], {"tools": [dict(ADD, name="\u0430dd")]})
    elif MODE == "paged" and not request.get("params", {}).get("cursor"):
        result(request["id"], {"tools": [ADD], "nextCursor": "page2"})
    elif MODE == "paged":
        result(request["id"], {"tools": [dict(ADD, name="sub")]})
    else:
        result(request["id"], {"tools": [ADD]})


def call(request: dict) -> None:
    if MODE == "silent":
        return
    if MODE == "garbage":
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
        return
    if MODE == "exit":
        sys.stderr.write("hostile server: exiting mid-call\n")
        sys.exit(3)
    if MODE == "oversize":
        text = "x" * (5 * 1024 * 1024)
        result(request["id"], {"content": [{"type": "text", "text": text}]})
        return
    if MODE == "deep":
        sys.stdout.write("[" * 100_000 + "]" * 100_000 + "\n")
        sys.stdout.flush()
        return
    if MODE in ("sampling", "elicitation"):
        method = "sampling/createMessage" if MODE == "sampling" else "elicitation/create"
        send({"jsonrpc": "2.0", "id": "back-1", "method": method, "params": {}})
        reply = json.loads(sys.stdin.readline())
        text = json.dumps(reply)
        result(request["id"], {"content": [{"type": "text", "text": text}], "isError": False})
        return
    blocks = {
        "bad-base64": [{"type": "image", "mimeType": "image/png", "data": "not base64!"}],
        "bad-mime": [{"type": "image", "mimeType": "image/png,x", "data": "cG5n"}],
        "huge-image": [{"type": "image", "mimeType": "image/png", "data": "QUJD" * (1 << 19)}],
        "unknown-block": [{"type": "hologram", "data": "x"}],
    }
    if MODE in blocks:
        result(request["id"], {"content": blocks[MODE], "isError": False})
        return
    arguments = request["params"]["arguments"]
    total = arguments["a"] + arguments["b"]
    result(request["id"], {"content": [{"type": "text", "text": str(total)}], "isError": False})


def main() -> None:
    sys.stderr.write("hostile server stderr marker\n")
    sys.stderr.flush()
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        if "id" not in request:
            continue
        if method == "initialize":
            if MODE == "init-garbage":
                sys.stdout.write("Starting server...\n")
                sys.stdout.flush()
                continue
            result(
                request["id"],
                {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "0"},
                },
            )
        elif method == "tools/list":
            tools_list(request)
        elif method == "tools/call":
            call(request)


if __name__ == "__main__":
    main()
