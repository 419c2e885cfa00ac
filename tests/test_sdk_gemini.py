"""The real google-genai client against ReplayServer over loopback HTTP.

Every shared Gemini recording is replayed through the server, read by the SDK (sync and async)
and assembled: the outcome is the one the recorded dicts give. Disposing mid-stream frees the
socket; SDK errors arrive as ``ProviderError``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.serve import ReplayServer
from tests.helpers import extra, settle
from tests.test_sdk_wires import (
    dispose_after_first,
    needs_proc,
    new_sockets,
    sockets_before,
)
from tests.wire_builders import load_wire, wire_fixture_names

genai = pytest.importorskip("google.genai", reason=extra("gemini"))
from google.genai import types  # noqa: E402 - after the skip

GEMINI = wire_fixture_names("gemini")
MODEL = "gemini-3-flash"
PACE = 0.2


# A collected Client closes its HTTP client under a stream still being read: keep them,
# and close them when the module's tests are done (their kept-alive connections with them).
CLIENTS: list[Any] = []


@pytest.fixture(autouse=True, scope="module")
def _close_clients() -> Iterator[None]:
    yield
    while CLIENTS:
        CLIENTS.pop().close()


def client(server: ReplayServer) -> Any:
    options = types.HttpOptions(base_url=server.root_url, retry_options=None)
    made = genai.Client(api_key="x", http_options=options)
    CLIENTS.append(made)
    return made


def stream(server: ReplayServer) -> Any:
    return client(server).models.generate_content_stream(model=MODEL, contents="hi")


def shape(turn: rt.AssistantTurn) -> Any:
    """What a turn says, with the synthesized ids (new on every assembly) left out."""
    message = json.loads(json.dumps(turn.to_message()))
    given = {c.id for c in turn.tool_calls if c.id in json.dumps(message)}
    for part in message["parts"]:
        call = part.get("functionCall")
        if isinstance(call, dict) and call.get("id") not in given:
            call.pop("id", None)
    calls = [
        (c.index, c.name, c.arguments, c.id if c.id in given else None) for c in turn.tool_calls
    ]
    return turn.wire, turn.finish_reason, turn.content, turn.reasoning, turn.usage, calls, message


def recorded(name: str) -> Any:
    return shape(reactivex.from_iterable(load_wire("gemini", name)).pipe(rt.assemble()).run())


@pytest.mark.parametrize("name", GEMINI)
def test_gemini_recording_through_the_sdk_sync_and_async(name: str) -> None:
    async def read_async(server: ReplayServer) -> rt.AssistantTurn:
        chunks = client(server).aio.models.generate_content_stream(model=MODEL, contents="hi")
        turn: rt.AssistantTurn = await rt.from_async_gemini_stream(chunks).pipe(rt.assemble())
        return turn

    async def read_awaited(server: ReplayServer) -> rt.AssistantTurn:
        aio = client(server).aio.models
        chunks = await aio.generate_content_stream(model=MODEL, contents="hi")
        turn: rt.AssistantTurn = await rt.from_async_gemini_stream(chunks).pipe(rt.assemble())
        return turn

    events = load_wire("gemini", name)
    with ReplayServer([events]) as server:
        sync = rt.from_gemini_stream(stream(server)).pipe(rt.assemble()).run()
        coroutine = asyncio.run(read_async(server))
        awaited = asyncio.run(read_awaited(server))
        assert len(server.requests) == 3
    want = recorded(name)
    assert shape(sync) == want
    assert shape(coroutine) == want
    assert shape(awaited) == want
    assert sync.tool_calls  # every shared recording makes calls


@pytest.mark.parametrize("name", GEMINI)
def test_generate_content_answers_the_assembled_response(name: str) -> None:
    with ReplayServer([load_wire("gemini", name)]) as server:
        answer = client(server).models.generate_content(model=MODEL, contents="hi")
    turn = reactivex.from_iterable(load_wire("gemini", name)).pipe(rt.assemble()).run()
    assert [(c.name, c.args) for c in answer.function_calls or []] == [
        (c.name, json.loads(c.arguments)) for c in turn.tool_calls
    ]
    # The non-streamed response assembles, as one chunk, to the same turn.
    again = reactivex.just(answer).pipe(rt.assemble()).run()
    assert shape(again) == shape(turn)


def long_stream() -> list[dict[str, Any]]:
    call = {"functionCall": {"name": "f", "args": {"n": 1}}}
    pieces = [{"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}}]}] * 30
    end = {"candidates": [{"content": {"role": "model", "parts": [call]}, "finishReason": "STOP"}]}
    return [*pieces, end]


@needs_proc
def test_dispose_mid_stream_closes_the_connection() -> None:
    with ReplayServer([long_stream()], delay=PACE) as server:
        sockets = sockets_before()
        during: list[int] = []
        seen = (
            rt.from_gemini_stream(stream(server))
            .pipe(ops.do_action(lambda _: during.append(new_sockets(sockets))), ops.take(1))
            .pipe(ops.to_list())
            .run()
        )
        assert len(seen) == 1
        assert during == [2]  # the stream's two ends, while it runs
        assert settle(lambda: not new_sockets(sockets)), "a socket outlived the dispose"
        assert settle(lambda: server.disconnects == 1), "the server never saw the close"


@needs_proc
def test_async_dispose_mid_stream_closes_the_connection() -> None:
    async def main(server: ReplayServer) -> tuple[int, int, list[str]]:
        aio = client(server).aio
        sockets = sockets_before()
        source = rt.from_async_gemini_stream(
            aio.models.generate_content_stream(model=MODEL, contents="hi")
        )
        during, after, notes = await dispose_after_first(source, sockets)
        return during, after, notes

    with ReplayServer([long_stream()], delay=PACE) as server:
        during, after, notes = asyncio.run(main(server))
        assert settle(lambda: server.disconnects == 1), "the server never saw the close"
    assert during > 0
    assert after == 0
    assert notes == []


@pytest.mark.parametrize(
    ("code", "status", "retry"),
    [
        (429, "RESOURCE_EXHAUSTED", True),
        (503, "UNAVAILABLE", True),
        (400, "INVALID_ARGUMENT", False),
    ],
)
def test_an_error_object_in_the_stream_is_a_provider_error(
    code: int, status: str, retry: bool
) -> None:
    first = long_stream()[0]
    failing = [first, {"error": {"code": code, "message": "busy", "status": status}}]

    async def read_async(server: ReplayServer) -> Any:
        chunks = client(server).aio.models.generate_content_stream(model=MODEL, contents="hi")
        return await rt.from_async_gemini_stream(chunks).pipe(rt.assemble())

    with ReplayServer([failing]) as server:
        with pytest.raises(rt.ProviderError) as caught:
            rt.from_gemini_stream(stream(server)).pipe(rt.assemble()).run()
        with pytest.raises(rt.ProviderError) as async_caught:
            asyncio.run(read_async(server))
    for error in (caught.value, async_caught.value):
        assert error.code == code
        assert error.retryable is retry
        assert "busy" in str(error)
        assert type(error.__cause__).__module__.startswith("google.genai")


def test_an_error_status_is_a_provider_error() -> None:
    # A Chat recording asked for at the Gemini path: the server answers 400 in Google's shape.
    with ReplayServer([[{"choices": []}]]) as server, pytest.raises(rt.ProviderError) as caught:
        rt.from_gemini_stream(stream(server)).pipe(rt.assemble()).run()
    assert caught.value.code == 400
    assert caught.value.retryable is False
    assert "chat stream" in str(caught.value)


def test_what_is_not_a_gemini_stream_is_a_type_error_at_once() -> None:
    async def agen() -> Any:
        yield {}

    with pytest.raises(TypeError, match="use from_async_gemini_stream"):
        rt.from_gemini_stream(agen())
    with pytest.raises(TypeError, match=r"needs what client\.models"):
        rt.from_gemini_stream({"candidates": []})
    with pytest.raises(TypeError, match="use from_gemini_stream"):
        rt.from_async_gemini_stream(iter([{}]))
    with pytest.raises(TypeError, match="not int"):
        rt.from_async_gemini_stream(3)


def test_gemini_recordings_are_served_only_at_the_gemini_path() -> None:
    httpx = pytest.importorskip("httpx", reason=extra("test"))
    events = load_wire("gemini", GEMINI[0])
    with ReplayServer([events]) as server:
        wrong = httpx.post(f"{server.base_url}/chat/completions", json={"stream": True})
        body = httpx.post(
            f"{server.root_url}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse", json={}
        ).text
    assert wrong.status_code == 400
    assert ":streamGenerateContent" in wrong.json()["error"]["message"]
    assert "[DONE]" not in body
    assert "event:" not in body
    assert body.count("data: ") == len(events)
