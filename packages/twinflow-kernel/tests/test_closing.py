"""One base writes the context-manager methods: the transports close when their block exits."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from twinflow.kernel import HttpTransport, LoopbackServer, MockTransport
from twinflow.kernel._fault import FaultTransport
from twinflow.kernel._launcher import ServerProcess
from twinflow.kernel._ports import Closing
from twinflow.kernel._replay import RecordingTransport, ReplayTransport
from twinflow.trace import UserError
from twinflow.vocab import JsonValue


def echo(url: str, body: JsonValue) -> JsonValue:
    """Answer with what was sent."""
    del url
    return body


def test_every_adapter_with_a_with_block_is_a_closing() -> None:
    """Each adapter used in a `with` block takes its support from the one base."""
    adapters = [
        HttpTransport,
        MockTransport,
        RecordingTransport,
        ReplayTransport,
        FaultTransport,
        LoopbackServer,
        ServerProcess,
    ]
    expected = [True] * len(adapters)
    assert expected == [issubclass(adapter, Closing) for adapter in adapters]


@pytest.mark.parametrize("raising", [False, True])
def test_a_transport_is_closed_when_its_block_exits(raising: bool) -> None:
    """Leaving the block closes the transport, whether or not the block raised."""
    expect = pytest.raises(RuntimeError) if raising else contextlib.nullcontext()
    with expect, MockTransport(echo) as transport:
        assert {"a": 1} == transport.post_json("http://127.0.0.1:9/", {"a": 1}, timeout=1)
        if raising:
            raise RuntimeError("in the block")
    with pytest.raises(UserError, match="closed MockTransport"):
        transport.post_json("http://127.0.0.1:9/", {}, timeout=1)


def test_a_recorder_closes_its_inner_transport_on_exit(tmp_path: Path) -> None:
    """RecordingTransport's close (file and inner transport) is what its block's exit runs."""
    inner = MockTransport(echo)
    with RecordingTransport(inner, tmp_path / "rec.jsonl") as recorder:
        recorder.post_json("http://127.0.0.1:9/", {"n": 1}, timeout=1)
    with pytest.raises(UserError, match="closed MockTransport"):
        inner.post_json("http://127.0.0.1:9/", {}, timeout=1)
    expected = 1
    assert expected == len((tmp_path / "rec.jsonl").read_bytes().splitlines())


def test_a_closing_without_close_cannot_be_made() -> None:
    """A subclass must say what close() does: the base does not guess."""

    class Forgetful(Closing):
        """Leaves close() out."""

    with pytest.raises(TypeError, match="close"):
        Forgetful()  # type: ignore[abstract]  # the mistake under test
