"""The agent loop: stream → assemble → dispatch → stream again, until the model answers.

Where each step runs: on ``agent_loop(scheduler=…)`` when given, else on the scheduler the
subscription passes (``subscribe(scheduler=…)``, ``subscribe_on``, ``run()``'s own), else on
the asyncio loop running at subscription (``await``), else on the subscribing thread (then
``subscribe()`` returns when the conversation ends). Turns, backoff timers and tool calls all
go through that one scheduler.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    MutableMapping,
    Sequence,
)
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

import reactivex
from reactivex import Observable, abc
from reactivex import operators as ops
from reactivex.disposable import CompositeDisposable, Disposable, SerialDisposable
from reactivex.scheduler import CurrentThreadScheduler
from reactivex.scheduler.eventloop import AsyncIOScheduler

from ._assembler import TurnReader, resolve_policy, single_turn
from ._errors import MalformedChunkError, StreamInterruptedError, ToolCallStreamError
from ._lift import interrupted
from ._policy import Policy
from ._types import AssistantTurn, ToolCall, ToolCallStarted, tool_content
from .sources import _close, _typed_sdk_error, from_async_openai_stream, from_openai_stream

__all__ = [
    "AgentEvent",
    "Conversation",
    "Ledger",
    "ToolCallFinished",
    "ToolExecutionError",
    "TurnFinished",
    "TurnLimitError",
    "TurnRetried",
    "agent_loop",
    "final_conversation",
]

Message: TypeAlias = dict[str, Any]
Ledger: TypeAlias = MutableMapping[str, "str | None"]
"""Call id → the tool message content it got, or ``None`` while (or if) its result is unknown."""


class TurnLimitError(ToolCallStreamError):
    """The model still asked for tools after ``max_turns`` turns; the loop stopped."""


class ToolExecutionError(ToolCallStreamError):
    """A tool could not run (unknown, raised, or arguments against its schema).

    The cause is kept as ``__cause__``. Raised only with ``tool_errors="raise"``.
    """


@dataclass(frozen=True, slots=True)
class TurnRetried:
    """Turn ``turn`` was interrupted (``error``) and is streamed again: attempt ``attempt``."""

    turn: int
    attempt: int
    error: ToolCallStreamError


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """Turn ``turn`` (1-based) assembled atomically; its calls are about to be dispatched."""

    turn: int
    assistant: AssistantTurn


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool returned (``content`` is what the model will read), or failed (``error``).

    ``reused`` is true when the call id was already in the ledger (or answered in the given
    messages): the tool did not run again and ``content`` is the recorded answer.
    """

    call: ToolCall
    content: str
    error: Exception | None = None
    reused: bool = False


@dataclass(frozen=True, slots=True)
class Conversation:
    """The last event: every message, starting with the ones given, and the final turn."""

    messages: tuple[Message, ...]
    final: AssistantTurn
    turns: int


AgentEvent: TypeAlias = (
    "ToolCallStarted | TurnRetried | TurnFinished | ToolCallFinished | Conversation"
)
ChunkSource: TypeAlias = (
    "Observable[Any] | Iterable[Any] | AsyncIterable[Any] | Awaitable[AsyncIterable[Any]]"
)


def final_conversation() -> Callable[[Observable[AgentEvent]], Observable[Conversation]]:
    """The loop's final ``Conversation`` alone, typed: ``agent_loop(…).pipe(final_conversation())``.

    ``AgentEvent -> Conversation``; errors pass through; a loop that ends without one (it
    never does) would be a ``SequenceContainsNoElementsError``.
    """

    def operator(source: Observable[AgentEvent]) -> Observable[Conversation]:
        def is_conversation(event: AgentEvent) -> bool:
            return isinstance(event, Conversation)

        return source.pipe(
            ops.filter(is_conversation),
            ops.map(_as_conversation),
            ops.last(),
        )

    return operator


def _as_conversation(event: AgentEvent) -> Conversation:
    assert isinstance(event, Conversation)  # filtered just before
    return event


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
    UnicodeError,
)
# Transport and SDK packages whose errors (other than programming errors) mean "try again".
_NETWORK_PACKAGES = frozenset(
    {"httpx", "httpcore", "h11", "h2", "openai", "anthropic", "aiohttp", "urllib3", "requests"}
)


def _transient(error: BaseException) -> bool:
    """Whether an exception from opening or reading a stream may pass on a second try."""
    if isinstance(error, _PROGRAMMING_ERRORS):
        return False
    if isinstance(error, OSError):  # ConnectionError, TimeoutError, socket errors
        return True
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return status in (408, 409, 429) or status >= 500
    return type(error).__module__.partition(".")[0] in _NETWORK_PACKAGES


