"""SSEDecoder.chunks, the from-bytes fast path, against a plain line-by-line reference.

The reference reads the whole text at once, line by line, as the event-stream rules say; the
decoder gets the same bytes split anywhere and cuts whole events out of its buffer. Both must
give the same chunks and end the same way, whatever the JSON parser (the standard library's
scanner, or msgspec with the ``fast`` extra).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rxtoolcalls as rt
from rxtoolcalls import _sse
from rxtoolcalls._sse import DONE, ServerSentEvent, SSEDecoder, chunk_from_event
from tests.helpers import extra
from tests.test_fast_json import EDGES, JSON

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(params=["scanner", "msgspec", "json.loads"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which JSON parser the decoder uses in the test."""
    if request.param == "msgspec":
        pytest.importorskip("msgspec", reason=extra("fast"))
    else:
        monkeypatch.setattr(_sse, "_fast_decode", None)
    if request.param == "json.loads":
        monkeypatch.setattr(_sse, "_scan", None)
    return str(request.param)


def ending(error: BaseException | object | None) -> str:
    """How a stream ended, comparable across runs."""
    if error is None or error is DONE:
        return "DONE" if error is DONE else "open"
    return f"{type(error).__name__}: {error}"


def reference(text: str) -> tuple[list[Any], str]:
    """The chunks of a whole event stream read line by line, and how it ended."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    out: list[Any] = []
    data: list[str] = []
    name = ""
    try:
        for line in text.split("\n")[:-1]:  # the last line has no end: it dispatches nothing
            if not line:
                if data or name:
                    chunk = chunk_from_event(ServerSentEvent(name or "message", "\n".join(data)))
                    if chunk is DONE:
                        return out, "DONE"
                    if chunk is not None:
                        out.append(chunk)
                data, name = [], ""
            elif not line.startswith(":"):
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "data":
                    data.append(value)
                elif field == "event":
                    name = value
    except Exception as error:  # noqa: BLE001 - compared by type and message
        return out, ending(error)
    return out, "open"


def decoded(pieces: list[bytes]) -> tuple[list[Any], str]:
    decoder = SSEDecoder()
    out: list[Any] = []
    for piece in pieces:
        out += decoder.chunks(piece)
        if decoder.ended is not None:
            return out, ending(decoder.ended)
    return out, "open"


BLOCKS = [
    'data: {"a": 1, "s": "x"}\n\n',
    'data: {"b": [1, 2], "t": "é → 世界 🌍"}\n\n',
    'event: response.output_text.delta\ndata: {"type": "d", "delta": "hi"}\n\n',
    "event: ping\ndata: {}\n\n",
    ": keep-alive\n",
    "\n",
    "\n\n\n",
    'data: {"c":\ndata: 3}\n\n',
    "retry: 100\nid: 7\n",
    'data:{"nospace": true}\n\n',
    'event: content_block_delta\n: inner comment\ndata: {"x": 1}\n\n',
    "data: \n\n",
    "event: only-a-name\n\n",
    "data: [DONE]\n\n",
    'event: error\ndata: {"message": "overloaded", "type": "overloaded_error"}\n\n',
    'data: {"error": {"message": "boom", "code": 500}}\n\n',
    'data: {"object": "error", "message": "vllm"}\n\n',
    "data: not json\n\n",
    'data: {"open": \n\n',
    'data: {"a": 1} trailing\n\n',
    "data: [1, 2]\n\n",
]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.sampled_from(BLOCKS), max_size=25),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.sets(st.integers(1, 2000), max_size=20),
    st.booleans(),
)
def test_any_stream_split_anywhere_gives_the_references_chunks(
    parser: str, blocks: list[str], newline: str, cuts: set[int], bom: bool
) -> None:
    text = ("\ufeff" if bom else "") + "".join(blocks).replace("\n", newline)
    body = text.encode()
    edges = sorted(c for c in cuts if c < len(body))
    pieces = [body[a:b] for a, b in zip([0, *edges], [*edges, len(body)], strict=True)]
    assert decoded(pieces) == reference(text)


@pytest.mark.parametrize("size", [1, 7, 225, 226, 227, 16384])
def test_pieces_ending_between_a_line_and_its_blank_line(parser: str, size: int) -> None:
    # 226 characters an event: the first piece of 225 ends right after a line's first LF.
    chunks = [{"k": "v" * (202 - len(str(i))), "i": i} for i in range(200)]
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    assert {len(line) for line in text.split("\n\n")[:-2]} == {224}
    body = text.encode()
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    assert decoded(pieces) == (chunks, "DONE")


def test_chunks_before_an_error_in_the_same_piece_come_first(parser: str) -> None:
    decoder = SSEDecoder()
    body = b'data: {"a": 1}\n\ndata: {"error": {"message": "late"}}\n\ndata: {"b": 2}\n\n'
    assert decoder.chunks(body) == [{"a": 1}]
    assert isinstance(decoder.ended, rt.ProviderError)
    assert "late" in str(decoder.ended)
    assert decoder.chunks(b'data: {"c": 3}\n\n') == []  # nothing is read after the end


def test_nothing_after_done_is_read(parser: str) -> None:
    decoder = SSEDecoder()
    assert decoder.chunks(b'data: {"a": 1}\n\ndata: [DONE]\n\ndata: {"b": 2}\n\n') == [{"a": 1}]
    assert decoder.ended is DONE


def test_an_error_field_before_done_wins(parser: str) -> None:
    decoder = SSEDecoder()
    assert decoder.chunks(b'data: {"a": 1}\n\nerror: {"message": "old llama"}\n\n') == [{"a": 1}]
    assert decoder.chunks(b"data: [DONE]\n\n") == []
    assert isinstance(decoder.ended, rt.ProviderError)
    assert "old llama" in str(decoder.ended)


def test_a_long_stream_of_comments_without_a_blank_line_stays_bounded() -> None:
    decoder = SSEDecoder(limits=rt.Limits(max_event=1000))
    for _ in range(100):  # 100 x 40 characters: past the limit as text, each line within it
        assert decoder.chunks(": " + "c" * 37 + "\n") == []
    assert decoder.chunks('data: {"a": 1}\n\n') == [{"a": 1}]
    assert decoder.chunks("data: " + "d" * 2000) == []
    assert isinstance(decoder.ended, rt.LimitExceededError)


def wrapped(text: str | bytes) -> bytes:
    """An event whose data is an object holding ``text``: the path nearly every chunk takes."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return b'data: {"choices": [], "v": ' + raw + b"}\n\n"


