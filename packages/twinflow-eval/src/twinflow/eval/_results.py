"""The files of a run directory, as frozen values, and the atomic writes that keep them whole.

A run directory::

    run.json              the manifest: the dataset (whole), its digest, the shard, the case keys
    traces/<key>.jsonl    one trace per case repeat (``<key>`` is ``<case id>@<repeat>``)
    cases/<key>.json      one result per finished case repeat, written atomically
    results.json          every result plus a summary, rewritten atomically at the end
    lab-notes.md/.html    the reports

Each file is written to a temporary name, synced, then renamed over the target, so a killed
run leaves either the old file or the new one, never half of one (`twinflow.kernel.write_replace`:
a planted symbolic link is refused, its target untouched).

``run.json`` records what the run is a run *of*: the dataset's digest, the spec's digest and
the model's identity. Resuming a directory with any of them changed is refused, naming both,
so one directory never mixes two configurations' results.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

from twinflow._base._errors import FileWriteError
from twinflow._base._files import read_inside
from twinflow._base._json import decimal, refuse_repeated_keys
from twinflow.eval._dataset import MAX_TRIALS, Case, Dataset
from twinflow.eval._errors import EvalValueError, RunDirError
from twinflow.eval._frozen import EvalValue
from twinflow.eval._scorers import Score
from twinflow.eval._trials import TrialStats
from twinflow.trace import Checkpoint

__all__ = [
    "SEED_STRIDE",
    "CaseResult",
    "CaseStatus",
    "EvalResults",
    "RunIdentity",
    "RunManifest",
    "Shard",
    "Summary",
    "case_key",
    "read_json_model",
    "refuse_planted_links",
    "select_keys",
    "set_aside",
    "trial_seed",
    "trials_of",
]

M = TypeVar("M", bound=BaseModel)

CaseStatus = Literal["passed", "failed", "errored", "flagged"]
"""A case's verdict: every scorer passed; one failed; one raised; or its trace did not verify."""


class Shard(EvalValue):
    """One slice of a dataset's cases: the ``index``-th of ``count`` (1-based)."""

    index: int = Field(ge=1)
    """Which slice, from 1."""
    count: int = Field(ge=1)
    """How many slices."""

    @classmethod
    def parse(cls, text: str) -> Shard:
        """Read ``i/n``.

        Raises:
            EvalValueError: Not of the form ``i/n`` with ``1 <= i <= n``.
        """
        left, sep, right = text.partition("/")
        index, count = decimal(left), decimal(right)
        if not (sep and index is not None and count is not None and 1 <= index <= count):
            raise EvalValueError(f"--shard {text!r}: write i/n with 1 <= i <= n, e.g. 2/4")
        return cls(index=index, count=count)

    def __str__(self) -> str:
        """``i/n``."""
        return f"{self.index}/{self.count}"

    def holds(self, case_id: str) -> bool:
        """Whether this slice holds the case (by a hash of its id, so order does not matter)."""
        bucket = int.from_bytes(hashlib.sha256(case_id.encode()).digest()[:8], "big") % self.count
        return bucket == self.index - 1


def case_key(case_id: str, repeat: int) -> str:
    """The key (and file stem) of one repeat of a case: ``<id>@<repeat>``."""
    return f"{case_id}@{repeat}"


SEED_STRIDE = 1000
"""Seeds of consecutive trials are this far apart: a structured-output re-ask moves the seed by
one per retry (`twinflow.models`), so one trial's re-asks never reuse another trial's seed."""


def trial_seed(repeat: int) -> int:
    """The sampling seed of a case's ``repeat``-th trial: 0 for the first (as every run before
    trials used), then `SEED_STRIDE` apart; the trace records it in ``run_started``."""
    return (repeat - 1) * SEED_STRIDE


def trials_of(case: Case, trials: int) -> int:
    """How many times ``case`` runs in a run of ``trials`` trials: its ``repeats`` when above."""
    return max(case.repeats, trials)


def select_keys(
    dataset: Dataset, shard: Shard | None, trials: int | None = None
) -> tuple[tuple[Case, int, str], ...]:
    """The (case, repeat, key) triples a shard runs, in dataset order.

    Args:
        dataset: The dataset.
        shard: The slice (every trial of a case is in the same slice), or None for all.
        trials: Trials of each case (default: the dataset's ``trials``).
    """
    count = dataset.trials if trials is None else trials
    return tuple(
        (case, repeat, case_key(case.id, repeat))
        for case in dataset.cases
        if shard is None or shard.holds(case.id)
        for repeat in range(1, trials_of(case, count) + 1)
    )


