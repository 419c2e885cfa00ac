"""The AWS Bedrock ConverseStream wire: every recording, built cases, and the real boto3 client.

The reader is built directly (``BedrockReader(policy)``); the boto3 client reads recorded and
built event-stream bodies from a loopback HTTP server, never the network.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import http.server
import json
import os
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler

import rxtoolcalls as rt
from rxtoolcalls._core import Call
from rxtoolcalls.wires.anthropic import AnthropicReader
from rxtoolcalls.wires.bedrock import (
    BedrockReader,
    from_async_bedrock_stream,
    from_bedrock_stream,
    from_eventstream,
    identifies,
    unwrap_chunk,
)
from tests.helpers import NotADict, extra, open_sockets, settle
from tests.wire_builders import B_START as START
from tests.wire_builders import B_USAGE as USAGE
from tests.wire_builders import (
    b_delta,
    b_end,
    b_open,
    b_piece,
    b_stop,
    b_text,
    b_tool,
    converse_names,
    load_bedrock,
)
from tests.wire_builders import load_bedrock_lines as load_lines

Event = dict[str, Any]
BEDROCK = Path(__file__).parent / "fixtures" / "wire" / "bedrock"
BOUND = 5.0  # seconds; a freed connection is seen in milliseconds
QUICK = 1.5  # seconds within which a dispose frees the client's end (measured: milliseconds)


CONVERSE = converse_names()
INVOKE = "openinference__claude35_text_then_two_tool_use"


def read(events: list[Any], policy: rt.Policy = rt.DEFAULT) -> rt.AssistantTurn:
    reader = BedrockReader(policy)
    for event in events:
        reader.feed(event)
    (turn,) = reader.close_choices()
    return turn


def calls(turn: rt.AssistantTurn) -> list[tuple[int, str, str, Any]]:
    return [(c.index, c.id, c.name, c.parsed_arguments) for c in turn.tool_calls]


# -- every recording: what its source asserts ------------------------------------------------


def test_the_recordings_found_are_the_nine_conversations() -> None:
    assert len(CONVERSE) == 9


def test_nova_text_without_a_start_then_tool_use() -> None:
    turn = read(load_bedrock("pydantic-ai__nova_text_then_tool_use"))
    assert str(turn.wire) == "bedrock"
    assert turn.content == (
        "<thinking> To find the temperature of the capital of France, I need to first "
        "determine the capital of France and then get the current temperature in that city. "
        'The capital of France is Paris. I will use the "get_temperature" tool to find the '
        "current temperature in Paris.</thinking>\n"
    )
    assert calls(turn) == [
        (1, "tooluse_lAG_zP8QRHmSYOwZzzaCqA", "get_temperature", {"city": "Paris"})
    ]
    assert turn.tool_calls[0].arguments == '{"city":"Paris"}'
    assert turn.finish_reason == "tool_use"
    # metadata came after messageStop: its usage is the turn's.
    assert turn.usage == {"inputTokens": 471, "outputTokens": 91, "totalTokens": 562}
    assert turn.items[0] == {"text": turn.content}
    assert turn.items[1] == {
        "toolUse": {
            "toolUseId": "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
            "name": "get_temperature",
            "input": {"city": "Paris"},
        }
    }


def test_nova_text_after_a_tool_result() -> None:
    turn = read(load_bedrock("pydantic-ai__nova_text_after_tool_result"))
    assert turn.content == "The current temperature in Paris, the capital of France, is 30°C."
    assert (turn.tool_calls, turn.finish_reason) == ((), "end_turn")


def test_a_server_tool_and_its_result_are_kept_and_never_dispatched() -> None:
    turn = read(load_bedrock("pydantic-ai__nova2_server_tool_then_client_tool"))
    assert calls(turn) == [
        (2, "tooluse_ptgCcZ0uQu-UUMz0abqoWw", "final_result", {"result": 7006652.0})
    ]
    assert turn.finish_reason == "tool_use"
    assert turn.items == (
        {
            "toolUse": {
                "name": "nova_code_interpreter",
                "toolUseId": "tooluse_VQNZJRUFMoqZzszVsRd4og",
                "type": "server_tool_use",
                "input": {"snippet": "1234 * 5678"},
            }
        },
        {
            "toolResult": {
                "status": "success",
                "toolUseId": "tooluse_VQNZJRUFMoqZzszVsRd4og",
                "type": "nova_code_interpreter_result",
                "content": [
                    {"json": {"stdOut": "7006652", "stdErr": "", "exitCode": 0, "isError": False}}
                ],
            }
        },
        {
            "toolUse": {
                "name": "final_result",
                "toolUseId": "tooluse_ptgCcZ0uQu-UUMz0abqoWw",
                "type": "tool_use",
                "input": {"result": 7006652.0},
            }
        },
    )


def test_gpt_oss_empty_text_then_reasoning_then_text() -> None:
    turn = read(load_bedrock("pydantic-ai__gpt_oss_empty_text_then_reasoning"))
    reasoning = (
        'The user just says "Hi". We need to respond appropriately, friendly greeting. '
        "No special instructions. Should be short."
    )
    assert turn.reasoning == reasoning
    assert turn.content == "Hello! How can I help you today?"
    assert turn.finish_reason == "end_turn"
    # No empty text block: Converse refuses a blank one.
    assert turn.items == (
        {"reasoningContent": {"reasoningText": {"text": reasoning}}},
        {"text": "Hello! How can I help you today?"},
    )


CLAUDE4_SIGNATURE = (
    "Eu0CCkgIBxABGAIqQJDccbDQkr81n7QjZ0Fi43umSvw0YvnGkMPEpaGAa2btYHyWw06KhwckvsnKzpKcxiRJT35meoG4"
    "/pdrTUiy2UISDPDaEWfOl3+HlRVsCxoMzfiqBp252RMvpmEyIjCbQ97Ac9Epkr5mgxeu1vGtJg+fDWIg0UnpMM8NYknh"
    "hvJmsXpYrfquwGL1ZnlBslUq0gHtbAAPwlWPmiQXU7gDQCDW9IdMVyw42b4f5MrAlpWkPWOJc9H+yYv0TpP/jY72SD1o"
    "pqwkWnBgkzbi7A2jPmEFzIMQSO1KDXha5ADqQ3cLYMmVdNTSH9wlM7G7/JJ2/cqowqkwD6/q1AnYzcPte9iC67fY1LYN"
    "0NMCOSABFojP1rmkv9YBEulx5Y6eQpeVXBQiIqcGoCmWSumpGBskS1KxGerUmzUB0JmJnTENv4x3fSGSUSEPqMiz6Eba"
    "o8sVkb1wCWuZEXWJGtiQLMIm1o471iEYAQ=="
)


def test_claude4_reasoning_keeps_its_signature() -> None:
    turn = read(load_bedrock("pydantic-ai__claude4_reasoning_signature"))
    reasoning = (
        'The user has greeted me with a simple "Hello". I should respond in a friendly and '
        "welcoming manner. This is a straightforward greeting, so I'll respond warmly and ask "
        "how I can help them today."
    )
    assert turn.reasoning == reasoning
    assert turn.content == "Hello! It's nice to meet you. How can I help you today?"
    assert turn.finish_reason == "end_turn"
    assert turn.items[0] == {
        "reasoningContent": {"reasoningText": {"text": reasoning, "signature": CLAUDE4_SIGNATURE}}
    }


def test_claude37_redacted_reasoning_is_kept_as_bytes() -> None:
    turn = read(load_bedrock("pydantic-ai__claude37_redacted_reasoning"))
    *redacted, text = turn.items
    blobs = [item["reasoningContent"]["redactedContent"] for item in redacted]
    # The decoded blobs are the signatures the source asserts (EtkECkgI…, EqADCkgI…).
    assert [(b[:8], len(b)) for b in blobs] == [(b"EtkECkgI", 808), (b"EqADCkgI", 564)]
    assert turn.reasoning is None
    assert text == {"text": turn.content}
    assert turn.content is not None
    assert turn.content.startswith("I notice you've sent what appears to be some kind of command")
    assert turn.content.endswith("What would you like to talk about today?")
    assert turn.usage == {"inputTokens": 92, "outputTokens": 253, "totalTokens": 345}
    assert turn.finish_reason == "end_turn"


def test_redacted_content_as_base64_text_reads_as_its_bytes() -> None:
    # A raw frame carries the blob as base64: read as boto3's bytes.
    raw = [
        {line["event"]: line["data"]}
        for line in load_lines("pydantic-ai__claude37_redacted_reasoning")
    ]
    assert read(raw).items == read(load_bedrock("pydantic-ai__claude37_redacted_reasoning")).items


NOVA_CANCEL_TEXT = (
    "The capital of France is Paris. Paris is not only the capital city but also the most "
    "populous city in France, and it is a major center for culture, commerce, fashion, and "
    "international diplomacy. Known for its historical landmarks, such as the Eiffel Tower, "
    'the Louvre Museum, and Notre-Dame Cathedral, Paris is often referred to as "The City of '
    'Light" and is a global hub for art and history.'
)


def test_nova_text_for_cancel_and_its_cut_after_the_first_delta() -> None:
    events = load_bedrock("pydantic-ai__nova_text_for_cancel")
    turn = read(events)
    assert (turn.content, turn.finish_reason) == (NOVA_CANCEL_TEXT, "end_turn")
    # The source cancels after the first delta ("The"): here nothing is emitted then.
    assert events[1] == b_text(0, "The")
    with pytest.raises(rt.StreamInterruptedError, match="before its terminal event"):
        read(events[:2])


VERCEL_SIGNATURE = (
    "Ep0CCkgICxABGAIqQOWPB6/PmA5SW9jC6FvaNq3E+U9ev4FMWcFWuAho+VGLCtazKc5WDjQ5i0MuxsY0o5pKDSVWVKii"
    "8KJDusXH4eASDK7jyzuk8iij7fJNihoMxHO9haYzt48R36HVIjCb/EmIFrJLIXShqN6DN//T6vZBtO9qj1QhNWJa3CGm"
    "8VZoq80S2/Ok4U0aVaIDiZcqggHC2b8BHuv8BHZrmsR0wjU1ynansBGMdfjnG+iIv8R5lPpRmYGhSVwNybwP3aQZ6o8D"
    "r48Rau8TJfdsArW+r7bvL7bPs4f5nnlp2vG7WkMzWwABHK3fdM44zZ1GZQaWyECNWR2GfY6dXiklo94vgpFTPuZ97mfi"
    "N3LY6uYyBwL8RkDaGAE="
)


def test_vercel_claude_reasoning_then_text() -> None:
    turn = read(load_bedrock("vercel-ai__claude_reasoning_then_text"))
    reasoning = (
        'Let me count the r\'s in "strawberry":\n\ns-t-r-a-w-b-e-r-r-y\n\nr appears at '
        "positions 3, 8, and 9.\n\nSo there are 3 r's."
    )
    assert turn.reasoning == reasoning
    assert turn.content == 'There are **3** r\'s in "strawberry":\n\n1. st**r**awbe**r****r**y'
    assert turn.finish_reason == "end_turn"
    assert turn.items[0] == {
        "reasoningContent": {"reasoningText": {"text": reasoning, "signature": VERCEL_SIGNATURE}}
    }


def test_haiku_text_after_a_tool_result() -> None:
    turn = read(load_bedrock("openinference__claude3_haiku_after_tool_result"))
    assert (
        turn.content
        == '\n\nThe most popular song played on radio station WZPZ is "Rock and Roll Hall".'
    )
    assert "song played on radio station WZPZ" in turn.content
    assert turn.finish_reason == "end_turn"
    assert turn.usage == {"inputTokens": 443, "outputTokens": 23, "totalTokens": 466}


def read_anthropic(events: list[Any]) -> rt.AssistantTurn:
    reader = AnthropicReader(rt.DEFAULT)
    for event in events:
        reader.feed(event)
    (turn,) = reader.close_choices()
    return turn


@pytest.mark.json_parser
def test_invoke_model_chunks_unwrap_to_anthropic_events() -> None:
    envelopes = load_bedrock(INVOKE)
    inner = [unwrap_chunk(e) for e in envelopes]
    turn = read_anthropic(inner)
    assert calls(turn) == [
        (
            1,
            "toolu_bdrk_01CquHF9otnnrgxxx54tVxau",
            "get_current_weather_info",
            {"city": "San Francisco"},
        ),
        (
            2,
            "toolu_bdrk_017gKMzG8LV5r3snEuhgaSvt",
            "get_current_population_info",
            {"city": "San Francisco"},
        ),
    ]
    assert [c.arguments for c in turn.tool_calls] == ['{"city": "San Francisco"}'] * 2
    assert turn.content
    decoded = [line["data"] for line in load_lines(f"{INVOKE}.anthropic")]
    assert inner == decoded
    assert turn == read_anthropic(decoded)


@pytest.mark.json_parser
@pytest.mark.parametrize("name", [n for n in CONVERSE if (BEDROCK / f"{n}.eventstream").exists()])
def test_the_raw_frames_read_as_the_dict_events(name: str) -> None:
    # rxtoolcalls' own frame decoder yields boto3's events, unknown members kept.
    body = (BEDROCK / f"{name}.eventstream").read_bytes()
    events: list[Event] = from_eventstream(body).pipe(ops.to_list()).run()
    raw, boto = read(events), read(load_bedrock(name))
    assert (calls(raw), raw.items, raw.content, raw.reasoning, raw.finish_reason) == (
        calls(boto),
        boto.items,
        boto.content,
        boto.reasoning,
        boto.finish_reason,
    )


def test_an_invoke_model_chunk_is_no_converse_event() -> None:
    with pytest.raises(rt.MalformedChunkError, match="its bytes hold another wire's event"):
        read(load_bedrock(INVOKE))


@pytest.mark.parametrize("name", CONVERSE)
def test_every_cut_is_a_typed_error_or_the_whole_calls(name: str) -> None:
    events = load_bedrock(name)
    whole = read(events)
    stop = next(i for i, event in enumerate(events) if "messageStop" in event)
    for cut in range(len(events) + 1):
        if cut <= stop:  # cut before messageStop: nothing, never a half call
            with pytest.raises(rt.StreamInterruptedError):
                read(events[:cut])
            continue
        turn = read(events[:cut])
        assert (turn.tool_calls, turn.items) == (whole.tool_calls, whole.items)


BUILT: dict[str, list[Event]] = {
    "parallel": [
        START,
        b_open(0, "tooluse_a", "get_weather"),
        b_open(1, "tooluse_b", "get_time"),
        b_piece(0, '{"city": '),
        b_piece(1, '{"zone": "CET"}'),
        b_piece(0, '"Paris"}'),
        b_stop(1),
        b_stop(0),
        *b_end(),
    ],
    "max_tokens": [
        START,
        b_open(0, "tooluse_a", "f"),
        b_piece(0, '{"a": "x'),
        b_stop(0),
        *b_end("max_tokens"),
    ],
    "never_stopped": [START, *b_tool(0, "tooluse_a", "f", '{"a": 1}')[:-1], *b_end("tool_use")],
}


@pytest.mark.parametrize("name", sorted(BUILT))
def test_every_cut_of_a_built_stream_is_a_typed_error_or_the_whole_calls(name: str) -> None:
    events = BUILT[name]
    try:
        whole: tuple[rt.ToolCall, ...] | None = read(events).tool_calls
    except rt.ToolCallStreamError:
        whole = None
    for cut in range(len(events) + 1):
        try:
            turn = read(events[:cut])
        except rt.ToolCallStreamError:
            continue
        assert turn.tool_calls == whole


# -- built cases -----------------------------------------------------------------------------


def test_two_parallel_tool_use_blocks() -> None:
    reader = BedrockReader(rt.DEFAULT)
    started = [s for event in BUILT["parallel"] for s in reader.feed(event)]
    assert [(s.index, s.id, s.name) for s in started] == [
        (0, "tooluse_a", "get_weather"),
        (1, "tooluse_b", "get_time"),
    ]
    (turn,) = reader.close_choices()
    assert calls(turn) == [
        (0, "tooluse_a", "get_weather", {"city": "Paris"}),
        (1, "tooluse_b", "get_time", {"zone": "CET"}),
    ]
    assert turn.usage == USAGE["metadata"]["usage"]


def test_max_tokens_in_the_middle_of_a_tool_input_is_truncated() -> None:
    with pytest.raises(rt.TruncatedToolCallError) as caught:
        read(BUILT["max_tokens"])
    assert caught.value.finish_reason == "max_tokens"
    assert caught.value.name == "f"


@pytest.mark.parametrize("reason", ["max_tokens", "model_context_window_exceeded"])
def test_a_token_ceiling_with_a_whole_call_is_truncated(reason: str) -> None:
    with pytest.raises(rt.TruncatedToolCallError):
        read([START, *b_tool(0, "tooluse_a", "f", '{"a": 1}'), *b_end(reason)])


def test_max_tokens_with_prose_only_is_emitted() -> None:
    turn = read([START, b_text(0, "cut"), b_stop(0), *b_end("max_tokens")])
    assert (turn.content, turn.finish_reason) == ("cut", "max_tokens")


def test_a_tool_block_never_stopped_is_truncated_whatever_the_stop_reason() -> None:
    for reason in ("tool_use", "end_turn"):
        events = [START, *b_tool(0, "tooluse_a", "f", '{"a": 1}')[:-1], *b_end(reason)]
        with pytest.raises(rt.TruncatedToolCallError, match="still open"):
            read(events)


SECRET = "hunter2-s3cr3t"
EXCEPTIONS = [
    ("internalServerException", True),
    ("modelStreamErrorException", True),
    ("throttlingException", True),
    ("serviceUnavailableException", True),
    ("modelTimeoutException", True),
    ("validationException", False),
]


@pytest.mark.parametrize(("name", "retryable"), EXCEPTIONS)
def test_an_exception_event_is_a_provider_error(name: str, retryable: bool) -> None:
    events = [
        START,
        b_open(0, "tooluse_a", "login"),
        b_piece(0, json.dumps({"password": SECRET})[:-1]),
        {name: {"message": "something went wrong"}},
    ]
    with pytest.raises(rt.ProviderError) as caught:
        read(events)
    error = caught.value
    assert (error.code, error.retryable) == (name, retryable)
    assert "something went wrong" in str(error)
    assert SECRET not in f"{error} {error.hint} {error!r}"
    assert (error.hint is not None and "retry" in error.hint) is retryable


def test_an_exception_event_after_message_stop_is_still_an_error() -> None:
    events = [START, b_text(0, "hi"), *b_end("end_turn"), {"throttlingException": {"message": "x"}}]
    with pytest.raises(rt.ProviderError):
        read(events)


def test_an_unknown_exception_event_is_a_provider_error() -> None:
    with pytest.raises(rt.ProviderError) as caught:
        read([START, {"accessDeniedException": {"message": "no"}}])
    assert caught.value.code == "accessDeniedException"


@pytest.mark.parametrize("reason", ["guardrail_intervened", "content_filtered"])
def test_a_filtered_turn_emits_nothing(reason: str) -> None:
    events = [
        START,
        b_text(0, "Here is how to"),
        b_stop(0),
        *b_tool(1, "tooluse_a", "f", '{"a": 1}'),
        *b_end(reason),
    ]
    with pytest.raises(rt.ContentFilteredError) as caught:
        read(events)
    assert caught.value.finish_reason == reason
    # The text that came is kept for the caller to show (a guardrail may have masked it).
    assert caught.value.content == "Here is how to"
    # A call never stopped does not turn it into a truncation either.
    with pytest.raises(rt.ContentFilteredError):
        read([START, b_open(0, "tooluse_a", "f"), b_piece(0, "{"), *b_end(reason)])


def test_a_malformed_tool_use_is_invalid_arguments() -> None:
    with pytest.raises(rt.InvalidArgumentsError):
        read([START, *b_tool(0, "tooluse_a", "f", '{"a": 1}'), *b_end("malformed_tool_use")])
    with pytest.raises(rt.ProviderError):
        read([START, b_text(0, "x"), *b_end("malformed_model_output")])


def test_a_stop_reason_not_listed_emits() -> None:
    turn = read([START, *b_tool(0, "tooluse_a", "f", "{}"), *b_end("a_new_reason")])
    assert (turn.finish_reason, len(turn.tool_calls)) == ("a_new_reason", 1)


@pytest.mark.parametrize("pieces", [[], [""], ["", ""]])
def test_a_tool_without_parameters_is_an_empty_object(pieces: list[str]) -> None:
    events = [START, b_open(0, "tooluse_a", "now"), *(b_piece(0, p) for p in pieces), b_stop(0)]
    turn = read([*events, *b_end()])
    assert calls(turn) == [(0, "tooluse_a", "now", {})]
    assert turn.tool_calls[0].arguments == "{}"


def test_a_text_block_with_no_start_and_a_stop_alone() -> None:
    events = [START, b_text(0, "Hel"), b_text(0, "lo"), b_stop(0), b_stop(1), *b_end("end_turn")]
    turn = read(events)
    assert turn.content == "Hello"
    assert turn.items == ({"text": "Hello"},)


def test_server_tool_and_tool_result_blocks_are_never_dispatched() -> None:
    result_start = {
        "contentBlockStart": {
            "contentBlockIndex": 1,
            "start": {"toolResult": {"toolUseId": "tooluse_s", "type": "r", "status": "success"}},
        }
    }
    events = [
        START,
        b_open(0, "tooluse_s", "search", "server_tool_use"),
        b_piece(0, '{"q": "x"}'),
        b_stop(0),
        result_start,
        b_delta(1, {"toolResult": [{"text": "found "}]}),
        b_delta(1, {"toolResult": [{"text": "it"}, {"json": {"n": 1}}]}),
        b_stop(1),
        b_text(2, "Done."),
        b_stop(2),
        *b_end("end_turn"),
    ]
    reader = BedrockReader(rt.DEFAULT)
    assert [s for e in events for s in reader.feed(e)] == []  # never announced
    (turn,) = reader.close_choices()
    assert turn.tool_calls == ()
    assert turn.items == (
        {
            "toolUse": {
                "toolUseId": "tooluse_s",
                "name": "search",
                "type": "server_tool_use",
                "input": {"q": "x"},
            }
        },
        {
            "toolResult": {
                "toolUseId": "tooluse_s",
                "type": "r",
                "status": "success",
                "content": [{"text": "found "}, {"text": "it"}, {"json": {"n": 1}}],
            }
        },
        {"text": "Done."},
    )


def test_a_tool_type_the_reader_does_not_know_is_never_dispatched() -> None:
    events = [START, b_open(0, "t", "f", "mcp_tool_use"), b_stop(0), *b_end("end_turn")]
    turn = read(events)
    assert turn.tool_calls == ()
    assert turn.items[0]["toolUse"]["input"] == {}


def test_citations_make_a_citations_content_block() -> None:
    citation = {"title": "Doc", "sourceContent": [{"text": "quoted"}], "location": {}}
    events = [
        START,
        b_text(0, "As said"),
        b_delta(0, {"citation": citation}),
        b_text(0, "."),
        b_stop(0),
        *b_end("end_turn"),
    ]
    turn = read(events)
    assert turn.content == "As said."
    assert turn.items == (
        {"citationsContent": {"content": [{"text": "As said."}], "citations": [citation]}},
    )


def test_an_image_block_takes_its_deltas_and_unknown_deltas_are_ignored() -> None:
    image_start = {
        "contentBlockStart": {"contentBlockIndex": 0, "start": {"image": {"format": "png"}}}
    }
    events = [
        START,
        image_start,
        b_delta(0, {"image": {"source": {"bytes": b"\x89PNG"}}}),
        b_delta(0, {"hologram": {"x": 1}}),
        b_delta(1, {"hologram": {"x": 1}}),
        b_stop(0),
        *b_end("end_turn"),
    ]
    assert read(events).items == ({"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}},)


def test_metadata_before_message_stop_is_taken_too() -> None:
    turn = read([START, b_text(0, "hi"), USAGE, {"messageStop": {"stopReason": "end_turn"}}])
    assert turn.usage == USAGE["metadata"]["usage"]


def test_an_end_without_message_stop_is_an_interruption() -> None:
    events = [START, *b_tool(0, "tooluse_a", "f", '{"a": 1}')]
    with pytest.raises(rt.StreamInterruptedError, match="before its terminal event"):
        read(events)
    with pytest.raises(rt.StreamInterruptedError):
        read([])


@pytest.mark.parametrize(
    "after",
    [
        b_text(0, "more"),
        {"messageStop": {"stopReason": "end_turn"}},
        START,
        b_open(3, "tooluse_b", "g"),
        b_piece(0, "x"),
    ],
)
def test_an_event_after_message_stop_is_malformed(after: Event) -> None:
    events = [START, *b_tool(0, "tooluse_a", "f", "{}"), *b_end(), after]
    with pytest.raises(rt.MalformedChunkError, match="after messageStop"):
        read(events)


@pytest.mark.parametrize("index", ["0", None, True, 1.0, 1 << 64, -(1 << 64), [0]])
def test_a_bad_content_block_index_is_malformed(index: Any) -> None:
    for event in (
        {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"text": "x"}}},
        {"contentBlockStop": {"contentBlockIndex": index}},
        {"contentBlockStart": {"contentBlockIndex": index, "start": {"toolUse": {}}}},
    ):
        with pytest.raises(rt.MalformedChunkError, match="contentBlockIndex"):
            read([START, event])


def test_an_index_of_64_bits_is_taken() -> None:
    index = (1 << 63) - 1
    turn = read([START, *b_tool(index, "tooluse_a", "f", "{}"), *b_end()])
    assert turn.tool_calls[0].index == index


@pytest.mark.parametrize(
    ("events", "match"),
    [
        ([b_text(0, "a"), b_stop(0), b_text(0, "b")], "had stopped"),
        ([*b_tool(0, "t", "f", "{}"), b_piece(0, "x")], "had stopped"),
        ([b_text(0, "a"), b_stop(0), b_stop(0)], "had stopped"),
        ([b_open(0, "t", "f"), b_open(0, "u", "g")], "already started"),
        ([b_text(0, "a"), b_open(0, "u", "g")], "already started"),
        ([b_piece(0, "{}")], "never started"),
        ([b_text(0, "a"), b_piece(0, "{}")], "only toolUse blocks take input"),
        ([b_open(0, "t", "f"), b_text(0, "a")], "'toolUse' block"),
        ([b_text(0, "a"), b_delta(0, {"reasoningContent": {"text": "r"}})], "'text' block"),
        ([b_delta(0, {"toolResult": [{"text": "r"}]})], "never started"),
        ([b_delta(0, {"text": "a", "citation": {}})], "one kind"),
        ([b_delta(0, {})], "one kind"),
        ([b_delta(0, {"text": 5})], "must be a string"),
        ([b_delta(0, {"reasoningContent": {"redactedContent": "not base64!"}})], "not base64"),
        (
            [
                b_delta(0, {"reasoningContent": {"text": "r"}}),
                b_delta(0, {"reasoningContent": {"redactedContent": b"x"}}),
            ],
            "both",
        ),
        ([{"contentBlockStart": {"contentBlockIndex": 0, "start": {}}}], "one kind"),
        ([{"contentBlockStart": {"contentBlockIndex": 0}}], "must be an object"),
        ([{"contentBlockDelta": {"contentBlockIndex": 0, "delta": "x"}}], "must be an object"),
        ([b_open(0, "t", "f", "server_tool_use"), b_piece(0, 5)], "string fragment"),  # type: ignore[arg-type]
        ([{"messageStop": {}}], "without a stopReason"),
        ([{"messageStop": {"stopReason": 5}}], "must be a string"),
        ([START], "second messageStart"),
        ([{"contentBlockStop": []}], "must be an object"),
    ],
)
def test_blocks_that_break_the_rules_are_malformed(events: list[Event], match: str) -> None:
    with pytest.raises(rt.MalformedChunkError, match=match):
        read([START, *events, *b_end("end_turn")])


@pytest.mark.parametrize(
    "event",
    [
        {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
        {"id": "c", "object": "chat.completion.chunk", "choices": []},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
        {"type": "response.created", "response": {}},
        {"candidates": [{"content": {"parts": [{"text": "x"}]}}]},
        {"chunk": {"bytes": b'{"type": "ping"}'}},
    ],
)
def test_an_event_of_another_wire_is_malformed(event: Event) -> None:
    with pytest.raises(rt.MalformedChunkError, match="one wire"):
        read([START, event])


@pytest.mark.parametrize(
    ("event", "match"),
    [
        ({"event": "messageStart", "data": {"role": "assistant"}}, "boto3 yields"),
        ({}, "one key"),
        ({"messageStart": {}, "metadata": {}}, "one key"),
        ("messageStart", "one-key dict"),
        (None, "one-key dict"),
        ({"MessageStart": {}}, "unknown name"),
        ({"a-b": {}}, "unknown name"),
        ({"newEvent": "text"}, "unknown name"),
        ({"messageStart": "x"}, "must be an object"),
    ],
)
def test_what_is_no_bedrock_event_is_malformed(event: Any, match: str) -> None:
    with pytest.raises(rt.MalformedChunkError, match=match):
        read([START, event])


def test_a_newer_bedrock_event_is_ignored() -> None:
    events = [
        START,
        {"contentBlockHint": {"contentBlockIndex": 0}},
        b_text(0, "a"),
        *b_end("end_turn"),
    ]
    assert read(events).content == "a"


def test_mappings_read_as_dicts() -> None:
    events = [NotADict(e) for e in BUILT["parallel"]]
    assert read(events) == read(BUILT["parallel"])


def test_the_fast_path_and_the_full_path_agree() -> None:
    events = BUILT["parallel"]
    fast = read(events)
    # Piece checks send every piece down the full path.
    slow = read(events, rt.Policy(drop_resent_arguments=True))
    assert (calls(slow), slow.items, slow.usage) == (calls(fast), fast.items, fast.usage)


@pytest.mark.parametrize("policy", [rt.DEFAULT, rt.Policy(drop_resent_arguments=True)])
def test_limits_hold_on_both_paths(policy: rt.Policy) -> None:
    limited = rt.Policy(
        limits=rt.Limits(max_call_arguments=10),
        drop_resent_arguments=policy.drop_resent_arguments,
    )
    events = [START, b_open(0, "t", "f"), b_piece(0, '{"a": '), b_piece(0, '"0123456789"}')]
    with pytest.raises(rt.LimitExceededError) as caught:
        read(events, limited)
    assert caught.value.limit == "max_call_arguments"


def test_an_undeclared_tool_is_refused_when_named_and_a_server_tool_is_not() -> None:
    policy = rt.Policy(tools={"f": None})
    reader = BedrockReader(policy)
    reader.feed(START)
    with pytest.raises(rt.UnknownToolError):
        reader.feed(b_open(0, "tooluse_a", "g"))
    server = [b_open(0, "tooluse_s", "search", "server_tool_use"), b_stop(0)]
    turn = read([START, *server, *b_tool(1, "tooluse_a", "f", "{}"), *b_end()], policy)
    assert calls(turn) == [(1, "tooluse_a", "f", {})]


def test_input_pieces_of_an_open_call_take_the_fast_path() -> None:
    slow: list[object] = []

    class Counting(BedrockReader):
        def _slow_feed(self, event: object) -> Sequence[rt.ToolCallStarted]:
            slow.append(event)
            return super()._slow_feed(event)

    reader = Counting(rt.DEFAULT)
    for event in BUILT["parallel"]:
        reader.feed(event)
    pieces = [
        e for e in BUILT["parallel"] if "toolUse" in e.get("contentBlockDelta", {}).get("delta", {})
    ]
    assert len(pieces) == 3
    assert slow == [e for e in BUILT["parallel"] if e not in pieces]


def test_pieces_reach_a_sink_on_the_fast_path() -> None:
    pieces: list[str] = []

    def on_open(call: Call) -> None:
        call.sink = pieces.append

    reader = BedrockReader(rt.DEFAULT, on_open=on_open, keep_arguments=False)
    for event in BUILT["parallel"]:
        reader.feed(event)
    assert pieces == ['{"city": ', '{"zone": "CET"}', '"Paris"}']


def test_on_error_reports_once_and_feed_after_close_raises() -> None:
    seen: list[Exception] = []
    reader = BedrockReader(rt.DEFAULT, on_error=seen.append)
    for event in [START, b_piece(0, "x"), b_piece(0, "y"), {"throttlingException": {}}]:
        assert reader.feed(event) == ()
    assert [type(e) for e in seen] == [rt.MalformedChunkError]
    reader = BedrockReader(rt.DEFAULT)
    with pytest.raises(rt.StreamInterruptedError):
        reader.close_choices()
    with pytest.raises(RuntimeError):
        reader.feed(START)


# -- identifies and unwrap_chunk -------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (START, True),
        (b_piece(0, "x"), True),
        (USAGE, True),
        # Too common a name to tell the wire by, unless it holds Bedrock's usage or metrics.
        ({"metadata": {"request_id": "x"}}, False),
        ({"metadata": {"metrics": {"latencyMs": 9}}}, True),
        ({"throttlingException": {"message": "x"}}, True),
        ({"validationException": {}}, True),
        (NotADict({"messageStop": {"stopReason": "end_turn"}}), True),
        ({"chunk": {"bytes": b"{}"}}, False),
        ({"messageStart": {}, "p": "abc"}, False),
        ({"event": "messageStart", "data": {}}, False),
        ({"type": "message_start"}, False),
        ({"choices": []}, False),
        ({}, False),
        ("messageStart", False),
        (None, False),
        (["messageStart"], False),
    ],
)
def test_identifies(event: object, expected: bool) -> None:
    assert identifies(event) is expected


@pytest.mark.json_parser
def test_unwrap_chunk() -> None:
    assert unwrap_chunk({"chunk": {"bytes": b'{"type": "ping"}'}}) == {"type": "ping"}
    assert unwrap_chunk(NotADict({"chunk": {"bytes": bytearray(b'{"type": "ping"}')}})) == {
        "type": "ping"
    }
    encoded = base64.b64encode(b'{"type": "ping"}').decode()
    assert unwrap_chunk({"chunk": {"bytes": encoded, "p": "abc"}}) == {"type": "ping"}
    for other in (START, {"chunk": {}, "p": 1}, "chunk", None, {"event": "chunk"}):
        assert unwrap_chunk(other) is None
    for bad, match in (
        ({"chunk": {"bytes": b"[1]"}}, "one JSON object"),
        ({"chunk": {"bytes": b"{not json"}}, "not JSON"),
        ({"chunk": {"bytes": b"\xff\xfe"}}, "JSON"),
        ({"chunk": {}}, "must be bytes"),
        ({"chunk": "x"}, "must be an object"),
        ({"chunk": {"bytes": "%%%"}}, "not base64"),
    ):
        with pytest.raises(rt.MalformedChunkError, match=match):
            unwrap_chunk(bad)


# -- event-stream frames, for the boto3 client -----------------------------------------------


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude, string headers, payload, both CRC32s."""
    encoded = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + len(v.encode()).to_bytes(2, "big") + v.encode()
        for k, v in headers.items()
    )
    prelude = (12 + len(encoded) + len(payload) + 4).to_bytes(4, "big")
    prelude += len(encoded).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    message = prelude + encoded + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


