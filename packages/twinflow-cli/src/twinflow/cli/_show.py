"""``twinflow show TRACE``: a run as a person reads it; ``twinflow diff``'s behavioural mode.

``show`` prints the run as steps: the prompt and configuration, each request's new messages,
the model's replies and tool calls with their arguments, the policy's decisions with their
reasons, the tool results, rejected and accepted outputs, how the run ended, and whether the
trace verifies (and where it breaks if it does not). ``--html FILE`` writes the same run as
one self-contained page that verifies the trace again in the reader's browser
(`twinflow.views.render_trace_page`).

The trace is hostile input: every string from it is printed through `twinflow._base._untrusted.for_terminal`
(control and format characters escaped, secrets scrubbed), so a trace cannot move the cursor,
recolour the terminal or reorder text.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twinflow._base._files import write_replace
from twinflow._base._json import loads as received_json
from twinflow._base._untrusted import for_terminal
from twinflow.agent import verify_agent_trace
from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output
from twinflow.cli._traces import add_checkpoint_keys, read_published, read_trace_bytes
from twinflow.trace import Checkpoint, UserError
from twinflow.views import TraceSummary, render_trace_page

__all__ = ["COMMANDS", "describe_events"]

# A page embeds the whole trace; beyond this a browser tab struggles and so does a reader.
MAX_SHOW_BYTES = 64 * 1024 * 1024
# Longest text shown for one string in the terminal (the page shows it all).
MAX_TEXT = 2000
# Longest divergence line: a difference shows each side in 200 characters at most (a window
# around the first differing character of long strings), so this cuts only a hostile pointer.
MAX_DETAIL = 1000


def _clean(value: object, limit: int = MAX_TEXT) -> str:
    """``value`` as one printable string: control/format characters escaped, long text cut."""
    text = (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    )
    cleaned = for_terminal(text)
    if len(cleaned) > limit:
        cleaned = f"{cleaned[:limit]}... ({len(cleaned) - limit} more characters)"
    return cleaned


def _obj(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a hostile trace may hold anything)."""
    return value if isinstance(value, dict) else {}


def _indent(text: str, prefix: str = "      ") -> str:
    return text.replace("\n", "\n" + prefix)


def _other_part(part: dict[str, Any], prefix: str) -> str:
    # Any kind without a line of its own (media, vocab's extension kinds, a plugin's): its name
    # and fields, read as plain JSON, so no kind needs its plugin installed to be shown.
    fields = {k: v for k, v in part.items() if k != "kind"}
    return f"{prefix} ({_clean(part.get('kind'))}): {_clean(fields)}"


def _result_parts(result: dict[str, Any], prefix: str) -> list[str]:
    """The lines of a tool result's parts other than its text (which is its ``content``)."""
    parts = result.get("parts")
    if not isinstance(parts, list):
        return []
    return [
        _other_part(part, prefix)
        for part in parts
        if not (isinstance(part, dict) and part.get("kind") == "text")
        for part in [part if isinstance(part, dict) else {"kind": "?", "value": part}]
    ]


def _message(message: Any) -> list[str]:
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return [f"    {_clean(message)}"]
    role = _clean(message.get("role"))
    lines = []
    for part in message["parts"]:
        part = part if isinstance(part, dict) else {"kind": "?", "text": part}
        kind = part.get("kind")
        if kind in ("text", "reasoning"):
            label = f"{role} (reasoning)" if kind == "reasoning" else role
            lines.append(f"    {label}: {_indent(_clean(part.get('text')))}")
        elif kind == "tool_call":
            lines.append(
                f"    {role} calls {_clean(part.get('name'))} {_clean(part.get('arguments'))}"
            )
        elif kind == "tool_result":
            error = " (error)" if part.get("is_error") else ""
            lines.append(
                f"    result of {_clean(part.get('name'))}{error}: "
                f"{_indent(_clean(part.get('content')))}"
            )
            lines += _result_parts(part, "      result part")
        elif kind == "structured":
            lines.append(
                f"    {role} answers ({_clean(part.get('schema_name'))}): "
                f"{_clean(part.get('value'))}"
            )
        else:
            lines.append(_other_part(part, f"    {role}"))
    return lines


