"""The Rx plumbing under every operator: the folding stage, the upstream link, fast results.

``assemble()`` folds the turn in a stage that never calls its observer before the end; the
source's subscription may be disposed of before the source returns it; results are built on a
twin class of their layout. Each is checked here at its edges: synchronous sources, disposal
at every point, cycles left behind, and the results' own behaviour as dataclasses.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import threading
from functools import partial
from typing import Any

import pytest
import reactivex
from reactivex import abc
from reactivex import operators as ops
from reactivex.disposable import Disposable
from reactivex.subject import Subject

import rxtoolcalls as rt
from rxtoolcalls._lift import _Upstream, fold
from rxtoolcalls._types import _direct, new_tool_call, new_turn
from rxtoolcalls.wires import names
from tests.helpers import call_open, choice, garbage_of
from tests.test_operators import EVERY_OPERATOR
from tests.wire_builders import case, pieces

BOUND = 5.0  # seconds; each wait ends in microseconds
# The Rx plumbing itself is checked on this Chat turn; what a reader makes, on every wire's.
CALL = [call_open(0, "call_1", "get_weather", '{"city": "Paris"}'), choice({}, "tool_calls")]


def synchronous(events: list[Any], error: Exception | None = None) -> reactivex.Observable[Any]:
    """A source that sends everything inside ``subscribe``, before it returns its disposable."""

    def subscribe(observer: abc.ObserverBase[Any], _: abc.SchedulerBase | None = None) -> Any:
        for event in events:
            observer.on_next(event)
        if error is None:
            observer.on_completed()
        else:
            observer.on_error(error)
        return Disposable()

    return reactivex.create(subscribe)


def call_turn(wire: str) -> list[Any]:
    """A whole turn of ``wire`` that asks for one call."""
    return case(wire).turn((), [("call_1", "get_weather", pieces('{"city": "Paris"}'))])


@pytest.mark.parametrize("detected", [True, False], ids=["detected", "forced"])
@pytest.mark.parametrize("wire", names())
@pytest.mark.parametrize("failing", [False, True])
def test_a_synchronous_source_gives_one_outcome_and_leaves_no_cycle(
    wire: str, detected: bool, failing: bool
) -> None:
    outcomes: list[Any] = []
    source = synchronous(call_turn(wire), ConnectionError("cut") if failing else None)
    operator = rt.assemble(wire=None if detected else wire)  # type: ignore[arg-type]
    found = garbage_of(lambda: source.pipe(operator).subscribe(outcomes.append, outcomes.append))
    assert found == 0
    assert len(outcomes) == 1
    if failing:
        assert isinstance(outcomes[0], rt.StreamInterruptedError)
    else:
        assert [c.name for c in outcomes[0].tool_calls] == ["get_weather"]


@pytest.mark.parametrize("wire", names())
def test_disposing_at_any_point_unsubscribes_and_emits_nothing(wire: str) -> None:
    events = call_turn(wire)
    for after in range(len(events) + 1):
        subject: Subject[Any] = Subject()
        outcomes: list[Any] = []
        subscription = subject.pipe(rt.assemble()).subscribe(
            outcomes.append, outcomes.append, partial(outcomes.append, "done")
        )
        for event in events[:after]:
            subject.on_next(event)
        subscription.dispose()
        assert not subject.observers, after
        for event in events[after:]:
            subject.on_next(event)
        subject.on_completed()
        assert outcomes == [], after


# The start of a turn on every wire, a call open in each (its arguments cut inside a string).
OPENED = ["nothing", *names()]


def opened(name: str) -> list[Any]:
    return [] if name == "nothing" else case(name).cut((), "call_1", "get_weather", "city", "Pa")


@pytest.mark.parametrize("opened_on", OPENED)
@pytest.mark.parametrize("operator", sorted(EVERY_OPERATOR))
@pytest.mark.parametrize("failing", [False, True])
def test_every_operator_leaves_no_cycle_when_a_turn_ends_early(
    opened_on: str, operator: str, failing: bool
) -> None:
    # Ended by the source (an error, or a completion before the turn's end) with no event,
    # or with a call open: whatever the reader was, nothing it made is left in a cycle.
    ends: list[str] = []
    source = synchronous(opened(opened_on), ConnectionError("cut") if failing else None)
    found = garbage_of(
        lambda: source.pipe(EVERY_OPERATOR[operator]()).subscribe(
            lambda _: None, lambda _: ends.append("error"), lambda: ends.append("completed")
        )
    )
    assert found == 0
    assert len(ends) == 1
    if failing:
        assert ends == ["error"]


def test_an_error_reported_while_the_source_subscribes_disposes_it_once_returned() -> None:
    disposed: list[int] = []

    def subscribe(observer: abc.ObserverBase[Any], _: abc.SchedulerBase | None = None) -> Any:
        observer.on_next({"choices": "not a list"})  # reported at once: stops the stage
        observer.on_next(CALL[0])  # ignored: the stage has stopped
        return Disposable(lambda: disposed.append(1))

    outcomes: list[Any] = []
    reactivex.create(subscribe).pipe(rt.assemble()).subscribe(outcomes.append, outcomes.append)
    assert [type(o) for o in outcomes] == [rt.MalformedChunkError]
    assert disposed == [1]


def test_the_upstream_link_disposes_a_subscription_set_after_its_disposal() -> None:
    disposed: list[str] = []
    link = _Upstream()
    link.dispose()
    link.set(Disposable(lambda: disposed.append("late")))
    assert disposed == ["late"]
    link.dispose()  # again: nothing left to dispose of
    assert disposed == ["late"]

    released = _Upstream()
    released.set(Disposable(lambda: disposed.append("ended")))
    released.release()  # the source has ended: let go without a call
    assert disposed == ["late"]
    released.dispose()
    assert disposed == ["late"]


def test_fast_results_are_the_dataclasses_themselves() -> None:
    made = new_tool_call(1, "call_1", "f", '{"a": 1}', {"a": 1}, "function", None)
    plain = rt.ToolCall(1, "call_1", "f", '{"a": 1}', {"a": 1}, "function", None)
    assert type(made) is rt.ToolCall
    assert made == plain
    assert hash(made) == hash(plain)
    assert repr(made) == repr(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.name = "g"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(made)) == made
    assert copy.deepcopy(made) == made
    assert dataclasses.replace(made, name="g").name == "g"
    turn = new_turn("hi", (made,), "stop", None, None, None, 0, None, {}, "chat", ())
    assert turn.tool_calls == (plain,)
    assert dataclasses.asdict(turn)["tool_calls"][0]["name"] == "f"


def test_a_result_class_no_twin_can_stand_for_is_still_built_exactly() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Base:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived(Base):
        b: str

    # A twin holds only the class's own slots: the layout differs, so the slots are set one
    # by one instead.
    made = _direct(Derived)(1, "x")
    assert type(made) is Derived
    assert made == Derived(1, "x")
    assert _direct(Derived)(b="y", a=2) == Derived(2, "y")


@pytest.mark.parametrize("detected", [True, False], ids=["detected", "forced"])
@pytest.mark.parametrize("wire", names())
@pytest.mark.parametrize("operator", [rt.assemble, rt.assemble_choices])
def test_a_turn_refused_at_the_close_leaves_no_cycle(
    operator: Any, wire: str, detected: bool
) -> None:
    # No end: the close raises, and the error goes downstream. The subscriber keeps only its
    # type, so nothing outside holds the error: a cycle through it would be garbage.
    kinds: list[type] = []
    without_end = case(wire).turn((), [("call_1", "get_weather", ['{"city": "Paris"}'])], end=False)
    source = reactivex.from_iterable(without_end)
    chosen = None if detected else wire
    found = garbage_of(
        lambda: source.pipe(operator(wire=chosen)).subscribe(
            on_error=lambda e: kinds.append(type(e))
        )
    )
    assert kinds == [rt.StreamInterruptedError]
    assert found == 0


# -- subscribing to a fold: what Observable.subscribe does, without its extra observer --------

BAD = [CALL[0], {"choices": "not a list"}]


class _Duck:
    """An observer by its methods only (no ``abc.ObserverBase``): reactivex accepts one."""

    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    def on_next(self, value: Any) -> None:
        self.seen.append(("next", value))

    def on_error(self, error: Exception) -> None:
        self.seen.append(("error", type(error)))

    def on_completed(self) -> None:
        self.seen.append(("completed", None))


def _subscribe_as(form: str, source: reactivex.Observable[Any], seen: list[Any]) -> None:
    duck = _Duck(seen)
    if form == "observer":
        source.subscribe(reactivex.Observer(duck.on_next, duck.on_error, duck.on_completed))
    elif form == "duck":
        source.subscribe(duck)  # type: ignore[arg-type]
    elif form == "callbacks":
        source.subscribe(duck.on_next, duck.on_error, duck.on_completed)
    else:
        source.subscribe(on_next=duck.on_next, on_error=duck.on_error)


@pytest.mark.parametrize("form", ["observer", "duck", "callbacks", "keywords"])
@pytest.mark.parametrize("operator", [rt.assemble, rt.assemble_choices])
def test_a_fold_takes_an_observer_or_callbacks_as_reactivex_does(form: str, operator: Any) -> None:
    seen: list[Any] = []
    _subscribe_as(form, reactivex.from_iterable(CALL).pipe(operator()), seen)
    assert [kind for kind, _ in seen] == (["next"] if form == "keywords" else ["next", "completed"])
    seen.clear()
    _subscribe_as(form, reactivex.from_iterable(BAD).pipe(operator()), seen)
    assert seen == [("error", rt.MalformedChunkError)]


def test_a_failed_turn_with_no_on_error_raises_as_reactivex_does() -> None:
    with pytest.raises(rt.MalformedChunkError):
        reactivex.from_iterable(BAD).pipe(rt.assemble()).subscribe()
    with pytest.raises(ConnectionError):
        reactivex.throw(ConnectionError("cut")).subscribe()  # reactivex's own, for reference
    reactivex.from_iterable(CALL).pipe(rt.assemble()).subscribe()  # nothing to raise


def _pulled_events(pulled: list[int]) -> Any:
    for at, event in enumerate([*BAD, *[CALL[0]] * 5, CALL[-1]]):
        pulled.append(at)
        yield event


@pytest.mark.parametrize("nested", [False, True])
def test_a_failed_turn_stops_a_source_on_the_current_thread_at_once(nested: bool) -> None:
    # The source is subscribed on a running trampoline: its subscription is known before its
    # first event, so the error disposes of it there, and nothing more is read.
    pulled: list[int] = []
    errors: list[Exception] = []
    turn = reactivex.from_iterable(_pulled_events(pulled)).pipe(rt.assemble())
    if nested:  # subscribed from inside another subscription's work on the trampoline
        reactivex.of(0).pipe(ops.flat_map(lambda _: turn)).subscribe(on_error=errors.append)
    else:
        turn.subscribe(on_error=errors.append)
    assert [type(e) for e in errors] == [rt.MalformedChunkError]
    assert pulled == [0, 1]


def test_an_error_while_subscribing_goes_to_on_error_once_or_leaves_as_raised() -> None:
    def make(_: Any) -> Any:
        raise ValueError("the stage could not be made")

    operator = fold(make)
    errors: list[Exception] = []
    operator(reactivex.from_iterable(CALL)).subscribe(on_error=errors.append)
    assert [str(e) for e in errors] == ["the stage could not be made"]

    def raising(error: Exception) -> None:
        errors.append(error)
        raise KeyError("the subscriber's own")

    errors.clear()
    with pytest.raises(KeyError):
        operator(reactivex.from_iterable(CALL)).subscribe(on_error=raising)
    assert len(errors) == 1


def test_a_fold_s_subscription_disposes_of_the_source_and_sends_nothing_after() -> None:
    subject: Subject[Any] = Subject()
    seen: list[Any] = []
    subscription = subject.pipe(rt.assemble()).subscribe(seen.append, seen.append)
    assert isinstance(subscription, abc.DisposableBase)
    subject.on_next(CALL[0])
    with subscription:  # a disposable is a context manager too
        pass
    assert not subject.observers
    subscription.dispose()  # again: nothing left to do
    subject.on_next(CALL[-1])
    subject.on_completed()
    assert seen == []


class _Deaf(reactivex.Observable[Any]):
    """A source whose subscription stops nothing: it keeps the callbacks it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[Any] = []

    def subscribe(self, *callbacks: Any, scheduler: abc.SchedulerBase | None = None) -> Any:
        self.held.extend(callbacks)
        return Disposable()


