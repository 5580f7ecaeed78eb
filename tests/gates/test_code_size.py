"""Files and functions under ``packages/*/src`` stay short enough to read whole.

At most 5 files over 600 lines and at most 20 functions (methods and nested ones included,
decorators and docstrings counted) over 60 lines, in all packages together.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 600
MAX_LONG_FILES = 5
MAX_FUNCTION_LINES = 60
MAX_LONG_FUNCTIONS = 20


def _sources(root: Path) -> list[Path]:
    return sorted(root.glob("packages/*/src/**/*.py"))


def long_files(root: Path) -> dict[str, int]:
    """Each source file over the line limit, with its number of lines."""
    lengths = {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in _sources(root)
    }
    return {name: lines for name, lines in lengths.items() if lines > MAX_FILE_LINES}


def long_functions(root: Path) -> dict[str, int]:
    """Each function over the line limit, as ``file:line name``, with its number of lines."""
    found: dict[str, int] = {}
    for path in _sources(root):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - first + 1
                if lines > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(root)}:{node.lineno} {node.name}"] = lines
    return found


def test_at_most_5_files_over_600_lines() -> None:
    """No more than 5 source files are over 600 lines."""
    found = long_files(ROOT)
    assert len(found) <= MAX_LONG_FILES, found


def test_at_most_20_functions_over_60_lines() -> None:
    """No more than 20 functions in the sources are over 60 lines."""
    found = long_functions(ROOT)
    assert len(found) <= MAX_LONG_FUNCTIONS, found


def test_the_counters_measure_lines(tmp_path: Path) -> None:
    """A 601-line file and a 61-line decorated function are counted; 600 and 60 are not."""
    src = tmp_path / "packages" / "p" / "src"
    src.mkdir(parents=True)
    body = "".join(f"    x = {i}\n" for i in range(58))
    (src / "long.py").write_text(
        f"@staticmethod\ndef long():\n{body}    return x\n" + "\n" * 540, encoding="utf-8"
    )
    (src / "short.py").write_text(
        f"def short():\n{body}    return x\n" + "\n" * 540, encoding="utf-8"
    )
    expected = ({"packages/p/src/long.py": 601}, {"packages/p/src/long.py:2 long": 61})
    assert expected == (long_files(tmp_path), long_functions(tmp_path))
