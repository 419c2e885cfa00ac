"""from_openai_response: the openai client's raw streamed response, read as SSE bytes.

The real ``OpenAI`` and ``AsyncOpenAI`` clients, over ``httpx2.MockTransport`` and over
``ReplayServer`` on loopback HTTP: every Chat recording and every Responses recording gives the
outcome ``from_openai_stream`` gives for the same bytes; error statuses are ``ProviderError``;
disposing frees the socket and the reading thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler
from reactivex.subject import Subject

import rxtoolcalls as rt
from rxtoolcalls.serve import ReplayServer
from tests.helpers import extra, fixture_names, load_fixture, settle
from tests.test_sdk_wires import (
    BOUND,
    dispose_after_first,
    needs_proc,
    new_sockets,
    result,
    sockets_before,
)
from tests.wire_builders import load_wire, load_wire_lines, sse_bytes, wire_fixture_names

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

openai = pytest.importorskip("openai", reason=extra("openai"))
httpx2 = pytest.importorskip("httpx2", reason=extra("openai"))

from httpx2 import SyncByteStream  # noqa: E402

CHAT = fixture_names()
RESPONSES = wire_fixture_names("responses")
PARALLEL = load_fixture("openai__parallel_tool_calls")
ASK: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
SILENT = 60.0  # seconds the server waits after an event: far past BOUND, so only a close frees it


async def async_outcome(source: reactivex.Observable[Any]) -> Any:
    try:
        turn = await source.pipe(rt.assemble())
    except rt.ToolCallStreamError as error:
        return type(error)
    assert isinstance(turn, rt.AssistantTurn)
    return turn


def chat_sse(chunks: list[dict[str, Any]]) -> bytes:
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


class Answers:
    """A MockTransport handler: the same body for every request, each request kept."""

    def __init__(self, body: bytes, status: int = 200, kind: str = "text/event-stream") -> None:
        self.body, self.status, self.kind = body, status, kind
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(json.loads(request.content))
        return httpx2.Response(self.status, headers={"content-type": self.kind}, content=self.body)

    def client(self) -> Any:
        http = httpx2.Client(transport=httpx2.MockTransport(self))
        return openai.OpenAI(
            api_key="x", base_url="http://fake.invalid/v1", max_retries=0, http_client=http
        )

    def async_client(self) -> Any:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self))
        return openai.AsyncOpenAI(
            api_key="x", base_url="http://fake.invalid/v1", max_retries=0, http_client=http
        )


def gpt(server: ReplayServer) -> Any:
    return openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)


def async_gpt(server: ReplayServer) -> Any:
    return openai.AsyncOpenAI(api_key="x", base_url=server.base_url, max_retries=0)


# -- every recording: the same outcome as from_openai_stream ----------------------------------


@pytest.mark.parametrize("name", CHAT)
def test_chat_recording_over_mock_transport(name: str) -> None:
    answers = Answers(chat_sse(load_fixture(name)))
    client = answers.client()
    stream = client.chat.completions.create(**ASK, stream=True)
    want = result(lambda: rt.from_openai_stream(stream).pipe(rt.assemble()).run())
    manager = client.chat.completions.with_streaming_response.create(**ASK, stream=True)
    by_manager = result(lambda: rt.from_openai_response(manager).pipe(rt.assemble()).run())
    with client.chat.completions.with_streaming_response.create(**ASK, stream=True) as response:
        by_response = result(lambda: rt.from_openai_response(response).pipe(rt.assemble()).run())
        assert response.is_closed

    async def read_async() -> Any:
        aclient = answers.async_client()
        try:
            create = aclient.chat.completions.with_streaming_response.create
            got = [await async_outcome(rt.from_async_openai_response(create(**ASK, stream=True)))]
            async with create(**ASK, stream=True) as entered:
                got.append(await async_outcome(rt.from_async_openai_response(entered)))
                assert entered.is_closed
            return got
        finally:
            await aclient.close()

    by_async = asyncio.run(read_async())
    assert [by_manager, by_response, *by_async] == [want] * 4
    assert len(answers.requests) == 5
    assert all(r["stream"] is True for r in answers.requests)


@pytest.mark.parametrize("name", CHAT)
def test_chat_recording_over_loopback_http(name: str) -> None:
    chunks = load_fixture(name)

    async def read_async(server: ReplayServer) -> Any:
        aclient = async_gpt(server)
        try:
            manager = aclient.chat.completions.with_streaming_response.create(**ASK, stream=True)
            return await async_outcome(rt.from_async_openai_response(manager))
        finally:
            await aclient.close()

    with ReplayServer([chunks]) as server:
        client = gpt(server)
        stream = client.chat.completions.create(**ASK, stream=True)
        want = result(lambda: rt.from_openai_stream(stream).pipe(rt.assemble()).run())
        manager = client.chat.completions.with_streaming_response.create(**ASK, stream=True)
        got = result(lambda: rt.from_openai_response(manager).pipe(rt.assemble()).run())
        got_async = asyncio.run(read_async(server))
        assert len(server.requests) == 3
    assert got == want
    assert got_async == want


@pytest.mark.parametrize("name", RESPONSES)
def test_responses_recording(name: str) -> None:
    answers = Answers(sse_bytes(load_wire_lines("responses", name)))
    client = answers.client()
    stream = client.responses.create(model="m", input="hi", stream=True)
    want = result(lambda: rt.from_openai_stream(stream).pipe(rt.assemble()).run())
    manager = client.responses.with_streaming_response.create(model="m", input="hi", stream=True)
    by_mock = result(lambda: rt.from_openai_response(manager).pipe(rt.assemble()).run())

    async def read_async(server: ReplayServer) -> Any:
        aclient = async_gpt(server)
        try:
            async with aclient.responses.with_streaming_response.create(
                model="m", input="hi", stream=True
            ) as response:
                return await async_outcome(rt.from_async_openai_response(response))
        finally:
            await aclient.close()

    with ReplayServer([load_wire("responses", name)]) as server:
        manager = gpt(server).responses.with_streaming_response.create(
            model="m", input="hi", stream=True
        )
        by_loopback = result(lambda: rt.from_openai_response(manager).pipe(rt.assemble()).run())
        by_async = asyncio.run(read_async(server))
        assert [r["stream"] for r in server.requests] == [True, True]
    assert by_mock == want
    assert by_loopback == want
    assert by_async == want


def test_events_are_the_wire_dicts() -> None:
    with ReplayServer([PARALLEL]) as server:
        manager = gpt(server).chat.completions.with_streaming_response.create(**ASK, stream=True)
        events = rt.from_openai_response(manager).pipe(ops.to_list()).run()
    assert events == PARALLEL


def test_in_band_error_is_a_provider_error() -> None:
    events = load_wire("responses", "vercel-ai__error_then_response_failed")
    with ReplayServer([events]) as server:
        manager = gpt(server).responses.with_streaming_response.create(
            model="m", input="hi", stream=True
        )
        with pytest.raises(rt.ProviderError) as caught:
            rt.from_openai_response(manager).pipe(rt.assemble()).run()
    assert caught.value.code == "insufficient_quota"
    assert caught.value.retryable is False


def test_a_dropped_connection_is_an_interruption() -> None:
    with ReplayServer([PARALLEL], cut={0: 9}) as server:
        manager = gpt(server).chat.completions.with_streaming_response.create(**ASK, stream=True)
        with pytest.raises(rt.StreamInterruptedError, match="finish_reason"):
            rt.from_openai_response(manager).pipe(rt.assemble()).run()


# -- managers: one request per subscription ---------------------------------------------------


def test_the_manager_sends_a_new_request_per_subscription() -> None:
    with ReplayServer([PARALLEL], cut={0: 9}) as server:
        manager = gpt(server).chat.completions.with_streaming_response.create(**ASK, stream=True)
        source = rt.from_openai_response(manager).pipe(rt.assemble())
        with pytest.raises(rt.StreamInterruptedError):
            source.run()  # the first request is dropped midway
        first = source.run()
        again = source.pipe(ops.retry(2)).run()
        assert len(server.requests) == 3
    assert first == again
    assert [c.name for c in first.tool_calls] == ["GetWeatherArgs", "get_stock_price"]


def test_an_entered_response_is_read_once() -> None:
    with ReplayServer([PARALLEL]) as server:
        client = gpt(server)
        with client.chat.completions.with_streaming_response.create(**ASK, stream=True) as r:
            source = rt.from_openai_response(r).pipe(rt.assemble())
            assert len(source.run().tool_calls) == 2
            with pytest.raises(rt.StreamInterruptedError, match="read already") as caught:
                source.run()
            assert isinstance(caught.value.__cause__, RuntimeError)
        with client.chat.completions.with_streaming_response.create(**ASK, stream=True) as r:
            r.read()  # kept: read again from memory
            assert len(rt.from_openai_response(r).pipe(rt.assemble()).run().tool_calls) == 2
        assert len(server.requests) == 2


def test_the_async_manager_holds_one_request() -> None:
    async def main(server: ReplayServer) -> tuple[rt.AssistantTurn, Exception]:
        aclient = async_gpt(server)
        try:
            manager = aclient.chat.completions.with_streaming_response.create(**ASK, stream=True)
            source = rt.from_async_openai_response(manager)
            turn: rt.AssistantTurn = await source.pipe(rt.assemble())
            with pytest.raises(RuntimeError) as caught:
                await source
            async with aclient.chat.completions.with_streaming_response.create(
                **ASK, stream=True
            ) as response:
                entered = rt.from_async_openai_response(response)
                assert len((await entered.pipe(rt.assemble())).tool_calls) == 2
                with pytest.raises(RuntimeError, match="read already"):
                    await entered
            return turn, caught.value
        finally:
            await aclient.close()

    with ReplayServer([PARALLEL]) as server:
        turn, error = asyncio.run(main(server))
        assert len(server.requests) == 2
    assert len(turn.tool_calls) == 2
    assert "with_streaming_response.create(...) again" in str(error)


# -- error statuses ---------------------------------------------------------------------------

STATUSES = [
    (429, "rate_limit_exceeded", True),
    (500, "server_error", True),
    (503, None, True),
    (400, "invalid_value", False),
    (401, "invalid_api_key", False),
]


def refusal(status: int, code: str | None) -> Answers:
    # With no code and no type, the status is the code.
    kind = None if code is None else "x"
    error = {"message": f"said {status}", "type": kind, "code": code, "param": None}
    return Answers(json.dumps({"error": error}).encode(), status, "application/json")


def check_refusal(error: Exception, status: int, code: str | None, again: bool) -> None:
    assert isinstance(error, rt.ProviderError)
    assert error.code == (code if code is not None else status)
    assert error.retryable is again
    assert (error.hint is not None) is again
    assert f"HTTP {status}" in str(error)
    assert f"said {status}" in str(error)
    assert isinstance(error.__cause__, openai.APIStatusError)
    assert error.__cause__.status_code == status


@pytest.mark.parametrize(("status", "code", "again"), STATUSES)
def test_an_error_status_is_a_provider_error(status: int, code: str | None, again: bool) -> None:
    answers = refusal(status, code)
    errors: list[Exception] = []
    chat = answers.client().chat.completions.with_streaming_response.create(**ASK, stream=True)
    rt.from_openai_response(chat).subscribe(on_error=errors.append)
    responses = answers.client().responses.with_streaming_response.create(
        model="m", input="hi", stream=True
    )
    with pytest.raises(rt.ProviderError) as caught:
        rt.from_openai_response(responses).pipe(rt.assemble()).run()

    async def read_async() -> Exception:
        aclient = answers.async_client()
        try:
            create = aclient.chat.completions.with_streaming_response.create
            with pytest.raises(rt.ProviderError) as late:
                await rt.from_async_openai_response(create(**ASK, stream=True))
            return late.value
        finally:
            await aclient.close()

    late = asyncio.run(read_async())
    for error in (*errors, caught.value, late):
        check_refusal(error, status, code, again)
    assert len(errors) == 1
    assert len(answers.requests) == 3  # max_retries=0: one request each


def test_an_error_status_over_loopback_http() -> None:
    # The server answers a Chat request at the Responses path with a 400 in OpenAI's shape.
    with ReplayServer([load_wire("responses", "pydantic-ai__single_call_get_capital")]) as server:
        manager = gpt(server).chat.completions.with_streaming_response.create(**ASK, stream=True)
        with pytest.raises(rt.ProviderError) as caught:
            rt.from_openai_response(manager).run()
    assert caught.value.retryable is False
    assert caught.value.code == "invalid_request_error"
    assert "HTTP 400" in str(caught.value)
    assert "/v1/responses" in str(caught.value)


# -- dispose: the connection, the socket and the reader go -----------------------------------


LONG_RESPONSES = load_wire("responses", "pydantic-ai__reasoning_text_then_call_phase")


@needs_proc
@pytest.mark.parametrize("wire", ["chat", "responses"])
@pytest.mark.parametrize("form", ["manager", "entered"])
def test_dispose_on_a_silent_server_frees_the_socket_and_the_reader(wire: str, form: str) -> None:
    events = PARALLEL if wire == "chat" else LONG_RESPONSES
    seen: list[Any] = []
    got = threading.Event()
    notes: list[str] = []
    stop: Subject[None] = Subject()
    # After its first event the server says nothing for SILENT seconds, far past BOUND: only
    # shutting the socket down ends the blocked read in time.
    with ReplayServer([events], delay=SILENT) as server:
        threads = set(threading.enumerate())
        sockets = sockets_before()
        client = gpt(server)
        if wire == "chat":
            manager = client.chat.completions.with_streaming_response.create(**ASK, stream=True)
        else:
            manager = client.responses.with_streaming_response.create(
                model="m", input="hi", stream=True
            )
        response = manager.__enter__() if form == "entered" else None

        def on_next(event: Any) -> None:
            seen.append(event)
            got.set()

        source = rt.from_openai_response(response if form == "entered" else manager)
        subscription = source.pipe(ops.take_until(stop)).subscribe(
            on_next,
            lambda _: notes.append("error"),
            lambda: notes.append("completed"),
            scheduler=NewThreadScheduler(),
        )
        assert got.wait(BOUND)
        assert new_sockets(sockets) == 2  # the stream's two ends, while it runs
        stop.on_next(None)  # take_until completes and disposes the source, from this thread
        assert settle(lambda: not new_sockets(sockets)), "a socket outlived the dispose"
        assert settle(lambda: server.disconnects == 1)
        assert settle(lambda: set(threading.enumerate()) <= threads), "a thread outlived it"
        subscription.dispose()
        if response is not None:
            assert response.is_closed
            manager.__exit__(None, None, None)
        client.close()
    assert notes == ["completed"]
    assert len(seen) == 1


@needs_proc
def test_take_on_the_reading_thread_frees_the_socket() -> None:
    with ReplayServer([PARALLEL], delay=SILENT) as server:
        sockets = sockets_before()
        manager = gpt(server).chat.completions.with_streaming_response.create(**ASK, stream=True)
        during: list[int] = []
        # take(1) disposes from inside on_next, on the thread blocked reading a moment later.
        first = (
            rt.from_openai_response(manager)
            .pipe(ops.do_action(lambda _: during.append(new_sockets(sockets))), ops.take(1))
            .pipe(ops.to_list())
            .run()
        )
        assert during == [2]  # the stream's two ends, while it runs
        assert settle(lambda: not new_sockets(sockets))
        assert settle(lambda: server.disconnects == 1)
    assert first == PARALLEL[:1]


class Body(SyncByteStream):
    """A response body that keeps whether it was closed (MockTransport has no socket)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.closed = False
        self.read = 0

    def __iter__(self) -> Iterator[bytes]:
        for piece in self.pieces:
            self.read += 1
            yield piece

    def close(self) -> None:
        self.closed = True


