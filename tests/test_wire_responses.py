"""The Responses wire: every recording, and built cases for what no recording shows."""

from __future__ import annotations

import json
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from tests.wire_builders import (
    calls,
    load_wire,
    r_args_done,
    r_call,
    r_completed,
    r_created,
    r_delta,
    r_fc_added,
    r_fc_item,
    r_incomplete,
    r_item_done,
    r_message,
    rx_turn,
    turn_of,
)

# -- recordings: each assembles to what its source asserts ----------------------------------


def test_single_call_get_capital() -> None:
    turn = turn_of(load_wire("responses", "pydantic-ai__single_call_get_capital"))
    assert turn.wire == "responses"
    assert calls(turn) == [
        (0, "call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", {"country": "France"})
    ]
    # The id to answer is the call_id; the fc_ item id is kept beside it.
    assert turn.tool_calls[0].item_id is not None
    assert turn.tool_calls[0].item_id.startswith("fc_")
    assert turn.finish_reason == "completed"


def test_text_after_function_call_output() -> None:
    turn = turn_of(load_wire("responses", "pydantic-ai__text_after_function_call_output"))
    assert turn.content == "The capital of France is Paris."
    assert turn.tool_calls == ()
    assert turn.usage is not None
    assert (turn.usage["input_tokens"], turn.usage["output_tokens"]) == (278, 9)


def test_reasoning_text_then_call_keeps_the_phase_and_the_reasoning_item() -> None:
    events = load_wire("responses", "pydantic-ai__reasoning_text_then_call_phase")
    turn = turn_of(events)
    assert [item["type"] for item in turn.items] == ["reasoning", "message", "function_call"]
    assert turn.items[1]["phase"] == "commentary"
    assert turn.content is not None
    assert turn.content.startswith("I")
    assert [c.name for c in turn.tool_calls] == ["get_capital"]
    # The 13 text deltas, joined, are the message's text.
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert turn.content == "".join(deltas)


def test_reasoning_then_output_tool_call() -> None:
    turn = turn_of(load_wire("responses", "pydantic-ai__reasoning_then_call_usage"))
    assert [c.name for c in turn.tool_calls] == ["final_result"]
    assert turn.items[0]["type"] == "reasoning"
    assert "encrypted_content" in turn.items[0] or "summary" in turn.items[0]


def test_server_tool_search_then_call_keeps_the_namespace_for_the_round_trip() -> None:
    turn = turn_of(load_wire("responses", "pydantic-ai__server_tool_search_then_call"))
    assert [item["type"] for item in turn.items] == [
        "tool_search_call",
        "tool_search_output",
        "function_call",
    ]
    assert [c.name for c in turn.tool_calls] == ["get_exchange_rate"]
    sent = turn.to_message()
    assert isinstance(sent, list)
    assert sent[2]["namespace"] == turn.items[2]["namespace"]
    assert sent[2]["arguments"] == turn.tool_calls[0].arguments
    # Server items go back verbatim and are never dispatched.
    assert sent[:2] == [dict(turn.items[0]), dict(turn.items[1])]


def test_bedrock_mantle_call_ids_restart_at_call_0() -> None:
    turn = turn_of(load_wire("responses", "pydantic-ai__bedrock_mantle_call_turn1"))
    assert calls(turn) == [(0, "call_0", "first_tool", {})]


def test_error_then_response_failed_is_a_provider_error() -> None:
    with pytest.raises(rt.ProviderError) as caught:
        turn_of(load_wire("responses", "vercel-ai__error_then_response_failed"))
    assert caught.value.code == "insufficient_quota"
    assert caught.value.retryable is False
    assert "exceeded your current quota" in str(caught.value)


def test_azure_obfuscation_is_ignored() -> None:
    turn = turn_of(load_wire("responses", "vercel-ai__azure_single_call_obfuscation"))
    assert calls(turn) == [
        (0, "call_H5DxLSFnsGhiROnUiDHmgyc8", "weather", {"location": "San Francisco"})
    ]


