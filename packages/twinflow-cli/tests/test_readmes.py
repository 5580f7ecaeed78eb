"""Every code block of every README and of the site's walk-through pages runs, as a reader
would run it (the pages: Get started, Tutorials and How-to guides under ``docs/``).

- ``python`` blocks are executed, each in a fresh directory (the README's own example twice
  in one directory too, as a reader who runs it again does). A block that starts the
  embedded model (``url="embedded"``) is pointed at a scripted server instead
  (`cli_testkit.scripted_chat`): SmolLM2's answers are not the README's to promise, and the
  real model is exercised by the demo and invoice tests.
- ``yaml`` blocks are loaded with the loader of what they show: a run spec or a dataset.
- ``bash`` blocks: each ``uv run --frozen twinflow ...`` (or ``twinflow-trace ...``) line
  runs as the reader types it, through ``uv run --frozen`` (with ``--project`` naming this
  workspace, since the test's directory is outside it), in one working directory, in order,
  and must exit 0 (or the code its comment opens with: ``# exit 3: ...``); a line that is a bare ``twinflow-trace ...`` is the auditor's, run exactly
  as written in a venv that holds the twinflow-trace wheel and nothing else; the Ray line starts its Ray under ``uv run`` as a reader's does. The model
  behind ``twinflow demo`` and the invoice example's ``eval run`` is the scripted server. Not run:
  environment set-up and the whole-suite commands (``uv sync``, ``scripts/...``, ``bash
  .ci/run``, ``pip``) and ``demo --model-url`` lines, which name servers the reader runs.
- ``text`` blocks are illustrations (a trace excerpt, sample output) and are not run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from cli_testkit import scripted_chat, trace_only_venv

from twinflow.agent import RunSpec
from twinflow.eval import load_dataset
from twinflow.kernel import LoopbackServer
from twinflow.kernel._process import run_process

ROOT = Path(__file__).resolve().parents[3]
READMES = [
    ROOT / "README.md",
    *sorted(ROOT.glob("packages/*/README.md")),
    *sorted(ROOT.glob("docs/get-started/*.md")),
    *sorted(ROOT.glob("docs/tutorials/*.md")),
    *sorted(ROOT.glob("docs/how-to/*.md")),
]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NOT_RUN = ("uv sync", "scripts/", "bash .ci/run", "pip ", "python3 -m pip")
AUDITOR = "(auditor)"


def blocks(path: Path) -> list[tuple[str, str]]:
    """The (language, code) of each fenced block of a README."""
    return [(m[1], m[2]) for m in BLOCK.finditer(path.read_text(encoding="utf-8"))]


def test_every_block_has_a_language_this_test_knows() -> None:
    """A block in another language would silently go unchecked: refuse it."""
    unknown = [
        (path.name, lang)
        for path in READMES
        for lang, _ in blocks(path)
        if lang not in {"python", "bash", "yaml", "text"}
    ]
    assert [] == unknown


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_and_yaml_blocks_run(
    readme: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Python block executes; each YAML block loads as the spec or dataset it shows."""
    with LoopbackServer(scripted_chat) as server:
        for index, (lang, code) in enumerate(blocks(readme)):
            work = tmp_path / f"block{index}"
            work.mkdir()
            monkeypatch.chdir(work)
            if lang == "python":
                run_python_block(code, f"{readme.name}[{index}]", server.url)
            elif lang == "yaml" and "prompt:" in code:
                RunSpec.parse(code, f"{readme.name}[{index}]")
            elif lang == "yaml":
                (work / "dataset.yaml").write_text(code, encoding="utf-8")
                load_dataset(work / "dataset.yaml")


def run_python_block(code: str, name: str, model_url: str) -> None:
    """Execute a README's Python block as a reader would, its embedded model the scripted one."""
    if '"embedded"' in code:
        code = code.replace('url="embedded"', f'url="{model_url}", dialect="llama.cpp"')
        code = code.replace('model="embedded"', f'model="{model_url}"')
        code = code.replace('Agent("embedded"', f'Agent("{model_url}"')
        assert '"embedded"' not in code, "an embedded model the test cannot redirect"
    # gate: loads user code (a README's Python block, run as a reader would)
    exec(compile(code, name, "exec"), {"__name__": "__readme__"})


