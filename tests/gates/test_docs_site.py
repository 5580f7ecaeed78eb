"""The documentation site: built strictly, opened in headless Chromium, searched.

The site is built as `scripts/check` builds it (``mkdocs build --strict``), served from a
loopback server as a reader's browser is served it (Material's search fetches its index over
HTTP, which a ``file://`` page cannot), and three pages and the search index are loaded in
Chromium: the home page, a tutorial and the Python API page. The search box itself is driven
through the DevTools protocol on a pipe: a query in the page's address, then the result list is
awaited in the page (a DOM observer, no timing window) and read. The generated files it reads (the decision records' index, ``BENCHMARKS.md``) are held
equal to what their generators write from their sources.
"""

from __future__ import annotations

import fcntl
import json
import mimetypes
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process

ROOT = Path(__file__).resolve().parents[2]
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Lets the pages' scripts run before the DOM is dumped.
    "--virtual-time-budget=20000",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built with ``mkdocs build --strict`` as `scripts/check` builds it."""
    out = tmp_path_factory.mktemp("site")
    built = run_process(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        timeout=600,
    )
    assert 0 == built.returncode, built.stderr
    return out


def serve(site: Path) -> Callable[[LoopbackRequest], LoopbackResponse]:
    """A handler answering GET requests with the site's files."""

    def handler(request: LoopbackRequest) -> LoopbackResponse:
        path = unquote(urlsplit(request.path).path).lstrip("/")
        target = (site / path).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_relative_to(site.resolve()) or not target.is_file():
            return LoopbackResponse(status=404, body=b"not found")
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return LoopbackResponse(headers=(("Content-Type", kind),), body=target.read_bytes())

    return handler


def chromium() -> str:
    """Debian's chromium, which `.ci/run` installs; its absence fails the test, loudly."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.fail("chromium is not installed: `apt-get install -y chromium` (.ci/run does this)")


def dom(url: str, profile: Path) -> ProcessResult:
    """The DOM of ``url`` after its scripts ran, as headless Chromium dumps it."""
    return run_process(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url], timeout=180
    )


def test_home_tutorial_and_api_pages_render_and_search_answers(site: Path, tmp_path: Path) -> None:
    """Each page renders its content in Chromium, and the browser is served the search index."""
    pages = {
        "": "Where to start",
        "tutorials/publish/": '<h1 id="publish-a-run-an-auditor-checks">',
        "reference/api/": 'id="twinflow.agent.Agent"',
        "search/search_index.json": '"location":"tutorials/publish/"',
    }
    with LoopbackServer(serve(site)) as server:
        found = {
            path: marker in dom(f"{server.url}/{path}", tmp_path / "profile").stdout
            for path, marker in pages.items()
        }
    assert dict.fromkeys(pages, True) == found


def _above_four(fd: int) -> int:
    """``fd`` moved above 4, so duplicating the pipes onto 3 and 4 cannot clobber either."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 5)
    os.close(fd)
    return moved


