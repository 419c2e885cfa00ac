"""Responses and Anthropic streams that bend the wire: misplaced final outputs, events after the
end, type changes, junk fields. Each is one turn that holds or one typed error."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from tests.wire_builders import (
    a_end,
    a_piece,
    a_start,
    a_stop,
    a_tool,
    a_tool_open,
    case,
    per_wire,
    r_args_done,
    r_call,
    r_completed,
    r_delta,
    r_fc_added,
    r_fc_item,
    r_item_done,
    turn_of,
)


def every_path(events: list[Any], policy: Any = None) -> list[Any]:
    """The outcome of Assembler, assemble() and the four operators: turns or errors, as reprs."""
    outcomes: list[Any] = []
    try:
        assembler = rt.Assembler(policy)
        for event in events:
            assembler.feed(event)
        outcomes.append(assembler.close())
    except Exception as error:  # noqa: BLE001 - compared below
        outcomes.append(error)
    for pipeline in (
        (rt.assemble(policy),),
        (
            rt.group_by_index(policy),
            rt.concat_arguments(),
            rt.on_finish_reason(policy),
            rt.atomic_batch(policy),
        ),
    ):
        values: list[Any] = []
        errors: list[Exception] = []
        reactivex.from_iterable(events).pipe(*pipeline).subscribe(values.append, errors.append)
        outcomes.append(errors[0] if errors else values[0])
    return outcomes


def one_turn(events: list[Any], policy: Any = None) -> rt.AssistantTurn:
    outcomes = every_path(events, policy)
    for outcome in outcomes:
        assert isinstance(outcome, rt.AssistantTurn), outcome
    turns: list[rt.AssistantTurn] = outcomes
    assert len({repr(t.to_message()) for t in turns}) == 1
    return turns[0]


def one_error(events: list[Any], kind: type[Exception], policy: Any = None) -> None:
    for outcome in every_path(events, policy):
        assert type(outcome) is kind, repr(outcome)


OPEN_MESSAGE = {
    "type": "response.output_item.added",
    "output_index": 0,
    "item": {
        "type": "message",
        "id": "m",
        "role": "assistant",
        "content": [],
        "status": "in_progress",
    },
}


def text_delta(index: int, text: str) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "output_index": index,
        "content_index": 0,
        "delta": text,
    }


REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"}


def reasoning_then_call(output: list[dict[str, Any]]) -> list[Any]:
    return [
        {"type": "response.output_item.added", "output_index": 0, "item": REASONING},
        r_item_done(0, REASONING),
        *r_call(1, "call_1", "f", '{"a": 1}'),
        r_completed(output),
    ]


# -- Responses: the final output matched by call, not by list position ----------------------


def test_a_completed_output_without_the_reasoning_item_keeps_one_call_and_the_reasoning() -> None:
    turn = one_turn(reasoning_then_call([r_fc_item(1, "call_1", "f", '{"a": 1}')]))
    assert [(c.index, c.id) for c in turn.tool_calls] == [(1, "call_1")]
    items = turn.to_message()
    assert [item["type"] for item in items] == ["reasoning", "function_call"]
    assert items[0]["encrypted_content"] == "ENC"


def test_a_completed_output_in_full_is_read_by_position() -> None:
    call = r_fc_item(1, "call_1", "f", '{"a": 1}')
    turn = one_turn(reasoning_then_call([REASONING, call]))
    assert [(c.index, c.id, c.parsed_arguments) for c in turn.tool_calls] == [
        (1, "call_1", {"a": 1})
    ]


def test_a_single_call_at_index_one_listed_alone_in_completed_is_one_call() -> None:
    events = [
        *r_call(1, "call_1", "f", '{"a": 1}'),
        r_completed([r_fc_item(1, "call_1", "f", '{"a": 1}')]),
    ]
    assert [(c.index, c.id) for c in one_turn(events).tool_calls] == [(1, "call_1")]


def test_a_call_known_only_from_completed_output_still_opens() -> None:
    events = [r_completed([r_fc_item(0, "call_9", "g", '{"x": 2}')])]
    assert [(c.index, c.id, c.parsed_arguments) for c in one_turn(events).tool_calls] == [
        (0, "call_9", {"x": 2})
    ]


def test_a_completed_output_whose_call_contradicts_the_stream_is_malformed() -> None:
    events = [
        *r_call(0, "call_1", "f", '{"a": 1}'),
        r_completed([r_fc_item(0, "call_1", "f", '{"a": 2}')]),
    ]
    one_error(events, rt.MalformedChunkError)


# -- Responses: nothing after the end, nothing after a call's item is done -------------------


@pytest.mark.parametrize("piece", ["  ", "x"])
def test_a_delta_after_response_completed_is_malformed(piece: str) -> None:
    events = [
        *r_call(0, "call_1", "f", '{"a":1}'),
        r_completed([r_fc_item(0, "call_1", "f", '{"a":1}')]),
        r_delta(0, piece),
    ]
    one_error(events, rt.MalformedChunkError)
    tight = rt.Policy(limits=rt.Limits(max_call_arguments=8, max_turn_arguments=8))
    one_error(events, rt.MalformedChunkError, tight)


def test_a_delta_after_the_calls_item_is_done_is_malformed() -> None:
    events = [
        *r_call(0, "call_1", "f", '{"a":1}'),
        r_delta(0, " "),
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    ]
    one_error(events, rt.MalformedChunkError)


def test_a_message_item_cannot_turn_into_a_call() -> None:
    events = [
        OPEN_MESSAGE,
        text_delta(0, "hi"),
        r_item_done(0, r_fc_item(0, "call_1", "f", "{}")),
        r_completed([r_fc_item(0, "call_1", "f", "{}")]),
    ]
    one_error(events, rt.MalformedChunkError)


def test_text_for_an_index_never_opened_is_kept_as_content() -> None:
    events = [
        text_delta(5, "hi"),
        r_completed([]),
    ]
    assert one_turn(events).content == "hi"


def test_a_message_never_done_goes_back_with_its_streamed_text() -> None:
    events = [
        OPEN_MESSAGE,
        text_delta(0, "Paris."),
        *r_call(1, "call_1", "f", "{}"),
        r_completed([]),
    ]
    turn = one_turn(events)
    assert turn.content == "Paris."
    first = turn.to_message()[0]
    assert first["type"] == "message"
    assert [part["text"] for part in first["content"]] == ["Paris."]


BUILT = "built: text and two calls"


# -- limits and LENIENT on the final values ------------------------------------------------


def test_lenient_final_arguments_are_charged_to_the_turn() -> None:
    big = json.dumps({"b": "x" * 50})
    policy = dataclasses.replace(rt.LENIENT, limits=rt.Limits(max_turn_arguments=20))
    events = [
        r_fc_added(0, "call_1", "f"),
        r_delta(0, '{"b":1}'),
        r_args_done(0, big),
        r_item_done(0, r_fc_item(0, "call_1", "f", big)),
        r_completed([r_fc_item(0, "call_1", "f", big)]),
    ]
    one_error(events, rt.LimitExceededError, policy)


@pytest.mark.parametrize(("wire", "name"), per_wire(lambda entry: [BUILT, *entry.recordings()]))
def test_lenient_announces_names_as_default_does(wire: str, name: str) -> None:
    entry = case(wire)
    if name == BUILT:
        events = entry.turn(["Hi"], [("call_a", "f", ['{"a": ', "1}"]), ("call_b", "g", ["{}"])])
    else:
        events = entry.load(name)
    announced = []
    for policy in (None, "lenient"):
        # Announced once each, on the event that names it, under either policy.
        started: list[Any] = []
        reactivex.from_iterable(events).pipe(rt.progress(policy)).subscribe(
            started.append, lambda _: None
        )
        names = [e.name for e in started if isinstance(e, rt.ToolCallStarted)]
        assembler = rt.Assembler(policy)
        fed: list[str] = []
        try:
            for event in events:
                fed += [e.name for e in assembler.feed(event)]
        except rt.ToolCallStreamError:
            pass
        assert fed == names, policy
        announced.append(names)
    try:
        turn = turn_of(events)
    except rt.ToolCallStreamError:
        return  # refused by default: the lenient policy may take more
    assert announced[0] == announced[1] == [c.name for c in turn.tool_calls]


# -- Anthropic: junk in blocks is typed ---------------------------------------------------


@pytest.mark.parametrize(
    "block",
    [
        {"type": {}},
        {"type": [1]},
        {"type": "text", "text": 5},
        {"type": "text", "text": 1.5},
        {"type": "text", "text": [1]},
        {"type": "text", "text": 10**40},
        {"type": "thinking", "thinking": "", "signature": 7},
        {"type": "text", "text": "", "citations": "zz"},
    ],
    ids=repr,
)
def test_junk_in_a_content_block_is_malformed(block: dict[str, Any]) -> None:
    events = [
        a_start(),
        {"type": "content_block_start", "index": 0, "content_block": block},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "s"},
        }
        if block.get("type") == "thinking"
        else {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "citations_delta", "citation": {}}
            if "citations" in block
            else {"type": "text_delta", "text": "x"},
        },
        a_stop(0),
        *a_end("end_turn"),
    ]
    one_error(events, rt.MalformedChunkError)


@pytest.mark.parametrize("kind", [{}, [1]], ids=repr)
def test_a_responses_item_of_unhashable_type_is_malformed(kind: Any) -> None:
    item = {"type": kind, "id": "x"}
    one_error(
        [{"type": "response.output_item.added", "output_index": 0, "item": item}, r_completed([])],
        rt.MalformedChunkError,
    )
    one_error([r_completed([item])], rt.MalformedChunkError)


def test_a_tool_input_nested_past_the_parser_is_typed() -> None:
    deep: Any = {}
    for _ in range(100_000):
        deep = {"a": deep}
    block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": deep}
    events = [
        a_start(),
        {"type": "content_block_start", "index": 0, "content_block": block},
        a_stop(0),
        *a_end(),
    ]
    for outcome in every_path(events):
        assert isinstance(outcome, rt.ToolCallStreamError), repr(outcome)


def test_text_in_a_start_block_is_content_and_counted() -> None:
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": "Hello"},
    }
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": " world"},
    }
    events = [a_start(), start, delta, a_stop(0), *a_end("end_turn")]
    turn = one_turn(events)
    assert turn.content == "Hello world"
    assert turn.to_message()["content"][0]["text"] == "Hello world"
    one_error(events, rt.LimitExceededError, rt.Policy(limits=rt.Limits(max_text=8)))


def test_a_boolean_block_index_is_malformed_on_the_fast_path_too() -> None:
    events = [a_start(), a_tool_open(1, "toolu_1", "f"), a_piece(1, "{}"), a_stop(1), *a_end()]
    events[2] = {**events[2], "index": True}
    one_error(events, rt.MalformedChunkError)


def test_the_tool_block_builder_still_assembles() -> None:
    # The reference for the junk cases above: the same shapes, well formed, give one call.
    turn = one_turn([a_start(), *a_tool(0, "toolu_1", "f", '{"a": 1}'), *a_end()])
    assert [(c.id, c.parsed_arguments) for c in turn.tool_calls] == [("toolu_1", {"a": 1})]
