"""Policies, limits, declared tools, strict JSON, normalizations and error diagnostics."""

from __future__ import annotations

import json
import random
from typing import Any
from unittest import mock

import pytest
import reactivex
from hypothesis import given, settings
from hypothesis import strategies as st

import rxtoolcalls as rt
from rxtoolcalls import _core
from tests.helpers import (
    Chunk,
    args,
    call_open,
    choice,
    fixture_names,
    load_fixture,
    run_assemble,
    run_assembler,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "get_time"}},
]


def fin(reason: str = "tool_calls") -> Chunk:
    return choice({}, reason)


# -- limits ---------------------------------------------------------------------------------


def test_call_size_limit_is_checked_before_storing() -> None:
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=10))
    chunks = [call_open(0, "call_a", "f", '{"a": '), args(0, '"12345"}'), fin()]
    with pytest.raises(rt.LimitExceededError) as info:
        run_assemble(chunks, policy=policy)
    assert info.value.limit == "max_call_arguments"
    assert info.value.value == 10
    assert info.value.received == 6  # the piece that would pass the limit was not kept
    assert (info.value.index, info.value.name) == (0, "f")


def test_turn_size_limit_spans_calls() -> None:
    policy = rt.Policy(limits=rt.Limits(max_turn_arguments=12))
    chunks = [call_open(0, "a", "f", '{"x": 1}'), call_open(1, "b", "g", '{"y": 2}'), fin()]
    with pytest.raises(rt.LimitExceededError, match="max_turn_arguments") as info:
        run_assembler(chunks, policy=policy)
    assert info.value.index == 1


def test_call_count_limit() -> None:
    policy = rt.Policy(limits=rt.Limits(max_calls=2))
    chunks = [call_open(i, f"c{i}", "f", "{}") for i in range(3)] + [fin()]
    with pytest.raises(rt.LimitExceededError, match="max_calls"):
        run_assemble(chunks, policy=policy)
    assert len(run_assemble(chunks[1:], policy=policy).tool_calls) == 2


def test_depth_limit() -> None:
    policy = rt.Policy(limits=rt.Limits(max_depth=3))
    ok = call_open(0, "c", "f", '{"a": [{"b": 1}]}')
    deep = call_open(0, "c", "f", '{"a": [{"b": [1]}]}')
    assert run_assemble([ok, fin()], policy=policy).tool_calls[0].parsed_arguments
    with pytest.raises(rt.LimitExceededError, match="max_depth"):
        run_assemble([deep, fin()], policy=policy)


@settings(max_examples=400, deadline=None)
@given(
    grant=st.integers(0, 6),
    max_call=st.integers(0, 24),
    max_turn=st.integers(0, 40),
    steps=st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 2), st.text(alphabet="ab", max_size=7)),
        max_size=30,
    ),
)
def test_limits_are_exact_whatever_the_fast_path_reserved(
    grant: int, max_call: int, max_turn: int, steps: list[tuple[int, int, str]]
) -> None:
    # The fast path takes pieces within a grant reserved from the turn budget; the error must
    # still come on the exact chunk that passes a limit, with the exact size received.
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=max_call, max_turn_arguments=max_turn))
    assembler = rt.Assembler(policy)
    sizes: dict[tuple[int, int], str] = {}
    total = 0
    with mock.patch.object(_core, "_GRANT", grant):
        for ci, index, piece in steps:
            key = (ci, index)
            chunk = (
                args(index, piece, ci)
                if key in sizes
                else call_open(index, f"id{ci}{index}", "f", piece, ci)
            )
            so_far = sizes.setdefault(key, "")
            n = len(piece)
            over_call = len(so_far) + n > max_call
            if n and (over_call or total + n > max_turn):
                with pytest.raises(rt.LimitExceededError) as info:
                    assembler.feed(chunk)
                expected = "max_call_arguments" if over_call else "max_turn_arguments"
                assert (info.value.limit, info.value.received) == (expected, len(so_far))
                return
            assembler.feed(chunk)
            sizes[key] = so_far + piece
            total += n
    kept = {(c.choice_index, c.index): (c.size, c.text()) for c in assembler.calls()}
    assert kept == {key: (len(text), text) for key, text in sizes.items()}


def test_legacy_function_call_shares_the_turn_budget_with_reserved_calls() -> None:
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=10, max_turn_arguments=12))
    assembler = rt.Assembler(policy)
    assembler.feed(call_open(0, "c", "f", "abcd"))  # the call holds a grant beyond its 4
    legacy = {"function_call": {"name": "g", "arguments": "12345678"}}
    assert assembler.feed(choice(legacy, index=1)) == ()  # 4 + 8 = 12: fits once given back
    with pytest.raises(rt.LimitExceededError) as info:
        assembler.feed(args(0, "e"))  # the 13th character of the turn
    assert (info.value.limit, info.value.received) == ("max_turn_arguments", 4)


