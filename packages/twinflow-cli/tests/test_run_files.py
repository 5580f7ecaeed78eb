"""A run directory never loses an earlier run, and runs into one directory never share a file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from twinflow._base._errors import FileWriteError
from twinflow.agent import SpecError, load_spec
from twinflow.cli._run import claim_run_files, code_beside, spec_beside


def test_each_run_claims_its_own_pair_and_nothing_is_renamed(tmp_path: Path) -> None:
    """The first run gets trace.jsonl/spec.yaml, later ones trace.N.jsonl/spec.N.yaml; none move."""
    for generation in ("first", "second", "third"):
        trace, _spec = claim_run_files(tmp_path, generation)
        trace.write_text(generation)
    expected = {
        "trace.jsonl": "first",
        "trace.1.jsonl": "second",
        "trace.2.jsonl": "third",
        "spec.yaml": "first",
        "spec.1.yaml": "second",
        "spec.2.yaml": "third",
    }
    assert expected == {p.name: p.read_text() for p in tmp_path.iterdir()}


def test_a_leftover_trace_or_spec_is_skipped_not_reused(tmp_path: Path) -> None:
    """A pair with either file present (an old run, a planted file) is not claimed."""
    (tmp_path / "trace.jsonl").write_text("old trace, no spec")
    (tmp_path / "spec.1.yaml").write_text("old spec, no trace")
    trace, spec = claim_run_files(tmp_path, "new")
    assert ("trace.2.jsonl", "spec.2.yaml") == (trace.name, spec.name)
    assert "old trace, no spec" == (tmp_path / "trace.jsonl").read_text()
    assert "old spec, no trace" == (tmp_path / "spec.1.yaml").read_text()


def test_a_planted_spec_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    """spec.yaml planted as a link to a victim: refused, the victim unchanged, nothing written."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "spec.yaml").symlink_to(victim)
    with pytest.raises(FileWriteError, match="symbolic link"):
        claim_run_files(out, "prompt: x")
    assert ("precious", ["spec.yaml"]) == (victim.read_text(), os.listdir(out))


def test_an_out_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    """--out pointing through a planted link writes nothing through it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(FileWriteError, match="symbolic link"):
        claim_run_files(tmp_path / "out", "prompt: x")
    assert [] == os.listdir(elsewhere)


@pytest.mark.parametrize(
    ("trace", "spec"),
    [("trace.jsonl", "spec.yaml"), ("trace.12.jsonl", "spec.12.yaml"), ("x.jsonl", "spec.yaml")],
)
def test_the_spec_beside_a_trace_is_its_pair(tmp_path: Path, trace: str, spec: str) -> None:
    """replay --trust-spec reads the spec written with that trace."""
    assert tmp_path / spec == spec_beside(tmp_path / trace)


def test_a_hostile_spec_is_a_spec_error_not_a_hang_or_traceback(tmp_path: Path) -> None:
    """A billion-laughs spec, 5000-deep nesting, a huge file and a device are each a one-line SpecError."""
    laughs = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        laughs += f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]\n"
    cases = {
        "laughs": (laughs + "tools: *i\n", "expands to more than 100000 YAML nodes"),
        "deep": ("prompt: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 32 levels"),
        "wide": ("prompt: x\n" + "#" * (2 * 1024 * 1024) + "\n", "over the limit of 1048576"),
    }
    for name, (text, reason) in cases.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        with pytest.raises(SpecError) as caught:
            load_spec(tmp_path / f"{name}.yaml")
        assert reason in str(caught.value), name
    with pytest.raises(SpecError) as endless:
        load_spec(Path("/dev/zero"))
    # Refused unread: a device is not a file (it once was read up to the size limit).
    assert "/dev/zero: is a character device, not a file: name a regular file" == str(endless.value)


def test_a_code_record_is_claimed_with_its_pair_and_a_leftover_one_is_skipped(
    tmp_path: Path,
) -> None:
    """code.N.json is written with spec.N.yaml; a leftover code.json (planted or old) moves the claim on."""
    (tmp_path / "code.json").write_text("planted")
    trace, spec = claim_run_files(tmp_path, "prompt: x", b"{}")
    assert ("trace.1.jsonl", "spec.1.yaml") == (trace.name, spec.name)
    assert ("planted", "{}") == (
        (tmp_path / "code.json").read_text(),
        (tmp_path / "code.1.json").read_text(),
    )
    assert tmp_path / "code.1.json" == code_beside(trace)
