"""The agent loop's edges: what ``open_stream`` returns, how its errors are typed, tool runs."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import inspect
import json
import socket
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from reactivex import Observable, abc
from reactivex import operators as ops
from reactivex.disposable import CompositeDisposable, Disposable, SerialDisposable

from ._errors import (
    RETRY_HINT,
    ProviderError,
    StreamInterruptedError,
    ToolCallStreamError,
    a_or_an,
    clip,
    not_streamed,
    provider_error,
)
from ._lift import interrupted
from ._types import ToolCall, call_input
from .sources import (
    _close,
    _openai_response_kind,
    _typed_sdk_error,
    from_async_iterable,
    from_async_openai_response,
    from_async_openai_stream,
    from_openai_response,
    from_openai_stream,
)
from .wires import WIRES

__all__ = ["RunsOn", "open_chunks", "run_tool", "schema_problem", "typed_failure"]

# Errors that are bugs in the caller's code: never retried, delivered as raised.
_PROGRAMMING_ERRORS = (
    TypeError,
    AttributeError,
    NameError,
    LookupError,
    AssertionError,
    ImportError,
    NotImplementedError,
    RecursionError,
)
# Transport and SDK packages whose errors (programming errors aside) may pass on a second try.
_TRANSPORT_PACKAGES = frozenset(
    {"httpx", "httpx2", "httpcore", "httpcore2", "h11", "h2", "aiohttp"}
)


@functools.cache
def _network_packages() -> frozenset[str]:
    """The transports' packages and every wire's SDK packages."""
    return _TRANSPORT_PACKAGES.union(*(spec.sdk_packages for spec in WIRES))


def _status(error: BaseException) -> int | None:
    """The HTTP status an error carries: openai's and httpx's, or urllib's ``HTTPError``."""
    response = getattr(error, "response", None)
    for value in (
        getattr(error, "status_code", None),
        getattr(response, "status_code", None),
        getattr(error, "status", None),
        getattr(error, "code", None) if isinstance(error, OSError) else None,
    ):
        if type(value) is int and 100 <= value <= 599:
            return value
    return None


# OSErrors of the network; a missing file or a denied permission is no reason to try again.
_NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNABORTED,
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.EHOSTUNREACH,
        errno.ENETDOWN,
        errno.ENETRESET,
        errno.ENETUNREACH,
        errno.EPIPE,
        errno.ETIMEDOUT,
    }
)
# Errors of those packages that say the request itself is wrong (a URL, a protocol).
_CONFIGURATION_ERRORS = frozenset({"InvalidURL", "UnsupportedProtocol", "LocalProtocolError"})


def _transient(error: BaseException) -> bool:
    """Whether a network-level exception may pass on a second try."""
    if isinstance(error, _PROGRAMMING_ERRORS):
        return False
    status = _status(error)
    if status is not None:
        return status in (408, 409, 429) or status >= 500
    if isinstance(error, ConnectionError | TimeoutError | socket.gaierror):
        return True
    if isinstance(error, OSError):
        reason = getattr(error, "reason", None)  # urllib's URLError wraps the socket's error
        if isinstance(reason, BaseException):
            return _transient(reason)
        return error.errno in _NETWORK_ERRNOS
    if type(error).__name__ in _CONFIGURATION_ERRORS:
        return False
    return type(error).__module__.partition(".")[0] in _network_packages()


def _inband_error(error: Exception, status: int | None) -> ProviderError | None:
    """An error event inside a stream that opened fine, as the SDK raised it, or ``None``.

    The anthropic SDK raises an ``event: error`` as a status error carrying the 200 of the
    opened response; its code is in the body (``overloaded_error``), never the status.
    """
    body = getattr(error, "body", None)
    if status is None or not 200 <= status < 300 or not isinstance(body, Mapping):
        return None
    detail = body.get("error")
    if not isinstance(detail, Mapping):
        return None
    typed = provider_error(detail.get("message"), detail.get("type"), body)
    typed.__cause__ = error
    return typed


