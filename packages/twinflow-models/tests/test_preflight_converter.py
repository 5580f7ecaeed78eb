"""Pre-flight against llama-cpp-python's real converter: every finding, every rewrite, the command.

The local-model leaf decides with keyword rules plus an injected converter; these tests hold its
keyword rules to the converter the embedded server runs: a keyword reported unenforced really
leaves the grammar unchanged, a constraint not reported really changes it, and every schema
pre-flight sends converts to a grammar that llama.cpp's parser accepts.
"""

from __future__ import annotations

import copy
import datetime
import enum
import importlib
import json
import sys
import uuid
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import AnyUrl, BaseModel, Field, HttpUrl, IPvAnyAddress, TypeAdapter

from twinflow.cli._main import main
from twinflow.models._grammar import LlamaCppGrammarCheck, llama_cpp_grammar_check
from twinflow.models._preflight import GrammarVerdict, SchemaFinding, preflight

CONVERTER: Any = importlib.import_module("llama_cpp.llama_grammar")


def gbnf(schema: dict[str, Any]) -> str:
    """The grammar the embedded server would build from `schema`, or the converter's refusal."""
    try:
        return str(CONVERTER.json_schema_to_gbnf(json.dumps(schema)))
    except Exception as exc:  # the server falls back on any exception: a different outcome
        return f"refused: {type(exc).__name__}: {exc}"


class Color(enum.Enum):
    """An enum."""

    RED = "red"
    BLUE = "blue"


class Node(BaseModel):
    """A recursive model."""

    name: str
    children: list[Node] = []


class Line(BaseModel):
    """An item of a bounded list."""

    sku: str = Field(pattern=r"^[A-Z]{2}-\d{3}$")
    qty: int = Field(ge=1, le=99)


class Order(BaseModel):
    """A bounded list of objects."""

    lines: list[Line] = Field(min_length=2, max_length=5)


class Cat(BaseModel):
    """A tagged branch."""

    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    """Another tagged branch."""

    kind: Literal["dog"]
    name: str = Field(min_length=1, max_length=12)


class Everything(BaseModel):
    """Many keywords at once."""

    color: Color
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    when: datetime.date
    at: datetime.datetime
    url: HttpUrl
    ratio: float = Field(gt=0, lt=1)
    step: int = Field(multiple_of=5)
    tags: set[str] = set()
    pair: tuple[int, str] = (0, "")
    scores: dict[str, int] = {}
    note: str | None = None
    code: str = Field(pattern=r"^(?:AB|CD)$")
    domain: str = Field(pattern=r"[a-z]+\.com")


class Formats(BaseModel):
    """Every string format pre-flight names, and the literal shapes."""

    site: AnyUrl
    home: HttpUrl
    v4: IPv4Address
    v6: IPv6Address
    ip: IPvAnyAddress
    ident: uuid.UUID
    at: datetime.time
    span: datetime.timedelta
    size: Literal["S", "M", "L"]
    mixed: Literal["none", 0] | None = None
    quoted: Literal['say "hi"', "a\\b"] = "a\\b"


