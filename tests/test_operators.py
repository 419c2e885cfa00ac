"""Marble tests per operator: normal, empty, error, never-completing, dispose, resubscribe."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import reactivex
from reactivex import Observable
from reactivex import operators as ops
from reactivex.disposable import Disposable
from reactivex.notification import OnError, OnNext
from reactivex.subject import Subject
from reactivex.testing import ReactiveTest, TestScheduler
from reactivex.testing.marbles import marbles_testing

import rxtoolcalls as rt
from tests.helpers import args, call_open, choice, collect, content, finish, garbage_of

on_next = ReactiveTest.on_next
on_completed = ReactiveTest.on_completed
on_error = ReactiveTest.on_error
subscribe = ReactiveTest.subscribe

C0 = call_open(0, "call_a", "get_weather", '{"city": ')
C1 = args(0, '"Paris"}')
C2 = call_open(1, "call_b", "get_time", '{"tz": "UTC"}')
FIN = finish("tool_calls")
CHUNKS = [content("Checking."), C0, C1, C2, FIN]

Op = Callable[[Observable[Any]], Observable[Any]]

SINGLE_CHUNK_OPERATORS: dict[str, Callable[[], Op]] = {
    "group_by_index": rt.group_by_index,
    "assemble": rt.assemble,
    "assemble_choices": rt.assemble_choices,
    "progress": rt.progress,
    "pipe": lambda: reactivex.compose(
        rt.group_by_index(), rt.concat_arguments(), rt.on_finish_reason(), rt.atomic_batch()
    ),
}


LOOKUP: dict[str | float, Any] = {"a": CHUNKS[0], "b": C0, "c": C1, "d": C2, "e": FIN}


def _kinds(messages: list[Any]) -> list[str]:
    return [m.value.kind for m in messages]


def _value(record: Any) -> Any:
    note = record.value
    assert isinstance(note, OnNext)
    return note.value


def _last_error(messages: list[Any]) -> Exception:
    note = messages[-1].value
    assert isinstance(note, OnError)
    assert isinstance(note.exception, Exception)
    return note.exception


# -- assemble -------------------------------------------------------------------------------


def test_assemble_marbles_emit_once_on_completion() -> None:
    with marbles_testing(timespan=1.0) as (start, cold, _hot, _exp):
        result = start(cold("-a-b-c-d-e-|", LOOKUP, None).pipe(rt.assemble()))
    assert len(result) == 2
    first, last = result
    assert (first.time, last.time) == (211.0, 211.0)
    turn = _value(first)
    assert isinstance(turn, rt.AssistantTurn)
    assert turn.content == "Checking."
    assert [c.name for c in turn.tool_calls] == ["get_weather", "get_time"]
    assert _kinds([last]) == ["C"]


def test_assemble_hot_source_and_subscription_window() -> None:
    scheduler = TestScheduler()
    xs = scheduler.create_hot_observable(
        on_next(150, content("lost before subscribe")),
        *(on_next(210 + 10 * i, c) for i, c in enumerate(CHUNKS)),
        on_completed(300),
    )
    res = scheduler.start(lambda: xs.pipe(rt.assemble()))
    assert [m.time for m in res.messages] == [300, 300]
    turn = _value(res.messages[0])
    assert turn.content == "Checking."
    assert xs.subscriptions == [subscribe(200, 300)]


@pytest.mark.parametrize("name", sorted(SINGLE_CHUNK_OPERATORS))
def test_empty_source(name: str) -> None:
    values, errors, done = collect(reactivex.empty().pipe(SINGLE_CHUNK_OPERATORS[name]()))
    if name in ("group_by_index",):
        assert len(values) == 1
        assert isinstance(values[0], rt.StreamEnd)
        assert values[0].choices == ()
        assert done
    elif name == "progress":
        assert (values, errors, done) == ([], [], True)
    else:
        assert values == []
        assert len(errors) == 1
        assert isinstance(errors[0], rt.StreamInterruptedError)
        assert not done


@pytest.mark.parametrize("name", sorted(SINGLE_CHUNK_OPERATORS))
def test_source_error_discards_everything(name: str) -> None:
    scheduler = TestScheduler()
    boom = ConnectionError("connection reset")
    xs = scheduler.create_cold_observable(
        on_next(10, C0), on_next(20, C1), on_next(30, C2), on_error(40, boom)
    )
    res = scheduler.start(lambda: xs.pipe(SINGLE_CHUNK_OPERATORS[name]()))
    error = _last_error(res.messages)
    assert isinstance(error, rt.StreamInterruptedError)
    assert error.__cause__ is boom
    assert res.messages[-1].time == 240
    if name in ("assemble", "assemble_choices", "pipe"):
        assert len(res.messages) == 1  # nothing but the error
    assert xs.subscriptions == [subscribe(200, 240)]


@pytest.mark.parametrize("name", sorted(SINGLE_CHUNK_OPERATORS))
def test_never_completing_source_emits_no_turn(name: str) -> None:
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(on_next(10, C0), on_next(20, C1), on_next(30, FIN))
    res = scheduler.start(lambda: xs.pipe(SINGLE_CHUNK_OPERATORS[name]()))
    kinds = _kinds(res.messages)
    assert "C" not in kinds
    assert "E" not in kinds
    if name in ("assemble", "assemble_choices", "pipe"):
        assert res.messages == []
    # disposal at 1000 reaches the source
    assert xs.subscriptions == [subscribe(200, 1000)]


@pytest.mark.parametrize("name", sorted(SINGLE_CHUNK_OPERATORS))
def test_early_dispose_reaches_the_source(name: str) -> None:
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(
        on_next(10, C0), on_next(20, C1), on_next(500, FIN), on_completed(600)
    )
    res = scheduler.start(lambda: xs.pipe(SINGLE_CHUNK_OPERATORS[name]()), disposed=300)
    assert xs.subscriptions == [subscribe(200, 300)]
    assert set(_kinds(res.messages)) <= {"N"}
    if name in ("assemble", "assemble_choices", "pipe"):
        assert res.messages == []


@pytest.mark.parametrize("name", sorted(SINGLE_CHUNK_OPERATORS))
def test_resubscription_starts_fresh(name: str) -> None:
    observable = reactivex.from_iterable(CHUNKS).pipe(SINGLE_CHUNK_OPERATORS[name]())
    first = collect(observable)
    second = collect(observable)
    assert first[1:] == ([], True)
    if name == "group_by_index":
        assert [type(v) for v in first[0]] == [type(v) for v in second[0]]
    else:
        assert first == second


def test_wire_error_midstream_is_typed_and_stops_the_source() -> None:
    scheduler = TestScheduler()
    bad = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "zero"}]}}]}
    xs = scheduler.create_cold_observable(
        on_next(10, C0), on_next(20, bad), on_next(30, C1), on_completed(40)
    )
    res = scheduler.start(lambda: xs.pipe(rt.assemble()))
    assert len(res.messages) == 1
    assert res.messages[0].time == 220
    assert isinstance(_last_error(res.messages), rt.MalformedChunkError)
    assert xs.subscriptions == [subscribe(200, 220)]


def test_retry_after_a_dropped_stream_yields_exactly_one_turn() -> None:
    attempts: list[int] = []

    def open_stream(_: Any) -> Observable[Any]:
        attempts.append(1)
        if len(attempts) == 1:
            return reactivex.from_iterable([C0, C1]).pipe(
                ops.concat(reactivex.throw(ConnectionError("dropped")))
            )
        return reactivex.from_iterable(CHUNKS)

    values, errors, done = collect(reactivex.defer(open_stream).pipe(rt.assemble(), ops.retry(3)))
    assert len(attempts) == 2
    assert errors == []
    assert done
    assert len(values) == 1
    assert [c.arguments for c in values[0].tool_calls] == ['{"city": "Paris"}', '{"tz": "UTC"}']


def test_an_exception_in_the_subscriber_is_not_rewrapped() -> None:
    def explode(_: Any) -> None:
        raise KeyError("user code")

    errors: list[Exception] = []
    # The subscriber's own exception is not the stream's: it reaches the caller as raised.
    with pytest.raises(KeyError, match="user code"):
        reactivex.from_iterable(CHUNKS).pipe(rt.assemble()).subscribe(explode, errors.append)
    assert errors == []


# -- the subscriber's own exceptions (issue item 6) -----------------------------------------

EVERY_OPERATOR: dict[str, Callable[[], Op]] = {
    **SINGLE_CHUNK_OPERATORS,
    "lifecycle": lambda: rt.lifecycle(every=1),
    "assemble_with_progress": rt.assemble_with_progress,
    "group_by_index+concat": lambda: reactivex.compose(rt.group_by_index(), rt.concat_arguments()),
    "to on_finish_reason": lambda: reactivex.compose(
        rt.group_by_index(), rt.concat_arguments(), rt.on_finish_reason()
    ),
}


class Boom(Exception):
    """The subscriber's own bug."""


