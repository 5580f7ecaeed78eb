"""The JSON Schemas published for editors: run specs, YAML datasets, JSON Lines cases.

Generated from the models the loaders validate with, so they cannot say something else;
``python -m twinflow.cli._schemas`` writes them into the packages (``twinflow/cli/schemas``,
``twinflow/eval/schemas``), and a test fails while a file differs from what this produces.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

from twinflow._base._files import write_replace
from twinflow.agent import RunSpec
from twinflow.eval import Case, Dataset

__all__ = ["published_schemas", "schema_texts"]

_BASE = "https://twinflow.invalid/schemas/"


def _finish(schema: dict[str, Any], name: str, title: str) -> str:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": _BASE + name,
        **schema,
        "title": title,
    }
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def schema_texts() -> dict[str, str]:
    """Each published schema's file name (``package/schemas/name``) and text."""
    dataset = Dataset.model_json_schema()
    # A YAML dataset may leave out its name: the loader takes the file's.
    dataset["required"] = [key for key in dataset.get("required", []) if key != "name"]
    return {
        "cli/spec.schema.json": _finish(
            RunSpec.model_json_schema(), "spec.schema.json", "twinflow run spec"
        ),
        "eval/dataset.schema.json": _finish(
            dataset, "dataset.schema.json", "twinflow dataset (YAML)"
        ),
        "eval/case.schema.json": _finish(
            Case.model_json_schema(),
            "case.schema.json",
            "twinflow dataset case (one JSON Lines line)",
        ),
    }


def published_schemas() -> dict[str, Path]:
    """Where each schema is installed (``package/schemas/name`` -> file)."""
    out = {}
    for key in schema_texts():
        package, name = key.split("/")
        out[key] = Path(str(files(f"twinflow.{package}"))) / "schemas" / name
    return out


if __name__ == "__main__":
    texts = schema_texts()
    for key, path in published_schemas().items():
        path.parent.mkdir(exist_ok=True)
        write_replace(path, texts[key].encode("utf-8"))
        print(path)
