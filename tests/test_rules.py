"""The assembler's rules, each through all three spellings (Assembler, assemble(), the pipe)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import rxtoolcalls as rt
from tests.helpers import (
    USAGE_CHUNK,
    Chunk,
    args,
    call_open,
    choice,
    content,
    finish,
    run_assemble,
    run_assembler,
    run_pipe,
    summary,
)

Runner = Callable[..., rt.AssistantTurn]


@pytest.fixture(params=[run_assembler, run_assemble, run_pipe], ids=["core", "assemble", "pipe"])
def run(request: pytest.FixtureRequest) -> Runner:
    runner: Runner = request.param
    return runner


WEATHER = [
    call_open(0, "call_a", "get_weather"),
    args(0, '{"city": '),
    args(0, '"Paris"}'),
    finish("tool_calls"),
]


def test_reference_stream(run: Runner) -> None:
    turn = run([choice({"role": "assistant", "content": None}), *WEATHER, USAGE_CHUNK])
    assert summary(turn) == [(0, "call_a", "get_weather", '{"city": "Paris"}')]
    assert turn.tool_calls[0].parsed_arguments == {"city": "Paris"}
    assert turn.tool_calls[0].type == "function"
    assert turn.finish_reason == "tool_calls"
    assert turn.content is None
    assert turn.usage == {"prompt_tokens": 5, "completion_tokens": 7}
    assert turn.has_tool_calls


def test_interleaved_calls_are_keyed_on_index_and_ordered(run: Runner) -> None:
    turn = run(
        [
            call_open(1, "call_b", "get_time"),
            call_open(0, "call_a", "get_weather"),
            args(1, '{"tz": '),
            args(0, '{"city": '),
            args(0, '"Paris"}'),
            args(1, '"UTC"}'),
            finish(),
        ]
    )
    assert summary(turn) == [
        (0, "call_a", "get_weather", '{"city": "Paris"}'),
        (1, "call_b", "get_time", '{"tz": "UTC"}'),
    ]


def test_several_fragments_in_one_chunk_apply_in_order(run: Runner) -> None:
    chunk = choice(
        {
            "tool_calls": [
                {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f"}},
                {"index": 0, "function": {"arguments": '{"a"'}},
                {"index": 0, "function": {"arguments": ": 1}"}},
            ]
        }
    )
    assert summary(run([chunk, finish()])) == [(0, "call_a", "f", '{"a": 1}')]


def test_indices_are_opaque_keys(run: Runner) -> None:
    turn = run(
        [
            call_open(7, "call_b", "g", "{}"),
            call_open(-1, "call_a", "f", "{}"),
            call_open(3, "call_c", "h", "{}"),
            finish(),
        ]
    )
    assert [c.index for c in turn.tool_calls] == [-1, 3, 7]


@pytest.mark.parametrize("field", ["id", "type", "name"])
@pytest.mark.parametrize("repeat", ["", None, "same"])
def test_identity_repeats_are_no_ops(run: Runner, field: str, repeat: str | None) -> None:
    values = {"id": "call_a", "type": "function", "name": "get_weather"}
    later = values[field] if repeat == "same" else repeat
    entry: dict[str, Any] = {"index": 0, "function": {"arguments": '"Paris"}'}}
    if field == "name":
        entry["function"]["name"] = later
    else:
        entry[field] = later
    turn = run(
        [
            call_open(0, "call_a", "get_weather", '{"city": '),
            choice({"tool_calls": [entry]}),
            finish(),
        ]
    )
    assert summary(turn) == [(0, "call_a", "get_weather", '{"city": "Paris"}')]


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"index": 0, "id": "call_z", "function": {"arguments": "}"}}, "id changed"),
        ({"index": 0, "type": "custom", "function": {"arguments": "}"}}, "type changed"),
        ({"index": 0, "function": {"name": "ther", "arguments": "}"}}, "never concatenated"),
    ],
)
def test_conflicting_identity_is_an_error(run: Runner, entry: dict[str, Any], match: str) -> None:
    with pytest.raises(rt.MalformedChunkError, match=match) as info:
        run([call_open(0, "call_a", "get_wea", "{"), choice({"tool_calls": [entry]}), finish()])
    assert "tool call 0" in str(info.value)


def test_name_after_arguments(run: Runner) -> None:
    turn = run(
        [
            call_open(0, "call_a", None, '{"city": '),
            choice(
                {
                    "tool_calls": [
                        {"index": 0, "function": {"name": "get_weather", "arguments": '"Paris"}'}}
                    ]
                }
            ),
            finish(),
        ]
    )
    assert summary(turn) == [(0, "call_a", "get_weather", '{"city": "Paris"}')]


def test_missing_index_on_the_only_call(run: Runner) -> None:
    turn = run(
        [
            choice({"tool_calls": [{"id": "call_a", "function": {"name": "f", "arguments": ""}}]}),
            choice({"tool_calls": [{"function": {"arguments": '{"a": '}}]}),
            choice({"tool_calls": [{"function": {"arguments": "1}"}}]}),
            finish(),
        ]
    )
    assert summary(turn) == [(0, "call_a", "f", '{"a": 1}')]


def test_missing_index_with_new_ids_opens_new_calls(run: Runner) -> None:
    turn = run(
        [
            choice(
                {"tool_calls": [{"id": "call_a", "function": {"name": "f", "arguments": "{}"}}]}
            ),
            choice(
                {"tool_calls": [{"id": "call_b", "function": {"name": "g", "arguments": "{}"}}]}
            ),
            finish(),
        ]
    )
    assert summary(turn) == [(0, "call_a", "f", "{}"), (1, "call_b", "g", "{}")]


def test_missing_index_is_ambiguous_with_several_calls(run: Runner) -> None:
    with pytest.raises(rt.MalformedChunkError, match="could belong to any"):
        run(
            [
                call_open(0, "call_a", "f"),
                call_open(1, "call_b", "g"),
                choice({"tool_calls": [{"function": {"arguments": "{}"}}]}),
                finish(),
            ]
        )


def test_whole_call_and_finish_in_one_chunk(run: Runner) -> None:
    chunk = choice(
        {
            "tool_calls": [
                {"index": 0, "id": "call_a", "function": {"name": "f", "arguments": "{}"}}
            ]
        },
        "tool_calls",
    )
    turn = run([choice({"role": "assistant"}), chunk])
    assert summary(turn) == [(0, "call_a", "f", "{}")]
    assert turn.finish_reason == "tool_calls"


def test_stop_keeps_the_calls(run: Runner) -> None:
    turn = run([*WEATHER[:-1], finish("stop")])
    assert turn.finish_reason == "stop"
    assert turn.has_tool_calls


def test_prose_before_and_after_calls(run: Runner) -> None:
    turn = run([content("Let me "), content("check."), *WEATHER[:-1], content(" Done."), finish()])
    assert turn.content == "Let me check. Done."
    assert len(turn.tool_calls) == 1


def test_reasoning_and_refusal_are_side_channels(run: Runner) -> None:
    turn = run(
        [
            choice({"reasoning_content": "Need "}),
            choice({"reasoning": "weather."}),
            *WEATHER[:-1],
            choice({"refusal": "no"}),
            finish(),
        ]
    )
    assert turn.reasoning == "Need weather."
    assert turn.refusal == "no"
    assert turn.content is None
    assert len(turn.tool_calls) == 1


def test_empty_choices_null_delta_and_unknown_fields(run: Runner) -> None:
    turn = run(
        [
            {"choices": [], "prompt_filter_results": [{"prompt_index": 0}]},
            {"choices": None},
            {"id": "x"},
            choice(None),
            {
                "choices": [
                    {"index": 0, "delta": {"content": "Hi", "x_extra": {"a": 1}}, "logprobs": None}
                ]
            },
            finish("stop"),
            USAGE_CHUNK,
        ]
    )
    assert turn.content == "Hi"
    assert turn.usage == USAGE_CHUNK["usage"]


def test_first_finish_reason_is_kept_and_empty_means_null(run: Runner) -> None:
    turn = run([content("Hi"), finish(""), finish("stop"), finish("length")])
    assert turn.finish_reason == "stop"


def test_missing_finish_reason(run: Runner) -> None:
    with pytest.raises(rt.StreamInterruptedError, match="without a finish_reason") as info:
        run(WEATHER[:-1])
    assert "require_finish_reason=False" in (info.value.hint or "")
    turn = run(WEATHER[:-1], require_finish_reason=False)
    assert turn.finish_reason is None
    assert len(turn.tool_calls) == 1


def test_missing_finish_reason_with_cut_arguments_is_still_an_error(run: Runner) -> None:
    with pytest.raises(rt.TruncatedToolCallError):
        run(WEATHER[:2], require_finish_reason=False)


def test_length_during_a_call(run: Runner) -> None:
    with pytest.raises(rt.TruncatedToolCallError, match="get_weather") as info:
        run([*WEATHER[:2], finish("length")])
    assert (info.value.index, info.value.name) == (0, "get_weather")


def test_length_even_with_parseable_arguments(run: Runner) -> None:
    with pytest.raises(rt.TruncatedToolCallError):
        run([*WEATHER[:-1], finish("length")])


def test_length_with_prose_only_emits_the_text(run: Runner) -> None:
    turn = run([content("Once upon"), finish("length")])
    assert (turn.content, turn.finish_reason) == ("Once upon", "length")


def test_content_filter(run: Runner) -> None:
    with pytest.raises(rt.ContentFilteredError):
        run([content("Hi"), finish("content_filter")])


def test_finish_reason_error_and_in_band_errors(run: Runner) -> None:
    with pytest.raises(rt.ProviderError):
        run([*WEATHER[:2], finish("error")])
    with pytest.raises(rt.ProviderError, match="server_error") as info:
        run([*WEATHER[:2], {"error": {"message": "boom", "type": "server_error"}}])
    assert info.value.code == "server_error"
    with pytest.raises(rt.ProviderError, match="Engine died"):
        run([*WEATHER[:2], {"object": "error", "message": "Engine died", "code": 500}])


def test_tool_calls_truncated_despite_finish_reason(run: Runner) -> None:
    # A real llama.cpp server labels output cut by max_tokens "tool_calls".
    with pytest.raises(rt.TruncatedToolCallError, match="end inside a JSON value"):
        run([call_open(0, "call_a", "get_weather", '{ "city":'), finish("tool_calls")])


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "Par',
        '{"a": 1',
        '{"a": tr',
        '{"a": 1.',
        '{"a": -',
        '{"a": 1e',
        "{",
        '{"a',
        '{"a": [1, ',
    ],
)
def test_every_truncation_is_a_truncation_error(run: Runner, text: str) -> None:
    with pytest.raises(rt.TruncatedToolCallError):
        run([call_open(0, "call_a", "f", text), finish()])


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}{"a": 1}',
        '{"a": 1}}',
        "[1, 2]",
        '"text"',
        "{'a': 1}",
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": 1e999}',
        '{"a": -1e999}',
        '{"a": [0.5, 1E+400]}',
        '{"a": ' + "9" * 400 + ".0}",
        "",
        "  ",
    ],
)
def test_invalid_arguments(run: Runner, text: str) -> None:
    with pytest.raises(rt.InvalidArgumentsError, match="tool call 0 \\(f\\)"):
        run([call_open(0, "call_a", "f", text), finish()])


def test_deep_nesting_is_a_typed_error(run: Runner) -> None:
    text = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(rt.LimitExceededError) as info:
        run([call_open(0, "call_a", "f", text), finish()])
    assert info.value.limit == "max_depth"


def test_a_call_without_name_or_id(run: Runner) -> None:
    with pytest.raises(rt.MalformedChunkError, match="no function name"):
        run([call_open(0, "call_a", None, "{}"), finish()])
    with pytest.raises(rt.MalformedChunkError, match="no id"):
        run([call_open(0, None, "f", "{}"), finish()])


BAD_CHUNKS: list[object] = [
    None,
    "data: {}",
    42,
    [],
    {"choices": "x"},
    {"choices": [None]},
    {"choices": [{"index": "0", "delta": {}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [7]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "0", "function": {}}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": "x"}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": 5, "function": {}}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": 1}}]}}]},
    {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]},
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {"content": 5}}]},
    {"choices": [{"index": 0, "delta": "text"}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": 3}]},
    {"choices": [], "usage": 5},
    {"choices": [{"index": 0, "delta": {"function_call": {"name": "f", "arguments": "{}"}}}]},
]


@pytest.mark.parametrize("bad", BAD_CHUNKS, ids=[repr(b)[:50] for b in BAD_CHUNKS])
def test_bad_chunks_are_malformed_chunk_errors(run: Runner, bad: object) -> None:
    with pytest.raises(rt.MalformedChunkError) as info:
        run([*WEATHER[:2], bad, *WEATHER[2:]])
    assert str(info.value)


def test_legacy_function_call_mirrored_in_tool_calls_is_ignored(run: Runner) -> None:
    # llama.cpp's server mirrors each tool-call fragment into function_call.
    mirror = choice(
        {
            "function_call": {"name": "f", "arguments": "{}"},
            "tool_calls": [
                {"index": 0, "id": "call_a", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    )
    assert summary(run([mirror, finish()])) == [(0, "call_a", "f", "{}")]


def test_empty_stream_is_an_interruption(run: Runner) -> None:
    with pytest.raises(rt.StreamInterruptedError, match="without any choice"):
        run([])
    with pytest.raises(rt.StreamInterruptedError):
        run([USAGE_CHUNK], require_finish_reason=False)


def test_multiple_choices_are_refused_by_single_turn_spellings(run: Runner) -> None:
    with pytest.raises(rt.MultipleChoicesError, match="2 choices") as info:
        run([content("a", 0), content("b", 1), finish("stop", 0), finish("stop", 1)])
    assert "assemble_choices()" in (info.value.hint or "")


def test_multiple_choices_with_tool_calls_are_kept_apart() -> None:
    chunks: list[Chunk] = [
        {
            "choices": [
                {"index": 0, "delta": {"role": "assistant"}},
                {"index": 1, "delta": {"role": "assistant"}},
            ]
        },
        call_open(0, "call_a", "get_weather", '{"city": "Paris"}', choice_index=0),
        call_open(0, "call_b", "get_time", '{"tz": ', choice_index=1),
        args(0, '"UTC"}', choice_index=1),
        finish("tool_calls", 0),
        finish("tool_calls", 1),
    ]
    assembler = rt.Assembler()
    for chunk in chunks:
        assembler.feed(chunk)
    turns = assembler.close_choices()
    assert [summary(t) for t in turns] == [
        [(0, "call_a", "get_weather", '{"city": "Paris"}')],
        [(0, "call_b", "get_time", '{"tz": "UTC"}')],
    ]
    assert [t.choice_index for t in turns] == [0, 1]


def test_one_bad_choice_fails_all_choices() -> None:
    chunks = [
        call_open(0, "call_a", "f", "{}", choice_index=0),
        call_open(0, "call_b", "g", '{"x": ', choice_index=1),
        finish("tool_calls", 0),
        finish("length", 1),
    ]
    assembler = rt.Assembler()
    for chunk in chunks:
        assembler.feed(chunk)
    with pytest.raises(rt.TruncatedToolCallError, match="choice 1") as info:
        assembler.close_choices()
    assert info.value.choice_index == 1


def test_feed_returns_started_events_on_the_naming_chunk() -> None:
    assembler = rt.Assembler()
    assert assembler.feed(content("Hi")) == ()
    assert assembler.feed(call_open(0, "call_a", None, "{")) == ()
    assert list(
        assembler.feed(choice({"tool_calls": [{"index": 0, "function": {"name": "f"}}]}))
    ) == [rt.ToolCallStarted(0, "call_a", "f", 1)]
    assert list(assembler.feed(call_open(1, "call_b", "g", "{}"))) == [
        rt.ToolCallStarted(1, "call_b", "g", 2)
    ]
    assert assembler.feed(args(0, "}")) == ()


def test_errors_share_one_root() -> None:
    for kind in (
        rt.MalformedChunkError,
        rt.MultipleChoicesError,
        rt.StreamInterruptedError,
        rt.ProviderError,
        rt.TruncatedToolCallError,
        rt.ContentFilteredError,
        rt.InvalidArgumentsError,
    ):
        assert issubclass(kind, rt.ToolCallStreamError)


def test_arguments_are_kept_verbatim() -> None:
    text = '{ "city" :\r\n "Par\\u00eds" ,\r "n": 1.50 }'
    turn = run_assembler([call_open(0, "call_a", "f", text), finish()])
    assert turn.tool_calls[0].arguments == text
    assert turn.tool_calls[0].parsed_arguments == json.loads(text)


def test_text_fields_are_kept_verbatim(run: Runner) -> None:
    turn = run([content("a\r\n"), content("b\r"), content(""), finish("stop")])
    assert turn.content == "a\r\nb\r"


def test_an_overflowing_number_is_refused_and_a_large_finite_one_kept(run: Runner) -> None:
    with pytest.raises(rt.InvalidArgumentsError, match="infinity"):
        run([call_open(0, "call_a", "f", '{"a": 1e999}'), finish()])
    turn = run([call_open(0, "call_a", "f", '{"a": 1e308, "b": -1.5e-400}'), finish()])
    assert turn.tool_calls[0].parsed_arguments == {"a": 1e308, "b": -0.0}