def _counted(chunks: list[Any], pulled: list[int]) -> Any:
    for chunk in chunks:
        pulled.append(1)
        yield chunk


@pytest.mark.parametrize("name", sorted(EVERY_OPERATOR))
@pytest.mark.parametrize("callback", ["on_next", "on_completed"])
def test_a_raising_subscriber_callback_propagates_as_raised_and_stops_everything(
    name: str, callback: str
) -> None:
    boom = Boom("the subscriber's bug")
    seen: list[str] = []
    pulled: list[int] = []

    def next_(_: Any) -> None:
        seen.append("next")
        if callback == "on_next":
            raise boom

    def completed() -> None:
        seen.append("completed")
        raise boom

    def error(_: Exception) -> None:
        seen.append("error")

    source = reactivex.from_iterable(_counted(CHUNKS, pulled))
    with pytest.raises(Boom) as info:
        source.pipe(EVERY_OPERATOR[name]()).subscribe(next_, error, completed)
    assert info.value is boom  # not wrapped, not re-typed
    assert "error" not in seen  # never routed to on_error
    # Nothing runs after it: one failing on_next, or exactly one on_completed.
    if callback == "on_next":
        assert seen == ["next"]
        emit_at_end = ("assemble", "assemble_choices", "pipe", "to on_finish_reason")
        if name not in (*emit_at_end, "group_by_index+concat"):
            # Operators that emit while reading stop reading at once.
            assert len(pulled) < len(CHUNKS)
    else:
        assert seen.count("completed") == 1
        assert seen[-1] == "completed"


