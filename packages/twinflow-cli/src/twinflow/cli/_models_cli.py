"""``twinflow models``: the model providers a spec's ``model:`` string may name, and what each
supports, read from the models package's one provider table (`twinflow.models._providers`).
"""

from __future__ import annotations

import argparse
from typing import Any

from twinflow.cli._output import EXIT_OK, Command, Output
from twinflow.models._providers import EMBEDDED, PROVIDERS, Provider

__all__ = ["COMMANDS"]

_EPILOG = (
    "A spec names a model as one string, `model: PROVIDER:MODEL` (the provider's default URL "
    "and key variable), `PROVIDER:MODEL@URL` (another server), `embedded` (the bundled SmolLM2) "
    "or a server's http(s) URL; the long form (`kind`, `url`, `name`, ...) stays. A key is "
    "read from the variable named here, never from the spec."
)


def _configure(p: argparse.ArgumentParser) -> None:
    p.epilog = _EPILOG


def _row(row: Provider) -> dict[str, Any]:
    return {
        "provider": row.name,
        "wire": row.wire,
        "url": row.url,
        "key_env": row.key_env,
        "mode": row.mode,
        "native_tools": row.native_tools,
        "structured_output": row.structured,
        "streaming": row.streaming,
        "example": f"{row.name}:MODEL" + ("" if row.url else "@http://127.0.0.1:8000"),
    }


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _handle(args: argparse.Namespace, out: Output) -> int:
    rows = [_row(row) for row in PROVIDERS.values()]
    for row in rows:
        out.line(f"{row['provider']}  ({row['wire']} wire)  e.g. model: {row['example']}")
        out.line(
            f"  url {row['url'] or '(give one: @URL)'}; key {row['key_env'] or '(none)'}; "
            f"default mode {row['mode']}"
        )
        out.line(
            f"  native tools {_yes(row['native_tools'])}; streaming {_yes(row['streaming'])}; "
            f"structured output: {row['structured_output']}"
        )
    out.line(f"{EMBEDDED}: the bundled SmolLM2 model, started for the run (no key)")
    out.document({"ok": True, "providers": rows, "embedded": EMBEDDED})
    return EXIT_OK


COMMANDS: dict[str, Command] = {"models": (_configure, _handle)}
"""The command this module defines, as `twinflow.cli._main.COMMAND_TABLE` looks it up."""
