"""Datasets: cases in YAML or JSON Lines, validated with errors naming file, line and key.

YAML::

    name: invoices
    scorers: [{kind: fields}]          # applied to every case
    cases:
      - id: inv-001
        input: "Invoice ..."
        expected: {total: 12.5}
        assertions: [{kind: numeric, field: total, tolerance: 0.01}]
        tags: [eur]
        repeats: 1                     # at least this many trials of this case
    trials: 3                          # each case's trials by default (``--trials`` overrides)
    user: {spec: user.yaml, max_turns: 4}  # a simulated user (a case may name its own)

JSON Lines: one case object per line (the dataset is named after the file); a case with
``expected`` and no ``assertions`` is scored by exact match.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field, JsonValue, ValidationError, field_validator, model_validator

from twinflow._base._json import refuse_repeated_keys
from twinflow._base._yaml import (
    YamlLimits,
    located_problem,
    read_user_file,
    read_yaml,
    validation_problem,
    validation_problems,
    yaml_line,
)
from twinflow.eval._errors import DatasetError
from twinflow.eval._frozen import EvalValue
from twinflow.eval._scorers import ExactMatch, ScorerSpec
from twinflow.trace import CanonicalError
from twinflow.trace import CanonicalError as NotJsonError
from twinflow.trace._canonical import parse_json
from twinflow.vocab import digest
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["MAX_DATASET_BYTES", "MAX_TRIALS", "Case", "Dataset", "load_dataset"]

MAX_TRIALS = 1000
"""The most trials of one case a run makes (a case's ``repeats``, a dataset's or run's ``trials``)."""

MAX_DATASET_BYTES = 64 * 1024 * 1024
"""Largest dataset file read (a dataset may be received with a run directory)."""
MAX_DATASET_DEPTH = 64
"""Deepest nesting in a dataset (a case's ``expected`` value included), as in a trace's events."""
_YAML_LIMITS = YamlLimits(
    "dataset",
    MAX_DATASET_BYTES,
    MAX_DATASET_DEPTH,
    # Room for a large dataset's own nodes; an alias bomb expands past it.
    max_nodes=4_000_000,
)


BUDGET_KEYS = (
    "tokens",
    "input_tokens",
    "output_tokens",
    "requests",
    "tool_calls",
    "wall_seconds",
    "cost_usd",
)
"""What a dataset's or a case's ``budget:`` may bound (a run spec's ``budget:`` keys)."""


def _checked_budget(value: dict[str, float] | None) -> dict[str, float] | None:
    """A budget of known keys, each above 0 (counts whole numbers)."""
    if value is None:
        return None
    for name, limit in value.items():
        if name not in BUDGET_KEYS:
            raise ValueError(f"unknown budget key {name!r}: give one of {', '.join(BUDGET_KEYS)}")
        if not (math.isfinite(limit) and limit > 0):
            raise ValueError(f"budget {name} must be a finite number above 0, not {limit:g}")
        if name not in ("wall_seconds", "cost_usd") and limit != int(limit):
            raise ValueError(f"budget {name} counts, so it is a whole number, not {limit:g}")
    return value


MAX_USER_TURNS = 100
"""The most further turns a simulated user may take in one conversation (as a case's ``turns``)."""


class SimulatedUser(EvalValue):
    """A simulated user: a model that writes the user's next message after each answer."""

    spec: str = Field(min_length=1, max_length=1000)
    """Its run spec (a path relative to the dataset's directory): its ``model`` and its
    ``system`` (the persona and instructions); its ``prompt`` is unused. It may have no tools,
    sub-agents or output model: it writes text, which the run under test reads."""
    max_turns: int = Field(ge=1, le=MAX_USER_TURNS)
    """The most messages it writes after the case's ``input`` (the turn limit); it may end
    the conversation sooner by replying ``[done]``."""


class Case(EvalValue):
    """One eval case."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    """Unique id; letters, digits, ``.``, ``_``, ``-`` (it names the case's files)."""
    input: str = Field(min_length=1)
    """The prompt the agent is run on."""
    turns: tuple[str, ...] = Field(default=(), max_length=100, exclude_if=lambda value: not value)
    """Further user turns, sent in order once each answer is in, one conversation in one
    trace (as given: the spec's prompt template is applied to ``input`` only); scorers score
    the last answer and see them all (``answers``, ``turns``). A turn after a failed one is
    not sent."""
    user: SimulatedUser | None = Field(default=None, exclude_if=lambda value: value is None)
    """A simulated user that writes the further turns (instead of ``turns``), with ``goal``;
    default: the dataset's ``user``."""
    goal: str | None = Field(default=None, min_length=1, exclude_if=lambda value: value is None)
    """What the simulated user wants from the conversation (default: ``input``)."""
    expected: JsonValue = None
    """The expected output, if any (scorers compare against it)."""
    assertions: tuple[ScorerSpec, ...] = ()
    """Scorers for this case, in addition to the dataset's."""
    tags: tuple[str, ...] = ()
    """Tags, for pass rates by tag."""
    repeats: int = Field(default=1, ge=1, le=MAX_TRIALS)
    """How many times the case is run, at least (a run's ``trials`` above it wins)."""
    budget: dict[str, float] | None = Field(default=None, exclude_if=lambda value: value is None)
    """What this case's run may use (the run spec's ``budget:`` keys: ``tokens``,
    ``input_tokens``, ``output_tokens``, ``requests``, ``tool_calls``, ``wall_seconds``,
    ``cost_usd``); it replaces the spec's budget for this case, and ``eval run --case-budget``
    replaces it."""

    @field_validator("budget")
    @classmethod
    def _budget_keys(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return _checked_budget(value)

    @field_validator("expected")
    @classmethod
    def _canonical_numbers(cls, value: JsonValue) -> JsonValue:
        # JSON has one number type: 108.0 and 108 are the same value, and the canonical form
        # a run directory stores writes 108. Holding the canonical form from the start makes a
        # scorer's words ("expected 108") the same at run time and when rescoring.
        try:
            loaded: JsonValue = json.loads(canonical_bytes(value))
        except CanonicalError as exc:  # NaN, infinities, unsafe integers: not JSON values
            raise ValueError(str(exc)) from None
        return loaded

    @model_validator(mode="after")
    def _one_source_of_turns(self) -> Case:
        if self.turns and self.user is not None:
            raise ValueError(
                "a case's further turns come from its 'turns' or from a simulated 'user', not "
                "both: remove one"
            )
        return self


class Dataset(EvalValue):
    """A named set of cases with the scorers applied to every case."""

    name: str = Field(min_length=1)
    """The dataset's name."""
    scorers: tuple[ScorerSpec, ...] = ()
    """Scorers applied to every case."""
    cases: tuple[Case, ...] = Field(min_length=1)
    """The cases, in order."""
    trials: int = Field(default=1, ge=1, le=MAX_TRIALS, exclude_if=lambda value: value == 1)
    """How many times each case is run when the run names no ``--trials`` (absent when 1, so
    datasets written before trials keep their digests)."""
    budget: dict[str, float] | None = Field(default=None, exclude_if=lambda value: value is None)
    """The whole eval's budget (the keys of a case's ``budget``, summed over the cases that
    ran): once crossed no case is started. ``eval run --budget`` replaces it."""

    @field_validator("budget")
    @classmethod
    def _budget_keys(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return _checked_budget(value)

    user: SimulatedUser | None = Field(default=None, exclude_if=lambda value: value is None)
    """The simulated user of every case that lists no ``turns`` and names no ``user`` of its
    own: it writes each further user turn (its own model calls traced beside the case's)."""

    @property
    def digest(self) -> str:
        """Digest of the dataset's canonical JSON form: run directories are tied to it."""
        return digest(self)

    def user_for(self, case: Case) -> SimulatedUser | None:
        """The simulated user writing ``case``'s further turns: its own, else the dataset's
        (none for a case that lists its ``turns``)."""
        if case.user is not None or case.turns:
            return case.user
        return self.user

    def scorers_for(self, case: Case) -> tuple[ScorerSpec, ...]:
        """The dataset's scorers then the case's; exact match if neither names one and ``expected`` is set."""
        scorers = (*self.scorers, *case.assertions)
        if not scorers and case.expected is not None:
            return (ExactMatch(),)
        return scorers


def _raise(problems: list[str]) -> None:
    more = (
        f" (and {len(problems) - 1} more: {'; '.join(problems[1:4])})" if len(problems) > 1 else ""
    )
    raise DatasetError(problems[0] + more)


def _check_ids(
    cases: Sequence[Case], lines: Sequence[int | None], source: Path, prefix: Sequence[int | str]
) -> None:
    seen: dict[str, int] = {}
    for index, case in enumerate(cases):
        if case.id in seen:
            _raise(
                [
                    located_problem(
                        str(source),
                        lines[index],
                        (*prefix, index, "id") if prefix else ("id",),
                        f"duplicate case id {case.id!r} (first used by case {seen[case.id]})",
                    )
                ]
            )
        seen[case.id] = index


def _load_yaml(path: Path, text: str) -> Dataset:
    root, data = read_yaml(text, str(path), _YAML_LIMITS, DatasetError)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: a YAML dataset is a mapping with 'name' and 'cases'")
    data.setdefault("name", path.stem)
    try:
        dataset = Dataset.model_validate(data)
    except ValidationError as exc:
        _raise(validation_problems(exc, root, str(path), Dataset))
        raise  # unreachable: _raise always raises
    lines = [yaml_line(root, ("cases", i)) for i in range(len(dataset.cases))]
    _check_ids(dataset.cases, lines, path, ("cases",))
    return dataset


def _load_jsonl(path: Path, text: str) -> Dataset:
    cases: list[Case] = []
    lines: list[int | None] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            # Plain JSON nested no deeper than a YAML dataset; a key written twice is refused,
            # as in every received document (never read last-wins).
            data = parse_json(raw.encode("utf-8"), max_depth=MAX_DATASET_DEPTH, strict=False)
            refuse_repeated_keys(raw)
        except (NotJsonError, ValueError) as exc:
            raise DatasetError(f"{path}:{number}: not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise DatasetError(f"{path}:{number}: each line must be a JSON object (one case)")
        try:
            cases.append(Case.model_validate(data))
        except ValidationError as exc:
            _raise([validation_problem(str(path), number, e, Case) for e in exc.errors()])
        lines.append(number)
    if not cases:
        raise DatasetError(f"{path}: the dataset holds no cases")
    _check_ids(cases, lines, path, ())
    return Dataset(name=path.stem, cases=tuple(cases))


def load_dataset(path: str | Path) -> Dataset:
    """Read and validate a dataset (``.yaml``/``.yml`` or ``.jsonl``).

    Args:
        path: The dataset file.

    Returns:
        The dataset.

    Raises:
        DatasetError: Naming the file, line and key of the first problem.
    """
    source = Path(path)
    text = read_user_file(source, MAX_DATASET_BYTES, DatasetError, "dataset")
    if source.suffix == ".jsonl":
        return _load_jsonl(source, text)
    if source.suffix in {".yaml", ".yml"}:
        return _load_yaml(source, text)
    raise DatasetError(f"{source}: unknown dataset format; use .yaml, .yml or .jsonl")