@pytest.mark.parametrize("name", sorted(EVERY_OPERATOR))
def test_a_raising_on_error_propagates_as_raised(name: str) -> None:
    boom = Boom("the subscriber's on_error bug")
    calls: list[Exception] = []

    def error(exc: Exception) -> None:
        calls.append(exc)
        raise boom

    piece = {"tool_calls": [{"index": 0, "function": {"arguments": 42}}]}  # not a string
    bad = reactivex.from_iterable([C0, choice(piece)])
    with pytest.raises(Boom) as info:
        bad.pipe(EVERY_OPERATOR[name]()).subscribe(on_error=error)
    assert info.value is boom
    assert len(calls) == 1
    assert isinstance(calls[0], rt.ToolCallStreamError)


Closed = list[str]  # "closed" once per disposal of a source's subscription


def _create(chunks: list[Any], closed: Closed) -> Observable[Any]:
    """A source that sends everything inside its ``subscribe`` (a user's ``reactivex.create``)."""

    def subscribe(observer: Any, _: Any = None) -> Any:
        for chunk in chunks:
            observer.on_next(chunk)
        observer.on_completed()
        return Disposable(lambda: closed.append("closed"))

    return reactivex.create(subscribe)


def _create_catching(chunks: list[Any], closed: Closed) -> Observable[Any]:
    """The same, catching what its observer raises and handing it back to ``on_error``."""

    def subscribe(observer: Any, _: Any = None) -> Any:
        try:
            for chunk in chunks:
                observer.on_next(chunk)
            observer.on_completed()
        except Exception as error:  # noqa: BLE001 - handed back, as such a source does
            observer.on_error(error)
        return Disposable(lambda: closed.append("closed"))

    return reactivex.create(subscribe)


class _HandsBack(Observable[Any]):
    """A source with a ``subscribe`` of its own: it sends everything there, and hands what
    its observer raises back to ``on_error`` (no reactivex observer in between)."""

    def __init__(self, chunks: list[Any], closed: Closed) -> None:
        super().__init__()
        self.chunks = chunks
        self.closed = closed

    def subscribe(
        self,
        on_next: Any = None,
        on_error: Any = None,
        on_completed: Any = None,
        *,
        scheduler: Any = None,
    ) -> Any:
        try:
            for chunk in self.chunks:
                on_next(chunk)
            on_completed()
        except Exception as error:  # noqa: BLE001 - handed back, as such a source does
            on_error(error)
        return Disposable(lambda: self.closed.append("closed"))


Inside = Callable[[list[Any], Closed], Observable[Any]]
INSIDE_SUBSCRIBE = pytest.mark.parametrize(
    "inside", [_create, _create_catching, _HandsBack], ids=["create", "catching", "own"]
)
BAD_ARGUMENTS = [C0, choice({"tool_calls": [{"index": 0, "function": {"arguments": 42}}]})]


@INSIDE_SUBSCRIBE
@pytest.mark.parametrize("name", sorted(EVERY_OPERATOR))
@pytest.mark.parametrize("form", ["no on_error", "raising on_error"])
def test_a_stream_error_the_subscriber_does_not_take_is_raised_from_a_source_inside_subscribe(
    inside: Inside, name: str, form: str
) -> None:
    # Such a source's subscribe may catch what escapes it, hand it back to the stage's
    # on_error (reactivex's own operators lose it there) and return: it must still reach
    # the caller, and the source's subscription is still disposed of.
    boom = Boom("the subscriber's on_error bug")
    calls: list[Exception] = []
    closed: Closed = []

    def error(exc: Exception) -> None:
        calls.append(exc)
        raise boom

    source = inside(BAD_ARGUMENTS, closed).pipe(EVERY_OPERATOR[name]())
    if form == "no on_error":
        with pytest.raises(rt.MalformedChunkError):
            source.subscribe()
    else:
        with pytest.raises(Boom) as info:
            source.subscribe(on_error=error)
        assert info.value is boom
        assert len(calls) == 1
        assert isinstance(calls[0], rt.MalformedChunkError)
    if inside is not _create:  # which raises through its subscribe: it returns nothing
        assert closed == ["closed"]


