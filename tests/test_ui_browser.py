"""The page of ``serve --ui`` in a real browser: headless Chromium against a replayed run.

The tests need Chromium. When it is missing and the tests run as root with apt, the session
installs the operating system's package (``apt-get install -y chromium``); otherwise they skip
and say why (with ``RXTOOLCALLS_BROWSER_TESTS=require``, as CI sets it, they fail instead).
``CHROMIUM`` names another binary (a Chrome, say) to use instead.

Chromium runs with ``--dump-dom``: it keeps virtual time still while the page's event stream is
open, so the DOM it prints is the page after the run ended. The page writes event counts into
the DOM (``data-seen-at``, ``data-total-events``…), so the order in which things appeared can be
read from that final DOM.

``python -m tests.test_ui_browser docs/ui.png`` draws the manual's screenshot again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import rxtoolcalls as rt
from rxtoolcalls._serve_ui import page as the_page
from rxtoolcalls.ui import ag_ui_sse, to_ag_ui
from tests.test_agent_early import Gated, Tool, asking, cut_after_first
from tests.test_agent_wires import prose, said
from tests.test_ui import fetch, notes_of, run

pytestmark = [
    # One worker runs them all: one install, one browser at a time.
    pytest.mark.xdist_group("chromium"),
    # An install from the operating system's packages may take minutes, once.
    pytest.mark.timeout(900),
]

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_SECONDS = 600
PACE = "0.02"  # serve --delay: seconds between two chunks
DEMO_CALLS = ("GetWeatherArgs", "get_stock_price")


# -- Chromium ----------------------------------------------------------------------------------


def _find_chromium() -> str | None:
    given = os.environ.get("CHROMIUM")
    if given:
        return shutil.which(given)
    return next((found for found in map(shutil.which, NAMES) if found), None)


def _install_chromium() -> str:
    """Install Chromium with apt; why it was not, if it could not be."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "Chromium is not installed, and installing it needs root"
    if shutil.which("apt-get") is None:
        return "Chromium is not installed, and there is no apt-get to install it with"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        try:
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=INSTALL_SECONDS
            )
        except subprocess.TimeoutExpired:
            return f"{' '.join(command)} took more than {INSTALL_SECONDS} s"
        if done.returncode != 0:
            tail = " ".join(done.stderr.split()[-30:])
            return f"{' '.join(command)} failed ({done.returncode}): {tail}"
    return "apt-get installed chromium, but no Chromium binary is on PATH"


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium binary; installed with apt if missing and possible, else a skip."""
    found = _find_chromium()
    if found is None:
        why = _install_chromium()
        found = _find_chromium()
        if found is None:
            if os.environ.get("RXTOOLCALLS_BROWSER_TESTS") == "require":
                pytest.fail(f"the browser tests are required, but: {why}")
            pytest.skip(f"no browser test: {why}")
    return found


def _browser(chromium: str, *flags: str, url: str) -> str:
    """Run headless Chromium on ``url`` with ``flags``; its stdout."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                chromium,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                # Virtual time stands still while the event stream is open, then runs out fast.
                "--virtual-time-budget=20000",
                *flags,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dump_dom(chromium: str, url: str) -> Page:
    return Page.parse(_browser(chromium, "--dump-dom", url=url))


def screenshot(chromium: str, url: str, path: Path, size: tuple[int, int] = (800, 840)) -> None:
    _browser(
        chromium,
        "--hide-scrollbars",
        f"--window-size={size[0]},{size[1]}",
        f"--screenshot={path.resolve()}",
        url=url,
    )


# -- serve --ui ----------------------------------------------------------------------------------


@contextmanager
def serving(*arguments: str) -> Iterator[str]:
    """``rxtoolcalls serve --ui ARGUMENTS`` on a free port: the page's address."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rxtoolcalls",
            "serve",
            "--ui",
            "--port",
            "0",
            "--delay",
            PACE,
            *arguments,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        page = process.stdout.readline().strip()
        assert first.startswith("serving"), first + process.communicate(timeout=10)[1]
        assert page.startswith("the page: http://127.0.0.1:"), page
        yield page.rsplit(" ", 1)[-1]
    finally:
        process.terminate()
        process.communicate(timeout=10)


@contextmanager
def serving_events(events: list[dict[str, Any]]) -> Iterator[str]:
    """The page at /ui, and ``events`` at /ui/events as one SSE body: the page's address."""
    body = b"".join(ag_ui_sse(event) for event in events)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/ui":
                kind, data = "text/html; charset=utf-8", the_page()
            elif self.path == "/ui/events":
                kind, data = "text/event-stream", body
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ui"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def early_run(fail: bool) -> list[dict[str, Any]]:
    """An agent run's AG-UI events whose search tool starts early; ``fail``: its turn is cut."""
    first = cut_after_first("chat") if fail else asking("chat")
    script = Gated(first, prose("chat"), gates={})
    loop = rt.agent_loop(
        script,
        {"search": Tool("3 hits"), "fetch": fetch},
        said("chat"),
        early={"search"},
        retries=0,
        fields=True,
        text=True,
    )
    events, error = notes_of(loop)
    assert (error is None) is not fail
    return run(events, to_ag_ui(thread_id="t", run_id="r"), error)


