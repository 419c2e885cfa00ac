"""Chunk sources: the only modules that do I/O."""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import inspect
import json
import os
import socket
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar, cast

import reactivex
from reactivex import Observable, abc
from reactivex.disposable import CompositeDisposable, Disposable
from reactivex.scheduler import CurrentThreadScheduler
from reactivex.scheduler.eventloop import AsyncIOScheduler

from ._core import whole_response
from ._errors import (
    MalformedChunkError,
    not_streamed,
)
from ._policy import Limits
from ._sse import DONE, SSEDecoder, error_field_error, load_json

__all__ = [
    "demo_path",
    "from_async_iterable",
    "from_async_openai_response",
    "from_async_openai_stream",
    "from_jsonl",
    "from_openai_response",
    "from_openai_stream",
    "from_sse",
    "read_jsonl",
    "record",
]

T = TypeVar("T")


def demo_path() -> Path:
    """The bundled demo capture: a real gpt-4o stream with two parallel tool calls (``.jsonl``).

    It ships inside the package, so examples run from an installed copy too.

    >>> from reactivex import operators as ops
    >>> from_jsonl(demo_path()).pipe(ops.count()).run() > 0
    True
    """
    return Path(str(resources.files("rxtoolcalls").joinpath("data/demo.jsonl")))


def read_jsonl(source: str | os.PathLike[str] | Iterable[str]) -> Iterator[dict[str, Any]]:
    """Yield the chunks of a capture: a path to a ``.jsonl`` file, or its lines.

    Blank lines are skipped; a line that is not a JSON object raises ``MalformedChunkError``.
    A line of exactly ``{"event": name or null, "data": {...}}`` (a recorded SSE event with
    its name, as in the wire fixtures) yields its ``data``: dispatch is on ``data["type"]``.
    Data without a ``type`` is named by its event alone (a recorded AWS event-stream frame):
    it yields ``{name: data}``, as boto3 does.
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
        chunk = load_json(line, f"line {number}")
        if type(chunk) is not dict:
            raise MalformedChunkError(f"line {number} is not a JSON object: {type(chunk).__name__}")
        yield _event_data(chunk)


def _event_data(chunk: dict[str, Any]) -> dict[str, Any]:
    if "data" in chunk and "event" in chunk and set(chunk) <= _RECORDED_EVENT:
        data, name = chunk["data"], chunk["event"]
        if type(data) is dict and (name is None or type(name) is str):
            if "type" in data or not name or name == "message":
                return data
            # Named by its event alone (Bedrock's frames): the one-key dict an SDK yields.
            return {name: data}
    return chunk


# A recorded event: its name and data, and for an AWS event-stream frame whether it was an
# exception or an error.
_RECORDED_EVENT = frozenset({"event", "data", "exception", "error"})


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
    response). Errors arrive as ``on_error``: ``factory()`` raising, the iteration failing, or
    closing the iterator failing after its last item (then instead of ``on_completed``). Use
    ``await observable`` inside the loop.
    """
    return _from_async(factory, loop)


# deque(iterable, 0) consumes an iterator in C, keeping nothing.
_drain = collections.deque


def _emit_all(on_next: Callable[[Any], object], items: Iterable[Any]) -> None:
    """``on_next`` each item; an exception it raises is the subscriber's (``_Downstream``)."""
    try:
        _drain(map(on_next, items), 0)
    except Exception as error:  # noqa: BLE001 - the subscriber's own
        raise _Downstream(error) from None


def _tell(callback: Callable[..., object], *arguments: object) -> None:
    """Call a subscriber's terminal callback on the loop; what it raises goes to the handler."""
    try:
        callback(*arguments)
    except Exception as error:  # noqa: BLE001 - the subscriber's own
        _subscriber_raised(error)


def _subscriber_raised(error: Exception) -> None:
    asyncio.get_running_loop().call_exception_handler(
        {"message": "a subscriber of an rxtoolcalls async source raised", "exception": error}
    )


class _SSE(NamedTuple):
    """How ``_from_async`` decodes an event stream: its limits, and what to close after it."""

    limits: Limits | None
    owner: object | None