def event_frames(events: list[Event]) -> bytes:
    """Events in boto3's shape as the frames Bedrock sends (blobs as base64)."""
    out = []
    for event in events:
        ((name, body),) = event.items()
        payload = json.dumps(
            body, default=lambda b: base64.b64encode(b).decode() if isinstance(b, bytes) else b
        )
        headers = {
            ":event-type": name,
            ":content-type": "application/json",
            ":message-type": "event",
        }
        out.append(frame(headers, payload.encode()))
    return b"".join(out)


def exception_frame(name: str, message: str) -> bytes:
    headers = {
        ":exception-type": name,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps({"message": message}).encode())


# -- a loopback Bedrock ------------------------------------------------------------------------


def split_frames(body: bytes) -> list[bytes]:
    """A body's frames, each as long as its prelude says."""
    frames = []
    while body:
        size = int.from_bytes(body[:4], "big")
        frames.append(body[:size])
        body = body[size:]
    return frames


class Bedrock:
    """A loopback HTTP server answering the two streaming routes with the body of a model id.

    Each frame is one HTTP chunk, as Bedrock sends them. ``bodies[model]`` is the body; with
    ``pause[model] = n`` it sends the first ``n`` frames and then waits, silent, until the
    client goes away (``disconnects`` counts those).
    """

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        self.pause: dict[str, int] = {}
        self.disconnects = 0
        self.paths: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.paths.append(self.path)
                model = self.path.split("/")[2]
                frames = split_frames(owner.bodies[model])
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.amazon.eventstream")
                self.send_header("Transfer-Encoding", "chunked")
                # One connection a request: a test counts the sockets of its own.
                self.send_header("Connection", "close")
                self.end_headers()
                cut = owner.pause.get(model)
                for data in frames if cut is None else frames[:cut]:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                if cut is None:
                    self.wfile.write(b"0\r\n\r\n")
                    return
                # Silent until the client goes: its close reads as the end of the request.
                self.rfile.read(1)
                owner.disconnects += 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(BOUND)


