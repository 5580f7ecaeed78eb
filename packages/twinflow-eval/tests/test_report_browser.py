"""The Lab Notes HTML report, opened in a real headless Chromium: charts render, console stays quiet."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from eval_testkit import START, dataset, factory

from twinflow.eval import run_eval
from twinflow.kernel import ProcessResult, SteppingClock, run_process

# The flags a headless run on a machine with no network needs: without the background
# networking ones Chromium keeps trying to reach Google's hosts.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)


def chromium() -> str:
    """Debian's chromium, which `.ci/run` installs (or Chrome / Ubuntu's chromium-browser).

    Its absence fails the test, loudly: the report's rendering is checked, never skipped.
    """
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.fail("chromium is not installed: `apt-get install -y chromium` (.ci/run does this)")


def open_in_chromium(page: Path, profile: Path) -> ProcessResult:
    """Load ``page`` headless and return the DOM after its scripts ran (stdout) and the log."""
    return run_process(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        timeout=120,
    )


def console_lines(log: str) -> list[str]:
    """The page's console messages, as Chromium logs them on stderr."""
    return [line for line in log.splitlines() if ":CONSOLE" in line]


def test_the_report_renders_its_charts_without_console_messages(tmp_path: Path) -> None:
    """lab-notes.html draws all three charts in a real browser and logs nothing to the console."""
    run_dir = tmp_path / "run"
    run_eval(dataset(6, wrong=(1,)), factory(), run_dir, clock=SteppingClock(START))
    result = open_in_chromium(run_dir / "lab-notes.html", tmp_path / "profile")
    assert 0 == result.returncode, result.stderr[-2000:]
    assert [] == console_lines(result.stderr)
    assert 'data-charts="rendered:3"' in result.stdout


def test_the_console_check_sees_an_error_when_there_is_one(tmp_path: Path) -> None:
    """The same check on a page that logs an error does find it (so the test above can fail)."""
    page = tmp_path / "noisy.html"
    page.write_text("<html><body><script>console.error('boom')</script></body></html>")
    result = open_in_chromium(page, tmp_path / "profile")
    assert ['"boom"'] == [
        line.split("] ", 1)[1].split(",")[0] for line in console_lines(result.stderr)
    ]
