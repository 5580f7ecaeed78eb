"""The shipped price table: which model a name is charged as, and what its tokens cost."""

from __future__ import annotations

import json

from twinflow.models._prices import _TABLE, Prices
from twinflow.models._providers import PROVIDERS


def test_the_table_names_its_source_and_date() -> None:
    """The file says where its prices come from and when they were taken."""
    table = json.loads(_TABLE.read_text("utf-8"))
    assert table["source"].startswith("genai-prices ")
    assert 10 == len(table["date"])
    assert {"anthropic", "gemini", "openai"} == set(table["providers"])


def test_a_dated_model_name_is_charged_as_its_family() -> None:
    """gpt-4o-mini-2024-07-18 on the OpenAI wire is gpt-4o-mini, not gpt-4o."""
    price = PROVIDERS.price("openai-compatible:gpt-4o-mini-2024-07-18@https://api.openai.com/v1")
    assert price is not None
    assert ("gpt-4o-mini", 0.15, 0.6) == (price.model, price.input_per_mtok, price.output_per_mtok)


def test_each_native_provider_prices_its_models() -> None:
    """An Anthropic and a Gemini model are priced on their own wires."""
    found = [
        PROVIDERS.price("anthropic:claude-sonnet-4-5@https://api.anthropic.com"),
        PROVIDERS.price("gemini:gemini-2.5-flash@https://generativelanguage.googleapis.com"),
    ]
    assert ["claude-sonnet-4-5", "gemini-2.5-flash"] == [p.model for p in found if p is not None]


def test_local_and_unknown_models_have_no_price() -> None:
    """Ollama, the embedded model and a name the table lacks: None (an unknown price)."""
    labels = [
        "ollama:qwen2.5:0.5b@http://127.0.0.1:11434",
        "openai-compatible:local@embedded",
        "openai-compatible:gpt-not-a-model@https://api.openai.com/v1",
        "anthropic:gpt-4o-mini@https://api.anthropic.com",
    ]
    assert [None] * 4 == [PROVIDERS.price(label) for label in labels]


def test_a_cost_is_rounded_to_ten_places() -> None:
    """10 input and 5 output tokens at 0.15 and 0.6 a million: 4.5e-06 dollars, exactly."""
    table = Prices(
        {
            "source": "test",
            "date": "2026-01-01",
            "providers": {
                "openai": [{"id": "m", "match": {"equals": "m"}, "input": 0.15, "output": 0.6}]
            },
        }
    )
    price = table.find("openai-compatible", "m")
    assert price is not None
    assert (4.5e-06, "test, 2026-01-01") == (price.cost(10, 5), price.table)


def test_a_name_asked_again_gets_the_first_answer() -> None:
    """Each reply of a run asks the same name: the answer, priced or not, is the scan's."""
    table = Prices(
        {
            "source": "test",
            "date": "2026-01-01",
            "providers": {
                "openai": [{"id": "m", "match": {"equals": "m"}, "input": 0.15, "output": 0.6}]
            },
        }
    )
    for _ in range(2):
        assert table._scan("openai-compatible", "m") == table.find("openai-compatible", "m")
        assert table.find("openai-compatible", "stub") is None
    for i in range(300):  # past the memory's bound, which then starts again
        assert table.find("openai-compatible", f"x{i}") is None
    assert table.find("openai-compatible", "m") is not None