@INSIDE_SUBSCRIBE
@pytest.mark.parametrize("name", sorted(EVERY_OPERATOR))
@pytest.mark.parametrize("callback", ["on_next", "on_completed"])
def test_a_raising_subscriber_callback_leaves_as_raised_from_a_source_inside_subscribe(
    inside: Inside, name: str, callback: str
) -> None:
    boom = Boom("the subscriber's bug")
    errors: list[Exception] = []
    closed: Closed = []

    def raising(*_: Any) -> None:
        raise boom

    callbacks: dict[str, Any] = {"on_error": errors.append, callback: raising}
    with pytest.raises(Boom) as info:
        inside(CHUNKS, closed).pipe(EVERY_OPERATOR[name]()).subscribe(**callbacks)
    assert info.value is boom
    assert errors == []
    if inside is not _create:
        assert closed == ["closed"]


# The operators that send before the end (the others send at the end: nothing can follow).
EARLY = {"assemble_with_progress", "group_by_index", "lifecycle", "progress"}


class _Deaf(Observable[Any]):
    """A source whose subscription stops nothing: it keeps the callbacks it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[Any] = []

    def subscribe(self, *callbacks: Any, scheduler: Any = None) -> Any:
        self.held.extend(callbacks)
        return Disposable()


@pytest.mark.parametrize("name", sorted(EARLY))
@pytest.mark.parametrize("kind", [Boom, KeyboardInterrupt])
def test_nothing_reaches_a_subscriber_after_its_own_exception(
    name: str, kind: type[BaseException]
) -> None:
    # Even from a source deaf to the disposal, and even for an exception that is not an
    # Exception: the subscription stopped where the subscriber raised.
    source = _Deaf()
    seen: list[Any] = []

    def next_(value: Any) -> None:
        seen.append(type(value).__name__)
        if len(seen) == 1:
            raise kind("the subscriber's own")

    source.pipe(EVERY_OPERATOR[name]()).subscribe(
        next_, lambda e: seen.append("error"), lambda: seen.append("completed")
    )
    on_next, _, on_completed = source.held
    ended: list[bool] = []

    def send() -> None:
        for chunk in CHUNKS:
            on_next(chunk)
        ended.append(True)
        on_completed()

    with pytest.raises(kind):
        send()
    assert not ended  # raised on a value sent before the end: the source goes on
    send()
    assert len(seen) == 1


def test_a_raising_inner_group_subscriber_propagates_as_raised() -> None:
    boom = Boom("inner")
    errors: list[Exception] = []
    inner_errors: list[Exception] = []

    def explode(_: str) -> None:
        raise boom

    def on_group(item: Any) -> None:
        if isinstance(item, rt.ToolCallGroup):
            item.subscribe(explode, inner_errors.append)

    with pytest.raises(Boom) as info:
        reactivex.from_iterable(CHUNKS).pipe(rt.group_by_index()).subscribe(on_group, errors.append)
    assert info.value is boom
    assert errors == []
    assert inner_errors == []


class _Gone(Exception):
    """A subscriber's exception that can be watched (built-in exceptions take no weakref)."""

    made: list[weakref.ref[_Gone]] = []  # noqa: RUF012 - the test's own record

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        _Gone.made.append(weakref.ref(self))


@pytest.mark.parametrize("name", sorted(EVERY_OPERATOR))
def test_a_subscriber_s_exception_is_not_kept_and_leaves_no_cycle(name: str) -> None:
    source: Subject[Any] = Subject()
    _Gone.made.clear()
    alive: list[bool] = []

    def explode(_: Any) -> None:
        raise _Gone("the subscriber's own")  # held by no name of this frame

    def run() -> None:
        source.pipe(EVERY_OPERATOR[name]()).subscribe(explode, lambda _: None)
        with contextlib.suppress(_Gone):
            for chunk in CHUNKS:
                source.on_next(chunk)
            source.on_completed()
        alive.append(_Gone.made[0]() is not None)

    found = garbage_of(run)
    assert alive == [False]  # freed as soon as it was handled, with no collection
    if name != "lifecycle":  # each call's progress sink and the call hold each other
        assert found == 0