boto3 = pytest.importorskip("boto3", reason="the bedrock extra (boto3) is not installed")


@pytest.fixture(scope="module")
def bedrock() -> Iterator[tuple[Bedrock, Any]]:
    with pytest.MonkeyPatch.context() as patch:
        # Nothing but the loopback server: no instance metadata, no profile of the host's.
        patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        patch.setenv("AWS_CONFIG_FILE", os.devnull)
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        patch.delenv("AWS_PROFILE", raising=False)
        server = Bedrock()
        client = boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=server.url,
            aws_access_key_id="x",
            aws_secret_access_key="x",
            config=boto3.session.Config(
                retries={"max_attempts": 1}, connect_timeout=5, read_timeout=5
            ),
        )
        for name in CONVERSE:
            path = BEDROCK / f"{name}.eventstream"
            if path.exists():
                server.bodies[name] = path.read_bytes()
        server.bodies[INVOKE] = (BEDROCK / f"{INVOKE}.eventstream").read_bytes()
        try:
            yield server, client
        finally:
            server.close()


ASK = [{"role": "user", "content": [{"text": "hi"}]}]


def converse(client: Any, model: str) -> Any:
    return client.converse_stream(modelId=model, messages=ASK)


def events_of(source: reactivex.Observable[Any]) -> list[Any]:
    got: list[Any] = source.pipe(ops.to_list()).run()
    return got


