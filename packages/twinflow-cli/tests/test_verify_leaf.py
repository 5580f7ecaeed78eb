"""`twinflow verify` is the stdlib leaf's verifier; typed events are built only when asked.

Also the start-up of the trace commands (their `--help` loads neither pydantic nor the agent),
`--version` without `importlib.metadata`, and `diff` reading no further than it needs.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

import pytest
from cli_testkit import run_trace
from test_hostile_traces import corpus

from twinflow.cli._main import main
from twinflow.kernel._process import run_process
from twinflow.trace import __main__ as leaf_main
from twinflow.trace._testing import events_of, rechain


def rewritten(data: bytes, **fields: object) -> bytes:
    """``data`` with ``fields`` set in its first event's body, chain and digests recomputed."""
    events = events_of(data)
    body = events[0]["body"]
    assert isinstance(body, dict)
    events[0] = {**events[0], "body": {**body, **fields}}
    return rechain(events)


def retyped(data: bytes) -> bytes:
    """``data`` rewritten with a body field of the wrong type: canonical JSON, a known kind,
    an event no twinflow writer produces."""
    return rewritten(data, run_id=7)


def test_verify_and_the_leaf_give_the_same_verdict_on_every_hostile_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On each hostile file (and a retyped one) both verifiers exit alike with the same problem."""
    files = {**corpus(), "good": run_trace(), "retyped": retyped(run_trace())}
    for name, data in sorted(files.items()):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        ours = main(["verify", str(path), "--json"])
        payload = capsys.readouterr().out
        leaf = leaf_main.main(["verify", str(path)])
        leaf_err = capsys.readouterr().err
        if ours == 2:
            continue  # not a trace at all: the command refuses it before verifying anything
        assert (name, ours) == (name, leaf)
        problem = json.loads(payload)["problem"]
        if problem is not None:
            assert f"{problem['kind']} at seq {problem['seq']}" in leaf_err, name


def test_typed_refuses_an_event_no_writer_produces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--typed builds the agent's typed events and names the retyped one; plain verify does not."""
    path = tmp_path / "retyped.jsonl"
    path.write_bytes(retyped(run_trace()))
    plain = main(["verify", str(path)])
    capsys.readouterr()
    typed = main(["verify", str(path), "--typed", "--json"])
    problem = json.loads(capsys.readouterr().out)["problem"]
    assert (0, 1, "not_event", 0) == (plain, typed, problem["kind"], problem["seq"])


def test_verify_help_and_run_load_neither_pydantic_nor_the_agent(tmp_path: Path) -> None:
    """`twinflow verify --help` and `twinflow verify TRACE` import no pydantic, no agent."""
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(run_trace())
    script = (
        "import sys\n"
        "from twinflow.cli._main import main\n"
        "try:\n"
        "    main(['verify', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "code = main(['verify', sys.argv[1]])\n"
        "heavy = ('pydantic', 'twinflow.agent')\n"
        "print('LOADED', code, sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    result = run_process([sys.executable, "-c", script, str(trace)], timeout=120)
    assert "LOADED 0 []" == result.stdout.strip().splitlines()[-1]


def test_version_is_what_importlib_metadata_says() -> None:
    """`twinflow --version` prints the installed distribution's version."""
    result = run_process([sys.executable, "-m", "twinflow.cli", "--version"], timeout=120)
    expected = f"twinflow {importlib.metadata.version('twinflow-cli')} (Python"
    assert expected == result.stdout.splitlines()[0][: len(expected)]


def test_exact_diff_stops_reading_at_the_first_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--exact names seq 0 even when a later line of a trace is damaged: it never reads it."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(run_trace())
    damaged = rewritten(run_trace(), prompt="another prompt").splitlines(keepends=True)
    damaged[-1] = damaged[-1].replace(b'"kind"', b'"kinx"', 1)
    b.write_bytes(b"".join(damaged))
    assert 1 == main(["diff", "--exact", str(a), str(b), "--json"])
    assert 0 == json.loads(capsys.readouterr().out)["seq"]


def test_exact_diff_of_a_prefix_names_both_lengths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace that is a prefix of the other: the shorter one's length and the longer's total."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    data = run_trace()
    a.write_bytes(data)
    b.write_bytes(b"".join(data.splitlines(keepends=True)[:2]))
    total = len(data.splitlines())
    assert (1, 1) == (
        main(["diff", "--exact", str(a), str(b)]),
        main(["diff", "--exact", str(b), str(a)]),
    )
    err = capsys.readouterr().err.splitlines()
    expected = f"{b} stops at 2 events; {a} goes on to {total}"
    assert [expected, expected] == [line.split(": ", 1)[1] for line in err]