def test_reasoning_summary_becomes_reasoning() -> None:
    events = load_wire("responses", "vercel-ai__reasoning_summary_then_call")
    turn = turn_of(events)
    summary = [e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta"]
    assert turn.reasoning == "".join(summary)
    assert [c.parsed_arguments for c in turn.tool_calls] == [{"a": 12, "b": 7, "op": "add"}]


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        (
            "vercel-ai__mcp_approval_request",
            ["mcp_list_tools", "reasoning", "mcp_approval_request"],
        ),
        ("vercel-ai__apply_patch_call_diff_deltas", ["apply_patch_call"]),
        ("vercel-ai__local_shell_call_no_deltas", ["reasoning", "local_shell_call"]),
    ],
)
def test_non_function_items_are_kept_verbatim_and_never_dispatched(
    name: str, kinds: list[str]
) -> None:
    events = load_wire("responses", name)
    turn = turn_of(events)
    assert turn.tool_calls == ()
    assert [item["type"] for item in turn.items] == kinds
    done = {
        e["output_index"]: e["item"] for e in events if e["type"] == "response.output_item.done"
    }
    for index, item in enumerate(turn.items):
        assert item == done[index]


def test_local_shell_action_comes_from_the_done_item() -> None:
    turn = turn_of(load_wire("responses", "vercel-ai__local_shell_call_no_deltas"))
    assert turn.items[1]["action"]


def test_every_recording_gives_the_same_turn_through_rx() -> None:
    for name in (
        "pydantic-ai__single_call_get_capital",
        "pydantic-ai__server_tool_search_then_call",
        "vercel-ai__reasoning_summary_then_call",
    ):
        events = load_wire("responses", name)
        assert rx_turn(events) == turn_of(events)
        assert rx_turn(events, wire="responses") == turn_of(events)


# -- built cases --------------------------------------------------------------------------


def test_interleaved_parallel_calls_are_keyed_by_output_index() -> None:
    a = '{"city": "Paris"}'
    b = '{"city": "Rome", "days": 3}'
    events = [
        r_created(),
        r_fc_added(0, "call_a", "weather"),
        r_fc_added(1, "call_b", "forecast"),
    ]
    for i in range(max(len(a), len(b))):
        if i < len(b):
            events.append(r_delta(1, b[i]))
        if i < len(a):
            events.append(r_delta(0, a[i]))
    events += [
        r_item_done(1, r_fc_item(1, "call_b", "forecast", b)),
        r_item_done(0, r_fc_item(0, "call_a", "weather", a)),
        r_completed([r_fc_item(0, "call_a", "weather", a), r_fc_item(1, "call_b", "forecast", b)]),
    ]
    turn = rx_turn(events)
    assert calls(turn) == [
        (0, "call_a", "weather", {"city": "Paris"}),
        (1, "call_b", "forecast", {"city": "Rome", "days": 3}),
    ]


def test_item_id_rotation_does_not_split_a_call() -> None:
    args = '{"q": "rotating ids"}'
    events = [r_created(), r_fc_added(0, "call_a", "search", item_id="fc_first")]
    events += [r_delta(0, ch, item_id=f"fc_rot_{n}") for n, ch in enumerate(args)]
    events += [r_completed([r_fc_item(0, "call_a", "search", args)])]
    turn = turn_of(events)
    assert calls(turn) == [(0, "call_a", "search", {"q": "rotating ids"})]
    assert turn.tool_calls[0].item_id == "fc_first"


def test_arguments_only_in_done() -> None:
    args = '{"x": 1}'
    events = [
        r_created(),
        r_fc_added(0, "call_a", "f"),
        r_args_done(0, args),
        r_item_done(0, r_fc_item(0, "call_a", "f", args)),
        r_completed([r_fc_item(0, "call_a", "f", args)]),
    ]
    assert calls(turn_of(events)) == [(0, "call_a", "f", {"x": 1})]
    assert calls(rx_turn(events)) == [(0, "call_a", "f", {"x": 1})]


def test_arguments_only_in_the_completed_output() -> None:
    args = '{"x": 2}'
    events = [
        r_created(),
        r_fc_added(0, "call_a", "f"),
        r_args_done(0, ""),
        r_completed([r_fc_item(0, "call_a", "f", args)]),
    ]
    assert calls(turn_of(events)) == [(0, "call_a", "f", {"x": 2})]


def test_a_call_seen_only_in_the_completed_output_is_opened_there() -> None:
    args = '{"x": 3}'
    events = [r_created(), r_completed([r_fc_item(0, "call_a", "f", args)])]
    assert calls(turn_of(events)) == [(0, "call_a", "f", {"x": 3})]


def test_group_by_index_sees_the_final_arguments() -> None:
    args = '{"x": 1}'
    events = [
        r_created(),
        r_fc_added(0, "call_a", "f"),
        r_delta(0, '{"x"'),
        r_args_done(0, args),
        r_completed([r_fc_item(0, "call_a", "f", args)]),
    ]
    pipeline = reactivex.from_iterable(events).pipe(
        rt.group_by_index(), rt.concat_arguments(), rt.on_finish_reason(), rt.atomic_batch()
    )
    turn: rt.AssistantTurn = pipeline.run()
    assert turn == turn_of(events)


