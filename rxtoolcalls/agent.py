"""The agent loop: stream → assemble → dispatch → stream again, until the model answers.

One loop for every wire: the turn's wire decides what goes back (``to_message``,
``tool_messages``), and an Anthropic ``pause_turn`` is streamed again with nothing dispatched.

Where each step runs: on ``agent_loop(scheduler=…)`` when given, else on the scheduler the
subscription passes (``subscribe(scheduler=…)``, ``subscribe_on``, ``run()``'s own), else on
the asyncio loop running at subscription (``await``), else on the subscribing thread (then
``subscribe()`` returns when the conversation ends). Turns, backoff timers and tool calls all
go through that one scheduler, with two exceptions:

- on an asyncio loop, whatever a stream or a tool sends from another thread (a sync stream's
  reader thread, a pool) is handled on the loop's thread, in order; awaited with
  ``scheduler=`` another scheduler, the events still reach the awaiting side on its loop;
- the one-thread scheduler ``subscribe_on`` hands over gives each tool a thread of its own,
  so a turn's calls run at once and a dispose is not queued behind them.

An ``async`` tool runs on the asyncio loop when the conversation runs there, else to
completion on a loop of its own on the dispatching thread (``run()`` in a notebook too);
disposing cancels it either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import threading
from collections import deque
from collections.abc import (
    AsyncIterable,
    Awaitable,
    Callable,
    Collection,
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
from reactivex.disposable import Disposable, SerialDisposable, SingleAssignmentDisposable
from reactivex.scheduler import CurrentThreadScheduler, EventLoopScheduler, NewThreadScheduler
from reactivex.scheduler.eventloop import AsyncIOScheduler, AsyncIOThreadSafeScheduler
from reactivex.subject import AsyncSubject

from ._agent_io import RunsOn, discard, open_chunks, run_tool, typed_failure
from ._close import resolve_policy, single_turn
from ._core import Call, keeping
from ._early import EarlyCalls
from ._errors import ToolCallStreamError, TruncatedToolCallError, clip
from ._fields import watch_fields
from ._policy import Policy, PolicyName
from ._reader import reader as TurnReader
from ._types import (
    AssistantTurn,
    TextDelta,
    ToolCall,
    ToolCallField,
    ToolCallStarted,
    documented_state,
    error_text,
    made_up_ids,
    new_text_delta,
    tool_content,
)
from .transcript import OpenTurn, open_turn, with_answers

__all__ = [
    "AgentEvent",
    "Conversation",
    "Ledger",
    "ToolCallEarly",
    "ToolCallFinished",
    "ToolCallRetracted",
    "ToolExecutionError",
    "TurnFinished",
    "TurnLimitError",
    "TurnRetried",
    "agent_loop",
    "final_conversation",
]

Message: TypeAlias = dict[str, Any]
Ledger: TypeAlias = MutableMapping[str, "str | None"]
"""A call → the answer's content it got, or ``None`` while (or if) its result is unknown."""


class TurnLimitError(ToolCallStreamError):
    """The model still asked for tools after ``max_turns`` turns; the loop stopped."""


class ToolExecutionError(ToolCallStreamError):
    """A tool could not run (unknown, raised, or arguments against its schema).

    The cause is kept as ``__cause__``. Raised only with ``tool_errors="raise"``.
    """


@documented_state
@dataclass(frozen=True, slots=True)
class TurnRetried:
    """Turn ``turn`` failed (``error``) and is streamed again: attempt ``attempt``.

    ``max_tokens`` is the raised output-token ceiling the new stream asks for, when the turn
    was cut by the ceiling (``TruncatedToolCallError``); ``None`` after a network failure.
    """

    turn: int
    attempt: int
    error: ToolCallStreamError
    max_tokens: int | None = None


@documented_state
@dataclass(frozen=True, slots=True)
class TurnFinished:
    """Turn ``turn`` (1-based) assembled atomically; its calls are about to be dispatched.

    A paused turn (``assistant.needs_continuation``) dispatches nothing: it is sent back and
    streamed again.
    """

    turn: int
    assistant: AssistantTurn


@documented_state
@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool returned, or failed (``error``); ``content`` is its answer as text.

    The answer goes back as ``turn.tool_messages()`` writes the result (on Gemini a mapping is
    the ``response`` itself, an error ``{"error": text}``).

    ``reused`` is true when the call was already in the ledger, or answered in the given
    messages (a resumed turn): the tool did not run again and ``content`` is that answer.
    ``early`` is true when the call was taken before its turn ended (``ToolCallEarly``).
    """

    call: ToolCall
    content: str
    error: Exception | None = None
    reused: bool = False
    early: bool = False


@documented_state
@dataclass(frozen=True, slots=True)
class ToolCallEarly:
    """Call ``call`` of turn ``turn`` is complete before its turn: its tool starts now.

    Only for the tools named in ``agent_loop(early=...)``. Its answer is held: it comes as a
    ``ToolCallFinished`` (``early``) once the turn committed, or a ``ToolCallRetracted`` says
    it was dropped. ``reused``: the ledger held its answer already, so the tool does not run.
    """

    turn: int
    call: ToolCall
    reused: bool = False


@documented_state
@dataclass(frozen=True, slots=True)
class ToolCallRetracted:
    """A call started early is taken back: its answer never reaches the transcript.

    ``reason`` says why, ``error`` is the turn's error when the turn failed. ``cancelled``: the
    tool had not answered, and was cancelled before it ran or while it ran (an ``async`` tool
    sees ``CancelledError``, a sync one on a thread is abandoned and its result dropped);
    otherwise its answer is dropped from the turn and kept for a retried turn that repeats the
    call (the very answer within the loop, its text in the ledger).
    """

    turn: int
    call: ToolCall
    reason: str
    error: Exception | None = None
    cancelled: bool = False


@documented_state
@dataclass(frozen=True, slots=True)
class Conversation:
    """The last event: every message, starting with the ones given, and the final turn.

    On the Responses wire the messages are the input items. A resumed turn's new answers
    come right after the given ones (inside the last given message when it holds the turn's
    other answers, on a wire that answers a turn in one message).
    """

    messages: tuple[Message, ...]
    """The whole transcript: the given messages, then each turn and its answers."""
    final: AssistantTurn
    """The last turn, the one without tool calls: ``final.content`` is the model's answer."""
    turns: int
    """How many turns were streamed (a retried turn counts once)."""


