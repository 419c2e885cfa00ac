"""Bad input at the edges of the core: typed errors only, and messages of bounded size."""

from __future__ import annotations

import json
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from rxtoolcalls._sse import ServerSentEvent, chunk_from_event, load_json
from tests.helpers import (
    Chunk,
    args,
    call_open,
    choice,
    content,
    finish,
    run_assemble,
    run_assembler,
)

SECRET = "sk-LIVE-" + "0123456789abcdef" * 4
HUGE = "x" * 10_000_000  # 10 MB: a message must never carry it


def _message_of(chunks: list[Any], **kwargs: Any) -> rt.ToolCallStreamError:
    with pytest.raises(rt.ToolCallStreamError) as info:
        run_assembler(chunks, **kwargs)
    return info.value


# -- item 15: no untyped escapes -----------------------------------------------------------


def _tool(parameters: object) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": 5},
        {"$ref": "#"},
        {"type": "object", "properties": {"a": {"pattern": "("}}},
        {"$ref": "#/definitions/nowhere"},
    ],
)
def test_an_invalid_declared_schema_is_refused_when_the_policy_is_built(
    schema: dict[str, Any],
) -> None:
    with pytest.raises(ValueError, match="JSON schema of tool 'f'"):
        rt.Policy(validate_arguments=True).with_tools(_tool(schema))
    with pytest.raises(ValueError, match="JSON schema of tool 'f'"):
        rt.Policy(validate_arguments=True, tools={"f": schema})
    # Without validation the schema is never applied, so it is not checked either.
    assert rt.DEFAULT.with_tools(_tool(schema)).tools == {"f": schema}