RECORDED = [n for n in CONVERSE if (BEDROCK / f"{n}.eventstream").exists()]


@pytest.mark.parametrize("name", RECORDED)
def test_boto3_reads_each_recording_as_the_dict_events(
    bedrock: tuple[Bedrock, Any], name: str
) -> None:
    server, client = bedrock
    got = events_of(from_bedrock_stream(converse(client, name)["stream"]))
    assert server.paths[-1] == f"/model/{name}/converse-stream"
    assert got == load_bedrock(name)
    assert read(got) == read(load_bedrock(name))


def test_boto3_whole_response_is_taken(bedrock: tuple[Bedrock, Any]) -> None:
    _, client = bedrock
    name = "pydantic-ai__nova_text_then_tool_use"
    assert events_of(from_bedrock_stream(converse(client, name))) == load_bedrock(name)


@pytest.mark.json_parser
def test_boto3_invoke_model_stream_unwraps_to_anthropic_events(
    bedrock: tuple[Bedrock, Any],
) -> None:
    server, client = bedrock
    response = client.invoke_model_with_response_stream(modelId=INVOKE, body=b"{}")
    got = events_of(from_bedrock_stream(response["body"]))
    assert server.paths[-1] == f"/model/{INVOKE}/invoke-with-response-stream"
    assert got == [line["data"] for line in load_lines(f"{INVOKE}.anthropic")]
    assert calls(read_anthropic(got))[0][1] == "toolu_bdrk_01CquHF9otnnrgxxx54tVxau"