def _started(body: dict[str, Any]) -> list[str]:
    config = _obj(body.get("config"))
    tools = ", ".join(_clean(t.get("name")) for t in config.get("tools", ()) if isinstance(t, dict))
    policy = _obj(config.get("policy"))
    allow = ", ".join(_clean(name) for name in policy.get("allow", ())) or "nothing"
    lines = [
        f"run {_clean(body.get('run_id'))}",
        f"  prompt: {_indent(_clean(body.get('prompt')))}",
    ]
    if config.get("system_prompt"):
        lines.append(f"  system: {_indent(_clean(config['system_prompt']))}")
    lines.append(f"  tools: {tools or 'none'}; the policy allows {allow}")
    listed = config.get("part_kinds")
    kinds = [k for k in listed if isinstance(k, dict)] if isinstance(listed, list) else []
    if kinds:
        named = ", ".join(f"{_clean(k.get('kind'))} ({_clean(k.get('type'))})" for k in kinds)
        lines.append(f"  part kinds: {named}")
    parent = body.get("parent")
    if isinstance(parent, dict):
        lines.append(
            f"  forked at step {_clean(parent.get('step'))} from the run whose trace had "
            f"{_clean(parent.get('size'))} events, root (hex) {_clean(parent.get('root'))}"
        )
    return lines


def _event_lines(body: dict[str, Any]) -> list[str]:
    """A trace event as ``twinflow show`` prints it (every string from the trace escaped)."""
    kind = body.get("kind")
    lines = _step_lines(kind, body)
    if lines is None:
        lines = _run_lines(kind, body)
    return [f"  {_clean(kind)}: {_clean(body)}"] if lines is None else lines


def _step_lines(kind: object, body: dict[str, Any]) -> list[str] | None:
    """A step's event: a model request or reply, a policy decision, a tool call, an output."""
    if kind == "model_requested":
        purpose = "re-ask" if body.get("purpose") == "reask" else "request"
        lines = [f"  -> model {purpose}"]
        for message in body.get("new_messages") or ():
            lines += _message(message)
        return lines
    if kind == "model_responded":
        response = _obj(body.get("response"))
        by = body.get("answered_by")
        answered = "" if by is None else f" from {_clean(by)}"
        cost = body.get("cost")
        if isinstance(cost, dict):
            answered += (
                f" (${_clean(cost.get('usd'))} at {_clean(cost.get('model'))} "
                f"{_clean(cost.get('input_per_mtok'))}/{_clean(cost.get('output_per_mtok'))} "
                f"US dollars per million tokens in/out, {_clean(cost.get('table'))})"
            )
        return [f"  <- model reply{answered}", *_message(response.get("message"))]
    if kind == "model_fell_back":
        return [
            f"  model {_clean(body.get('model'))} {_clean(body.get('failure'))}, asking "
            f"{_clean(body.get('next'))}: {_clean(body.get('error'))}"
        ]
    if kind == "policy_decided":
        return [
            f"  policy {_clean(body.get('decision'))} {_clean(body.get('tool'))} "
            f"(by {_clean(body.get('by'))}): {_clean(body.get('reason'))}"
        ]
    if kind == "tool_called":
        return [f"  tool {_clean(body.get('tool'))} {_clean(body.get('arguments'))}"]
    if kind == "tool_returned":
        return _tool_returned_lines(body)
    if kind == "output_rejected":
        return [
            f"  output rejected (attempt {_clean(body.get('attempt'))}): "
            f"{_indent(_clean(body.get('error')), '    ')}"
        ]
    if kind == "output_accepted":
        return [f"answer: {_clean(body.get('value'))}"]
    if kind == "model_waited":
        status = body.get("status")
        why = "the connection reset" if status is None else f"HTTP {_clean(status)}"
        after = body.get("retry_after")
        header = "" if after is None else f", Retry-After {_clean(after)!r}"
        return [f"  waited {_clean(body.get('wait_seconds'))} s ({why}{header}), then sent again"]
    if kind == "budget_exceeded":
        return [
            f"  budget {_clean(body.get('budget'))} exceeded: {_clean(body.get('used'))} used, "
            f"limit {_clean(body.get('limit'))}"
        ]
    return None


