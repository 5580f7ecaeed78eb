"""A run directory scored again from its traces alone: `rescore`, and `merge_runs` of shards.

Every score is the runner's `score_trace` of a verified trace, so a run directory can be
scored again by anyone, without a model; a merged run is the shards' traces copied and scored
as an unsharded run would have been.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from twinflow._base._code import importing_from
from twinflow._base._files import (
    WRITER_LOCK,
    create_exclusive,
    make_directory,
    open_inside,
    read_inside,
    write_replace,
)
from twinflow._base._json import decimal
from twinflow.eval._errors import RunDirError
from twinflow.eval._judge import JUDGEMENTS, REJUDGED, JudgeWiring, Judging
from twinflow.eval._lab_notes import write_reports
from twinflow.eval._results import (
    CaseResult,
    EvalResults,
    RunIdentity,
    RunManifest,
    Summary,
    _short,
    case_key,
    read_json_model,
    select_keys,
)
from twinflow.eval._runner import (
    _collect,
    _one_writer,
    _prepare,
    _refuse_untrusted_code,
)
from twinflow.eval._scoring import _encode, score_trace
from twinflow.eval._trials import trial_stats

__all__ = ["load_run", "merge_runs", "rescore"]


def load_run(run_dir: str | Path) -> tuple[RunManifest, EvalResults]:
    """Read a run directory's manifest and ``results.json``.

    Raises:
        RunDirError: A file is missing or invalid.
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise RunDirError(f"{path}: no such run directory")
    return read_json_model(path / "run.json", RunManifest), read_json_model(
        path / "results.json", EvalResults
    )


def _rescore_dir(
    run_dir: Path, manifest: RunManifest, recorded: EvalResults, judging: Judging
) -> EvalResults:
    cases = {case.id: case for case in manifest.dataset.cases}
    latency = {r.key: r.latency_s for r in recorded.cases}
    results = []
    for result in recorded.cases:
        case = cases.get(result.case_id)
        if case is None:
            raise RunDirError(
                f"{run_dir}/results.json: case {result.case_id!r} is not in the run's dataset"
            )
        _check_key(run_dir, result)
        scorers = manifest.dataset.scorers_for(case)
        results.append(
            score_trace(
                run_dir, case, result.repeat, result.key, scorers, latency[result.key], judging
            )
        )
    return EvalResults(
        dataset=manifest.dataset.name,
        dataset_digest=manifest.dataset_digest,
        shard=manifest.shard,
        complete=recorded.complete,
        summary=Summary.of(results),
        cases=tuple(results),
        trials=trial_stats(results, manifest.trials),
    )


def _judgement_number(trace: str, key: str) -> int | None:
    """The judge's number in a judgement trace's name (``<folder>/<key>.<n>.jsonl``), or None."""
    folder, _, name = trace.partition("/")
    number = name.removeprefix(f"{key}.").removesuffix(".jsonl")
    if (
        folder not in {JUDGEMENTS, REJUDGED}
        or decimal(number) is None
        or name != f"{key}.{number}.jsonl"
    ):
        return None
    return decimal(number)


def _check_key(run_dir: Path, result: CaseResult) -> None:
    """A recorded key names the case's files: it must be the one its case and repeat make."""
    if result.key != case_key(result.case_id, result.repeat):
        raise RunDirError(
            f"{run_dir}/results.json: case {result.case_id!r} repeat {result.repeat} is recorded "
            f"under the key {result.key!r:.100}, not {case_key(result.case_id, result.repeat)!r}; "
            "the file was edited"
        )


def _trace_sources(by_key: dict[str, tuple[Path, CaseResult]]) -> None:
    """Check every trace a shard's ``results.json`` names before anything is written.

    Each must be a regular file inside its shard directory (`open_inside`): a path that is
    absolute, climbs out or passes through a link is refused here, so the merged directory is
    not even created.
    """
    for source_dir, recorded in by_key.values():
        with (
            contextlib.suppress(FileNotFoundError),
            open_inside(source_dir, recorded.trace, what="results.json"),
        ):
            pass