class _Exploding:
    """A chunk object whose attribute reads raise (a broken SDK model, a lazy proxy)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name == self._name:
            raise RuntimeError("the proxy is closed")
        if name == "choices":
            return [_ExplodingChoice(self._name)]
        return None


class _ExplodingChoice(_Exploding):
    def __getattr__(self, name: str) -> Any:
        if name == self._name:
            raise RuntimeError("the proxy is closed")
        if name == "delta":
            return _ExplodingChoice(self._name) if self._name != "delta" else None
        if name == "tool_calls":
            return [_ExplodingChoice(self._name)]
        if name == "index":
            return 0
        return None


@pytest.mark.parametrize(
    "name", ["choices", "usage", "delta", "finish_reason", "tool_calls", "function", "id"]
)
def test_an_attribute_that_raises_is_a_malformed_chunk(name: str) -> None:
    with pytest.raises(rt.MalformedChunkError, match=f"reading '{name}'") as info:
        rt.Assembler().feed(_Exploding(name))
    assert isinstance(info.value.__cause__, RuntimeError)
    values: list[object] = []
    errors: list[Exception] = []
    reactivex.from_iterable([_Exploding(name)]).pipe(rt.assemble()).subscribe(
        values.append, errors.append
    )
    assert values == []
    assert [type(e) for e in errors] == [rt.MalformedChunkError]


@pytest.mark.json_parser
def test_deeply_nested_event_data_is_a_malformed_chunk() -> None:
    deep = '{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(rt.MalformedChunkError, match="nests deeper"):
        chunk_from_event(ServerSentEvent("message", deep))
    with pytest.raises(rt.MalformedChunkError, match="line 3 nests deeper"):
        load_json(deep, "line 3")


@pytest.mark.json_parser
def test_a_huge_integer_in_event_data_is_a_malformed_chunk() -> None:
    with pytest.raises(rt.MalformedChunkError, match="more than 4300 digits"):
        chunk_from_event(ServerSentEvent("message", '{"choices": [], "n": ' + "7" * 5000 + "}"))


@pytest.mark.parametrize(
    "chunk",
    [
        # A tool-call index, a choice index and an object payload past 4300 digits: every
        # message that formats them used to raise ValueError itself.
        choice({"tool_calls": [{"index": 10**5000, "function": {"arguments": "{}"}}]}),
        choice({"tool_calls": [{"index": 10**5000, "function": "nope"}]}),
        {"choices": [{"index": 10**5000, "delta": {"content": "x"}}]},
        {"choices": [{"index": 10.0**300, "delta": {"content": "x"}}]},
        choice({"tool_calls": [{"index": 0, "id": 10**5000}]}),
    ],
)
def test_huge_integers_in_object_chunks_are_typed_errors(chunk: Chunk) -> None:
    error = _message_of([chunk, finish()])
    assert isinstance(error, rt.MalformedChunkError)
    assert len(str(error)) < 300


def test_huge_integer_in_object_arguments_is_a_typed_error() -> None:
    chunks = [
        choice(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "function": {"name": "f", "arguments": {"n": 10**5000}}}
                ]
            }
        ),
        finish(),
    ]
    error = _message_of(chunks, policy=rt.LENIENT)
    assert isinstance(error, rt.MalformedChunkError)
    assert "cannot be written as JSON" in str(error)


def test_huge_integer_in_arguments_names_no_python_setting() -> None:
    error = _message_of([call_open(0, "c", "f", '{"n": ' + "7" * 5000 + "}"), finish()])
    assert isinstance(error, rt.InvalidArgumentsError)
    assert "4300 digits" in str(error)
    assert "set_int_max_str_digits" not in str(error)


# -- item 14: bounded messages, no secrets -------------------------------------------------


def _bounded(error: BaseException, limit: int = 400) -> None:
    text = str(error)
    assert len(text) < limit, text[:500]
    assert SECRET not in text
    assert HUGE[:100] not in text


# Identifiers as long as HUGE pass this policy's limits, so the messages themselves are tested.
WIDE = rt.Policy(limits=rt.Limits(max_identifier=len(HUGE)))


def test_id_changed_is_bounded() -> None:
    for first, second in (("call_a", HUGE), (HUGE, "call_b")):
        error = _message_of(
            [call_open(0, first, "f", "{"), call_open(0, second, None, "}")], policy=WIDE
        )
        assert "id changed" in str(error)
        _bounded(error)


def test_name_changed_is_bounded() -> None:
    for first, second in (("f", HUGE), (HUGE, "g")):
        error = _message_of(
            [call_open(0, "c", first, "{"), call_open(0, None, second, "}")], policy=WIDE
        )
        assert "names are never concatenated" in str(error)
        _bounded(error)


def test_type_changed_and_non_int_indices_are_bounded() -> None:
    entry = {"index": 0, "type": HUGE, "function": {"arguments": ""}}
    error = _message_of([call_open(0, "c", "f", "{"), choice({"tool_calls": [entry]})], policy=WIDE)
    assert "type changed" in str(error)
    _bounded(error)
    _bounded(_message_of([choice({"tool_calls": [{"index": HUGE, "function": {}}]})]))
    _bounded(_message_of([{"choices": [{"index": HUGE, "delta": {"content": "x"}}]}]))


def test_legacy_mirror_mismatch_is_bounded() -> None:
    delta = {
        "tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}],
        "function_call": {"name": "f", "arguments": HUGE},
    }
    _bounded(_message_of([choice(delta), finish()]))
    delta["function_call"] = {"name": HUGE}
    error = _message_of([choice(delta), finish()], policy=WIDE)
    assert "contradicts" in str(error)
    _bounded(error)


def test_a_long_name_is_cut_in_every_message() -> None:
    error = _message_of([call_open(0, "c", HUGE, "{"), args(0, "x"), finish()], policy=WIDE)
    assert isinstance(error, rt.InvalidArgumentsError)
    _bounded(error)


def test_duplicate_key_message_is_bounded() -> None:
    key = HUGE[:1_000_000]
    text = '{"' + key + '": 1, "' + key + '": 2}'
    error = _message_of(
        [call_open(0, "c", "f", text), finish()], policy=rt.Policy(reject_duplicate_keys=True)
    )
    assert isinstance(error, rt.InvalidArgumentsError)
    _bounded(error)


@pytest.mark.json_parser
def test_sse_data_that_is_not_json_is_bounded() -> None:
    for data in (SECRET, HUGE, "[" + SECRET):
        with pytest.raises(rt.MalformedChunkError) as info:
            chunk_from_event(ServerSentEvent("message", data))
        _bounded(info.value)
        assert len(str(info.value)) < 160


def test_schema_message_never_echoes_the_value() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "mode": {"enum": ["a", "b"]}},
        "required": ["n"],
    }
    policy = rt.Policy(validate_arguments=True).with_tools(_tool(schema))
    for arguments, expected in [
        ('{"n": "' + SECRET + '"}', "at $.n: a value of type str is not of type 'integer'"),
        ('{"n": 1, "mode": "' + SECRET + '"}', "at $.mode: a value of type str fails 'enum'"),
        ("{}", "'n' is a required property"),
    ]:
        with pytest.raises(rt.InvalidArgumentsError) as info:
            run_assemble([call_open(0, "c", "f", arguments), finish()], policy=policy)
        assert expected in str(info.value)
        _bounded(info.value)


@pytest.mark.json_parser
def test_provider_error_message_is_bounded() -> None:
    with pytest.raises(rt.ProviderError) as info:
        chunk_from_event(ServerSentEvent("error", HUGE))
    assert len(str(info.value)) < 600
    with pytest.raises(rt.ProviderError) as info:
        run_assembler([{"error": {"message": HUGE, "code": HUGE}}])
    assert len(str(info.value)) < 600  # the provider's own words, cut short
    assert info.value.body == {"message": HUGE, "code": HUGE}  # the body keeps it all


def test_excerpt_is_short_whatever_the_value() -> None:
    from rxtoolcalls._errors import excerpt

    for value in (HUGE, 10**5000, list(range(10**5)), {"k": HUGE}, b"x" * 10**6, object()):
        assert len(excerpt(value)) < 80
    assert excerpt("call_1") == "'call_1'"
    assert excerpt(7) == "7"


# -- item 13: every accumulated field is bounded -------------------------------------------


def _limited(**limits: int) -> rt.Policy:
    return rt.Policy(limits=rt.Limits(**limits))


@pytest.mark.parametrize("field", ["content", "refusal", "reasoning_content", "reasoning"])
def test_text_fields_are_bounded_by_max_text(field: str) -> None:
    policy = _limited(max_text=1024)
    within = [choice({field: "a" * 512}), choice({field: "b" * 512}), finish("stop")]
    assert run_assembler(within, policy=policy).finish_reason == "stop"
    assembler = rt.Assembler(policy)
    assembler.feed(choice({field: "a" * 1000}))
    with pytest.raises(rt.LimitExceededError) as info:
        assembler.feed(choice({field: "a" * 25}))  # one past the limit: refused whole
    assert (info.value.limit, info.value.value) == ("max_text", 1024)


def test_max_text_spans_fields_and_choices() -> None:
    policy = _limited(max_text=100)
    chunks = [
        choice({"content": "a" * 40}),
        choice({"reasoning": "b" * 40}, index=1),
        choice({"refusal": "c" * 40}),
    ]
    error = _message_of([*chunks, finish("stop")], policy=policy)
    assert isinstance(error, rt.LimitExceededError)
    assert error.limit == "max_text"


def test_a_huge_content_stream_stops_at_the_limit_not_at_the_end() -> None:
    read = 0

    def chunks() -> Any:
        nonlocal read
        for _ in range(200 * 1024):  # 200 MiB of content, 1 KiB at a time, made on the fly
            read += 1
            yield choice({"content": "x" * 1024})

    errors: list[Exception] = []
    reactivex.from_iterable(chunks()).pipe(rt.assemble(_limited(max_text=1024))).subscribe(
        on_error=errors.append
    )
    assert [type(e) for e in errors] == [rt.LimitExceededError]
    assert read == 2  # the first chunk fills the budget, the second passes it


@pytest.mark.parametrize(
    "chunk",
    [
        call_open(0, "i" * 65, "f", "{}"),
        call_open(0, "c", "n" * 65, "{}"),
        choice({"tool_calls": [{"index": 0, "id": "c", "type": "t" * 65, "function": {}}]}),
        choice({"function_call": {"name": "n" * 65, "arguments": "{}"}}),
        choice({}, "r" * 65),
    ],
)
def test_identifiers_are_bounded_by_max_identifier(chunk: Chunk) -> None:
    error = _message_of([chunk, finish()], policy=_limited(max_identifier=64))
    assert isinstance(error, rt.LimitExceededError)
    assert (error.limit, error.value) == ("max_identifier", 64)


def test_joined_name_pieces_are_bounded_and_linear() -> None:
    # 100,000 one-character pieces of one name: the join stops at max_identifier (each piece
    # copies at most that many characters), never a quadratic rebuild of a 100 KB name.
    policy = rt.Policy(join_split_names=True, synthesize_missing_ids=True)
    assembler = rt.Assembler(policy)
    assembler.feed(call_open(0, "c", "a"))
    errors: list[rt.ToolCallStreamError] = []
    for i in range(100_000):
        try:
            assembler.feed(call_open(0, None, "ab"[i % 2]))
        except rt.ToolCallStreamError as error:
            errors.append(error)
            break
    assert [(type(e), getattr(e, "limit", None)) for e in errors] == [
        (rt.LimitExceededError, "max_identifier")
    ]
    assert len(assembler.calls()[0].name or "") == 1024  # nothing past the limit kept


def test_choices_are_bounded_by_max_choices() -> None:
    policy = _limited(max_choices=3)
    ok = [content("x", index=i) for i in range(3)]
    assert (
        len(
            reactivex.from_iterable([*ok, *(finish("stop", i) for i in range(3))])
            .pipe(rt.assemble_choices(policy))
            .run()
        )
        == 3
    )
    error = _message_of([*ok, content("x", index=3)], policy=policy)
    assert isinstance(error, rt.LimitExceededError)
    assert (error.limit, error.value, error.choice_index) == ("max_choices", 3, 3)


# -- item 16: ProviderError.retryable ------------------------------------------------------


@pytest.mark.json_parser
@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        ({"message": "Too many requests", "code": 429}, True),
        ({"message": "Too many requests", "code": "429"}, True),
        ({"message": "Bad gateway", "code": 502}, True),
        ({"message": "Overloaded", "type": "overloaded_error"}, True),
        ({"message": "Slow down", "type": "rate_limit_error"}, True),
        ({"message": "Bad request", "code": 400}, False),
        ({"message": "Unknown field", "type": "invalid_request_error"}, False),
        ({"message": "This model's maximum context length is 8192 tokens", "code": 400}, False),
        ({"message": "context_length_exceeded", "code": 503}, False),
        ({"message": "Something odd"}, None),
        ({"message": "Something odd", "code": "weird"}, None),
    ],
)
def test_provider_error_says_whether_a_retry_can_help(
    error: dict[str, Any], retryable: bool | None
) -> None:
    for spell in (
        lambda: run_assembler([{"error": error}]),
        lambda: chunk_from_event(ServerSentEvent("message", json.dumps({"error": error}))),
    ):
        with pytest.raises(rt.ProviderError) as info:
            spell()
        assert info.value.retryable is retryable
        text = f"{info.value} {info.value.hint or ''}"
        # "retry" only where it is true, and then in the hint, not in the message.
        assert ("retry" in text) is (retryable is True)
        assert "retry" not in str(info.value)


@pytest.mark.json_parser
def test_anthropic_overloaded_event_is_retryable() -> None:
    data = '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    with pytest.raises(rt.ProviderError) as info:
        chunk_from_event(ServerSentEvent("error", data))
    assert info.value.retryable is True
    assert info.value.code == "overloaded_error"


def test_finish_reason_error_is_unknown_retryability() -> None:
    with pytest.raises(rt.ProviderError) as info:
        run_assembler([content("x"), finish("error")])
    assert info.value.retryable is None
    assert "retry" not in str(info.value)


# -- item 23: advice lives in hint, never in the message ----------------------------------


@pytest.mark.parametrize(
    ("chunks", "policy", "hint"),
    [
        ([call_open(0, "a", "f", "{"), call_open(0, "b", None, "}")], None, "split_reused_index"),
        ([call_open(0, "a", "f", "{"), call_open(0, None, "g", "}")], None, "join_split_names"),
        ([call_open(0, None, "f", "{}"), finish()], None, "synthesize_missing_ids"),
        ([call_open(0, "c", "f", '{"a": 1'), finish()], None, "retry"),
        ([call_open(0, "c", "f", '{"a": x}'), finish()], None, "retry"),
        ([call_open(0, "c", "f", "{"), finish("length")], None, "max_tokens"),
        ([content("x"), finish()], None, "accept_tool_calls_finish_without_calls"),
        ([], None, "retry"),
    ],
)
def test_advice_is_in_hint_and_not_in_the_message(
    chunks: list[Any], policy: rt.Policy | None, hint: str
) -> None:
    error = _message_of(chunks, policy=policy)
    assert hint in (error.hint or "")
    message = str(error)
    assert "retry" not in message
    assert "Policy." not in message
    assert "--" not in message  # no command-line flag in an exception's text


def test_hint_is_a_keyword_of_every_error() -> None:
    assert rt.ToolCallStreamError("x").hint is None
    assert rt.MalformedChunkError("x", hint="do y").hint == "do y"
    assert rt.LimitExceededError("x", limit="max_calls", value=1, hint="h").hint == "h"
    assert rt.ProviderError("x", code=429, hint="h").hint == "h"


def test_no_doubled_at_in_parser_messages() -> None:
    error = _message_of([call_open(0, "c", "f", '{"a": "x\ty"}'), finish()])
    assert "at at" not in str(error)
    assert "Invalid control character at character 8" in str(error)


def test_a_source_error_is_bounded_and_hints_retry() -> None:
    errors: list[Exception] = []
    reactivex.throw(OSError(HUGE)).pipe(rt.assemble()).subscribe(on_error=errors.append)
    (error,) = errors
    assert isinstance(error, rt.StreamInterruptedError)
    assert len(str(error)) < 400
    assert "retry" in (error.hint or "")
