"""Public value classes: help() shows their own docs, and they pickle, frozen and slotted."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import pydoc

import pytest

import rxtoolcalls as rt

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

PUBLIC_CLASSES = sorted(
    name for name in rt.__all__ if inspect.isclass(getattr(rt, name)) and name != "Chunk"
)


@pytest.mark.parametrize("name", PUBLIC_CLASSES)
def test_help_shows_no_cpython_internal_comment(name: str) -> None:
    assert "_dataclass_getstate" not in pydoc.render_doc(getattr(rt, name))


def samples() -> dict[str, object]:
    turn = rt.from_jsonl(rt.sources.demo_path()).pipe(rt.assemble()).run()
    call = turn.tool_calls[0]
    buffer = rt.ToolCallBuffer(0, 0, call.id, call.name, "function", call.arguments)
    choice = rt.ChoiceEnd(0, "hi", None, None, "stop", function_call=buffer)
    error = rt.StreamInterruptedError("cut")
    return {
        "AssistantTurn": turn,
        "ChoiceEnd": choice,
        "Conversation": rt.Conversation(({"role": "user", "content": "hi"},), turn, 1),
        "Limits": rt.Limits(max_calls=3),
        "Policy": rt.LENIENT,
        "StreamEnd": rt.StreamEnd((choice,), {"total_tokens": 3}, wire="chat"),
        "TextDelta": rt.TextDelta("Hel", "content"),
        "ToolCall": call,
        "ToolCallBuffer": buffer,
        "ToolCallCommitted": rt.ToolCallCommitted(call),
        "ToolCallEarly": rt.ToolCallEarly(1, call, reused=True),
        "ToolCallField": rt.ToolCallField(0, call.id, call.name, ("city",), "Edinburgh"),
        "ToolCallFinished": rt.ToolCallFinished(call, "sunny"),
        "ToolCallProgress": rt.ToolCallProgress(0, call.id, call.name, 10, 2),
        "ToolCallRetracted": rt.ToolCallRetracted(1, call, "the turn failed", error, True),
        "ToolCallStarted": rt.ToolCallStarted(0, call.id, call.name, 1),
        "ToolCallText": rt.ToolCallText(0, call.id, call.name, ("city",), "Edin"),
        "TurnFinished": rt.TurnFinished(1, turn),
        "TurnRetried": rt.TurnRetried(1, 2, error, 2048),
    }


VALUE_CLASSES = sorted(
    name for name in PUBLIC_CLASSES if dataclasses.is_dataclass(getattr(rt, name))
)


def test_every_value_class_has_a_sample() -> None:
    assert sorted(samples()) == VALUE_CLASSES


@pytest.mark.parametrize("name", VALUE_CLASSES)
def test_pickle_and_copy_round_trip(name: str) -> None:
    value = samples()[name]
    cls = getattr(rt, name)
    for again in (
        pickle.loads(pickle.dumps(value)),
        pickle.loads(pickle.dumps(value, protocol=0)),
        copy.copy(value),
        copy.deepcopy(value),
    ):
        assert type(again) is cls
        if isinstance(again, rt.TurnRetried):  # an exception compares by identity
            assert (again.turn, again.attempt, str(again.error)) == (1, 2, "cut")
            assert again.max_tokens == 2048
            assert type(again.error) is rt.StreamInterruptedError
        elif isinstance(again, rt.ToolCallRetracted):
            assert isinstance(value, rt.ToolCallRetracted)
            assert (again.turn, again.call, again.reason, again.cancelled) == (
                value.turn,
                value.call,
                value.reason,
                value.cancelled,
            )
            assert type(again.error) is rt.StreamInterruptedError
            assert str(again.error) == "cut"
        else:
            assert again == value
    # Still slotted and frozen.
    assert not hasattr(value, "__dict__")
    first = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, first, None)


@pytest.mark.parametrize("name", VALUE_CLASSES)
def test_a_state_of_the_wrong_length_is_refused(name: str) -> None:
    value = samples()[name]
    blank = object.__new__(type(value))
    with pytest.raises(ValueError, match="zip"):
        blank.__setstate__([])  # type: ignore[attr-defined]