def one_event(body: bytes) -> str:
    decoder = SSEDecoder()
    try:
        out = decoder.chunks(body)
    except Exception as error:  # noqa: BLE001 - compared by type and message
        return ending(error)
    return (
        repr(out)
        + repr([type(v).__name__ for c in out for v in c.values()])
        + ending(decoder.ended)
    )


def stdlib_one_event(body: bytes, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patched:
        patched.setattr(_sse, "_fast_decode", None)
        patched.setattr(_sse, "_scan", None)
        return one_event(body)


@pytest.mark.parametrize("text", EDGES, ids=range(len(EDGES)))
def test_edge_values_in_an_event_end_as_with_json_loads(
    parser: str, text: str | bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    for body in (
        wrapped(text),
        b"data: "
        + (text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        + b"\n\n",
    ):
        assert one_event(body) == stdlib_one_event(body, monkeypatch)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=JSON, ascii_only=st.booleans())
def test_any_json_value_in_an_event_ends_as_with_json_loads(
    parser: str, value: Any, ascii_only: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = wrapped(json.dumps(value, ensure_ascii=ascii_only))
    assert one_event(body) == stdlib_one_event(body, monkeypatch)


def wire_body(path: Path) -> bytes:
    """A recording as the server sent it: named events for the wires that name them."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    parts = []
    for record in lines:
        if "event" in record and "data" in record:
            named = "" if path.parent.name == "gemini" else f"event: {record['event']}\n"
            parts.append(f"{named}data: {json.dumps(record['data'], ensure_ascii=False)}\n\n")
        else:
            parts.append(f"data: {json.dumps(record, ensure_ascii=False)}\n\n")
    return "".join(parts).encode()


# Ids Gemini turns make up for calls without one: random, so compared as one.
SYNTHESIZED = re.compile(r"call_[0-9a-f]{24}")
RECORDINGS = sorted((FIXTURES / "streams").glob("*.jsonl")) + sorted(
    (FIXTURES / "wire").rglob("*.jsonl")
)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_recording_from_bytes_assembles_as_with_json_loads(
    parser: str, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = wire_body(path)

    def turn(size: int) -> str:
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        values: list[Any] = []
        errors: list[Exception] = []
        rt.from_sse(pieces).pipe(rt.assemble()).subscribe(values.append, errors.append)
        text = repr(values) + repr([(type(e).__name__, str(e)) for e in errors])
        return SYNTHESIZED.sub("call_*", text) if path.parent.name == "gemini" else text

    ours = {turn(size) for size in (16384, 97, 1)}
    assert len(ours) == 1
    with monkeypatch.context() as patched:
        patched.setattr(_sse, "_fast_decode", None)
        patched.setattr(_sse, "_scan", None)
        assert turn(16384) in ours


def test_feed_reads_an_error_field_as_its_line_ends() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"error: boom\n") == []
    assert decoder.error_field == "boom"


def test_the_cli_reports_an_error_field_in_the_event_of_done(tmp_path: Path) -> None:
    from rxtoolcalls.__main__ import main

    capture = tmp_path / "err.sse"
    capture.write_bytes(
        b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
        b'error: {"message":"overloaded","code":503}\ndata: [DONE]\n\n'
    )
    out = io.StringIO()
    assert main(["replay", str(capture)], out) == 9  # a ProviderError, as from_sse gives


def test_events_before_a_bad_byte_in_the_same_piece_come_out_first(parser: str) -> None:
    decoder = SSEDecoder()
    assert decoder.chunks(b'data: {"a": 1}\n\ndata: {"b": \xff}\n\n') == [{"a": 1}]
    assert isinstance(decoder.ended, rt.MalformedChunkError)
    done = SSEDecoder()
    assert done.chunks(b'data: {"a": 1}\n\ndata: [DONE]\n\n\xff') == [{"a": 1}]
    assert done.ended is DONE


def test_events_before_a_line_past_the_limit_in_the_same_piece_come_out_first() -> None:
    decoder = SSEDecoder(limits=rt.Limits(max_event=100))
    assert decoder.chunks(b'data: {"a": 1}\n\n: ' + b"x" * 200 + b"\n") == [{"a": 1}]
    assert isinstance(decoder.ended, rt.LimitExceededError)


@pytest.mark.parametrize("size", [1, 1024, 1 << 20])
def test_a_large_event_in_small_pieces_is_read_whole(parser: str, size: int) -> None:
    value = {"a": "x" * 3_000_000}
    body = f"data: {json.dumps(value)}\n\n".encode()
    if size == 1:
        body = body[: 200_000 - 2] + b'"}\n\n'  # one byte at a time: a smaller event
        value = json.loads(body[6:])
    decoder = SSEDecoder()
    out: list[Any] = []
    for i in range(0, len(body), size):
        out += decoder.chunks(body[i : i + size])
    assert out == [value]
    assert decoder.ended is None