def typed_failure(error: Exception) -> tuple[Exception, bool]:
    """How a failed turn ends: the error to report, and whether streaming again may help.

    Ours pass through (a ``ProviderError`` says itself whether a retry helps); an HTTP status
    error becomes a ``ProviderError`` with the status as ``code``; a network error becomes a
    ``StreamInterruptedError``; anything else (a bug, an unknown failure) comes as raised.
    """
    if isinstance(error, ProviderError):
        # Typed already (an in-band error, or a source typing its SDK's): it says itself.
        return error, error.retryable is not False
    if isinstance(error, ToolCallStreamError):
        if (
            not isinstance(error, StreamInterruptedError)
            or getattr(error, "retryable", None) is False
        ):
            return error, False
        cause = error.__cause__
        return error, cause is None or _transient(cause)
    status = _status(error)
    inband = _inband_error(error, status)
    if inband is not None:
        return inband, inband.retryable is not False
    if status is not None and not isinstance(error, _PROGRAMMING_ERRORS):
        typed = ProviderError(
            f"the provider answered HTTP {status}: "
            f"{clip(str(getattr(error, 'message', error)))}; nothing was emitted",
            code=status,
            body=getattr(error, "body", None),
        )
        if typed.retryable:
            typed.hint = RETRY_HINT
        typed.__cause__ = error
        return typed, typed.retryable is not False
    if _transient(error):
        return interrupted(error), True
    return error, False


class _UnusableStreamError(TypeError):
    """``open_stream`` returned something that is not a chunk source."""


def _unusable(value: object, why: str = "") -> _UnusableStreamError:
    return _UnusableStreamError(
        f"open_stream returned {a_or_an(type(value).__name__)}{why}; return an Observable of "
        f"events, an SDK Stream or AsyncStream (or the coroutine that creates it), an openai "
        f"with_streaming_response manager, or an iterable of events"
    )


def discard(opened: object) -> None:
    """Close what ``open_stream`` returned without reading it."""
    if inspect.iscoroutine(opened):
        opened.close()
        return
    # openai's async with_streaming_response manager holds its request as a coroutine.
    request = getattr(opened, "_api_request", None)
    if inspect.iscoroutine(request):
        request.close()
        return
    close = getattr(opened, "close", None)
    if callable(close) and not isinstance(opened, Observable):
        result = close()
        if inspect.iscoroutine(result):
            result.close()


def open_chunks(value: object, loop: asyncio.AbstractEventLoop | None) -> Observable[Any]:
    """What ``open_stream`` returned, as an Observable of chunks; ``TypeError`` if unusable."""
    if isinstance(value, Observable):
        return value
    for spec in WIRES:
        found = spec.sdk_stream(value, loop)
        if found is not None:
            return found
    response_kind = _openai_response_kind(value)
    if response_kind is not None:
        # openai's with_streaming_response: its raw bytes, read without per-chunk models.
        if not response_kind.startswith("Async"):
            return from_openai_response(value)
        if loop is not None:
            return from_async_openai_response(value, loop=loop)
        discard(value)  # its request was never sent, and no warning about it
        raise _unusable(
            value,
            " but the agent loop does not run on an asyncio loop (await it in a coroutine, "
            "not run(), with no scheduler of another kind)",
        )
    if inspect.isawaitable(value) or isinstance(value, AsyncIterable):
        if loop is None:
            discard(value)  # never awaited, and no warning about it
            raise _unusable(
                value,
                " but the agent loop does not run on an asyncio loop (await it in a coroutine, "
                "not run(), with no scheduler of another kind)",
            )
        if isinstance(value, AsyncIterable):
            return from_async_openai_stream(value, loop=loop)
        return _from_awaitable(value, loop)
    if callable(getattr(value, "model_dump", None)):
        # A pydantic model is iterable (its fields), but a ChatCompletion is no stream.
        raise _unusable(value, f" ({not_streamed('it')})")
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise _unusable(value)
    return from_openai_stream(value)


async def _awaited_stream(awaitable: Awaitable[Any]) -> AsyncIterator[Any]:
    """The chunks of the async stream an awaitable gives (``await client…create(stream=True)``)."""
    stream = await awaitable
    if not isinstance(stream, AsyncIterable):
        await _close(stream)
        raise _unusable(stream, " from its awaitable")
    try:
        async for chunk in stream:
            yield chunk
    except Exception as error:
        typed = _typed_sdk_error(error)
        if typed is error:
            raise
        raise typed from error
    finally:
        await _close(stream)


