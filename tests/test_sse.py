"""from_sse and the SSE decoder: any byte split, line endings, comments, and error shapes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls._sse import ServerSentEvent, SSEDecoder
from tests.helpers import fixture_names, load_fixture, outcome, run_assembler, settle

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser


def sse_bytes(chunks: list[dict[str, Any]], newline: str = "\n", done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(c, ensure_ascii=False)}{newline}{newline}" for c in chunks)
    if done:
        body += f"data: [DONE]{newline}{newline}"
    return body.encode()


def collect_sse(pieces: Any) -> tuple[list[Any], list[Exception]]:
    values: list[Any] = []
    errors: list[Exception] = []
    rt.from_sse(pieces).subscribe(values.append, errors.append)
    return values, errors


@pytest.mark.parametrize("name", fixture_names())
def test_every_fixture_one_byte_at_a_time(name: str) -> None:
    chunks = load_fixture(name)
    body = sse_bytes(chunks)
    values, errors = collect_sse(body[i : i + 1] for i in range(len(body)))
    assert errors == []
    assert values == chunks
    assert outcome(run_assembler, values) == outcome(run_assembler, chunks)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings(newline: str) -> None:
    chunks = load_fixture("openai__parallel_tool_calls")
    body = sse_bytes(chunks, newline)
    for size in (1, 2, 3, 7, len(body)):
        values, errors = collect_sse(body[i : i + size] for i in range(0, len(body), size))
        assert (values, errors) == (chunks, [])


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(1, 3000), max_size=40), st.sampled_from(["\n", "\r\n"]))
def test_any_split_gives_the_same_chunks(cuts: set[int], newline: str) -> None:
    chunks = load_fixture("deepseek__reasoner_tool_call")
    body = sse_bytes(chunks, newline)
    points = sorted(c for c in cuts if c < len(body))
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert collect_sse(pieces) == (chunks, [])


def test_split_utf8_sequences_and_text_input() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "héllo → 世界 🌍"}}]}
    body = sse_bytes([chunk])
    assert collect_sse(body[i : i + 1] for i in range(len(body))) == ([chunk], [])
    assert collect_sse(body.decode().splitlines(keepends=True)) == ([chunk], [])


def test_comments_multiline_data_and_named_events() -> None:
    text = (
        ": OPENROUTER PROCESSING\n\n"
        'data: {"choices":\ndata: []}\n\n'
        "event: ping\ndata: \n\n"
        "retry: 100\nid: 7\n"
        'data:{"choices": [], "x": 1}\n\n'
        "data: [DONE]\n\n"
        'data: {"choices": [], "after": "done"}\n\n'
    )
    values, errors = collect_sse([text])
    assert errors == []
    assert values == [{"choices": []}, {"choices": [], "x": 1}]


def test_end_without_done_completes() -> None:
    chunks = load_fixture("openai__single_tool_call")[:5]
    values, errors = collect_sse([sse_bytes(chunks, done=False)])
    assert (values, errors) == (chunks, [])
    # The assembler then reports the missing finish.
    with pytest.raises(rt.StreamInterruptedError):
        run_assembler(values)


OPEN = (
    'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a", '
    '"function": {"name": "f", "arguments": "{"}}]}}]}\n\n'
)


@pytest.mark.parametrize(
    ("tail", "code", "message"),
    [
        (
            'data: {"error": {"message": "server error", "type": "server_error"}}\n\n',
            "server_error",
            "server error",
        ),
        (
            'event: error\ndata: {"message": "slot unavailable", "code": 500}\n\n',
            500,
            "slot unavailable",
        ),
        ("event: error\ndata: upstream timed out\n\n", None, "upstream timed out"),
        (
            'data: {"object": "error", "message": "Engine died", "code": 500}\n\n',
            500,
            "Engine died",
        ),
        (
            'data: {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}], '
            '"error": {"code": 502, "message": "Provider disconnected"}}\n\n',
            502,
            "Provider disconnected",
        ),
        ('error: {"message": "out of memory", "code": 503}\n\n', 503, "out of memory"),
    ],
    ids=[
        "data-error",
        "event-error",
        "event-error-text",
        "vllm-object-error",
        "openrouter",
        "error-field",
    ],
)
def test_error_shapes_are_provider_errors(tail: str, code: object, message: str) -> None:
    values, errors = collect_sse([OPEN + tail])
    assert len(values) == 1
    assert len(errors) == 1
    error = errors[0]
    assert isinstance(error, rt.ProviderError)
    assert error.code == code
    assert message in str(error)
    # Through assemble(): the typed error, nothing emitted.
    turns: list[Any] = []
    failures: list[Exception] = []
    rt.from_sse([OPEN + tail]).pipe(rt.assemble()).subscribe(turns.append, failures.append)
    assert turns == []
    assert isinstance(failures[0], rt.ProviderError)


def test_bad_data_is_malformed() -> None:
    _, errors = collect_sse(["data: {not json\n\n"])
    assert isinstance(errors[0], rt.MalformedChunkError)
    _, errors = collect_sse([b"data: \xff\xfe\n\n"])
    assert isinstance(errors[0], rt.MalformedChunkError)


def test_decoder_matches_the_sdk_decoder() -> None:
    from openai._streaming import SSEDecoder as SDKDecoder

    body = sse_bytes(load_fixture("openai__long_arguments_many_fragments"), "\r\n")
    ours = SSEDecoder()
    events: list[ServerSentEvent] = []
    for i in range(0, len(body), 5):
        events += ours.feed(body[i : i + 5])
    theirs = [e.data for e in SDKDecoder().iter_bytes(iter([body]))]
    assert [e.data for e in events] == theirs


def test_dispose_stops_reading_and_closes_the_source() -> None:
    class Source:
        def __init__(self) -> None:
            self.read = 0
            self.closed = False

        def __iter__(self) -> Any:
            for piece in sse_bytes(load_fixture("openai__parallel_tool_calls")).split(b"\n\n"):
                self.read += 1
                yield piece + b"\n\n"

        def close(self) -> None:
            self.closed = True

    source = Source()
    got = rt.from_sse(source).pipe(ops.take(3), ops.to_list()).run()
    assert len(got) == 3
    # The reader closes as its read returns, on its own thread: moments after run().
    assert settle(lambda: source.closed)
    assert source.read == 3


def test_async_source() -> None:
    chunks = load_fixture("openai__parallel_tool_calls")
    body = sse_bytes(chunks)

    async def pieces() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 11):
            await asyncio.sleep(0)
            yield body[i : i + 11]

    async def main() -> rt.AssistantTurn:
        turn: rt.AssistantTurn = await rt.from_sse(pieces()).pipe(rt.assemble())
        return turn

    assert [c.name for c in asyncio.run(main()).tool_calls] == ["GetWeatherArgs", "get_stock_price"]


# -- byte order mark, bounds ---------------------------------------------------------------


@pytest.mark.parametrize("split", [0, 1, 2, 3, 5])
def test_a_leading_byte_order_mark_is_ignored(split: int) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}
    body = b"\xef\xbb\xbf" + sse_bytes([chunk])
    values, errors = collect_sse([body[:split], body[split:]])
    assert errors == []
    assert values == [chunk]  # the first event used to be dropped: its field was "\ufeffdata"
    text_values, _ = collect_sse([body.decode("utf-8")])
    assert text_values == [chunk]


def test_only_the_first_byte_order_mark_is_ignored() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("\ufeffdata: a\n\n") == [ServerSentEvent("message", "a")]
    # Later ones are content: a field named "\ufeffdata" is no data field.
    assert decoder.feed("\ufeffdata: b\n\n") == []


def test_a_line_without_newline_is_refused_once_it_passes_the_limit() -> None:
    decoder = SSEDecoder(limits=rt.Limits(max_event=1000))
    decoder.feed(b"data: " + b"x" * 900)
    with pytest.raises(rt.LimitExceededError) as info:
        decoder.feed(b"x" * 200)
    assert info.value.limit == "max_event"
    assert info.value.value == 1000
    assert len(str(info.value)) < 200


def test_a_comment_line_is_bounded_too() -> None:
    decoder = SSEDecoder(limits=rt.Limits(max_event=100))
    with pytest.raises(rt.LimitExceededError):
        decoder.feed(": " + "k" * 200 + "\n")


def test_an_event_of_many_data_lines_is_refused_past_the_limit() -> None:
    decoder = SSEDecoder(limits=rt.Limits(max_event=1000))
    for _ in range(18):
        decoder.feed("data: " + "y" * 50 + "\n")  # 18 lines of 51 characters: 918
    with pytest.raises(rt.LimitExceededError, match="an event"):
        decoder.feed("data: " + "y" * 100 + "\n")


def test_events_within_the_limit_pass_and_the_count_restarts_per_event() -> None:
    decoder = SSEDecoder(limits=rt.Limits(max_event=100))
    for _ in range(50):
        assert decoder.feed("data: " + "z" * 90 + "\n\n") == [ServerSentEvent("message", "z" * 90)]


def test_the_default_limit_lets_a_large_chunk_through() -> None:
    big = {"choices": [{"index": 0, "delta": {"content": "w" * 5_000_000}}]}
    values, errors = collect_sse([sse_bytes([big])])
    assert errors == []
    assert values == [big]


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(1, 400), max_size=30), st.sampled_from(["\n", "\r\n", "\r"]))
def test_one_piece_or_many_give_the_same_events(cuts: set[int], newline: str) -> None:
    chunks = load_fixture(fixture_names()[0])[:6]
    body = sse_bytes(chunks, newline)
    whole = SSEDecoder().feed(body)
    decoder = SSEDecoder()
    edges = sorted(c for c in cuts if c < len(body))
    pieces = [body[a:b] for a, b in zip([0, *edges], [*edges, len(body)], strict=True)]
    assert [e for p in pieces for e in decoder.feed(p)] == whole