@pytest.mark.parametrize("name", sorted(EVERY_OPERATOR))
def test_an_exception_that_left_on_another_thread_is_not_raised_again(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The source sends from a worker thread while its subscribe waits for it: the exception
    # goes up the worker's stack (to its excepthook), and subscribe() returns.
    raised: list[tuple[str, type[BaseException] | None]] = []
    monkeypatch.setattr(
        threading, "excepthook", lambda a: raised.append((a.thread.name, a.exc_type))
    )

    def subscribe(observer: Any, _: Any = None) -> Any:
        def work() -> None:
            for chunk in CHUNKS:
                observer.on_next(chunk)
            observer.on_completed()

        worker = threading.Thread(target=work, name="worker")
        worker.start()
        worker.join()
        return Disposable()

    def explode(_: Any) -> None:
        raise Boom("the subscriber's own")

    errors: list[Exception] = []
    reactivex.create(subscribe).pipe(EVERY_OPERATOR[name]()).subscribe(explode, errors.append)
    assert raised == [("worker", Boom)]
    assert errors == []


@pytest.mark.parametrize("kind", [Boom, KeyboardInterrupt])
@pytest.mark.parametrize("where", ["on_next", "on_completed"])
def test_a_raising_inner_group_subscriber_stops_everything(
    kind: type[BaseException], where: str
) -> None:
    # A source that goes on sending after the exception: nothing more reaches anyone.
    source: Subject[Any] = Subject()
    seen: list[str] = []

    def piece(text: str) -> None:
        seen.append(text)
        if where == "on_next":
            raise kind("inner")

    def inner_done() -> None:
        seen.append("inner completed")
        if where == "on_completed":
            raise kind("inner")

    def on_group(item: Any) -> None:
        seen.append(type(item).__name__)
        if isinstance(item, rt.ToolCallGroup):
            item.subscribe(piece, lambda _: seen.append("inner error"), inner_done)

    source.pipe(rt.group_by_index()).subscribe(
        on_group, lambda _: seen.append("error"), lambda: seen.append("completed")
    )
    raised: list[int] = []
    for at, chunk in enumerate([*CHUNKS, None]):
        try:
            source.on_next(chunk) if chunk is not None else source.on_completed()
        except kind:
            raised.append(at)
    assert len(raised) == 1
    last = '{"city": ' if where == "on_next" else "inner completed"
    assert seen[-1] == last  # the callback that raised, and nothing after it
    assert seen.count(last) == 1


def test_retry_never_resubscribes_after_a_subscriber_exception() -> None:
    subscriptions: list[int] = []

    def subscribe_source(observer: Any, scheduler: Any = None) -> Any:
        subscriptions.append(1)
        return reactivex.from_iterable(CHUNKS).subscribe(observer, scheduler=scheduler)

    def explode(_: Any) -> None:
        raise Boom("once")

    with pytest.raises(Boom):
        reactivex.create(subscribe_source).pipe(rt.assemble(), ops.retry(3)).subscribe(explode)
    assert subscriptions == [1]


def test_turn_via_await() -> None:
    import asyncio

    async def main() -> rt.AssistantTurn:
        turn: rt.AssistantTurn = await reactivex.from_iterable(CHUNKS).pipe(rt.assemble())
        return turn

    assert len(asyncio.run(main()).tool_calls) == 2


# -- group_by_index -------------------------------------------------------------------------


def test_groups_know_their_identity_when_they_open() -> None:
    seen: list[tuple[Any, ...]] = []
    pieces: dict[int, list[str]] = {}
    ends: list[rt.StreamEnd] = []

    def on_item(item: rt.ToolCallGroup | rt.StreamEnd) -> None:
        if isinstance(item, rt.StreamEnd):
            ends.append(item)
            return
        seen.append((item.key, item.index, item.id, item.name, item.choice_index, item.type))
        item.subscribe(pieces.setdefault(item.key, []).append)

    reactivex.from_iterable(CHUNKS).pipe(rt.group_by_index()).subscribe(on_item)
    assert seen == [
        (0, 0, "call_a", "get_weather", 0, "function"),
        (1, 1, "call_b", "get_time", 0, "function"),
    ]
    assert pieces == {0: ['{"city": ', '"Paris"}'], 1: ['{"tz": "UTC"}']}
    assert len(ends) == 1
    assert ends[0].choices[0].content == "Checking."
    assert ends[0].choices[0].finish_reason == "tool_calls"


def test_group_emitted_on_the_chunk_that_opens_the_call() -> None:
    with marbles_testing(timespan=1.0) as (start, cold, _hot, _exp):
        result = start(cold("-a-b-c-d-e-|", LOOKUP, None).pipe(rt.group_by_index()))
    assert [r.time for r in result] == [203.0, 207.0, 211.0, 211.0]
    assert [type(_value(r)).__name__ for r in result[:3]] == [
        "ToolCallGroup",
        "ToolCallGroup",
        "StreamEnd",
    ]


def test_groups_error_with_the_stream() -> None:
    inner_errors: list[Exception] = []

    def on_item(item: rt.ToolCallGroup | rt.StreamEnd) -> None:
        if isinstance(item, rt.ToolCallGroup):
            item.subscribe(on_error=inner_errors.append)

    source = reactivex.from_iterable([C0, C1]).pipe(ops.concat(reactivex.throw(OSError("x"))))
    outer_errors: list[Exception] = []
    source.pipe(rt.group_by_index()).subscribe(on_item, outer_errors.append)
    assert len(inner_errors) == 1
    assert isinstance(inner_errors[0], rt.StreamInterruptedError)
    assert outer_errors == inner_errors


def test_late_subscriber_to_a_group_misses_earlier_pieces_like_group_by() -> None:
    groups: list[rt.ToolCallGroup] = []
    reactivex.from_iterable(CHUNKS).pipe(rt.group_by_index()).subscribe(
        lambda g: groups.append(g) if isinstance(g, rt.ToolCallGroup) else None
    )
    values, errors, done = collect(groups[0])
    assert (values, errors, done) == ([], [], True)


def test_a_group_with_two_subscribers_feeds_both() -> None:
    got: list[list[str]] = [[], []]

    def on_item(item: rt.ToolCallGroup | rt.StreamEnd) -> None:
        if isinstance(item, rt.ToolCallGroup) and item.index == 0:
            item.subscribe(got[0].append)
            disposable = item.subscribe(got[1].append)
            item.subscribe(lambda piece: disposable.dispose())

    reactivex.from_iterable(CHUNKS).pipe(rt.group_by_index()).subscribe(on_item)
    assert got[0] == ['{"city": ', '"Paris"}']
    assert got[1] == ['{"city": ']


def test_a_failing_group_subscriber_raises_to_the_caller_and_ends_the_stream() -> None:
    from reactivex.subject import Subject

    seen: list[str] = []
    items: list[Any] = []
    errors: list[Exception] = []
    inner_errors: list[Exception] = []
    boom = KeyError("user code")

    def take(piece: str) -> None:
        seen.append(piece)
        if len(seen) == 2:  # a bare piece, read by the fast path
            raise boom  # must not pass for a chunk-shape miss and be re-read

    def on_item(item: rt.ToolCallGroup | rt.StreamEnd) -> None:
        items.append(item)
        if isinstance(item, rt.ToolCallGroup):
            item.subscribe(take, inner_errors.append)

    source: Subject[Any] = Subject()
    source.pipe(rt.group_by_index()).subscribe(on_item, errors.append)
    source.on_next(C0)
    with pytest.raises(KeyError) as info:
        source.on_next(C1)
    assert info.value is boom
    assert seen == ['{"city": ', '"Paris"}']
    # The subscriber's own exception is not a stream error: no on_error anywhere.
    assert errors == []
    assert inner_errors == []
    for chunk in (C1, C2, FIN):  # the subscription has ended: dropped, not raised
        source.on_next(chunk)
    source.on_completed()
    assert seen == ['{"city": ', '"Paris"}']
    assert len(items) == 1


@pytest.mark.parametrize("report", [False, True], ids=["raising", "reporting"])
def test_a_stopped_reader_ignores_every_chunk(report: bool) -> None:
    from rxtoolcalls._reader import reader as TurnReader

    errors: list[Exception] = []
    reader = TurnReader(on_error=errors.append if report else None)
    reader.feed(C0)
    reader.stop()
    for chunk in (C1, C2, {"choices": "not a list"}, FIN):  # fast path, full path, bad chunk
        assert reader.feed(chunk) == ()
    assert [(c.index, c.text()) for c in reader.calls()] == [(0, '{"city": ')]
    assert reader.end().choices[0].finish_reason is None
    assert errors == []


@pytest.mark.parametrize(
    "bad",
    [{"choices": "not a list"}, {"error": {"message": "overloaded"}}],
    ids=["malformed", "in-band error"],
)
def test_a_reporting_reader_stops_at_its_first_error(bad: dict[str, Any]) -> None:
    from rxtoolcalls._reader import reader as TurnReader

    errors: list[Exception] = []
    reader = TurnReader(on_error=errors.append)
    reader.feed(C0)
    assert reader.feed(bad) == ()
    for chunk in (C1, bad, C2, FIN):  # fast path, the same error again, full path
        assert reader.feed(chunk) == ()
    assert len(errors) == 1
    assert isinstance(errors[0], rt.ToolCallStreamError)
    assert [(c.index, c.text()) for c in reader.calls()] == [(0, '{"city": ')]
    assert reader.end().choices[0].finish_reason is None


def test_pushing_into_a_subject_after_a_wire_error_raises_nothing() -> None:
    from reactivex.subject import Subject

    source: Subject[Any] = Subject()
    values: list[Any] = []
    errors: list[Exception] = []
    source.pipe(rt.assemble()).subscribe(values.append, errors.append)
    source.on_next(C0)
    source.on_next({"choices": [{"index": 0, "delta": {"tool_calls": "oops"}}]})
    source.on_next(C1)
    source.on_next(FIN)
    source.on_completed()
    assert values == []
    assert len(errors) == 1
    assert isinstance(errors[0], rt.MalformedChunkError)


# -- concat_arguments, on_finish_reason, atomic_batch ---------------------------------------


def _grouped() -> Observable[Any]:
    return reactivex.from_iterable(CHUNKS).pipe(rt.group_by_index())


def test_concat_arguments_joins_without_parsing() -> None:
    chunks = [call_open(0, "call_a", "f", '{"a": '), args(0, "not json"), finish()]
    values, errors, done = collect(
        reactivex.from_iterable(chunks).pipe(rt.group_by_index(), rt.concat_arguments())
    )
    assert errors == []
    assert done
    assert values[0] == rt.ToolCallBuffer(0, 0, "call_a", "f", "function", '{"a": not json', 1)
    assert isinstance(values[1], rt.StreamEnd)


def test_concat_arguments_rejects_foreign_elements() -> None:
    values, errors, _ = collect(reactivex.of(1).pipe(rt.concat_arguments()))  # type: ignore[arg-type]
    assert values == []
    assert isinstance(errors[0], TypeError)


def test_on_finish_reason_passes_items_and_checks_the_end() -> None:
    values, errors, done = collect(_grouped().pipe(rt.concat_arguments(), rt.on_finish_reason()))
    assert [type(v).__name__ for v in values] == ["ToolCallBuffer", "ToolCallBuffer", "StreamEnd"]
    assert (errors, done) == ([], True)
    cut = reactivex.from_iterable([C0, finish("length")])
    values, errors, done = collect(
        cut.pipe(rt.group_by_index(), rt.concat_arguments(), rt.on_finish_reason())
    )
    assert [type(v).__name__ for v in values] == ["ToolCallBuffer"]
    assert isinstance(errors[0], rt.TruncatedToolCallError)
    assert not done


def test_on_finish_reason_opt_out() -> None:
    stream = reactivex.from_iterable([C0, C1]).pipe(rt.group_by_index(), rt.concat_arguments())
    _, errors, _ = collect(stream.pipe(rt.on_finish_reason()))
    assert isinstance(errors[0], rt.StreamInterruptedError)
    _, errors, done = collect(stream.pipe(rt.on_finish_reason(require_finish_reason=False)))
    assert (errors, done) == ([], True)


def test_atomic_batch_needs_the_stream_end() -> None:
    buffer = rt.ToolCallBuffer(0, 0, "call_a", "f", None, "{}")
    values, errors, _ = collect(reactivex.of(buffer).pipe(rt.atomic_batch()))
    assert values == []
    assert isinstance(errors[0], rt.StreamInterruptedError)


def test_atomic_batch_emits_nothing_when_one_call_is_invalid() -> None:
    chunks = [C0, C1, call_open(1, "call_b", "g", '{"tz": "UTC"}}'), FIN]
    values, errors, _ = collect(reactivex.from_iterable(chunks).pipe(rt.assemble()))
    assert values == []
    assert isinstance(errors[0], rt.InvalidArgumentsError)
    assert (errors[0].index, errors[0].name) == (1, "g")


def test_atomic_choices_emits_one_tuple() -> None:
    chunks = [content("a", 0), content("b", 1), finish("stop", 1), finish("stop", 0)]
    values, errors, done = collect(reactivex.from_iterable(chunks).pipe(rt.assemble_choices()))
    assert (errors, done) == ([], True)
    assert len(values) == 1
    assert [(t.choice_index, t.content) for t in values[0]] == [(0, "a"), (1, "b")]


# -- progress -------------------------------------------------------------------------------


def test_progress_signals_on_the_naming_chunk() -> None:
    with marbles_testing(timespan=1.0) as (start, cold, _hot, exp):
        result = start(cold("-a-b-c-d-e-|", LOOKUP, None).pipe(rt.progress()))
        expected = exp(
            "---s---t---|",
            {
                "s": rt.ToolCallStarted(0, "call_a", "get_weather", 1),
                "t": rt.ToolCallStarted(1, "call_b", "get_time", 2),
            },
            None,
        )
    assert result == expected


def test_progress_when_the_name_comes_after_the_arguments() -> None:
    late_name = {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "f"}}]}}
        ]
    }
    chunks = [call_open(0, "call_a", None, "{"), args(0, '"a": 1'), late_name, args(0, "}"), FIN]
    emitted: list[tuple[int, rt.ToolCallStarted]] = []
    position = [0]

    def count_chunk(_: Any) -> None:
        position[0] += 1

    source = reactivex.from_iterable(chunks).pipe(ops.do_action(count_chunk))
    source.pipe(rt.progress()).subscribe(lambda e: emitted.append((position[0], e)))
    assert emitted == [(3, rt.ToolCallStarted(0, "call_a", "f", 1))]


