"""The Starlette recipe: lifecycle() events streamed as Server-Sent Events.

The code between the RECIPE markers is the documented snippet, as it is: keep them the same.
"""

# ruff: noqa: E402 - the test's own imports follow the recipe, which reads as the snippet does

from __future__ import annotations

import asyncio
import threading

import pytest

pytest.importorskip("starlette", reason="starlette is not installed: the recipe serves with it")
pytest.importorskip("httpx", reason="httpx is not installed: the test requests with it")

# -- RECIPE ---------------------------------------------------------------------------------
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from reactivex import Observable
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

import rxtoolcalls as rt

CallEvent = rt.ToolCallStarted | rt.ToolCallProgress | rt.ToolCallCommitted


def sse_frame(name: str, data: object) -> str:
    """One Server-Sent Event: its name and its data as JSON."""
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def frame(event: CallEvent) -> str:
    """A lifecycle() event as a Server-Sent Event."""
    if isinstance(event, rt.ToolCallStarted):
        return sse_frame("started", {"index": event.index, "id": event.id, "name": event.name})
    if isinstance(event, rt.ToolCallProgress):
        return sse_frame("progress", {"index": event.index, "characters": event.characters})
    return sse_frame("committed", event.call.to_dict())


async def sse(events: Observable[CallEvent]) -> AsyncIterator[str]:
    """The events as SSE text; a typed stream error as an ``error`` event; ``done`` at the end."""
    # Closed at a yield (a server dropping the response), this closes the subscription at once.
    async with contextlib.aclosing(rt.to_async_iterator(events)) as items:
        try:
            async for event in items:
                yield frame(event)
        except rt.ToolCallStreamError as error:
            yield sse_frame("error", {"type": type(error).__name__, "message": str(error)})
            return
    yield sse_frame("done", {})


def make_app(open_chunks: Callable[[], Observable[Any]]) -> Starlette:
    """An app streaming the tool calls of each request's model stream at ``/tool-calls``."""

    async def tool_calls(request: Request) -> StreamingResponse:
        events = open_chunks().pipe(rt.lifecycle(every=8))
        return StreamingResponse(sse(events), media_type="text/event-stream")

    return Starlette(routes=[Route("/tool-calls", tool_calls)])


# A recorded stream stands in for the model's (say, rt.from_openai_stream(client.chat...)).
app = make_app(lambda: rt.from_jsonl(rt.sources.demo_path()))
# -- END RECIPE -----------------------------------------------------------------------------

from collections.abc import MutableMapping

import httpx
import reactivex
from reactivex import abc
from reactivex.disposable import Disposable

from tests.helpers import load_fixture


def parse_sse(body: str) -> list[tuple[str, Any]]:
    events = []
    for block in body.split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    return events


async def get(served: Starlette) -> httpx.Response:
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
