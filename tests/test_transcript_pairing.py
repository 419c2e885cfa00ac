"""An answer counts only where the API pairs it with its call: the agent loop, on every wire.

Every registered wire, its streams and transcripts from the table in tests/wire_builders.py.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.transcript import CANCELLED, find_unanswered, repair_transcript, transcript_wire
from rxtoolcalls.wires import names
from tests.helpers import Script
from tests.wire_builders import case, g_call, g_response, g_stop, turn_of

Item = dict[str, Any]
WIRES = names()
# A call as the model streams it: id, name, arguments.
Call = tuple[str, str, dict[str, Any]]


def user(wire: str, text: str) -> Item:
    return case(wire).user([text], False)


def call_turn(wire: str, *calls: Call) -> list[Item]:
    """The events of a turn that asks for ``calls``."""
    return case(wire).turn((), [(i, name, [json.dumps(a)]) for i, name, a in calls])


def prose_turn(wire: str, text: str) -> list[Item]:
    """The events of a turn that answers in prose."""
    return case(wire).turn([text])


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
    attempts: list[list[Item]] = []

    def open_stream(messages: list[Item]) -> list[Item]:
        attempts.append(messages)
        if len(attempts) == 1:
            raise rt.StreamInterruptedError("the connection dropped")
        return prose_turn(wire, "Done.")

    loop = rt.agent_loop(open_stream, {"get_time": clock, "weather": weather}, history, retries=0)
    events = run(loop.pipe(ops.retry(2)))
    assert (len(clock.seen), len(weather.seen)) == (1, 1)
    assert [reused for _, _, reused in finished_of(events)] == [False, False, True, True]
    # The second attempt answers from the ledger, the same answers in the same places.
    assert attempts == [[history[0], *asked.exchange(["10:00", "sunny"])]] * 2
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


@pytest.mark.parametrize("wire", WIRES)
def test_a_resumed_call_that_cannot_run_is_a_value_error_at_the_call(wire: str) -> None:
    last, answered = case(wire).unrunnable
    script = Script(prose_turn(wire, "?"))
    with pytest.raises(ValueError, match=r"message 1: .* cannot be run"):
        rt.agent_loop(script, {}, [user(wire, "hi"), last])
    # Answered, it is nothing to run: the loop streams the messages as they are.
    run(rt.agent_loop(script, {}, [user(wire, "hi"), last, answered]))
    assert script.seen == [[user(wire, "hi"), last, answered]]


# -- repair_transcript keeps every word the user wrote ---------------------------------------


def test_anthropic_cancel_puts_the_results_before_the_users_string_content() -> None:
    messages: list[Item] = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "weather", "input": {}}],
        },
        {"role": "user", "content": "Never mind."},
    ]
    cancelled = {"type": "tool_result", "tool_use_id": "a", "content": CANCELLED, "is_error": True}
    repaired = repair_transcript(messages, "cancel")
    assert repaired == [
        *messages[:2],
        {"role": "user", "content": [cancelled, {"type": "text", "text": "Never mind."}]},
    ]
    assert find_unanswered(repaired) == []
    assert repair_transcript(messages) == [messages[0], messages[2]]
    # No words to keep: the results alone.
    empty = repair_transcript([*messages[:2], {"role": "user", "content": ""}], "cancel")
    assert empty[2] == {"role": "user", "content": [cancelled]}
    # No content to put them in: the results go in a message of their own before it.
    odd = {"role": "user", "content": None}
    assert repair_transcript([*messages[:2], odd], "cancel") == [
        *messages[:2],
        {"role": "user", "content": [cancelled]},
        odd,
    ]


# A user message: its words, and whether its content is a list (else one string).
Said = tuple[list[str], bool]
# A turn: whether each call is answered; what the user said after it, if anything; whether
# the answers come late (after those words, where they answer nothing).
Turn = tuple[list[bool], Said | None, bool]

said_strategy = st.tuples(
    st.lists(st.sampled_from(["", "Never mind.", "and?", "Rome too"]), min_size=1, max_size=2),
    st.booleans(),
)
steps_strategy = st.lists(
    st.one_of(
        said_strategy,
        st.tuples(st.lists(st.booleans(), max_size=3), st.none() | said_strategy, st.booleans()),
    ),
    min_size=1,
    max_size=6,
)


class Render:
    """A transcript of random steps in one wire's shape; every call id and word is unique."""

    def __init__(self, wire: str) -> None:
        self.wire = wire
        self.out: list[Item] = []
        self.count = 0

    def words(self, said: Said) -> list[str]:
        self.count += 1
        return [f"{w} {self.count}.{n}" if w else "" for n, w in enumerate(said[0])]

    def user(self, said: Said) -> Item:
        return case(self.wire).user(self.words(said), said[1])

    def turn(self, answered: list[bool], said: Said | None, late: bool) -> None:
        entry = case(self.wire)
        self.count += 1
        ids = [f"call_{self.count}_{n}" for n in range(len(answered))]
        # Where a call may come without an id (Gemini 2.5 sends none), every other one has
        # none: those pair by name.
        named = [
            (None if entry.optional_ids and n % 2 else i, f"f{n % 2}") for n, i in enumerate(ids)
        ]
        self.out.extend(entry.asked(f"t{self.count}", named))
        done = [call for call, yes in zip(named, answered, strict=True) if yes]
        words = None if said is None else self.user(said)
        if late:
            # The user spoke before the answers came: there they answer nothing.
            self.out.extend([*([] if words is None else [words]), *entry.answers(done, None)])
        else:
            # The answers, then the user's words (in one message where the wire pairs so).
            self.out.extend(entry.answers(done, words))


