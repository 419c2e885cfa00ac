"""find_unanswered and repair_transcript on the Responses, Anthropic and Gemini shapes.

The properties at the end run on every registered wire's shape (tests/wire_builders.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rxtoolcalls as rt
from rxtoolcalls.transcript import (
    CANCELLED,
    find_unanswered,
    repair_transcript,
    transcript_wire,
)
from rxtoolcalls.wires import names
from tests.wire_builders import CASES, case, g_call, g_response, g_stop, load_wire, r_fc_item

Item = dict[str, Any]
USER: Item = {"role": "user", "content": "weather in Paris and Rome?"}


def turn_of(events: list[Any]) -> rt.AssistantTurn:
    assembler = rt.Assembler()
    for event in events:
        assembler.feed(event)
    return assembler.close()


# -- Responses ------------------------------------------------------------------------------

REASONING: Item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"}


def r_output(call_id: str, output: str = "sunny") -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def responses_broken() -> list[Item]:
    """Turn 1 answered; turn 2 (reasoning + two calls) has one answer of two."""
    return [
        USER,
        r_fc_item(0, "call_1", "weather", '{"city": "Paris"}'),
        r_output("call_1"),
        REASONING,
        r_fc_item(1, "call_2", "weather", '{"city": "Rome"}'),
        r_fc_item(2, "call_3", "weather", '{"city": "Oslo"}'),
        r_output("call_2"),
    ]


def test_responses_shape_is_detected() -> None:
    assert transcript_wire(responses_broken()) == "responses"
    assert transcript_wire([USER]) is None


def test_responses_unanswered_calls_by_call_id() -> None:
    assert find_unanswered(responses_broken()) == [(3, ["call_3"])]


def test_responses_drop_removes_the_whole_turn_and_its_answers() -> None:
    repaired = repair_transcript(responses_broken())
    # The reasoning item goes too: the API refuses one without the item it preceded.
    assert repaired == responses_broken()[:3]
    assert find_unanswered(repaired) == []


def test_responses_cancel_fills_the_missing_output() -> None:
    repaired = repair_transcript(responses_broken(), "cancel")
    assert repaired[:6] == responses_broken()[:6]
    assert repaired[6] == {"type": "function_call_output", "call_id": "call_3", "output": CANCELLED}
    assert repaired[7] == r_output("call_2")
    assert find_unanswered(repaired) == []


def test_responses_custom_call_is_cancelled_with_its_own_output_type() -> None:
    custom = {"type": "custom_tool_call", "call_id": "call_c", "name": "patch", "input": "-x"}
    repaired = repair_transcript([USER, custom], "cancel")
    assert repaired[-1] == {
        "type": "custom_tool_call_output",
        "call_id": "call_c",
        "output": CANCELLED,
    }
    assert find_unanswered([USER, custom]) == [(1, ["call_c"])]


def test_responses_answers_to_no_call_and_second_answers_are_dropped() -> None:
    items = [
        USER,
        r_output("call_ghost"),
        r_fc_item(0, "call_1", "weather", "{}"),
        r_output("call_1"),
        r_output("call_1", "again"),
    ]
    assert repair_transcript(items) == items[:1] + items[2:4]


def test_responses_valid_transcript_from_the_loop_is_unchanged() -> None:
    turn = turn_of(load_wire("responses", "pydantic-ai__server_tool_search_then_call"))
    items = [USER, *turn.exchange(["1.08"])]
    assert find_unanswered(items) == []
    assert repair_transcript(items) == items
    assert repair_transcript(items, "cancel") == items
    # Cut after the turn (someone appended it, then stopped): its server items go with it.
    cut = [USER, *turn.to_message()]
    assert find_unanswered(cut) == [(1, [turn.tool_calls[0].id])]
    assert repair_transcript(cut) == [USER]


# -- Anthropic ------------------------------------------------------------------------------


def tool_use(call_id: str, name: str = "weather") -> Item:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"city": call_id}}


def tool_result(call_id: str, content: str = "sunny") -> Item:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def anthropic_broken() -> list[Item]:
    return [
        USER,
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, tool_use("a")]},
        {"role": "user", "content": [tool_result("a")]},
        {"role": "assistant", "content": [tool_use("b"), tool_use("c")]},
        {"role": "user", "content": [tool_result("b"), {"type": "text", "text": "and?"}]},
    ]


def test_anthropic_shape_is_detected() -> None:
    assert transcript_wire(anthropic_broken()) == "anthropic"


def test_anthropic_unanswered_tool_use_blocks() -> None:
    assert find_unanswered(anthropic_broken()) == [(3, ["c"])]
    # The results must be in the very next user message.
    late = [
        USER,
        {"role": "assistant", "content": [tool_use("a")]},
        {"role": "assistant", "content": [{"type": "text", "text": "hm"}]},
        {"role": "user", "content": [tool_result("a")]},
    ]
    assert find_unanswered(late) == [(1, ["a"])]


def test_anthropic_drop_removes_the_turn_and_its_results_keeps_the_text() -> None:
    repaired = repair_transcript(anthropic_broken())
    assert repaired == [
        *anthropic_broken()[:3],
        {"role": "user", "content": [{"type": "text", "text": "and?"}]},
    ]
    assert find_unanswered(repaired) == []


def test_anthropic_cancel_adds_an_error_result_after_the_others() -> None:
    repaired = repair_transcript(anthropic_broken(), "cancel")
    assert repaired[:4] == anthropic_broken()[:4]
    assert repaired[4]["content"] == [
        tool_result("b"),
        {"type": "tool_result", "tool_use_id": "c", "content": CANCELLED, "is_error": True},
        {"type": "text", "text": "and?"},
    ]
    assert find_unanswered(repaired) == []


def test_anthropic_cancel_at_the_end_adds_a_user_message() -> None:
    messages = [USER, {"role": "assistant", "content": [tool_use("a")]}]
    assert find_unanswered(messages) == [(1, ["a"])]
    assert repair_transcript(messages) == [USER]
    assert repair_transcript(messages, "cancel")[-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": CANCELLED, "is_error": True}
        ],
    }


def test_anthropic_results_to_no_call_are_dropped() -> None:
    messages = [
        USER,
        {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
        {"role": "user", "content": [tool_result("ghost")]},
        {"role": "user", "content": [tool_result("ghost"), {"type": "text", "text": "x"}]},
    ]
    assert repair_transcript(messages) == [
        *messages[:2],
        {"role": "user", "content": [{"type": "text", "text": "x"}]},
    ]


def test_anthropic_valid_transcript_from_the_loop_is_unchanged() -> None:
    turn = turn_of(load_wire("anthropic", "pydantic-ai__server_tool_search_then_tool_use"))
    messages = [USER, *turn.exchange([ValueError("no rate")])]
    assert messages[-1]["content"][0]["is_error"] is True
    assert find_unanswered(messages) == []
    assert repair_transcript(messages) == messages
    assert repair_transcript(messages, "cancel") == messages
    # Server tool blocks are answered inside the turn: alone they need nothing.
    server_only = [USER, {"role": "assistant", "content": list(turn.items[:3])}]
    assert find_unanswered(server_only) == []


# -- Gemini ---------------------------------------------------------------------------------

G_USER: Item = {"role": "user", "parts": [{"text": "weather in Paris and Rome?"}]}


def g_call_part(name: str, call_id: str | None = None) -> Item:
    call: Item = {"name": name, "args": {"city": name}}
    if call_id is not None:
        call["id"] = call_id
    return {"functionCall": call}


def g_answer(name: str, call_id: str | None = None, output: str = "sunny") -> Item:
    answer: Item = {"name": name}
    if call_id is not None:
        answer["id"] = call_id
    answer["response"] = {"output": output}
    return {"functionResponse": answer}


def g_cancelled(name: str, call_id: str | None = None) -> Item:
    answer: Item = {"name": name}
    if call_id is not None:
        answer["id"] = call_id
    answer["response"] = {"error": CANCELLED}
    return {"functionResponse": answer}


def gemini_broken() -> list[Item]:
    """Turn 1 (no ids) answered; turn 2 (ids b, c) has the answer to c only, then text."""
    return [
        G_USER,
        {"role": "model", "parts": [{"text": "Looking."}, g_call_part("paris")]},
        {"role": "user", "parts": [g_answer("paris")]},
        {"role": "model", "parts": [g_call_part("rome", "b"), g_call_part("oslo", "c")]},
        {"role": "user", "parts": [g_answer("oslo", "c"), {"text": "and?"}]},
    ]


def test_gemini_shape_is_detected() -> None:
    assert transcript_wire(gemini_broken()) == "gemini"
    assert transcript_wire([G_USER, {"role": "model", "parts": [{"text": "Hi."}]}]) == "gemini"
    assert transcript_wire([G_USER]) is None  # nothing to tell: no wire, nothing to pair
    assert repair_transcript([G_USER], "cancel") == [G_USER]


def test_gemini_unanswered_calls_by_id_else_by_name_in_order() -> None:
    assert find_unanswered(gemini_broken()) == [(3, ["b"])]
    # Without ids, answers go to the calls of their name in order: the second f is open.
    twice = [
        G_USER,
        {"role": "model", "parts": [g_call_part("f"), g_call_part("g"), g_call_part("f")]},
        {"role": "user", "parts": [g_answer("g"), g_answer("f")]},
    ]
    assert find_unanswered(twice) == [(1, ["f"])]
    both_f = [*twice[:2], {"role": "user", "parts": [g_answer("f"), g_answer("f")]}]
    assert find_unanswered(both_f) == [(1, ["g"])]
    # An answer quoting another id answers nothing, whatever its name.
    wrong = [G_USER, {"role": "model", "parts": [g_call_part("f", "x")]}]
    assert find_unanswered([*wrong, {"role": "user", "parts": [g_answer("f", "y")]}]) == [
        (1, ["x"])
    ]
    # The answers must be in the very next content.
    late = [
        G_USER,
        {"role": "model", "parts": [g_call_part("f", "a")]},
        {"role": "model", "parts": [{"text": "hm"}]},
        {"role": "user", "parts": [g_answer("f", "a")]},
    ]
    assert find_unanswered(late) == [(1, ["a"])]


def test_gemini_drop_removes_the_turn_and_its_answers_keeps_the_text() -> None:
    repaired = repair_transcript(gemini_broken())
    assert repaired == [*gemini_broken()[:3], {"role": "user", "parts": [{"text": "and?"}]}]
    assert find_unanswered(repaired) == []


def test_gemini_cancel_puts_every_answer_in_call_order_in_one_content() -> None:
    repaired = repair_transcript(gemini_broken(), "cancel")
    assert repaired[:4] == gemini_broken()[:4]
    assert repaired[4] == {
        "role": "user",
        "parts": [g_cancelled("rome", "b"), g_answer("oslo", "c"), {"text": "and?"}],
    }
    assert len(repaired) == 5
    assert find_unanswered(repaired) == []


def test_gemini_cancel_at_the_end_adds_a_user_content() -> None:
    messages = [G_USER, {"role": "model", "parts": [g_call_part("f"), g_call_part("g", "i")]}]
    assert find_unanswered(messages) == [(1, ["f", "i"])]
    assert repair_transcript(messages) == [G_USER]
    assert repair_transcript(messages, "cancel") == [
        *messages,
        {"role": "user", "parts": [g_cancelled("f"), g_cancelled("g", "i")]},
    ]
    # A content without parts right after the calls answers nothing: the answers go before it.
    odd = {"role": "user"}
    assert repair_transcript([*messages, odd], "cancel") == [
        *messages,
        {"role": "user", "parts": [g_cancelled("f"), g_cancelled("g", "i")]},
        odd,
    ]


def test_gemini_answers_to_no_call_and_second_answers_are_dropped() -> None:
    messages = [
        G_USER,
        {"role": "model", "parts": [{"text": "Hi."}]},
        {"role": "user", "parts": [g_answer("ghost")]},
        {"role": "model", "parts": [g_call_part("f", "a")]},
        {"role": "user", "parts": [g_answer("f", "a"), g_answer("f", "a", "again")]},
    ]
    assert repair_transcript(messages) == [
        *messages[:2],
        *messages[3:4],
        {"role": "user", "parts": [g_answer("f", "a")]},
    ]


def test_gemini_valid_transcript_from_the_loop_is_unchanged() -> None:
    for events in (
        load_wire("gemini", "pydantic-ai__whole_call_with_id_gemini3_flash"),
        load_wire("gemini", "vercel-ai__partial_args_parallel_and_no_args"),
        [g_response(g_call("f", {"a": 1}), g_call("f", {"a": 2})), g_stop()],
    ):
        turn = turn_of(events)
        results: list[object] = [ValueError("no rate"), *range(len(turn.tool_calls) - 1)]
        messages = [G_USER, *turn.exchange(results)]
        assert find_unanswered(messages) == []
        assert repair_transcript(messages) == messages
        assert repair_transcript(messages, "cancel") == messages
        # Cut after the turn (someone appended it, then stopped): it goes, signatures and all.
        cut = [G_USER, turn.to_message()]
        assert len(find_unanswered(cut)[0][1]) == len(turn.tool_calls)
        assert repair_transcript(cut) == [G_USER]


# -- shape errors ---------------------------------------------------------------------------


def test_mixed_shapes_are_a_value_error() -> None:
    chat_tool = {"role": "tool", "tool_call_id": "a", "content": "x"}
    with pytest.raises(ValueError, match="mix the shapes"):
        find_unanswered([*responses_broken(), chat_tool])
    with pytest.raises(ValueError, match="mix the shapes"):
        repair_transcript([*anthropic_broken(), r_output("x")])


def test_an_entry_that_is_not_a_mapping_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="message 1 is a str"):
        repair_transcript([USER, "hello"])  # type: ignore[list-item]


# -- properties: any broken transcript, on any wire -----------------------------------------

# A round: for each call, whether it was answered; whether an answer to no call follows.
Round = tuple[list[bool], bool]


def render(wire: str, rounds: list[Round]) -> list[Item]:
    """A transcript of ``rounds`` in the shape of ``wire`` (its entry in the table of
    tests/wire_builders.py); call ids are unique."""
    entry = case(wire)
    out: list[Item] = [entry.user(["weather in Paris and Rome?"], False)]
    for number, (answered, orphan) in enumerate(rounds):
        ids = [f"call_{number}_{i}" for i in range(len(answered))]
        # Where a call may come without an id (Gemini 2.5 sends none), every other one has
        # none: those match by name.
        named = [
            (None if entry.optional_ids and i % 2 else call_id, f"f{i % 2}")
            for i, call_id in enumerate(ids)
        ]
        out.extend(entry.asked(f"t{number}", named))
        done = [call for call, yes in zip(named, answered, strict=True) if yes]
        if orphan:
            done.append((f"ghost_{number}", "f0"))
        out.extend(entry.answers(done, entry.user(["next"], False)))
    return out


rounds_strategy = st.lists(
    st.tuples(st.lists(st.booleans(), max_size=3), st.booleans()), min_size=1, max_size=4
)


# Every registered wire, each with its share of the budget.
@settings(max_examples=50 * len(names()), deadline=None)
@given(wire=st.sampled_from(names()), rounds=rounds_strategy)
def test_any_repair_leaves_nothing_unanswered_and_is_stable(wire: str, rounds: list[Round]) -> None:
    messages = render(wire, rounds)
    found = find_unanswered(messages)
    assert len(found) == sum(not all(answered) for answered, _ in rounds)
    assert sum(len(ids) for _, ids in found) == sum(a.count(False) for a, _ in rounds)
    for mode in ("drop", "cancel"):
        repaired = repair_transcript(messages, mode)
        assert find_unanswered(repaired) == []
        assert repair_transcript(repaired, mode) == repaired
        assert messages == render(wire, rounds)  # the input is never changed
    valid = render(wire, [([True] * len(answered), False) for answered, _ in rounds])
    assert repair_transcript(valid) == valid
    assert repair_transcript(valid, "cancel") == valid
    # Cancelling keeps every call; dropping keeps exactly the calls of complete turns.
    kept = sum(len(a) for a, _ in rounds if all(a))
    total = sum(len(a) for a, _ in rounds)
    calls_in = case(wire).calls_in
    assert calls_in(repair_transcript(messages)) == kept
    assert calls_in(repair_transcript(messages, "cancel")) == total


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*map(_keys, value.values()))
    if isinstance(value, list):
        return set().union(*map(_keys, value))
    return set()


_FIELDS = ["role", "type", "content", "id", "call_id", "tool_use_id", "tool_call_id"]
# Every field a registered wire's transcript has (those with no entry fail elsewhere).
_WIRE_FIELDS = sorted(
    set().union(*(_keys(render(w, [([True, False], True)])) for w in names() if w in CASES))
    - set(_FIELDS)
)
_WORDS = st.sampled_from(
    [
        *("user", "assistant", "tool", "function_call", "function_call_output", "tool_use"),
        *("tool_result", "custom_tool_call", "message", "text", "a", "model"),
    ]
)
_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _WORDS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from([*_FIELDS, *_WIRE_FIELDS]), inner, max_size=4),
    ),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from([*_FIELDS, *_WIRE_FIELDS]), _VALUES, max_size=5),
        max_size=6,
    )
)
def test_any_mapping_gives_an_answer_or_a_value_error(messages: list[Item]) -> None:
    try:
        transcript_wire(messages)
    except ValueError:
        with pytest.raises(ValueError, match="mix the shapes"):
            repair_transcript(messages)
        return
    find_unanswered(messages)
    for mode in ("drop", "cancel"):
        assert find_unanswered(repair_transcript(messages, mode)) == []
