"""The Anthropic Messages wire: every recording, and built cases for what no recording shows."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex
from reactivex import operators as ops

import rxtoolcalls as rt
from tests.wire_builders import (
    PING,
    a_end,
    a_piece,
    a_start,
    a_stop,
    a_text,
    a_tool,
    a_tool_open,
    calls,
    load_wire,
    rx_turn,
    turn_of,
)

# -- recordings -----------------------------------------------------------------------------


def test_text_then_tool_use() -> None:
    turn = turn_of(load_wire("anthropic", "anthropic-sdk-python__text_then_tool_use"))
    assert turn.wire == "anthropic"
    assert calls(turn) == [
        (1, "toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"})
    ]
    assert turn.finish_reason == "tool_use"
    assert turn.content is not None
    assert turn.content.startswith("I'll check the current weather in Paris")
    message = turn.to_message()
    assert message["role"] == "assistant"
    assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
    assert message["content"][1]["input"] == {"location": "Paris"}
    # Fields of the start block the API sent (caller) go back as they came.
    assert message["content"][1]["caller"] == {"type": "direct"}


def test_max_tokens_in_the_middle_of_tool_input_is_truncated_never_repaired() -> None:
    # The SDK's own accumulator turns this into a valid-looking dict with the cut string dropped.
    events = load_wire("anthropic", "anthropic-sdk-python__max_tokens_mid_tool_input")
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.TruncatedToolCallError) as caught:
            run(events)
        assert caught.value.finish_reason == "max_tokens"
        assert caught.value.name == "make_file"


def test_parallel_tool_use() -> None:
    turn = turn_of(load_wire("anthropic", "openllmetry__text_then_parallel_tool_use"))
    assert [(c.id[:12], c.name) for c in turn.tool_calls] == [
        ("toolu_014x5X", "get_weather"),
        ("toolu_0121kX", "get_time"),
    ]


def test_thinking_with_its_signature_goes_back_unchanged() -> None:
    events = load_wire("anthropic", "pydantic-ai__thinking_then_text")
    turn = turn_of(events)
    thinking = "".join(
        e["delta"]["thinking"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "thinking_delta"
    )
    signature = next(
        e["delta"]["signature"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "signature_delta"
    )
    assert turn.reasoning == thinking
    block = turn.to_message()["content"][0]
    assert block == {"type": "thinking", "thinking": thinking, "signature": signature}
    assert turn.finish_reason == "end_turn"


def test_server_tool_use_is_kept_and_never_dispatched() -> None:
    turn = turn_of(load_wire("anthropic", "pydantic-ai__server_tool_search_then_tool_use"))
    assert [b["type"] for b in turn.items] == [
        "text",
        "server_tool_use",
        "tool_search_tool_result",
        "text",
        "tool_use",
    ]
    assert [c.name for c in turn.tool_calls] == ["get_exchange_rate"]
    server = turn.items[1]
    assert isinstance(server["input"], dict)
    assert server["input"]


def test_pause_turn_says_it_must_be_continued() -> None:
    turn = turn_of(load_wire("anthropic", "pydantic-ai__pause_turn_server_web_search"))
    assert turn.finish_reason == "pause_turn"
    assert turn.needs_continuation
    assert turn.tool_calls == ()
    kinds = [b["type"] for b in turn.items]
    assert kinds.count("server_tool_use") == 11
    assert kinds.count("web_search_tool_result") == 10
    assert kinds[0] == "thinking"


def test_a_tool_without_parameters_is_an_empty_object() -> None:
    turn = turn_of(load_wire("anthropic", "vercel-ai__text_then_tool_no_args"))
    assert calls(turn) == [(1, "toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", {})]
    assert turn.tool_calls[0].arguments == "{}"


def test_mcp_tool_use_and_result_are_kept() -> None:
    turn = turn_of(load_wire("anthropic", "vercel-ai__mcp_tool_use_and_result"))
    assert turn.tool_calls == ()
    assert [b["type"] for b in turn.items] == ["mcp_tool_use", "mcp_tool_result", "text"]


def test_citations_are_kept_on_their_text_blocks() -> None:
    events = load_wire("anthropic", "vercel-ai__server_web_search_with_citations")
    turn = turn_of(events)
    cited = sum(len(b.get("citations") or []) for b in turn.items if b["type"] == "text")
    sent = sum(
        1
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "citations_delta"
    )
    assert cited == sent == 14
    text = "".join(b["text"] for b in turn.items if b["type"] == "text")
    assert turn.content == text


# -- built cases --------------------------------------------------------------------------


def test_ping_between_two_deltas_of_one_block() -> None:
    events = [
        a_start(),
        a_tool_open(0, "toolu_a", "f"),
        a_piece(0, '{"a"'),
        PING,
        a_piece(0, ": 1}"),
        a_stop(0),
        *a_end(),
    ]
    assert calls(turn_of(events)) == [(0, "toolu_a", "f", {"a": 1})]


def test_an_error_in_the_middle_of_the_stream() -> None:
    error = {
        "type": "error",
        "error": {"details": None, "type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_1",
    }
    events = [a_start(), a_tool_open(0, "toolu_a", "f"), a_piece(0, '{"a"'), error]
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.ProviderError) as caught:
            run(events)
        assert caught.value.code == "overloaded_error"
        assert caught.value.retryable is True


def test_an_end_without_message_stop_is_an_interruption() -> None:
    events = [
        a_start(),
        *a_tool(0, "toolu_a", "f", '{"a": 1}'),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
    ]
    for policy in ("default", "lenient"):
        with pytest.raises(rt.StreamInterruptedError, match="before its terminal event"):
            turn_of(events, policy=policy)
    with pytest.raises(rt.StreamInterruptedError):
        turn_of(events, require_finish_reason=False)


def test_a_tool_block_never_stopped_is_truncated_whatever_the_stop_reason() -> None:
    events = [a_start(), a_tool_open(0, "toolu_a", "f"), a_piece(0, '{"a": 1}'), *a_end("end_turn")]
    with pytest.raises(rt.TruncatedToolCallError, match="still open"):
        turn_of(events)


def test_model_context_window_exceeded_with_a_call_is_truncated() -> None:
    events = [
        a_start(),
        *a_tool(0, "toolu_a", "f", '{"a": 1}'),
        *a_end("model_context_window_exceeded"),
    ]
    with pytest.raises(rt.TruncatedToolCallError):
        turn_of(events)


def test_max_tokens_with_prose_only_is_emitted() -> None:
    turn = turn_of([a_start(), *a_text(0, "cut"), *a_end("max_tokens")])
    assert (turn.content, turn.finish_reason) == ("cut", "max_tokens")


def test_refusal_is_content_filtered() -> None:
    with pytest.raises(rt.ContentFilteredError):
        turn_of([a_start(), *a_text(0, "no"), *a_end("refusal")])


def test_a_delta_for_a_block_never_started_is_malformed() -> None:
    with pytest.raises(rt.MalformedChunkError, match="no block was started"):
        turn_of([a_start(), a_piece(4, "{}")])
    with pytest.raises(rt.MalformedChunkError, match="no block was started"):
        turn_of([a_start(), a_stop(4)])


def test_a_second_start_at_one_index_and_a_delta_after_stop_are_malformed() -> None:
    with pytest.raises(rt.MalformedChunkError, match="already started"):
        turn_of([a_start(), a_tool_open(0, "toolu_a", "f"), a_tool_open(0, "toolu_b", "g")])
    with pytest.raises(rt.MalformedChunkError, match="had stopped"):
        turn_of([a_start(), *a_tool(0, "toolu_a", "f", "{}"), a_piece(0, "x")])


def test_input_json_for_a_text_block_is_malformed() -> None:
    events = [a_start(), a_text(0, "x")[0], a_piece(0, "{}")]
    with pytest.raises(rt.MalformedChunkError, match="only tool blocks take input"):
        turn_of(events)


def test_input_sent_whole_in_the_start_is_taken() -> None:
    start = a_tool_open(0, "toolu_a", "f")
    start["content_block"]["input"] = {"q": "whole"}
    turn = turn_of([a_start(), start, a_stop(0), *a_end()])
    assert calls(turn) == [(0, "toolu_a", "f", {"q": "whole"})]


def test_tool_results_are_one_user_message_with_errors_marked() -> None:
    events = [
        a_start(),
        *a_tool(0, "toolu_a", "f", '{"a": 1}'),
        *a_tool(1, "toolu_b", "g", "{}"),
        *a_end(),
    ]
    turn = turn_of(events)
    answers = turn.tool_messages([{"ok": True}, ValueError("no such file")])
    assert answers == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": '{"ok": true}'},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "ValueError: no such file",
                    "is_error": True,
                },
            ],
        }
    ]
    assert turn.exchange({"toolu_a": 1, "toolu_b": 2})[0] == turn.to_message()


def test_empty_text_blocks_are_not_sent_back() -> None:
    start = a_text(0, "")[0]
    turn = turn_of([a_start(), start, a_stop(0), *a_tool(1, "toolu_a", "f", "{}"), *a_end()])
    assert [b["type"] for b in turn.to_message()["content"]] == ["tool_use"]


def test_usage_is_cumulative() -> None:
    turn = turn_of([a_start(), *a_text(0, "hi"), *a_end("end_turn")])
    assert turn.usage == {"input_tokens": 10, "output_tokens": 42}


def test_operators_give_the_same_notifications_on_this_wire() -> None:
    events = [
        a_start(),
        *a_text(0, "Let me."),
        *a_tool(1, "toolu_a", "f", '{"a": 1}'),
        *a_tool(2, "toolu_b", "g", '{"b": [1, 2]}'),
        *a_end(),
    ]
    fused = rx_turn(events)
    piped = (
        reactivex.from_iterable(events)
        .pipe(
            rt.group_by_index(wire="anthropic"),
            rt.concat_arguments(),
            rt.on_finish_reason(wire="anthropic"),
            rt.atomic_batch(wire="anthropic"),
        )
        .run()
    )
    assert piped == fused == turn_of(events)
    started = reactivex.from_iterable(events).pipe(rt.progress(), ops.to_list()).run()
    assert [(s.index, s.id, s.name, s.count) for s in started] == [
        (1, "toolu_a", "f", 1),
        (2, "toolu_b", "g", 2),
    ]
    life = reactivex.from_iterable(events).pipe(rt.lifecycle(every=1), ops.to_list()).run()
    assert [type(e).__name__ for e in life].count("ToolCallCommitted") == 2
    with_progress = (
        reactivex.from_iterable(events).pipe(rt.assemble_with_progress(), ops.to_list()).run()
    )
    assert with_progress[-1] == fused


def test_forcing_the_wrong_wire_is_a_typed_error() -> None:
    events = [a_start(), *a_text(0, "x"), *a_end("end_turn")]
    with pytest.raises(rt.MalformedChunkError):
        rx_turn(events, wire="responses")
    with pytest.raises(rt.MalformedChunkError):
        rx_turn(events, wire="chat")
    with pytest.raises(ValueError, match="no wire is named"):
        rt.assemble(wire="vertex")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rt.assemble(wire=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("start", "delta"),
    [
        ({"signature": ["x"]}, {"type": "signature_delta", "signature": "BB"}),
        ({"citations": 5}, {"type": "citations_delta", "citation": {"a": 1}}),
    ],
    ids=["signature", "citations"],
)
def test_a_delta_onto_a_block_field_of_another_type_is_malformed(
    start: dict[str, Any], delta: dict[str, Any]
) -> None:
    events = [
        a_start(),
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "server_tool_result", **start},
        },
        {"type": "content_block_delta", "index": 0, "delta": delta},
        a_stop(0),
        *a_end("end_turn"),
    ]
    with pytest.raises(rt.MalformedChunkError):
        turn_of(events)
