"""The manual's Starlette recipe (docs/recipes.md): lifecycle() events as Server-Sent Events.

The recipe's code is read from the manual and run as a module, so the two cannot drift apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import threading
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex import Observable, abc
from reactivex.disposable import Disposable

import rxtoolcalls as rt
from tests.helpers import extra, load_fixture

httpx = pytest.importorskip("httpx", reason=extra("test"))
pytest.importorskip("starlette", reason=extra("test"))

HEADING = "## Stream lifecycle events to a browser (FastAPI/Starlette SSE)"
PAGE = (Path(__file__).parent.parent / "docs" / "recipes.md").read_text(encoding="utf-8")
_found = re.search(r"```python\n(.*?)```", PAGE.split(HEADING, 1)[1], re.S)
assert _found is not None, "the recipe's code block is missing"
RECIPE: dict[str, Any] = {"__name__": "recipe"}
with contextlib.redirect_stdout(io.StringIO()):  # the recipe tries itself once, printing
    exec(compile(_found.group(1), "docs/recipes.md (SSE recipe)", "exec"), RECIPE)
app = RECIPE["app"]
make_app: Callable[[Callable[[], Observable[Any]]], Any] = RECIPE["make_app"]


def parse_sse(body: str) -> list[tuple[str, Any]]:
    events = []
    for block in body.split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    return events


async def get(served: Any) -> Any:
    transport = httpx.ASGITransport(app=served)
    async with httpx.AsyncClient(transport=transport, base_url="http://recipe.test") as client:
        return await client.get("/tool-calls")


@pytest.mark.json_parser
def test_the_recipe_streams_lifecycle_events() -> None:
    response = asyncio.run(get(app))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    names = [name for name, _ in events]
    assert names[-1] == "done"
    assert "progress" in names
    started = [data for name, data in events if name == "started"]
    committed = [data for name, data in events if name == "committed"]
    turn = rt.from_jsonl(rt.sources.demo_path()).pipe(rt.assemble()).run()
    assert [s["name"] for s in started] == [c.name for c in turn.tool_calls]
    assert committed == [c.to_dict() for c in turn.tool_calls]
    # Every call is named before it progresses, and committed only at the end.
    assert names.index("started") < names.index("progress") < names.index("committed")
    assert set(names[names.index("committed") : -1]) == {"committed"}


def test_a_cut_stream_ends_in_an_error_event() -> None:
    chunks = load_fixture("openai__parallel_tool_calls")
    cut = make_app(lambda: reactivex.from_iterable(chunks[: len(chunks) // 2]))
    events = parse_sse(asyncio.run(get(cut)).text)
    name, data = events[-1]
    assert name == "error"
    assert data["type"] == "StreamInterruptedError"
    assert {n for n, _ in events[:-1]} <= {"started", "progress"}


def test_a_client_disconnect_disposes_the_subscription() -> None:
    # httpx's ASGITransport reads a whole body before it returns, so it cannot leave halfway:
    # the app is called as a server would, and the client goes after the first event.
    chunks = load_fixture("openai__parallel_tool_calls")
    disposed = threading.Event()

    def endless(observer: abc.ObserverBase[Any], scheduler: Any = None) -> abc.DisposableBase:
        for chunk in chunks[:-1]:  # never the finish: a model still streaming
            observer.on_next(chunk)
        return Disposable(disposed.set)

    served = make_app(lambda: reactivex.create(endless))
    sent: list[MutableMapping[str, Any]] = []
    first_body = asyncio.Event()
    received = 0

    async def receive() -> dict[str, Any]:
        nonlocal received
        received += 1
        if received == 1:
            return {"type": "http.request", "body": b"", "more_body": False}
        await first_body.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            first_body.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/tool-calls",
        "raw_path": b"/tool-calls",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"recipe.test")],
        "client": ("127.0.0.1", 1234),
        "server": ("recipe.test", 80),
    }

    async def main() -> None:
        await asyncio.wait_for(served(scope, receive, send), 5)
        for _ in range(10):  # a dropped generator is closed within a loop step or two
            if disposed.is_set():
                return
            await asyncio.sleep(0)

    asyncio.run(main())
    assert disposed.is_set()
    bodies = [m["body"] for m in sent if m["type"] == "http.response.body"]
    assert bodies[0].startswith(b"event: started")
    # The body never ended: the client left while the model was still streaming.
    assert all(m.get("more_body") for m in sent if m["type"] == "http.response.body")
