"""End to end over loopback HTTP with the real openai client (sync and async, no network)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.serve import ReplayServer
from tests.helpers import extra, load_fixture

openai = pytest.importorskip("openai", reason=extra("openai"))

PARALLEL = load_fixture("openai__parallel_tool_calls")


def prose(text: str) -> list[dict[str, Any]]:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    words = text.split(" ")
    return (
        [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
        + [
            {
                **base,
                "choices": [
                    {"index": 0, "delta": {"content": w + (" " if i < len(words) - 1 else "")}}
                ],
            }
            for i, w in enumerate(words)
        ]
        + [{**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    )


def client(server: ReplayServer) -> Any:
    return openai.OpenAI(api_key="test", base_url=server.base_url, max_retries=0)


def create(server: ReplayServer, messages: list[dict[str, Any]] | None = None) -> Any:
    return client(server).chat.completions.create(
        model="m", messages=messages or [{"role": "user", "content": "hi"}], stream=True
    )


def test_sync_stream() -> None:
    with ReplayServer([PARALLEL], delay=0.001) as server:
        turn = rt.from_openai_stream(create(server)).pipe(rt.assemble()).run()
    assert [c.name for c in turn.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert server.requests[0]["stream"] is True


def test_async_stream() -> None:
    async def main(server: ReplayServer) -> rt.AssistantTurn:
        aclient = openai.AsyncOpenAI(api_key="test", base_url=server.base_url, max_retries=0)
        stream = await aclient.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        turn: rt.AssistantTurn = await rt.from_async_openai_stream(stream).pipe(rt.assemble())
        return turn

    with ReplayServer([PARALLEL], delay=0.001) as server:
        turn = asyncio.run(main(server))
    assert len(turn.tool_calls) == 2


def test_connection_dropped_mid_arguments_is_typed() -> None:
    with (
        ReplayServer([PARALLEL], cut={0: 9}) as server,
        pytest.raises(rt.StreamInterruptedError, match="finish_reason"),
    ):
        rt.from_openai_stream(create(server)).pipe(rt.assemble()).run()


def test_dispose_mid_stream_closes_the_connection() -> None:
    with ReplayServer([PARALLEL], delay=0.02) as server:
        stream = create(server)
        got: list[Any] = []
        done = threading.Event()
        disposable = (
            rt.from_openai_stream(stream)
            .pipe(ops.do_action(got.append), rt.assemble())
            .subscribe(
                on_error=lambda e: done.set(), scheduler=reactivex.scheduler.NewThreadScheduler()
            )
        )
        while len(got) < 3:
            time.sleep(0.005)
        disposable.dispose()
        deadline = time.monotonic() + 3
        while server.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.disconnects == 1
        assert len(got) < len(PARALLEL)
        assert stream.response.is_closed


def get_weather(city: str, country: str, units: str) -> dict[str, Any]:
    return {"city": city, "temperature": 11, "units": units}


def get_stock_price(ticker: str, exchange: str) -> str:
    return f"{ticker} 189.98 USD"


TOOLS: dict[str, Callable[..., Any]] = {
    "GetWeatherArgs": get_weather,
    "get_stock_price": get_stock_price,
}


def test_two_turn_conversation_with_the_agent_loop() -> None:
    answer = prose("Edinburgh is at 11 C and AAPL trades at 189.98 USD.")
    with ReplayServer([PARALLEL, answer]) as server:
        sdk = client(server)

        def open_stream(messages: list[dict[str, Any]]) -> Any:
            return sdk.chat.completions.create(model="m", messages=messages, stream=True)

        events = (
            rt.agent_loop(open_stream, TOOLS, [{"role": "user", "content": "hi"}])
            .pipe(ops.to_list())
            .run()
        )
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "ToolCallStarted",
        "ToolCallStarted",
        "TurnFinished",
        "ToolCallFinished",
        "ToolCallFinished",
        "TurnFinished",
        "Conversation",
    ]
    conversation = events[-1]
    assert isinstance(conversation, rt.Conversation)
    roles = [m["role"] for m in conversation.messages]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    assert (
        conversation.messages[-1]["content"]
        == "Edinburgh is at 11 C and AAPL trades at 189.98 USD."
    )
    # The second request carried the full transcript, tool answers included, in call order.
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert second[2]["tool_call_id"] == second[1]["tool_calls"][0]["id"]
    assert second[3]["content"] == "AAPL 189.98 USD"


def test_dropped_turn_is_retried_and_each_tool_runs_once() -> None:
    calls: list[str] = []

    def counting_weather(**kwargs: Any) -> str:
        calls.append("weather")
        return "11 C"

    def counting_stock(**kwargs: Any) -> str:
        calls.append("stock")
        return "189.98"

    tools = {"GetWeatherArgs": counting_weather, "get_stock_price": counting_stock}
    with ReplayServer([PARALLEL, PARALLEL, prose("Done.")], cut={0: 12}) as server:
        sdk = client(server)

        def open_stream(messages: list[dict[str, Any]]) -> Any:
            return sdk.chat.completions.create(model="m", messages=messages, stream=True)

        events = (
            rt.agent_loop(open_stream, tools, [{"role": "user", "content": "hi"}], backoff=0.01)
            .pipe(ops.to_list())
            .run()
        )
    retried = [e for e in events if isinstance(e, rt.TurnRetried)]
    assert len(retried) == 1
    assert isinstance(retried[0].error, rt.StreamInterruptedError)
    assert sorted(calls) == ["stock", "weather"]
    assert len(server.requests) == 3
    assert server.requests[0]["messages"] == server.requests[1]["messages"]
    assert isinstance(events[-1], rt.Conversation)


def test_async_dispose_mid_stream_closes_the_connection() -> None:
    async def main(server: ReplayServer) -> tuple[int, bool]:
        aclient = openai.AsyncOpenAI(api_key="test", base_url=server.base_url, max_retries=0)
        stream = await aclient.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        got: list[Any] = []
        disposable = (
            rt.from_async_openai_stream(stream)
            .pipe(ops.do_action(got.append), rt.assemble())
            .subscribe(on_error=lambda e: None)
        )
        while len(got) < 3:
            await asyncio.sleep(0.005)
        disposable.dispose()
        for _ in range(300):
            if server.disconnects:
                break
            await asyncio.sleep(0.01)
        await aclient.close()
        return len(got), stream.response.is_closed

    with ReplayServer([PARALLEL], delay=0.02) as server:
        received, closed = asyncio.run(main(server))
    assert server.disconnects == 1
    assert received < len(PARALLEL)
    assert closed