@_one_writer("run_dir")
def rescore(
    run_dir: str | Path,
    *,
    trust_code: bool = False,
    judges: JudgeWiring | None = None,
    rejudge: bool = False,
) -> EvalResults:
    """Verify every trace of a run and score it again from the traces alone (no model).

    A trace that is missing or fails verification flags its case (status ``flagged``, the
    problem named); it is never scored. The result is written to ``rescore.json``;
    ``results.json`` is left as the run wrote it.

    Args:
        run_dir: A run directory written by `run_eval` or `merge_runs`.
        trust_code: Import the scorer modules the run's dataset names (custom scorers, schema
            models), from the directories ``run.json`` records. Without it, a run whose
            scoring needs code is refused before anything is imported.
        judges: The judge scorers' settings (and, with ``rejudge``, their model): each
            recorded judgement is verified and replayed against them, calling no model.
        rejudge: Call each judge again, live; the new judgements go under ``rejudged/``.

    Returns:
        The new results.

    Raises:
        RunDirError: The directory is not a run directory, or it names code and
            ``trust_code`` is not set.
    """
    path = Path(run_dir)
    manifest, recorded = load_run(path)
    if manifest.dataset.digest != manifest.dataset_digest:
        raise RunDirError(f"{path}/run.json: the dataset does not match its digest; it was edited")
    _refuse_untrusted_code(path, manifest.dataset, trust_code)
    judging = Judging(
        path,
        judges,
        mode="live" if rejudge else "replay",
        folder=REJUDGED if rejudge else JUDGEMENTS,
    )
    with importing_from(manifest.code_dirs):
        results = _rescore_dir(path, manifest, recorded, judging)
    write_replace(path / "rescore.json", _encode(results))
    return results


@_one_writer("out")
def merge_runs(
    shard_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    trust_code: bool = False,
    judges: JudgeWiring | None = None,
) -> EvalResults:
    """Combine the run directories of every shard of one dataset into one run directory.

    Every trace is copied, verified and scored again (a bad one flags its case); the merged
    results list the cases in dataset order, as an unsharded run would.

    Args:
        shard_dirs: One complete run directory per shard ``1/n`` .. ``n/n``.
        out: The new run directory (must not exist or be empty).
        trust_code: Import the scorer modules the dataset names, as `rescore`.
        judges: The judge scorers' settings: each shard's judgements are copied and
            replayed, as `rescore` does.

    Returns:
        The merged results (also written with the Lab Notes).

    Raises:
        RunDirError: ``reason="shards"``: the directories are not the complete shards of one
            dataset; ``reason="run_dir"``: a directory is not a run directory, ``out`` is not
            empty, or the dataset names code and ``trust_code`` is not set.
    """
    loaded = [(Path(d), *load_run(d)) for d in shard_dirs]
    trials = _check_shards(loaded, trust_code)
    target = Path(out)
    if target.exists() and any(p.name != WRITER_LOCK for p in target.iterdir()):
        raise RunDirError(f"{target} is not empty; merge into a new directory")
    dataset = loaded[0][1].dataset
    items = select_keys(dataset, None, trials)
    by_key = {r.key: (path, r) for path, _, results in loaded for r in results.cases}
    for _, _, key in items:
        if key not in by_key:
            raise RunDirError(f"case {key} is in no shard's results", reason="shards")
    _trace_sources(by_key)
    manifest = _merged_manifest(loaded, tuple(k for _, _, k in items), trials)
    code_dirs = manifest.code_dirs
    _prepare(target, manifest)
    # The shards' one plan (each was checked to hold the same) is the merged run's.
    plan = _plan_note(loaded[0][0])
    if plan is not None:
        write_replace(target / "plan.note", plan)
    judging = Judging(target, judges, mode="replay")
    merged = []
    for case, repeat, key in items:
        source_dir, recorded = by_key[key]
        _copy_case_files(source_dir, recorded, target, key)
        with importing_from(code_dirs):
            result = score_trace(
                target, case, repeat, key, dataset.scorers_for(case), recorded.latency_s, judging
            )
        write_replace(target / "cases" / f"{key}.json", _encode(result))
        merged.append(result)
    results = _collect(manifest, merged)
    write_replace(target / "results.json", _encode(results))
    write_reports(results, target)
    return results


_Loaded = tuple[Path, RunManifest, EvalResults]
"""A shard directory, its manifest and its results."""


def _merged_manifest(loaded: Sequence[_Loaded], keys: tuple[str, ...], trials: int) -> RunManifest:
    """The merged run's manifest: the shards' dataset, every key, their code directories."""
    dataset = loaded[0][1].dataset
    identities = {m.identity for _, m, _ in loaded}
    return RunManifest(
        dataset=dataset,
        dataset_digest=dataset.digest,
        shard=None,
        keys=keys,
        code_dirs=tuple(dict.fromkeys(d for _, m, _ in loaded for d in m.code_dirs)),
        # The shards' spec and model, when they agree (Lab Notes name them from here).
        identity=identities.pop() if len(identities) == 1 else None,
        trials=trials,
    )