def position(events: list[dict[str, Any]], kind: str, call: str = "call_s") -> int:
    """The count the page holds once the first event ``kind`` of ``call`` arrived."""
    for at, event in enumerate(events, 1):
        value = event.get("value", {})
        if kind in (event["type"], event.get("name")) and call in (
            event.get("toolCallId"),
            value.get("toolCallId"),
        ):
            return at
    raise AssertionError(f"no {kind} for {call}")


def cut_demo(directory: Path, chunks: int = 9) -> Path:
    """The demo recording's first ``chunks`` chunks: a stream without its end."""
    lines = rt.sources.demo_path().read_text(encoding="utf-8").splitlines()
    path = directory / "cut.jsonl"
    path.write_text("\n".join(lines[:chunks]) + "\n", encoding="utf-8")
    return path


def answer(directory: Path) -> Path:
    """A prose turn, the answer after the tools'."""
    bundled = Path(rt.__file__).parent / "data" / "ui" / "demo-answer.jsonl"
    return Path(shutil.copy(bundled, directory / "answer.jsonl"))


# -- reading the DOM ---------------------------------------------------------------------------


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def all_text(self) -> str:
        return "".join(self.text) + "".join(child.all_text() for child in self.children)

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, tag: str, **attrs: str) -> list[Node]:
        wanted = {key.replace("_", "-"): value for key, value in attrs.items()}
        return [
            node
            for node in self.walk()
            if node.tag == tag and all(node.attrs.get(k) == v for k, v in wanted.items())
        ]

    def number(self, name: str) -> int:
        return int(self.attrs[name])


_VOID = frozenset({"meta", "link", "br", "hr", "img", "input", "source", "wbr"})


