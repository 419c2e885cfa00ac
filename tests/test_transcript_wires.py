"""find_unanswered and repair_transcript on the Responses and Anthropic shapes."""

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
from tests.wire_builders import load_wire, r_fc_item

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
    assert transcript_wire([USER]) == "chat"


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
    """A transcript of ``rounds`` in the shape of ``wire``; call ids are unique."""
    out: list[Item] = [dict(USER)]
    for number, (answered, orphan) in enumerate(rounds):
        ids = [f"call_{number}_{i}" for i in range(len(answered))]
        done = [call_id for call_id, yes in zip(ids, answered, strict=True) if yes]
        stray = f"ghost_{number}"
        if wire == "chat":
            calls = [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ids
            ]
            out.append(
                {"role": "assistant", "content": None, **({"tool_calls": calls} if ids else {})}
            )
            out.extend({"role": "tool", "tool_call_id": i, "content": "r"} for i in done)
            if orphan:
                out.append({"role": "tool", "tool_call_id": stray, "content": "r"})
            out.append({"role": "user", "content": "next"})
        elif wire == "responses":
            out.append({**REASONING, "id": f"rs_{number}"})
            out.extend(r_fc_item(n, i, "f", "{}") for n, i in enumerate(ids))
            out.extend(r_output(i) for i in done)
            if orphan:
                out.append(r_output(stray))
            out.append({"role": "user", "content": "next"})
        else:
            out.append(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "t"}, *map(tool_use, ids)],
                }
            )
            results = [*map(tool_result, done), *([tool_result(stray)] if orphan else [])]
            out.append({"role": "user", "content": [*results, {"type": "text", "text": "next"}]})
    return out


rounds_strategy = st.lists(
    st.tuples(st.lists(st.booleans(), max_size=3), st.booleans()), min_size=1, max_size=4
)


@settings(max_examples=200, deadline=None)
@given(wire=st.sampled_from(["chat", "responses", "anthropic"]), rounds=rounds_strategy)
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
    assert calls_in(wire, repair_transcript(messages)) == kept
    assert calls_in(wire, repair_transcript(messages, "cancel")) == total


def calls_in(wire: str, messages: list[Item]) -> int:
    if wire == "chat":
        return sum(len(m.get("tool_calls") or ()) for m in messages)
    if wire == "responses":
        return sum(m.get("type") == "function_call" for m in messages)
    return sum(
        b.get("type") == "tool_use"
        for m in messages
        for b in m.get("content") or ()
        if isinstance(b, dict)
    )


_FIELDS = ["role", "type", "content", "id", "call_id", "tool_use_id", "tool_call_id"]
_WORDS = st.sampled_from(
    [
        *("user", "assistant", "tool", "function_call", "function_call_output", "tool_use"),
        *("tool_result", "custom_tool_call", "message", "text", "a"),
    ]
)
_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _WORDS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from([*_FIELDS, "tool_calls", "input"]), inner, max_size=4),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from([*_FIELDS, "tool_calls"]), _VALUES, max_size=5),
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
