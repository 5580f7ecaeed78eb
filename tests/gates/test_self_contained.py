"""The repository stands alone: no file points a reader at documents or trackers outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

# Written in pieces so this file does not match itself.
_OUTSIDE = re.compile(
    "|".join(
        [
            r"\bDESIGN" + r"\.md\b",
            r"\bSTYLE" + r"\.md\b",
            r"\.\./" + r"shared\b",
            r"\b[Ii]ssues? " + r"#?[0-9]+",
            r"\bseed " + r"0[0-9]",
            r"\bseed " + r"records?\b",
        ]
    )
)


def outside_references(root: Path) -> list[str]:
    """``path:line: text`` for every tracked text file line that names something outside."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.split(b"\0")
    found = []
    for name in filter(None, tracked):
        path = root / name.decode()
        if path.name == "uv.lock" or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if _OUTSIDE.search(line):
                found.append(f"{name.decode()}:{number}: {line.strip()[:120]}")
    return found


def test_no_file_names_a_document_or_tracker_outside_the_repository(repo_root: Path) -> None:
    """No tracked file names an outside design or style document or a tracker's issue."""
    assert [] == outside_references(repo_root)


def test_the_check_sees_a_planted_reference(tmp_path: Path) -> None:
    """A file naming an outside design document or an issue number is found."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.md").write_text("see ../" + "shared/DESIGN" + ".md\nfine\nper issue " + "12\n")
    subprocess.run(["git", "add", "a.md"], cwd=tmp_path, check=True)
    assert ["a.md:1", "a.md:3"] == [f.split(": ", 1)[0] for f in outside_references(tmp_path)]