@pytest.mark.parametrize("end", ["completed", "error"])
def test_nothing_reaches_the_subscriber_after_a_disposal_the_source_ignores(end: str) -> None:
    source = _Deaf()
    seen: list[Any] = []
    subscription = source.pipe(rt.assemble()).subscribe(
        seen.append, seen.append, lambda: seen.append("completed")
    )
    on_next, on_error, on_completed = source.held
    on_next(CALL[0])
    subscription.dispose()
    on_next(CALL[-1])
    if end == "completed":
        on_completed()
    else:
        on_error(ConnectionError("cut"))
    assert seen == []


def test_a_disposal_from_on_next_ends_the_subscription_there() -> None:
    # first() disposes of the chain from its on_next: the completion that follows is dropped.
    seen: list[str] = []
    turns: reactivex.Observable[rt.AssistantTurn] = reactivex.from_iterable(CALL).pipe(
        rt.assemble()
    )
    noted = turns.pipe(ops.do_action(on_completed=lambda: seen.append("completed")))
    turn = noted.pipe(ops.first())
    assert [c.name for c in turn.run().tool_calls] == ["get_weather"]
    assert seen == []
    # A shared turn read twice with first(): each subscription gets the turn.
    shared = reactivex.from_iterable(CALL).pipe(rt.assemble(), ops.share())
    for _ in range(2):
        assert [c.name for c in shared.pipe(ops.first()).run().tool_calls] == ["get_weather"]


