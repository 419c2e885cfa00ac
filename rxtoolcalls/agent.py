"""The agent loop: stream → assemble → dispatch → stream again, until the model answers."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import reactivex
from reactivex import Observable, abc
from reactivex import operators as ops
from reactivex.disposable import SerialDisposable, SingleAssignmentDisposable
from reactivex.scheduler import TimeoutScheduler

from ._assembler import TurnReader, resolve_policy, single_turn
from ._errors import StreamInterruptedError, ToolCallStreamError
from ._lift import Fail, Stage, interrupted, lift
from ._policy import Policy
from ._types import AssistantTurn, ToolCall, ToolCallStarted
from .sources import from_async_iterable, from_openai_stream

__all__ = [
    "AgentEvent",
    "Conversation",
    "ToolCallFinished",
    "ToolExecutionError",
    "TurnFinished",
    "TurnLimitError",
    "TurnRetried",
    "agent_loop",
]

Message: TypeAlias = dict[str, Any]


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
    """A tool returned (``content`` is what the model will read), or failed (``error``)."""

    call: ToolCall
    content: str
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class Conversation:
    """The last event: every message, starting with the ones given, and the final turn."""

    messages: tuple[Message, ...]
    final: AssistantTurn
    turns: int


AgentEvent: TypeAlias = (
    "ToolCallStarted | TurnRetried | TurnFinished | ToolCallFinished | Conversation"
)
ChunkSource: TypeAlias = "Observable[Any] | Iterable[Any] | AsyncIterable[Any]"


def _assemble_with_progress(
    policy: Policy,
) -> Callable[[Observable[Any]], Observable[ToolCallStarted | AssistantTurn]]:
    """One pass over the chunks: each call's start as it is named, then the turn."""

    def make(observer: abc.ObserverBase[ToolCallStarted | AssistantTurn], _: Fail) -> Stage[Any]:
        reader = TurnReader(policy)

        def on_next(chunk: Any) -> None:
            for event in reader.feed(chunk):
                observer.on_next(event)

        def on_completed() -> None:
            observer.on_next(single_turn(reader.close_choices()))
            observer.on_completed()

        return Stage(on_next, on_completed)

    return lift(make)


def _as_observable(source: ChunkSource) -> Observable[Any]:
    if isinstance(source, Observable):
        return source
    if isinstance(source, AsyncIterable):
        stream = source
        return from_async_iterable(lambda: stream)
    return from_openai_stream(source)  # a sync SDK Stream, or any iterable


