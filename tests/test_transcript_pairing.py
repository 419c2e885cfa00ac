"""An answer counts only where the API pairs it with its call: the agent loop, on every wire."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.transcript import find_unanswered
from tests.helpers import Script, answer, tool_turn
from tests.wire_builders import (
    a_end,
    a_start,
    a_text,
    a_tool,
    g_call,
    g_response,
    g_stop,
    g_text,
    r_call,
    r_completed,
    r_created,
    r_fc_item,
    r_message,
    turn_of,
)

Item = dict[str, Any]
WIRES = ["chat", "responses", "anthropic", "gemini"]
# A call as the model streams it: id, name, arguments.
Call = tuple[str, str, dict[str, Any]]


def user(wire: str, text: str) -> Item:
    if wire == "gemini":
        return {"role": "user", "parts": [{"text": text}]}
    return {"role": "user", "content": text}


def call_turn(wire: str, *calls: Call) -> list[Item]:
    """The events of a turn that asks for ``calls``."""
    if wire == "chat":
        return tool_turn(*((i, name, json.dumps(a)) for i, name, a in calls))
    if wire == "responses":
        done = [(n, i, name, json.dumps(a)) for n, (i, name, a) in enumerate(calls)]
        events = [r_created()]
        for call in done:
            events.extend(r_call(*call))
        return [*events, r_completed([r_fc_item(*call) for call in done])]
    if wire == "anthropic":
        events = [a_start()]
        for n, (i, name, a) in enumerate(calls):
            events.extend(a_tool(n, i, name, json.dumps(a)))
        return [*events, *a_end("tool_use")]
    return [g_response(*(g_call(name, a, id=i) for i, name, a in calls)), g_stop()]


def prose_turn(wire: str, text: str) -> list[Item]:
    """The events of a turn that answers in prose."""
    if wire == "chat":
        return answer(text)
    if wire == "responses":
        message = r_message(0, text)
        return [r_created(), *message, r_completed([message[-1]["item"]])]
    if wire == "anthropic":
        return [a_start(), *a_text(0, text), *a_end("end_turn")]
    return [g_response(g_text(text)), g_stop()]


def entries(turn: rt.AssistantTurn) -> list[Item]:
    """The turn as transcript entries (Responses gives several)."""
    message = turn.to_message()
    return list(message) if isinstance(message, list) else [message]


class Tool:
    """A tool that records its arguments and returns (or raises) ``result``."""

    def __init__(self, result: object) -> None:
        self.seen: list[dict[str, Any]] = []
        self.result = result

    def __call__(self, **arguments: Any) -> object:
        self.seen.append(arguments)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def finished_of(events: list[Any]) -> list[tuple[str, str, bool]]:
    return [
        (e.call.name, e.content, e.reused) for e in events if isinstance(e, rt.ToolCallFinished)
    ]


def run(loop: Any) -> list[Any]:
    events: list[Any] = loop.pipe(ops.to_list()).run()
    return events


# -- an answer to an earlier turn is never reused -------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
def test_an_answer_to_an_earlier_turn_is_not_reused_for_a_new_call_with_its_id(wire: str) -> None:
    # TGI numbers calls "0", "1"… in every turn: a chat app that starts a new loop from the
    # transcript so far gets a new get_time call with the id an earlier one had.
    earlier = turn_of(call_turn(wire, ("0", "get_time", {})))
    history = [
        user(wire, "Time?"),
        *earlier.exchange(["10:00"]),
        *entries(turn_of(prose_turn(wire, "It is 10:00."))),
        user(wire, "And now?"),
    ]
    clock = Tool("10:05")
    script = Script(call_turn(wire, ("0", "get_time", {})), prose_turn(wire, "It is 10:05."))
    events = run(rt.agent_loop(script, {"get_time": clock}, history))
    assert clock.seen == [{}]
    assert finished_of(events) == [("get_time", "10:05", False)]
    asked = next(e.assistant for e in events if isinstance(e, rt.TurnFinished))
    assert script.seen[1] == [*history, *asked.exchange(["10:05"])]


# -- a resumed turn: the last one, with some answers missing ---------------------------------


def two_calls(wire: str) -> rt.AssistantTurn:
    return turn_of(call_turn(wire, ("0", "get_time", {}), ("1", "weather", {"city": "Paris"})))


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("given", [0, 1, 2])
def test_a_resumed_turn_runs_only_the_calls_it_lacks_answers_for(wire: str, given: int) -> None:
    asked = two_calls(wire)
    results = ["10:00", "11 C"]
    answered = replace(asked, tool_calls=asked.tool_calls[:given])
    history = [
        user(wire, "Time and weather?"),
        *entries(asked),
        *answered.tool_messages(results[:given]),
    ]
    clock, weather = Tool("10:00"), Tool("11 C")
    script = Script(prose_turn(wire, "10:00, 11 C."))
    events = run(rt.agent_loop(script, {"get_time": clock, "weather": weather}, history))
    assert len(clock.seen) == (given < 1)
    assert len(weather.seen) == (given < 2)
    # A complete turn is no turn to resume: nothing is dispatched, the loop streams at once.
    expected = [("get_time", "10:00", given >= 1), ("weather", "11 C", False)]
    assert finished_of(events) == (expected if given < 2 else [])
    # Nothing was streamed before every call had its answer, where the API pairs it.
    assert script.seen == [[user(wire, "Time and weather?"), *asked.exchange(results)]]
    assert find_unanswered(script.seen[0]) == []
    conversation = events[-1]
    assert isinstance(conversation, rt.Conversation)
    assert conversation.turns == 1
    assert list(conversation.messages[: len(script.seen[0])]) == script.seen[0]


@pytest.mark.parametrize("wire", WIRES)
def test_a_resumed_turn_re_subscribed_with_its_ledger_runs_no_call_twice(wire: str) -> None:
    asked = two_calls(wire)
    history = [user(wire, "Time and weather?"), *entries(asked)]
    clock, weather = Tool("10:00"), Tool("sunny")
    attempts: list[int] = []

    def open_stream(messages: list[Any]) -> list[Item]:
        attempts.append(len(messages))
        if len(attempts) == 1:
            raise rt.StreamInterruptedError("the connection dropped")
        return prose_turn(wire, "Done.")

    loop = rt.agent_loop(open_stream, {"get_time": clock, "weather": weather}, history, retries=0)
    events = run(loop.pipe(ops.retry(2)))
    assert (len(clock.seen), len(weather.seen)) == (1, 1)
    assert [reused for _, _, reused in finished_of(events)] == [False, False, True, True]
    assert isinstance(events[-1], rt.Conversation)


@pytest.mark.parametrize("wire", WIRES)
def test_a_turn_the_user_spoke_after_is_not_resumed(wire: str) -> None:
    # Only a turn that nothing but its answers follows is resumed; this one was left behind
    # (repair_transcript is for it).
    history = [user(wire, "Time?"), *entries(two_calls(wire)), user(wire, "Never mind.")]
    clock = Tool("10:00")
    script = Script(prose_turn(wire, "OK."))
    run(rt.agent_loop(script, {"get_time": clock, "weather": clock}, history))
    assert clock.seen == []
    assert script.seen == [history]


def test_a_resumed_gemini_turn_pairs_answers_without_ids_by_name_in_order() -> None:
    both = g_response(g_call("weather", {"city": "Paris"}), g_call("weather", {"city": "Rome"}))
    asked = turn_of([both, g_stop()])
    first = replace(asked, tool_calls=asked.tool_calls[:1])
    history = [user("gemini", "Weather?"), *entries(asked), *first.tool_messages(["sunny"])]
    weather = Tool("rain")
    script = Script(prose_turn("gemini", "Sunny, then rain."))
    run(rt.agent_loop(script, {"weather": weather}, history))
    assert weather.seen == [{"city": "Rome"}]
    assert script.seen[0] == [user("gemini", "Weather?"), *asked.exchange(["sunny", "rain"])]


@pytest.mark.parametrize(
    ("wire", "last", "answered"),
    [
        (
            "chat",
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "x"},
        ),
        (
            "responses",
            r_fc_item(0, "a", "f", "[1]"),
            {"type": "function_call_output", "call_id": "a", "output": "x"},
        ),
        (
            "anthropic",
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
        ),
        (
            "gemini",
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": 3}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
        ),
    ],
)
def test_a_resumed_call_that_cannot_run_is_a_value_error_at_the_call(
    wire: str, last: Item, answered: Item
) -> None:
    script = Script(prose_turn(wire, "?"))
    with pytest.raises(ValueError, match=r"message 1: .* cannot be run"):
        rt.agent_loop(script, {}, [user(wire, "hi"), last])
    # Answered, it is nothing to run: the loop streams the messages as they are.
    run(rt.agent_loop(script, {}, [user(wire, "hi"), last, answered]))
    assert script.seen == [[user(wire, "hi"), last, answered]]