class RunIdentity(EvalValue):
    """What configuration produced a run's traces, beyond its dataset."""

    spec_digest: str | None = None
    """Digest of the run spec (its validated value), when the run had one."""
    model: str | None = None
    """The model's identity: API, dialect, endpoint (without credentials), name and mode."""
    users_digest: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """Digest of the simulated users' specs, by the name the dataset gives each, when it names
    any. Absent otherwise, so a run without one is written as it was before this field."""


class RunManifest(EvalValue):
    """``run.json``: what a run directory is a run of."""

    format: Literal["twinflow-eval/1"] = "twinflow-eval/1"
    """File format tag."""
    dataset: Dataset
    """The dataset, whole: rescoring needs nothing else but the traces."""
    dataset_digest: str
    """Digest of ``dataset``."""
    shard: Shard | None
    """The slice run, or None for all cases."""
    keys: tuple[str, ...]
    """The case keys of this run, in order."""
    trials: int = Field(default=1, ge=1, le=MAX_TRIALS, exclude_if=lambda value: value == 1)
    """Trials of each case (a case's ``repeats`` above it wins); the ``k`` of pass@k. Absent
    when 1, so a manifest written before trials reads, and is written, as it was."""
    code_dirs: tuple[str, ...] = ()
    """Directories the run imported user code from (tools, output models, custom scorers
    named by dotted path); rescoring and merging import from them too, where they exist."""
    identity: RunIdentity | None = None
    """The spec and model the run used (None: not recorded, as in runs made before it was)."""

    def check_resume(self, resumed: RunManifest, where: Path) -> None:
        """Refuse to resume this run (read from ``where``) as ``resumed``, unless they are one run.

        Raises:
            RunDirError: The dataset, shard, spec, model or a simulated user's spec differ; the
                message names both values.
        """
        mine = self.identity or RunIdentity()
        theirs = resumed.identity or RunIdentity()
        pairs = {
            "dataset": (
                f"{self.dataset.name} {self.dataset_digest[:12]}",
                f"{resumed.dataset.name} {resumed.dataset_digest[:12]}",
            ),
            "shard": (str(self.shard), str(resumed.shard)),
            "trial count": (str(self.trials), str(resumed.trials)),
            "spec": (_short(mine.spec_digest), _short(theirs.spec_digest)),
            "model": (mine.model or "not recorded", theirs.model or "not recorded"),
            "simulated user spec": (_short(mine.users_digest), _short(theirs.users_digest)),
        }
        for what, (recorded, now) in pairs.items():
            if recorded != now:
                raise RunDirError(
                    f"{where} holds a run of another {what} (recorded: {recorded}; this run: "
                    f"{now}); resuming would mix both in one result: pick a new --out directory"
                )


class CaseResult(EvalValue):
    """The verdict on one repeat of one case."""

    key: str
    """``<case id>@<repeat>``."""
    case_id: str
    """The case's id."""
    repeat: int
    """The repeat, from 1."""
    tags: tuple[str, ...]
    """The case's tags."""
    status: CaseStatus
    """The verdict."""
    scores: tuple[Score, ...]
    """Each scorer's score (empty when flagged)."""
    trace: str
    """The trace's path, relative to the run directory."""
    checkpoint: Checkpoint
    """Checkpoint (size, Merkle root, head) of the verified trace (of its good prefix when flagged)."""
    run_status: Literal["finished", "failed", "incomplete"]
    """How the agent's run ended, per the trace."""
    attempts: int
    """Structured-output attempts."""
    steps: int
    """Model requests."""
    latency_s: float
    """Seconds the case took, by the runner's clock."""
    error: str | None = None
    """The run's error (``Type: message``) when it failed."""
    problem: str | None = None
    """What verification found wrong with the trace, when flagged."""
    seed: int | None = Field(default=None, exclude_if=lambda value: value is None)
    """The sampling seed the run was configured with, read from its trace (``run_started``);
    absent when the trace records none or did not verify, and in results written before."""
    cost_usd: float | None = Field(default=None, exclude_if=lambda value: value is None)
    """US dollars the run cost, at the prices its trace records; absent when a reply's price
    was unknown, the trace did not verify, and in results written before."""