def test_dispose_over_mock_transport_closes_the_body() -> None:
    body = Body([f"data: {json.dumps(c)}\n\n".encode() for c in PARALLEL])

    def answer(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=body)

    http = httpx2.Client(transport=httpx2.MockTransport(answer))
    client = openai.OpenAI(api_key="x", base_url="http://f.invalid/v1", http_client=http)
    with client.chat.completions.with_streaming_response.create(**ASK, stream=True) as response:
        got = rt.from_openai_response(response).pipe(ops.take(3), ops.to_list()).run()
        # The reader closes as its read returns, on its own thread: moments after run().
        assert settle(lambda: response.is_closed and body.closed)
    assert got == PARALLEL[:3]
    assert body.read == 3


@needs_proc
@pytest.mark.parametrize("form", ["manager", "entered"])
def test_async_dispose_frees_the_socket(form: str) -> None:
    async def main(server: ReplayServer) -> tuple[int, int, list[str], bool]:
        sockets = sockets_before()
        aclient = async_gpt(server)
        manager = aclient.chat.completions.with_streaming_response.create(**ASK, stream=True)
        entered = await manager.__aenter__() if form == "entered" else None
        source = rt.from_async_openai_response(entered if entered is not None else manager)
        during, after, notes = await dispose_after_first(source, sockets)
        closed = entered.is_closed if entered is not None else True
        await aclient.close()
        return during, after, notes, closed

    with ReplayServer([PARALLEL], delay=SILENT) as server:
        during, after, notes, closed = asyncio.run(main(server))
        assert settle(lambda: server.disconnects == 1), "the server never saw the close"
    assert during == 2
    assert after == 0
    assert closed
    assert notes == []