def _check_shards(loaded: Sequence[_Loaded], trust_code: bool) -> int:
    """Refuse shards that are not the complete shards of one dataset; their trial count.

    Raises:
        RunDirError: ``reason="shards"``: the directories are not the complete shards of one
            dataset; ``reason="run_dir"``: the dataset names code and ``trust_code`` is not set.
    """
    if not loaded:
        raise RunDirError("merge needs at least one shard directory", reason="shards")
    for path, manifest, _ in loaded:
        _refuse_untrusted_code(path, manifest.dataset, trust_code)
    digests = {manifest.dataset_digest for _, manifest, _ in loaded}
    if len(digests) != 1:
        raise RunDirError(
            "the shard directories are runs of different datasets; merge shards of one dataset",
            reason="shards",
        )
    counts = sorted({manifest.trials for _, manifest, _ in loaded})
    if len(counts) != 1:
        raise RunDirError(
            f"the shard directories ran different numbers of trials ({', '.join(map(str, counts))}); "
            "merge shards run with one --trials",
            reason="shards",
        )
    shards = sorted(
        (manifest.shard.index, manifest.shard.count) if manifest.shard else (1, 1)
        for _, manifest, _ in loaded
    )
    count = shards[0][1]
    if shards != [(i, count) for i in range(1, count + 1)]:
        named = ", ".join(f"{i}/{n}" for i, n in shards)
        raise RunDirError(
            f"the shards given are {named}; merge needs each of 1/{count} .. {count}/{count} once",
            reason="shards",
        )
    for path, _, results in loaded:
        if not results.complete:
            raise RunDirError(
                f"{path} is an unfinished run; run it again to complete it, then merge",
                reason="shards",
            )
    _check_one_run(loaded)
    return counts[0]


def _check_one_run(loaded: Sequence[_Loaded]) -> None:
    """Refuse shards run with another spec, model or plan than the first: evidence from two
    runs is never merged into one (the digests `RunManifest.check_resume` compares, and the
    plan each shard was registered under).

    Raises:
        RunDirError: ``reason="shards"``, naming the field, both values and the shard.
    """
    first_path, first_manifest, _ = loaded[0]
    first = _run_of(first_path, first_manifest)
    for path, manifest, _ in loaded[1:]:
        theirs = _run_of(path, manifest)
        differ = [what for what in first if first[what] != theirs[what]]
        if differ:
            named = "; ".join(f"{what}: {first[what]} and {theirs[what]}" for what in differ)
            raise RunDirError(
                f"shard {path} was run with another {' and '.join(differ)} than shard "
                f"{first_path} ({named}); merging would mix two runs in one result: merge "
                "the shards of one run",
                reason="shards",
            )


def _run_of(path: Path, manifest: RunManifest) -> dict[str, str]:
    """What makes a shard part of one run beyond its dataset: spec, model and plan digests."""
    identity = manifest.identity or RunIdentity()
    plan = _plan_note(path)
    return {
        "spec": _short(identity.spec_digest),
        "model": identity.model or "not recorded",
        "plan": "none" if plan is None else f"plan.note {hashlib.sha256(plan).hexdigest()[:12]}",
    }


def _plan_note(run_dir: Path) -> bytes | None:
    """The run's ``plan.note``, or None when it was registered under no plan."""
    try:
        return read_inside(run_dir, "plan.note", what="plan.note")
    except FileNotFoundError:
        return None


def _copy_case_files(source_dir: Path, recorded: CaseResult, target: Path, key: str) -> None:
    """Copy a case's trace and its judgements from its shard into the merged directory.

    A judgement keeps its number; its name in the merged directory is made here, never taken
    from the shard's results.json.
    """
    copies = [(recorded.trace, f"traces/{key}.jsonl")]
    copies += [
        (link.trace, f"{JUDGEMENTS}/{key}.{number}.jsonl")
        for link in (s.judgement for s in recorded.scores)
        if link is not None and (number := _judgement_number(link.trace, key)) is not None
    ]
    for source_name, target_name in copies:
        make_directory((target / target_name).parent)
        with (
            contextlib.suppress(FileNotFoundError),
            open_inside(source_dir, source_name, what="results.json") as source,
            os.fdopen(create_exclusive(target / target_name, "trace copy"), "wb") as copy,
        ):
            shutil.copyfileobj(source, copy)
