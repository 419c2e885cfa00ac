"""From an Observable to ``async for``: the bridge asyncio code (FastAPI, Starlette) reads."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncGenerator
from typing import Generic, TypeVar

from reactivex import Observable
from reactivex.scheduler.eventloop import AsyncIOThreadSafeScheduler

__all__ = ["to_async_iterator"]

T = TypeVar("T")


def to_async_iterator(source: Observable[T]) -> AsyncGenerator[T, None]:
    """An async iterator of ``source``'s items, for ``async for`` on an asyncio loop.

    It subscribes at the first ``__anext__``, with the running loop as the scheduler (a sync
    SDK stream is then read on a thread of its own); items sent from any thread arrive in
    order. ``on_error`` raises that same exception at the ``async for``; ``on_completed``
    ends it. Every item is buffered until read, with no limit and no backpressure: a source
    faster than its reader costs memory, never an item. Leaving early disposes the
    subscription: ``aclose()``, a cancelled task (Starlette cancels a disconnected client's),
    or ``break`` (asyncio closes an abandoned async generator a loop step later;
    ``contextlib.aclosing`` closes it at once). Each call subscribes once.

    >>> import asyncio, reactivex
    >>> async def main() -> list[int]:
    ...     return [x async for x in to_async_iterator(reactivex.of(1, 2, 3))]
    >>> asyncio.run(main())
    [1, 2, 3]

    Raises ``TypeError`` at once when ``source`` is not an Observable.
    """
    if not isinstance(source, Observable):
        raise TypeError(
            f"to_async_iterator needs an Observable, got {type(source).__name__}: pipe an SDK "
            f"stream through a source first (from_openai_stream, from_async_iterable, ...)"
        )
    return _read(source)


async def _read(source: Observable[T]) -> AsyncGenerator[T, None]:
    loop = asyncio.get_running_loop()
    inbox: _Inbox[T] = _Inbox(loop)
    subscription = source.subscribe(
        inbox.on_next,
        inbox.on_error,
        inbox.on_completed,
        scheduler=AsyncIOThreadSafeScheduler(loop),
    )
    try:
        items = inbox.items
        while True:
            while items:
                yield items.popleft()
            if not await inbox.more():
                break
        error, inbox.error = inbox.error, None
        if error is not None:
            try:
                raise error
            finally:
                del error  # its traceback holds this frame: no cycle through it
    finally:
        inbox.close()
        subscription.dispose()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # cancelled meanwhile: its reader has gone
        waiter.set_result(None)


class _Inbox(Generic[T]):
    """What an Observable sent, from any thread, kept in order for a coroutine on ``loop``."""

    __slots__ = ("ended", "error", "items", "lock", "loop", "thread", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.thread = threading.get_ident()
        self.items: deque[T] = deque()
        self.ended = False
        self.error: Exception | None = None
        self.lock = threading.Lock()
        self.waiter: asyncio.Future[None] | None = None

    def on_next(self, value: T) -> None:
        with self.lock:
            if self.ended:
                return
            self.items.append(value)
            waiter, self.waiter = self.waiter, None
        if waiter is not None:
            self._wake(waiter)

    def on_error(self, error: Exception) -> None:
        self._end(error)

    def on_completed(self) -> None:
        self._end(None)

    def _end(self, error: Exception | None) -> None:
        with self.lock:
            if self.ended:
                return
            self.ended = True
            self.error = error
            waiter, self.waiter = self.waiter, None
        if waiter is not None:
            self._wake(waiter)

    def _wake(self, waiter: asyncio.Future[None]) -> None:
        if threading.get_ident() == self.thread:
            _wake(waiter)
            return
        # A future is only set on its loop's thread. A closed loop has nobody waiting on it.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(_wake, waiter)

    async def more(self) -> bool:
        """Wait for an item or the end; whether items came."""
        with self.lock:
            if self.items:
                return True
            if self.ended:
                return False
            waiter = self.waiter = self.loop.create_future()
        await waiter
        return bool(self.items)

    def close(self) -> None:
        """Drop what is buffered and ignore what comes later: the reader has gone."""
        with self.lock:
            self.ended = True
            self.items.clear()
            self.waiter = None