@pytest.mark.json_parser
@pytest.mark.parametrize(("name", "retryable"), EXCEPTIONS)
def test_boto3_exception_frames_are_provider_errors(
    bedrock: tuple[Bedrock, Any], name: str, retryable: bool
) -> None:
    server, client = bedrock
    model = f"exception-{name}"
    invoke = name == "modelTimeoutException"  # InvokeModel's own: not a ConverseStream member
    events = [START, b_open(0, "tooluse_a", "f"), b_piece(0, '{"a"')]
    if invoke:
        events = [{"chunk": {"bytes": b'{"type": "ping"}'}}]
    server.bodies[model] = event_frames(events) + exception_frame(name, "try later")
    if invoke:
        stream = client.invoke_model_with_response_stream(modelId=model, body=b"{}")["body"]
    else:
        stream = converse(client, model)["stream"]
    seen: list[Any] = []
    with pytest.raises(rt.ProviderError) as caught:
        from_bedrock_stream(stream).pipe(ops.do_action(seen.append)).run()
    assert seen == ([{"type": "ping"}] if invoke else events)
    assert (caught.value.code, caught.value.retryable) == (name, retryable)
    assert "try later" in str(caught.value)
    assert type(caught.value.__cause__).__name__ == "EventStreamError"


def test_boto3_a_damaged_frame_is_malformed(bedrock: tuple[Bedrock, Any]) -> None:
    server, client = bedrock
    body = bytearray(event_frames([START, b_text(0, "hi")]))
    body[-1] ^= 0xFF  # the last frame's message CRC
    server.bodies["damaged"] = bytes(body)
    with pytest.raises(rt.MalformedChunkError, match="could not be decoded"):
        events_of(from_bedrock_stream(converse(client, "damaged")["stream"]))