class DevTools:
    """Headless Chromium driven through the DevTools protocol on a pipe (fds 3 and 4)."""

    def __init__(self, profile: Path) -> None:
        into_browser, self._writer = (_above_four(fd) for fd in os.pipe())
        self._reader, from_browser = (_above_four(fd) for fd in os.pipe())
        arguments = [chromium(), *FLAGS[:-1], f"--user-data-dir={profile}"]
        arguments += ["--remote-debugging-pipe", "about:blank"]
        self._pid = os.posix_spawn(
            arguments[0],
            arguments,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, into_browser, 3),
                (os.POSIX_SPAWN_DUP2, from_browser, 4),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
        )
        os.close(into_browser)
        os.close(from_browser)
        # A browser that never answers fails the test instead of hanging it: killed, its pipe ends.
        self._watchdog = threading.Timer(300, os.kill, (self._pid, signal.SIGKILL))
        self._watchdog.start()
        self._sent = 0
        self._pending = b""

    def call(self, method: str, session: str | None = None, **params: object) -> dict[str, object]:
        """Send one command and return its result, skipping the events sent meanwhile."""
        self._sent += 1
        message: dict[str, object] = {"id": self._sent, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._writer, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._pending:
                chunk = os.read(self._reader, 65536)
                assert chunk, f"chromium closed its DevTools pipe during {method}"
                self._pending += chunk
            line, _, self._pending = self._pending.partition(b"\0")
            reply = json.loads(line)
            if reply.get("id") == self._sent:
                assert "error" not in reply, reply
                result: dict[str, object] = reply["result"]
                return result

    def close(self) -> None:
        """Close the browser and the pipes."""
        self._watchdog.cancel()
        os.kill(self._pid, signal.SIGKILL)
        os.waitpid(self._pid, 0)
        os.close(self._writer)
        os.close(self._reader)


# Resolves with the result list once the worker has filled it: the page's own observer waits.
RESULTS = """new Promise(resolve => {
  const read = () => {
    const items = [...document.querySelectorAll(".md-search-result__item a")];
    const none = /^No matching/.test(document.querySelector(".md-search-result__meta")?.textContent);
    if (items.length || none) resolve(JSON.stringify(items.map(a => new URL(a.href).pathname)));
    return items.length > 0 || none;
  };
  if (!read()) new MutationObserver(read).observe(document, {subtree: true, childList: true});
})"""


def test_the_search_box_finds_the_page_that_answers(site: Path, tmp_path: Path) -> None:
    """A query typed as a reader shares it (``?q=``) lists the publishing tutorial in Chromium."""
    with LoopbackServer(serve(site)) as server:
        browser = DevTools(tmp_path / "profile")
        try:
            target = browser.call("Target.createTarget", url="about:blank")["targetId"]
            session = browser.call("Target.attachToTarget", targetId=target, flatten=True)
            page = str(session["sessionId"])
            browser.call("Page.navigate", page, url=f"{server.url}/?q=auditor+checks")
            found = browser.call("Runtime.evaluate", page, expression=RESULTS, awaitPromise=True)
        finally:
            browser.close()
    paths = json.loads(found["result"]["value"])  # type: ignore[index]  # DevTools JSON
    assert "/tutorials/publish/" in paths, paths


def test_the_search_index_holds_every_section(site: Path) -> None:
    """The built search index has entries for the tutorials, concepts and reference pages."""
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    sections = {doc["location"].split("/", 1)[0] for doc in index["docs"]}
    expected = {"get-started", "tutorials", "how-to", "concepts", "reference", "adr"}
    assert expected == expected & sections


def test_the_reference_pages_are_generated_from_their_sources(site: Path) -> None:
    """Every command, every spec key and every public name of the agent is on its page."""
    from twinflow.cli._main import COMMAND_TABLE

    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    schema = (site / "reference" / "schema" / "index.html").read_text(encoding="utf-8")
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    missing = [name for name in COMMAND_TABLE if f"usage: twinflow {name}" not in cli]
    missing += [key for key in ("repeat_safe", "api_key_env", "mcp_servers") if key not in schema]
    missing += [
        name for name in ("Agent", "Policy", "RunSpec") if f"twinflow.agent.{name}" not in api
    ]
    assert [] == missing


def test_the_generated_files_match_their_sources() -> None:
    """docs/adr/index.md and BENCHMARKS.md are what their generators write today."""
    sys.path[:0] = [str(ROOT / "docs" / "_hooks"), str(ROOT / "benchmarks")]
    try:
        import _report  # type: ignore[import-not-found]  # benchmarks/ is put on sys.path above
        import generated  # type: ignore[import-not-found]  # docs/_hooks/ is put on sys.path above
    finally:
        del sys.path[:2]
    log = (ROOT / "benchmarks" / "logs" / "floors.log").read_text(encoding="utf-8")
    expected = (generated.adr_index(), _report.render(log))
    actual = (
        (ROOT / "docs" / "adr" / "index.md").read_text(),
        (ROOT / "BENCHMARKS.md").read_text(),
    )
    assert expected == actual
