"""to_async_iterator: order, errors, early exits that dispose, threads, and hostile use."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import reactivex
from reactivex import Observable, abc
from reactivex.disposable import Disposable

import rxtoolcalls as rt
from tests.helpers import load_fixture


class Watched:
    """A source made by ``reactivex.create``: how often it was subscribed and disposed."""

    def __init__(self, emit: Callable[[abc.ObserverBase[Any], threading.Event], None]) -> None:
        self.emit = emit
        self.subscribed = 0
        self.disposed = threading.Event()
        self.observable: Observable[Any] = reactivex.create(self._subscribe)

    def _subscribe(
        self, observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        self.subscribed += 1
        self.emit(observer, self.disposed)
        return Disposable(self.disposed.set)


def on_thread(values: list[Any], end: Exception | None = None) -> Watched:
    """A source sending ``values`` (then ``end``) from a thread of its own until disposed."""
    threads: list[threading.Thread] = []

    def emit(observer: abc.ObserverBase[Any], disposed: threading.Event) -> None:
        def run() -> None:
            for value in values:
                if disposed.is_set():
                    return
                observer.on_next(value)
            if end is None:
                observer.on_completed()
            else:
                observer.on_error(end)

        thread = threading.Thread(target=run, daemon=True)
        threads.append(thread)
        thread.start()

    watched = Watched(emit)
    watched.threads = threads  # type: ignore[attr-defined]
    return watched


def never() -> Watched:
    return Watched(lambda observer, disposed: None)


async def read_all(source: Observable[Any]) -> list[Any]:
    return [item async for item in rt.to_async_iterator(source)]


def test_items_in_order_then_completion() -> None:
    assert asyncio.run(read_all(reactivex.of(1, 2, 3))) == [1, 2, 3]


def test_synchronous_emission_on_subscribe() -> None:
    def emit(observer: abc.ObserverBase[Any], disposed: threading.Event) -> None:
        for i in range(5):
            observer.on_next(i)
        observer.on_completed()

    source = Watched(emit)
    assert asyncio.run(read_all(source.observable)) == [0, 1, 2, 3, 4]
    assert source.subscribed == 1
    assert source.disposed.is_set()


def test_empty_observable() -> None:
    assert asyncio.run(read_all(reactivex.empty())) == []


def test_error_after_items_is_the_same_object() -> None:
    failure = ConnectionError("gone")
    seen: list[Any] = []

    async def main() -> None:
        async for item in rt.to_async_iterator(
            reactivex.concat(reactivex.of(1, 2), reactivex.throw(failure))
        ):
            seen.append(item)  # noqa: PERF401 - what came before the error counts

    with pytest.raises(ConnectionError) as raised:
        asyncio.run(main())
    assert raised.value is failure
    assert seen == [1, 2]


def test_error_from_another_thread_is_the_same_object() -> None:
    failure = rt.StreamInterruptedError("cut")
    source = on_thread(list(range(100)), failure)
    seen: list[int] = []

    async def main() -> None:
        async for item in rt.to_async_iterator(source.observable):
            seen.append(item)  # noqa: PERF401 - what came before the error counts

    with pytest.raises(rt.StreamInterruptedError) as raised:
        asyncio.run(main())
    assert raised.value is failure
    assert seen == list(range(100))


def test_a_source_that_raises_on_subscribe() -> None:
    failure = RuntimeError("cannot subscribe")

    def subscribe(observer: abc.ObserverBase[Any], scheduler: Any = None) -> abc.DisposableBase:
        raise failure

    for source in (reactivex.create(subscribe), Observable(subscribe)):
        with pytest.raises(RuntimeError) as raised:
            asyncio.run(read_all(source))
        assert raised.value is failure


def test_not_subscribed_until_iterated() -> None:
    source = never()

    async def main() -> None:
        iterator = rt.to_async_iterator(source.observable)
        await iterator.aclose()

    asyncio.run(main())
    assert source.subscribed == 0


def test_break_after_first_item_disposes() -> None:
    source = on_thread(list(range(1_000_000)))

    async def main() -> None:
        async for _ in rt.to_async_iterator(source.observable):
            break
        # asyncio closes the abandoned generator within a loop step or two.
        for _ in range(10):
            if source.disposed.is_set():
                return
            await asyncio.sleep(0)

    asyncio.run(main())
    assert source.disposed.is_set()
    for thread in source.threads:  # type: ignore[attr-defined]
        thread.join(5)
        assert not thread.is_alive()  # the sender stopped: the dispose reached it


def test_aclosing_disposes_at_once() -> None:
    source = on_thread(list(range(1_000_000)))

    async def main() -> None:
        async with contextlib.aclosing(rt.to_async_iterator(source.observable)) as items:
            async for item in items:
                assert item == 0
                break
        assert source.disposed.is_set()

    asyncio.run(main())


def test_aclose_after_an_item_disposes() -> None:
    source = never()

    async def main() -> None:
        iterator = rt.to_async_iterator(reactivex.concat(reactivex.of("a"), source.observable))
        assert await anext(iterator) == "a"
        while source.subscribed == 0:  # concat subscribes to it on a later loop step
            await asyncio.sleep(0)
        assert not source.disposed.is_set()
        await iterator.aclose()
        assert source.disposed.is_set()
        with pytest.raises(StopAsyncIteration):
            await anext(iterator)

    asyncio.run(main())


def test_cancel_while_waiting_disposes() -> None:
    source = never()

    async def main() -> None:
        async def consume() -> None:
            async for _ in rt.to_async_iterator(source.observable):
                pass

        task = asyncio.create_task(consume())
        while source.subscribed == 0:
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert source.disposed.is_set()

    asyncio.run(main())


def test_ten_thousand_items_from_another_thread() -> None:
    values = list(range(10_000))
    source = on_thread(values)
    assert asyncio.run(read_all(source.observable)) == values
    assert source.disposed.is_set()


def test_ten_thousand_items_at_once() -> None:
    values = list(range(10_000))
    assert asyncio.run(read_all(reactivex.from_iterable(values))) == values


def test_many_concurrent_iterators() -> None:
    async def main() -> list[list[int]]:
        sources = [on_thread(list(range(i, i + 200))) for i in range(100)]
        sources += [Watched(lambda o, d: None) for _ in range(10)]  # never end: cancelled
        readers = [asyncio.create_task(read_all(s.observable)) for s in sources[:100]]
        waiting = [asyncio.create_task(read_all(s.observable)) for s in sources[100:]]
        results = await asyncio.gather(*readers)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert all(s.disposed.is_set() for s in sources)
        return results

    results = asyncio.run(main())
    assert results == [list(range(i, i + 200)) for i in range(100)]


def test_items_sent_after_the_reader_left_are_dropped() -> None:
    observers: list[abc.ObserverBase[Any]] = []
    source = Watched(lambda observer, disposed: observers.append(observer))

    async def main() -> None:
        iterator = rt.to_async_iterator(source.observable)
        task = asyncio.ensure_future(anext(iterator))
        await asyncio.sleep(0)
        observers[0].on_next(1)
        assert await task == 1
        await iterator.aclose()
        observers[0].on_next(2)  # a source deaf to the dispose: nothing is kept
        with pytest.raises(StopAsyncIteration):
            await anext(iterator)

    asyncio.run(main())


def test_assembles_a_turn_read_on_the_loop() -> None:
    chunks = load_fixture("openai__parallel_tool_calls")
    turns = asyncio.run(read_all(reactivex.from_iterable(chunks).pipe(rt.assemble())))
    assert [[c.name for c in t.tool_calls] for t in turns] == [
        ["GetWeatherArgs", "get_stock_price"]
    ]


def test_not_an_observable_is_a_type_error_at_once() -> None:
    for value in ([1, 2], None, iter([1])):
        with pytest.raises(TypeError, match="needs an Observable, got"):
            rt.to_async_iterator(value)  # type: ignore[arg-type]


def test_public() -> None:
    assert "to_async_iterator" in rt.__all__
    assert rt.to_async_iterator.__module__.startswith("rxtoolcalls")


@pytest.mark.json_parser
def test_a_blocking_source_is_read_off_the_loop() -> None:
    # A sync stream with no socket to shut down (a generator, boto3's EventStream, iter_bytes())
    # is read on a thread of its own: a blocking read in the loop would stall every task.
    readers: set[int] = set()

    def body() -> Iterator[bytes]:
        for chunk in rt.sources.read_jsonl(rt.sources.demo_path()):
            readers.add(threading.get_ident())
            yield f"data: {json.dumps(chunk)}\n\n".encode()

    async def main() -> list[object]:
        return [item async for item in rt.to_async_iterator(rt.from_sse(body()))]

    items = asyncio.run(main())
    assert items == list(rt.sources.read_jsonl(rt.sources.demo_path()))
    assert readers
    assert threading.get_ident() not in readers


@pytest.mark.json_parser
def test_leaving_a_blocking_source_ends_its_reader_thread_and_closes_it() -> None:
    # The reader thread started for a blocking source stops at the next chunk after the
    # consumer leaves, and the source is closed: no thread and no open body stay behind.
    closed = threading.Event()

    def body() -> Iterator[bytes]:
        try:
            for chunk in rt.sources.read_jsonl(rt.sources.demo_path()):
                yield f"data: {json.dumps(chunk)}\n\n".encode()
                time.sleep(0.005)
        finally:
            closed.set()

    async def main() -> None:
        async with contextlib.aclosing(rt.to_async_iterator(rt.from_sse(body()))) as items:
            async for _ in items:
                break

    before = {thread.ident for thread in threading.enumerate()}
    asyncio.run(main())
    assert closed.wait(5)
    deadline = time.monotonic() + 5
    while {t.ident for t in threading.enumerate() if t.name == "rxtoolcalls-reader"} - before:
        assert time.monotonic() < deadline, "the reader thread outlived the consumer"
        time.sleep(0.01)