def test_progress_shared_with_assemble() -> None:
    shared = reactivex.from_iterable(CHUNKS).pipe(ops.publish())
    events: list[rt.ToolCallStarted] = []
    turns: list[rt.AssistantTurn] = []
    shared.pipe(rt.progress()).subscribe(events.append)
    shared.pipe(rt.assemble()).subscribe(turns.append)
    shared.connect()
    assert [e.name for e in events] == ["get_weather", "get_time"]
    assert len(turns) == 1


# -- assemble_with_progress (issue item 24) -------------------------------------------------


@pytest.mark.json_parser
def test_assemble_with_progress_over_a_synchronous_source() -> None:
    from tests.helpers import FIXTURES

    source = rt.from_jsonl(FIXTURES / "openai__parallel_tool_calls.jsonl")
    values, errors, completed = collect(source.pipe(rt.assemble_with_progress()))
    assert errors == []
    assert completed
    *starts, turn = values
    assert [type(s) for s in starts] == [rt.ToolCallStarted] * 2
    assert isinstance(turn, rt.AssistantTurn)
    assert turn == source.pipe(rt.assemble()).run()
    assert [s.name for s in starts] == [c.name for c in turn.tool_calls]


def test_assemble_with_progress_fails_as_assemble_does_and_emits_starts_first() -> None:
    chunks = [C0, args(0, "{broken")]
    values, errors, completed = collect(
        reactivex.from_iterable([*chunks, FIN]).pipe(rt.assemble_with_progress())
    )
    assert [type(v) for v in values] == [rt.ToolCallStarted]
    assert [type(e) for e in errors] == [rt.InvalidArgumentsError]
    assert not completed
    expected = collect(reactivex.from_iterable([*chunks, FIN]).pipe(rt.assemble()))[1]
    assert str(errors[0]) == str(expected[0])