def test_depth_counts_nesting_not_brackets_inside_strings() -> None:
    policy = rt.Policy(limits=rt.Limits(max_depth=2))
    brackets = call_open(0, "c", "f", '{"a": {"s": "[[[{{{"}}')
    assert run_assemble([brackets, fin()], policy=policy).tool_calls[0].parsed_arguments == {
        "a": {"s": "[[[{{{"}
    }
    deep = call_open(0, "c", "f", '{"a": {"b": []}}')
    with pytest.raises(rt.LimitExceededError, match="max_depth"):
        run_assemble([deep, fin()], policy=policy)


def test_limits_apply_on_the_fast_path_too() -> None:
    policy = rt.Policy(limits=rt.Limits(max_call_arguments=100))
    chunks = [call_open(0, "c", "f", "")] + [args(0, "[1, ") for _ in range(30)]
    with pytest.raises(rt.LimitExceededError) as info:
        run_assemble(chunks, policy=policy)
    assert info.value.received == 100


# -- strict JSON ----------------------------------------------------------------------------


def test_duplicate_keys_are_detectable() -> None:
    chunks = [call_open(0, "c", "f", '{"path": "a", "path": "b"}'), fin()]
    assert run_assemble(chunks).tool_calls[0].parsed_arguments == {"path": "b"}
    with pytest.raises(rt.InvalidArgumentsError, match="'path' appears twice"):
        run_assemble(chunks, policy=rt.Policy(reject_duplicate_keys=True))
    nested = [call_open(0, "c", "f", '{"a": {"k": 1, "k": 2}}'), fin()]
    with pytest.raises(rt.InvalidArgumentsError):
        run_assemble(nested, policy=rt.Policy(reject_duplicate_keys=True))


def test_duplicate_keys_are_rejected_in_a_later_call_too() -> None:
    policy = rt.Policy(reject_duplicate_keys=True)
    chunks = [
        call_open(0, "c0", "f", '{"k": 1}'),
        call_open(1, "c1", "f", '{"k": 1, "k": 2}'),
        fin(),
    ]
    with pytest.raises(rt.InvalidArgumentsError, match="tool call 1 \\(f\\)"):
        run_assemble(chunks, policy=policy)
    again = run_assemble(chunks[:1] + chunks[2:], policy=policy)
    assert again.tool_calls[0].parsed_arguments == {"k": 1}


def test_a_byte_order_mark_is_refused() -> None:
    with pytest.raises(rt.InvalidArgumentsError, match="byte order mark"):
        run_assemble([call_open(0, "c", "f", '\ufeff{"x": 1}'), fin()])


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused(constant: str) -> None:
    with pytest.raises(rt.InvalidArgumentsError, match="not strict JSON"):
        run_assemble([call_open(0, "c", "f", '{"x": ' + constant + "}"), fin()])


# -- declared tools -------------------------------------------------------------------------


def test_unknown_tool_is_an_error_on_the_naming_chunk() -> None:
    policy = rt.DEFAULT.with_tools(TOOLS)
    assembler = rt.Assembler(policy)
    assembler.feed(call_open(0, "c", "get_weather", '{"city": "Paris"}'))
    with pytest.raises(rt.UnknownToolError, match="declared: get_time, get_weather") as info:
        assembler.feed(call_open(1, "d", "rm_rf", ""))
    assert (info.value.index, info.value.name) == (1, "rm_rf")


def test_unknown_tool_reaches_progress_and_assemble_as_an_error() -> None:
    policy = rt.DEFAULT.with_tools(["get_time"])
    chunks = [call_open(0, "c", "get_weather", "{}"), fin()]
    errors: list[Exception] = []
    reactivex.from_iterable(chunks).pipe(rt.progress(policy)).subscribe(on_error=errors.append)
    reactivex.from_iterable(chunks).pipe(rt.assemble(policy)).subscribe(on_error=errors.append)
    assert [type(e) for e in errors] == [rt.UnknownToolError, rt.UnknownToolError]


