"""Every recorded stream reconstructs to its expected result, or to its documented error."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from tests.helpers import (
    fixture_names,
    load_expected,
    load_fixture,
    outcome,
    run_assemble,
    run_assembler,
    run_pipe,
)

WITH_EXPECTED = [n for n in fixture_names() if load_expected(n) is not None]


def _choice_view(turn: rt.AssistantTurn) -> dict[str, Any]:
    return {
        "index": turn.choice_index,
        "finish_reason": turn.finish_reason,
        "content": turn.content,
        "tool_calls": [
            {
                "index": c.index,
                "id": c.id,
                "type": c.type,
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in turn.tool_calls
        ]
        or None,
    }


def _assemble_all(chunks: list[dict[str, Any]], **kwargs: Any) -> tuple[rt.AssistantTurn, ...]:
    result: tuple[rt.AssistantTurn, ...] = (
        reactivex.from_iterable(chunks).pipe(rt.assemble_choices(**kwargs)).run()
    )
    return result


def test_every_fixture_is_covered() -> None:
    assert len(fixture_names()) == 33  # 31 shared recordings + 2 recorded here
    assert set(WITH_EXPECTED) | set(DOCUMENTED) == set(fixture_names())


@pytest.mark.parametrize("name", WITH_EXPECTED)
def test_fixture_matches_expected(name: str) -> None:
    expected = load_expected(name)
    assert expected is not None
    chunks = load_fixture(name)
    needs_finish = all(c["finish_reason"] is not None for c in expected["choices"])
    turns = _assemble_all(chunks, require_finish_reason=needs_finish)
    assert [_choice_view(t) for t in turns] == expected["choices"]
    for turn in turns:
        for call in turn.tool_calls:
            assert isinstance(call.parsed_arguments, dict)


@pytest.mark.parametrize("name", fixture_names())
def test_three_spellings_agree(name: str) -> None:
    chunks = load_fixture(name)
    for flag in (True, False):
        first = outcome(run_assemble, chunks, require_finish_reason=flag)
        assert outcome(run_pipe, chunks, require_finish_reason=flag) == first
        assert outcome(run_assembler, chunks, require_finish_reason=flag) == first


# Streams with no expected file: what rxtoolcalls does with them under assemble(), and, for
# those that never send a finish_reason, under require_finish_reason=False.
DOCUMENTED: dict[str, dict[str, Any]] = {
    "azure__model_router_prompt_filter_empty_choices": {
        "default": {"finish_reason": "stop", "content": "Capital of Denmark.", "calls": []}
    },
    "cerebras__zai_glm_reasoning_single_chunk_tool_call": {
        "default": {"finish_reason": "tool_calls", "calls": [("nonUsefulTool", "{}")]},
        "reasoning": True,
    },
    "copilot__legacy_function_call": {
        "default": {
            "finish_reason": "function_call",
            "calls": [],
            "function_call": "get_current_weather",
        }
    },
    "copilot__n3_sequential_choices_prompt_filter": {"default": rt.MultipleChoicesError},
    "openai__gpt4o_mini_multiple_choices_n2_interleaved": {"default": rt.MultipleChoicesError},
    "llamacpp__gemma3_270m_forced_tool_call_function_call_mirror": {
        "default": {"finish_reason": "tool_calls", "calls": [("get_weather", None)]},
        "mirror": True,
    },
    "llamacpp__gemma3_270m_max_tokens_4_cut_labelled_tool_calls": {
        "default": rt.TruncatedToolCallError
    },
    "openai__multiple_choices_n3": {"default": rt.MultipleChoicesError},
    "openai__gpt5_mini_length_no_visible_output": {
        "default": {"finish_reason": "length", "content": "", "calls": []}
    },
    "openai__length_finish_usage_only_chunk": {
        "default": {"finish_reason": "length", "content": '{"', "calls": []}
    },
    "openai__long_arguments_many_fragments": {
        "default": {"finish_reason": "tool_calls", "calls": [("final_result", None)]}
    },
    "openai__refusal_deltas": {
        "default": {"finish_reason": "stop", "content": None, "calls": []},
        "refusal": True,
    },
    "openrouter__novita_kimi_k2_name_repeated_no_finish": {
        "default": rt.StreamInterruptedError,
        "lenient": {"finish_reason": None, "calls": [("llm_version", "{}")]},
    },
    "openrouter__novita_kimi_k2_name_only_fragment": {
        "default": {"finish_reason": "tool_calls", "calls": [("llm_version", "{}")]}
    },
    "snowflake__cortex_no_finish_reason": {
        "default": rt.StreamInterruptedError,
        "lenient": {"finish_reason": None, "calls": []},
    },
    "tgi__llama31_content_length_tool_calls_null": {
        "default": {"finish_reason": "length", "calls": []}
    },
}
# Fixtures with an expected file that also have a documented default error.
DOCUMENTED_EXPECTED_ERRORS = {
    "tgi__llama31_tool_call_id_repeated_no_finish": rt.StreamInterruptedError,
}


def _check(turn: rt.AssistantTurn, spec: dict[str, Any]) -> None:
    assert turn.finish_reason == spec["finish_reason"]
    if "function_call" in spec:
        assert turn.function_call is not None
        assert turn.function_call.name == spec["function_call"]
        assert isinstance(turn.function_call.parsed_arguments, dict)
    else:
        assert turn.function_call is None
    if "content" in spec:
        assert turn.content == spec["content"]
    assert len(turn.tool_calls) == len(spec["calls"])
    for call, (name, arguments) in zip(turn.tool_calls, spec["calls"], strict=True):
        assert call.name == name
        if arguments is not None:
            assert call.arguments == arguments
        assert isinstance(call.parsed_arguments, dict)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_documented_outcome(name: str) -> None:
    spec = DOCUMENTED[name]
    chunks = load_fixture(name)
    default = spec["default"]
    if isinstance(default, type):
        with pytest.raises(default) as info:
            run_assemble(chunks)
        assert str(info.value)
    else:
        turn = run_assemble(chunks)
        _check(turn, default)
        if spec.get("reasoning"):
            assert turn.reasoning
        if spec.get("mirror"):
            mirrored = sum(1 for c in chunks if c["choices"][0]["delta"].get("function_call"))
            assert mirrored > 10
            assert turn.normalizations == {"ignored_function_call_mirror": mirrored}
        if spec.get("refusal"):
            assert turn.refusal
            assert turn.refusal.strip()
    if "lenient" in spec:
        _check(run_assemble(chunks, require_finish_reason=False), spec["lenient"])


@pytest.mark.parametrize("name", sorted(DOCUMENTED_EXPECTED_ERRORS))
def test_documented_default_error(name: str) -> None:
    with pytest.raises(DOCUMENTED_EXPECTED_ERRORS[name], match="without a finish_reason") as caught:
        run_assemble(load_fixture(name))
    assert "require_finish_reason=False" in (caught.value.hint or "")


def test_multi_choice_fixture_without_expected_file() -> None:
    turns = _assemble_all(load_fixture("openai__gpt4o_mini_multiple_choices_n2_interleaved"))
    assert [t.choice_index for t in turns] == [0, 1]
    assert all(t.finish_reason == "stop" and t.content for t in turns)
    assert turns[0].content != turns[1].content
