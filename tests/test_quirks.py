"""The provider-quirk catalogue (shared research, items 1-24), under DEFAULT and LENIENT.

Each case is the catalogue's minimal chunk sequence; the manual's "Provider compatibility"
table is rendered from this list, and a test checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from tests.helpers import Chunk, outcome, run_assembler

A = '{"city": "Paris"}'


def D(delta: dict[str, Any] | None, **extra: Any) -> Chunk:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}], **extra}


def F(reason: str | None) -> Chunk:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def tc(**entry: Any) -> Chunk:
    return D({"tool_calls": [entry]})


def fn(name: str | None = None, arguments: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name is not None:
        out["name"] = name
    if arguments is not None:
        out["arguments"] = arguments
    return out


OPEN = tc(index=0, id="call_a", type="function", function=fn("get_weather", ""))
WEATHER = [("call_a", "get_weather", A)]


@dataclass(frozen=True)
class Ok:
    """An expected turn: calls as (id, name, arguments); ``id=None`` means synthesized."""

    calls: Sequence[tuple[str | None, str, str]]
    finish: str | None = "tool_calls"
    fixes: tuple[str, ...] = ()
    check: str = ""  # a named extra check, see _extra_check


@dataclass(frozen=True)
class Case:
    item: str
    title: str
    seen: str
    chunks: list[Chunk]
    default: Ok | type[rt.ToolCallStreamError]
    lenient: Ok | type[rt.ToolCallStreamError]
    choices: bool = False
    notes: dict[str, str] = field(default_factory=dict)


CASES: list[Case] = [
    Case(
        "1",
        "`index` missing, fragmented, one call",
        "Gemini, Ollama, mistral.rs, LM Studio",
        [
            tc(id="call_a", type="function", function=fn("get_weather", "")),
            tc(function=fn(arguments='{"city": ')),
            tc(function=fn(arguments='"Paris"}')),
            F("tool_calls"),
        ],
        Ok(WEATHER),
        Ok(WEATHER),
    ),
    Case(
        "1b",
        "`index` missing on call 0 only (Go `omitempty`)",
        "Ollama",
        [
            tc(id="call_a", type="function", function=fn("get_weather", A)),
            tc(index=1, id="call_b", type="function", function=fn("get_time", "{}")),
            F("tool_calls"),
        ],
        Ok([*WEATHER, ("call_b", "get_time", "{}")]),
        Ok([*WEATHER, ("call_b", "get_time", "{}")]),
    ),
    Case(
        "1c",
        "`index` missing on parallel calls, each with its own id",
        "Gemini",
        [
            tc(id="call_a", type="function", function=fn("get_weather", A)),
            tc(id="call_b", type="function", function=fn("get_time", "{}")),
            F("tool_calls"),
        ],
        Ok([*WEATHER, ("call_b", "get_time", "{}")]),
        Ok([*WEATHER, ("call_b", "get_time", "{}")]),
    ),
    Case(
        "1d",
        "`index` missing with several calls open and no id: ambiguous",
        "Gemini",
        [
            tc(id="call_a", type="function", function=fn("get_weather", "")),
            tc(id="call_b", type="function", function=fn("get_time", "")),
            tc(function=fn(arguments="{}")),
            F("tool_calls"),
        ],
        rt.MalformedChunkError,
        rt.MalformedChunkError,
    ),
    Case(
        "2",
        "parallel calls all `index: 0`, told apart by `id`",
        "Ollama, vLLM, SGLang, Bedrock via LangChain",
        [
            OPEN,
            tc(index=0, id="", function=fn(arguments=A)),
            tc(index=0, id="call_b", type="function", function=fn("get_time", "")),
            tc(index=0, id="", function=fn(arguments='{"tz": "UTC"}')),
            F("tool_calls"),
        ],
        rt.MalformedChunkError,
        Ok([*WEATHER, ("call_b", "get_time", '{"tz": "UTC"}')], fixes=("split_reused_index",)),
    ),
    Case(
        "3",
        "`index` starting at 1, with gaps, or negative",
        "Anthropic gateways, Bedrock, Foundry Local",
        [
            tc(index=1, id="call_a", type="function", function=fn("get_weather", A)),
            tc(index=5, id="call_b", type="function", function=fn("get_time", "{}")),
            tc(index=-1, id="call_c", type="function", function=fn("ping", "{}")),
            F("tool_calls"),
        ],
        Ok([("call_c", "ping", "{}"), *WEATHER, ("call_b", "get_time", "{}")]),
        Ok([("call_c", "ping", "{}"), *WEATHER, ("call_b", "get_time", "{}")]),
    ),
    Case(
        "4",
        "two entries for one index inside one chunk",
        "OpenAI (openai-python#3201)",
        [
            D(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": fn("get_weather", ""),
                        },
                        {"index": 0, "function": fn(arguments='{"city": ')},
                    ]
                }
            ),
            tc(index=0, function=fn(arguments='"Paris"}')),
            F("tool_calls"),
        ],
        Ok(WEATHER),
        Ok(WEATHER),
    ),
    Case(
        "5",
        "`id`, `type` and `name` repeated on every fragment",
        "Fireworks, SGLang, NVIDIA NIM, TGI, llama.cpp",
        [
            OPEN,
            tc(index=0, id="call_a", type="function", function=fn("get_weather", '{"city": ')),
            tc(index=0, id="call_a", type="function", function=fn("get_weather", '"Paris"}')),
            F("tool_calls"),
        ],
        Ok(WEATHER),
        Ok(WEATHER),
    ),
    Case(
        "6",
        "`id` changing between fragments of one call",
        "poolside, OCI",
        [
            OPEN,
            tc(index=0, id="call_z", function=fn(arguments='{"city": ')),
            tc(index=0, id="call_z", function=fn(arguments='"Paris"}')),
            F("tool_calls"),
        ],
        rt.MalformedChunkError,
        Ok(WEATHER, fixes=("kept_first_id",)),
    ),
    Case(
        "7",
        '`id` and `name` as `""` on continuations',
        "Alibaba DashScope, vLLM, SGLang, OCI",
        [
            OPEN,
            tc(index=0, id="", type="function", function=fn("", '{"city": ')),
            tc(index=0, id="", type="function", function=fn("", '"Paris"}')),
            F("tool_calls"),
        ],
        Ok(WEATHER),
        Ok(WEATHER),
    ),
    Case(
        "8",
        "`id` missing entirely",
        "vLLM, SGLang, Ollama gpt-oss, SiliconFlow",
        [
            tc(index=0, type="function", function=fn("get_weather", "")),
            tc(index=0, function=fn(arguments=A)),
            F("tool_calls"),
        ],
        rt.MalformedChunkError,
        Ok([(None, "get_weather", A)], fixes=("synthesized_id",)),
    ),
    Case(
        "9",
        "`function.name` repeated on every fragment",
        "MiniMax via NIM, Fireworks, Kimi, old llama.cpp",
        [
            tc(index=0, id="call_a", function=fn("get_weather", "")),
            tc(index=0, function=fn("get_weather", '{"city": ')),
            tc(index=0, function=fn("get_weather", '"Paris"}')),
            F("tool_calls"),
        ],
        Ok(WEATHER),
        Ok(WEATHER),
    ),
    Case(
        "10a",
        "name split across fragments",
        "Gemini",
        [
            tc(index=0, id="call_a", function=fn("get_wea", "")),
            tc(index=0, function=fn("ther", A)),
            F("tool_calls"),
        ],
        rt.MalformedChunkError,
        Ok(WEATHER, fixes=("joined_split_name",)),
    ),
    Case(
        "10b",
        "name arriving after the arguments",
        "vercel/ai#14722",
        [
            tc(index=0, id="call_a", function=fn(arguments='{"city": ')),
            tc(index=0, function=fn("get_weather", '"Paris"}')),
            F("tool_calls"),
        ],
        Ok(WEATHER),
        Ok(WEATHER),
    ),
    Case(
        "11",
        "whole call in one chunk, with the finish_reason",
        "Groq, Mistral, Ollama, tabbyAPI, GLM",
        [
            D({"role": "assistant"}),
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_a",
                                    "type": "function",
                                    "function": fn("get_weather", A),
                                }
                            ]
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            },
        ],
        Ok(WEATHER),
        Ok(WEATHER),
    ),
    Case(
        "12",
        "`arguments` as a JSON object instead of a string",
        "llama.cpp, TGI, GLM-4.5, Ollama via proxies",
        [
            tc(
                index=0, id="call_a", type="function", function=fn("get_weather", {"city": "Paris"})
            ),
            F("tool_calls"),
        ],
        rt.MalformedChunkError,
        Ok(WEATHER, fixes=("object_arguments",)),
    ),
    Case(
        "13a",
        "full arguments re-sent after the pieces",
        "GLM-style providers, eliza, 9router",
        [
            OPEN,
            tc(index=0, function=fn(arguments='{"city": ')),
            tc(index=0, function=fn(arguments='"Paris"}')),
            tc(index=0, function=fn(arguments=A)),
            F("tool_calls"),
        ],
        rt.InvalidArgumentsError,
        Ok(WEATHER, fixes=("dropped_resent_arguments",)),
    ),
    Case(
        "13b",
        "arguments as cumulative snapshots",
        "DeepSeek / Qianfan, vLLM MiniMax parser, Gemini",
        [
            tc(index=0, id="call_a", function=fn("get_weather", '{"city": ')),
            tc(index=0, function=fn(arguments='{"city": "Par')),
            tc(index=0, function=fn(arguments=A)),
            F("tool_calls"),
        ],
        rt.InvalidArgumentsError,
        Ok(WEATHER, fixes=("cumulative_arguments",)),
    ),
    Case(
        "14a",
        "`type` missing",
        "old llama.cpp, Gemini, Ollama",
        [tc(index=0, id="call_a", function=fn("get_weather", A)), F("tool_calls")],
        Ok(WEATHER, check="type function"),
        Ok(WEATHER, check="type function"),
    ),
    Case(
        "14b",
        "`type` changing inside one call",
        "(never merge another kind of call)",
        [OPEN, tc(index=0, type="custom", function=fn(arguments=A)), F("tool_calls")],
        rt.MalformedChunkError,
        rt.MalformedChunkError,
    ),
    Case(
        "15a",
        '`finish_reason: "stop"` with tool calls',
        "OpenAI (forced tool_choice), Gemini, Ollama, vLLM",
        [tc(index=0, id="call_a", type="function", function=fn("get_weather", A)), F("stop")],
        Ok(WEATHER, finish="stop"),
        Ok(WEATHER, finish="stop"),
    ),
    Case(
        "15b",
        '`finish_reason: "tool_calls"` without any tool call',
        "(guarded by openai-agents)",
        [D({"content": "Hi"}), F("tool_calls")],
        rt.MalformedChunkError,
        Ok([], fixes=("tool_calls_finish_without_calls",)),
    ),
    Case(
        "16a",
        "`finish_reason` missing (stream closes after complete calls)",
        "LightLLM, TGI, OpenRouter/Novita, Snowflake",
        [tc(index=0, id="call_a", type="function", function=fn("get_weather", A))],
        rt.StreamInterruptedError,
        Ok(WEATHER, finish=None, fixes=("accepted_missing_finish",)),
    ),
    Case(
        "16b",
        '`finish_reason: ""` on every chunk, non-standard values',
        "Ollama, OpenRouter, litellm (`end_turn`)",
        [
            D({"content": "Hi"}, x=1),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": ""}]},
            F("end_turn"),
        ],
        Ok([], finish="end_turn"),
        Ok([], finish="end_turn"),
    ),
    Case(
        "17",
        "`finish_reason` on the chunk carrying the last fragment",
        "vLLM, GLM, tabbyAPI",
        [
            tc(index=0, id="call_a", type="function", function=fn("get_weather", '{"city": ')),
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [{"index": 0, "function": fn(arguments='"Paris"}')}]
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            },
        ],
        Ok(WEATHER),
        Ok(WEATHER),
    ),
    Case(
        "18",
        "empty `choices`, Azure filter annotations, `delta: null`, usage chunks",
        "Azure, OpenAI, xAI, Groq, GLM, Copilot",
        [
            {"choices": [], "prompt_filter_results": [{"prompt_index": 0}]},
            D(None),
            OPEN,
            tc(index=0, function=fn(arguments=A)),
            D({}, usage={"completion_tokens": 3}),
            F("tool_calls"),
            {"choices": [], "usage": {"completion_tokens": 7}},
        ],
        Ok(WEATHER, check="usage 7"),
        Ok(WEATHER, check="usage 7"),
    ),
    Case(
        "19",
        "reasoning deltas interleaved with tool calls",
        "DeepSeek, vLLM, SGLang, xAI, OpenRouter, Ollama",
        [
            D({"role": "assistant", "reasoning_content": "Need weather."}),
            OPEN,
            D({"reasoning": " (mid-call)"}),
            tc(index=0, function=fn(arguments=A)),
            F("tool_calls"),
        ],
        Ok(WEATHER, check="reasoning"),
        Ok(WEATHER, check="reasoning"),
    ),
    Case(
        "20",
        "`refusal` deltas",
        "OpenAI structured outputs",
        [D({"refusal": "I can't help"}), D({"refusal": " with that."}), F("stop")],
        Ok([], finish="stop", check="refusal"),
        Ok([], finish="stop", check="refusal"),
    ),
    Case(
        "21a",
        "legacy `function_call` deltas",
        "functions API (Copilot, OpenRouter)",
        [
            D({"role": "assistant", "function_call": {"name": "get_weather", "arguments": ""}}),
            D({"function_call": {"arguments": A}}),
            F("function_call"),
        ],
        Ok([], finish="function_call", check="function_call"),
        Ok([], finish="function_call", check="function_call"),
    ),
    Case(
        "21b",
        "`function_call` mirroring `tool_calls` in the same delta",
        "llama.cpp server",
        [
            D(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": fn("get_weather", ""),
                        }
                    ],
                    "function_call": {"name": "get_weather", "arguments": ""},
                }
            ),
            D(
                {
                    "tool_calls": [{"index": 0, "function": fn(arguments=A)}],
                    "function_call": {"arguments": A},
                }
            ),
            F("tool_calls"),
        ],
        Ok(WEATHER, fixes=("ignored_function_call_mirror",)),
        Ok(WEATHER, fixes=("ignored_function_call_mirror",)),
    ),
    Case(
        "21c",
        "`function_call` contradicting `tool_calls`",
        "(a broken mirror)",
        [
            D(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": fn("get_weather", A),
                        }
                    ],
                    "function_call": {"name": "get_time", "arguments": "{}"},
                }
            ),
            F("tool_calls"),
        ],
        rt.MalformedChunkError,
        rt.MalformedChunkError,
    ),
    Case(
        "22a",
        'in-band `{"error": …}` chunk',
        "OpenAI, SGLang, Exo, llama.cpp",
        [
            tc(index=0, id="call_a", type="function", function=fn("get_weather", '{"city": ')),
            {"error": {"message": "The server had an error", "type": "server_error"}},
        ],
        rt.ProviderError,
        rt.ProviderError,
    ),
    Case(
        "22b",
        'vLLM `{"object": "error"}` chunk',
        "vLLM",
        [
            tc(index=0, id="call_a", type="function", function=fn("get_weather", '{"city": ')),
            {
                "object": "error",
                "message": "Engine died",
                "type": "InternalServerError",
                "code": 500,
            },
        ],
        rt.ProviderError,
        rt.ProviderError,
    ),
    Case(
        "22c",
        'error chunk with `finish_reason: "error"`',
        "OpenRouter",
        [
            tc(index=0, id="call_a", type="function", function=fn("get_weather", '{"city": ')),
            {
                "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
                "error": {"code": 502, "message": "Provider disconnected"},
            },
        ],
        rt.ProviderError,
        rt.ProviderError,
    ),
    Case(
        "23",
        "connection cut mid-arguments, no finish, no `[DONE]`",
        "proxies with idle timeouts, any provider",
        [
            tc(index=0, id="call_a", type="function", function=fn("get_weather", '{"city": ')),
            tc(index=0, function=fn(arguments='"Par')),
        ],
        rt.StreamInterruptedError,
        rt.TruncatedToolCallError,
    ),
    Case(
        "24",
        "several choices (`n>1`) with tool calls",
        "OpenAI, any n>1 request",
        [
            {
                "choices": [
                    {"index": 0, "delta": {"role": "assistant"}},
                    {"index": 1, "delta": {"role": "assistant"}},
                ]
            },
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_a",
                                    "type": "function",
                                    "function": fn("get_weather", A),
                                }
                            ]
                        },
                    }
                ]
            },
            {
                "choices": [
                    {
                        "index": 1,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_b",
                                    "type": "function",
                                    "function": fn("get_time", "{}"),
                                }
                            ]
                        },
                    }
                ]
            },
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {"choices": [{"index": 1, "delta": {}, "finish_reason": "tool_calls"}]},
        ],
        Ok(WEATHER, check="choice 1 get_time"),
        Ok(WEATHER, check="choice 1 get_time"),
        choices=True,
    ),
]


def _run(case: Case, policy: rt.Policy) -> Any:
    """The first turn (or the error) through assemble(); the core must agree."""
    op = rt.assemble_choices(policy) if case.choices else rt.assemble(policy)
    values: list[Any] = []
    errors: list[Exception] = []
    completed: list[bool] = []
    reactivex.from_iterable(case.chunks).pipe(op).subscribe(
        values.append, errors.append, lambda: completed.append(True)
    )
    # Exactly one terminal notification, and one turn only with completion.
    assert (len(values), len(errors), len(completed)) in ((1, 0, 1), (0, 1, 0))
    if errors:
        assert values == []
        return errors[0]
    result = values[0]
    core = rt.Assembler(policy)
    if case.choices:
        for chunk in case.chunks:
            core.feed(chunk)
        assert core.close_choices() == result
        return result
    assert outcome(run_assembler, case.chunks, policy=policy) == result
    return result


def _extra_check(name: str, turn: rt.AssistantTurn, turns: Any) -> None:
    if name == "type function":
        assert turn.tool_calls[0].type == "function"
    elif name == "usage 7":
        assert turn.usage == {"completion_tokens": 7}
    elif name == "reasoning":
        assert turn.reasoning == "Need weather. (mid-call)"
    elif name == "refusal":
        assert turn.refusal == "I can't help with that."
        assert turn.content is None
    elif name == "function_call":
        assert turn.function_call is not None
        assert (turn.function_call.name, turn.function_call.arguments) == ("get_weather", A)
        assert turn.to_message()["function_call"] == {"name": "get_weather", "arguments": A}
        assert "tool_calls" not in turn.to_message()
    elif name == "choice 1 get_time":
        assert [c.name for c in turns[1].tool_calls] == ["get_time"]
        assert turns[1].tool_calls[0].id == "call_b"
    else:
        raise AssertionError(f"unknown check {name}")


def _verify(case: Case, expected: Ok | type[rt.ToolCallStreamError], policy: rt.Policy) -> None:
    result = _run(case, policy)
    if isinstance(expected, type):
        assert isinstance(result, expected), result
        assert str(result)
        return
    assert not isinstance(result, Exception), result
    turns = result if case.choices else (result,)
    turn = turns[0]
    got = [(c.id, c.name, c.arguments) for c in turn.tool_calls]
    want = [
        (i if i is not None else got[n][0], name, a)
        for n, (i, name, a) in enumerate(expected.calls)
    ]
    assert got == want
    for call_id, _, _ in expected.calls:
        if call_id is None:
            assert got[0][0].startswith("call_rx_")
    for call in turn.tool_calls:
        assert isinstance(call.parsed_arguments, dict)
    assert turn.finish_reason == expected.finish
    assert set(turn.normalizations) == set(expected.fixes)
    if expected.check:
        _extra_check(expected.check, turn, turns)


@pytest.mark.parametrize("case", CASES, ids=[f"q{c.item}" for c in CASES])
def test_quirk_default(case: Case) -> None:
    _verify(case, case.default, rt.DEFAULT)


@pytest.mark.parametrize("case", CASES, ids=[f"q{c.item}" for c in CASES])
def test_quirk_lenient(case: Case) -> None:
    _verify(case, case.lenient, rt.LENIENT)


def test_every_catalogue_item_is_covered() -> None:
    items = {int("".join(ch for ch in c.item if ch.isdigit())) for c in CASES}
    assert items == set(range(1, 25))


def _describe(expected: Ok | type[rt.ToolCallStreamError]) -> str:
    if isinstance(expected, type):
        return f"error: `{expected.__name__}`"
    text = "assembled"
    if not expected.calls and expected.check == "function_call":
        text = "assembled as `turn.function_call`"
    if expected.finish != "tool_calls" and expected.calls:
        text += f", `finish_reason={expected.finish!r}`"
    if expected.fixes:
        text += " (" + ", ".join(f"`{f}`" for f in expected.fixes) + ")"
    return text


def render_table() -> str:
    rows = [
        "| # | deviation | seen from | default | lenient |",
        "|---|---|---|---|---|",
    ]
    rows.extend(
        f"| {case.item} | {case.title} | {case.seen} | {_describe(case.default)} | "
        f"{_describe(case.lenient)} |"
        for case in CASES
    )
    return "\n".join(rows) + "\n"


def test_the_manual_table_matches_the_tests() -> None:
    page = Path(__file__).parent.parent / "docs" / "compatibility.md"
    assert render_table() in page.read_text(encoding="utf-8"), (
        "regenerate with: python -m tests.test_quirks"
    )


if __name__ == "__main__":
    print(render_table(), end="")