def test_final_arguments_that_contradict_the_deltas_are_refused_by_default() -> None:
    events = [
        r_created(),
        r_fc_added(0, "call_a", "f"),
        r_delta(0, '{"x": 1}'),
        r_args_done(0, '{"x": 2}'),
        r_completed([r_fc_item(0, "call_a", "f", '{"x": 2}')]),
    ]
    with pytest.raises(rt.MalformedChunkError, match="pieces streamed before") as caught:
        turn_of(events)
    assert caught.value.hint is not None
    assert "final_arguments_win" in caught.value.hint
    lenient = turn_of(events, policy="lenient")
    assert lenient.tool_calls[0].parsed_arguments == {"x": 2}
    assert lenient.normalizations["replaced_provisional_arguments"] == 1
    assert rx_turn(events, policy="lenient") == lenient


def test_a_delta_for_an_index_never_opened_is_malformed() -> None:
    events = [r_created(), r_delta(3, "{}"), r_completed([])]
    with pytest.raises(rt.MalformedChunkError, match=r"no output_item\.added"):
        turn_of(events)


def test_two_items_at_one_output_index_are_malformed() -> None:
    events = [r_created(), r_fc_added(0, "call_a", "f"), r_fc_added(0, "call_b", "g")]
    with pytest.raises(rt.MalformedChunkError, match="output_index 0, which was already started"):
        turn_of(events)


def test_incomplete_in_the_middle_of_a_call_is_truncated() -> None:
    events = [
        r_created(),
        r_fc_added(0, "call_a", "f"),
        r_delta(0, '{"text": "a long'),
        r_item_done(0, r_fc_item(0, "call_a", "f", '{"text": "a long', status="incomplete")),
        r_incomplete("max_output_tokens"),
    ]
    with pytest.raises(rt.TruncatedToolCallError):
        turn_of(events)
    with pytest.raises(rt.TruncatedToolCallError):
        rx_turn(events)


def test_incomplete_after_complete_calls_still_emits_nothing() -> None:
    # The calls of a truncated turn are one unfinished batch: none may run.
    events = [r_created(), *r_call(0, "call_a", "f", '{"a": 1}'), r_incomplete("max_output_tokens")]
    with pytest.raises(rt.TruncatedToolCallError):
        turn_of(events)


def test_a_call_left_in_progress_is_truncated_whatever_the_status_says() -> None:
    args = '{"a": 1}'
    events = [
        r_created(),
        r_fc_added(0, "call_a", "f"),
        r_delta(0, args),
        r_completed([r_fc_item(0, "call_a", "f", args, status="in_progress")]),
    ]
    with pytest.raises(rt.TruncatedToolCallError, match="still open"):
        turn_of(events)


def test_incomplete_with_prose_only_is_emitted_with_its_reason() -> None:
    events = [r_created(), *r_message(0, "partial answer")[:3], r_incomplete("max_output_tokens")]
    turn = turn_of(events)
    assert (turn.content, turn.finish_reason) == ("partial answer", "max_output_tokens")


def test_incomplete_for_content_filter() -> None:
    events = [r_created(), *r_message(0, "x")[:2], r_incomplete("content_filter")]
    with pytest.raises(rt.ContentFilteredError):
        turn_of(events)


@pytest.mark.parametrize(
    "error",
    [
        {
            "type": "error",
            "error": {"type": "server_error", "code": "server_error", "message": "boom"},
        },
        {"type": "error", "code": "server_error", "message": "boom", "param": None},
    ],
    ids=["nested", "flat"],
)
def test_error_events_of_both_shapes_are_provider_errors(error: dict[str, Any]) -> None:
    events = [r_created(), r_fc_added(0, "call_a", "f"), r_delta(0, "{"), error]
    with pytest.raises(rt.ProviderError) as caught:
        turn_of(events)
    assert caught.value.code == "server_error"
    assert caught.value.retryable is True
    with pytest.raises(rt.ProviderError):
        rx_turn(events)


def test_response_failed_alone_is_a_provider_error() -> None:
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "server_error", "message": "down"}},
    }
    with pytest.raises(rt.ProviderError, match="down"):
        turn_of([r_created(), failed])


def test_no_terminal_event_is_an_interruption() -> None:
    events = [r_created(), *r_call(0, "call_a", "f", '{"a": 1}')]
    with pytest.raises(rt.StreamInterruptedError):
        turn_of(events)


