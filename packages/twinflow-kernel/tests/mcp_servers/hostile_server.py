"""An MCP server that misbehaves on purpose (standard library only), for the client's tests.

    python hostile_server.py MODE

It initializes properly, lists one tool ``add`` (or misbehaves there), and answers
``tools/call`` as MODE says:

- ``silent``: never answers; ``garbage``: writes a line that is not JSON; ``exit``: exits (3);
- ``oversize``: a 5 MiB line; ``deep``: JSON nested 100,000 levels;
- ``sampling`` / ``elicitation``: asks the client to sample / elicit, then answers the call
  with the client's reply quoted;
- ``many``: lists 10,000 tools; ``fat-pages``: a 1 MiB tool on each of endless pages; ``homoglyph``: lists ``\\u0430dd`` (a Cyrillic a);
- ``bad-base64`` / ``bad-mime`` / ``huge-image`` / ``unknown-block``: a result whose image's
  data is not base64, whose image's type is not one, whose image is 2 MiB, or whose block is
  of a type MCP does not define; ``long-with-image``: 100 ``A``s, an image, 100 ``B``s;
- ``echo-env``: answers a call with the value of ``TWINFLOW_TEST_MCP_TOKEN`` (or ``unset``);
- ``paged``: lists ``add`` and ``sub`` on two pages; ``init-garbage``: garbage for initialize;
- ``current-no-result-type``: answers ``server/discover`` with 2026-07-28, then lists its
  tools without the ``resultType`` that revision requires;
- ``ttl-zero`` / ``ttl-years`` / ``ttl-negative``: 2026-07-28, a tool list whose ``ttlMs`` is
  0, ten years, or -1;
- ``http-ping``: Streamable HTTP on 127.0.0.1 (prints ``PORT <n>``), answering a call, and
  every reply the client sends, with a ping (server-sent events): it never answers the call.

Other modes are a server of 2025: ``server/discover`` is an unknown method (-32601).
It writes a marker to stderr, which must reach the server's log and never the trace.
"""

from __future__ import annotations

import json
import os
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


CURRENT = MODE.startswith(("current-", "ttl-"))
TTL = {"ttl-zero": 0, "ttl-years": 10 * 365 * 24 * 3600 * 1000, "ttl-negative": -1}


def tools_list(request: dict) -> None:
    if CURRENT:
        listing = {"tools": [ADD], "resultType": "complete"}
        if MODE in TTL:
            listing["ttlMs"] = TTL[MODE]
        if MODE == "current-no-result-type":
            del listing["resultType"]
        result(request["id"], listing)
    elif MODE == "many":
        tools = [dict(ADD, name=f"t{i}") for i in range(10_000)]
        result(request["id"], {"tools": tools})
    elif MODE == "homoglyph":
        result(request["id"], {"tools": [dict(ADD, name="\u0430dd")]})
    elif MODE == "fat-pages":
        page = int(request.get("params", {}).get("cursor") or 0)
        fat = dict(ADD, name=f"t{page}", description="x" * (1 << 20))
        result(request["id"], {"tools": [fat], "nextCursor": str(page + 1)})
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
        "long-with-image": [
            {"type": "text", "text": "A" * 100},
            {"type": "image", "mimeType": "image/png", "data": "cG5n"},
            {"type": "text", "text": "B" * 100},
        ],
    }
    if MODE in blocks:
        result(request["id"], {"content": blocks[MODE], "isError": False})
        return
    if MODE == "echo-env":
        text = os.environ.get("TWINFLOW_TEST_MCP_TOKEN", "unset")
        result(request["id"], {"content": [{"type": "text", "text": text}], "isError": False})
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
        elif method == "server/discover" and CURRENT:
            result(
                request["id"],
                {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}},
                    "resultType": "complete",
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "hostile"}},
                },
            )
        else:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {"code": -32601, "message": f"unknown method {method}"},
                }
            )


def http_ping() -> None:
    from http.server import BaseHTTPRequestHandler, HTTPServer

    pings = iter(range(1 << 62))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if request.get("method") == "initialize":
                body = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": request["id"],
                        "result": {
                            "protocolVersion": request["params"]["protocolVersion"],
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "hostile", "version": "0"},
                        },
                    }
                ).encode()
                self.answer("application/json", body)
            elif request.get("method") == "server/discover":  # as a 2025 server: no session
                self.send_response(400)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif "id" not in request:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:  # the call, or the client's reply to a ping: ping again
                ping = {"jsonrpc": "2.0", "id": f"ping-{next(pings)}", "method": "ping"}
                self.answer("text/event-stream", f"data: {json.dumps(ping)}\n\n".encode())

        def answer(self, kind: str, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    if MODE == "http-ping":
        http_ping()
    else:
        main()