def _retryable(error: ToolCallStreamError) -> bool:
    if not isinstance(error, StreamInterruptedError):
        return False
    if getattr(error, "retryable", None) is False:  # a ProviderError that says so
        return False
    cause = error.__cause__
    return cause is None or _transient(cause)


def _content(value: object) -> str:
    return tool_content(value, default=str)


def _schema_problem(tool: Callable[..., Any], arguments: dict[str, Any]) -> str | None:
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


def _answered(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The tool answers already in a transcript, by ``tool_call_id``."""
    answers: dict[str, str] = {}
    for message in messages:
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            answers[message["tool_call_id"]] = _content(message.get("content"))
    return answers


def _unique_ids(turn: AssistantTurn, policy: Policy) -> AssistantTurn:
    """The turn, or a typed error when two of its calls share one id.

    The default policy refuses it (the transcript would answer one id twice); with
    ``synthesize_missing_ids`` a repeated id gets a suffix and is counted in ``normalizations``.
    """
    first: dict[str, int] = {}
    calls: list[ToolCall] = []
    renamed = 0
    for call in turn.tool_calls:
        if call.id in first:
            if not policy.synthesize_missing_ids:
                raise MalformedChunkError(
                    f"tool calls {first[call.id]} and {call.index} share the id "
                    f"{call.id[:64]!r}; each call needs its own",
                    index=call.index,
                    name=call.name,
                )
            new_id = call.id
            while new_id in first:
                new_id = f"{new_id}_{call.index}"
            call = replace(call, id=new_id)
            renamed += 1
        first[call.id] = call.index
        calls.append(call)
    if not renamed:
        return turn
    counts = dict(turn.normalizations)
    counts["renamed_duplicate_ids"] = counts.get("renamed_duplicate_ids", 0) + renamed
    return replace(turn, tool_calls=tuple(calls), normalizations=counts)


async def _awaited_stream(awaitable: Awaitable[Any]) -> AsyncIterator[Any]:
    """The chunks of the async stream an awaitable gives (``await client…create(stream=True)``)."""
    stream = await awaitable
    if not isinstance(stream, AsyncIterable):
        await _close(stream)
        raise _UnusableStreamError(
            f"open_stream's awaitable gave a {type(stream).__name__}, not an async stream"
        )
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


def _discard(opened: object) -> None:
    """Close what ``open_stream`` returned without reading it."""
    if inspect.iscoroutine(opened):
        opened.close()
        return
    close = getattr(opened, "close", None)
    if callable(close) and not isinstance(opened, Observable):
        result = close()
        if inspect.iscoroutine(result):
            result.close()


class _UnusableStreamError(TypeError):
    """``open_stream`` returned something that is not a chunk source."""


def _unusable(value: object, why: str = "") -> _UnusableStreamError:
    return _UnusableStreamError(
        f"open_stream returned a {type(value).__name__}{why}; return an Observable of chunks, "
        f"an openai Stream or AsyncStream (or the coroutine that creates it), or an iterable "
        f"of chunks"
    )


def _open(value: object, loop: asyncio.AbstractEventLoop | None) -> Observable[Any]:
    """What ``open_stream`` returned, as an Observable of chunks; ``TypeError`` if unusable."""
    if isinstance(value, Observable):
        return value
    if inspect.isawaitable(value) or isinstance(value, AsyncIterable):
        if loop is None:
            if inspect.iscoroutine(value):
                value.close()  # never awaited, and no warning about it
            raise _unusable(
                value, " but no asyncio loop runs the agent loop (await it inside a coroutine)"
            )
        if isinstance(value, AsyncIterable):
            return from_async_openai_stream(value, loop=loop)
        return _from_awaitable(value, loop)
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise _unusable(value)
    return from_openai_stream(value)


def _from_awaitable(awaitable: Awaitable[Any], loop: asyncio.AbstractEventLoop) -> Observable[Any]:
    from .sources import from_async_iterable

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
            if loop.is_closed():
                return
            loop.call_soon_threadsafe(close_unstarted)

        return CompositeDisposable(reading, Disposable(dispose))

    return Observable(subscribe)


def _run_tool(
    tool: Callable[..., Any],
    call: ToolCall,
    scheduler: abc.SchedulerBase,
    loop: asyncio.AbstractEventLoop | None,
    claim: Callable[[], bool],
) -> Observable[Any]:
    """The tool's single result, started on ``scheduler`` only if ``claim()`` says it may."""

    def subscribe(
        observer: abc.ObserverBase[Any], _: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        inner = SerialDisposable()

        def start(_: abc.SchedulerBase, __: object = None) -> None:
            if not claim():
                return
            try:
                problem = _schema_problem(tool, call.parsed_arguments)
                if problem is not None:
                    raise ValueError(problem)
                result = tool(**call.parsed_arguments)
            except Exception as error:  # noqa: BLE001 - the tool's failure, reported
                observer.on_error(error)
                return
            inner.disposable = _result(result, loop).subscribe(observer, scheduler=scheduler)

        return CompositeDisposable(scheduler.schedule(start), inner)

    return Observable(subscribe)


def _result(result: object, loop: asyncio.AbstractEventLoop | None) -> Observable[Any]:
    if isinstance(result, Observable):
        return result.pipe(ops.last())
    if inspect.isawaitable(result):
        return _from_tool_awaitable(result, loop)
    return reactivex.return_value(result)


def _from_tool_awaitable(
    awaitable: Awaitable[Any], loop: asyncio.AbstractEventLoop | None
) -> Observable[Any]:
    async def run() -> Any:
        return await awaitable

    if loop is None:
        # No asyncio loop runs this conversation (``run()``, a thread pool): the tool runs to
        # completion on a loop of its own, on the thread that dispatched it.
        def subscribe_blocking(
            observer: abc.ObserverBase[Any], _: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            try:
                value = asyncio.run(run())
            except Exception as error:  # noqa: BLE001 - the tool's failure, reported
                observer.on_error(error)
            else:
                observer.on_next(value)
                observer.on_completed()
            return Disposable()

        return Observable(subscribe_blocking)

    def subscribe(
        observer: abc.ObserverBase[Any], _: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        future = asyncio.run_coroutine_threadsafe(run(), loop)

        def done(finished: Any) -> None:
            if finished.cancelled():
                return
            error = finished.exception()
            if error is not None:
                observer.on_error(error)
            else:
                observer.on_next(finished.result())
                observer.on_completed()

        future.add_done_callback(done)

        def cancel() -> None:
            future.cancel()

        return Disposable(cancel)

    return Observable(subscribe)


@dataclass(frozen=True, slots=True)
class _Settings:
    open_stream: Callable[[list[Any]], ChunkSource]
    tools: Mapping[str, Callable[..., Any]]
    messages: tuple[Message, ...]
    max_turns: int
    retries: int
    backoff: float
    tool_errors: Literal["message", "raise"]
    policy: Policy
    empty_content: str | None
    ledger: Ledger


class _Conversation:
    """One subscription's run of the loop: its transcript, its scheduler, its one ending."""

    def __init__(
        self,
        settings: _Settings,
        observer: abc.ObserverBase[AgentEvent],
        scheduler: abc.SchedulerBase,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        self.s = settings
        self.observer = observer
        self.scheduler = scheduler
        self.loop = loop
        self.current = SerialDisposable()
        self.transcript = [dict(m) for m in settings.messages]
        self.answered = _answered(settings.messages)
        self.lock = threading.Lock()
        self.done = False

    # -- the one ending ---------------------------------------------------------------------

    def ended(self) -> bool:
        return self.done

    def _finish(self) -> bool:
        """Claim the ending: true once; after it nothing is sent, started or dispatched."""
        with self.lock:
            if self.done:
                return False
            self.done = True
        return True

    def dispose(self) -> None:
        self._finish()
        self.current.dispose()

    def fail(self, error: Exception) -> None:
        if self._finish():
            self.current.dispose()
            self.observer.on_error(error)

    def emit(self, event: AgentEvent) -> bool:
        """Send one event; false when the loop has ended (or the subscriber's on_next raised)."""
        if self.done:
            return False
        try:
            self.observer.on_next(event)
        except Exception as error:  # noqa: BLE001 - the subscriber's own; sent back as raised
            # Never retried or re-typed: the loop stops and on_error gets that same exception.
            self.fail(error)
            return False
        return not self.done

    # -- turns ------------------------------------------------------------------------------

    def start(self) -> abc.DisposableBase:
        self.current.disposable = self.scheduler.schedule(lambda *_: self.stream_turn(1, 0))
        return Disposable(self.dispose)

    def stream_turn(self, number: int, attempt: int) -> None:
        if self.done:
            return
        try:
            opened = self.s.open_stream(list(self.transcript))
            if self.ended():  # disposed while the request was being made
                _discard(opened)
                return
            source = _open(opened, self.loop)
        except Exception as error:  # noqa: BLE001 - the caller's function failed; typed below
            self.turn_failed(number, attempt, error)
            return
        reader = TurnReader(self.s.policy)
        ended = False

        def on_chunk(chunk: Any) -> None:
            nonlocal ended
            if ended or self.done:
                return
            try:
                events = reader.feed(chunk)
            except Exception as error:  # noqa: BLE001 - the reader's typed errors
                ended = True
                self.turn_failed(number, attempt, error)
                return
            for event in events:
                if not self.emit(event):
                    ended = True
                    return

        def on_error(error: Exception) -> None:
            nonlocal ended
            if not ended:
                ended = True
                self.turn_failed(number, attempt, error)

        def on_completed() -> None:
            nonlocal ended
            if ended:
                return
            ended = True
            try:
                turn = _unique_ids(single_turn(reader.close_choices()), self.s.policy)
            except Exception as error:  # noqa: BLE001 - the reader's typed errors
                self.turn_failed(number, attempt, error)
                return
            self.turn_done(number, turn)

        holder = SerialDisposable()
        self.current.disposable = holder
        holder.disposable = source.subscribe(
            on_chunk, on_error, on_completed, scheduler=self.scheduler
        )

    def turn_failed(self, number: int, attempt: int, error: Exception) -> None:
        if self.done:
            return
        if isinstance(error, _PROGRAMMING_ERRORS) and not isinstance(error, UnicodeError):
            self.fail(error)  # a bug in open_stream or in what it returned: as raised
            return
        typed = interrupted(error)
        if not (_retryable(typed) and attempt < self.s.retries):
            self.fail(typed)
            return
        if not self.emit(TurnRetried(number, attempt + 1, typed)):
            return
        delay = self.s.backoff * (2**attempt)
        self.current.disposable = self.scheduler.schedule_relative(
            delay, lambda *_: self.stream_turn(number, attempt + 1)
        )

    def turn_done(self, number: int, turn: AssistantTurn) -> None:
        if not self.emit(TurnFinished(number, turn)):
            return
        if not turn.tool_calls:
            self.transcript.append(turn.to_message(self.s.empty_content))
            if self.emit(Conversation(tuple(self.transcript), turn, number)) and self._finish():
                self.current.dispose()
                self.observer.on_completed()
            return
        if number >= self.s.max_turns:
            self.fail(
                TurnLimitError(
                    f"the model still asked for tools after {self.s.max_turns} turns "
                    f"({', '.join(c.name for c in turn.tool_calls)}); raise max_turns or "
                    f"check the tools' answers"
                )
            )
            return
        results = [self.dispatch(call) for call in turn.tool_calls]
        holder = SerialDisposable()
        self.current.disposable = holder
        holder.disposable = (
            reactivex.fork_join(*results)
            .pipe(ops.first())
            .subscribe(
                lambda finished: self.answered_turn(number, turn, finished),
                self.fail,
                scheduler=self.scheduler,
            )
        )

    def answered_turn(
        self, number: int, turn: AssistantTurn, finished: Sequence[ToolCallFinished]
    ) -> None:
        for event in finished:
            if not self.emit(event):
                return
        self.transcript.extend(
            turn.exchange([event.content for event in finished], self.s.empty_content)
        )
        self.current.disposable = self.scheduler.schedule(
            lambda *_: self.stream_turn(number + 1, 0)
        )

    # -- tools ------------------------------------------------------------------------------

    def dispatch(self, call: ToolCall) -> Observable[ToolCallFinished]:
        ledger = self.s.ledger
        known = self.answered.get(call.id)
        if known is None and call.id in ledger:
            known = ledger[call.id]
            if known is None:
                return self.failed(
                    call,
                    RuntimeError(
                        f"call id {call.id[:64]!r} was dispatched before and its result is "
                        f"unknown; it was not run again"
                    ),
                )
        if known is not None:
            return reactivex.return_value(ToolCallFinished(call, known, reused=True))
        tool = self.s.tools.get(call.name)
        if tool is None:
            return self.failed(call, LookupError(f"unknown tool {call.name[:64]!r}"))

        def record(value: object) -> ToolCallFinished:
            finished = ToolCallFinished(call, _content(value))
            ledger[call.id] = finished.content
            return finished

        def claim() -> bool:
            with self.lock:
                if self.done:
                    return False
                ledger[call.id] = None  # at most once, even if the result never comes
            return True

        return _run_tool(tool, call, self.scheduler, self.loop, claim).pipe(
            ops.map(record),
            ops.catch(lambda error, _: self.failed(call, error, ledger)),
        )

    def failed(
        self, call: ToolCall, error: Exception, ledger: Ledger | None = None
    ) -> Observable[ToolCallFinished]:
        if self.s.tool_errors == "raise":
            typed = ToolExecutionError(
                f"tool call {call.index} ({call.name[:64]}): {type(error).__name__}: {error}",
                index=call.index,
                name=call.name,
            )
            typed.__cause__ = error
            return reactivex.throw(typed)
        content = f"Error: {type(error).__name__}: {error}"
        if ledger is not None:
            ledger[call.id] = content
        return reactivex.return_value(ToolCallFinished(call, content, error))


def agent_loop(
    open_stream: Callable[[list[Any]], ChunkSource],
    tools: Mapping[str, Callable[..., Any]],
    messages: Sequence[Mapping[str, Any]],
    *,
    max_turns: int = 8,
    retries: int = 2,
    backoff: float = 0.5,
    tool_errors: Literal["message", "raise"] = "message",
    policy: Policy | None = None,
    scheduler: abc.SchedulerBase | None = None,
    empty_content: str | None = None,
    ledger: Ledger | None = None,
) -> Observable[AgentEvent]:
    """Run the tool conversation until a turn has no tool calls; emit its progress.

    ``open_stream(messages)`` opens one chat-completion stream: an Observable of chunks, an
    openai SDK ``Stream`` or ``AsyncStream``, the coroutine ``AsyncOpenAI().….create(…,
    stream=True)`` returns (awaited on the loop), or any iterable of chunks. ``tools`` maps
    names to callables taking the arguments as keywords (sync, ``async``, or returning an
    Observable; a ``parameters`` attribute holding a JSON schema is checked first). Emits
    ``ToolCallStarted`` as names stream in, ``TurnRetried``, ``TurnFinished``, one
    ``ToolCallFinished`` per call, and finally the ``Conversation``
    (``.pipe(final_conversation())`` keeps only that, typed).

    - Nothing is appended until a turn is complete; then the assistant message and one tool
      message per call, in call order (calls of a turn run concurrently on a pool scheduler).
    - Retried, ``retries`` times after ``backoff`` seconds doubled each time, on the loop's
      scheduler: a ``StreamInterruptedError`` from the network (dropped connection, timeout,
      no finish, a ``ProviderError`` not marked ``retryable=False``, an HTTP 408/409/429/5xx).
      Never retried: the model's invalid output, and programming errors (``open_stream``
      raising ``TypeError``/``AttributeError``…, or returning ``None``, an int: a
      ``TypeError`` at once), delivered as raised.
    - Exactly once: each call id is written to ``ledger`` (a new dict per ``agent_loop()``
      call unless given) when its tool starts, then with its answer. An id already in the
      ledger, or already answered by a tool message in ``messages``, is not run again: it gets
      the recorded answer (``ToolCallFinished.reused``), or an error message when its result
      was never recorded. So ``agent_loop(…, ledger=done).pipe(ops.retry(3))`` re-streams but
      never re-runs a call; to resume instead, start a new loop from the messages so far.
      Two calls of one turn sharing an id are a ``MalformedChunkError`` (the default policy).
    - An unknown tool, a tool that raises, or arguments against its schema become a tool
      message the model can read (``tool_errors="message"``) or a ``ToolExecutionError``.
    - After ``max_turns`` turns that all asked for tools: ``TurnLimitError``.
    - Disposing cancels the stream in flight and any running tool; after it no tool starts
      and no request is sent.
    - Your own callback raising is not a stream failure: when ``on_next`` raises, the loop
      stops (nothing more is streamed or dispatched, no retry) and ``on_error`` gets that same
      exception, once.

    Where each step runs: see the module docstring (``scheduler`` overrides the
    subscription's). An ``async`` tool runs on the asyncio loop when there is one, else to
    completion on a loop of its own on the dispatching thread.

    ``empty_content=""`` sends ``""`` instead of ``null`` as the content of an assistant
    message that only calls tools (llama-cpp-python's server refuses ``null``).
    """
    if max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    settings = _Settings(
        open_stream=open_stream,
        tools=tools,
        messages=tuple(dict(m) for m in messages),
        max_turns=max_turns,
        retries=retries,
        backoff=backoff,
        tool_errors=tool_errors,
        policy=resolve_policy(policy, None),
        empty_content=empty_content,
        ledger=ledger if ledger is not None else {},
    )

    def subscribe(
        observer: abc.ObserverBase[AgentEvent], given: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        chosen = scheduler or given
        if isinstance(chosen, AsyncIOScheduler):
            running = chosen._loop  # the loop its callbacks run on
        elif chosen is None:
            chosen = (
                AsyncIOScheduler(running)
                if running is not None
                else CurrentThreadScheduler.singleton()
            )
        return _Conversation(settings, observer, chosen, running).start()

    return Observable(subscribe)