def _content(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _run_tool(tool: Callable[..., Any], call: ToolCall) -> Observable[Any]:
    """The tool's single result as an Observable: sync, async, or Observable-returning."""

    def start(_: abc.SchedulerBase | None) -> Observable[Any]:
        schema = getattr(tool, "parameters", None)
        if isinstance(schema, Mapping):
            import jsonschema  # the "schema" extra

            error = jsonschema.exceptions.best_match(
                jsonschema.validators.validator_for(schema)(schema).iter_errors(
                    call.parsed_arguments
                )
            )
            if error is not None:
                raise ValueError(f"arguments do not match the tool's schema: {error.message}")
        result = tool(**call.parsed_arguments)
        if isinstance(result, Observable):
            return result.pipe(ops.last())
        if inspect.isawaitable(result):
            return reactivex.from_future(asyncio.ensure_future(result))
        return reactivex.return_value(result)

    return reactivex.defer(start)


def agent_loop(
    open_stream: Callable[[list[Message]], ChunkSource],
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
) -> Observable[AgentEvent]:
    """Run the tool conversation until a turn has no tool calls; emit its progress.

    ``open_stream(messages)`` opens one chat-completion stream (an Observable of chunks, an
    openai SDK ``Stream`` or ``AsyncStream``, or any iterable); ``tools`` maps names to
    callables taking the arguments as keywords (sync, ``async``, or returning an Observable;
    a ``parameters`` attribute holding a JSON schema is checked first). Emits
    ``ToolCallStarted`` as names stream in, ``TurnRetried``, ``TurnFinished``, one
    ``ToolCallFinished`` per call, and finally the ``Conversation``.

    - Nothing is appended until a turn is complete; then the assistant message and one tool
      message per call, in call order (calls of a turn run concurrently).
    - A ``StreamInterruptedError`` (dropped connection, provider error, no finish) streams the
      same messages again, ``retries`` times, after ``backoff`` seconds doubled each time; no
      tool runs before its turn is complete, so none runs twice.
    - An unknown tool, a tool that raises, or arguments against its schema become a tool
      message the model can read (``tool_errors="message"``) or a ``ToolExecutionError``.
    - After ``max_turns`` turns that all asked for tools: ``TurnLimitError``.
    - Disposing cancels the stream in flight and any running tool.

    ``empty_content=""`` sends ``""`` instead of ``null`` as the content of an assistant
    message that only calls tools (llama-cpp-python's server refuses ``null``).
    """
    if max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    chosen = resolve_policy(policy, None)
    timer_scheduler = scheduler or TimeoutScheduler.singleton()
    start_messages = [dict(m) for m in messages]

    def subscribe(
        observer: abc.ObserverBase[AgentEvent], _: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        current = SerialDisposable()
        transcript = list(start_messages)
        dispatched: set[str] = set()
        done = False

        def fail(error: Exception) -> None:
            nonlocal done
            if not done:
                done = True
                observer.on_error(error)

        def stream_turn(number: int, attempt: int) -> None:
            if done:
                return
            try:
                source = _as_observable(open_stream(list(transcript)))
            except Exception as error:  # noqa: BLE001 - the caller's function failed
                on_turn_error(number, attempt, error)
                return
            turns: list[AssistantTurn] = []

            def on_event(event: ToolCallStarted | AssistantTurn) -> None:
                if isinstance(event, AssistantTurn):
                    turns.append(event)
                else:
                    observer.on_next(event)

            # Held before subscribing: a source that ends synchronously may already have moved
            # the loop on (a retry timer, the next turn) by the time subscribe() returns.
            holder = SingleAssignmentDisposable()
            current.disposable = holder
            holder.disposable = source.pipe(_assemble_with_progress(chosen)).subscribe(
                on_event,
                lambda error: on_turn_error(number, attempt, error),
                lambda: turn_done(number, turns[0]),
            )

        def on_turn_error(number: int, attempt: int, error: Exception) -> None:
            typed = interrupted(error)
            if isinstance(typed, StreamInterruptedError) and attempt < retries:
                observer.on_next(TurnRetried(number, attempt + 1, typed))
                delay = backoff * (2**attempt)
                current.disposable = timer_scheduler.schedule_relative(
                    delay, lambda *_: stream_turn(number, attempt + 1)
                )
                return
            fail(typed)

        def turn_done(number: int, turn: AssistantTurn) -> None:
            observer.on_next(TurnFinished(number, turn))
            if not turn.tool_calls:
                nonlocal done
                transcript.append(turn.to_message(empty_content))
                done = True
                observer.on_next(Conversation(tuple(transcript), turn, number))
                observer.on_completed()
                return
            if number >= max_turns:
                fail(
                    TurnLimitError(
                        f"the model still asked for tools after {max_turns} turns "
                        f"({', '.join(c.name for c in turn.tool_calls)}); raise max_turns or "
                        f"check the tools' answers"
                    )
                )
                return
            results = [dispatch(call) for call in turn.tool_calls]
            holder = SingleAssignmentDisposable()
            current.disposable = holder
            holder.disposable = (
                reactivex.fork_join(*results)
                .pipe(ops.first())
                .subscribe(
                    lambda finished: answered(number, turn, finished),
                    fail,
                )
            )

        def dispatch(call: ToolCall) -> Observable[ToolCallFinished]:
            def failed(error: Exception) -> Observable[ToolCallFinished]:
                if tool_errors == "raise":
                    typed = ToolExecutionError(
                        f"tool call {call.index} ({call.name}): {type(error).__name__}: {error}",
                        index=call.index,
                        name=call.name,
                    )
                    typed.__cause__ = error
                    return reactivex.throw(typed)
                content = f"Error: {type(error).__name__}: {error}"
                return reactivex.return_value(ToolCallFinished(call, content, error))

            tool = tools.get(call.name)
            if call.id in dispatched:
                return failed(ValueError(f"call id {call.id!r} was already dispatched"))
            dispatched.add(call.id)
            if tool is None:
                return failed(LookupError(f"unknown tool {call.name!r}"))
            return _run_tool(tool, call).pipe(
                ops.map(lambda value: ToolCallFinished(call, _content(value))),
                ops.catch(lambda error, _: failed(error)),
            )

        def answered(
            number: int, turn: AssistantTurn, finished: Sequence[ToolCallFinished]
        ) -> None:
            for event in finished:
                observer.on_next(event)
            transcript.extend(turn.exchange([event.content for event in finished], empty_content))
            stream_turn(number + 1, 0)

        stream_turn(1, 0)
        return current

    return Observable(subscribe)