class Summary(EvalValue):
    """Counts over a run's results."""

    total: int
    """Case repeats with a result."""
    passed: int
    """Passed."""
    failed: int
    """Failed."""
    errored: int
    """A scorer raised."""
    flagged: int
    """The trace did not verify."""

    @classmethod
    def of(cls, cases: Sequence[CaseResult]) -> Summary:
        """Count statuses."""
        return cls.tally(Counter(c.status for c in cases))

    @classmethod
    def tally(cls, counts: Mapping[CaseStatus, int]) -> Summary:
        """The summary of results whose statuses ``counts`` counts (a run's progress keeps
        the counts as results come, instead of counting every result again each time)."""
        statuses: tuple[CaseStatus, ...] = ("passed", "failed", "errored", "flagged")
        return cls(total=sum(counts.values()), **{s: counts.get(s, 0) for s in statuses})


class EvalResults(EvalValue):
    """``results.json`` (and ``rescore.json``): every case's result and the summary."""

    format: Literal["twinflow-eval/1"] = "twinflow-eval/1"
    """File format tag."""
    dataset: str
    """The dataset's name."""
    dataset_digest: str
    """The dataset's digest."""
    shard: Shard | None
    """The slice, or None."""
    complete: bool
    """Every case key of the manifest has a result."""
    summary: Summary
    """Counts."""
    cases: tuple[CaseResult, ...]
    """Results in manifest order."""
    trials: TrialStats | None = Field(default=None, exclude_if=lambda value: value is None)
    """Per-case pass counts, pass@k, pass^k and the rate's case-clustered interval, for a run
    with more than one trial of a case (absent otherwise, as in results written before)."""
    stopped: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """Why the run stopped starting cases (its total budget crossed, and how many ran);
    absent when it did not stop."""


def _short(value: str | None) -> str:
    return "not recorded" if value is None else value[:12]


RUN_FILES = (
    "run.json",
    "results.json",
    "rescore.json",
    "lab-notes.md",
    "lab-notes.html",
    "plan.note",
)
"""The fixed names a run directory holds besides ``traces/`` and ``cases/``."""


def refuse_planted_links(run_dir: Path) -> None:
    """Refuse a run directory in which any name twinflow writes is a symbolic link.

    Checked before a run writes anything, so a refused run changes no file; each write also
    refuses a link on its own (`write_replace`), which covers a link planted mid-run.

    Raises:
        FileWriteError (``link``): naming the first link found.
    """
    subdirs = ("traces", "cases", "judgements", "rejudged")
    for path in (run_dir, *(run_dir / n for n in (*subdirs, *RUN_FILES))):
        if path.is_symlink():
            raise FileWriteError(
                f"{path} is a symbolic link; the run writes nothing through it: remove the "
                "link, or pick a new --out directory",
                path=path,
                reason="link",
            )
    for sub in subdirs:
        if not (run_dir / sub).is_dir():
            continue
        with os.scandir(run_dir / sub) as entries:
            planted = next((e.path for e in entries if e.is_symlink()), None)
        if planted is not None:
            raise FileWriteError(
                f"{planted} is a symbolic link; the run writes nothing through it: remove the "
                "link, or pick a new --out directory",
                path=planted,
                reason="link",
            )


def read_json_model(path: Path, model: type[M]) -> M:
    """Read a JSON file as ``model``; a symbolic link or a FIFO at its name is refused.

    Raises:
        RunDirError: The file is missing or is not a valid ``model``.
        UnsafePathError: The name is a symbolic link or not a regular file.
    """
    try:
        data = read_inside(path.parent, path.name, what=path.name)
    except FileNotFoundError:
        raise RunDirError(f"{path}: no such file; is this a twinflow eval run directory?") from None
    try:
        refuse_repeated_keys(data)
        return model.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RunDirError(
            f"{path}: not a valid {model.__name__} ({where}: {first['msg']})"
        ) from None
    except ValueError as exc:
        raise RunDirError(f"{path}: not a valid {model.__name__} ({exc})") from None


def set_aside(trace: Path) -> None:
    """Rename a trace a new run must not reuse to ``<stem>.interrupted[-N].jsonl``; never delete it."""
    number = 0
    target = trace.with_name(f"{trace.stem}.interrupted.jsonl")
    while target.exists():
        number += 1
        target = trace.with_name(f"{trace.stem}.interrupted-{number}.jsonl")
    trace.rename(target)
