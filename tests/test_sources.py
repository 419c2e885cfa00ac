"""Sources: capture files and async iterators (cancel on dispose, errors as on_error)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from tests.helpers import FIXTURES, load_fixture


@pytest.mark.json_parser
def test_from_jsonl_reads_path_and_lines(tmp_path: Path) -> None:
    path = FIXTURES / "openai__single_tool_call.jsonl"
    from_path = rt.from_jsonl(path).pipe(ops.to_list()).run()
    assert from_path == load_fixture("openai__single_tool_call")
    from_lines = rt.from_jsonl(path.read_text().splitlines()).pipe(ops.to_list()).run()
    assert from_lines == from_path
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"choices": []}\n[1]\n')
    with pytest.raises(rt.MalformedChunkError, match="line 2"):
        rt.from_jsonl(bad).pipe(ops.to_list()).run()


class Chunks:
    """An async iterator of chunks that records whether it was closed."""

    def __init__(self, chunks: list[Any], delay: float = 0.0, fail_after: int | None = None):
        self.chunks, self.delay, self.fail_after = chunks, delay, fail_after
        self.closed = False
        self.sent = 0

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._run()

    async def _run(self) -> AsyncIterator[Any]:
        for chunk in self.chunks:
            if self.fail_after is not None and self.sent == self.fail_after:
                raise ConnectionError("dropped")
            await asyncio.sleep(self.delay)
            self.sent += 1
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def test_async_source_assembles() -> None:
    source = Chunks(load_fixture("openai__parallel_tool_calls"))

    async def main() -> rt.AssistantTurn:
        turn: rt.AssistantTurn = await rt.from_async_iterable(lambda: source).pipe(rt.assemble())
        return turn

    turn = asyncio.run(main())
    assert [c.name for c in turn.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert source.closed


def test_async_source_error_is_an_interruption() -> None:
    source = Chunks(load_fixture("openai__parallel_tool_calls"), fail_after=5)

    async def main() -> None:
        await rt.from_async_iterable(lambda: source).pipe(rt.assemble())

    with pytest.raises(rt.StreamInterruptedError) as info:
        asyncio.run(main())
    assert isinstance(info.value.__cause__, ConnectionError)
    assert source.closed


def test_dispose_cancels_the_read_and_closes() -> None:
    source = Chunks(load_fixture("openai__parallel_tool_calls"), delay=0.01)

    async def main() -> list[Any]:
        got: list[Any] = []
        disposable = (
            rt.from_async_iterable(lambda: source).pipe(rt.assemble()).subscribe(got.append)
        )
        for _ in range(500):  # until the first chunk is read (in milliseconds)
            if source.sent:
                break
            await asyncio.sleep(0.01)
        disposable.dispose()
        await asyncio.sleep(0.05)
        return got

    assert asyncio.run(main()) == []
    assert source.closed
    assert 0 < source.sent < 25


def test_subscribing_without_a_loop_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="running asyncio loop"):
        rt.from_async_iterable(lambda: Chunks([])).subscribe()


def test_subscribing_from_another_thread() -> None:
    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        source = rt.from_async_iterable(
            lambda: Chunks(load_fixture("openai__single_tool_call")), loop=loop
        )
        future: asyncio.Future[Any] = loop.create_future()

        def deliver(turn: rt.AssistantTurn) -> None:
            loop.call_soon_threadsafe(future.set_result, turn)

        def subscribe_elsewhere() -> None:
            source.pipe(rt.assemble()).subscribe(deliver)

        await asyncio.to_thread(subscribe_elsewhere)
        return [await asyncio.wait_for(future, 5)]

    (turn,) = asyncio.run(main())
    assert turn.tool_calls[0].name == "GetWeatherArgs"


def test_many_concurrent_streams_on_one_loop() -> None:
    chunks = load_fixture("openai__parallel_tool_calls")

    async def one() -> rt.AssistantTurn:
        turn: rt.AssistantTurn = await rt.from_async_iterable(lambda: Chunks(chunks)).pipe(
            rt.assemble()
        )
        return turn

    async def main() -> list[rt.AssistantTurn]:
        return await asyncio.gather(*(one() for _ in range(200)))

    turns = asyncio.run(main())
    assert len({t.tool_calls for t in turns}) == 1