def _from_async(
    factory: Callable[[], AsyncIterable[Any]],
    loop: asyncio.AbstractEventLoop | None,
    sse: _SSE | None = None,
) -> Observable[Any]:
    """``from_async_iterable``, or with ``sse`` an event stream's pieces decoded here.

    Decoded in the pump's own frame: one await a piece, not one a chunk; ``sse.owner`` (the
    response, if any) is closed after the iterator.
    """

    def subscribe(
        observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        target = loop or running
        if target is None:
            raise RuntimeError("from_async_iterable needs a running asyncio loop, or loop=")

        async def close(iterator: object) -> None:
            await _close(iterator)
            if sse is not None and sse.owner is not None:
                await _close(sse.owner)

        async def pump() -> None:
            try:
                iterator = factory()
            except Exception as error:  # noqa: BLE001 - delivered as on_error
                _tell(observer.on_error, error)
                return
            failure: Exception | None = None
            on_next = observer.on_next
            try:
                if sse is not None:
                    # Decoded in this frame: no generator between the socket and the reader,
                    # one await a piece, and less held by each of thousands of open streams.
                    decoder = SSEDecoder(limits=sse.limits)
                    chunks = decoder.chunks
                    async for piece in iterator:
                        # Emitted in C; no chunk stays bound across the next await.
                        _emit_all(on_next, chunks(piece))
                        ended = decoder.ended
                        if ended is not None:
                            if ended is DONE:
                                break
                            raise cast(Exception, ended)
                    else:
                        _sse_end(decoder)
                else:
                    async for item in iterator:
                        try:
                            on_next(item)
                        except Exception as error:  # noqa: BLE001 - the subscriber's own
                            raise _Downstream(error) from None
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):  # disposed: nobody is listening
                    await close(iterator)
                raise
            except _Downstream as carried:
                # Raised by a subscriber's callback: not the stream's, so never on_error. The
                # loop's exception handler hears of it, as of a callback that raises.
                with contextlib.suppress(Exception):
                    await close(iterator)
                _subscriber_raised(carried.error)
                return
            except Exception as error:  # noqa: BLE001 - delivered as on_error
                failure = error
            try:
                await close(iterator)
            except Exception as error:  # noqa: BLE001 - delivered as on_error
                # A stream that cannot be closed did not end cleanly; the first failure wins.
                if failure is None:
                    failure = error
            if failure is None:
                _tell(observer.on_completed)
            else:
                _tell(observer.on_error, failure)

        if running is target:
            task = target.create_task(pump())

            def cancel_task() -> None:
                if not target.is_closed():  # a closed loop runs the task no more
                    with contextlib.suppress(RuntimeError):
                        target.call_soon_threadsafe(task.cancel)

            return Disposable(cancel_task)
        # From another thread, only run_coroutine_threadsafe wakes the loop up.
        future = asyncio.run_coroutine_threadsafe(pump(), target)

        def cancel_future() -> None:
            with contextlib.suppress(RuntimeError):  # its loop may be closed by now
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


def _sse_end(decoder: SSEDecoder) -> None:
    decoder.close()
    if decoder.error_field is not None:
        # Old llama.cpp servers wrote errors in a non-standard "error:" field.
        raise error_field_error(decoder.error_field)


