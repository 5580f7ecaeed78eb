"""Pre-registration: the decision-rule language, the plan file, and the run it admits."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from eval_testkit import START, dataset, factory

from twinflow.eval import run_eval
from twinflow.eval._errors import PlanError
from twinflow.eval._plan import check_plan, make_plan, parse_rule, read_plan
from twinflow.kernel import SteppingClock
from twinflow.trace import canonical_bytes
from twinflow.trace._keys import SignerKey, generate_key

SPEC = "a" * 64
CLOCK = SteppingClock(START)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("rate >= 0.8", True),
        ("rate > 0.8", False),
        ("rate >= 0.8 and flagged == 0", True),
        ("rate < 0.5 or passed >= 4", True),
        ("not (rate >= 0.8)", False),
        ("(rate_low > 0.1 and rate_high <= 1) and not errored != 0", True),
        ("0.5 < rate", True),
        ("total == 5", True),
    ],
)
def test_a_rule_is_parsed_and_decided_on_metric_values(rule: str, expected: bool) -> None:
    """Comparisons joined by and / or / not, with parentheses, decide on the metric values."""
    values = {"rate": 0.8, "rate_low": 0.4, "rate_high": 0.96, "passed": 4.0, "total": 5.0}
    values |= {"flagged": 0.0, "errored": 0.0}
    assert expected == parse_rule(rule).holds(values)


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ("", "the rule is empty"),
        ("rate >=", "it ends too soon"),
        ("rate 0.8", "expected a comparison"),
        ("__import__('os') > 0", "cannot read"),
        ("speed > 1", "unknown metric 'speed'"),
        ("rate >= 0.8 rate", "unexpected 'rate'"),
        ("(rate > 0.5", "it ends too soon"),
        ("rate > 1e999", "not a finite number"),
        ("(" * 20 + "rate > 0" + ")" * 20, "nested deeper than 16"),
        ("rate > 0 and " * 50 + "rate > 0", "at most 500 characters"),
        ("rate > 0 and and rate > 1", "expected a metric or a number, not 'and'"),
    ],
)
def test_a_bad_rule_is_one_plan_error_naming_why(rule: str, why: str) -> None:
    """Malformed, unsafe, unknown, too long or too deep: a PlanError on one line, never eval."""
    with pytest.raises(PlanError) as caught:
        parse_rule(rule)
    assert (True, 1) == (why in str(caught.value), len(str(caught.value).splitlines()))


def test_a_plan_must_use_its_metric_in_its_rule() -> None:
    """A plan whose rule never mentions its metric is refused."""
    with pytest.raises(PlanError, match="does not use the plan's metric 'rate'"):
        make_plan(dataset(2), SPEC, metric="rate", rule="passed > 1", made_at=START)


def _plan_bytes(signer: SignerKey | None = None) -> bytes:
    from twinflow.eval._plan import write_plan

    plan = make_plan(dataset(3), SPEC, metric="rate", rule="rate >= 0.5", made_at=START)
    return write_plan(plan, signer)


def test_a_plan_file_reads_back_as_written() -> None:
    """An unsigned plan file reads back to the same plan, with no signer."""
    read = read_plan(_plan_bytes())
    assert ("rate >= 0.5", (), dataset(3).digest) == (
        read.plan.rule,
        read.signers,
        read.plan.dataset_digest,
    )


def test_a_signed_plan_verifies_and_a_tampered_one_is_refused() -> None:
    """A signed plan verifies by its key; one edited after signing does not."""
    signer = generate_key("example.org/lab", bytes(range(32)))
    data = _plan_bytes(signer)
    assert (signer.verifier.text,) == read_plan(data, (signer.verifier,)).signers
    tampered = data.replace(b'"rate >= 0.5"', b'"rate >= 0.1"')
    with pytest.raises(PlanError, match="signature does not verify"):
        read_plan(tampered, (signer.verifier,))
    with pytest.raises(PlanError, match="the plan is signed: name the verifier key"):
        read_plan(data)
    other = generate_key("example.org/other", bytes(32))
    with pytest.raises(PlanError, match="signature does not verify"):
        read_plan(data, (other.verifier,))


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "not a plan file"),
        (b"twinflow eval plan v1\n{not json}\n", "not canonical JSON"),
        (b"twinflow eval plan v1\n[]\n", "not an object"),
        (b"twinflow eval plan v1\n{}\n", "not a plan file"),
        (b"hello\n{}\n", "not a plan file"),
        (b"\xff\xfe", "not UTF-8"),
        (b"x" * 70_000, "at most 65536 bytes"),
    ],
)
def test_a_malformed_plan_file_is_one_plan_error(data: bytes, why: str) -> None:
    """Bytes that are not a plan: a PlanError naming why, nothing else raised."""
    with pytest.raises(PlanError) as caught:
        read_plan(data)
    assert (True, 1) == (why in str(caught.value), len(str(caught.value).splitlines()))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("made_at", "2026-01-01T00:00:00"),
        ("made_at", "99999-01-01T00:00:00Z"),
        ("made_at", []),
        ("trials", 2**53 - 1),
        ("trials", 1.5),
        ("rule", {"and": ["rate >= 0.5"]}),
        ("rule", "rate >= 1e400"),
        ("rule", "(" * 60 + "rate >= 1" + ")" * 60),
        ("metric", None),
        ("dataset_digest", 7),
    ],
)
def test_a_plan_field_of_the_wrong_shape_is_one_plan_error(field: str, value: object) -> None:
    """Every field a received plan holds, wrong in type or range (a naive made_at), is a PlanError."""
    header, body, _ = _plan_bytes().split(b"\n")
    fields = json.loads(body)
    fields[field] = value
    data = header + b"\n" + canonical_bytes(fields) + b"\n"
    with pytest.raises(PlanError) as caught:
        read_plan(data)
    assert 1 == len(str(caught.value).splitlines())


def test_a_naive_made_at_is_refused_before_lab_notes_compare_it() -> None:
    """A plan whose time names no offset is refused when read, so judging it never raises."""
    data = _plan_bytes().replace(b'"2026-01-01T00:00:00Z"', b'"2026-01-01T00:00:00"')
    with pytest.raises(PlanError, match="made_at"):
        read_plan(data, check_signature=False)


def test_a_plan_with_a_rule_edited_to_garbage_is_refused() -> None:
    """A plan file whose rule does not parse is refused when read, not when the run ends."""
    data = _plan_bytes().replace(b'"rate >= 0.5"', b'"rate >= "')
    with pytest.raises(PlanError, match="it ends too soon"):
        read_plan(data)


def test_a_run_of_another_dataset_spec_or_scorers_is_refused() -> None:
    """check_plan names what differs from the plan: the dataset, the spec, the trial count."""
    plan = read_plan(_plan_bytes()).plan
    check_plan(plan, dataset(3), SPEC)
    with pytest.raises(PlanError, check=lambda e: "mismatch" == e.reason, match="another dataset"):
        check_plan(plan, dataset(4), SPEC)
    with pytest.raises(PlanError, check=lambda e: "mismatch" == e.reason, match="another spec"):
        check_plan(plan, dataset(3), "b" * 64)
    with pytest.raises(
        PlanError,
        check=lambda e: "mismatch" == e.reason,
        match=r"another trial count \(plan: 1; this run: 3\)",
    ):
        check_plan(plan, dataset(3), SPEC, 3)


def test_lab_notes_say_whether_the_rule_was_met_and_which_came_first(tmp_path: Path) -> None:
    """A plan made before the first trace is pre-registration; one made after is named so."""
    from twinflow.eval._plan import write_plan

    data = dataset(4, wrong=(1,))
    before = make_plan(data, SPEC, metric="rate", rule="rate >= 0.8", made_at=START - timedelta(1))
    run_eval(data, factory(), tmp_path / "a", clock=CLOCK, plan=write_plan(before))
    notes = (tmp_path / "a" / "lab-notes.md").read_text()
    assert "- rule NOT met (rate = 0.75)" in notes
    assert "before the run's first trace started" in notes
    after = make_plan(
        data, SPEC, metric="rate", rule="rate >= 0.5", made_at=datetime(2027, 1, 1, tzinfo=UTC)
    )
    run_eval(data, factory(), tmp_path / "b", clock=CLOCK, plan=write_plan(after))
    notes = (tmp_path / "b" / "lab-notes.md").read_text()
    assert "- rule met (rate = 0.75)" in notes
    assert "the run came first, so this plan is not a pre-registration" in notes


def test_a_run_directory_keeps_one_plan(tmp_path: Path) -> None:
    """Resuming a directory under another plan is refused before anything is written."""
    from twinflow.eval import RunDirError
    from twinflow.eval._plan import write_plan

    data = dataset(2)
    first = make_plan(data, SPEC, metric="rate", rule="rate >= 0.5", made_at=START)
    run_eval(data, factory(), tmp_path / "run", clock=CLOCK, plan=write_plan(first))
    second = make_plan(data, SPEC, metric="rate", rule="rate >= 0.9", made_at=START)
    with pytest.raises(RunDirError, match="registered under another plan"):
        run_eval(data, factory(), tmp_path / "run", clock=CLOCK, plan=write_plan(second))


def test_lab_notes_of_a_run_whose_plan_names_no_offset_say_so(tmp_path: Path) -> None:
    """A received run's plan.note with a naive made_at: Lab Notes name the problem, no crash."""
    from twinflow.eval._lab_notes import write_reports
    from twinflow.eval._plan import write_plan

    data = dataset(2)
    plan = make_plan(data, SPEC, metric="rate", rule="rate >= 0.5", made_at=START)
    run = tmp_path / "run"
    results = run_eval(data, factory(), run, clock=CLOCK, plan=write_plan(plan))
    note_bytes = (run / "plan.note").read_bytes()
    (run / "plan.note").write_bytes(note_bytes.replace(b'00:00Z"', b'00:00"'))
    write_reports(results, run)
    assert "made_at: Input should have timezone info" in (run / "lab-notes.md").read_text()