AgentEvent: TypeAlias = (
    "ToolCallStarted | ToolCallField | TextDelta | ToolCallEarly | ToolCallRetracted"
    " | TurnRetried | TurnFinished | ToolCallFinished | Conversation"
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


def _sendable(value: object) -> object:
    """A tool's result as ``tool_messages`` sends it: what JSON cannot hold, as its ``str``."""
    if isinstance(value, str):
        return value
    return json.loads(tool_content(value, default=str))


def _ledger_key(turn: int, call: ToolCall, made_up: bool = False) -> str:
    """A call's ledger key: its id, turn number, name and a digest of its arguments.

    The id alone is not enough: TGI sends ``"0"`` for every call of every turn. An id made up
    by the reader (``made_up``: Gemini sent none) is new on each stream of the turn: such a
    call is its place in the turn instead, so a re-streamed turn finds it.
    """
    digest = hashlib.sha256(call.arguments.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    if made_up:
        return json.dumps([None, turn, call.index, call.name, digest])
    return json.dumps([call.id, turn, call.name, digest])


def _as_list(message: Any) -> list[Message]:
    """``to_message()``'s value as entries of the transcript (Responses gives a list)."""
    return list(message) if isinstance(message, list) else [message]


# A call's answer: its event, and what ``tool_messages`` sends for it (the tool's result, its
# exception, or a reused answer's text).
_Answer: TypeAlias = tuple[ToolCallFinished, object]


# One lock for every ledger: claiming a call is a check and a write that must not interleave,
# and a ledger may be shared by several loops.
_LEDGER_LOCK = threading.Lock()
_UNKNOWN = object()


@documented_state
@dataclass(frozen=True, slots=True)
class _Settings:
    open_stream: Callable[..., ChunkSource]
    tools: Mapping[str, Callable[..., Any]]
    messages: tuple[Message, ...]
    max_turns: int
    retries: int
    backoff: float
    tool_errors: Literal["message", "raise"]
    policy: Policy
    empty_content: str | None
    ledger: Ledger
    resumed: OpenTurn | None
    early: frozenset[str]
    max_tokens: int | None
    max_tokens_limit: int | None
    fields: bool
    text: bool


@documented_state
@dataclass(frozen=True, slots=True)
class _Try:
    """One stream of a turn: its number, how many came before, network retries, ceiling."""

    number: int
    attempt: int = 0
    failures: int = 0
    ceiling: int | None = None


class _EarlyRun:
    """A call started before its turn ended: its held answer, and what cancels it."""

    __slots__ = (
        "answer",
        "call",
        "claimed",
        "finished",
        "key",
        "result",
        "stopped",
        "subscription",
    )

    def __init__(self, call: ToolCall, key: str) -> None:
        self.call = call
        self.key = key
        self.answer: AsyncSubject[_Answer] = AsyncSubject()
        self.subscription = SingleAssignmentDisposable()
        # Both under the conversation's lock: a run stopped before its claim never claims.
        self.claimed = False  # this run wrote the ledger's claim
        self.stopped = False
        self.finished = False
        self.result: _Answer | None = None  # the answer, once it came


class _OnLoop:
    """Runs callbacks on one asyncio loop's thread, in the order they came, from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.thread: int | None = None
        self.queue: deque[Callable[[], None]] = deque()
        self.lock = threading.Lock()

    def post(self, action: Callable[[], None]) -> None:
        with self.lock:
            if self.thread == threading.get_ident() and not self.queue:
                direct = True
            else:
                direct = False
                self.queue.append(action)
                if len(self.queue) == 1 and not self.loop.is_closed():
                    # A closed loop runs nothing more: whoever waited on it is gone.
                    with contextlib.suppress(RuntimeError):
                        self.loop.call_soon_threadsafe(self._drain)
        if direct:
            action()

    def _drain(self) -> None:
        self.thread = threading.get_ident()
        while True:
            with self.lock:
                if not self.queue:
                    return
                action = self.queue[0]
            try:
                action()
            finally:
                with self.lock:
                    self.queue.popleft()


class _OnLoopObserver(abc.ObserverBase[Any]):
    """Delivers to ``observer`` on the thread of the asyncio loop that awaits it.

    ``to_future`` is not thread-safe, and the loop's steps run on another scheduler.
    """

    def __init__(self, observer: abc.ObserverBase[Any], on_loop: _OnLoop) -> None:
        self.observer = observer
        self.on_loop = on_loop
        self.stop: Callable[[], None] = lambda: None
        self.stopped = False

    def on_next(self, value: Any) -> None:
        def deliver() -> None:
            if self.stopped:
                return
            try:
                self.observer.on_next(value)
            except Exception as error:  # noqa: BLE001 - the subscriber's own: ends the loop
                # Steps elsewhere may have gone on meanwhile: stop them, drop what is queued,
                # and end with that same exception.
                self.stopped = True
                self.stop()
                self.observer.on_error(error)

        self.on_loop.post(deliver)

    def on_error(self, error: Exception) -> None:
        self.on_loop.post(lambda: self._end(lambda: self.observer.on_error(error)))

    def on_completed(self) -> None:
        self.on_loop.post(lambda: self._end(self.observer.on_completed))

    def _end(self, notify: Callable[[], None]) -> None:
        if not self.stopped:
            self.stopped = True
            notify()


class _Conversation:
    """One subscription's run of the loop: its transcript, its scheduler, its one ending.

    Every notification from a stream or a tool is handled through ``post``: on the asyncio
    loop's thread when the loop runs there (a sync stream is read on a thread of its own),
    else where it arrives.
    """

    def __init__(
        self,
        settings: _Settings,
        observer: abc.ObserverBase[AgentEvent],
        scheduler: abc.SchedulerBase,
        loop: asyncio.AbstractEventLoop | None,
        on_loop: _OnLoop | None,
    ) -> None:
        self.s = settings
        self.observer = observer
        self.scheduler = scheduler
        # A single-thread scheduler (what subscribe_on hands over) would run a turn's tools one
        # after another, and queue a dispose behind them: tools get threads of their own.
        tools_on = NewThreadScheduler() if isinstance(scheduler, EventLoopScheduler) else scheduler
        self.tools_on = RunsOn(tools_on, loop if on_loop is not None else None)
        self.loop = loop
        self.on_loop = on_loop
        self.current = SerialDisposable()
        self.transcript = [dict(m) for m in settings.messages]
        self.lock = threading.Lock()
        self.done = False
        self.stopping = threading.Event()
        # This stream's calls started early, until its turn commits or fails; every one whose
        # tool may still run, cancelled by a dispose; and the answers of those a failed stream
        # took back, by ledger key, for a retry of the turn that repeats the call (the answer
        # itself, value and error, where the ledger keeps its text).
        self.runs: list[_EarlyRun] = []
        self.live: list[_EarlyRun] = []
        self.held: dict[str, _Answer] = {}

    # -- the one ending ---------------------------------------------------------------------

    def ended(self) -> bool:
        return self.done

    def _finish(self) -> bool:
        """Claim the ending: true once; after it nothing is sent, started or dispatched."""
        with self.lock:
            if self.done:
                return False
            self.done = True
        self.stopping.set()
        return True

    def dispose(self) -> None:
        self._finish()
        self.current.dispose()
        self.cancel_early()

    def fail(self, error: Exception) -> None:
        if self._finish():
            self.current.dispose()
            self.cancel_early()
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

    def post(self, action: Callable[[], None]) -> None:
        """Run one step of the loop; a bug in it ends the loop with that error, never a hang."""

        def guarded() -> None:
            if self.ended():
                return
            try:
                action()
            except Exception as error:
                if self.done:
                    raise  # the subscriber's on_completed or on_error: theirs, as raised
                self.fail(error)

        if self.on_loop is None:
            guarded()
        else:
            self.on_loop.post(guarded)

    def step(self, action: Callable[[], None], delay: float = 0.0) -> None:
        """Schedule the next step; it owns ``current`` until it puts its own work there."""
        slot = SingleAssignmentDisposable()
        self.current.disposable = slot

        def run(_: abc.SchedulerBase, __: object = None) -> None:
            self.post(action)

        if delay and isinstance(self.scheduler, CurrentThreadScheduler):
            # The subscribing thread waits itself: the trampoline's own sleep warns on stderr
            # ("Do not schedule blocking work!") and cannot be woken by a dispose.
            if self.stopping.wait(delay):
                return
            delay = 0.0
        # Assigned after scheduling: when the step already ran (an immediate scheduler), its
        # work replaced the slot, and this disposes only the spent schedule.
        slot.disposable = (
            self.scheduler.schedule_relative(delay, run) if delay else self.scheduler.schedule(run)
        )

    # -- turns ------------------------------------------------------------------------------

    def start(self) -> abc.DisposableBase:
        resumed = self.s.resumed
        if resumed is None:
            self.step(lambda: self.stream_turn(self.first_try(1)))
        else:
            self.step(lambda: self.resume(resumed))
        return Disposable(self.dispose)

    def resume(self, resumed: OpenTurn) -> None:
        """Answer the calls the given messages' last turn lacks answers for, then stream."""
        turn = resumed.turn
        made_up = made_up_ids(turn)
        results = [
            reactivex.return_value(_reused(call, resumed.answers[call.id]))
            if call.id in resumed.answers
            # Turn 0 in the ledger: the given messages' turn, before the loop's first.
            else self.dispatch(0, call, call.id in made_up)
            for call in turn.tool_calls
        ]
        self.await_all(results, lambda answers: self.resumed_turn(resumed, answers))

    def resumed_turn(self, resumed: OpenTurn, answers: Sequence[_Answer]) -> None:
        for event, _ in answers:
            if not self.emit(event):
                return
        new = [(event, value) for event, value in answers if event.call.id not in resumed.answers]
        lacking = replace(resumed.turn, tool_calls=tuple(event.call for event, _ in new))
        added = lacking.tool_messages([value for _, value in new])
        self.transcript = with_answers(self.transcript, added)
        self.step(lambda: self.stream_turn(self.first_try(1)))

    def await_all(
        self, results: Sequence[Observable[_Answer]], then: Callable[[Sequence[_Answer]], None]
    ) -> None:
        """Run ``then`` with every call's answer, in call order, once all have come."""
        holder = SerialDisposable()
        self.current.disposable = holder
        holder.disposable = (
            reactivex.fork_join(*results)
            .pipe(ops.first())
            .subscribe(
                lambda finished: self.post(lambda: then(finished)),
                lambda error: self.post(lambda: self.fail(error)),
                scheduler=self.scheduler,
            )
        )

    def first_try(self, number: int) -> _Try:
        return _Try(number, ceiling=self.s.max_tokens)

    def stream_turn(self, at: _Try) -> None:
        number = at.number
        try:
            if at.ceiling is None:
                opened = self.s.open_stream(list(self.transcript))
            else:
                opened = self.s.open_stream(list(self.transcript), max_tokens=at.ceiling)
            if self.ended():  # disposed while the request was being made
                discard(opened)
                return
            source = open_chunks(opened, self.loop)
        except Exception as error:  # noqa: BLE001 - the caller's function failed; typed below
            self.turn_failed(at, error)
            return
        watch = EarlyCalls(self.s.early, self.s.policy) if self.s.early else None
        # What a chunk completes (fields, prose), sent after the chunk's start events.
        pending: list[Any] = []
        max_depth = self.s.policy.limits.max_depth

        def on_open(call: Call) -> None:
            read = watch_fields(call, pending, False, max_depth) if self.s.fields else None
            if watch is not None:
                watch.open(call, read)
            elif read is not None:
                call.sink = keeping(call, read)

        def on_text(choice_index: int, kind: str, piece: str) -> None:
            pending.append(new_text_delta(piece, kind, choice_index))

        reader = TurnReader(
            self.s.policy,
            on_open=on_open if watch is not None or self.s.fields else None,
            on_text=on_text if self.s.text else None,
        )
        ended = False

        def on_chunk(chunk: Any) -> None:
            nonlocal ended
            if ended:
                return
            try:
                events = reader.feed(chunk)
            except Exception as error:  # noqa: BLE001 - the reader's typed errors
                ended = True
                self.turn_failed(at, error)
                return
            for event in events:
                if not self.emit(event):
                    ended = True
                    return
            if pending:
                completed = list(pending)
                pending.clear()
                for event in completed:
                    if not self.emit(event):
                        ended = True
                        return
            if watch is not None:
                for call, made_up in watch.ready(reader):
                    if not self.start_early(number, call, made_up):
                        ended = True
                        return

        def on_error(error: Exception) -> None:
            nonlocal ended
            if not ended:
                ended = True
                self.turn_failed(at, error)

        def on_completed() -> None:
            nonlocal ended
            if ended:
                return
            ended = True
            try:
                turn = single_turn(reader.close_choices())
            except Exception as error:  # noqa: BLE001 - the reader's typed errors
                self.turn_failed(at, error)
                return
            self.turn_done(number, turn)

        holder = SerialDisposable()
        self.current.disposable = holder
        holder.disposable = source.subscribe(
            lambda chunk: self.post(lambda: on_chunk(chunk)),
            lambda error: self.post(lambda: on_error(error)),
            lambda: self.post(on_completed),
            scheduler=self.scheduler,
        )

    def turn_failed(self, at: _Try, error: Exception) -> None:
        typed, may_pass = typed_failure(error)
        if not self.retract(at.number, f"the turn failed: {type(typed).__name__}", typed):
            return
        limit = self.s.max_tokens_limit
        if (
            isinstance(typed, TruncatedToolCallError)
            and limit is not None
            and at.ceiling is not None
            and at.ceiling < limit
        ):
            # Cut by the token ceiling: streamed again at once with a higher one, never repaired.
            ceiling = min(at.ceiling * 2, limit)
            if self.emit(TurnRetried(at.number, at.attempt + 1, typed, ceiling)):
                again = replace(at, attempt=at.attempt + 1, ceiling=ceiling)
                self.step(lambda: self.stream_turn(again))
            return
        if not (
            may_pass and at.failures < self.s.retries and isinstance(typed, ToolCallStreamError)
        ):
            self.fail(typed)
            return
        if self.emit(TurnRetried(at.number, at.attempt + 1, typed)):
            again = replace(at, attempt=at.attempt + 1, failures=at.failures + 1)
            self.step(lambda: self.stream_turn(again), self.s.backoff * (2**at.failures))

    # -- early calls ------------------------------------------------------------------------

    def start_early(self, number: int, call: ToolCall, made_up: bool) -> bool:
        """Start ``call``'s tool before its turn ends, holding its answer; false once ended."""
        run = _EarlyRun(call, _ledger_key(number, call, made_up))
        with _LEDGER_LOCK:
            reused = run.key in self.held or isinstance(self.s.ledger.get(run.key), str)
        if not self.emit(ToolCallEarly(number, call, reused)):
            return False
        with self.lock:
            if self.done:
                return False
            self.runs.append(run)
            self.live.append(run)

        def answered(answer: _Answer) -> None:
            run.result = answer

        def finished() -> None:
            run.finished = True

        run.subscription.disposable = (
            self.dispatch(number, call, made_up, run)
            .pipe(ops.do_action(answered), ops.finally_action(finished))
            .subscribe(run.answer, scheduler=self.scheduler)
        )
        return True

    def stop_run(self, run: _EarlyRun) -> bool:
        """Cancel ``run`` if its tool still runs; whether it did.

        A claim with no answer recorded (cancelled, or failed under ``tool_errors="raise"``) is
        let go, so that a retried turn may run the call again.
        """
        with self.lock:
            run.stopped = True
            claimed = run.claimed
        with _LEDGER_LOCK:
            recorded = self.s.ledger.get(run.key, _UNKNOWN)
            # Its answer counts as soon as the ledger holds it (just before the run ends).
            running = not run.finished and run.result is None and not isinstance(recorded, str)
            if claimed and recorded is None:
                del self.s.ledger[run.key]
        run.subscription.dispose()
        if run.result is not None:
            self.held[run.key] = run.result
        return running

    def cancel_early(self) -> None:
        """Cancel every early tool still running: the loop ended."""
        with self.lock:
            live, self.live = self.live, []
            self.runs = []
        for run in live:
            self.stop_run(run)

    def retract(
        self,
        number: int,
        reason: str,
        error: Exception | None = None,
        runs: Iterable[_EarlyRun] | None = None,
    ) -> bool:
        """Take back early calls (this turn's, unless ``runs``); false once the loop ended."""
        if runs is None:
            runs, self.runs = self.runs, []
        for run in runs:
            cancelled = self.stop_run(run)
            with self.lock:
                if run in self.live:
                    self.live.remove(run)
            if not self.emit(ToolCallRetracted(number, run.call, reason, error, cancelled)):
                return False
        return True

    def turn_done(self, number: int, turn: AssistantTurn) -> None:
        if not self.emit(TurnFinished(number, turn)):
            return
        paused = turn.needs_continuation
        if not turn.tool_calls and not paused:
            self.transcript.extend(_as_list(turn.to_message(self.s.empty_content)))
            if self.emit(Conversation(tuple(self.transcript), turn, number)) and self._finish():
                self.current.dispose()
                self.observer.on_completed()
            return
        if number >= self.s.max_turns:
            if paused:
                why = f"the provider still paused the turn after {self.s.max_turns} turns"
                hint = "raise max_turns"
            else:
                asked = ", ".join(c.name[:64] for c in turn.tool_calls)
                why = f"the model still asked for tools after {self.s.max_turns} turns ({asked})"
                hint = "raise max_turns, or check what the tools answer"
            error = TurnLimitError(why, hint=hint)
            if self.retract(number, "the turn limit was reached", error):
                self.fail(error)
            return
        if paused:
            # Anthropic pause_turn: a long server-side turn stopped early. Its content, sent
            # back as the last message, is where the next stream goes on; nothing to dispatch.
            if not self.retract(number, "the provider paused the turn; it goes on streaming"):
                return
            self.held = {}
            self.transcript.extend(_as_list(turn.to_message(self.s.empty_content)))
            self.step(lambda: self.stream_turn(self.first_try(number + 1)))
            return
        made_up = made_up_ids(turn)
        runs, self.runs = self.runs, []
        results: list[Observable[_Answer]] = []
        for call in turn.tool_calls:
            run = next((run for run in runs if _same_call(run.call, call)), None)
            if run is not None:
                runs.remove(run)
                results.append(run.answer.pipe(ops.map(_as_early(call))))
            else:
                results.append(self.dispatch(number, call, call.id in made_up))
        # Left: calls whose committed arguments differ from those their tools started with.
        if runs and not self.retract(number, "its arguments changed after it started", runs=runs):
            return
        self.await_all(results, lambda answers: self.answered_turn(number, turn, answers))

    def answered_turn(self, number: int, turn: AssistantTurn, answers: Sequence[_Answer]) -> None:
        for event, _ in answers:
            if not self.emit(event):
                return
        with self.lock:
            self.live = []  # every early tool has answered
        self.held = {}
        values = [value for _, value in answers]
        self.transcript.extend(turn.exchange(values, self.s.empty_content))
        self.step(lambda: self.stream_turn(self.first_try(number + 1)))

    # -- tools ------------------------------------------------------------------------------

    def dispatch(
        self,
        number: int,
        call: ToolCall,
        made_up: bool,
        early: _EarlyRun | None = None,
    ) -> Observable[_Answer]:
        """The call's answer: its tool's run, or the one recorded, decided when it starts.

        ``early``: the run it is, for a call started before its turn ended.
        """
        ledger = self.s.ledger
        key = _ledger_key(number, call, made_up)
        held = self.held.get(key)
        if held is not None:
            # Answered early on a stream of this turn that failed: that very answer.
            event, value = held
            return reactivex.return_value((replace(event, call=call, reused=True), value))
        tool = self.s.tools.get(call.name)
        recorded: object = _UNKNOWN

        def claim() -> bool:
            nonlocal recorded
            with self.lock:
                if self.done or (early is not None and early.stopped):
                    return False
                with _LEDGER_LOCK:
                    recorded = ledger.get(key, _UNKNOWN)
                    if recorded is _UNKNOWN and tool is not None:
                        ledger[key] = None  # at most once, even if the result never comes
                        if early is not None:
                            early.claimed = True
            return recorded is _UNKNOWN and tool is not None

        def record(value: object) -> _Answer | None:
            sent = _sendable(value)
            finished = ToolCallFinished(call, tool_content(sent))
            with _LEDGER_LOCK:  # not inside a retraction letting the claim go
                ledger[key] = finished.content
            return finished, sent

        def instead(error: Exception | None) -> Observable[_Answer]:
            if error is not None:
                return self.failed(call, error, key)
            if isinstance(recorded, str):
                return reactivex.return_value(_reused(call, recorded))
            if recorded is None:
                return self.failed(
                    call,
                    RuntimeError(
                        f"call id {call.id[:64]!r} was dispatched before and its result is "
                        f"unknown; it was not run again"
                    ),
                )
            if tool is None:
                return self.failed(call, LookupError(f"unknown tool {call.name[:64]!r}"))
            return reactivex.empty()  # disposed before it could start

        def answer(answered: _Answer | None) -> Observable[_Answer]:
            return instead(None) if answered is None else reactivex.return_value(answered)

        run = tool if tool is not None else _no_tool
        ran: Observable[_Answer | None] = run_tool(run, call, self.tools_on, claim).pipe(
            ops.map(record), ops.default_if_empty(None)
        )
        return ran.pipe(ops.flat_map(answer), ops.catch(lambda error, _: instead(error)))

    def failed(
        self, call: ToolCall, error: Exception, key: str | None = None
    ) -> Observable[_Answer]:
        if self.s.tool_errors == "raise":
            typed = ToolExecutionError(
                f"tool call {call.index} ({call.name[:64]}): {type(error).__name__}: "
                f"{clip(str(error))}",
                index=call.index,
                name=call.name,
            )
            typed.__cause__ = error
            return reactivex.throw(typed)
        content = error_text(error)
        if key is not None:
            with _LEDGER_LOCK:
                self.s.ledger[key] = content
        return reactivex.return_value((ToolCallFinished(call, content, error), error))


def _same_call(started: ToolCall, committed: ToolCall) -> bool:
    """Whether a call started early is the committed one: Chat may add whitespace after it."""
    return (started.id, started.name, started.type, started.item_id) == (
        committed.id,
        committed.name,
        committed.type,
        committed.item_id,
    ) and started.arguments == committed.arguments.rstrip()


def _as_early(call: ToolCall) -> Callable[[_Answer], _Answer]:
    """An early run's answer as the committed ``call``'s (an equal call)."""

    def early(answer: _Answer) -> _Answer:
        event, value = answer
        return replace(event, call=call, early=True), value

    return early


def _reused(call: ToolCall, content: str) -> _Answer:
    """The answer of a call that does not run again: the one it had, as text."""
    return ToolCallFinished(call, content, reused=True), content


def _no_tool(**_: Any) -> None:
    """Never called: a call to an unknown tool is never claimed."""


def _check_numbers(max_turns: object, retries: object, backoff: object) -> None:
    for name, value in (("max_turns", max_turns), ("retries", retries)):
        if type(value) is not int:
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if max_turns < 1:  # type: ignore[operator]
        raise ValueError("max_turns must be at least 1")
    if retries < 0:  # type: ignore[operator]
        raise ValueError("retries must be 0 or more")
    if type(backoff) not in (int, float) or not 0 <= backoff < 3600:  # type: ignore[operator]
        raise ValueError("backoff must be a number of seconds, at least 0 and under an hour")


def check_tools(tools: object) -> None:
    """``TypeError`` unless ``tools`` maps names to callables."""
    if not isinstance(tools, Mapping):
        raise TypeError(
            f"tools must be a mapping of names to callables, not {type(tools).__name__}"
        )
    for name, tool in tools.items():
        if not isinstance(name, str) or not callable(tool):
            raise TypeError(f"tools must map names to callables: {name!r} does not")


def _check_early(early: object, tools: Mapping[str, object]) -> frozenset[str]:
    if early is None:
        return frozenset()
    if isinstance(early, str | bytes | Mapping) or not isinstance(early, Iterable):
        raise TypeError(
            f"early must be a collection of tool names (a set), not {type(early).__name__}"
        )
    given = list(early)
    if not all(isinstance(name, str) for name in given):
        raise TypeError("early must hold tool names (str)")
    names = frozenset(given)
    unknown = sorted(names - set(tools))
    if unknown:
        raise ValueError(f"early names tools that are not in tools: {', '.join(unknown)[:200]}")
    return names


def _check_ceiling(open_stream: Callable[..., object], max_tokens: object, limit: object) -> None:
    for name, value in (("max_tokens", max_tokens), ("max_tokens_limit", limit)):
        if value is not None and type(value) is not int:
            raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1")
    if limit is not None:
        if max_tokens is None:
            raise ValueError("max_tokens_limit needs max_tokens: the ceiling it raises")
        if limit < max_tokens:  # type: ignore[operator]
            raise ValueError("max_tokens_limit must be at least max_tokens")
    if max_tokens is None:
        return
    try:
        signature = inspect.signature(open_stream)
    except (TypeError, ValueError):
        return  # a callable Python cannot describe: the first call tells
    try:
        signature.bind([], max_tokens=max_tokens)
    except TypeError:
        raise TypeError(
            "open_stream must take the ceiling as a keyword, open_stream(messages, "
            "max_tokens=...), when max_tokens is given"
        ) from None


def agent_loop(
    open_stream: Callable[..., ChunkSource],
    tools: Mapping[str, Callable[..., Any]],
    messages: Sequence[Mapping[str, Any]],
    *,
    early: Collection[str] | None = None,
    max_tokens: int | None = None,
    max_tokens_limit: int | None = None,
    fields: bool = False,
    text: bool = False,
    max_turns: int = 8,
    retries: int = 2,
    backoff: float = 0.5,
    tool_errors: Literal["message", "raise"] = "message",
    policy: Policy | PolicyName | None = None,
    scheduler: abc.SchedulerBase | None = None,
    empty_content: str | None = None,
    ledger: Ledger | None = None,
    require_finish_reason: bool | None = None,
) -> Observable[AgentEvent]:
    """Run the tool conversation until a turn has no tool calls; emit its progress.

    ``open_stream(messages)`` opens one stream of any wire (Chat Completions, Responses,
    Anthropic Messages, Gemini, Bedrock; detected from its events): an Observable of events,
    an SDK ``Stream`` or ``AsyncStream``, the coroutine ``AsyncOpenAI().….create(…,
    stream=True)`` returns (awaited on the loop), boto3's ``converse_stream(...)`` response or
    its ``EventStream``, or any iterable of events. ``messages`` are in that wire's shape:
    Chat messages, Responses input items, Anthropic or Bedrock messages, Gemini contents.
    ``tools`` maps names to callables taking the arguments as keywords (sync, ``async``, or
    returning an Observable; a ``parameters`` attribute holding a JSON schema is checked
    first); a Responses custom tool gets its free-form input as one positional ``str``. Emits
    ``ToolCallStarted`` as names stream in, ``TurnRetried``, ``TurnFinished``, one
    ``ToolCallFinished`` per call, and finally the ``Conversation``
    (``.pipe(final_conversation())`` keeps only that, typed).

    - Nothing is appended until a turn is complete; then ``turn.to_message()`` and
      ``turn.tool_messages()`` of the tools' results (a failure as its exception, a result
      JSON cannot hold as its ``str``), in call order, in the turn's wire: Chat tool
      messages, Responses ``function_call_output`` items, one Anthropic user message of
      ``tool_result`` blocks (``is_error`` on failures), one Gemini content of
      ``functionResponse`` parts (a mapping as the ``response`` itself), one Bedrock user
      message of ``toolResult`` blocks (``"status": "error"`` on failures). On a scheduler
      with threads (``run()``, a pool) the calls of a turn run concurrently; on the subscribing
      thread alone, one after another. Server-run items (web search, MCP…) go back verbatim,
      never dispatched.
    - The loop ends on the wire's prose stop: a turn with no client tool calls (Chat
      ``stop``, Responses ``completed``, Anthropic and Bedrock ``end_turn``/``stop_sequence``,
      Gemini ``STOP``). An
      Anthropic ``pause_turn`` is continued: its content is sent back as the last message and
      the model streams again, with nothing dispatched; each stream counts as a turn.
    - Retried, ``retries`` times after ``backoff`` seconds doubled each time, on the loop's
      scheduler: a network failure (``StreamInterruptedError``: dropped connection, timeout,
      no finish), and a ``ProviderError`` not marked ``retryable=False`` (an HTTP error from
      ``open_stream`` is one, with its status as ``code``: 408/409/429/5xx are retried, other
      4xx not). Never retried, and delivered as raised: the model's invalid output, bugs and
      unknown failures (``open_stream`` raising ``TypeError``, ``ValueError``…; returning
      ``None``, an int or a whole ``ChatCompletion`` is a ``TypeError`` at once).
    - Exactly once: each call is written to ``ledger`` (a new dict per ``agent_loop()`` call
      unless given; keys are opaque) when its tool starts, then with its answer. A call is its
      id, turn number, name and arguments (some providers reuse ids in every turn; a Gemini
      call sent without an id is its place in the turn instead). A call already in the
      ledger is not run again: it gets the recorded answer, as text
      (``ToolCallFinished.reused``), or an error message when its result was never
      recorded. So ``agent_loop(…, ledger=done).pipe(ops.retry(3))`` re-streams but never
      re-runs a call. Two calls of one turn sharing an id are a ``MalformedChunkError``
      (``LENIENT``, with ``synthesize_missing_ids``, renames the second).
    - Resuming: ``messages`` that stop in a turn (its calls, then only answers to some of
      them) are finished first: the calls without answers run, the others come as
      ``reused`` with the answer given, the new answers go where the wire pairs them (after
      the turn's answers, in the same message on a wire that answers a turn in one), and then
      the loop streams. An answer counts for the turn it follows only: a call of a new turn
      runs even when an earlier one had its id (TGI numbers calls ``"0"``… in every turn).
      A turn the conversation went on after is left as it is (``repair_transcript``).
    - ``early``: the tools it names (read-only, idempotent ones) start as soon as their own
      call is complete, before the turn ends (``ToolCallEarly``); their answers are held until
      the turn commits, so the transcript is the one a run without ``early`` gives. A failed
      turn cancels those still running and takes back those that answered
      (``ToolCallRetracted``); a retried turn that repeats a call reuses its answer.
    - ``max_tokens`` and ``max_tokens_limit``: ``open_stream(messages, max_tokens=n)`` gets
      the output-token ceiling, and a turn it cut (``TruncatedToolCallError``) is streamed
      again with the ceiling doubled, up to the limit (``TurnRetried.max_tokens``).
    - ``fields=True`` adds each call's ``ToolCallField`` events as its values complete, and
      ``text=True`` a ``TextDelta`` for each fragment of prose, while each turn streams (for a UI).
    - An unknown tool, a tool that raises, or arguments against its schema become a tool
      message the model can read (``tool_errors="message"``) or a ``ToolExecutionError``.
    - After ``max_turns`` turns that all asked for tools (or paused): ``TurnLimitError``.
    - Disposing cancels the stream in flight and any running tool; after it no tool starts
      and no request is sent.
    - Your own callback raising is not a stream failure: when ``on_next`` raises, the loop
      stops (nothing more is streamed or dispatched, no retry) and ``on_error`` gets that same
      exception, once. One raised by ``on_completed`` or ``on_error`` propagates, as raised,
      to what delivered it (``subscribe()``, the asyncio loop's exception handler, a thread).
    - ``max_turns`` and ``retries`` are ints, ``backoff`` a finite number of seconds:
      anything else is a ``TypeError`` or ``ValueError`` at the call, as are ``messages``
      that mix the shapes of two wires, or stop in a turn with a call that cannot run (no
      name, arguments that are not a JSON object).

    Where each step runs, and where async tools run: see "Where it runs" in the manual's agent
    loop page, or this module's docstring (``scheduler`` overrides the subscription's).

    ``policy`` is a ``Policy`` or its name (``"default"``, ``"lenient"``);
    ``require_finish_reason=False`` accepts turns that end without one, as in ``assemble()``.
    ``empty_content=""`` sends ``""`` instead of ``null`` as the content of an assistant
    message that only calls tools (llama-cpp-python's server refuses ``null``).
    """
    _check_numbers(max_turns, retries, backoff)
    check_tools(tools)
    early_names = _check_early(early, tools)
    _check_ceiling(open_stream, max_tokens, max_tokens_limit)
    given = tuple(dict(m) for m in messages)
    settings = _Settings(
        open_stream=open_stream,
        tools=tools,
        messages=given,
        max_turns=max_turns,
        retries=retries,
        backoff=backoff,
        tool_errors=tool_errors,
        policy=resolve_policy(policy, require_finish_reason),
        empty_content=empty_content,
        ledger=ledger if ledger is not None else {},
        resumed=open_turn(given),
        early=early_names,
        max_tokens=max_tokens,
        max_tokens_limit=max_tokens_limit,
        fields=fields,
        text=text,
    )

    def subscribe(
        observer: abc.ObserverBase[AgentEvent], given: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        chosen = scheduler or given
        if chosen is None and running is not None:
            chosen = AsyncIOThreadSafeScheduler(running)
        on_loop: _OnLoop | None = None
        loop = running
        if isinstance(chosen, AsyncIOScheduler):
            loop = chosen._loop  # the loop its callbacks run on
            if not isinstance(chosen, AsyncIOThreadSafeScheduler):
                # ``await`` hands over a plain one; a dispose may come from any thread.
                chosen = AsyncIOThreadSafeScheduler(loop)
            on_loop = _OnLoop(loop)
            if loop is running:
                on_loop.thread = threading.get_ident()
        delivery: _OnLoopObserver | None = None
        awaited_elsewhere = on_loop is None or on_loop.loop is not running
        if awaited_elsewhere and running is not None and isinstance(given, AsyncIOScheduler):
            # Awaited (``to_future`` subscribes with the loop) while ``scheduler=`` runs the
            # steps elsewhere: the events still go to the awaiting side on its loop.
            delivery = _OnLoopObserver(observer, _OnLoop(running))
            delivery.on_loop.thread = threading.get_ident()
            observer = delivery
        # Async streams need a loop that runs: not one that run() blocks (a notebook cell).
        usable = loop if on_loop is not None or isinstance(given, AsyncIOScheduler) else None
        conversation = _Conversation(
            settings, observer, chosen or CurrentThreadScheduler.singleton(), usable, on_loop
        )
        if delivery is not None:
            delivery.stop = conversation.dispose
        return conversation.start()

    return Observable(subscribe)
