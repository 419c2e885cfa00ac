"""The Gemini wire: every recording, built cases, set-by-path arguments, the SDK's objects."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
from typing import Any

import pytest
import reactivex
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls._sse import DONE, SSEDecoder, chunk_from_event
from tests.helpers import extra
from tests.wire_builders import (
    G_CLOSE,
    g_arg,
    g_call,
    g_open,
    g_response,
    g_stop,
    g_text,
    load_wire,
    load_wire_lines,
    rx_turn,
    sse_bytes,
    turn_of,
    wire_fixture_names,
)

GEMINI = wire_fixture_names("gemini")
SYNTHESIZED = re.compile(r"call_[0-9a-f]{24}")


def calls(turn: rt.AssistantTurn) -> list[tuple[int, str, Any]]:
    return [(c.index, c.name, c.parsed_arguments) for c in turn.tool_calls]


def without_ids(turn: rt.AssistantTurn) -> tuple[Any, ...]:
    """What a turn says, less the ids made up for it (random by design)."""
    parts = [
        {**p, "functionCall": {k: v for k, v in p["functionCall"].items() if k != "id"}}
        if "functionCall" in p and SYNTHESIZED.fullmatch(str(p["functionCall"].get("id", "")))
        else p
        for p in turn.to_message()["parts"]
    ]
    return (calls(turn), turn.content, turn.reasoning, turn.finish_reason, parts, turn.usage)


def signature(events: list[Any], at: int) -> str:
    value = events[at]["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    assert isinstance(value, str)
    return value


# -- recordings -----------------------------------------------------------------------------


def test_streamed_arguments_two_sequential_calls() -> None:
    events = load_wire("gemini", "vercel-ai__stream_function_call_partial_args")
    turn = turn_of(events)
    assert turn.wire == "gemini"
    assert turn.finish_reason == "STOP"
    assert calls(turn) == [
        (0, "getWeather", {"location": "Boston"}),
        (1, "getWeather", {"location": "San Francisco"}),
    ]
    assert all(SYNTHESIZED.fullmatch(c.id) for c in turn.tool_calls)
    assert turn.normalizations == {"synthesized_id": 2}
    parts = turn.to_message()["parts"]
    assert parts[0] == {
        "functionCall": {"name": "getWeather", "args": {"location": "Boston"}},
        "thoughtSignature": signature(events, 0),
    }
    assert parts[1] == {
        "functionCall": {"name": "getWeather", "args": {"location": "San Francisco"}}
    }
    assert turn.usage is not None
    assert turn.usage["totalTokenCount"] == 181


def test_streamed_arguments_nested_paths() -> None:
    turn = turn_of(load_wire("gemini", "vercel-ai__partial_args_nested_paths"))
    [call] = turn.tool_calls
    assert call.name == "cookRecipe"
    recipe = call.parsed_arguments["recipe"]
    assert list(call.parsed_arguments) == ["recipe"]
    assert recipe["name"] == "Lasagna"
    assert len(recipe["ingredients"]) == 10
    assert recipe["ingredients"][0] == {"amount": "16 oz", "name": "Lasagna noodles"}
    assert recipe["ingredients"][9] == {"amount": "1/2 tsp", "name": "Pepper"}
    assert len(recipe["steps"]) == 10
    assert recipe["steps"][0] == "Preheat oven to 375°F (190°C)."
    # Strings grown over several fragments on one path.
    assert recipe["steps"][1].endswith("drain and set aside.")
    assert recipe["steps"][4] == "In a 9x13 baking dish, spread a thin layer of meat sauce."
    assert json.loads(call.arguments) == call.parsed_arguments


def test_thought_then_no_args_call_then_three_streamed_calls() -> None:
    events = load_wire("gemini", "vercel-ai__partial_args_parallel_and_no_args")
    turn = turn_of(events)
    assert calls(turn) == [
        (0, "read_theme", {}),
        (1, "read_screen", {"id": "A"}),
        (2, "read_screen", {"id": "B"}),
        (3, "read_screen", {"id": "C"}),
    ]
    assert turn.reasoning is not None
    assert turn.reasoning.startswith("**Processing User Requests**")
    assert turn.content is None
    parts = turn.to_message()["parts"]
    assert parts[0]["thought"] is True
    # The signature stays on the no-args call it came with.
    assert parts[1] == {
        "functionCall": {"name": "read_theme", "args": {}},
        "thoughtSignature": signature(events, 1),
    }
    assert [p["functionCall"]["args"] for p in parts[2:]] == [{"id": "A"}, {"id": "B"}, {"id": "C"}]
    assert len(parts) == 5  # the empty text part of the last chunk is not sent back


def test_whole_call_with_signature() -> None:
    events = load_wire("gemini", "vercel-ai__whole_call_gemini3_signature")
    turn = turn_of(events)
    assert calls(turn) == [(0, "weather", {"location": "San Francisco"})]
    assert turn.to_message() == {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "weather", "args": {"location": "San Francisco"}},
                "thoughtSignature": signature(events, 0),
            }
        ],
    }


def test_whole_call_with_the_models_id() -> None:
    turn = turn_of(load_wire("gemini", "pydantic-ai__whole_call_with_id_gemini3_flash"))
    assert [(c.id, c.name, c.parsed_arguments) for c in turn.tool_calls] == [
        ("96c1su3s", "get_user_country", {})
    ]
    assert "synthesized_id" not in turn.normalizations
    assert turn.to_message()["parts"][0]["functionCall"]["id"] == "96c1su3s"
    assert turn.tool_messages(["France"]) == [
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "get_user_country",
                        "id": "96c1su3s",
                        "response": {"output": "France"},
                    }
                }
            ],
        }
    ]


@pytest.mark.parametrize("name", GEMINI)
def test_every_recording_is_detected_and_the_same_through_rx(name: str) -> None:
    events = load_wire("gemini", name)
    detected = turn_of(events)
    forced = turn_of(events, wire="gemini")
    piped = rx_turn(events)
    assert detected.wire == forced.wire == piped.wire == "gemini"
    assert without_ids(detected) == without_ids(forced) == without_ids(piped)
    assembler = rt.Assembler()
    assembler.feed(events[0])
    assert assembler.wire == "gemini"


# -- built cases ----------------------------------------------------------------------------


def test_parallel_whole_calls_spread_over_chunks_are_ordered_by_appearance() -> None:
    events = [
        g_response(g_text("Checking "), g_call("f", {"a": 1})),
        g_response(g_text("both."), g_call("g", {"b": [1, 2]}), g_call("f", {"a": 2})),
        g_stop(),
    ]
    turn = turn_of(events)
    assert calls(turn) == [(0, "f", {"a": 1}), (1, "g", {"b": [1, 2]}), (2, "f", {"a": 2})]
    assert turn.content == "Checking both."
    assert len({c.id for c in turn.tool_calls}) == 3
    assert [list(p) for p in turn.to_message()["parts"]] == [
        ["text"],
        ["functionCall"],
        ["text"],
        ["functionCall"],
        ["functionCall"],
    ]
    answers = turn.tool_messages(
        {turn.tool_calls[0].id: 1, turn.tool_calls[1].id: "x", turn.tool_calls[2].id: {"ok": True}}
    )
    assert answers == [
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "f", "response": {"output": 1}}},
                {"functionResponse": {"name": "g", "response": {"output": "x"}}},
                {"functionResponse": {"name": "f", "response": {"ok": True}}},
            ],
        }
    ]


def test_missing_ids_stay_unique_across_two_turns() -> None:
    events = [g_response(g_call("f", {}), g_call("f", {})), g_stop()]
    first, second = turn_of(events), rx_turn(events)
    ids = [c.id for c in (*first.tool_calls, *second.tool_calls)]
    assert len(set(ids)) == 4
    assert first.normalizations == second.normalizations == {"synthesized_id": 2}
    # A made-up id is never sent to the API.
    assert "id" not in first.to_message()["parts"][0]["functionCall"]
    assert "id" not in first.tool_messages([1, 2])[0]["parts"][0]["functionResponse"]


def test_made_up_ids_count_on_within_a_turn_from_a_draw_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    draws = iter([b"\xff" * 11 + b"\xfe", bytes(12)])
    monkeypatch.setattr(os, "urandom", lambda n: next(draws))
    # Near the top of the 96 bits: the count goes on past it, the ids stay 24 digits.
    both = [
        g_response(g_call("f", {}), g_call("f", {})),
        g_response(g_open("g")),
        g_response(G_CLOSE),
        g_stop(),
    ]
    ids = [c.id for c in turn_of(both).tool_calls]
    assert ids == ["call_" + "f" * 23 + "e", "call_" + "f" * 24, "call_" + "0" * 24]
    streamed = [g_response(g_open("g")), g_response(G_CLOSE), g_stop()]
    assert [c.id for c in rx_turn(streamed).tool_calls] == ["call_" + "0" * 24]


def test_nested_array_and_mixed_type_paths() -> None:
    events = [
        g_response(g_open("plan")),
        g_response(g_arg("$.title", "Tr", more=True), g_arg("$.title", "ip", more=True)),
        g_response(g_arg("$.title", "")),
        g_response(g_arg("$.days", 3), g_arg("$.budget", 1250.5), g_arg("$.flex", False)),
        g_response(g_arg("$.note", None), g_arg("$.grid[0][0]", 1), g_arg("$.grid[0][1]", 2)),
        g_response(g_arg("$.grid[1][0]", -3), g_arg("$.stops[0].name", "Oslo")),
        g_response(g_arg("$.stops[0].tags[0]", "north"), g_arg("$.stops[1].name", "Rome")),
        g_response(g_arg("$['a.b']", True), g_arg("$['it\\'s']", "q"), g_arg('$["x"].y', 0)),
        g_response(G_CLOSE),
        g_stop(),
    ]
    turn = turn_of(events)
    assert turn.tool_calls[0].parsed_arguments == {
        "title": "Trip",
        "days": 3,
        "budget": 1250.5,
        "flex": False,
        "note": None,
        "grid": [[1, 2], [-3]],
        "stops": [{"name": "Oslo", "tags": ["north"]}, {"name": "Rome"}],
        "a.b": True,
        "it's": "q",
        "x": {"y": 0},
    }


def test_calls_never_closed_are_complete_at_a_normal_end_only_when_lenient() -> None:
    events = [
        g_response(g_open("f")),
        g_response(g_arg("$.q", "abc")),
        g_response(g_open("g")),
        g_response(g_arg("$.n", 1)),
        g_stop(),
    ]
    for run in (turn_of, rx_turn):
        # Either call may have been cut between two values: nothing says it was not.
        with pytest.raises(rt.TruncatedToolCallError) as caught:
            run(events)
        assert caught.value.name == "f"
        turn = run(events, policy=rt.LENIENT)
        assert calls(turn) == [(0, "f", {"q": "abc"}), (1, "g", {"n": 1})]
        # f was closed by g's start, g by the finish.
        assert turn.normalizations["implicitly_closed_call"] == 2


def test_a_bare_name_is_a_call_without_arguments() -> None:
    turn = turn_of([g_response(g_call("now")), g_stop()])
    assert calls(turn) == [(0, "now", {})]
    assert turn.tool_calls[0].arguments == "{}"


def test_an_entry_without_a_value_is_skipped_and_a_null_value_is_null() -> None:
    entries = [
        {"jsonPath": "$.a", "willContinue": True},
        {"jsonPath": "$.b", "nullValue": None},
        {"jsonPath": "$.c", "stringValue": None, "numberValue": 7},
    ]
    events = [g_response({"functionCall": {"name": "f", "partialArgs": entries}}), g_stop()]
    turn = turn_of(events)
    assert calls(turn) == [(0, "f", {"b": None, "c": 7})]
    assert turn.normalizations["empty_partial_args"] == 1


def test_fragments_that_stop_saying_will_continue_close_the_call() -> None:
    last = {"functionCall": {"partialArgs": [{"jsonPath": "$.a", "numberValue": 1}]}}
    turn = turn_of([g_response(g_open("f")), g_response(last), g_response(g_call("g")), g_stop()])
    assert calls(turn) == [(0, "f", {"a": 1}), (1, "g", {})]
    assert "implicitly_closed_call" not in turn.normalizations


def test_max_tokens_in_the_middle_of_streamed_arguments_is_truncated() -> None:
    events = [
        g_response(g_open("write")),
        g_response(g_arg("$.text", "Once upon a", more=True)),
        g_response(g_arg("$.text", " time", more=True), finish="MAX_TOKENS"),
    ]
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.TruncatedToolCallError) as caught:
            run(events)
        assert caught.value.finish_reason == "MAX_TOKENS"
        assert caught.value.name == "write"


def test_nothing_is_taken_after_the_finish_even_for_the_call_left_open() -> None:
    events = [
        g_response(g_open("write")),
        g_response(g_arg("$.text", "Once", more=True), finish="MAX_TOKENS"),
        g_response(g_arg("$.text", " upon", more=True)),
    ]
    with pytest.raises(rt.MalformedChunkError, match="after its finishReason"):
        turn_of(events)
    with pytest.raises(rt.TruncatedToolCallError):
        turn_of(events[:2])


def test_max_tokens_with_a_whole_call_is_truncated_and_with_prose_is_emitted() -> None:
    with pytest.raises(rt.TruncatedToolCallError):
        turn_of([g_response(g_call("f", {"a": 1}), finish="MAX_TOKENS")])
    turn = turn_of([g_response(g_text("Long answer"), finish="MAX_TOKENS")])
    assert (turn.content, turn.finish_reason, turn.tool_calls) == ("Long answer", "MAX_TOKENS", ())


@pytest.mark.parametrize(
    "reason", ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"]
)
def test_every_blocked_finish_reason_is_content_filtered(reason: str) -> None:
    events = [g_response(g_text("Sure, here")), g_response(g_call("f", {}), finish=reason)]
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.ContentFilteredError) as caught:
            run(events)
        assert caught.value.finish_reason == reason


def test_a_blocked_prompt_is_content_filtered() -> None:
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {}}
    with pytest.raises(rt.ContentFilteredError) as caught:
        turn_of([blocked])
    assert caught.value.finish_reason == "PROHIBITED_CONTENT"


def test_malformed_function_call_carries_the_models_message_outside_its_text() -> None:
    said = "Malformed function call: print(default_api.login(password='hunter2'))"
    events = [g_response(finish="MALFORMED_FUNCTION_CALL", finishMessage=said)]
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.InvalidArgumentsError) as caught:
            run(events)
        assert caught.value.finish_reason == "MALFORMED_FUNCTION_CALL"
        assert caught.value.provider_message == said
        # The message quotes the call's arguments: never in what a log prints.
        assert "hunter2" not in f"{caught.value} {caught.value.hint} {caught.value!r}"
        assert "provider_message" in str(caught.value)


def test_other_finish_reasons_are_provider_errors() -> None:
    with pytest.raises(rt.ProviderError):
        turn_of([g_response(g_text("x"), finish="OTHER")])


def test_a_stream_without_any_finish_reason_is_interrupted() -> None:
    events = [g_response(g_text("Let me")), g_response(g_call("f", {"a": 1}))]
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.StreamInterruptedError) as caught:
            run(events)
        assert not isinstance(caught.value, rt.ProviderError)


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        ({"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}, True),
        ({"code": 503, "message": "The model is overloaded", "status": "UNAVAILABLE"}, True),
        ({"code": 400, "message": "Invalid JSON payload", "status": "INVALID_ARGUMENT"}, False),
    ],
)
def test_an_error_object_is_a_provider_error(error: dict[str, Any], retryable: bool) -> None:
    events = [g_response(g_text("Hel")), {"error": error}]
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.ProviderError) as caught:
            run(events, wire="gemini")
        assert caught.value.retryable is retryable
        assert caught.value.code == error["code"]
    with pytest.raises(rt.ProviderError):
        turn_of(events)


@pytest.mark.parametrize(
    ("fragments", "says"),
    [
        ([g_arg("$.a[1]", 1)], "elements come in order"),
        ([g_arg("$.a[0]", 1), g_arg("$.a[2]", 1)], "elements come in order"),
        ([g_arg("$.a", "x"), g_arg("$.a.b", 1)], "not an object"),
        ([g_arg("$.a", 1), g_arg("$.a", "1")], "set before"),
        ([g_arg("$.a", "x"), g_arg("$.a", "y")], "set before"),
        ([g_arg("$.a", 1), g_arg("$.a", 1)], "set before"),
        ([g_arg("$.a.b", 1), g_arg("$.a[0]", 1)], "not an array"),
        ([g_arg("$.a[0]", 1), g_arg("$.a.b", 1)], "not an object"),
        ([g_arg("$[0]", 1)], "index on an object"),
        ([g_arg("a.b", 1)], "does not start with"),
        ([g_arg("$.a[", 1)], "bad index"),
        ([g_arg("$.a[01]", 1)], "bad index"),
        ([g_arg("$..a", 1)], "empty key"),
        ([g_arg("$['a", 1)], "unclosed key"),
        ([g_arg("$", 1)], "whole object"),
        ([g_arg("$.a", 1, kind="stringValue")], "stringValue must be a string"),
        ([g_arg("$.a", "1", kind="numberValue")], "finite number"),
        ([g_arg("$.a", 1, kind="boolValue")], "boolValue must be a bool"),
    ],
)
def test_a_malformed_or_conflicting_path_is_malformed(fragments: list[Any], says: str) -> None:
    events = [g_response(g_open("f")), *(g_response(f) for f in fragments), g_stop()]
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.MalformedChunkError, match=re.escape(says)):
            run(events)


def test_fragments_without_an_open_call_and_broken_parts_are_malformed() -> None:
    broken: list[list[Any]] = [
        [g_response(g_arg("$.a", 1))],
        [g_response(G_CLOSE)],
        [
            g_response(
                {
                    "functionCall": {
                        "name": "f",
                        "partialArgs": [{"jsonPath": "$.a", "numberValue": 1, "boolValue": True}],
                    }
                }
            )
        ],
        [g_response({"functionCall": {"name": "f", "args": [1]}})],
        [g_response({"functionCall": {"name": "f", "args": {}, "partialArgs": []}})],
        [g_response({"functionCall": "f"})],
        [g_response(g_text("done"), finish="STOP"), g_response(g_text("more"))],
        [{"candidates": {"0": {}}}],
        [g_response(g_call("f", {"a": float("nan")}))],
    ]
    for events in broken:
        with pytest.raises(rt.MalformedChunkError):
            turn_of([*events, g_stop()], wire="gemini")


def test_limits_count_the_serialized_arguments() -> None:
    small = rt.Policy(limits=rt.Limits(max_call_arguments=20))
    with pytest.raises(rt.LimitExceededError) as caught:
        turn_of([g_response(g_call("f", {"text": "x" * 30})), g_stop()], policy=small)
    assert caught.value.limit == "max_call_arguments"
    streamed = [
        g_response(g_open("f")),
        *(g_response(g_arg("$.t", "xxxx", more=True)) for _ in range(10)),
    ]
    with pytest.raises(rt.LimitExceededError) as caught:
        turn_of([*streamed, g_stop()], policy=small)
    assert caught.value.limit == "max_call_arguments"
    turn = turn_of([g_response(g_call("f", {"text": "x" * 5})), g_stop()], policy=small)
    assert turn.tool_calls[0].parsed_arguments == {"text": "xxxxx"}
    shallow = rt.Policy(limits=rt.Limits(max_depth=4))
    with pytest.raises(rt.LimitExceededError) as caught:
        turn_of(
            [g_response(g_open("f")), g_response(g_arg("$.a.b.c.d.e", 1)), g_stop()], policy=shallow
        )
    assert caught.value.limit == "max_depth"


def test_text_and_thoughts_with_their_signatures() -> None:
    events = [
        g_response(g_text("Planning", thought=True)),
        g_response(g_text(" more", thought=True)),
        g_response(g_text("Hello"), g_text(" there")),
        g_response({"text": "", "thoughtSignature": "c2ln"}, finish="STOP"),
    ]
    turn = turn_of(events)
    assert (turn.reasoning, turn.content, turn.tool_calls) == ("Planning more", "Hello there", ())
    assert turn.to_message()["parts"] == [
        {"text": "Planning more", "thought": True},
        {"text": "Hello there"},
        {"text": "", "thoughtSignature": "c2ln"},
    ]
    assert turn.tool_messages([]) == []


def test_a_signature_on_a_fragment_stays_with_its_call() -> None:
    signed = {
        "functionCall": {
            "partialArgs": [{"jsonPath": "$.a", "numberValue": 1}],
            "willContinue": True,
        },
        "thoughtSignature": "c2ln",
    }
    turn = turn_of([g_response(g_open("f")), g_response(signed), g_response(G_CLOSE), g_stop()])
    assert turn.to_message()["parts"] == [
        {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "c2ln"}
    ]


def test_tool_messages_are_one_user_content_in_call_order() -> None:
    turn = turn_of([g_response(g_call("f", {}, id="a1"), g_call("g", {}, id="b2")), g_stop()])
    answers = turn.tool_messages({"b2": ValueError("no such city"), "a1": {"t": float("nan")}})
    assert answers == [
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "f", "id": "a1", "response": {"t": None}}},
                {
                    "functionResponse": {
                        "name": "g",
                        "id": "b2",
                        "response": {"error": "ValueError: no such city"},
                    }
                },
            ],
        }
    ]
    assert turn.exchange(["x", "y"])[0] == turn.to_message()
    assert turn.exchange(["x", "y"])[1]["role"] == "user"
    with pytest.raises(ValueError, match="expected 2 results"):
        turn.tool_messages(["only one"])


def test_operators_give_the_same_notifications_on_this_wire() -> None:
    events = [
        g_response(g_text("Let me.")),
        g_response(g_call("f", {"a": 1}, id="i1")),
        g_response(g_open("g")),
        g_response(g_arg("$.b[0]", 1), g_arg("$.b[1]", 2)),
        g_response(G_CLOSE),
        g_stop(),
    ]
    fused = rx_turn(events)
    piped = (
        reactivex.from_iterable(events)
        .pipe(
            rt.group_by_index(wire="gemini"),
            rt.concat_arguments(),
            rt.on_finish_reason(wire="gemini"),
            rt.atomic_batch(wire="gemini"),
        )
        .run()
    )
    assert without_ids(piped) == without_ids(fused) == without_ids(turn_of(events))
    assert calls(fused) == [(0, "f", {"a": 1}), (1, "g", {"b": [1, 2]})]
    started = reactivex.from_iterable(events).pipe(rt.progress(), ops.to_list()).run()
    assert [(s.index, s.name, s.count) for s in started] == [(0, "f", 1), (1, "g", 2)]
    assert started[0].id == "i1"
    life = reactivex.from_iterable(events).pipe(rt.lifecycle(every=1), ops.to_list()).run()
    assert [type(e).__name__ for e in life].count("ToolCallCommitted") == 2


def test_another_wire_in_a_gemini_stream_is_malformed() -> None:
    chat = {"choices": [{"index": 0, "delta": {"content": "x"}}]}
    with pytest.raises(rt.MalformedChunkError):
        turn_of([g_response(g_text("a")), chat, g_stop()])
    with pytest.raises(rt.MalformedChunkError):
        turn_of([chat, g_stop()], wire="gemini")
    with pytest.raises(rt.MalformedChunkError):
        turn_of(["not a response"], wire="gemini")


# -- streamed arguments equal whole arguments ------------------------------------------------

_KEYS = st.text(alphabet="ab.'[\\ _z", max_size=4)
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
# jsonPath can only set leaves, so nested containers are never empty.
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, min_size=1, max_size=3)
        | st.dictionaries(_KEYS, inner, min_size=1, max_size=3)
    ),
    max_leaves=12,
)
_OBJECTS = st.dictionaries(_KEYS, _VALUES, max_size=4)


def _step(key: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f".{key}"
    return "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, path + _step(k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{path}[{i}]")]
    return [(path, value)]


@settings(max_examples=200, deadline=None)
@given(obj=_OBJECTS, data=st.data())
def test_random_objects_streamed_by_path_equal_the_whole_call(
    obj: dict[str, Any], data: Any
) -> None:
    fragments: list[dict[str, Any]] = []
    for path, value in _leaves(obj, "$"):
        if isinstance(value, str) and value:
            cuts = sorted(set(data.draw(st.lists(st.integers(1, len(value)), max_size=3))))
            pieces = [value[a:b] for a, b in zip([0, *cuts], [*cuts, len(value)], strict=True)]
            if data.draw(st.booleans()):
                pieces.append("")  # Gemini ends a string with an empty piece
            fragments.extend(g_arg(path, p, more=True) for p in pieces[:-1])
            fragments.append(g_arg(path, pieces[-1]))
        else:
            fragments.append(g_arg(path, value))
    parts: list[dict[str, Any]] = [g_open("f"), *fragments]
    closed = data.draw(st.booleans())
    if closed:
        parts.append(G_CLOSE)
    # The parts go out in responses of random sizes, several per response at times.
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(parts)), max_size=6))))
    events = [
        g_response(*parts[a:b])
        for a, b in zip([0, *cuts], [*cuts, len(parts)], strict=True)
        if parts[a:b]
    ]
    # Without its close the call may be cut: only the lenient policy takes it.
    streamed = turn_of([*events, g_stop()], policy=rt.DEFAULT if closed else rt.LENIENT)
    whole = turn_of([g_response(g_call("f", obj)), g_stop()])
    assert streamed.tool_calls[0].parsed_arguments == whole.tool_calls[0].parsed_arguments == obj
    assert streamed.tool_calls[0].arguments == whole.tool_calls[0].arguments


# Whole args as Python hands them over: tuples, int keys, subclasses, empty containers.
_ANY_ARGS = st.recursive(
    _LEAVES | st.builds(lambda n: type("Number", (int,), {})(n), st.integers(-5, 5)),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(_KEYS | st.integers(-3, 3), inner, max_size=3)
    ),
    max_leaves=12,
)


def _containers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in _containers(v))]
    if isinstance(value, list | tuple):
        return [value, *(c for v in value for c in _containers(v))]
    return []


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(_KEYS | st.integers(-3, 3), _ANY_ARGS, max_size=4))
def test_whole_args_give_their_json_text_parsed_and_share_nothing_with_the_event(
    args: dict[Any, Any],
) -> None:
    text = json.dumps(args, ensure_ascii=False, allow_nan=False)
    keep = copy.deepcopy(args)
    for make in (turn_of, rx_turn):
        call = make([g_response(g_call("f", args)), g_stop()]).tool_calls[0]
        # The text as written, and the value as parsing that text gives it, whatever path
        # made it (an int key and its string spelled twice keep the last, as json.loads does).
        assert call.arguments == text
        assert call.parsed_arguments == json.loads(text)
        assert json.dumps(call.parsed_arguments) == json.dumps(json.loads(text))
        mine = {id(c) for c in _containers(call.parsed_arguments)}
        assert not mine & {id(c) for c in _containers(args)}
        for container in _containers(call.parsed_arguments):
            container.clear()  # the caller's own copy: the event is untouched
    assert args == keep


def test_whole_args_nested_past_max_depth_are_refused_and_within_it_kept() -> None:
    shallow = rt.Policy(limits=rt.Limits(max_depth=4))
    deep = {"a": {"b": [{"c": 1}]}}
    turn = turn_of([g_response(g_call("f", deep)), g_stop()], policy=shallow)
    assert turn.tool_calls[0].parsed_arguments == deep
    deeper: dict[str, Any]
    for deeper in ({"a": {"b": [{"c": {}}]}}, {"a": [[[[]]]]}):
        with pytest.raises(rt.LimitExceededError) as caught:
            turn_of([g_response(g_call("f", deeper)), g_stop()], policy=shallow)
        assert caught.value.limit == "max_depth"
    # Far deeper, under a limit that allows it: the same value as its text parses to.
    deep_list: list[Any] = []
    for _ in range(300):
        deep_list = [deep_list]
    generous = rt.Policy(limits=rt.Limits(max_depth=400))
    turn = turn_of([g_response(g_call("f", {"a": deep_list})), g_stop()], policy=generous)
    assert turn.tool_calls[0].parsed_arguments == {"a": deep_list}


def test_whole_args_with_a_key_written_twice_follow_the_duplicate_keys_rule() -> None:
    args: dict[Any, Any] = {1: "int", "1": "str"}
    events = [g_response(g_call("f", args)), g_stop()]
    assert turn_of(events).tool_calls[0].parsed_arguments == {"1": "str"}
    strict = rt.Policy(reject_duplicate_keys=True)
    with pytest.raises(rt.InvalidArgumentsError):
        turn_of(events, policy=strict)


# -- SSE bytes and the SDK's objects ----------------------------------------------------------


def from_pieces(pieces: list[bytes]) -> rt.AssistantTurn:
    decoder = SSEDecoder()
    assembler = rt.Assembler()
    for piece in pieces:
        for event in decoder.feed(piece):
            chunk = chunk_from_event(event)
            if chunk is DONE:
                break
            if chunk is not None:
                assembler.feed(chunk)
    return assembler.close()


@pytest.mark.json_parser
@pytest.mark.parametrize("name", GEMINI)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_split_of_the_sse_bytes_gives_the_same_turn(name: str, data: Any) -> None:
    raw = sse_bytes(load_wire_lines("gemini", name))
    assert b"event:" not in raw  # Gemini sends data lines only
    expected = without_ids(from_pieces([raw]))
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(raw)), max_size=40))))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert without_ids(from_pieces(pieces)) == expected
    assert expected == without_ids(turn_of(load_wire("gemini", name)))


@pytest.mark.json_parser
def test_from_sse_reads_a_gemini_body() -> None:
    raw = sse_bytes(load_wire_lines("gemini", "vercel-ai__partial_args_parallel_and_no_args"))
    lines = raw.splitlines(keepends=True)
    turn = rt.sources.from_sse(lines).pipe(rt.assemble()).run()
    assert [c.name for c in turn.tool_calls] == ["read_theme", *["read_screen"] * 3]
    error = b'data: {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}\n\n'
    with pytest.raises(rt.ProviderError) as caught:
        rt.sources.from_sse([*lines[:6], error]).pipe(rt.assemble()).run()
    assert caught.value.retryable is True


def _sdk(event: dict[str, Any]) -> Any:
    from google.genai import types

    # The SDK's own path from a response body to its object.
    return types.GenerateContentResponse._from_response(response=copy.deepcopy(event), kwargs={})


@pytest.mark.parametrize("name", GEMINI)
def test_google_genai_objects_assemble_like_dicts(name: str) -> None:
    pytest.importorskip("google.genai", reason=extra("gemini"))
    events = load_wire("gemini", name)
    objects = [_sdk(event) for event in events]
    from_objects = turn_of(objects)
    from_dicts = turn_of(events)
    ours, theirs = without_ids(from_objects), without_ids(from_dicts)
    # The SDK keeps only the fields it declares: compare what both kept.
    assert ours[:4] == theirs[:4]
    assert ours[4] == theirs[4]
    assert rx_turn(objects).wire == "gemini"


def test_sdk_signatures_go_back_in_the_wires_own_base64() -> None:
    pytest.importorskip("google.genai", reason=extra("gemini"))
    events = load_wire("gemini", "vercel-ai__partial_args_nested_paths")
    sent = signature(events, 0)
    assert "+" in sent or "/" in sent  # the URL-safe alphabet would differ
    turn = turn_of([_sdk(e) for e in events])
    kept = turn.to_message()["parts"][0]["thoughtSignature"]
    assert kept == sent
    assert (
        base64.b64decode(kept) == _sdk(events[0]).candidates[0].content.parts[0].thought_signature
    )


# -- policies, candidates, the agent loop -----------------------------------------------------


def test_an_undeclared_tool_is_refused_when_named() -> None:
    policy = rt.Policy(tools={"f": None})
    with pytest.raises(rt.UnknownToolError):
        turn_of([g_response(g_call("f", {})), g_response(g_open("g")), g_stop()], policy=policy)
    assert calls(turn_of([g_response(g_call("f", {})), g_stop()], policy=policy)) == [(0, "f", {})]


def test_each_candidate_is_a_choice_with_its_own_calls() -> None:
    both = {
        "candidates": [
            {"index": 0, "content": {"parts": [g_open("f")]}},
            {"index": 1, "content": {"parts": [g_call("g", {"x": 1})]}, "finishReason": "STOP"},
        ]
    }
    rest = {
        "candidates": [
            {"index": 0, "content": {"parts": [g_arg("$.y", 2), G_CLOSE]}, "finishReason": "STOP"}
        ]
    }
    assembler = rt.Assembler()
    assembler.feed(both)
    assembler.feed(rest)
    first, second = assembler.close_choices()
    assert (first.choice_index, calls(first)) == (0, [(0, "f", {"y": 2})])
    assert (second.choice_index, calls(second)) == (1, [(0, "g", {"x": 1})])
    with pytest.raises(rt.MultipleChoicesError):
        turn_of([both, rest])


def test_the_agent_loop_runs_on_this_wire() -> None:
    turns = [
        [g_response(g_call("add", {"a": 1, "b": 2}, id="c1")), g_stop()],
        [g_response(g_text("It is 3.")), g_stop()],
    ]
    sent: list[list[Any]] = []

    def open_stream(messages: list[Any]) -> list[dict[str, Any]]:
        sent.append(list(messages))
        return turns[len(sent) - 1]

    question = {"role": "user", "parts": [{"text": "1+2?"}]}
    conversation = (
        rt.agent_loop(open_stream, {"add": lambda a, b: a + b}, [question])
        .pipe(rt.final_conversation())
        .run()
    )
    assert conversation.messages == (
        question,
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"}}],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "add", "id": "c1", "response": {"output": 3}}}],
        },
        {"role": "model", "parts": [{"text": "It is 3."}]},
    )
    assert sent[1] == list(conversation.messages[:3])


def test_an_earlier_answer_is_not_reused_for_the_same_call_in_a_new_turn() -> None:
    earlier = [
        {"role": "user", "parts": [{"text": "1+2?"}]},
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"}}],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "add", "id": "c1", "response": {"output": "3!"}}}
            ],
        },
    ]
    # The same call, id and all, in a new turn: that answer pairs with the earlier turn only.
    turns = [
        [g_response(g_call("add", {"b": 2, "a": 1}, id="c1")), g_stop()],
        [g_response(g_text("It is 3.")), g_stop()],
    ]
    ran: list[Any] = []

    def add(a: int, b: int) -> int:
        ran.append((a, b))
        return a + b

    events = (
        rt.agent_loop(lambda messages: turns.pop(0), {"add": add}, earlier)
        .pipe(ops.to_list())
        .run()
    )
    finished = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert ran == [(1, 2)]
    assert [(f.content, f.reused) for f in finished] == [("3", False)]


def test_a_re_streamed_turn_never_runs_again_the_calls_gemini_sent_without_ids() -> None:
    # ops.retry subscribes the loop again: the first turn streams again, with new made-up
    # ids. The ledger knows such a call by its place in the turn: it is not run twice, and
    # two equal calls of one turn are still two calls.
    ran: list[Any] = []

    def weather(city: str) -> str:
        ran.append(city)
        return f"sunny in {city}"

    first = [
        g_response(g_call("weather", {"city": "Paris"}), g_call("weather", {"city": "Paris"})),
        g_response(g_call("weather", {"city": "Rome"}, id="given")),
        g_stop(),
    ]
    streams = 0

    def open_stream(messages: list[Any]) -> list[dict[str, Any]]:
        nonlocal streams
        streams += 1
        if len(messages) == 1:
            return first
        if streams == 2:
            raise rt.StreamInterruptedError("the connection dropped")
        return [g_response(g_text("Sunny.")), g_stop()]

    ledger: rt.Ledger = {}
    question = {"role": "user", "parts": [{"text": "Weather?"}]}
    events = (
        rt.agent_loop(open_stream, {"weather": weather}, [question], retries=0, ledger=ledger)
        .pipe(ops.retry(2), ops.to_list())
        .run()
    )
    finished = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert streams == 4
    assert sorted(ran) == ["Paris", "Paris", "Rome"]  # a turn's calls run concurrently
    assert [(f.call.name, f.reused) for f in finished] == [("weather", False)] * 3 + [
        ("weather", True)
    ] * 3
    assert len(ledger) == 3
    assert isinstance(events[-1], rt.Conversation)
    assert events[-1].final.content == "Sunny."


def test_sdk_objects_of_a_blocked_prompt_and_of_an_error_free_stream() -> None:
    pytest.importorskip("google.genai", reason=extra("gemini"))
    blocked = _sdk({"promptFeedback": {"blockReason": "SAFETY"}})
    assert blocked.candidates is None
    with pytest.raises(rt.ContentFilteredError):
        turn_of([blocked])
    assembler = rt.Assembler()
    assembler.feed(blocked)
    assert assembler.wire == "gemini"
    mixed = [
        _sdk(g_response(g_open("f"))),
        g_response(g_arg("$.a", "x")),
        _sdk(g_response(G_CLOSE)),
        _sdk(g_stop()),
    ]
    assert calls(turn_of(mixed)) == [(0, "f", {"a": "x"})]


# -- anything broken is a typed error ---------------------------------------------------------

_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["name", "args", "jsonPath", "text", "x"]), st.integers()),
)


def _places(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, inner in value.items():
            found.extend(_places(inner, (*at, key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found.extend(_places(inner, (*at, index)))
    return found


def _replace(value: Any, at: tuple[Any, ...], new: Any) -> Any:
    if not at:
        return new
    copied = copy.copy(value)
    copied[at[0]] = _replace(value[at[0]], at[1:], new)
    return copied


@pytest.mark.parametrize("name", GEMINI)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_broken_value_anywhere_is_a_typed_error_or_a_turn(name: str, data: Any) -> None:
    events = load_wire("gemini", name)
    at = data.draw(st.integers(0, len(events) - 1))
    place = data.draw(st.sampled_from(_places(events[at])))
    events = [*events[:at], _replace(events[at], place, data.draw(_JUNK)), *events[at + 1 :]]
    for run in (turn_of, rx_turn):
        try:
            turn = run(events)
        except rt.ToolCallStreamError:
            continue
        assert isinstance(turn, rt.AssistantTurn)
        json.dumps(turn.to_message())


@pytest.mark.parametrize("path", ["$.n", "$.a[0]", "$.deep.n"])
def test_an_integer_too_long_to_write_set_by_path_is_a_typed_error(path: str) -> None:
    big = 10**5000
    events = [g_response(g_open("f")), g_response(g_arg(path, big)), g_response(G_CLOSE), g_stop()]
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.MalformedChunkError) as caught:
            run(events)
        assert "digits" in str(caught.value)
        assert caught.value.name == "f"


@pytest.mark.parametrize(
    "blocked",
    [
        {"promptFeedback": {"blockReason": "SAFETY"}},
        {"candidates": [], "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}},
        {"candidates": None, "promptFeedback": {"blockReason": "OTHER"}},
    ],
    ids=["no-candidates-key", "empty-candidates", "null-candidates"],
)
def test_a_blocked_prompt_is_filtered_never_retried(blocked: dict[str, Any]) -> None:
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.ContentFilteredError) as caught:
            run([{**blocked, "usageMetadata": {"promptTokenCount": 3}}])
        assert caught.value.finish_reason == blocked["promptFeedback"]["blockReason"]
    opened: list[Any] = []

    def open_stream(messages: list[Any]) -> Any:
        opened.append(messages)
        return reactivex.from_iterable([blocked])

    errors: list[Exception] = []
    rt.agent_loop(open_stream, {}, [{"role": "user", "parts": [{"text": "hi"}]}], backoff=0.0).pipe(
        ops.to_list()
    ).subscribe(on_error=errors.append)
    assert [type(e) for e in errors] == [rt.ContentFilteredError]
    assert len(opened) == 1


# -- made-up ids: the same for every subscriber of one stream -----------------------------------


@pytest.mark.parametrize("name", GEMINI)
def test_two_subscribers_of_one_stream_make_the_same_ids(name: str) -> None:
    events = load_wire("gemini", name)
    published = reactivex.from_iterable(events).pipe(ops.publish())
    started: list[rt.ToolCallStarted] = []
    turns: list[rt.AssistantTurn] = []
    published.pipe(rt.progress()).subscribe(started.append)
    published.pipe(rt.assemble()).subscribe(turns.append)
    published.pipe(rt.assemble()).subscribe(turns.append)
    published.connect()
    first, second = turns
    assert [c.id for c in first.tool_calls] == [c.id for c in second.tool_calls]
    assert [s.id for s in started] == [c.id for c in first.tool_calls]
    assert [c.id for c in turn_of(events).tool_calls] == [c.id for c in first.tool_calls]


def test_ids_made_from_the_response_id_differ_between_responses_and_places() -> None:
    def turn(response_id: str | None) -> list[str]:
        events = [
            g_response(g_call("f", {}), g_call("f", {})),
            g_response(g_open("g")),
            g_response(G_CLOSE),
            g_stop(),
        ]
        if response_id is not None:
            events = [{**event, "responseId": response_id} for event in events]
        return [c.id for c in turn_of(events).tool_calls]

    first, again, other = turn("resp-1"), turn("resp-1"), turn("resp-2")
    assert first == again
    assert len(set(first + other)) == 6
    assert all(SYNTHESIZED.fullmatch(i) for i in first + other)
    # Without a response id nothing ties two readers together: each draws its own.
    assert len(set(turn(None) + turn(None))) == 6


def test_subscribers_agree_when_only_the_first_response_carries_the_response_id() -> None:
    events = [
        {**g_response(g_text("Let me check.")), "responseId": "resp-7"},
        g_response(g_call("get_time", {})),
        g_stop(),
    ]
    published = reactivex.from_iterable(events).pipe(ops.publish())
    started: list[rt.ToolCallStarted] = []
    turns: list[rt.AssistantTurn] = []
    published.pipe(rt.progress()).subscribe(started.append)
    published.pipe(rt.assemble()).subscribe(turns.append)
    published.connect()
    assert [s.id for s in started] == [c.id for c in turns[0].tool_calls]
    assert [c.id for c in turn_of(events).tool_calls] == [s.id for s in started]


def test_many_signed_fragments_of_one_call_keep_the_first_signature_of_each_key() -> None:
    signed = [
        g_response({**g_arg(f"$.a[{n}]", n), "thoughtSignature": f"sig{n}", f"k{n % 3}": n})
        for n in range(3000)
    ]
    events = [g_response(g_open("f")), *signed, g_response(G_CLOSE), g_stop()]
    for run in (turn_of, rx_turn):
        turn = run(events)
        part = turn.to_message()["parts"][0]
        assert part["functionCall"]["args"] == {"a": list(range(3000))}
        assert (part["thoughtSignature"], part["k0"], part["k1"], part["k2"]) == ("sig0", 0, 1, 2)


def test_subscribers_agree_when_the_response_id_changes_mid_stream() -> None:
    events = [
        {**g_response(g_call("f", {}, id="given")), "responseId": "A"},
        {**g_response(g_call("g", {})), "responseId": "B"},
        g_stop(),
    ]
    published = reactivex.from_iterable(events).pipe(ops.publish())
    seen: list[Any] = []
    turns: list[rt.AssistantTurn] = []
    published.pipe(rt.lifecycle()).subscribe(seen.append)
    published.pipe(rt.assemble()).subscribe(turns.append)
    published.connect()
    committed = [e.call.id for e in seen if isinstance(e, rt.ToolCallCommitted)]
    assert committed == [c.id for c in turns[0].tool_calls]
    assert committed[0] == "given"