def sockets_before() -> frozenset[str]:
    gc.collect()
    return open_sockets()


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")


@needs_proc
def test_boto3_dispose_mid_stream_frees_the_socket(bedrock: tuple[Bedrock, Any]) -> None:
    server, client = bedrock
    name = "pydantic-ai__nova_text_for_cancel"
    server.bodies["silent"] = server.bodies[name]
    # Two frames, then silence: only shutting the socket down ends the blocked read.
    frames = load_bedrock(name)[:2]
    server.pause["silent"] = 2
    disconnects = server.disconnects
    threads = set(threading.enumerate())
    sockets = sockets_before()
    stream = converse(client, "silent")["stream"]
    seen: list[Any] = []
    got = threading.Event()
    notes: list[str] = []

    def on_next(event: Any) -> None:
        seen.append(event)
        if len(seen) == len(frames):  # the read then waits on the silent server
            got.set()

    subscription = from_bedrock_stream(stream).subscribe(
        on_next,
        lambda _: notes.append("error"),
        lambda: notes.append("completed"),
        scheduler=NewThreadScheduler(),
    )
    assert got.wait(BOUND)
    assert len(open_sockets() - sockets) == 2  # the stream's two ends, while it runs
    disposed = time.monotonic()
    subscription.dispose()
    assert settle(lambda: not open_sockets() - sockets), "a socket outlived the dispose"
    assert time.monotonic() - disposed < QUICK, "the close waited for the server"
    assert settle(lambda: server.disconnects == disconnects + 1)
    assert settle(lambda: set(threading.enumerate()) <= threads | {server.thread})
    assert notes == []
    assert seen == frames


