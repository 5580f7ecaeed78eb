"""The spec reference and the published JSON Schemas say what the loaders accept."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from twinflow.agent import McpServerSpec, ModelSpec, PolicySpec, RunSpec
from twinflow.agent._retry import RetryLimits
from twinflow.agent._sandboxed import SandboxSpec
from twinflow.agent._spec import BudgetSpec, SubAgentSpec
from twinflow.cli._schemas import published_schemas, schema_texts
from twinflow.eval import Case, Dataset, ScorerSpec

REFERENCE = Path(__file__).parents[3] / "docs" / "spec-reference.md"


def sections() -> dict[str, str]:
    """The reference's sections by heading."""
    text = REFERENCE.read_text(encoding="utf-8")
    parts = re.split(r"^(#{2,3} .+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def keys_in(section: str) -> set[str]:
    """The keys a section's table lists (its rows' first cells)."""
    return set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))


def test_the_reference_lists_every_key_and_no_other() -> None:
    """Each table of the reference holds exactly its model's keys."""
    found = sections()
    models: dict[str, type[BaseModel]] = {
        "## Run spec": RunSpec,
        "### `model`": ModelSpec,
        "### `policy`": PolicySpec,
        "### `sandbox`": SandboxSpec,
        "### `budget`": BudgetSpec,
        "### `retries`": RetryLimits,
        "### `mcp_servers`": McpServerSpec,
        "### `agents`": SubAgentSpec,
        "## Dataset": Dataset,
        "### A case": Case,
    }
    for heading, model in models.items():
        assert (heading, set(model.model_fields)) == (heading, keys_in(found[heading]))


def test_the_reference_lists_every_scorer_and_its_keys() -> None:
    """Every scorer kind has a row naming each of its keys."""
    table = sections()["### Scorers"]
    rows = {m[0]: m[1] for m in re.findall(r"^\| `([a-z_]+)` \|(.*)$", table, flags=re.MULTILINE)}
    scorers = typing.get_args(typing.get_args(ScorerSpec)[0])
    kinds = {s.model_fields["kind"].default: s for s in scorers}
    assert set(kinds) == set(rows)
    for kind, scorer in kinds.items():
        keys = set(scorer.model_fields) - {"kind", "name"}
        assert (kind, keys) == (kind, {k for k in keys if f"`{k}`" in rows[kind]})


def test_the_published_schemas_are_the_models_schemas() -> None:
    """Each schema file in the packages is what the models generate now."""
    texts = schema_texts()
    for key, path in published_schemas().items():
        assert (key, texts[key]) == (key, path.read_text(encoding="utf-8"))


def test_the_dataset_schema_lets_a_yaml_dataset_leave_out_its_name() -> None:
    """The loader names a dataset after its file, so the schema does not require `name`."""
    import json

    schema = json.loads(schema_texts()["eval/dataset.schema.json"])
    assert ["cases"] == schema["required"]
