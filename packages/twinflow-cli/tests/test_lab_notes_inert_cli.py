"""``lab-notes.md`` shows a model's Markdown as text, as ``lab-notes.html`` does.

A real ``twinflow eval run`` on a scripted loopback server whose answer carries a Markdown
image, a link, a reference definition, raw HTML, bare URLs and an escape meant to undo ours.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_testkit import CALC, EVAL_PROMPT, calc_spec, completion

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import run_process

ANSWER = (
    "done ![pixel](http://evil.example/p.png) [click](http://evil.example/c) "
    "<img src=x> www.evil.example \\[undo\\](x) `tick https://evil.example/t"
)
SHOWN = (
    r"done !\[pixel\](`http://evil.example/p.png`) \[click\](`http://evil.example/c`) "
    r"&lt;img src=x&gt; `www.evil.example` \\\\\[undo\\\\\](x) \`tick `https://evil.example/t`"
)
"""How the answer's cell reads in the Markdown: every bracket, backslash and backtick escaped,
HTML escaped, each URL a code span (``_json`` quotes the answer and doubles its backslashes)."""


EVAL_RUN = ("eval", "run", "dataset.yaml", "--spec", "spec.yaml", "--out", "out")


def answering(request: LoopbackRequest) -> LoopbackResponse:
    """A structured-action model that answers ANSWER at once."""
    action = {"action": "final", "answer": ANSWER}
    return LoopbackResponse.json_body(
        completion({"role": "assistant", "content": json.dumps(action)})
    )


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """The scripted model server."""
    with LoopbackServer(answering) as running:
        yield running


def test_lab_notes_markdown_shows_a_models_links_and_images_as_text(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """The answer's cell is inert Markdown: no image, link or autolink can render from it."""
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "spec.yaml").write_text(calc_spec(server.url, EVAL_PROMPT))
    (tmp_path / "dataset.yaml").write_text(
        "name: inert\ncases:\n- {id: c1, input: 'x', expected: 'y'}\n"
    )
    ran = run_process(
        [sys.executable, "-m", "twinflow.cli", *EVAL_RUN],
        cwd=tmp_path,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )
    assert 1 >= ran.returncode, ran.stderr
    notes = (tmp_path / "out" / "lab-notes.md").read_text()
    [row] = [line for line in notes.splitlines() if line.startswith("| c1@1 | failed |")]
    assert f'"{SHOWN}"' in row, row
