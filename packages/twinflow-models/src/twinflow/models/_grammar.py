"""llama-cpp-python's own schema-to-grammar converter, run in-process as pre-flight's `GrammarCheck`.

The embedded server turns `response_format: {"type": "json_object", "schema": S}` into a grammar
with `llama_grammar.LlamaGrammar.from_json_schema(json.dumps(S))`, which is
`json_schema_to_gbnf`; when that raises, the server silently decodes generic JSON instead
(`llama_chat_format._grammar_for_json_schema`). `LlamaGrammar.from_string` only stores the
text: the grammar is parsed when a sampler is built from it, and a grammar that does not parse
takes the server down. So the check does both steps the server does, the conversion and the
parse (`llama_sampler_init_grammar`, which needs no model for parsing), and reports which
happened. For a string schema it also searches the grammar for a way to close the string early
(`string_exit`): a pattern whose grammar has one is not enforced, whatever it parses to.
llama-cpp-python is only in the `embedded` extra: without it there is no check, and
pre-flight uses its keyword-level rules alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from functools import cache
from typing import Any

from pydantic import JsonValue

from twinflow.models._errors import InputRefused
from twinflow.models._grammar_string import string_exit
from twinflow.models._preflight import GrammarCheck, GrammarVerdict


class LlamaCppGrammarCheck:
    """llama-cpp-python's converter and grammar parser, as a `GrammarCheck`."""

    def __init__(self) -> None:
        """Import llama-cpp-python (raises `ImportError` when it is not installed)."""
        self._llama: Any = importlib.import_module("llama_cpp")
        self._grammar: Any = importlib.import_module("llama_cpp.llama_grammar")
        self._llama.llama_backend_init()
        self._seen: dict[str, GrammarVerdict] = {}

    def __call__(self, schema: dict[str, JsonValue], /) -> GrammarVerdict:
        """Convert `schema` as the server does and parse the grammar as its sampler would."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._seen:
            self._seen[key] = self._verdict(schema)
        return self._seen[key]

    def _verdict(self, schema: dict[str, JsonValue]) -> GrammarVerdict:
        try:
            grammar = self._grammar.json_schema_to_gbnf(json.dumps(schema))
        except Exception as exc:  # the server catches every exception here, and so must we
            return GrammarVerdict(status="fallback", reason=f"{type(exc).__name__}: {exc}"[:300])
        text = str(grammar).encode("utf-8")
        # The C parser prints a refused grammar on stderr: noise, but only for a grammar that
        # pre-flight's own rewrites did not already make readable.
        sampler = self._llama.llama_sampler_init_grammar(None, text, b"root")
        if not sampler:
            return GrammarVerdict(
                status="uncompilable",
                reason=f"llama.cpp's grammar parser refuses the {len(text)}-byte grammar",
                grammar_bytes=len(text),
            )
        self._llama.llama_sampler_free(sampler)
        if schema.get("type") != "string":
            return GrammarVerdict(status="enforced", grammar_bytes=len(text))
        try:
            exit_text = string_exit(str(grammar))
        except InputRefused as exc:
            # A grammar shape the search does not read: not shown to keep the string closed.
            reason = f"the string check cannot read this grammar ({exc})"
            return GrammarVerdict(status="enforced", grammar_bytes=len(text), reason=reason)
        return GrammarVerdict(
            status="enforced", grammar_bytes=len(text), string_exit=exit_text or ""
        )


@cache
def llama_cpp_grammar_check() -> GrammarCheck | None:
    """The converter-backed check (one per process), or None without llama-cpp-python."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    return LlamaCppGrammarCheck()