def render_steps(wire: str, steps: list[Any]) -> list[Item]:
    render = Render(wire)
    render.out.append(render.user((["Hello"], False)))
    for step in steps:
        if len(step) == 2:
            render.out.append(render.user(step))
        else:
            render.turn(*step)
    return render.out


def flat(said: list[list[str]]) -> list[str]:
    return [word for words in said for word in words]


def user_words(messages: list[Item]) -> list[list[str]]:
    """What each user message says, in order (messages that say nothing left out)."""
    said = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("parts", message.get("content"))
        pieces = (
            [content]
            if isinstance(content, str)
            else [
                block["text"]
                for block in content or ()
                if isinstance(block.get("text"), str)
                and block.get("type", "text") in ("text", "input_text")
            ]
        )
        if any(pieces):
            said.append([p for p in pieces if p])
    return said


# Every registered wire, each with its share of the budget.
@settings(max_examples=60 * len(WIRES), deadline=None)
@given(wire=st.sampled_from(WIRES), steps=steps_strategy)
def test_any_repair_answers_every_call_and_keeps_every_word_the_user_wrote(
    wire: str, steps: list[Any]
) -> None:
    messages = render_steps(wire, steps)
    for mode in ("drop", "cancel"):
        repaired = repair_transcript(messages, mode)
        assert find_unanswered(repaired) == []
        if case(wire).alternates and transcript_wire(messages) is not None:
            # Two messages of one role in a row are joined: the same words, in order.
            roles = [m.get("role") for m in repaired]
            assert all(a != b for a, b in itertools.pairwise(roles)), roles
            assert flat(user_words(repaired)) == flat(user_words(messages))
        else:
            assert user_words(repaired) == user_words(messages)


# -- the loop answers as turn.tool_messages() does ------------------------------------------

RESULTS: list[object] = [
    {"city": "Paris", "temperature": 11},
    "sunny",
    [1, "two"],
    3,
    None,
    ValueError("no such city"),
]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("result", RESULTS, ids=["dict", "str", "list", "int", "None", "error"])
@pytest.mark.parametrize("resumed", [False, True], ids=["streamed", "resumed"])
def test_the_loop_answers_a_call_as_tool_messages_does(
    wire: str, result: object, resumed: bool
) -> None:
    question = user(wire, "Weather in Paris?")
    asking = call_turn(wire, ("c1", "weather", {"city": "Paris"}))
    asked = turn_of(asking)
    given = [question, *entries(asked)] if resumed else [question]
    script = Script(*([] if resumed else [asking]), prose_turn(wire, "11 C."))
    events = run(rt.agent_loop(script, {"weather": Tool(result)}, given))
    if not resumed:
        asked = next(e.assistant for e in events if isinstance(e, rt.TurnFinished))
    assert script.seen[-1] == [question, *entries(asked), *asked.tool_messages([result])]
    (finished,) = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert finished.error is result if isinstance(result, Exception) else finished.error is None


def test_a_gemini_tool_returning_a_dict_answers_with_that_object() -> None:
    script = Script(call_turn("gemini", ("c1", "weather", {})), prose_turn("gemini", "11 C."))
    weather = Tool({"city": "Paris", "temperature": 11})
    run(rt.agent_loop(script, {"weather": weather}, [user("gemini", "Weather?")]))
    (part,) = script.seen[1][-1]["parts"]
    assert part["functionResponse"]["response"] == {"city": "Paris", "temperature": 11}


@pytest.mark.parametrize("wire", WIRES)
def test_a_result_json_cannot_hold_is_answered_as_its_text(wire: str) -> None:
    when = datetime(2025, 1, 2, 3, 4, tzinfo=UTC)
    script = Script(call_turn(wire, ("c1", "now", {})), prose_turn(wire, "OK."))
    events = run(rt.agent_loop(script, {"now": Tool(when)}, [user(wire, "Time?")]))
    asked = next(e.assistant for e in events if isinstance(e, rt.TurnFinished))
    assert script.seen[1][2:] == asked.tool_messages([str(when)])
    assert finished_of(events) == [("now", str(when), False)]