# -- wrong inputs -----------------------------------------------------------------------------


def test_what_is_not_a_streamed_response_is_a_type_error_at_once() -> None:
    answers = Answers(chat_sse(PARALLEL))
    client = answers.client()
    with pytest.raises(TypeError, match=r"with_streaming_response.*not int$"):
        rt.from_openai_response(42)
    with pytest.raises(TypeError, match=r"not list$"):
        rt.from_async_openai_response(PARALLEL)
    stream = client.chat.completions.create(**ASK, stream=True)
    with pytest.raises(TypeError, match=r"not Stream \(an SDK stream: use from_openai_stream\)"):
        rt.from_openai_response(stream)
    with pytest.raises(TypeError, match=r"use from_openai_stream\)$"):
        rt.from_async_openai_response(stream)
    stream.close()
    with pytest.raises(TypeError, match=r"use from_openai_stream\)$"):
        rt.from_openai_response(client.chat.completions.stream(**ASK))
    raw = httpx2.Response(200, content=chat_sse(PARALLEL))
    with pytest.raises(TypeError, match=r"use from_sse"):
        rt.from_openai_response(raw)
    manager = client.chat.completions.with_streaming_response.create(**ASK, stream=True)
    with pytest.raises(TypeError, match=r"use from_openai_response$"):
        rt.from_async_openai_response(manager)
    with manager as response, pytest.raises(TypeError, match=r"use from_openai_response$"):
        rt.from_async_openai_response(response)

    async def main() -> None:
        aclient = answers.async_client()
        manager = aclient.chat.completions.with_streaming_response.create(**ASK, stream=True)
        with pytest.raises(TypeError, match=r"use from_async_openai_response$"):
            rt.from_openai_response(manager)
        async with manager as response:  # its request was made already: send it
            with pytest.raises(TypeError, match=r"use from_async_openai_response$"):
                rt.from_openai_response(response)
        astream = await aclient.chat.completions.create(**ASK, stream=True)
        with pytest.raises(TypeError, match=r"use from_async_openai_stream\)$"):
            rt.from_async_openai_response(astream)
        await astream.close()
        helper = aclient.chat.completions.stream(**ASK)
        with pytest.raises(TypeError, match=r"use from_async_openai_stream\)$"):
            rt.from_async_openai_response(helper)
        async with helper:  # its request was made already: send it
            pass
        await aclient.close()

    asyncio.run(main())
    assert len(answers.requests) == 5  # the two streams, and the three managers entered


