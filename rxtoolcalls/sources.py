"""Chunk sources: the only modules that do I/O."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import AsyncIterable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import reactivex
from reactivex import Observable, abc
from reactivex.disposable import Disposable

from ._errors import MalformedChunkError

__all__ = ["from_async_iterable", "from_jsonl", "read_jsonl"]

T = TypeVar("T")


def read_jsonl(source: str | os.PathLike[str] | Iterable[str]) -> Iterator[dict[str, Any]]:
    """Yield the chunks of a capture: a path to a ``.jsonl`` file, or its lines.

    Blank lines are skipped; a line that is not a JSON object raises ``MalformedChunkError``.
    """
    if isinstance(source, str | os.PathLike):
        with Path(source).open(encoding="utf-8") as lines:
            yield from _parse_lines(lines)
    else:
        yield from _parse_lines(source)


def _parse_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            chunk = json.loads(line)
        except ValueError as exc:
            raise MalformedChunkError(f"line {number} is not JSON: {exc}") from exc
        if type(chunk) is not dict:
            raise MalformedChunkError(f"line {number} is not a JSON object: {type(chunk).__name__}")
        yield chunk


def from_jsonl(source: str | os.PathLike[str] | Iterable[str]) -> Observable[dict[str, Any]]:
    """An Observable of the chunks of a ``.jsonl`` capture; each subscription reads it anew.

    >>> from reactivex import operators as ops
    >>> from_jsonl(['{"choices": []}', '', '{"choices": []}']).pipe(ops.count()).run()
    2
    """
    return reactivex.defer(lambda _: reactivex.from_iterable(read_jsonl(source)))


def from_async_iterable(
    factory: Callable[[], AsyncIterable[T]],
    *,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Observable[T]:
    """An Observable reading ``factory()``'s async iterator on an asyncio loop, per subscription.

    The loop is ``loop`` or the one running when subscribing. Disposing cancels the read and
    closes the iterator (``aclose()``/``close()``: an SDK ``AsyncStream`` frees its HTTP
    response); its errors arrive as ``on_error``. Use ``await observable`` inside the loop.
    """

    def subscribe(
        observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        target = loop or running
        if target is None:
            raise RuntimeError("from_async_iterable needs a running asyncio loop, or loop=")

        async def pump() -> None:
            iterator = factory()
            try:
                async for item in iterator:
                    observer.on_next(item)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - delivered as on_error
                observer.on_error(error)
            else:
                observer.on_completed()
            finally:
                await _close(iterator)

        if running is target:
            task = target.create_task(pump())

            def cancel_task() -> None:
                target.call_soon_threadsafe(task.cancel)

            return Disposable(cancel_task)
        # From another thread, only run_coroutine_threadsafe wakes the loop up.
        future = asyncio.run_coroutine_threadsafe(pump(), target)

        def cancel_future() -> None:
            future.cancel()

        return Disposable(cancel_future)

    return Observable(subscribe)


async def _close(iterator: object) -> None:
    close = getattr(iterator, "aclose", None) or getattr(iterator, "close", None)
    if close is None:
        return
    result = close()
    if inspect.isawaitable(result):
        await result