def _from_awaitable(awaitable: Awaitable[Any], loop: asyncio.AbstractEventLoop) -> Observable[Any]:
    def subscribe(
        observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        reading = from_async_iterable(lambda: _awaited_stream(awaitable), loop=loop).subscribe(
            observer, scheduler=scheduler
        )

        def close_unstarted() -> None:
            # Disposed before its first step: close the coroutine so no request goes out.
            if inspect.iscoroutine(awaitable) and (
                inspect.getcoroutinestate(awaitable) == inspect.CORO_CREATED
            ):
                awaitable.close()

        def dispose() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(close_unstarted)

        return CompositeDisposable(reading, Disposable(dispose))

    return Observable(subscribe)


def schema_problem(tool: Callable[..., Any], arguments: dict[str, Any]) -> str | None:
    """Why the arguments fail the tool's ``parameters`` schema, without quoting their values."""
    schema = getattr(tool, "parameters", None)
    if not isinstance(schema, Mapping):
        return None
    import jsonschema  # the "schema" extra

    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    rule = json.dumps(error.validator_value, default=str)
    if len(rule) > 80:
        rule = rule[:77] + "..."
    return f"arguments do not match the tool's schema: ${where} fails {error.validator!r} {rule}"


class RunsOn:
    """Where the tools of one conversation run: a scheduler, and the asyncio loop if any."""

    __slots__ = ("loop", "scheduler")

    def __init__(
        self, scheduler: abc.SchedulerBase, loop: asyncio.AbstractEventLoop | None
    ) -> None:
        self.scheduler = scheduler
        self.loop = loop


def run_tool(
    tool: Callable[..., Any], call: ToolCall, where: RunsOn, claim: Callable[[], bool]
) -> Observable[Any]:
    """The tool's single result, started on ``where.scheduler`` if ``claim()``, else empty.

    A function call's tool gets the arguments as keywords; a custom call's its raw text.

    An ``async`` tool runs on ``where.loop``, or (no loop) to completion on a loop of its own
    on the dispatching thread; disposing cancels it either way.
    """

    def subscribe(
        observer: abc.ObserverBase[Any], _: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        inner = SerialDisposable()

        def start(_: abc.SchedulerBase, __: object = None) -> None:
            if not claim():
                observer.on_completed()  # not run: the caller decides what answers it
                return
            try:
                given = call_input(call)
                if isinstance(given, str):
                    # Free-form input (a Responses custom tool): the text itself, unparsed.
                    result = tool(given)
                else:
                    problem = schema_problem(tool, given)
                    if problem is not None:
                        raise ValueError(problem)
                    result = tool(**given)
            except Exception as error:  # noqa: BLE001 - the tool's failure, reported
                observer.on_error(error)
                return
            if isinstance(result, Observable):
                inner.disposable = result.pipe(ops.last()).subscribe(
                    observer, scheduler=where.scheduler
                )
            elif inspect.isawaitable(result):
                if where.loop is None:
                    _run_on_own_loop(result, observer, inner)
                else:
                    inner.disposable = _run_on_loop(result, observer, where.loop)
            else:
                observer.on_next(result)
                observer.on_completed()

        return CompositeDisposable(where.scheduler.schedule(start), inner)

    return Observable(subscribe)


async def _result_of(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _deliver(future: asyncio.Future[Any], observer: abc.ObserverBase[Any], disposed: bool) -> None:
    if future.cancelled():
        if not disposed:
            # The tool let out a cancellation of its own (an inner task cancelled by
            # someone else): a failure of the tool, not the end of the loop.
            observer.on_error(RuntimeError("the tool's task was cancelled"))
        return
    error = future.exception()
    if isinstance(error, Exception):
        observer.on_error(error)
    elif error is None:
        observer.on_next(future.result())
        observer.on_completed()


def _run_on_loop(
    awaitable: Awaitable[Any], observer: abc.ObserverBase[Any], loop: asyncio.AbstractEventLoop
) -> abc.DisposableBase:
    future = asyncio.run_coroutine_threadsafe(_result_of(awaitable), loop)
    disposed = False

    def done(finished: Any) -> None:
        _deliver(finished, observer, disposed)

    future.add_done_callback(done)

    def cancel() -> None:
        nonlocal disposed
        disposed = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs anyway
            future.cancel()

    return Disposable(cancel)


def _run_on_own_loop(
    awaitable: Awaitable[Any], observer: abc.ObserverBase[Any], inner: SerialDisposable
) -> None:
    own = asyncio.new_event_loop()
    task = own.create_task(_result_of(awaitable))
    disposed = False

    def cancel() -> None:
        nonlocal disposed
        disposed = True
        # From another thread while it runs; a closed loop has nothing left to cancel.
        with contextlib.suppress(RuntimeError):
            own.call_soon_threadsafe(task.cancel)

    inner.disposable = Disposable(cancel)
    try:
        own.run_until_complete(asyncio.wait([task]))
        own.run_until_complete(own.shutdown_asyncgens())
    finally:
        own.close()
    _deliver(task, observer, disposed)
