"""Importing twinflow.vocab stays cheap (its names: tests/gates/test_exported_members.py)."""

import sys

import pytest

# pytester runs a fresh interpreter: the import-cost test needs one with nothing imported yet.
pytest_plugins = ["pytester"]


def test_importing_the_package_builds_no_model(pytester: pytest.Pytester) -> None:
    """`import twinflow.vocab` in a fresh interpreter loads neither pydantic nor the value modules."""
    script = (
        "import sys, twinflow.vocab\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'twinflow.vocab.'))))\n"
        "twinflow.vocab.Message\n"
        "print('pydantic.main' in sys.modules)\n"
    )
    result = pytester.run(sys.executable, "-c", script)
    assert (0, ["['twinflow.vocab._errors']", "True"]) == (result.ret, result.outlines)