def test_split_names_with_declared_tools() -> None:
    policy = rt.LENIENT.with_tools(TOOLS)
    chunks = [
        choice({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "get_wea"}}]}),
        choice({"tool_calls": [{"index": 0, "function": {"name": "ther", "arguments": "{}"}}]}),
        fin(),
    ]
    events: list[rt.ToolCallStarted] = []
    reactivex.from_iterable(chunks).pipe(rt.progress(policy)).subscribe(events.append)
    assert [e.name for e in events] == ["get_weather"]
    bad = [chunks[0], choice({"tool_calls": [{"index": 0, "function": {"name": "xx"}}]}), fin()]
    with pytest.raises(rt.UnknownToolError):
        run_assemble(bad, policy=policy)


def test_schema_validation() -> None:
    policy = rt.Policy(validate_arguments=True).with_tools(TOOLS)
    good = [call_open(0, "c", "get_weather", '{"city": "Paris"}'), fin()]
    assert run_assemble(good, policy=policy).tool_calls[0].parsed_arguments == {"city": "Paris"}
    bad = [call_open(0, "c", "get_weather", '{"town": "Paris"}'), fin()]
    with pytest.raises(rt.InvalidArgumentsError, match="schema"):
        run_assemble(bad, policy=policy)
    no_schema = [call_open(0, "c", "get_time", '{"anything": 1}'), fin()]
    assert run_assemble(no_schema, policy=policy).tool_calls[0].name == "get_time"


def test_with_tools_refuses_what_is_not_a_tool_list() -> None:
    with pytest.raises(TypeError):
        rt.DEFAULT.with_tools({"name": "x"})
    with pytest.raises(TypeError):
        rt.DEFAULT.with_tools([{"type": "function", "function": {}}])


# -- the require_finish_reason shortcut and policies per operator ---------------------------


def test_shortcut_overrides_the_policy() -> None:
    chunks = [call_open(0, "c", "f", "{}")]
    assert run_assemble(chunks, require_finish_reason=False).finish_reason is None
    with pytest.raises(rt.StreamInterruptedError):
        run_assemble(
            chunks, policy=rt.Policy(require_finish_reason=False), require_finish_reason=True
        )


def test_lenient_never_accepts_a_cut_call() -> None:
    chunks = [call_open(0, "c", "f", '{"a": ')]
    with pytest.raises(rt.TruncatedToolCallError):
        run_assemble(chunks, policy=rt.LENIENT)


# -- normalizations and usage ---------------------------------------------------------------


def test_normalizations_count_each_recovery() -> None:
    chunks = [
        call_open(0, "a", "f", '{"x": '),
        args(0, "1}"),
        args(0, '{"x": 1}'),  # resent
        call_open(0, "b", "g", "{}"),  # index reused
        choice(
            {
                "tool_calls": [
                    {"index": 1, "type": "function", "function": {"name": "h", "arguments": "{}"}}
                ]
            }
        ),
    ]
    turn = run_assemble(chunks, policy=rt.LENIENT)
    assert turn.normalizations == {
        "dropped_resent_arguments": 1,
        "split_reused_index": 1,
        "synthesized_id": 1,
        "accepted_missing_finish": 1,
    }
    assert [c.name for c in turn.tool_calls] == ["f", "g", "h"]
    assert len({c.id for c in turn.tool_calls}) == 3
    assert run_assemble([*chunks[:2], fin()]).normalizations == {}


def test_usage_keeps_the_last_value() -> None:
    stream = [
        {**choice({"content": "a"}), "usage": {"completion_tokens": 1}},
        {**choice({"content": "b"}), "usage": {"completion_tokens": 2}},
        {**fin("stop"), "usage": None},
        {"choices": [], "usage": {"completion_tokens": 3, "total_tokens": 9}},
    ]
    assert run_assemble(stream).usage == {"completion_tokens": 3, "total_tokens": 9}


# -- diagnostics ----------------------------------------------------------------------------


def test_errors_carry_diagnostics() -> None:
    chunks = [call_open(0, "c", "get_weather", '{"city": "Pa'), fin("length")]
    with pytest.raises(rt.TruncatedToolCallError) as info:
        run_assemble(chunks)
    error = info.value
    assert (error.choice_index, error.index, error.name) == (0, 0, "get_weather")
    assert (error.received, error.finish_reason) == (12, "length")
    invalid = [call_open(0, "c", "f", '{"a": 1}}'), fin("tool_calls")]
    with pytest.raises(rt.InvalidArgumentsError) as info2:
        run_assemble(invalid)
    assert (info2.value.received, info2.value.finish_reason) == (9, "tool_calls")


# -- every recorded stream, with the policy its provider needs ------------------------------