def _tool_returned_lines(body: dict[str, Any]) -> list[str]:
    """A tool's result (or error), its parts, and the sub-agent run it started, if any."""
    result = _obj(body.get("result"))
    label = "tool error" if result.get("is_error") else "tool result"
    child = _obj(body.get("child"))
    run = (
        [
            f"    child run {_clean(child.get('run_id'))}: {_clean(child.get('trace'))} "
            f"({_clean(child.get('size'))} events, root {_clean(child.get('root'))})"
        ]
        if child
        else []
    )
    return [
        f"  {label}: {_indent(_clean(result.get('content')), '    ')}",
        *_result_parts(result, "    part"),
        *run,
    ]


def _run_lines(kind: object, body: dict[str, Any]) -> list[str] | None:
    """A run's event: how it ended or resumed, an MCP server's tools, an approval."""
    if kind == "run_finished":
        return [f"finished after {_clean(body.get('steps'))} step(s)"]
    if kind == "user_turn":
        return [
            f"turn {_clean(body.get('turn'))}, the user: {_indent(_clean(body.get('text')), '  ')}"
        ]
    if kind == "run_resumed":
        repeated = body.get("repeated_call")
        again = "" if repeated is None else f"; call {_clean(repeated)} run again"
        return [
            f"resumed after {_clean(body.get('prefix_size'))} events "
            f"({_clean(body.get('why'))}){again}"
        ]
    if kind == "tools_listed":
        info = _obj(body.get("server_info"))
        listed = body.get("tools")
        tools: list[Any] = listed if isinstance(listed, list) else []
        names = ", ".join(str(_obj(t).get("name")) for t in tools) or "none"
        return [
            f"  MCP server {_clean(body.get('server'))} ({_clean(info.get('name'))} "
            f"{_clean(info.get('version'))}, protocol {_clean(body.get('protocol_version'))}) "
            f"lists {len(tools)} tool(s): {_clean(names)}"
        ]
    if kind == "approval_requested":
        return [
            f"  waiting for approval: {_clean(body.get('tool'))} {_clean(body.get('arguments'))} "
            f"(call {_clean(body.get('call_id'))})"
        ]
    if kind == "input_requested":
        return [
            f"  {_clean(body.get('tool'))} asks (call {_clean(body.get('call_id'))}, round "
            f"{_clean(body.get('round'))}, request {_clean(body.get('key'))}): "
            f"{_clean(body.get('message'))} {_clean(body.get('requested_schema'))}"
        ]
    if kind == "input_answered":
        signed = ", signed" if body.get("signed_note") else ""
        return [
            f"  {_clean(body.get('action'))}ed by {_clean(body.get('by'))}{signed}: "
            f"{_clean(body.get('content'))} (call {_clean(body.get('call_id'))}, request "
            f"{_clean(body.get('key'))})"
        ]
    if kind == "approval_decided":
        signed = ", signed" if body.get("signed_note") else ""
        return [
            f"  {_clean(body.get('decision'))}d by {_clean(body.get('by'))}{signed}: "
            f"{_clean(body.get('reason'))} (call {_clean(body.get('call_id'))})"
        ]
    if kind == "run_failed":
        return [
            f"failed after {_clean(body.get('steps'))} step(s): "
            f"{_clean(body.get('error_type'))}: {_clean(body.get('message'))}"
        ]
    return None


def _events(data: bytes) -> list[dict[str, Any] | None]:
    """Each line's event as a JSON object, or None where a line is not readable as one."""
    events: list[dict[str, Any] | None] = []
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the newline ending the last line; an empty line elsewhere is a line
    for line in lines:
        try:
            # A line whose object repeats a key is unreadable as an event, as verify finds it.
            parsed = received_json(line)
        except (ValueError, RecursionError):  # a line nested past the parser's depth, too
            events.append(None)
            continue
        event = parsed.get("event") if isinstance(parsed, dict) else None
        events.append(event if isinstance(event, dict) else None)
    return events