def test_an_event_after_the_terminal_one_is_malformed() -> None:
    events = [r_created(), r_completed([]), r_created()]
    with pytest.raises(rt.MalformedChunkError, match="had ended"):
        turn_of(events)


def test_done_line_is_tolerated() -> None:
    events: list[Any] = [r_created(), *r_call(0, "call_a", "f", "{}"), r_completed([]), "[DONE]"]
    assert calls(turn_of(events)) == [(0, "call_a", "f", {})]


def test_refusal_deltas_become_the_refusal() -> None:
    events = [
        r_created(),
        {"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "delta": "I can"},
        {"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "delta": "not."},
        r_completed([]),
    ]
    turn = turn_of(events)
    assert turn.refusal == "I cannot."
    assert turn.content is None


def test_text_is_joined_in_output_order() -> None:
    first = r_message(0, "one ")
    second = r_message(1, "two")
    events = [r_created(), first[0], second[0], second[1], first[1], r_completed([])]
    assert turn_of(events).content == "one two"


def test_custom_tool_call_is_never_parsed() -> None:
    patch = "*** Begin Patch\n+ not json {"
    item = {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "call_c",
        "name": "apply",
        "input": "",
    }
    events = [
        r_created(),
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": patch[:10]},
        {"type": "response.custom_tool_call_input.delta", "output_index": 0, "delta": patch[10:]},
        {"type": "response.custom_tool_call_input.done", "output_index": 0, "input": patch},
        r_item_done(0, {**item, "input": patch, "status": "completed"}),
        r_completed([{**item, "input": patch, "status": "completed"}]),
    ]
    turn = turn_of(events)
    (call,) = turn.tool_calls
    assert (call.type, call.id, call.arguments, call.parsed_arguments) == (
        "custom",
        "call_c",
        patch,
        {},
    )
    assert turn.to_message()[0]["input"] == patch
    assert turn.tool_messages(["done"]) == [
        {"type": "custom_tool_call_output", "call_id": "call_c", "output": "done"}
    ]


def test_to_message_and_tool_messages_round_trip() -> None:
    args = '{"city": "Paris"}'
    events = [
        r_created(),
        *r_message(0, "Let me look."),
        *r_call(1, "call_a", "weather", args),
        r_completed([]),
    ]
    turn = turn_of(events)
    sent = turn.to_message()
    assert [item["type"] for item in sent] == ["message", "function_call"]
    assert sent[1]["call_id"] == "call_a"
    assert json.loads(sent[1]["arguments"]) == {"city": "Paris"}
    assert turn.tool_messages({"call_a": {"t": 21}}) == [
        {"type": "function_call_output", "call_id": "call_a", "output": '{"t": 21}'}
    ]
    assert turn.exchange(["sunny"]) == [*sent, *turn.tool_messages(["sunny"])]


def test_unknown_event_types_are_ignored_and_events_of_another_wire_refused() -> None:
    base = [r_created(), {"type": "response.future_thing", "x": 1}, *r_call(0, "c", "f", "{}")]
    assert calls(turn_of([*base, r_completed([])])) == [(0, "c", "f", {})]
    with pytest.raises(rt.MalformedChunkError, match="one stream speaks one wire"):
        turn_of([*base, {"type": "message_stop"}])
    chat = {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
    with pytest.raises(rt.MalformedChunkError, match="one stream speaks one wire"):
        turn_of([*base, chat])


def test_progress_names_each_call_at_its_added_event() -> None:
    events = [
        r_created(),
        *r_call(0, "call_a", "f", "{}"),
        *r_call(1, "call_b", "g", "{}"),
        r_completed([]),
    ]
    started = (
        reactivex.from_iterable(events)
        .pipe(
            rt.progress(),
        )
        .pipe(__import__("reactivex").operators.to_list())
        .run()
    )
    assert [(s.index, s.id, s.name, s.count) for s in started] == [
        (0, "call_a", "f", 1),
        (1, "call_b", "g", 2),
    ]


def test_limits_hold_on_this_wire() -> None:
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=10))
    events = [r_created(), r_fc_added(0, "c", "f"), r_delta(0, '{"a": "0123456789"}')]
    with pytest.raises(rt.LimitExceededError):
        turn_of(events, policy=policy)
    done_only = [r_created(), r_fc_added(0, "c", "f"), r_args_done(0, '{"a": "0123456789"}')]
    with pytest.raises(rt.LimitExceededError):
        turn_of(done_only, policy=policy)
