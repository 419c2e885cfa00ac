"""The public values: the messages a turn becomes, and what tool_messages refuses."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import rxtoolcalls as rt
from rxtoolcalls import _types
from tests.helpers import load_fixture, run_assembler


def _turn() -> rt.AssistantTurn:
    return run_assembler(load_fixture("openai__parallel_tool_calls"))


def test_to_message_is_the_api_shape() -> None:
    message = _turn().to_message()
    assert message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_JMW1whyEaYG438VE1OIflxA2",
                "type": "function",
                "function": {
                    "name": "GetWeatherArgs",
                    "arguments": '{"city": "Edinburgh", "country": "GB", "units": "c"}',
                },
            },
            {
                "id": "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "type": "function",
                "function": {
                    "name": "get_stock_price",
                    "arguments": '{"ticker": "AAPL", "exchange": "NASDAQ"}',
                },
            },
        ],
    }


def test_to_message_without_calls_has_no_tool_calls_key() -> None:
    assert rt.AssistantTurn(content="Hi", finish_reason="stop", wire="chat").to_message() == {
        "role": "assistant",
        "content": "Hi",
    }
    assert _turn().to_message(empty_content="")["content"] == ""
    assert _turn().exchange(["a", "b"], empty_content="")[0]["content"] == ""
    refused = rt.AssistantTurn(refusal="No.", finish_reason="stop", wire="chat").to_message()
    assert refused == {"role": "assistant", "content": None, "refusal": "No."}


def test_tool_messages_from_a_mapping_and_from_a_list() -> None:
    turn = _turn()
    ids = [c.id for c in turn.tool_calls]
    by_id = turn.tool_messages({ids[1]: {"price": 1.5}, ids[0]: "11 C"})
    assert by_id == [
        {"role": "tool", "tool_call_id": ids[0], "content": "11 C"},
        {"role": "tool", "tool_call_id": ids[1], "content": '{"price": 1.5}'},
    ]
    assert turn.tool_messages(["11 C", {"price": 1.5}]) == by_id


@pytest.mark.parametrize(
    "results",
    [
        {},
        {"call_JMW1whyEaYG438VE1OIflxA2": "x"},
        {"call_JMW1whyEaYG438VE1OIflxA2": "x", "call_DNYTawLBoN8fj3KN6qU9N1Ou": "y", "z": "w"},
        ["only one"],
        ["a", "b", "c"],
        "ab",
    ],
)
def test_tool_messages_need_exactly_one_result_per_call(results: object) -> None:
    with pytest.raises(ValueError, match="result"):
        _turn().tool_messages(results)  # type: ignore[arg-type]


def test_values_are_frozen_and_comparable() -> None:
    turn = _turn()
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.content = "x"  # type: ignore[misc]
    assert turn == _turn()
    assert hash(turn) == hash(_turn())
    assert len({turn, _turn()}) == 1
    call = turn.tool_calls[0]
    assert call.to_dict()["function"]["name"] == call.name
    assert call.parsed_arguments == {"city": "Edinburgh", "country": "GB", "units": "c"}
    assert not hasattr(call, "__dict__")


def test_non_finite_results_never_reach_a_tool_message_as_nan_or_infinity() -> None:
    turn = _turn()
    results = [{"ratio": float("nan"), "top": [float("inf"), 1.5]}, float("-inf")]
    messages = turn.tool_messages(results)
    assert [m["content"] for m in messages] == ['{"ratio": null, "top": [null, 1.5]}', "null"]
    for message in [*messages, *turn.exchange(results)[1:]]:
        # Strict JSON: the tokens NaN and Infinity make a strict parser fail.
        json.loads(message["content"], parse_constant=_refuse)


def _refuse(token: str) -> object:
    raise AssertionError(f"{token} in a tool message")


def test_tool_content_keeps_strings_and_passes_default() -> None:
    assert rt.tool_content("11 C") == "11 C"
    assert rt.tool_content({"n": 2}) == '{"n": 2}'
    assert rt.tool_content({"when": object()}, default=lambda _: float("nan")) == '{"when": null}'
    with pytest.raises(TypeError):
        rt.tool_content({"when": object()})


@pytest.mark.parametrize(
    ("make", "cls"),
    [
        (_types.new_tool_call, rt.ToolCall),
        (_types.new_buffer, rt.ToolCallBuffer),
        (_types.new_call_item, _types.CallItem),
        (_types.new_started, rt.ToolCallStarted),
        (_types.new_turn, rt.AssistantTurn),
        (_types.new_choice_end, rt.ChoiceEnd),
    ],
)
def test_direct_constructors_make_the_same_frozen_value(make: Any, cls: Any) -> None:
    # A turn's wire must be one the registry knows; any other field takes any value.
    values = {
        f.name: "chat" if f.name == "wire" else (f"v{at}", [at])
        for at, f in enumerate(dataclasses.fields(cls))
    }
    made, expected = make(**values), cls(**values)
    assert type(made) is cls
    # Every field, compared or not, holds what was given, by name and in order.
    for name, value in values.items():
        assert getattr(made, name) is value
    assert make(*values.values()) == made == expected
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, next(iter(values)), 1)
    with pytest.raises(TypeError):
        make(*list(values.values())[:-1])
