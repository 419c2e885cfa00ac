"""Calls complete before their turn (``rxtoolcalls._early``): when a safe tool may start.

Every wire's own recordings and built turns, cut at every event: a call is reported only once
nothing later can change it, and exactly as the close builds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

import rxtoolcalls as rt
from rxtoolcalls._early import EarlyCalls
from rxtoolcalls._reader import reader as make_reader
from rxtoolcalls.wires import names
from tests.helpers import args, call_open, content, extra, finish
from tests.wire_builders import (
    a_end,
    a_start,
    a_tool,
    case,
    g_call,
    g_response,
    g_stop,
    r_args_done,
    r_call,
    r_completed,
    r_created,
    r_fc_item,
)

ALL = frozenset({"weather", "time", "f", "lookup"})


def readiness(
    events: Sequence[Any], names: Iterable[str] = ALL, policy: rt.Policy = rt.DEFAULT
) -> list[tuple[int, rt.ToolCall]]:
    """Each call reported complete, with the position of the event after which it was."""
    watch = EarlyCalls(frozenset(names), policy)
    reader = make_reader(policy, on_open=watch.open)
    found: list[tuple[int, rt.ToolCall]] = []
    for at, event in enumerate(events):
        try:
            reader.feed(event)
        except rt.ToolCallStreamError:
            break
        found.extend((at, call) for call, _ in watch.ready(reader))
    return found


def closed_turn(events: Sequence[Any], policy: rt.Policy = rt.DEFAULT) -> rt.AssistantTurn | None:
    assembler = rt.Assembler(policy)
    try:
        for event in events:
            assembler.feed(event)
        return assembler.close()
    except rt.ToolCallStreamError:
        return None


WEATHER = (
    ("call_w", "weather", ['{"ci', 'ty": "Pa', 'ris"}']),
    ("call_t", "time", ['{"zone"', ': "CET"}']),
)


@pytest.mark.parametrize("wire", names())
def test_each_call_is_reported_once_before_the_turn_ends_as_the_close_builds_it(
    wire: str,
) -> None:
    events = case(wire).turn(["Let me check."], WEATHER)
    turn = closed_turn(events)
    assert turn is not None
    found = readiness(events)
    assert [call for _, call in found] == list(turn.tool_calls)
    # Both are complete before the turn's end (Gemini sends both in one part).
    assert found[0][0] <= found[1][0]
    assert found[0][0] < len(events) - 1
    if case(wire).arguments_as_text:
        # The first is complete while the second still streams.
        assert any('"CET"' in str(e) for e in events[found[0][0] + 1 :])


@pytest.mark.parametrize("wire", names())
def test_a_call_not_named_early_is_never_reported(wire: str) -> None:
    events = case(wire).turn((), WEATHER)
    assert [call.name for _, call in readiness(events, {"time"})] == ["time"]
    assert readiness(events, set()) == []


def _cases() -> list[tuple[str, str]]:
    return [(wire, name) for wire in names() for name in case(wire).recordings()]


@pytest.mark.parametrize(("wire", "name"), _cases())
def test_a_recording_cut_anywhere_reports_only_calls_the_whole_stream_completes(
    wire: str, name: str
) -> None:
    events = case(wire).load(name)
    policy = rt.LENIENT if closed_turn(events) is None else rt.DEFAULT
    whole = readiness(events, _named(events, policy), policy)
    complete = {(call.index, call.id): call for _, call in whole}
    turn = closed_turn(events, policy)
    if turn is not None:
        # What the whole stream reports is the turn's own calls, each once.
        assert len(complete) == len(whole)
        assert all(call in turn.tool_calls for call in complete.values())
    for cut in range(len(events)):
        for _, call in readiness(events[:cut], _named(events, policy), policy):
            assert complete[call.index, call.id] == call, (cut, call)


def _named(events: Sequence[Any], policy: rt.Policy) -> frozenset[str]:
    """Every call name the stream gives (from its turn, or a lenient one)."""
    turn = closed_turn(events, policy) or closed_turn(events, rt.LENIENT)
    return ALL | frozenset(call.name for call in turn.tool_calls) if turn else ALL


@pytest.mark.parametrize("wire", names())
def test_a_built_turn_cut_at_every_event_never_reports_a_cut_call(wire: str) -> None:
    events = case(wire).turn(["Hi."], WEATHER)
    whole = {call.index: call for _, call in readiness(events)}
    for cut in range(len(events) + 1):
        reported = readiness(events[:cut])
        assert all(whole[call.index] == call for _, call in reported)
    # A call cut off inside its value, then the ceiling: never reported.
    assert readiness(case(wire).cut() + case(wire).ceiling) == []


# -- Chat Completions: complete, and moved past -------------------------------------------


def test_chat_waits_for_a_fragment_of_another_call_or_the_finish() -> None:
    events = [
        call_open(0, "a", "f"),
        args(0, '{"q": 1}'),
        args(0, "  "),  # its own whitespace: not moving past it
        call_open(1, "b", "f"),
        args(1, '{"q": 2}'),
        finish("tool_calls"),
    ]
    assert [(at, call.id) for at, call in readiness(events)] == [(3, "a"), (5, "b")]


def test_chat_interleaved_calls_are_each_reported_when_the_other_moves_on() -> None:
    events = [
        call_open(0, "a", "f"),
        call_open(1, "b", "f"),
        args(0, '{"q":'),
        args(1, '{"r": 2}'),
        args(0, " 1}"),
        args(1, " "),
        finish("tool_calls"),
    ]
    assert [(at, call.id) for at, call in readiness(events)] == [(4, "b"), (5, "a")]


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param("}", id="a closing bracket too many"),
        pytest.param('{"q": 1}', id="the arguments sent again"),
        pytest.param(",", id="a comma"),
    ],
)
def test_chat_text_after_the_object_is_never_reported(tail: str) -> None:
    events = [
        call_open(0, "a", "f"),
        args(0, '{"q": 1}'),
        args(0, tail),
        call_open(1, "b", "g"),
        finish("tool_calls"),
    ]
    assert readiness(events) == []
    assert closed_turn(events) is None


def test_chat_a_value_that_is_no_object_or_breaks_a_rule_waits_for_the_close() -> None:
    for text in ("[1, 2]", '{"q": NaN}', '{"q": 1, "q": 2}'):
        events = [call_open(0, "a", "f"), args(0, text), finish("tool_calls")]
        policy = rt.DEFAULT if 'q": 1,' not in text else rt.Policy(reject_duplicate_keys=True)
        assert readiness(events, policy=policy) == [], text


def test_chat_a_name_that_comes_after_the_first_fragment_is_still_watched() -> None:
    events = [
        call_open(0, "a", None, '{"q"'),
        call_open(0, None, "f", ": 1}"),
        content("and more"),
        finish("tool_calls"),
    ]
    assert [call.name for _, call in readiness(events)] == ["f"]


def test_chat_arguments_against_the_declared_schema_wait_for_the_close() -> None:
    pytest.importorskip("jsonschema", reason=extra("schema"))
    schema = {"type": "object", "required": ["q"]}
    policy = rt.Policy(tools={"f": schema, "g": None}, validate_arguments=True)
    events = [call_open(0, "a", "f", "{}"), call_open(1, "b", "g", "{}"), finish("tool_calls")]
    assert [call.name for _, call in readiness(events, {"f", "g"}, policy)] == ["g"]
    assert closed_turn(events, policy) is None


# -- the wires that close each call --------------------------------------------------------


def test_responses_reports_a_call_at_its_arguments_done() -> None:
    events = [r_created(), *r_call(0, "call_w", "f", '{"q": 1}')]
    done = next(i for i, e in enumerate(events) if e["type"].endswith("arguments.done"))
    assert [at for at, _ in readiness(events)] == [done]


def test_responses_reports_a_call_that_only_its_item_closes() -> None:
    item = r_fc_item(0, "call_w", "f", '{"q": 1}')
    events = [
        r_created(),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "arguments": ""},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        r_completed([item]),
    ]
    assert [at for at, _ in readiness(events)] == [2]


def test_responses_a_done_that_differs_from_the_deltas_is_never_reported() -> None:
    events = [r_created(), *r_call(0, "call_w", "f", '{"q": 1}')[:-2], r_args_done(0, '{"x": 2}')]
    assert readiness(events) == []


def test_anthropic_reports_a_call_at_its_block_stop_not_at_its_last_bracket() -> None:
    events = [a_start(), *a_tool(0, "toolu_1", "f", '{"q": 1}'), *a_end()]
    stop = next(i for i, e in enumerate(events) if e["type"] == "content_block_stop")
    assert [at for at, _ in readiness(events)] == [stop]


def test_gemini_reports_a_whole_call_at_its_part_and_a_streamed_one_at_its_close() -> None:
    whole = [
        g_response(g_call("f", {"q": 1}, id="g1")),
        g_response(g_call("f", {"q": 2})),
        g_stop(),
    ]
    found = readiness(whole)
    assert [(at, call.parsed_arguments) for at, call in found] == [(0, {"q": 1}), (1, {"q": 2})]


def test_gemini_a_streamed_call_closed_only_by_the_finish_is_never_reported() -> None:
    events = case("gemini").cut()
    assert readiness([*events, g_stop()]) == []
