"""The Rx plumbing under every operator: the folding stage, the upstream link, fast results.

``assemble()`` folds the turn in a stage that never calls its observer before the end; the
source's subscription may be disposed of before the source returns it; results are built on a
twin class of their layout. Each is checked here at its edges: synchronous sources, disposal
at every point, cycles left behind, and the results' own behaviour as dataclasses.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
from typing import Any

import pytest
import reactivex
from reactivex import abc
from reactivex.disposable import Disposable
from reactivex.subject import Subject

import rxtoolcalls as rt
from rxtoolcalls._lift import _Upstream
from rxtoolcalls._types import _direct, new_tool_call, new_turn
from tests.helpers import call_open, choice

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


@pytest.mark.parametrize("wire", [None, "chat"])
@pytest.mark.parametrize("failing", [False, True])
def test_a_synchronous_source_gives_one_outcome_and_leaves_no_cycle(
    wire: Any, failing: bool
) -> None:
    outcomes: list[Any] = []
    source = synchronous(CALL, ConnectionError("cut") if failing else None)
    gc.collect()
    gc.disable()
    try:
        source.pipe(rt.assemble(wire=wire)).subscribe(outcomes.append, outcomes.append)
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0
    assert len(outcomes) == 1
    if failing:
        assert isinstance(outcomes[0], rt.StreamInterruptedError)
    else:
        assert [c.name for c in outcomes[0].tool_calls] == ["get_weather"]


@pytest.mark.parametrize("after", range(len(CALL) + 1))
def test_disposing_at_any_point_unsubscribes_and_emits_nothing(after: int) -> None:
    subject: Subject[Any] = Subject()
    outcomes: list[Any] = []
    subscription = subject.pipe(rt.assemble()).subscribe(
        outcomes.append, outcomes.append, lambda: outcomes.append("done")
    )
    for event in CALL[:after]:
        subject.on_next(event)
    subscription.dispose()
    assert not subject.observers
    subject.on_next(CALL[-1])
    subject.on_completed()
    assert outcomes == []


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


@pytest.mark.parametrize("wire", [None, "chat"])
@pytest.mark.parametrize("operator", [rt.assemble, rt.assemble_choices])
def test_a_turn_refused_at_the_close_leaves_no_cycle(operator: Any, wire: Any) -> None:
    # No finish reason: the close raises, and the error goes downstream. The subscriber keeps
    # only its type, so nothing outside holds the error: a cycle through it would be garbage.
    kinds: list[type] = []
    source = reactivex.from_iterable(CALL[:1])
    gc.collect()
    gc.disable()
    try:
        source.pipe(operator(wire=wire)).subscribe(on_error=lambda e: kinds.append(type(e)))
        found = gc.collect()
    finally:
        gc.enable()
    assert kinds == [rt.StreamInterruptedError]
    assert found == 0