def test_disposing_from_on_next_directly_drops_the_completion() -> None:
    subject: Subject[Any] = Subject()
    seen: list[str] = []
    held: list[abc.DisposableBase] = []

    def on_next(_: Any) -> None:
        seen.append("next")
        held[0].dispose()

    held.append(
        subject.pipe(rt.assemble()).subscribe(on_next, on_completed=lambda: seen.append("c"))
    )
    assert not held[0].is_disposed  # type: ignore[attr-defined]
    for event in CALL:
        subject.on_next(event)
    subject.on_completed()
    assert seen == ["next"]
    assert held[0].is_disposed  # type: ignore[attr-defined]


def test_the_subscriber_s_own_exception_leaves_as_raised_from_a_source_inside_subscribe() -> None:
    # reactivex would hand it to on_error; a fold never does (see lift's contract).
    errors: list[Exception] = []

    def explode(_: Any) -> None:
        raise KeyError("the subscriber's own")

    with pytest.raises(KeyError):
        synchronous(CALL).pipe(rt.assemble()).subscribe(explode, errors.append)
    assert errors == []


def test_a_disposal_from_another_thread_while_the_turn_is_built_sends_nothing() -> None:
    inside, go = threading.Event(), threading.Event()

    def make(_: Any) -> Any:
        def last() -> str:
            inside.set()
            go.wait(BOUND)
            return "turn"

        return (lambda _: None), last

    subject: Subject[Any] = Subject()
    seen: list[Any] = []
    subscription = fold(make)(subject).subscribe(
        seen.append, seen.append, lambda: seen.append("completed")
    )
    ending = threading.Thread(target=subject.on_completed)
    ending.start()
    assert inside.wait(BOUND)
    subscription.dispose()
    go.set()
    ending.join(BOUND)
    assert seen == []


def test_observable_subscribe_called_on_a_fold_explicitly_reaches_the_same_fold() -> None:
    # reactivex's own subscribe ends in _subscribe_core: the same turn, or the same error.
    seen: list[Any] = []
    folded = reactivex.from_iterable(CALL).pipe(rt.assemble())
    reactivex.Observable.subscribe(folded, seen.append, seen.append, lambda: seen.append("c"))
    assert [type(v).__name__ for v in seen] == ["AssistantTurn", "str"]
    assert [c.name for c in seen[0].tool_calls] == ["get_weather"]
    seen.clear()
    failing = reactivex.from_iterable(BAD).pipe(rt.assemble())
    reactivex.Observable.subscribe(failing, seen.append, seen.append, lambda: seen.append("c"))
    assert [type(v) for v in seen] == [rt.MalformedChunkError]
