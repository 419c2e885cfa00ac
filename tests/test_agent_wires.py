"""The agent loop on the Responses and Anthropic wires: the same loop, each wire's transcript.

The last section runs the same loop on every registered wire.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.wires import names
from tests.helpers import Script, extra
from tests.wire_builders import (
    PING,
    a_end,
    a_piece,
    a_start,
    a_text,
    a_tool,
    a_tool_open,
    case,
    load_wire,
    pieces,
    r_call,
    r_completed,
    r_created,
    r_fc_item,
    r_message,
)

USER: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]


class Calls:
    """A tool that records every call it gets."""

    def __init__(self, result: object = "ok") -> None:
        self.seen: list[Any] = []
        self.result = result

    def __call__(self, *args: Any, **kwargs: Any) -> object:
        self.seen.append(args[0] if args else kwargs)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def events_of(loop: Any) -> list[Any]:
    values: list[Any] = loop.pipe(ops.to_list()).run()
    return values


def failure_of(loop: Any) -> Exception:
    errors: list[Exception] = []
    loop.subscribe(on_error=errors.append)
    assert len(errors) == 1
    return errors[0]


# -- Responses ------------------------------------------------------------------------------


def r_turn(*calls: tuple[int, str, str, str]) -> list[dict[str, Any]]:
    """A whole Responses turn of function calls: (output_index, call_id, name, arguments)."""
    events = [r_created()]
    for index, call_id, name, arguments in calls:
        events.extend(r_call(index, call_id, name, arguments))
    events.append(r_completed([r_fc_item(*call) for call in calls]))
    return events


def r_answer(text: str = "Done.") -> list[dict[str, Any]]:
    message = r_message(0, text)
    return [r_created(), *message, r_completed([message[-1]["item"]])]


def test_responses_rounds_send_items_and_outputs_back() -> None:
    weather = Calls({"temp": 11})
    stock = Calls("189.98 USD")
    script = Script(
        r_turn((0, "call_w", "weather", '{"city": "Paris"}'), (1, "call_s", "stock", '{"t": "A"}')),
        r_turn((0, "call_w2", "weather", '{"city": "Rome"}')),
        r_answer("11 C in Paris, AAPL 189.98."),
    )
    events = events_of(rt.agent_loop(script, {"weather": weather, "stock": stock}, USER))
    conversation = events[-1]
    assert isinstance(conversation, rt.Conversation)
    assert conversation.turns == 3
    assert conversation.final.wire == "responses"
    assert conversation.final.content == "11 C in Paris, AAPL 189.98."
    assert weather.seen == [{"city": "Paris"}, {"city": "Rome"}]
    assert stock.seen == [{"t": "A"}]
    second = script.seen[1]
    assert second[0] == USER[0]
    assert [(e["type"], e["call_id"]) for e in second[1:]] == [
        ("function_call", "call_w"),
        ("function_call", "call_s"),
        ("function_call_output", "call_w"),
        ("function_call_output", "call_s"),
    ]
    assert second[1]["arguments"] == '{"city": "Paris"}'
    assert [e.get("output") for e in second[3:]] == ['{"temp": 11}', "189.98 USD"]
    # The last request carries the whole input so far; the final turn's item ends it.
    assert len(script.seen[2]) == 7
    assert conversation.messages[-1]["type"] == "message"
    assert conversation.messages[:-1] == tuple(script.seen[2])


def test_responses_custom_tool_gets_its_raw_text() -> None:
    patch = "*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = {2\n*** End Patch"
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "apply_patch"}
    custom = [
        r_created(),
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "input": "", "status": "in_progress"},
        },
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": patch[:9]},
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": patch[9:]},
        {"type": "response.custom_tool_call_input.done", "output_index": 0, "input": patch},
        r_completed([{**item, "input": patch, "status": "completed"}]),
    ]
    apply_patch = Calls("applied")
    script = Script(custom, r_answer())
    events = events_of(rt.agent_loop(script, {"apply_patch": apply_patch}, USER))
    assert apply_patch.seen == [patch]  # positional, never JSON-parsed
    finished = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert [(f.call.type, f.content, f.error) for f in finished] == [("custom", "applied", None)]
    assert script.seen[1][-2]["input"] == patch
    assert script.seen[1][-1] == {
        "type": "custom_tool_call_output",
        "call_id": "call_c",
        "output": "applied",
    }


def test_responses_server_items_go_back_and_are_never_dispatched() -> None:
    rate = Calls("1.08")
    search = Calls()
    script = Script(load_wire("responses", "pydantic-ai__server_tool_search_then_call"), r_answer())
    tools = {"get_exchange_rate": rate, "tool_search": search}
    conversation = events_of(rt.agent_loop(script, tools, USER))[-1]
    assert len(rate.seen) == 1
    assert search.seen == []
    assert [e.get("type") for e in script.seen[1][1:]] == [
        "tool_search_call",
        "tool_search_output",
        "function_call",
        "function_call_output",
    ]
    assert conversation.turns == 2


def test_responses_turn_with_only_server_items_ends_the_loop() -> None:
    apply_patch = Calls()
    script = Script(load_wire("responses", "vercel-ai__apply_patch_call_diff_deltas"))
    conversation = events_of(rt.agent_loop(script, {"apply_patch": apply_patch}, USER))[-1]
    assert apply_patch.seen == []
    assert conversation.turns == 1
    assert len(script.seen) == 1
    assert conversation.messages[-1]["type"] == "apply_patch_call"


def test_responses_cut_turn_is_retried_and_its_tool_runs_once() -> None:
    weather = Calls("sunny")
    whole = r_turn((0, "call_w", "weather", '{"city": "Paris"}'))
    cut = whole[:4]  # no response.completed: the connection dropped
    script = Script(cut, whole, r_answer())
    events = events_of(rt.agent_loop(script, {"weather": weather}, USER, backoff=0))
    retried = [e for e in events if isinstance(e, rt.TurnRetried)]
    assert [(r.turn, r.attempt) for r in retried] == [(1, 1)]
    assert isinstance(retried[0].error, rt.StreamInterruptedError)
    assert weather.seen == [{"city": "Paris"}]
    assert script.seen[1] == USER  # the retry sends the same input
    assert events[-1].turns == 2


def test_responses_tool_raising_becomes_an_output_the_model_reads() -> None:
    script = Script(r_turn((0, "call_w", "weather", "{}")), r_answer())
    broken = Calls(RuntimeError("no network"))
    events = events_of(rt.agent_loop(script, {"weather": broken}, USER))
    assert script.seen[1][-1] == {
        "type": "function_call_output",
        "call_id": "call_w",
        "output": "RuntimeError: no network",
    }
    assert isinstance(events[-1], rt.Conversation)


def test_responses_turn_limit() -> None:
    script = Script(r_turn((0, "call_w", "weather", "{}")))
    error = failure_of(rt.agent_loop(script, {"weather": Calls()}, USER, max_turns=2))
    assert isinstance(error, rt.TurnLimitError)
    assert len(script.seen) == 2


def test_responses_calls_answered_in_the_given_input_are_not_run_again() -> None:
    # The input stops in a turn, one call answered: only the other runs, before any request.
    earlier = [
        *USER,
        r_fc_item(0, "call_pay", "pay", '{"amount": 5}'),
        r_fc_item(1, "call_tip", "pay", '{"amount": 1}'),
        {"type": "function_call_output", "call_id": "call_pay", "output": "paid earlier"},
    ]
    pay = Calls()
    script = Script(r_answer())
    events = events_of(rt.agent_loop(script, {"pay": pay}, earlier))
    assert pay.seen == [{"amount": 1}]
    finished = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert [(f.content, f.reused) for f in finished] == [("paid earlier", True), ("ok", False)]
    output = {"type": "function_call_output", "call_id": "call_tip", "output": "ok"}
    assert script.seen[0] == [*earlier, output]


def test_responses_sdk_events_run_the_loop() -> None:
    pytest.importorskip("openai", reason=extra("openai"))
    from openai._models import construct_type
    from openai.types.responses import ResponseStreamEvent

    def typed(events: list[dict[str, Any]]) -> list[Any]:
        return [construct_type(type_=ResponseStreamEvent, value=e) for e in events]

    weather = Calls("sunny")
    script = Script(typed(r_turn((0, "call_w", "weather", '{"city": "Oslo"}'))), typed(r_answer()))
    conversation = events_of(rt.agent_loop(script, {"weather": weather}, USER))[-1]
    assert weather.seen == [{"city": "Oslo"}]
    assert [e.get("type") for e in script.seen[1][1:]] == ["function_call", "function_call_output"]
    assert conversation.final.content == "Done."


# -- Anthropic ------------------------------------------------------------------------------


def a_turn(*calls: tuple[int, str, str, str], text: str | None = None) -> list[dict[str, Any]]:
    """A whole Anthropic turn: optional text at block 0, then tool_use blocks."""
    events = [a_start()]
    if text is not None:
        events.extend(a_text(0, text))
    for index, call_id, name, arguments in calls:
        events.extend(a_tool(index, call_id, name, arguments))
    events.extend(a_end("tool_use"))
    return events


def a_answer(text: str = "Done.", stop_reason: str = "end_turn") -> list[dict[str, Any]]:
    return [a_start(), *a_text(0, text), *a_end(stop_reason)]


def test_anthropic_rounds_send_blocks_and_tool_results_back() -> None:
    weather = Calls({"temp": 11})
    script = Script(
        a_turn((1, "toolu_a", "weather", '{"city": "Paris"}'), text="Let me look."),
        a_turn((0, "toolu_b", "weather", '{"city": "Rome"}')),
        a_answer("Paris 11, Rome 11."),
    )
    conversation = events_of(rt.agent_loop(script, {"weather": weather}, USER))[-1]
    assert weather.seen == [{"city": "Paris"}, {"city": "Rome"}]
    assistant, results = script.seen[1][1:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {"city": "Paris"}},
        ],
    }
    assert results == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": '{"temp": 11}'}],
    }
    assert [m["role"] for m in conversation.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert conversation.messages[-1]["content"] == [{"type": "text", "text": "Paris 11, Rome 11."}]
    assert conversation.final.finish_reason == "end_turn"


@pytest.mark.parametrize("stop_reason", ["end_turn", "stop_sequence"])
def test_anthropic_prose_stops_end_the_loop(stop_reason: str) -> None:
    script = Script(a_answer("Hello.", stop_reason))
    conversation = events_of(rt.agent_loop(script, {}, USER))[-1]
    assert conversation.turns == 1
    assert conversation.final.finish_reason == stop_reason


def test_anthropic_real_parallel_tool_use_is_dispatched() -> None:
    events = load_wire("anthropic", "openllmetry__text_then_parallel_tool_use")
    turn = rt.Assembler()
    for event in events:
        turn.feed(event)
    asked = turn.close().tool_calls
    assert len(asked) >= 2
    tools = {name: Calls(f"{name} done") for name in {c.name for c in asked}}
    script = Script(events, a_answer())
    rt.agent_loop(script, tools, USER).pipe(ops.to_list()).run()
    assert sum(len(tool.seen) for tool in tools.values()) == len(asked)
    results = script.seen[1][-1]["content"]
    assert [b["tool_use_id"] for b in results] == [c.id for c in asked]


def test_anthropic_pause_turn_is_continued_without_dispatching() -> None:
    paused = load_wire("anthropic", "pydantic-ai__pause_turn_server_web_search")
    search = Calls()
    script = Script(paused, a_answer("Here is what I found."))
    events = events_of(rt.agent_loop(script, {"web_search": search}, USER))
    conversation = events[-1]
    first = next(e for e in events if isinstance(e, rt.TurnFinished)).assistant
    assert first.needs_continuation
    assert search.seen == []
    assert not [e for e in events if isinstance(e, rt.ToolCallFinished)]
    # The paused content goes back as the last message, unanswered: the model goes on from it.
    assert script.seen[1] == [*USER, first.to_message()]
    assert script.seen[1][-1]["content"][-1]["type"] == "server_tool_use"
    assert conversation.turns == 2
    assert conversation.final.finish_reason == "end_turn"
    assert [m["role"] for m in conversation.messages] == ["user", "assistant", "assistant"]


def test_anthropic_pause_then_tools_then_prose() -> None:
    paused = [a_start(), *a_text(0, "Searching…"), *a_end("pause_turn")]
    weather = Calls("sunny")
    script = Script(paused, a_turn((0, "toolu_w", "weather", "{}")), a_answer())
    conversation = events_of(rt.agent_loop(script, {"weather": weather}, USER))[-1]
    assert len(weather.seen) == 1
    assert conversation.turns == 3
    assert [m["role"] for m in script.seen[2]] == ["user", "assistant", "assistant", "user"]


def test_anthropic_endless_pause_is_a_turn_limit() -> None:
    paused = [a_start(), *a_text(0, "Still searching…"), *a_end("pause_turn")]
    script = Script(paused)
    error = failure_of(rt.agent_loop(script, {}, USER, max_turns=3))
    assert isinstance(error, rt.TurnLimitError)
    assert "paused" in str(error)
    assert len(script.seen) == 3


def test_anthropic_tool_raising_is_marked_is_error() -> None:
    script = Script(
        a_turn((0, "toolu_ok", "fine", "{}"), (1, "toolu_bad", "broken", '{"x": 1}')),
        a_answer(),
    )
    tools = {"fine": Calls("42"), "broken": Calls(ValueError("bad x"))}
    events = events_of(rt.agent_loop(script, tools, USER))
    assert script.seen[1][-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_ok", "content": "42"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_bad",
                "content": "ValueError: bad x",
                "is_error": True,
            },
        ],
    }
    finished = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert [f.error is None for f in finished] == [True, False]


def test_anthropic_unknown_tool_is_marked_is_error() -> None:
    script = Script(a_turn((0, "toolu_x", "nowhere", "{}")), a_answer())
    rt.agent_loop(script, {}, USER).pipe(ops.to_list()).run()
    block = script.seen[1][-1]["content"][0]
    assert block["is_error"] is True
    assert block["content"] == "LookupError: unknown tool 'nowhere'"


def test_anthropic_overloaded_mid_stream_is_retried() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    cut = [a_start(), a_tool_open(0, "toolu_a", "f"), PING, a_piece(0, '{"a"'), overloaded]
    f = Calls("done")
    script = Script(cut, a_turn((0, "toolu_a", "f", '{"a": 1}')), a_answer())
    events = events_of(rt.agent_loop(script, {"f": f}, USER, backoff=0))
    retried = [e for e in events if isinstance(e, rt.TurnRetried)]
    assert len(retried) == 1
    assert isinstance(retried[0].error, rt.ProviderError)
    assert retried[0].error.code == "overloaded_error"
    assert f.seen == [{"a": 1}]
    assert events[-1].turns == 2


def test_anthropic_cut_tool_input_is_not_retried_nor_dispatched() -> None:
    events = load_wire("anthropic", "anthropic-sdk-python__max_tokens_mid_tool_input")
    tool = Calls()
    script = Script(events)
    error = failure_of(rt.agent_loop(script, {"get_weather": tool}, USER))
    assert isinstance(error, rt.TruncatedToolCallError)
    assert tool.seen == []
    assert len(script.seen) == 1


def test_anthropic_calls_answered_in_the_given_messages_are_not_run_again() -> None:
    # The messages stop in a turn, one call answered: only the other runs, and its result
    # joins the user message that holds the first.
    earlier = [
        *USER,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_p", "name": "pay", "input": {"amount": 5}},
                {"type": "tool_use", "id": "toolu_t", "name": "pay", "input": {"amount": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_p",
                    "content": [{"type": "text", "text": "paid earlier"}],
                }
            ],
        },
    ]
    pay = Calls()
    script = Script(a_answer())
    events = events_of(rt.agent_loop(script, {"pay": pay}, earlier))
    assert pay.seen == [{"amount": 1}]
    finished = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert [(f.content, f.reused) for f in finished] == [("paid earlier", True), ("ok", False)]
    result = {"type": "tool_result", "tool_use_id": "toolu_t", "content": "ok"}
    answers = {**earlier[-1], "content": [*earlier[-1]["content"], result]}
    assert script.seen[0] == [*earlier[:-1], answers]


@pytest.mark.parametrize("sent", ["inside-subscribe", "after-subscribe"])
def test_anthropic_dispose_on_turn_finished_starts_no_tool(sent: str) -> None:
    from reactivex.subject import Subject

    tool = Calls()
    pending: Subject[Any] = Subject()
    events = a_turn((0, "toolu_a", "f", "{}"))
    script = Script(events if sent == "inside-subscribe" else pending, a_answer())

    def before_tools(event: Any) -> bool:
        return not isinstance(event, rt.TurnFinished)

    loop = rt.agent_loop(script, {"f": tool}, USER)
    seen: list[Any] = []
    # On the subscribing thread: the whole turn inside subscribe(), or sent once it returned.
    loop.pipe(ops.take_while(before_tools, inclusive=True)).subscribe(seen.append)
    if sent == "after-subscribe":
        for event in events:
            pending.on_next(event)
        pending.on_completed()
    assert isinstance(seen[-1], rt.TurnFinished)
    assert tool.seen == []
    assert len(script.seen) == 1


def test_anthropic_sdk_events_run_the_loop() -> None:
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    from anthropic._models import construct_type

    def typed(events: list[dict[str, Any]]) -> list[Any]:
        return [
            construct_type(type_=anthropic.types.RawMessageStreamEvent, value=e) for e in events
        ]

    weather = Calls("sunny")
    script = Script(typed(a_turn((0, "toolu_w", "weather", '{"city": "Oslo"}'))), typed(a_answer()))
    conversation = events_of(rt.agent_loop(script, {"weather": weather}, USER))[-1]
    assert weather.seen == [{"city": "Oslo"}]
    assert json.dumps(script.seen[1][-1]) == json.dumps(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_w", "content": "sunny"}],
        }
    )
    assert conversation.final.content == "Done."


def test_anthropic_end_without_message_stop_is_retried() -> None:
    whole = a_turn((0, "toolu_a", "f", '{"a": 1}'))
    f = Calls("done")
    script = Script(whole[:-1], whole, a_answer())
    events = events_of(rt.agent_loop(script, {"f": f}, USER, backoff=0))
    retried = [e for e in events if isinstance(e, rt.TurnRetried)]
    assert [type(r.error) for r in retried] == [rt.StreamInterruptedError]
    assert f.seen == [{"a": 1}]
    assert script.seen[1] == USER


def test_responses_dispose_cancels_the_stream_in_flight() -> None:
    from reactivex.subject import Subject

    pending: Subject[Any] = Subject()
    tool = Calls()
    script = Script(pending, r_answer())
    seen: list[Any] = []
    subscription = rt.agent_loop(script, {"weather": tool}, USER).subscribe(seen.append)
    for event in r_turn((0, "call_w", "weather", "{}"))[:3]:
        pending.on_next(event)
    assert [type(e) for e in seen] == [rt.ToolCallStarted]
    subscription.dispose()
    assert not pending.observers
    for event in r_turn((0, "call_w", "weather", "{}"))[3:]:
        pending.on_next(event)
    assert tool.seen == []
    assert len(script.seen) == 1
    assert [type(e) for e in seen] == [rt.ToolCallStarted]


# -- every registered wire: the same loop on each wire's own turns ---------------------------
# The turns and messages come from the table in tests/wire_builders.py.

WEATHER = (("call_w", "weather", pieces('{"city": "Paris"}')), ("call_t", "time", ["{}"]))


def asking(wire: str) -> list[dict[str, Any]]:
    return case(wire).turn((), WEATHER)


def prose(wire: str, text: str = "Done.") -> list[dict[str, Any]]:
    return case(wire).turn([text])


def said(wire: str) -> list[dict[str, Any]]:
    return [case(wire).user(["hi"], False)]


@pytest.mark.parametrize("wire", names())
def test_every_wire_runs_the_calls_and_sends_the_turn_and_its_answers_back(wire: str) -> None:
    weather, time = Calls({"temp": 11}), Calls("10:00")
    script = Script(asking(wire), prose(wire, "11 C at 10:00."))
    events = events_of(rt.agent_loop(script, {"weather": weather, "time": time}, said(wire)))
    conversation = events[-1]
    assert isinstance(conversation, rt.Conversation)
    assert (conversation.turns, conversation.final.wire) == (2, wire)
    assert conversation.final.content == "11 C at 10:00."
    assert (weather.seen, time.seen) == ([{"city": "Paris"}], [{}])
    asked = next(e.assistant for e in events if isinstance(e, rt.TurnFinished))
    assert script.seen[1] == [*said(wire), *asked.exchange([{"temp": 11}, "10:00"])]


@pytest.mark.parametrize("wire", names())
def test_every_wire_retries_a_turn_without_its_end_and_runs_its_tools_once(wire: str) -> None:
    weather, time = Calls("sunny"), Calls("10:00")
    whole = asking(wire)
    script = Script(case(wire).turn((), WEATHER, end=False), whole, prose(wire))
    events = events_of(
        rt.agent_loop(script, {"weather": weather, "time": time}, said(wire), backoff=0)
    )
    retried = [e for e in events if isinstance(e, rt.TurnRetried)]
    assert [(r.turn, r.attempt, type(r.error)) for r in retried] == [
        (1, 1, rt.StreamInterruptedError)
    ]
    assert (len(weather.seen), len(time.seen)) == (1, 1)
    assert script.seen[1] == said(wire)  # the retry sends the same messages
    assert events[-1].turns == 2


@pytest.mark.parametrize("wire", names())
def test_every_wire_never_retries_nor_runs_a_cut_call(wire: str) -> None:
    tool = Calls()
    entry = case(wire)
    for closer in entry.closers.values():
        script = Script([*entry.cut(["Let me look."], "call_w", "weather", "city", "Pa"), *closer])
        error = failure_of(rt.agent_loop(script, {"weather": tool}, said(wire)))
        assert isinstance(error, rt.TruncatedToolCallError)
        assert len(script.seen) == 1
    assert tool.seen == []


@pytest.mark.parametrize("wire", names())
def test_every_wire_stops_at_the_turn_limit(wire: str) -> None:
    script = Script(asking(wire))
    tools = {"weather": Calls(), "time": Calls()}
    error = failure_of(rt.agent_loop(script, tools, said(wire), max_turns=2))
    assert isinstance(error, rt.TurnLimitError)
    assert len(script.seen) == 2


@pytest.mark.parametrize("wire", names())
def test_every_wire_s_dispose_on_turn_finished_starts_no_tool(wire: str) -> None:
    tool = Calls()
    script = Script(asking(wire), prose(wire))
    seen: list[Any] = []
    loop = rt.agent_loop(script, {"weather": tool, "time": tool}, said(wire))
    loop.pipe(
        ops.take_while(lambda event: not isinstance(event, rt.TurnFinished), inclusive=True)
    ).subscribe(seen.append)
    assert isinstance(seen[-1], rt.TurnFinished)
    assert tool.seen == []
    assert len(script.seen) == 1


@pytest.mark.parametrize("wire", names())
def test_every_wire_s_dispose_cancels_the_stream_in_flight(wire: str) -> None:
    from reactivex.subject import Subject

    pending: Subject[Any] = Subject()
    tool = Calls()
    events = asking(wire)
    script = Script(pending, prose(wire))
    seen: list[Any] = []
    subscription = rt.agent_loop(script, {"weather": tool, "time": tool}, said(wire)).subscribe(
        seen.append
    )
    half = len(events) // 2
    for event in events[:half]:
        pending.on_next(event)
    subscription.dispose()
    assert not pending.observers
    for event in events[half:]:
        pending.on_next(event)
    assert tool.seen == []
    assert len(script.seen) == 1
    assert not [e for e in seen if isinstance(e, rt.TurnFinished | rt.ToolCallFinished)]