MODELS: list[Any] = [
    Formats,
    {
        "type": "object",
        "properties": {
            "mail": {"type": "string", "format": "email"},
            "host": {"type": "string", "format": "hostname"},
            "odd": {"type": "string", "format": "x-unknown"},
        },
    },
    Node,
    Order,
    Everything,
    TypeAdapter(list[Annotated[str, Field(pattern=r"\d+")]]),
    {"type": "object", "properties": {"x": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}},
    {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
    {"type": "string", "pattern": r"^(?=a)\w+$"},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a{b$"}}},
]

# Keywords that annotate, or that the converter's defaults already imply where they appear.
_NOT_CONSTRAINTS = frozenset(
    {"title", "description", "default", "examples", "$defs", "discriminator", "required"}
)


def _at(schema: dict[str, Any], pointer: str) -> tuple[dict[str, Any], str]:
    """The parent object and key of a JSON pointer."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    node: Any = schema
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, parts[-1]


def _without(schema: dict[str, Any], pointer: str) -> dict[str, Any]:
    copied = copy.deepcopy(schema)
    parent, key = _at(copied, pointer)
    del parent[key]
    return copied


def _keyword_pointers(node: Any, pointer: str = "") -> list[str]:
    """Pointers to every keyword of every schema object (annotations and containers left out)."""
    found: list[str] = []
    if not isinstance(node, dict):
        return found
    for key, value in node.items():
        here = f"{pointer}/{key}"
        if key in ("properties", "$defs"):
            for name, sub in value.items():
                found += _keyword_pointers(sub, f"{here}/{name}")
            continue
        if key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            found += [
                p for i, sub in enumerate(value) for p in _keyword_pointers(sub, f"{here}/{i}")
            ]
        if key in ("items", "additionalProperties") and isinstance(value, dict):
            found += _keyword_pointers(value, here)
        if key not in _NOT_CONSTRAINTS:
            found.append(here)
    return found


@pytest.mark.parametrize("source", MODELS, ids=lambda m: getattr(m, "__name__", type(m).__name__))
def test_every_sent_schema_converts_and_compiles(source: Any) -> None:
    """What pre-flight sends never makes the server fall back silently or crash on its grammar."""
    report = preflight(source, "llama-cpp-python", grammar_check=LlamaCppGrammarCheck())
    assert report.grammar is not None
    assert "enforced" == report.grammar.status


@pytest.mark.parametrize("source", MODELS, ids=lambda m: getattr(m, "__name__", type(m).__name__))
def test_every_finding_is_a_keyword_the_converter_drops(source: Any) -> None:
    """Removing a reported keyword leaves the converter's grammar unchanged (no false alarm)."""
    report = preflight(source, "llama-cpp-python", grammar_check=LlamaCppGrammarCheck())
    sent = report.sent_schema
    for finding in report.findings:
        if _removed_by_rewrite(finding, report.rewrites):
            continue
        if finding.keyword == "oneOf":
            # Not a dropped keyword but a weaker one: the grammar is the anyOf grammar.
            as_any = copy.deepcopy(sent)
            node, _ = _at(as_any, finding.pointer)
            node["anyOf"] = node.pop("oneOf")
            assert gbnf(as_any) == gbnf(sent), finding
            continue
        assert gbnf(_without(sent, finding.pointer)) == gbnf(sent), finding


def _removed_by_rewrite(finding: SchemaFinding, rewrites: Any) -> bool:
    return any(r.pointer == finding.pointer and r.after is None for r in rewrites)


@pytest.mark.parametrize("source", MODELS, ids=lambda m: getattr(m, "__name__", type(m).__name__))
def test_every_constraint_not_reported_changes_the_grammar(source: Any) -> None:
    """A constraint pre-flight calls enforced really is in the grammar (no false "enforced")."""
    report = preflight(source, "llama-cpp-python", grammar_check=LlamaCppGrammarCheck())
    sent = report.sent_schema
    reported = {f.pointer for f in report.findings}
    silent: list[str] = []
    for pointer in _keyword_pointers(sent):
        if pointer in reported or _implied(sent, pointer):
            continue
        if gbnf(_without(sent, pointer)) == gbnf(sent):
            silent.append(pointer)
    assert [] == silent


def _implied(schema: dict[str, Any], pointer: str) -> bool:
    """The keyword adds nothing the rest of its object (or the converter's default) says."""
    parent, key = _at(schema, pointer)
    value = parent[key]
    if key == "type":
        shaped = ("properties", "items", "prefixItems", "enum", "const", "pattern", "format")
        return any(k in parent for k in shaped) or value in ("object", "string", "integer")
    if key == "additionalProperties":
        return value is False
    if key in ("minItems", "minLength"):
        return value == 0 or ("prefixItems" in parent and value == len(parent["prefixItems"]))
    if key == "maxItems":
        return "prefixItems" in parent and value == len(parent["prefixItems"])
    if key == "items":
        return value is False
    return False


def test_the_converter_rejects_what_the_seam_reports_as_fallback() -> None:
    """The real converter's refusal (a root $ref over recursion) is reported as a fallback."""
    verdict = LlamaCppGrammarCheck()(Node.model_json_schema())
    assert ("fallback", "KeyError") == (verdict.status, verdict.reason.split(":")[0])


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": r"^\d{3}$"},
        {"type": "string", "maxLength": 2083},
    ],
)
def test_the_uncompilable_grammars_of_the_issue_are_detected(schema: dict[str, Any]) -> None:
    """The grammars that crashed the server are seen as uncompilable, and pre-flight fixes them."""
    check = LlamaCppGrammarCheck()
    expected = ("uncompilable", "enforced")
    fixed = preflight(schema, "llama-cpp-python", grammar_check=check).grammar
    assert expected == (check(schema).status, fixed.status if fixed else None)


def test_llama_cpp_grammar_check_is_one_per_process() -> None:
    """The CLI builds the converter-backed check once."""
    assert llama_cpp_grammar_check() is llama_cpp_grammar_check()
    assert isinstance(llama_cpp_grammar_check(), LlamaCppGrammarCheck)


MODULE = """
from pydantic import BaseModel, Field


class Node(BaseModel):
    name: str
    children: list["Node"] = []


class Price(BaseModel):
    amount: float = Field(ge=0)


NOT_A_MODEL = 3
"""


@pytest.fixture
def models_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of models importable as `pf_models`."""
    (tmp_path / "pf_models.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield "pf_models"
    sys.modules.pop("pf_models", None)


def test_the_command_prints_the_report_and_exits_0_when_enforced(
    models_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`twinflow preflight MODULE:Model` names the rewrite and the converter's verdict."""
    code = main(["preflight", f"{models_module}:Node"])
    printed = capsys.readouterr().out
    assert 0 == code
    assert "converter: enforced" in printed
    assert "rewrite /$ref" in printed


def test_the_command_exits_1_and_names_what_is_not_enforced(
    models_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model with unenforced parts exits 1, each part named in the --json document."""
    code = main(["preflight", "--json", f"{models_module}:Price"])
    document = json.loads(capsys.readouterr().out)
    expected = (1, False, ["/properties/amount/minimum"])
    assert expected == (code, document["ok"], [f["pointer"] for f in document["findings"]])


def test_the_command_refuses_a_target_that_is_not_a_model(
    models_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pointing at something else is a usage error (exit 2) with a one-line reason."""
    code = main(["preflight", f"{models_module}:NOT_A_MODEL"])
    assert 2 == code
    assert "not a pydantic model class" in capsys.readouterr().err


def test_grammar_verdict_type_is_the_leafs() -> None:
    """The CLI's check answers with the leaf's own verdict type."""
    assert isinstance(LlamaCppGrammarCheck()({"type": "integer"}), GrammarVerdict)
