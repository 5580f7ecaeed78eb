"""A bad configuration raises the package's own typed error, never a bare pydantic one.

One row per package: a value or an argument built wrong, the `TwinflowError` subclass it
raises, and (for a pydantic-backed value) that no ``ValidationError`` escapes (ADR 0074).
"""

from __future__ import annotations

from collections.abc import Callable

import pydantic
import pytest

from twinflow.agent import AgentConfigError, ModelSpec, Policy, SpecError
from twinflow.agent._structured import PydanticStructuredOutput
from twinflow.eval import EvalValueError
from twinflow.eval._results import Shard
from twinflow.kernel import LoopbackResponse, MockTransport, ThreadExecutor
from twinflow.models import OllamaChatModel
from twinflow.models._preflight import SchemaFinding
from twinflow.trace import CanonicalError, Limits, TraceError, TwinflowError, UserError
from twinflow.vocab import InvalidValueError, ModelSettings
from twinflow.vocab import value_bytes as canonical_bytes

CASES: dict[str, tuple[Callable[[], object], type[TwinflowError]]] = {
    "trace: a limit that cannot hold a line": (lambda: Limits(max_depth=1), UserError),
    "vocab: a negative temperature": (lambda: ModelSettings(temperature=-1), InvalidValueError),
    "kernel: no call in flight": (
        lambda: list(ThreadExecutor().map_bounded(str, [1], limit=0)),
        UserError,
    ),
    "kernel: a loopback status that is not a number": (
        lambda: LoopbackResponse(status="teapot"),
        InvalidValueError,
    ),
    "models: no attempt": (
        lambda: OllamaChatModel(MockTransport([]), model="m", max_attempts=0),
        UserError,
    ),
    "models: a finding without its fields": (lambda: SchemaFinding(), InvalidValueError),
    "agent: a negative run budget": (lambda: Policy(max_tool_calls=-1), AgentConfigError),
    "agent: no attempt": (lambda: PydanticStructuredOutput(max_attempts=0), UserError),
    "eval: shard 0 of 1": (lambda: Shard(index=0, count=1), EvalValueError),
    "cli: an unknown model kind": (lambda: ModelSpec(url="x", kind="grpc"), SpecError),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_configuration_raises_the_packages_typed_error(case: str) -> None:
    """Each package refuses a bad value with its own error, which names what was wrong."""
    build, expected = CASES[case]
    with pytest.raises(TwinflowError) as caught:
        build()
    assert (True, False) == (
        isinstance(caught.value, expected),
        isinstance(caught.value, pydantic.ValidationError),
    )


def test_a_canonical_failure_names_its_pointer_and_detail_as_fields() -> None:
    """Nobody parses CanonicalError's message: the pointer and the detail are fields."""
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes({"a": [1, float("inf")]})
    assert ("/a/1", "inf has no JSON form", True) == (
        caught.value.pointer,
        caught.value.detail,
        isinstance(caught.value, TraceError),
    )