def test_the_readme_python_example_runs_twice_in_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run again in the same directory, the example writes the next trace and replays it."""
    (code,) = [code for lang, code in blocks(ROOT / "README.md") if lang == "python"]
    monkeypatch.chdir(tmp_path)
    with LoopbackServer(scripted_chat) as server:
        for _ in range(2):
            run_python_block(code, "README.md[python]", server.url)
    written = sorted(p.name for p in tmp_path.glob("hi*.jsonl"))
    assert ["hi.1.jsonl", "hi.jsonl"] == written


@pytest.mark.real_model
def test_the_readme_hello_world_runs_twice_on_the_embedded_model(tmp_path: Path) -> None:
    """The README's Python block, saved to a file and run twice with `uv run --frozen python`."""
    (code,) = [code for lang, code in blocks(ROOT / "README.md") if lang == "python"]
    (tmp_path / "hello.py").write_text(code, encoding="utf-8")
    # .ci/run exports UV where it installed uv with pip (then `uv` may not be on PATH).
    uv = shutil.which("uv") or os.environ.get("UV")
    assert uv is not None, "the README's example runs through `uv run`, as a reader's does"
    command = [uv, "run", "--project", str(ROOT), "--frozen", "python", "hello.py"]
    runs = [
        run_process(
            command,
            cwd=tmp_path,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            timeout=600,
        )
        for _ in range(2)
    ]
    assert [0, 0] == [run.returncode for run in runs], [run.stderr[-2000:] for run in runs]
    written = sorted(p.name for p in tmp_path.glob("hi*.jsonl"))
    assert ["hi.1.jsonl", "hi.jsonl"] == written


def commands(path: Path) -> list[tuple[list[str], int]]:
    """The ``twinflow`` command lines of a README's bash blocks, in order, as argv lists with the
    exit code each is documented to return (an auditor's bare ``twinflow-trace`` line starts
    with ``AUDITOR``)."""
    found = []
    for lang, code in blocks(path):
        if lang != "bash":
            continue
        # A line ending in a backslash goes on on the next one, as in the shell.
        for line in code.replace("\\\n", " ").splitlines():
            line, _, comment = line.partition("  #")
            line = line.strip()
            if not line or line.startswith(NOT_RUN):
                continue
            exit_code = re.match(r" exit (\d+)", comment)
            expected = int(exit_code[1]) if exit_code else 0
            words = shlex.split(line)
            if words[0] == "twinflow-trace":
                found.append(([AUDITOR, *words], expected))
                continue
            assert words[:3] == ["uv", "run", "--frozen"], f"a command this test cannot run: {line}"
            found.append((words[3:], expected))
    return found


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_bash_commands_run(readme: Path, tmp_path: Path) -> None:
    """Each `uv run --frozen twinflow ...` line runs, in order, and exits as documented."""
    lines = commands(readme)
    if not lines:
        return
    uv = shutil.which("uv")
    assert uv is not None, (
        "the README's commands run through `uv run`, as a reader's do: install uv"
    )
    work = tmp_path / "work"
    with LoopbackServer(scripted_chat) as server:
        for spec in sorted(ROOT.glob("examples/*/spec.yaml")):
            example = work / "examples" / spec.parent.name
            shutil.copytree(spec.parent, example)
            text = spec.read_text(encoding="utf-8")
            assert "url: embedded" in text
            text = text.replace("url: embedded", f"url: {server.url}")
            (example / "spec.yaml").write_text(text, encoding="utf-8")
        ran = []
        auditor: Path | None = None
        for words, expected in lines:
            if words[0] == AUDITOR:
                # The auditor's install: the twinflow-trace wheel alone, its console script.
                auditor = auditor or trace_only_venv(tmp_path / "auditor")
                result = run_process([str(auditor / words[1]), *words[2:]], cwd=work, timeout=600)
                assert (words, expected, "") == (words, result.returncode, result.stderr)
                ran.append(words[1])
                continue
            assert words[0] in ("twinflow", "twinflow-trace"), words
            args = words[1:]
            program = [uv, "run", "--project", str(ROOT), "--frozen", words[0]]
            if args[0] == "demo":
                if "--model-url" in args:
                    continue  # the reader's own server
                args = [*args, "--model-url", server.url, "--dialect", "llama.cpp"]
            result = run_process(
                [*program, *args],
                cwd=work,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                timeout=600,
            )
            assert (args, expected) == (args, result.returncode), result.stderr[-2000:]
            ran.append(args[0])
    assert ran, "no command of this README ran"


def test_the_readme_python_example_is_as_short_as_the_peers() -> None:
    """The README's Python agent (tool, policy, run, replay) takes at most 12 lines of code."""
    (code,) = [code for lang, code in blocks(ROOT / "README.md") if lang == "python"]
    lines = [line for line in code.splitlines() if line.strip()]
    assert len(lines) <= 12, lines
