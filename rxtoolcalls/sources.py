"""Chunk sources: the only modules that do I/O."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import reactivex
from reactivex import Observable, abc
from reactivex.disposable import CompositeDisposable, Disposable
from reactivex.scheduler import CurrentThreadScheduler

from ._errors import MalformedChunkError, ProviderError
from ._sse import DONE, ServerSentEvent, SSEDecoder, chunk_from_event

__all__ = [
    "from_async_iterable",
    "from_async_openai_stream",
    "from_jsonl",
    "from_openai_stream",
    "from_sse",
    "read_jsonl",
    "record",
]

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


def _sse_chunks(decoder: SSEDecoder, piece: bytes | str) -> Iterator[dict[str, Any] | object]:
    for event in decoder.feed(piece):
        chunk = chunk_from_event(event)
        if chunk is not None:
            yield chunk


def _sse_end(decoder: SSEDecoder) -> None:
    decoder.close()
    if decoder.error_field is not None:
        # Old llama.cpp servers wrote errors in a non-standard "error:" field.
        raise chunk_error_field(decoder.error_field)


def chunk_error_field(value: str) -> ProviderError:
    """The ``ProviderError`` for a non-standard ``error:`` SSE field."""
    try:
        payload = json.loads(value)
    except ValueError:
        payload = {"message": value}
    try:
        chunk_from_event(ServerSentEvent("error", json.dumps(payload)))
    except ProviderError as error:
        return error
    return ProviderError(f"the provider reported an error inside the stream: {value!r}")


def from_sse(
    source: Iterable[bytes | str] | AsyncIterable[bytes | str],
    *,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Observable[dict[str, Any]]:
    r"""Chunks from raw Server-Sent Events: bytes or text split anywhere, or whole lines.

    ``source`` may be an iterable (``httpx.Response.iter_bytes()``, a file, a list) or an async
    iterable (``aiter_bytes()``, read on the asyncio loop). ``data: [DONE]`` completes; comment
    lines are skipped; the provider error shapes (``data: {"error": …}``, ``event: error``,
    ``{"object": "error"}``, an OpenRouter error chunk, a non-standard ``error:`` field) end the
    stream with a ``ProviderError`` carrying the provider's code and message. Disposing stops
    reading and closes the source (``close``/``aclose``) if it has one.

    >>> from reactivex import operators as ops
    >>> lines = ['data: {"choices": []}', "", ": keep-alive", "data: [DONE]", ""]
    >>> from_sse(line + "\n" for line in lines).pipe(ops.count()).run()
    1
    """
    if isinstance(source, AsyncIterable):
        return _from_async_sse(source, loop)
    sync_source = source

    def subscribe(
        observer: abc.ObserverBase[dict[str, Any]], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        # Disposal may come from another thread than the one reading.
        stopped = threading.Event()

        def run(_: abc.SchedulerBase, __: object = None) -> None:
            decoder = SSEDecoder()
            try:
                for piece in sync_source:
                    for chunk in _sse_chunks(decoder, piece):
                        if stopped.is_set():
                            return
                        if chunk is DONE:
                            observer.on_completed()
                            return
                        observer.on_next(chunk)  # type: ignore[arg-type]
                    if stopped.is_set():
                        return
                _sse_end(decoder)
            except Exception as error:  # noqa: BLE001 - delivered as on_error
                if not stopped.is_set():
                    observer.on_error(error)
                return
            finally:
                close = getattr(sync_source, "close", None)
                if callable(close):
                    close()
            observer.on_completed()

        def stop() -> None:
            stopped.set()

        chosen = scheduler or CurrentThreadScheduler.singleton()
        return CompositeDisposable(chosen.schedule(run), Disposable(stop))

    return Observable(subscribe)


def _from_async_sse(
    source: AsyncIterable[bytes | str], loop: asyncio.AbstractEventLoop | None
) -> Observable[dict[str, Any]]:
    async def chunks() -> AsyncIterator[dict[str, Any]]:
        decoder = SSEDecoder()
        try:
            async for piece in source:
                for chunk in _sse_chunks(decoder, piece):
                    if chunk is DONE:
                        return
                    yield chunk  # type: ignore[misc]
            _sse_end(decoder)
        finally:
            await _close(source)

    return from_async_iterable(chunks, loop=loop)


def _typed_sdk_error(error: Exception) -> Exception:
    """An in-band error the openai SDK raised, as our ``ProviderError``; others unchanged."""
    module = type(error).__module__
    if module.startswith("openai") and type(error).__name__ == "APIError":
        body = getattr(error, "body", None)
        code = getattr(error, "code", None) or getattr(error, "type", None)
        typed = ProviderError(
            f"the provider reported an error inside the stream: "
            f"{getattr(error, 'message', error)!r} (code {code!r}); nothing was emitted, the "
            f"request can be retried",
            code=code,
            body=body,
        )
        typed.__cause__ = error
        return typed
    return error


def from_openai_stream(stream: Iterable[Any]) -> Observable[Any]:
    """The chunks of an openai SDK ``Stream[ChatCompletionChunk]`` (``stream=True``).

    Reads on the subscribing thread (or the given scheduler). Disposing, completing or failing
    closes the stream, which closes its HTTP response: no leaked connection. An in-band error
    the SDK raises (``APIError``) arrives as ``ProviderError``; a connection error as itself
    (``assemble()`` turns it into ``StreamInterruptedError``). Each stream can be read once.
    """

    def subscribe(
        observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        # Disposal may come from another thread than the one reading.
        stopped = threading.Event()

        def close() -> None:
            closer = getattr(stream, "close", None)
            if callable(closer):
                closer()

        def run(_: abc.SchedulerBase, __: object = None) -> None:
            try:
                for chunk in stream:
                    if stopped.is_set():
                        return
                    observer.on_next(chunk)
                    if stopped.is_set():
                        return
            except Exception as error:  # noqa: BLE001 - delivered as on_error
                if not stopped.is_set():
                    observer.on_error(_typed_sdk_error(error))
                return
            finally:
                close()
            observer.on_completed()

        def stop() -> None:
            stopped.set()
            close()

        chosen = scheduler or CurrentThreadScheduler.singleton()
        return CompositeDisposable(chosen.schedule(run), Disposable(stop))

    return Observable(subscribe)


def from_async_openai_stream(
    stream: AsyncIterable[Any], *, loop: asyncio.AbstractEventLoop | None = None
) -> Observable[Any]:
    """The chunks of an openai SDK ``AsyncStream``, read on the running asyncio loop.

    Disposing cancels the pending read and closes the stream (its HTTP response); errors
    arrive as ``on_error`` (an in-band ``APIError`` as ``ProviderError``). Use
    ``await from_async_openai_stream(s).pipe(assemble())`` inside the loop.
    """

    async def chunks() -> AsyncIterator[Any]:
        try:
            async for chunk in stream:
                yield chunk
        except Exception as error:  # noqa: BLE001 - re-raised, typed
            raise _typed_sdk_error(error) from error.__cause__
        finally:
            await _close(stream)

    return from_async_iterable(chunks, loop=loop)


def _wire_dict(chunk: object) -> Any:
    if isinstance(chunk, dict):
        return chunk
    dump = getattr(chunk, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    raise MalformedChunkError(f"cannot record a {type(chunk).__name__} chunk as JSON")


def _capture_line(chunk: object) -> bytes:
    r"""One capture line: readable UTF-8; a lone surrogate written as its ``\uXXXX`` escape."""
    line = json.dumps(_wire_dict(chunk), ensure_ascii=False)
    try:
        return line.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        # Lone surrogates cannot be UTF-8; as JSON escapes they read back as the same value.
        return json.dumps(_wire_dict(chunk)).encode("ascii") + b"\n"


def record(path: str | os.PathLike[str]) -> Callable[[Observable[T]], Observable[T]]:
    r"""Pass chunks through unchanged while writing them to ``path``, one JSON line each.

    ``Observable[Chunk] -> Observable[Chunk]``; the capture is in the fixture format (SDK
    objects as their wire dicts, UTF-8, a lone surrogate kept as its ``\uXXXX`` escape),
    flushed per chunk so a crash keeps what arrived. Each subscription rewrites the file; it is
    closed on completion, error or dispose. A file that cannot be opened or written is an
    ``OSError`` on ``on_error``. Use it in front of ``assemble()`` to keep "the raw stream" a
    bug report asks for.
    """

    def operator(source: Observable[T]) -> Observable[T]:
        def subscribe(
            observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            # An OSError here reaches on_error: Observable.subscribe routes it there.
            capture = Path(path).open("wb")  # noqa: SIM115 - closed by dispose

            def close() -> OSError | None:
                if capture.closed:
                    return None
                try:
                    capture.close()  # the descriptor is freed even when the last flush fails
                except OSError as error:
                    return error
                return None

            def on_next(chunk: T) -> None:
                if capture.closed:
                    return  # failed to write earlier, or disposed
                try:
                    capture.write(_capture_line(chunk))
                    capture.flush()
                except Exception as error:  # noqa: BLE001 - delivered as on_error
                    close()
                    observer.on_error(error)
                    return
                observer.on_next(chunk)

            def on_error(error: Exception) -> None:
                close()
                observer.on_error(error)

            def on_completed() -> None:
                failed = close()
                if failed is not None:
                    observer.on_error(failed)
                    return
                observer.on_completed()

            subscription = source.subscribe(on_next, on_error, on_completed, scheduler=scheduler)

            def dispose() -> None:
                close()

            return CompositeDisposable(subscription, Disposable(dispose))

        return Observable(subscribe)

    return operator