def describe_events(
    events: list[dict[str, Any] | None],
    broken_at: int | None,
    redacted: tuple[int, ...] = (),
    children: Callable[[dict[str, Any]], list[str]] | None = None,
) -> list[str]:
    """The run as lines a person reads, step by step; events from ``broken_at`` on are marked,
    and each of the ``redacted`` seqs (verified: their digest alone is in the file) says so.
    ``children`` gives the lines of the run a ``tool_returned`` (a sub-agent's) or a
    ``user_turn`` (a simulated user's) links, shown below it."""
    lines: list[str] = []
    step = None
    hidden = set(redacted)
    for seq, event in enumerate(events):
        mark = "  [not verified]" if broken_at is not None and seq >= broken_at else ""
        if seq in hidden:
            lines.append(f"  seq {seq}: REDACTED (only its digest is published; it verifies)")
            continue
        body = event.get("body") if event is not None else None
        if not isinstance(body, dict):
            lines.append(f"  (line {seq + 1} is not readable as an event){mark}")
            continue
        if body.get("kind") == "run_started":
            lines += [f"{line}{mark if i == 0 else ''}" for i, line in enumerate(_started(body))]
            continue
        if isinstance(body.get("step"), int) and body["step"] != step:
            step = body["step"]
            lines.append(f"step {step}")
        described = _event_lines(body)
        lines += [described[0] + mark, *described[1:]]
        if children is not None and body.get("kind") in _LINKING and not mark:
            lines += children(body)
    return lines


def run_cost(events: list[dict[str, Any] | None]) -> dict[str, Any]:
    """What the run's replies cost at their recorded prices: ``usd``, the ``replies`` and how
    many were ``unpriced`` (their model's price unknown), and ``text`` for a reader."""
    usd, replies, unpriced = 0.0, 0, 0
    for event in events:
        body = event.get("body") if event is not None else None
        if not isinstance(body, dict) or body.get("kind") != "model_responded":
            continue
        replies += 1
        cost = body.get("cost")
        value = cost.get("usd") if isinstance(cost, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            usd = round(usd + value, 10)
        else:
            unpriced += 1
    text = TraceSummary.cost_text(usd, unpriced, replies)
    return {"usd": usd, "replies": replies, "unpriced": unpriced, "text": text}


def _configure_show(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, help="the trace file (JSONL)")
    p.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write FILE: one self-contained page that shows the run and verifies the "
        "trace in the browser (no network)",
    )
    p.add_argument(
        "--checkpoint",
        type=Path,
        help="a published checkpoint (the C2SP note `twinflow checkpoint --out` writes; a signed "
        "one is checked with --key) the trace must match before the page is written; the page "
        "checks it again",
    )
    add_checkpoint_keys(p)


def _check_before_the_page(args: argparse.Namespace, data: bytes, checkpoint: Checkpoint) -> None:
    """A checkpoint the trace does not match is the verdict: exit 1, and no page is written.

    Raises:
        CheckFailed: the trace's events do not match the checkpoint (or it covers fewer events
            than the trace holds, or more).
    """
    matched = verify_agent_trace(data, checkpoint=checkpoint, require_complete=False)
    if matched.problem is not None:
        raise CheckFailed(
            f"{args.trace}: does not match {args.checkpoint}: {_clean(str(matched.problem))}; "
            f"no page was written",
            {"ok": False, "trace": str(args.trace), "problem": matched.problem.to_json()},
        )


_LINKING = ("tool_returned", "user_turn")
"""The events that may link another run: a sub-agent's call, a simulated user's turn."""


class _Linked:
    """The lines of the runs a shown trace links, each below the event holding its link.

    A sub-agent's run is shown whole below its call. A simulated user's trace is one
    conversation linked from every turn it wrote, each link vouching for a prefix: below a
    turn comes the part that wrote it (from the previous turn's link to this one's), once the
    whole tree verifies (``verify --tree`` checks each prefix's root)."""

    def __init__(self, trace: Path) -> None:
        self.trace = trace
        self.shown: dict[str, int] = {}
        """Events of each simulated user's trace shown below earlier turns."""
        self.tree_ok: bool | None = None

    def __call__(self, body: dict[str, Any]) -> list[str]:
        if body.get("kind") == "tool_returned":
            return _child(self.trace, 1, body)
        link = _obj(body.get("simulator"))
        name, size = link.get("trace"), link.get("size")
        if not isinstance(name, str) or not isinstance(size, int) or isinstance(size, bool):
            return []
        if self.tree_ok is None:
            from twinflow.trace._tree import verify_tree

            self.tree_ok = verify_tree(self.trace).ok
        path = self.trace.parent / name
        if not self.tree_ok or "/" in name or not path.is_file():
            return [
                f"    simulated user {_clean(name)}: not shown (check it: twinflow verify --tree)"
            ]
        start = self.shown.get(name, 0)
        self.shown[name] = size
        described = describe_events(_events(path.read_bytes())[start:size], None)
        return [
            f"    simulated user: {_clean(name)}, events {start}-{size - 1}",
            *(f"    {line}" for line in described),
        ]


