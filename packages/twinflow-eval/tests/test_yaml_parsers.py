"""`read_yaml` reads with libyaml's parser and falls back to PyYAML's own: the two must agree.

Every document both accept must give the same value and the same node lines (messages point
at them); every problem must be worded by the plain parser, whichever met it first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from twinflow._base._errors import UserError
from twinflow._base._yaml import YamlLimits, _bounded_loader, _parse, read_yaml

LIMITS = YamlLimits("dataset", 1_000_000, 64, 1_000_000)
REPO = Path(__file__).resolve().parents[3]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False),
    st.text(max_size=30),
)
keys = st.one_of(st.text(min_size=1, max_size=12), st.integers(-5, 5), st.booleans())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=30,
)


def _marks(node: yaml.Node | None) -> list[tuple[str, int, int]]:
    """Each node's tag and start line and column, depth first."""
    if node is None:
        return []
    out = [(node.tag, node.start_mark.line, node.start_mark.column)]
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            out += _marks(child)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            out += _marks(key) + _marks(value)
    return out


def both(text: str) -> tuple[Any, Any]:
    """(libyaml's, PyYAML's) values and node marks of one document."""
    fast_root, fast = _parse(text, LIMITS, _bounded_loader(fast=True))
    plain_root, plain = _parse(text, LIMITS, _bounded_loader())
    return (fast, _marks(fast_root)), (plain, _marks(plain_root))


def test_the_fast_reader_is_libyamls_parser() -> None:
    """The fast reader is libyaml's wherever PyYAML was built with it (its wheels are)."""
    assert yaml.__with_libyaml__
    assert issubclass(_bounded_loader(fast=True), yaml.CSafeLoader)
    assert not issubclass(_bounded_loader(), yaml.CSafeLoader)


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([None, True, False]))
def test_both_parsers_read_any_dumped_value_alike(value: object, flow: bool | None) -> None:
    """A value dumped in block, flow or mixed style reads the same, node for node."""
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    fast, plain = both(text)
    assert plain == fast


@pytest.mark.parametrize(
    "path",
    sorted(
        p.relative_to(REPO) for d in ("examples", "benchmarks") for p in (REPO / d).rglob("*.yaml")
    ),
    ids=str,
)
def test_both_parsers_read_the_shipped_specs_and_datasets_alike(path: Path) -> None:
    """Every spec and dataset the repository ships reads the same, node for node."""
    fast, plain = both((REPO / path).read_text())
    assert plain == fast


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: b: c\n", "d.yaml:1:5: not valid YAML: mapping values are not allowed here"),
        ("a: 1\na: 2\n", "d.yaml:2: the key 'a' appears twice in one mapping"),
        ("[" * 70 + "]" * 70, "d.yaml:1: nested deeper than 64 levels"),
        ("x: " + "9" * 5000 + "\n", "d.yaml:1: an integer of more than 4300 digits"),
        ("a: [1, 2\n", "d.yaml:2:1: not valid YAML: expected ',' or ']', but got '<stream end>'"),
    ],
)
def test_a_problem_is_worded_by_the_plain_parser(text: str, expected: str) -> None:
    """Whichever parser meets a problem first, the message is PyYAML's own wording."""
    with pytest.raises(UserError) as caught:
        read_yaml(text, "d.yaml", LIMITS, UserError)
    assert expected == str(caught.value)[: len(expected)]
