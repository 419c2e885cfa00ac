"""The real openai and anthropic SDK clients against ReplayServer over loopback HTTP.

Every shared Responses and Anthropic recording is replayed through the server, read by the
SDK (sync and async; Anthropic also through ``messages.stream``) and assembled: the outcome is
the one the recorded dicts give. Disposing mid-stream frees the socket and the reading thread.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler

import rxtoolcalls as rt
from rxtoolcalls.serve import ReplayServer
from tests.helpers import extra, load_fixture, open_sockets, settle
from tests.wire_builders import (
    a_end,
    a_piece,
    a_start,
    a_text,
    a_tool,
    a_tool_open,
    load_wire,
    wire_fixture_names,
)

openai = pytest.importorskip("openai", reason=extra("openai"))
anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
httpx2 = pytest.importorskip("httpx2", reason=extra("openai"))
# Imported here, not inside a test: the SDKs close abandoned generators whenever the garbage
# collector runs, and one running during httpx's own import fails on the half-made module.
httpx = pytest.importorskip("httpx", reason=extra("test"))

BOUND = 5.0  # seconds; a freed connection is seen in milliseconds
RESPONSES = wire_fixture_names("responses")
ANTHROPIC = wire_fixture_names("anthropic")
ASK: dict[str, Any] = {
    "model": "m",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}


def expected(events: list[dict[str, Any]]) -> Any:
    """The turn the recorded dicts assemble to, or the type of the typed error they raise."""
    return result(lambda: reactivex.from_iterable(events).pipe(rt.assemble()).run())


def result(run: Callable[[], Any]) -> Any:
    try:
        turn = run()
    except rt.ToolCallStreamError as error:
        return type(error)
    assert isinstance(turn, rt.AssistantTurn)
    return turn


def claude(server: ReplayServer) -> Any:
    return anthropic.Anthropic(base_url=server.root_url, api_key="x", max_retries=0)


def async_claude(server: ReplayServer) -> Any:
    return anthropic.AsyncAnthropic(base_url=server.root_url, api_key="x", max_retries=0)


def gpt(server: ReplayServer) -> Any:
    return openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)


# -- every shared recording, through the server and the SDK ----------------------------------


async def async_outcome(source: reactivex.Observable[Any]) -> Any:
    try:
        turn = await source.pipe(rt.assemble())
    except rt.ToolCallStreamError as error:
        return type(error)
    assert isinstance(turn, rt.AssistantTurn)
    return turn


@pytest.mark.parametrize("name", RESPONSES)
def test_responses_recording_through_the_openai_sdk(name: str) -> None:
    events = load_wire("responses", name)
    want = expected(events)

    async def read_async(base_url: str) -> Any:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
        try:
            stream = await client.responses.create(model="m", input="hi", stream=True)
            got = await async_outcome(rt.from_async_openai_stream(stream))
            assert stream.response.is_closed
            return got
        finally:
            await client.close()

    with ReplayServer([events]) as server:
        client = gpt(server)
        stream = client.responses.create(model="m", input="hi", stream=True)
        got = result(lambda: rt.from_openai_stream(stream).pipe(rt.assemble()).run())
        assert stream.response.is_closed
        manager = client.responses.stream(model="m", input="hi")
        by_manager = result(lambda: rt.from_openai_stream(manager).pipe(rt.assemble()).run())
        got_async = asyncio.run(read_async(server.base_url))
        assert [r["stream"] for r in server.requests] == [True, True, True]
    assert got == want
    assert by_manager == want
    assert got_async == want


@pytest.mark.parametrize("name", ANTHROPIC)
def test_anthropic_recording_through_the_anthropic_sdk(name: str) -> None:
    events = load_wire("anthropic", name)
    want = expected(events)
    with ReplayServer([events]) as server:
        client = claude(server)
        created = client.messages.create(**ASK, stream=True)
        by_create = result(lambda: rt.from_anthropic_stream(created).pipe(rt.assemble()).run())
        with client.messages.stream(**ASK) as entered:
            by_stream = result(lambda: rt.from_anthropic_stream(entered).pipe(rt.assemble()).run())
        manager = client.messages.stream(**ASK)
        by_manager = result(lambda: rt.from_anthropic_stream(manager).pipe(rt.assemble()).run())
        assert created.response.is_closed
        assert entered.response.is_closed
        assert len(server.requests) == 3
    assert by_create == want
    assert by_stream == want
    assert by_manager == want


@pytest.mark.parametrize("name", ANTHROPIC)
def test_anthropic_recording_through_the_async_anthropic_sdk(name: str) -> None:
    events = load_wire("anthropic", name)
    want = expected(events)

    async def main(server: ReplayServer) -> list[Any]:
        client = async_claude(server)
        try:
            created = await client.messages.create(**ASK, stream=True)
            got = [await async_outcome(rt.from_async_anthropic_stream(created))]
            async with client.messages.stream(**ASK) as entered:
                got.append(await async_outcome(rt.from_async_anthropic_stream(entered)))
            manager = client.messages.stream(**ASK)
            got.append(await async_outcome(rt.from_async_anthropic_stream(manager)))
            assert created.response.is_closed
            return got
        finally:
            await client.close()

    with ReplayServer([events]) as server:
        got = asyncio.run(main(server))
        assert len(server.requests) == 3
    assert got == [want, want, want]


# -- dispose mid-stream: the connection and the reader go ------------------------------------

LONG_ANTHROPIC = load_wire("anthropic", "vercel-ai__server_web_search_with_citations")
LONG_RESPONSES = load_wire("responses", "pydantic-ai__reasoning_text_then_call_phase")
PACE = 0.05  # seconds per event: the stream is still running when the test disposes
SILENCE = 2.0  # seconds the server waits after the first event (then it sees the close)
QUICK = 1.5  # seconds within which a dispose frees the client's end (measured: milliseconds)


def sockets_before() -> frozenset[str]:
    """The sockets open before a test opens its own, once what earlier tests left is collected.

    A test then looks only at the sockets that are new since (``new_sockets``): an earlier
    test's socket that closes in the middle of this one changes nothing it checks.
    """
    gc.collect()
    return open_sockets()


def new_sockets(before: frozenset[str]) -> int:
    """How many sockets are open now that were not open in ``before``."""
    return len(open_sockets() - before)


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")


async def dispose_after_first(
    source: reactivex.Observable[Any], sockets: frozenset[str]
) -> tuple[int, int, list[str]]:
    """Dispose ``source`` once its first event arrives; (sockets new since ``sockets`` then,
    the same once none is left or BOUND passes, terminal notifications seen)."""
    got = asyncio.Event()
    notes: list[str] = []
    subscription = source.pipe(ops.do_action(lambda _: got.set())).subscribe(
        on_error=lambda _: notes.append("error"), on_completed=lambda: notes.append("done")
    )
    await asyncio.wait_for(got.wait(), BOUND)
    during = new_sockets(sockets)
    subscription.dispose()
    deadline = time.monotonic() + BOUND
    while new_sockets(sockets) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return during, new_sockets(sockets), notes


SyncOpener = Callable[[ReplayServer], reactivex.Observable[Any]]
SYNC_OPENERS: list[Any] = [
    pytest.param(
        lambda s: rt.from_anthropic_stream(claude(s).messages.create(**ASK, stream=True)),
        LONG_ANTHROPIC,
        id="anthropic-create",
    ),
    pytest.param(
        lambda s: rt.from_anthropic_stream(claude(s).messages.stream(**ASK)),
        LONG_ANTHROPIC,
        id="anthropic-manager",
    ),
    pytest.param(
        lambda s: rt.from_anthropic_stream(claude(s).messages.stream(**ASK).__enter__()),
        LONG_ANTHROPIC,
        id="anthropic-message-stream",
    ),
    pytest.param(
        lambda s: rt.from_openai_stream(
            gpt(s).responses.create(model="m", input="hi", stream=True)
        ),
        LONG_RESPONSES,
        id="openai-responses",
    ),
    pytest.param(
        lambda s: rt.from_openai_stream(gpt(s).responses.stream(model="m", input="hi")),
        LONG_RESPONSES,
        id="openai-responses-manager",
    ),
    pytest.param(
        lambda s: rt.from_openai_stream(gpt(s).responses.stream(model="m", input="hi").__enter__()),
        LONG_RESPONSES,
        id="openai-response-stream",
    ),
]


@needs_proc
@pytest.mark.parametrize(("opener", "events"), SYNC_OPENERS)
def test_dispose_mid_stream_frees_the_socket_and_the_reader(
    opener: SyncOpener, events: list[dict[str, Any]]
) -> None:
    seen: list[Any] = []
    got = threading.Event()
    notes: list[str] = []
    # The server is silent after the first event and closes its end when the client's goes:
    # only shutting the socket down frees both before it speaks again.
    with ReplayServer([events], delay=SILENCE) as server:
        threads = set(threading.enumerate())
        sockets = sockets_before()

        def on_next(event: Any) -> None:
            seen.append(event)
            got.set()

        subscription = opener(server).subscribe(
            on_next,
            lambda _: notes.append("error"),
            lambda: notes.append("completed"),
            scheduler=NewThreadScheduler(),
        )
        assert got.wait(BOUND)
        assert new_sockets(sockets) == 2  # the stream's two ends, while it runs
        disposed = time.monotonic()
        subscription.dispose()
        assert settle(lambda: not new_sockets(sockets)), "a socket outlived the dispose"
        assert time.monotonic() - disposed < QUICK, "the close waited for the server's next event"
        assert server.disconnects == 1
        assert settle(lambda: set(threading.enumerate()) <= threads), "a thread outlived it"
    assert notes == []
    assert 0 < len(seen) < len(events)


@needs_proc
@pytest.mark.parametrize("kind", ["create", "manager", "message-stream", "responses"])
def test_async_dispose_mid_stream_frees_the_socket(kind: str) -> None:
    async def main(server: ReplayServer) -> tuple[int, int, list[str]]:
        sockets = sockets_before()
        claude_client = async_claude(server)
        gpt_client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        if kind == "create":
            source = rt.from_async_anthropic_stream(
                await claude_client.messages.create(**ASK, stream=True)
            )
        elif kind == "manager":
            source = rt.from_async_anthropic_stream(claude_client.messages.stream(**ASK))
        elif kind == "message-stream":
            entered = await claude_client.messages.stream(**ASK).__aenter__()
            source = rt.from_async_anthropic_stream(entered)
        else:
            stream = await gpt_client.responses.create(model="m", input="hi", stream=True)
            source = rt.from_async_openai_stream(stream)
        during, after, notes = await dispose_after_first(source, sockets)
        await claude_client.close()
        await gpt_client.close()
        return during, after, notes

    events = LONG_RESPONSES if kind == "responses" else LONG_ANTHROPIC
    with ReplayServer([events], delay=PACE) as server:
        during, after, notes = asyncio.run(main(server))
        assert settle(lambda: server.disconnects == 1), "the server never saw the close"
    assert during > 0
    assert after == 0
    assert notes == []


# -- what the SDKs add or raise ---------------------------------------------------------------

TOOL_TURN = [
    a_start(),
    *a_text(0, "Let me look."),
    *a_tool(1, "toolu_a", "get_weather", '{"city": "Paris"}'),
    *a_end(),
]


def test_message_stream_events_of_its_own_are_left_out() -> None:
    with ReplayServer([TOOL_TURN]) as server, claude(server).messages.stream(**ASK) as stream:
        everything = list(stream)  # the manager's events, its own among them
    own = {e.type for e in everything} - {e["type"] for e in TOOL_TURN}
    assert own == {"text", "input_json"}
    passed = rt.from_anthropic_stream(everything).pipe(ops.to_list()).run()
    assert [e.type for e in passed] == [e["type"] for e in TOOL_TURN]
    turn = rt.from_anthropic_stream(everything).pipe(rt.assemble()).run()
    assert turn == reactivex.from_iterable(TOOL_TURN).pipe(rt.assemble()).run()
    assert [(c.id, c.parsed_arguments) for c in turn.tool_calls] == [("toolu_a", {"city": "Paris"})]


def helper_failure(read: Callable[[], object]) -> type[BaseException]:
    """What an SDK helper raises reading a malformed stream; its generators closed after."""
    try:
        read()
    except Exception as error:  # noqa: BLE001 - whatever it raises is the point
        kind: type[BaseException] = type(error)
    else:
        raise AssertionError("the helper read a malformed stream without failing")
    # The helper leaves a generator in a reference cycle: closed now, not in a later test.
    gc.collect()
    return kind


def test_a_malformed_stream_through_the_manager_is_our_typed_error() -> None:
    stray = [a_start(), a_piece(3, '{"a": 1}'), *a_end()]

    def read_with_the_manager(server: ReplayServer) -> object:
        with claude(server).messages.stream(**ASK) as stream:
            return list(stream)

    with ReplayServer([stray, stray]) as server:
        # The manager's own accumulator fails first, and not with one of ours.
        assert helper_failure(lambda: read_with_the_manager(server)) is IndexError
        manager = claude(server).messages.stream(**ASK)
        with pytest.raises(rt.MalformedChunkError, match="no block was started"):
            rt.from_anthropic_stream(manager).pipe(rt.assemble()).run()


def test_a_malformed_stream_through_the_responses_helper_is_our_typed_error() -> None:
    stray: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1"}},
        {"type": "response.function_call_arguments.delta", "output_index": 4, "delta": "{}"},
        {"type": "response.completed", "response": {"id": "resp_1", "output": []}},
    ]

    def read_with_the_helper(server: ReplayServer) -> object:
        with gpt(server).responses.stream(model="m", input="hi") as stream:
            return list(stream)

    with ReplayServer([stray, stray]) as server:
        failed = helper_failure(lambda: read_with_the_helper(server))
        assert not issubclass(failed, rt.ToolCallStreamError)
        manager = gpt(server).responses.stream(model="m", input="hi")
        with pytest.raises(rt.MalformedChunkError):
            rt.from_openai_stream(manager).pipe(rt.assemble()).run()


ERROR_MID_STREAM = [
    a_start(),
    a_tool_open(0, "toolu_a", "f"),
    a_piece(0, '{"a'),
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
]


def test_an_error_event_is_a_retryable_provider_error_sync_and_async() -> None:
    async def read_async(server: ReplayServer) -> rt.ProviderError:
        client = async_claude(server)
        try:
            with pytest.raises(rt.ProviderError) as caught:
                await rt.from_async_anthropic_stream(client.messages.stream(**ASK)).pipe(
                    rt.assemble()
                )
            return caught.value
        finally:
            await client.close()

    with ReplayServer([ERROR_MID_STREAM]) as server:
        stream = claude(server).messages.create(**ASK, stream=True)
        with pytest.raises(rt.ProviderError) as caught:
            rt.from_anthropic_stream(stream).pipe(rt.assemble()).run()
        late = asyncio.run(read_async(server))
    for error in (caught.value, late):
        assert error.retryable is True
        assert error.code == "overloaded_error"
        assert "Overloaded" in str(error)
        assert isinstance(error.__cause__, anthropic.APIStatusError)


def refusing_client(status: int, kind: str) -> Any:
    def answer(request: Any) -> Any:
        body = {"type": "error", "error": {"type": kind, "message": f"said {kind}"}}
        return httpx2.Response(status, json=body)

    return anthropic.Anthropic(
        api_key="x",
        base_url="http://fake.invalid",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )


@pytest.mark.parametrize(
    ("status", "kind", "again"),
    [
        (529, "overloaded_error", True),
        (429, "rate_limit_error", True),
        (500, "api_error", True),
        (400, "invalid_request_error", False),
    ],
)
def test_an_error_status_when_the_manager_sends_is_a_provider_error(
    status: int, kind: str, again: bool
) -> None:
    manager = refusing_client(status, kind).messages.stream(**ASK)
    errors: list[Exception] = []
    rt.from_anthropic_stream(manager).subscribe(on_error=errors.append)
    [error] = errors
    assert isinstance(error, rt.ProviderError)
    assert (error.retryable, error.code) == (again, kind)
    assert f"HTTP {status}" in str(error)
    assert f"said {kind}" in str(error)
    assert (error.hint is not None) is again


def test_a_manager_sends_a_new_request_per_subscription() -> None:
    with ReplayServer([TOOL_TURN]) as server:
        source = rt.from_anthropic_stream(claude(server).messages.stream(**ASK)).pipe(rt.assemble())
        first, second = source.run(), source.run()
        assert len(server.requests) == 2
    assert first == second
    assert [c.name for c in first.tool_calls] == ["get_weather"]


def test_a_dropped_anthropic_stream_is_an_interruption() -> None:
    with ReplayServer([TOOL_TURN], cut={0: 5}) as server:
        stream = claude(server).messages.create(**ASK, stream=True)
        with pytest.raises(rt.StreamInterruptedError):
            rt.from_anthropic_stream(stream).pipe(rt.assemble()).run()


def test_responses_in_band_error_through_the_openai_sdk() -> None:
    events = load_wire("responses", "vercel-ai__error_then_response_failed")
    with ReplayServer([events]) as server:
        stream = gpt(server).responses.create(model="m", input="hi", stream=True)
        with pytest.raises(rt.ProviderError) as caught:
            rt.from_openai_stream(stream).pipe(rt.assemble()).run()
    assert caught.value.code == "insufficient_quota"
    assert caught.value.retryable is False


# -- the server: named events, non-stream answers, wrong paths --------------------------------


def test_responses_and_anthropic_events_are_named_by_their_type() -> None:
    with ReplayServer([TOOL_TURN, load_fixture("openai__single_tool_call")]) as server:
        body = {"model": "m", "stream": True}
        anthropic_text = httpx.post(f"{server.root_url}/v1/messages", json=body).text
        chat_text = httpx.post(f"{server.base_url}/chat/completions", json=body).text
    assert anthropic_text.startswith('event: message_start\ndata: {"type": "message_start"')
    assert anthropic_text.count("event: ") == len(TOOL_TURN)
    assert "[DONE]" not in anthropic_text
    assert "event: " not in chat_text
    assert chat_text.endswith("data: [DONE]\n\n")


def test_non_stream_requests_get_the_object_the_recording_stands_for() -> None:
    responses = load_wire("responses", "pydantic-ai__single_call_get_capital")
    with ReplayServer([TOOL_TURN, responses]) as server:
        message = claude(server).messages.create(**ASK)
        response = gpt(server).responses.create(model="m", input="hi")
    turn = reactivex.from_iterable(TOOL_TURN).pipe(rt.assemble()).run()
    assert message.stop_reason == "tool_use"
    assert [b.model_dump(exclude_none=True) for b in message.content] == turn.to_message()[
        "content"
    ]
    assert message.usage.output_tokens == 42
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        ("call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", '{"country":"France"}')
    ]
    assert response.status == "completed"


def test_a_recording_that_fails_to_assemble_is_a_502_in_the_wire_shape() -> None:
    with (
        ReplayServer([ERROR_MID_STREAM]) as server,
        pytest.raises(anthropic.InternalServerError) as caught,
    ):
        claude(server).messages.create(**ASK)
    assert caught.value.status_code == 502
    assert caught.value.type == "api_error"
    assert "Overloaded" in str(caught.value)


def test_a_recording_asked_for_at_another_wires_path_is_a_clear_400() -> None:
    with ReplayServer([load_fixture("openai__single_tool_call"), TOOL_TURN]) as server:
        with pytest.raises(anthropic.BadRequestError, match="/v1/chat/completions"):
            claude(server).messages.create(**ASK, stream=True)
        with pytest.raises(openai.BadRequestError, match="/v1/messages"):
            gpt(server).responses.create(model="m", input="hi", stream=True)
        with pytest.raises(openai.NotFoundError, match="/v1/responses"):
            gpt(server).embeddings.create(model="m", input="hi")


class AsyncManager:
    """The shape of ``AsyncMessageStreamManager`` (the SDK's would start its request)."""

    async def __aenter__(self) -> Any:
        raise AssertionError("never entered")

    async def __aexit__(self, *exc: object) -> None:
        raise AssertionError("never entered")


def test_what_is_not_an_anthropic_stream_is_a_type_error_at_once() -> None:
    with ReplayServer([TOOL_TURN]) as server:
        client = claude(server)
        with pytest.raises(TypeError, match=r"not int$"):
            rt.from_anthropic_stream(42)
        with pytest.raises(TypeError, match="use from_async_anthropic_stream"):
            rt.from_anthropic_stream(AsyncManager())
        with pytest.raises(TypeError, match="use from_anthropic_stream"):
            rt.from_async_anthropic_stream(client.messages.stream(**ASK))
        with pytest.raises(TypeError, match="not list: use from_anthropic_stream"):
            rt.from_async_anthropic_stream(TOOL_TURN)
        assert server.requests == []  # nothing was sent


def test_an_error_status_when_the_async_manager_sends_is_a_provider_error() -> None:
    def answer(request: Any) -> Any:
        body = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
        return httpx2.Response(529, json=body)

    async def main() -> Exception:
        client = anthropic.AsyncAnthropic(
            api_key="x",
            base_url="http://fake.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
        )
        try:
            with pytest.raises(rt.ProviderError) as caught:
                await rt.from_async_anthropic_stream(client.messages.stream(**ASK))
            return caught.value
        finally:
            await client.close()

    error = asyncio.run(main())
    assert isinstance(error, rt.ProviderError)
    assert (error.retryable, error.code) == (True, "overloaded_error")
    assert "HTTP 529" in str(error)


def post(server: ReplayServer, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    response = httpx.post(f"{server.root_url}{path}", json=body)
    kind = response.headers.get("content-type", "")
    return response.status_code, response.json() if "json" in kind else response.text


def test_each_recording_knows_its_wire_and_one_without_is_served_anywhere() -> None:
    lone_error = [{"type": "error", "error": {"type": "api_error", "message": "down"}}]
    chat = load_fixture("openai__single_tool_call")
    responses = load_wire("responses", "pydantic-ai__single_call_get_capital")
    with ReplayServer([chat, responses, TOOL_TURN, lone_error]) as server:
        assert server.wires == ["chat", "responses", "anthropic", None]
        for path in ("/v1/chat/completions", "/v1/responses", "/v1/messages"):
            assert post(server, path, {"stream": True})[0] == 200  # each at its wire's path
        status, text = post(server, "/v1/messages", {"stream": True})
        assert status == 200
        assert text == (
            'event: error\ndata: {"type": "error", "error": {"type": "api_error", '
            '"message": "down"}}\n\n'
        )
        status, body = post(server, "/v1/responses", {})
    assert status == 502
    assert body["error"]["type"] == "ProviderError"
    assert "down" in body["error"]["message"]


def test_wrong_paths_and_bodies_answer_in_the_wire_shape() -> None:
    with ReplayServer([TOOL_TURN]) as server:
        status, body = post(server, "/v1/embeddings", {})
        assert status == 404
        assert "/v1/responses" in body["error"]["message"]
        bad = httpx.post(f"{server.root_url}/v1/messages", content=b"[1, 2")
        assert bad.status_code == 400
        assert bad.json() == {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "the body is not JSON"},
        }


@pytest.mark.parametrize(
    ("status", "code", "again"),
    [(429, "rate_limit_exceeded", True), (503, "server_error", True), (400, "bad_input", False)],
)
def test_an_error_status_when_the_responses_manager_sends_is_a_provider_error(
    status: int, code: str, again: bool
) -> None:
    def answer(request: Any) -> Any:
        error = {"message": f"said {code}", "type": "x", "code": code, "param": None}
        return httpx2.Response(status, json={"error": error})

    client = openai.OpenAI(
        api_key="x",
        base_url="http://fake.invalid/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )
    errors: list[Exception] = []
    manager = client.responses.stream(model="m", input="hi")
    rt.from_openai_stream(manager).subscribe(on_error=errors.append)
    [error] = errors
    assert isinstance(error, rt.ProviderError)
    assert (error.retryable, error.code) == (again, code)
    assert f"HTTP {status}" in str(error)
    assert isinstance(error.__cause__, openai.APIStatusError)


@pytest.mark.parametrize("wire", ["anthropic", "responses"])
def test_one_helper_manager_read_by_two_subscriptions_at_once(wire: str) -> None:
    events = TOOL_TURN if wire == "anthropic" else load_wire("responses", RESPONSES[0])
    want = expected(events)
    with ReplayServer([events], delay=0.005) as server:
        if wire == "anthropic":
            source = rt.from_anthropic_stream(claude(server).messages.stream(**ASK))
        else:
            source = rt.from_openai_stream(gpt(server).responses.stream(model="m", input="hi"))
        turns = source.pipe(rt.assemble())
        # Each reads on a thread of its own; one ending must not close the other's response.
        both = reactivex.merge(turns, turns).pipe(ops.to_list()).run()
        assert len(server.requests) == 2
    assert both == [want, want]