@needs_proc
def test_boto3_dispose_from_on_next_closes_the_stream(bedrock: tuple[Bedrock, Any]) -> None:
    _, client = bedrock
    name = "pydantic-ai__nova_text_for_cancel"
    sockets = sockets_before()
    first = from_bedrock_stream(converse(client, name)["stream"]).pipe(ops.take(1)).run()
    assert first == START
    assert settle(lambda: not open_sockets() - sockets), "a socket outlived the take(1)"


def test_not_a_stream_is_a_type_error_at_once() -> None:
    class Body:
        def read(self) -> bytes:
            return b""

        def __iter__(self) -> Iterator[bytes]:
            return iter(())

    class Async:
        def __aiter__(self) -> AsyncIterator[Any]:
            raise AssertionError

        def __iter__(self) -> Iterator[Any]:
            raise NotImplementedError

    sync: list[tuple[object, str]] = [
        (42, "not int"),
        ("stream", "not str"),
        (b"\x00", "not bytes"),
        ({"output": {}}, "without a 'stream' or 'body'"),
        ({"body": Body()}, "invoke_model"),
        (Async(), "use from_async_bedrock_stream"),
    ]
    for bad, match in sync:
        with pytest.raises(TypeError, match=match):
            from_bedrock_stream(bad)
    for other, said in ((42, "not int"), ([START], "use from_bedrock_stream")):
        with pytest.raises(TypeError, match=said):
            from_async_bedrock_stream(other)