class _StreamedResponse(Protocol):
    """A streamed ``httpx.Response`` (or ``httpx2``), as ``from_sse`` takes it to own it."""

    def iter_bytes(self) -> Iterator[bytes]:
        """The body, decoded pieces as they arrive."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


def _socket_of(response: object) -> socket.socket | None:
    """The socket under an httpx/httpx2 response on HTTP/1.x, or ``None`` if there is none."""
    # On HTTP/2 one socket carries other streams too: closing the response is all we may do.
    if getattr(response, "http_version", None) not in ("HTTP/1.0", "HTTP/1.1"):
        return None
    extensions = getattr(response, "extensions", None)
    if not isinstance(extensions, Mapping):
        return None
    get_extra_info = getattr(extensions.get("network_stream"), "get_extra_info", None)
    if not callable(get_extra_info):
        return None
    try:
        found = get_extra_info("socket")
    except Exception:  # noqa: BLE001 - a transport without it: close() is the fallback
        return None
    return found if isinstance(found, socket.socket) else None


class _Reading:
    """One subscription's blocking read, and how a dispose from any thread ends it.

    Closing an HTTP response from another thread does not wake a read blocked in ``recv``;
    shutting its socket down does. So ``stop()`` shuts the socket down while a read is under
    way and leaves the close to the reader, which returns at once; with no socket it closes the
    source itself if ``close_any_thread`` (an SDK stream), else the reader closes it when it
    next gets control (a generator cannot be closed while it runs).
    """

    def __init__(
        self, close: Callable[[], None], response: object, *, close_any_thread: bool
    ) -> None:
        self.stopped = threading.Event()
        self.close_error: Exception | None = None
        self._close = close
        self._response = response
        self._socket = _socket_of(response)
        self._close_any_thread = close_any_thread
        self._lock = threading.Lock()
        self._reader: int | None = None
        self._closed = False

    @property
    def live(self) -> bool:
        """Whether a read may block on a socket that ``stop()`` can shut down."""
        return self._socket is not None

    def begin(self) -> bool:
        """Mark the calling thread as the reader; ``False`` if already stopped."""
        with self._lock:
            if self.stopped.is_set():
                return False
            self._reader = threading.get_ident()
            return True

    def end(self) -> None:
        """The reader is done: from here on the socket is not ours to shut down."""
        with self._lock:
            self._reader = None
        self.close()

    def stop(self) -> None:
        """Stop reading and free the connection within moments, from any thread."""
        with self._lock:
            if self.stopped.is_set():
                return
            self.stopped.set()
            reader = self._reader
            if reader == threading.get_ident():
                return  # disposed from the reader's own on_next: it closes as it returns
            # Under the lock, so that it never lands after end(): a finished response's
            # connection may be back in the pool, serving another request.
            woken = reader is not None and self._wake()
        if reader is None or (not woken and self._close_any_thread):
            self.close()

    def _wake(self) -> bool:
        sock = self._socket
        if sock is None or getattr(self._response, "is_closed", False):
            return False
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Close the source once; an error closing it is kept in ``close_error``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._close()
        except Exception as error:  # noqa: BLE001 - reported by the reader, if it still can
            self.close_error = error


class _Downstream(BaseException):
    """Carries an exception raised by ``on_next`` downstream out of a blocking read."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def _blocking_source(
    read: Callable[[abc.ObserverBase[Any], threading.Event], None],
    close: Callable[[], None],
    response: object,
    *,
    close_any_thread: bool,
    typed: Callable[[Exception], Exception] = lambda error: error,
) -> Observable[Any]:
    """An Observable running ``read(observer, stopped)``, a loop of blocking reads.

    ``read`` returns when done or stopped, and raises on failure (delivered as ``typed(it)``);
    the source is closed before the terminal notification. Without a scheduler, or with
    ``CurrentThreadScheduler``, it runs on the subscribing thread. With another scheduler a
    read over a socket runs on a thread of its own: ``subscribe_on`` sends the dispose through
    that scheduler, where it would wait behind the read forever. On an asyncio scheduler every
    read runs on a thread of its own: a blocking read in the loop would stall the loop.
    """

    def subscribe(
        observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        reading = _Reading(close, response, close_any_thread=close_any_thread)

        def run(_: object = None, __: object = None) -> None:
            if not reading.begin():
                return
            failure: Exception | None = None
            own: Exception | None = None
            try:
                read(observer, reading.stopped)
            except _Downstream as carried:
                own = carried.error
            except Exception as error:  # noqa: BLE001 - delivered as on_error
                failure = typed(error)
            finally:
                reading.end()
            if own is not None:
                # Raised by a subscriber's callback: not the stream's, so never on_error; it
                # leaves to whoever runs the read, as reactivex's own sources let it.
                raise own
            if reading.stopped.is_set():
                return
            failure = failure or reading.close_error
            if failure is None:
                observer.on_completed()
            else:
                observer.on_error(failure)

        if isinstance(scheduler, AsyncIOScheduler) or (
            reading.live
            and not (scheduler is None or isinstance(scheduler, CurrentThreadScheduler))
        ):
            threading.Thread(target=run, name="rxtoolcalls-reader", daemon=True).start()
            return Disposable(reading.stop)
        chosen = scheduler or CurrentThreadScheduler.singleton()
        return CompositeDisposable(chosen.schedule(run), Disposable(reading.stop))

    return Observable(subscribe)


def from_sse(
    source: Iterable[bytes | str] | AsyncIterable[bytes | str] | _StreamedResponse,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    limits: Limits | None = None,
) -> Observable[dict[str, Any]]:
    r"""Chunks from raw Server-Sent Events: bytes or text split anywhere, or whole lines.

    ``source`` is a streamed ``httpx.Response`` itself (sync or async client), an iterable (a
    file, a list, ``iter_bytes()``) or an async iterable (``aiter_bytes()``, read on the
    asyncio loop). ``data: [DONE]`` completes; comment lines are skipped; the provider error
    shapes (``data: {"error": …}``, ``event: error``, ``{"object": "error"}``, an OpenRouter
    error chunk, a non-standard ``error:`` field) end the stream with a ``ProviderError``
    carrying the provider's code and message. The source is closed (``close``/``aclose``) on
    completion, error or dispose. Given the response, disposing closes its connection at once,
    even mid-read on a silent server; given ``response.iter_bytes()``, a blocked read ends only
    when data or the read timeout comes. Raises ``TypeError`` for anything else. A line or an
    event past ``limits.max_event`` (``Limits()`` by default) is a ``LimitExceededError``.

    >>> from reactivex import operators as ops
    >>> lines = ['data: {"choices": []}', "", ": keep-alive", "data: [DONE]", ""]
    >>> from_sse(line + "\n" for line in lines).pipe(ops.count()).run()
    1
    """
    if isinstance(source, AsyncIterable):
        iterable = source
        return _from_async_sse(lambda: iterable, iterable, loop, limits)
    if not isinstance(source, Iterable):
        iter_bytes = getattr(source, "iter_bytes", None)
        if not callable(iter_bytes):
            raise TypeError(
                f"from_sse needs an httpx response, an iterable or an async iterable of "
                f"bytes or str, not {type(source).__name__}"
            )
        aiter_bytes = getattr(source, "aiter_bytes", None)
        if callable(aiter_bytes) and _is_async_response(source):
            return _from_async_sse(aiter_bytes, source, loop, limits)
        return _sse_source(iter_bytes, source.close, source, limits, close_any_thread=True)
    pieces = source
    closer = getattr(pieces, "close", None)
    return _sse_source(
        lambda: pieces,
        closer if callable(closer) else _nothing,
        None,
        limits,
        close_any_thread=False,
    )


def _nothing() -> None:
    pass


def _is_async_response(response: object) -> bool:
    body = getattr(response, "stream", None)
    return isinstance(body, AsyncIterable) and not isinstance(body, Iterable)


def _sse_source(
    pieces: Callable[[], Iterable[bytes | str]],
    close: Callable[[], None],
    response: object,
    limits: Limits | None,
    *,
    close_any_thread: bool,
) -> Observable[dict[str, Any]]:
    def read(observer: abc.ObserverBase[Any], stopped: threading.Event) -> None:
        decoder = SSEDecoder(limits=limits)
        chunks, is_set, on_next = decoder.chunks, stopped.is_set, observer.on_next
        for piece in pieces():
            # Checked once a piece: a dispose from on_next stops the observer at once (it
            # drops what follows), and the read ends after this piece.
            _emit_all(on_next, chunks(piece))
            if is_set():
                return
            ended = decoder.ended
            if ended is not None:
                if ended is DONE:
                    return
                raise cast(Exception, ended)
        _sse_end(decoder)

    return _blocking_source(read, close, response, close_any_thread=close_any_thread)


def _from_async_sse(
    pieces: Callable[[], AsyncIterable[bytes | str]],
    owner: object,
    loop: asyncio.AbstractEventLoop | None,
    limits: Limits | None = None,
) -> Observable[dict[str, Any]]:
    return _from_async(pieces, loop, sse=_SSE(limits, owner))


def _typed_sdk_error(error: Exception) -> Exception:
    """An error a vendor SDK raised, as our typed one; others unchanged.

    Each wire's descriptor maps its SDK's errors. openai raises ``APIError`` for an in-band
    ``error`` event; anthropic raises an ``APIStatusError`` for one (with the stream's
    status, 200). Both raise ``APIStatusError`` for an error status when a helper's manager
    (``messages.stream(...)``, ``responses.stream(...)``) sends its request. Connection
    errors stay themselves.
    """
    from .wires import WIRES  # a wire's source may import this module

    for spec in WIRES:
        typed = spec.sdk_error(error)
        if typed is not None:
            typed.__cause__ = error
            return typed
    return error


def from_openai_stream(stream: Any) -> Observable[Any]:
    """The events of an openai SDK stream: Chat chunks or Responses events, sync.

    ``stream`` is ``client.chat.completions.create(..., stream=True)`` or
    ``client.responses.create(..., stream=True)``; both assemble the same way. The helpers'
    streams work too, read underneath their accumulators: the one ``with
    client.responses.stream(...) as s`` gives, or the manager itself (each subscription enters
    it, sending the request, and leaves it at the end). Reads on the subscribing thread. Given
    a scheduler (``subscribe_on``, ``.run()``), a stream over a socket is read on a thread of
    its own, from which the events arrive; any other iterable on that scheduler. Completing,
    failing or disposing closes the HTTP response, and disposing (``take_until``,
    ``ops.timeout``) shuts its socket down at once, even while a read waits on a silent server
    (HTTP/1.x; on HTTP/2 the response is closed). An in-band error the SDK raises
    (``APIError``), and an error status a manager meets (``APIStatusError``), arrive as
    ``ProviderError`` with ``retryable``; a connection error as itself (``assemble()`` turns it
    into ``StreamInterruptedError``). Each stream can be read once. A whole response (made
    without ``stream=True``) is a ``TypeError`` at once.
    """
    return _sync_sdk(stream, _every)


def from_async_openai_stream(
    stream: Any, *, loop: asyncio.AbstractEventLoop | None = None
) -> Observable[Any]:
    """The events of an openai SDK ``AsyncStream`` (Chat or Responses), read on an asyncio loop.

    The async helpers' streams and managers (``client.responses.stream(...)``) work as in
    ``from_openai_stream``. Disposing cancels the pending read and closes the stream (its HTTP
    response); errors arrive as ``on_error`` (an in-band ``APIError`` as ``ProviderError``).
    Use ``await from_async_openai_stream(s).pipe(assemble())`` inside the loop. A whole
    response (made without ``stream=True``) is a ``TypeError`` at once.
    """
    return _async_sdk(stream, _every, loop)


# The classes openai's ``with_streaming_response`` gives, and whether each is async.
_OPENAI_RESPONSES = {"APIResponse": False, "AsyncAPIResponse": True}
_OPENAI_MANAGERS = {"ResponseContextManager": False, "AsyncResponseContextManager": True}


def _openai_response_kind(value: object) -> str | None:
    """The name of the openai ``with_streaming_response`` class ``value`` is, or ``None``."""
    for base in type(value).__mro__:
        if base.__module__.startswith("openai") and (
            base.__name__ in _OPENAI_RESPONSES or base.__name__ in _OPENAI_MANAGERS
        ):
            return base.__name__
    return None


def from_openai_response(response: Any, *, limits: Limits | None = None) -> Observable[Any]:
    """The events of an openai SDK streamed response, read as raw bytes: Chat or Responses.

    ``response`` is what ``with client.chat.completions.with_streaming_response.create(...,
    stream=True) as r`` gives (an ``APIResponse``; ``client.responses`` works the same), or
    that manager itself, not entered: then each subscription enters it, sending the request
    (with the client's auth, base_url, retries and timeouts), and leaves it at the end, so a
    retry sends a new request. The body is read as ``from_sse`` reads an httpx response: plain
    dicts, no per-chunk SDK models, ``[DONE]`` and the provider's in-band errors as there.
    Completing, failing or disposing closes the response; disposing shuts its socket down at
    once, even while a read waits on a silent server (HTTP/1.x). An error status when the
    manager sends (``APIStatusError``) arrives as ``ProviderError`` with the status and
    ``retryable``. A response can be read once. A whole (not streamed) JSON response is a
    ``TypeError``: at once for a response, on subscription (``on_error``) for a manager. An
    ``AsyncAPIResponse`` or anything else is a ``TypeError`` at once (an SDK ``Stream`` names
    ``from_openai_stream``).
    """
    kind = _openai_response_kind(response)
    if kind == "APIResponse":
        body = _streamed_body(response, "from_openai_response")
        return _sse_source(
            lambda: _unread(body).iter_bytes(), response.close, body, limits, close_any_thread=True
        )
    if kind != "ResponseContextManager":
        raise _not_a_response("from_openai_response", response)
    manager = response

    def enter(_: abc.SchedulerBase | None) -> Observable[Any]:
        try:
            opened = manager.__enter__()
        except Exception as error:  # noqa: BLE001 - delivered as on_error, typed
            return reactivex.throw(_typed_sdk_error(error))
        # Leaving the manager closes the response it made last, which is another
        # subscription's when two read at once: close this one's, all __exit__ does.
        try:
            body = _streamed_body(opened, "from_openai_response")
        except TypeError as error:
            opened.close()
            return reactivex.throw(error)
        return _sse_source(body.iter_bytes, opened.close, body, limits, close_any_thread=True)

    return reactivex.defer(enter)


def from_async_openai_response(
    response: Any,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    limits: Limits | None = None,
) -> Observable[Any]:
    """The events of an openai SDK async streamed response, read as raw bytes on an asyncio loop.

    ``response`` is what ``async with client.chat.completions.with_streaming_response.create(
    ..., stream=True) as r`` gives (an ``AsyncAPIResponse``; ``client.responses`` too), or that
    manager itself, not entered: the subscription enters it, sending the request, and leaves
    it at the end. The SDK's async manager holds one request, so it can be subscribed once (a
    second subscription fails with ``RuntimeError``); make a new one per attempt. Disposing
    cancels the pending read and closes the response. Errors are typed as in
    ``from_openai_response``; what is not such a response is a ``TypeError`` at once. Use
    ``await from_async_openai_response(r).pipe(assemble())`` inside the loop.
    """
    kind = _openai_response_kind(response)
    if kind == "AsyncAPIResponse":
        body = _streamed_body(response, "from_async_openai_response")
        return _from_async_sse(lambda: _unread(body).aiter_bytes(), response, loop, limits)
    if kind != "AsyncResponseContextManager":
        raise _not_a_response("from_async_openai_response", response)
    manager = response
    entered = threading.Lock()

    async def events() -> AsyncIterator[bytes]:
        if not entered.acquire(blocking=False):
            raise RuntimeError(
                "an AsyncResponseContextManager holds one request and was entered already: "
                "call with_streaming_response.create(...) again for a new one"
            )
        async with _typed_errors():
            opened = await manager.__aenter__()
        try:
            body = _streamed_body(opened, "from_async_openai_response")
            async for piece in body.aiter_bytes():
                yield piece
        finally:
            await manager.__aexit__(None, None, None)

    return _from_async(events, loop, sse=_SSE(limits, None))


def _streamed_body(response: Any, function: str) -> Any:
    """The httpx response under an SDK response; ``TypeError`` if it is a whole JSON answer."""
    body = response.http_response
    kind = str(body.headers.get("content-type", "")).partition(";")[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        raise TypeError(
            f"{function} got a whole {kind} response, not an event stream (was the request "
            f"made with stream=True?)"
        )
    return body


def _unread(body: Any) -> Any:
    """``body`` if its bytes can still be read; ``RuntimeError`` if an earlier read took them."""
    if body.is_stream_consumed:
        try:
            body.content  # noqa: B018 - kept by read(): iter_bytes() gives it again
        except Exception as error:  # httpx's ResponseNotRead: streamed away unkept
            raise RuntimeError(
                "this response was read already, and its bytes can be read once: pass the "
                "with_streaming_response.create(...) manager itself (not entered) to send a "
                "request per subscription"
            ) from error
    return body


def _not_a_response(function: str, value: object) -> TypeError:
    sync = not function.startswith("from_async")
    kind = _openai_response_kind(value)
    hint = ""
    if kind is not None:  # the other flavour
        hint = f": use {'from_async_openai_response' if sync else 'from_openai_response'}"
    elif type(value).__module__.startswith("openai") and (
        isinstance(value, Iterable | AsyncIterable)
        or hasattr(value, "__enter__")
        or hasattr(value, "__aenter__")
    ):
        is_async = isinstance(value, AsyncIterable) or not (
            isinstance(value, Iterable) or hasattr(value, "__enter__")
        )
        stream_source = "from_async_openai_stream" if is_async else "from_openai_stream"
        hint = f" (an SDK stream: use {stream_source})"
    elif callable(getattr(value, "iter_bytes", None)):
        hint = " (an httpx response: use from_sse)"
    made = "with" if sync else "async with"
    return TypeError(
        f"{function} needs what `{made} client.chat.completions.with_streaming_response"
        f".create(..., stream=True) as r` gives (or that manager, not entered), not "
        f"{type(value).__name__}{hint}"
    )


def _every(_: object) -> bool:
    return True


def _raw_stream(stream: Any) -> Any:
    """The SDK ``Stream`` under a helper's stream (``MessageStream``, ``ResponseStream``).

    Reading the raw stream skips the helper's own accumulator, which runs before we see an
    event, adds events of its own, and fails with untyped errors (``IndexError``) on a
    malformed stream.
    """
    raw = getattr(stream, "_raw_stream", None)
    if raw is not None and getattr(raw, "response", None) is not None:
        return raw
    return stream


def _sdk_source(
    stream: Iterable[Any],
    owner: object,
    keep: Callable[[Any], bool],
    *,
    close_any_thread: bool = True,
) -> Observable[Any]:
    """Read an SDK stream with ``_blocking_source``; closing ``owner`` frees its response.

    ``close_any_thread=False`` for a stream that is a generator, which cannot be closed while
    its reader runs.
    """

    def read(observer: abc.ObserverBase[Any], stopped: threading.Event) -> None:
        for event in stream:
            if stopped.is_set():
                return
            if keep(event):
                try:
                    observer.on_next(event)
                except Exception as error:  # noqa: BLE001 - the subscriber's: raised by run()
                    raise _Downstream(error) from None
            if stopped.is_set():
                return

    def close() -> None:
        closer = getattr(owner, "close", None)
        if callable(closer):
            closer()

    response = getattr(stream, "response", None) or getattr(owner, "response", None)
    return _blocking_source(
        read, close, response, close_any_thread=close_any_thread, typed=_typed_sdk_error
    )


def _is_manager(stream: object, enter: str, iterate: str) -> bool:
    return hasattr(stream, enter) and not hasattr(stream, iterate)


def _refuse_whole(stream: object) -> None:
    """``TypeError`` at once for a whole response given where its stream belongs."""
    if whole_response(stream):
        raise TypeError(not_streamed(f"the {type(stream).__name__} given"))


def _sync_sdk(stream: Any, keep: Callable[[Any], bool]) -> Observable[Any]:
    """A sync SDK stream, or a manager entered per subscription, as an Observable."""
    _refuse_whole(stream)
    if not _is_manager(stream, "__enter__", "__iter__"):
        return _sdk_source(_raw_stream(stream), stream, keep)
    manager = stream

    def enter(_: abc.SchedulerBase | None) -> Observable[Any]:
        try:
            opened = manager.__enter__()
        except Exception as error:  # noqa: BLE001 - delivered as on_error, typed
            return reactivex.throw(_typed_sdk_error(error))
        # The stream it opened, closed by itself: the manager's __exit__ closes the stream
        # it opened last, another subscription's when two read at once.
        return _sdk_source(_raw_stream(opened), opened, keep)

    return reactivex.defer(enter)


def _async_sdk(
    stream: Any, keep: Callable[[Any], bool], loop: asyncio.AbstractEventLoop | None
) -> Observable[Any]:
    """An async SDK stream, or an async manager entered per subscription, as an Observable."""
    _refuse_whole(stream)
    manager = stream if _is_manager(stream, "__aenter__", "__aiter__") else None

    async def events() -> AsyncIterator[Any]:
        async with _typed_errors():
            opened = stream if manager is None else await manager.__aenter__()
            try:
                async for event in _raw_stream(opened):
                    if keep(event):
                        yield event
            finally:
                # Its own stream, not the manager's last one (see _sync_sdk).
                await _close(opened)

    return from_async_iterable(events, loop=loop)


@contextlib.asynccontextmanager
async def _typed_errors() -> AsyncIterator[None]:
    try:
        yield
    except Exception as error:
        typed = _typed_sdk_error(error)
        if typed is error:
            raise
        raise typed from error


def _wire_dict(chunk: object) -> Any:
    if isinstance(chunk, dict):
        return chunk
    dump = getattr(chunk, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    raise MalformedChunkError(f"cannot record a {type(chunk).__name__} chunk as JSON")


def _capture_line(chunk: object) -> bytes:
    r"""One capture line: readable UTF-8; a lone surrogate written as its ``\uXXXX`` escape.

    ``bytes`` (a blob boto3 decoded) are written as the base64 text the wire carried.
    """
    line = json.dumps(_wire_dict(chunk), ensure_ascii=False, default=_blob)
    try:
        return line.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        # Lone surrogates cannot be UTF-8; as JSON escapes they read back as the same value.
        return json.dumps(_wire_dict(chunk), default=_blob).encode("ascii") + b"\n"


def _blob(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    raise MalformedChunkError(f"cannot record a {type(value).__name__} as JSON")


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