def test_a_whole_json_response_is_a_type_error() -> None:
    completion = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [],
    }
    answers = Answers(json.dumps(completion).encode(), kind="application/json")
    client = answers.client()
    with (
        client.chat.completions.with_streaming_response.create(**ASK) as response,
        pytest.raises(TypeError, match="made with stream=True"),
    ):
        rt.from_openai_response(response)
    manager = client.chat.completions.with_streaming_response.create(**ASK)
    errors: list[Exception] = []
    rt.from_openai_response(manager).subscribe(on_error=errors.append)
    [error] = errors
    assert isinstance(error, TypeError)
    assert "application/json" in str(error)


# -- the agent loop takes the manager ---------------------------------------------------------


def answer_chunks(text: str) -> list[dict[str, Any]]:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]


def tools() -> dict[str, Callable[..., Any]]:
    def weather(city: str, country: str, units: str) -> str:
        return f"11 {units} in {city}"

    def stock(ticker: str, exchange: str) -> str:
        return f"{ticker} 189.98 USD"

    return {"GetWeatherArgs": weather, "get_stock_price": stock}


def test_the_agent_loop_takes_the_manager_and_retries_with_a_new_request() -> None:
    recordings = [PARALLEL, PARALLEL, answer_chunks("Done.")]
    with ReplayServer(recordings, cut={0: 9}) as server:
        client = gpt(server)

        def open_stream(messages: list[dict[str, Any]]) -> Any:
            return client.chat.completions.with_streaming_response.create(
                model="m", messages=messages, stream=True
            )

        user = [{"role": "user", "content": "hi"}]
        events = rt.agent_loop(open_stream, tools(), user, backoff=0.01).pipe(ops.to_list()).run()
        assert len(server.requests) == 3
        assert server.requests[0]["messages"] == server.requests[1]["messages"]
    assert len([e for e in events if isinstance(e, rt.TurnRetried)]) == 1
    conversation = events[-1]
    assert isinstance(conversation, rt.Conversation)
    assert [m["role"] for m in conversation.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert conversation.messages[2]["content"] == "11 c in Edinburgh"


def test_the_async_agent_loop_takes_the_async_manager() -> None:
    async def main(server: ReplayServer) -> rt.Conversation:
        aclient = async_gpt(server)
        try:

            def open_stream(messages: list[dict[str, Any]]) -> Any:
                return aclient.chat.completions.with_streaming_response.create(
                    model="m", messages=messages, stream=True
                )

            user = [{"role": "user", "content": "hi"}]
            conversation: rt.Conversation = await rt.agent_loop(open_stream, tools(), user).pipe(
                rt.final_conversation()
            )
            return conversation
        finally:
            await aclient.close()

    with ReplayServer([PARALLEL, answer_chunks("Done.")]) as server:
        conversation = asyncio.run(main(server))
        assert len(server.requests) == 2
    assert conversation.messages[-1] == {"role": "assistant", "content": "Done."}
    assert conversation.messages[3]["content"] == "AAPL 189.98 USD"


# -- many streams at once ---------------------------------------------------------------------

CONCURRENT = 50  # the benchmark runs 200


def test_concurrent_async_streams_over_loopback_are_all_correct() -> None:
    chunks = load_fixture("openai__long_arguments_many_fragments")
    want = reactivex.from_iterable(chunks).pipe(rt.assemble()).run()

    async def main(server: ReplayServer) -> list[rt.AssistantTurn]:
        aclient = async_gpt(server)
        try:

            async def one(number: int) -> rt.AssistantTurn:
                manager = aclient.chat.completions.with_streaming_response.create(
                    model="m", messages=[{"role": "user", "content": str(number)}], stream=True
                )
                turn: rt.AssistantTurn = await rt.from_async_openai_response(manager).pipe(
                    rt.assemble()
                )
                return turn

            return list(await asyncio.gather(*(one(n) for n in range(CONCURRENT))))
        finally:
            await aclient.close()

    with ReplayServer([chunks]) as server:
        turns = asyncio.run(main(server))
        asked = sorted(int(r["messages"][0]["content"]) for r in server.requests)
    assert asked == list(range(CONCURRENT))
    assert turns == [want] * CONCURRENT
    assert want.tool_calls


def test_one_manager_read_by_two_subscriptions_at_once() -> None:
    with ReplayServer([PARALLEL], delay=0.005) as server:
        manager = gpt(server).chat.completions.with_streaming_response.create(**ASK, stream=True)
        source = rt.from_openai_response(manager).pipe(rt.assemble())
        # Each reads on a thread of its own; ending one must not close the other's response.
        both = reactivex.merge(source, source).pipe(ops.to_list()).run()
        assert len(server.requests) == 2
    assert len(both) == 2
    assert both[0] == both[1]
    assert len(both[0].tool_calls) == 2


def test_the_agent_loop_refuses_an_async_manager_off_a_loop_leaving_no_request_behind() -> None:
    import gc
    import warnings

    from rxtoolcalls._agent_io import open_chunks

    client = openai.AsyncOpenAI(api_key="x", base_url="http://unused.invalid/v1", max_retries=0)
    manager = client.chat.completions.with_streaming_response.create(**ASK, stream=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match="asyncio loop"):
            open_chunks(manager, None)
        del manager
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