def test_assemble_with_progress_refuses_two_choices_like_assemble() -> None:
    two = [content("a", 0), content("b", 1), finish("stop", 0), finish("stop", 1)]
    _, errors, _ = collect(reactivex.from_iterable(two).pipe(rt.assemble_with_progress()))
    assert [type(e) for e in errors] == [rt.MultipleChoicesError]


def test_progress_docstring_recommends_what_works() -> None:
    doc = rt.progress.__doc__ or ""
    assert "assemble_with_progress()" in doc
    assert "ops.publish()" in doc


# -- one shape for every call event (issue item 26) -----------------------------------------


def test_progress_partial_arguments_is_a_snapshot_like_characters() -> None:
    pieces = ['{"q": ', '"ab', "cd", 'ef"}']
    chunks = [call_open(0, "c", "f", pieces[0]), *(args(0, p) for p in pieces[1:]), FIN]
    events, errors, _ = collect(reactivex.from_iterable(chunks).pipe(rt.lifecycle(every=1)))
    assert errors == []
    progress = [e for e in events if isinstance(e, rt.ToolCallProgress)]
    # Read after the whole stream: each still shows its own moment, as characters does.
    assert [p.partial_arguments() for p in progress] == [
        "".join(pieces[: i + 1]) for i in range(len(pieces))
    ]
    assert [len(p.partial_arguments()) for p in progress] == [p.characters for p in progress]
    assert [p.fragments for p in progress] == [1, 2, 3, 4]


def test_committed_knows_index_id_and_name_like_its_siblings() -> None:
    events, _, _ = collect(reactivex.from_iterable(CHUNKS).pipe(rt.lifecycle()))
    committed = [e for e in events if isinstance(e, rt.ToolCallCommitted)]
    started = [e for e in events if isinstance(e, rt.ToolCallStarted)]
    assert [(c.index, c.id, c.name) for c in committed] == [
        (s.index, s.id, s.name) for s in started
    ]
    assert [(c.index, c.id, c.name) for c in committed] == [
        (0, "call_a", "get_weather"),
        (1, "call_b", "get_time"),
    ]


def test_one_word_for_an_argument_piece_in_the_public_docs() -> None:
    import re

    for item in rt.__all__:
        doc = getattr(getattr(rt, item), "__doc__", None) or ""
        assert not re.search(r"\bpieces?\b", doc), item