class Page(HTMLParser):
    """The dumped DOM as a small tree (the page's own markup is regular)."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Node("#document", {})
        self.open = [self.root]

    @classmethod
    def parse(cls, html: str) -> Page:
        page = cls()
        page.feed(html)
        page.close()
        return page

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {key: value or "" for key, value in attrs})
        self.open[-1].children.append(node)
        if tag not in _VOID:
            self.open.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.open) - 1, 0, -1):
            if self.open[depth].tag == tag:
                del self.open[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.open[-1].text.append(data)

    @property
    def body(self) -> Node:
        [body] = self.root.find("body")
        return body

    def calls(self, name: str | None = None) -> list[Node]:
        cards = [node for node in self.root.find("article") if "data-call-id" in node.attrs]
        return [card for card in cards if name is None or card.attrs["data-name"] == name]

    def alert(self) -> Node:
        [alert] = self.root.find("p", id="error")
        return alert


# -- the tests ---------------------------------------------------------------------------------


def test_the_page_shows_each_call_as_it_streams_then_its_result_and_the_answer(
    chromium: str,
) -> None:
    with serving("--demo") as url:
        page = dump_dom(chromium, url)
    body = page.body
    assert body.attrs["data-run"] == "done"
    total = body.number("data-total-events")
    assert total == body.number("data-events")
    for name in DEMO_CALLS:
        [card] = page.calls(name)
        seen, ended = card.number("data-seen-at"), card.number("data-ended-at")
        # The name showed before the call's input was complete, long before the last event.
        assert seen < ended < card.number("data-result-at") < total
        assert card.attrs["data-state"] == "done"
        assert "✓ done" in card.all_text()
        fields = card.find("dd")
        assert fields, "no field shown"
        # Each field showed as it completed: before the call's input was.
        assert all(seen < dd.number("data-seen-at") < ended for dd in fields)
        [result] = card.find("output")
        assert f'"tool": "{name}"' in result.all_text()
    weather = page.calls("GetWeatherArgs")[0]
    assert [
        (dt.all_text(), dd.all_text())
        for dt, dd in zip(weather.find("dt"), weather.find("dd"), strict=True)
    ] == [
        ("city", "Edinburgh"),
        ("country", "GB"),
        ("units", "c"),
    ]
    [final] = page.root.find("article", data_final="true")
    assert final.all_text().startswith("Final answer")
    assert "echo stubs" in final.all_text()
    assert "hidden" in page.alert().attrs


def test_a_cut_recording_shows_the_error_and_no_result(chromium: str, tmp_path: Path) -> None:
    with serving(str(cut_demo(tmp_path))) as url:
        page = dump_dom(chromium, url)
    body = page.body
    assert body.attrs["data-run"] == "error"
    total = body.number("data-total-events")
    alert = page.alert()
    assert "hidden" not in alert.attrs
    assert "StreamInterruptedError" in alert.all_text()
    cards = page.calls()
    # Three attempts (two retries), each named GetWeatherArgs before it was cut.
    assert [card.attrs["data-name"] for card in cards] == ["GetWeatherArgs"] * 3
    for card in cards:
        assert card.number("data-seen-at") < total
        assert card.attrs["data-state"] in ("retracted", "failed")
        assert "data-ended-at" not in card.attrs
        assert not card.find("output"), "a result shown for a call whose turn failed"
        assert "done" not in card.all_text()
    assert cards[-1].attrs["data-state"] == "failed"
    assert not page.root.find("article", data_state="done")


def test_a_retried_turn_takes_its_calls_back_and_the_retry_completes(
    chromium: str, tmp_path: Path
) -> None:
    demo = str(rt.sources.demo_path())
    with serving(str(cut_demo(tmp_path)), demo, str(answer(tmp_path))) as url:
        page = dump_dom(chromium, url)
    assert page.body.attrs["data-run"] == "done"
    first, again = page.calls("GetWeatherArgs")
    assert first.attrs["data-state"] == "retracted"
    assert "✗ retracted" in first.all_text()
    assert not first.find("output")
    assert again.attrs["data-state"] == "done"
    assert first.number("data-seen-at") < again.number("data-seen-at")
    assert [card.attrs["data-state"] for card in page.calls("get_stock_price")] == ["done"]


def test_a_call_started_early_runs_before_its_turn_commits(chromium: str) -> None:
    events = early_run(fail=False)
    with serving_events(events) as url:
        page = dump_dom(chromium, url)
    assert page.body.attrs["data-run"] == "done"
    [card] = page.calls("search")
    # Running from its custom event on, though TOOL_CALL_START comes only at the commit.
    running = card.number("data-ended-at")
    assert running == position(events, "rxtoolcalls.tool_call_early")
    assert running < position(events, "TOOL_CALL_START") < card.number("data-result-at")
    assert card.attrs["data-state"] == "done"
    assert [
        (dt.all_text(), dd.all_text())
        for dt, dd in zip(card.find("dt"), card.find("dd"), strict=True)
    ] == [("q", "oslo")]
    [fetched] = page.calls("fetch")
    assert fetched.number("data-ended-at") == position(events, "TOOL_CALL_END", "call_f")


def test_a_call_started_early_whose_turn_fails_is_taken_back_not_done(chromium: str) -> None:
    events = early_run(fail=True)
    assert not [e for e in events if e["type"].startswith("TOOL_CALL")]
    with serving_events(events) as url:
        page = dump_dom(chromium, url)
    assert page.body.attrs["data-run"] == "error"
    assert "hidden" not in page.alert().attrs
    [card] = page.calls("search")
    assert card.number("data-ended-at") == position(events, "rxtoolcalls.tool_call_early")
    assert card.attrs["data-state"] == "retracted"
    assert not card.find("output")
    assert not page.root.find("article", data_state="done")


def test_the_screenshot_is_drawn(chromium: str, tmp_path: Path) -> None:
    picture = tmp_path / "ui.png"
    draw_screenshot(chromium, picture, tmp_path)
    data = picture.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (800, 840)


def draw_screenshot(chromium: str, picture: Path, scratch: Path) -> None:
    """The manual's picture: a turn cut and taken back, its retry, the tools, the answer."""
    demo = str(rt.sources.demo_path())
    with serving(str(cut_demo(scratch)), demo, str(answer(scratch))) as url:
        screenshot(chromium, url, picture)


def main(argv: list[str]) -> int:
    """Draw the screenshot to ``argv[0]`` (default: docs/ui.png)."""
    chromium = _find_chromium()
    if chromium is None:
        print(f"no Chromium found (looked for {', '.join(NAMES)})", file=sys.stderr)
        return 2
    picture = Path(argv[0] if argv else "docs/ui.png")
    with tempfile.TemporaryDirectory() as scratch:
        draw_screenshot(chromium, picture, Path(scratch))
    print(picture)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