def _child(parent: Path, depth: int, body: dict[str, Any]) -> list[str]:
    """The sub-agent run a ``tool_returned`` links, described and indented by ``depth``: only a
    child file that verifies and holds what its link records is shown (``verify --tree`` says
    why one does not)."""
    from twinflow.trace._tree import MAX_TREE_DEPTH, verify_tree

    child = _obj(body.get("child"))
    name = child.get("trace")
    if not isinstance(name, str) or depth > MAX_TREE_DEPTH:
        return []
    pad = "    " * depth
    path = parent.parent / name
    tree = verify_tree(path) if "/" not in name and path.is_file() else None
    top = tree.nodes[0].checkpoint if tree is not None and tree.nodes else None
    if top is None or (top.size, top.root) != (child.get("size"), child.get("root")):
        return [f"{pad}sub-agent {_clean(name)}: not shown (check it: twinflow verify --tree)"]
    tool = _clean(_obj(body.get("result")).get("name"))
    described = describe_events(
        _events(path.read_bytes()), None, children=functools.partial(_child, path, depth + 1)
    )
    return [f"{pad}sub-agent {tool}: {_clean(name)}", *(f"{pad}{line}" for line in described)]


def _show(args: argparse.Namespace, out: Output) -> int:
    size = args.trace.stat().st_size
    if size > MAX_SHOW_BYTES:
        raise UserError(
            f"{args.trace}: {size} bytes is more than `twinflow show` reads "
            f"({MAX_SHOW_BYTES} bytes); `twinflow verify` checks a trace of any size"
        )
    data = read_trace_bytes(args.trace)
    report = verify_agent_trace(data, require_complete=False)
    problem = report.problem
    events = _events(data)
    if (args.checkpoint is not None or args.key or args.origin) and args.html is None:
        raise UserError("--checkpoint, --key and --origin go into the page: give --html FILE too")
    if (args.key or args.origin) and args.checkpoint is None:
        raise UserError("--key and --origin check a checkpoint: give --checkpoint CP too")
    if args.html is not None:
        checkpoint = None
        if args.checkpoint is not None:
            published = read_published(args.checkpoint, args.key, args.origin)
            if problem is None:  # a broken trace is the verdict already (its page says where)
                _check_before_the_page(args, data, published.checkpoint)
            # A note carries no head digest: the page compares size and root.
            checkpoint = {"size": published.checkpoint.size, "root": published.checkpoint.root}
        from twinflow.trace._tree import linked_files

        # The runs it links go into the page too, each verified there against its link.
        children = linked_files(args.trace, max_bytes=MAX_SHOW_BYTES) if problem is None else {}
        page = render_trace_page(data, args.trace.name, checkpoint, children)
        # A page is a report: written whole, never through a planted link (docs/adr/0050).
        write_replace(args.html, page.encode("utf-8"), durable=False)
    payload = {
        "ok": problem is None,
        "trace": str(args.trace),
        "events": events,
        "verified": problem is None,
        "problem": None if problem is None else problem.to_json(),
        "root": report.checkpoint.root,
        "root_encoding": "hex",
        "redacted": list(report.redacted),
        "html": None if args.html is None else str(args.html),
        "cost": (cost := run_cost(events)),
    }
    if args.html is None:  # with --html the page is the view: the terminal gets the verdict
        seq = None if problem is None else problem.seq
        nested = _Linked(args.trace) if problem is None else None
        for line in describe_events(events, seq, report.redacted, nested):
            out.line(line)
        out.line(f"cost: {cost['text']}")
        out.line("")
    if problem is None:
        out.line(f"verified: {report.events} events; Merkle root (hex) {report.checkpoint.root}")
        if report.redacted:
            out.line(f"{report.redaction()}: the rest of the file cannot show what they said")
    else:
        out.line(
            f"NOT VERIFIED: {args.trace}: {_clean(str(problem))}; the {report.events} events "
            "before it verify"
        )
    if args.html is not None:
        out.line(f"page: {args.html} (open it in a browser: it verifies the trace again)")
    if problem is not None:
        raise CheckFailed(f"{args.trace}: {problem}", payload)
    out.document(payload)
    return EXIT_OK


COMMANDS: dict[str, Command] = {"show": (_configure_show, _show)}