# Which policy each recorded provider needs, and why (default wherever it suffices).
FIXTURE_POLICY: dict[str, tuple[rt.Policy, str]] = {
    "openrouter__novita_kimi_k2_name_repeated_no_finish": (
        rt.Policy(accept_clean_end=True),
        "OpenRouter/Novita never sends a finish_reason",
    ),
    "snowflake__cortex_no_finish_reason": (
        rt.Policy(accept_clean_end=True),
        "Snowflake Cortex never sends a finish_reason",
    ),
    "tgi__llama31_tool_call_id_repeated_no_finish": (
        rt.Policy(accept_clean_end=True),
        "TGI 3.1 ends tool-call streams without a finish_reason",
    ),
}
# Recordings whose documented outcome is an error under every policy.
ALWAYS_ERRORS = {"llamacpp__gemma3_270m_max_tokens_4_cut_labelled_tool_calls"}
MULTI_CHOICE = {
    "copilot__n3_sequential_choices_prompt_filter",
    "openai__gpt4o_mini_multiple_choices_n2_interleaved",
    "openai__multiple_choices_n3",
}


@pytest.mark.parametrize("name", [n for n in fixture_names() if n not in ALWAYS_ERRORS])
def test_every_recorded_stream_passes_with_its_policy(name: str) -> None:
    policy, _why = FIXTURE_POLICY.get(name, (rt.DEFAULT, "default"))
    chunks = load_fixture(name)
    op = rt.assemble_choices(policy) if name in MULTI_CHOICE else rt.assemble(policy)
    values: list[Any] = []
    errors: list[Exception] = []
    reactivex.from_iterable(chunks).pipe(op).subscribe(values.append, errors.append)
    assert errors == []
    assert len(values) == 1
    # LENIENT never changes the outcome of a stream DEFAULT (or its policy) accepts.
    again = reactivex.from_iterable(chunks).pipe(rt.assemble_choices(rt.LENIENT)).run()
    first = values[0] if name in MULTI_CHOICE else (values[0],)

    def essentials(turn: rt.AssistantTurn) -> tuple[Any, ...]:
        return (turn.content, turn.tool_calls, turn.finish_reason, turn.function_call)

    assert [essentials(t) for t in again] == [essentials(t) for t in first]


# -- fuzz: mutated real chunks never escape the error tree ----------------------------------


def _mutate(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict) and value:
        key = rng.choice(list(value))
        action = rng.randrange(5)
        out = dict(value)
        if action == 0:
            del out[key]
        elif action == 1:
            out[key] = rng.choice([None, "", 0, -1, True, [], {}, "x", 1.5, {"a": 1}, [None]])
        elif action == 2:
            out[key] = _mutate(value[key], rng)
        elif action == 3:
            out[rng.choice(["index", "id", "error", "usage", "object", "function_call"])] = (
                rng.choice([None, 0, "error", {"message": "m"}, "x"])
            )
        else:
            out[key] = _mutate(_mutate(value[key], rng), rng)
        return out
    if isinstance(value, list) and value:
        out_list = list(value)
        i = rng.randrange(len(out_list))
        action = rng.randrange(3)
        if action == 0:
            out_list[i] = _mutate(out_list[i], rng)
        elif action == 1:
            out_list.insert(i, out_list[i])
        else:
            del out_list[i]
        return out_list
    return rng.choice([None, "", 0, 7, "{", "}", '"', True, [], {}])


ALL_CHUNKS = [(name, load_fixture(name)) for name in fixture_names()]


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, len(ALL_CHUNKS) - 1),
    st.integers(0, 2**32),
    st.sampled_from(["default", "lenient"]),
)
def test_mutated_fixture_chunks_raise_only_our_errors(
    which: int, seed: int, policy_name: str
) -> None:
    rng = random.Random(seed)
    chunks = json.loads(json.dumps(ALL_CHUNKS[which][1]))
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(len(chunks))
        chunks[i] = _mutate(chunks[i], rng)
    policy = rt.LENIENT if policy_name == "lenient" else rt.DEFAULT
    notes: list[str] = []
    values: list[Any] = []
    errors: list[Exception] = []

    def on_next(value: Any) -> None:
        notes.append("N")
        values.append(value)

    def on_error(error: Exception) -> None:
        notes.append("E")
        errors.append(error)

    reactivex.from_iterable(chunks).pipe(rt.assemble_choices(policy)).subscribe(
        on_next, on_error, lambda: notes.append("C")
    )
    assert notes in (["N", "C"], ["E"]), notes
    if errors:
        assert isinstance(errors[0], rt.ToolCallStreamError), repr(errors[0])
    else:
        for turn in values[0]:
            for call in turn.tool_calls:
                assert isinstance(call.parsed_arguments, dict)
                assert call.id
                assert call.name