def test_a_plain_iterable_of_events_reads_and_closes() -> None:
    closed: list[bool] = []

    class Stream:
        def __iter__(self) -> Iterator[Any]:
            yield from BUILT["parallel"]

        def close(self) -> None:
            closed.append(True)

    assert events_of(from_bedrock_stream(Stream())) == BUILT["parallel"]
    assert closed == [True]


# -- the async twin (aiobotocore's AioEventStream is an async iterable with close()) ------------


class FakeAioStream:
    """What aiobotocore's ``AioEventStream`` offers: ``async for``, and a (sync) ``close``."""

    def __init__(self, events: list[Any], error: Exception | None = None) -> None:
        self.events = events
        self.error = error
        self.closed = 0

    async def _events(self) -> AsyncIterator[Any]:
        for event in self.events:
            await asyncio.sleep(0)
            yield event
        if self.error is not None:
            raise self.error

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    def close(self) -> None:
        self.closed += 1


def run_async(source: Callable[[], reactivex.Observable[Any]]) -> list[Any]:
    async def main() -> list[Any]:
        got: list[Any] = await source().pipe(ops.to_list())
        return got

    return asyncio.run(main())


@pytest.mark.json_parser
def test_async_stream_unwraps_chunks_and_closes() -> None:
    envelopes = load_bedrock(INVOKE)
    stream = FakeAioStream(envelopes)
    got = run_async(lambda: from_async_bedrock_stream({"body": stream}))
    assert got == [line["data"] for line in load_lines(f"{INVOKE}.anthropic")]
    assert stream.closed == 1


def test_async_stream_event_stream_error_is_a_provider_error() -> None:
    exceptions = pytest.importorskip("botocore.exceptions", reason=extra("bedrock"))
    failure = exceptions.EventStreamError(
        {"Error": {"Code": "validationException", "Message": "bad input"}}, "ConverseStream"
    )
    stream = FakeAioStream([START, b_text(0, "hi")], failure)
    with pytest.raises(rt.ProviderError) as caught:
        run_async(lambda: from_async_bedrock_stream(stream))
    assert (caught.value.code, caught.value.retryable) == ("validationException", False)
    assert caught.value.__cause__ is failure
    assert stream.closed == 1
