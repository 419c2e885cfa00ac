"""AWS event stream framing: the recorded Bedrock bodies, any split, damage, and the sources."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import random
import struct
import uuid
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import botocore.parsers  # type: ignore[import-untyped]
import botocore.session  # type: ignore[import-untyped]
import pytest
from botocore.eventstream import EventStream  # type: ignore[import-untyped]
from botocore.exceptions import EventStreamError  # type: ignore[import-untyped]
from reactivex import Observable
from reactivex import operators as ops

from rxtoolcalls._errors import (
    RETRY_HINT,
    LimitExceededError,
    MalformedChunkError,
    ProviderError,
    StreamInterruptedError,
    ToolCallStreamError,
)
from rxtoolcalls._eventstream import EventStreamDecoder, Frame, encode_frame
from rxtoolcalls._policy import Limits
from rxtoolcalls.wires.bedrock import (
    FINAL_EXCEPTIONS,
    RETRYABLE_EXCEPTIONS,
    frame_event,
    from_eventstream,
)

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

BEDROCK = Path(__file__).parent / "fixtures" / "wire" / "bedrock"
STEMS = sorted(path.stem for path in BEDROCK.glob("*.eventstream"))
EVENT = {":message-type": "event", ":content-type": "application/json"}


def body_of(stem: str) -> bytes:
    return (BEDROCK / f"{stem}.eventstream").read_bytes()


def lines_of(stem: str) -> list[dict[str, Any]]:
    with (BEDROCK / f"{stem}.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def decode(pieces: Iterator[bytes] | list[bytes]) -> list[Frame]:
    decoder = EventStreamDecoder()
    frames = [frame for piece in pieces for frame in decoder.feed(piece)]
    decoder.end()
    return frames


def feed_all(decoder: EventStreamDecoder, pieces: list[bytes], got: list[Frame]) -> None:
    for piece in pieces:
        got += decoder.feed(piece)
    decoder.end()


def random_pieces(body: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(body)), rng.randint(1, min(40, len(body) - 1))))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


def frame_ends(body: bytes) -> list[int]:
    """Where each frame ends, from the length fields alone (the oracle for damage tests)."""
    ends, at = [], 0
    while at < len(body):
        at += struct.unpack_from(">I", body, at)[0]
        ends.append(at)
    return ends


def raw_frame(headers: bytes, payload: bytes) -> bytes:
    """A frame with these raw header bytes; both CRCs right."""
    prelude = struct.pack(">II", 16 + len(headers) + len(payload), len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return message + struct.pack(">I", zlib.crc32(message))


def header(name: str, kind: int, value: bytes) -> bytes:
    return bytes((len(name),)) + name.encode() + bytes((kind,)) + value


def event_frame(name: str, payload: dict[str, Any]) -> bytes:
    return encode_frame({**EVENT, ":event-type": name}, json.dumps(payload).encode())


def exception_frame(kind: str, message: str) -> bytes:
    headers = {":message-type": "exception", ":exception-type": kind}
    return encode_frame(
        {**headers, ":content-type": "application/json"}, json.dumps({"message": message}).encode()
    )


class Notifications:
    """Every notification in order, to check that nothing follows a terminal one."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def subscribe(self, observable: Observable[Any]) -> None:
        observable.subscribe(
            lambda value: self.seen.append(("next", value)),
            lambda error: self.seen.append(("error", error)),
            lambda: self.seen.append(("completed", None)),
        )

    @property
    def values(self) -> list[Any]:
        return [value for kind, value in self.seen if kind == "next"]

    def error(self) -> Exception:
        kinds = [kind for kind, _ in self.seen]
        assert kinds.count("error") == 1
        assert kinds[-1] == "error"
        assert "completed" not in kinds
        error = self.seen[-1][1]
        assert isinstance(error, Exception)
        return error

    def completed(self) -> None:
        assert [kind for kind, _ in self.seen if kind != "next"] == ["completed"]
        assert self.seen[-1][0] == "completed"


# The recordings: frames, splits, and boto3's own parser


@pytest.mark.parametrize("stem", STEMS)
def test_every_recording_decodes_to_its_lines(stem: str) -> None:
    frames = decode([body_of(stem)])
    lines = lines_of(stem)
    assert [(f.headers[":event-type"], json.loads(f.payload)) for f in frames] == [
        (line["event"], line["data"]) for line in lines
    ]
    assert all(f.headers[":message-type"] == "event" for f in frames)
    assert all(f.headers[":content-type"] == "application/json" for f in frames)
    # The recordings keep Bedrock's padding; the events leave it out.
    assert all("p" in line["data"] for line in lines)
    assert all("p" not in event[name] for event in map(frame_event, frames) for name in event)


def test_one_byte_at_a_time() -> None:
    body = body_of("pydantic-ai__claude37_redacted_reasoning")
    assert decode(body[i : i + 1] for i in range(len(body))) == decode([body])


@pytest.mark.parametrize("stem", STEMS)
def test_random_splits(stem: str) -> None:
    body = body_of(stem)
    whole = decode([body])
    rng = random.Random(stem)
    for _ in range(25):
        assert decode(random_pieces(body, rng)) == whole


def test_blobs_are_decoded_and_padding_dropped() -> None:
    frames = decode([body_of("pydantic-ai__claude37_redacted_reasoning")])
    delta = frame_event(frames[1])["contentBlockDelta"]["delta"]
    redacted = delta["reasoningContent"]["redactedContent"]
    assert isinstance(redacted, bytes)
    assert redacted.startswith(b"EtkECkgI")  # the signature the source's own test names
    chunk = frame_event(decode([body_of("openinference__claude35_text_then_two_tool_use")])[0])
    assert list(chunk) == ["chunk"]
    assert json.loads(chunk["chunk"]["bytes"])["type"] == "message_start"
    assert frame_event(frames[0]) == {"messageStart": {"role": "assistant"}}


_MODEL = botocore.session.get_session().get_service_model("bedrock-runtime")


def operation_of(stem: str) -> str:
    first = lines_of(stem)[0]["event"]
    return "InvokeModelWithResponseStream" if first == "chunk" else "ConverseStream"


class _Body:
    """What botocore's ``EventStream`` reads: a raw body with ``stream()``."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self) -> Iterator[bytes]:
        yield self.body

    def close(self) -> None:
        pass


def boto3_events(body: bytes, operation: str) -> Iterator[dict[str, Any]]:
    shape = _MODEL.operation_model(operation).get_event_stream_output()
    parser = botocore.parsers.EventStreamJSONParser()
    events: Iterator[dict[str, Any]] = iter(EventStream(_Body(body), shape, parser, operation))
    return events


def as_boto3(shape: Any, value: Any, path: str, unmodeled: set[str]) -> Any:
    """``value`` as botocore shapes it: members its model does not list, and nulls, left out."""
    if shape.type_name == "structure" and not shape.is_document_type:
        kept = {}
        for key, item in value.items():
            if key not in shape.members:
                unmodeled.add(f"{path}.{key}")
            elif item is not None:
                kept[key] = as_boto3(shape.members[key], item, f"{path}.{key}", unmodeled)
        return kept
    if shape.type_name == "list":
        return [as_boto3(shape.member, item, f"{path}[]", unmodeled) for item in value]
    if shape.type_name == "map":
        return {k: as_boto3(shape.value, v, f"{path}{{}}", unmodeled) for k, v in value.items()}
    return value


def test_the_same_events_as_boto3() -> None:
    """Differential: botocore's ``EventStream`` over the same bytes yields the same events.

    botocore also drops what its model (the installed version's) does not list; we keep it.
    Across the recordings that is at most one field, newer than botocore 1.44's model.
    """
    unmodeled: set[str] = set()
    for stem in STEMS:
        body = body_of(stem)
        operation = operation_of(stem)
        shape = _MODEL.operation_model(operation).get_event_stream_output()
        ours = [frame_event(frame) for frame in decode([body])]
        theirs = list(boto3_events(body, operation))
        assert len(theirs) == len(ours), stem
        for mine, boto3 in zip(ours, theirs, strict=True):
            assert as_boto3(shape, mine, "", unmodeled) == boto3, stem
    assert unmodeled <= {".metadata.usage.serverToolUsage"}


@pytest.mark.parametrize("operation", ["ConverseStream", "InvokeModelWithResponseStream"])
def test_an_exception_frame_as_boto3_reads_it(operation: str) -> None:
    first = (
        event_frame("messageStart", {"role": "assistant", "p": "abc"})
        if operation == "ConverseStream"
        else event_frame("chunk", {"bytes": base64.b64encode(b"{}").decode(), "p": "ab"})
    )
    body = first + exception_frame("throttlingException", "Too many tokens, please wait.")
    theirs = boto3_events(body, operation)
    ours = Notifications()
    ours.subscribe(from_eventstream(body))
    assert ours.values == [next(theirs)]
    with pytest.raises(EventStreamError) as raised:
        next(theirs)
    error = ours.error()
    assert isinstance(error, ProviderError)
    assert error.code == raised.value.response["Error"]["Code"] == "throttlingException"
    assert raised.value.response["Error"]["Message"] in error.message


# Damage: every failure typed, nothing after it


@pytest.mark.parametrize("where", ["length", "prelude crc", "header", "payload", "message crc"])
def test_a_flipped_bit_is_malformed(where: str) -> None:
    stem = "pydantic-ai__nova_text_after_tool_result"
    body = bytearray(body_of(stem))
    ends = frame_ends(bytes(body))
    start = ends[2]  # the fourth frame
    headers = struct.unpack_from(">I", body, start + 4)[0]
    offset = {
        "length": 2,
        "prelude crc": 9,
        "header": 12 + 3,
        "payload": 12 + headers + 5,
        "message crc": ends[3] - start - 2,
    }[where]
    body[start + offset] ^= 0x10
    seen = Notifications()
    seen.subscribe(from_eventstream(bytes(body)))
    error = seen.error()
    assert isinstance(error, MalformedChunkError)
    check = "prelude" if where in ("length", "prelude crc") else "message"
    assert f"{check} CRC32" in error.message
    assert "frame 4 " in error.message
    assert seen.values == expected_events(stem)[:3]


@pytest.mark.parametrize("stem", STEMS)
def test_any_damaged_byte_stops_at_its_frame(stem: str) -> None:
    body = body_of(stem)
    ends = frame_ends(body)
    whole = decode([body])
    rng = random.Random(stem)
    for at in rng.sample(range(len(body)), 12):
        damaged = bytearray(body)
        damaged[at] ^= 1 << rng.randrange(8)
        frame = next(k for k, end in enumerate(ends) if at < end)
        for pieces in ([bytes(damaged)], random_pieces(bytes(damaged), rng)):
            decoder = EventStreamDecoder()
            got: list[Frame] = []
            with pytest.raises(MalformedChunkError):
                feed_all(decoder, pieces, got)
            # However it is split: the frames before the damaged one, and not one more.
            assert got == whole[:frame]
            with pytest.raises(MalformedChunkError):
                decoder.feed(b"")  # a failed decoder stays failed


@pytest.mark.parametrize("cut", [1, 11, 12, 20, 60, -5, -1])
def test_a_body_cut_inside_a_frame_is_interrupted(cut: int) -> None:
    body = body_of("pydantic-ai__nova_text_after_tool_result")
    ends = frame_ends(body)
    at = ends[4] + cut if cut > 0 else ends[5] + cut
    seen = Notifications()
    seen.subscribe(from_eventstream([body[:at]]))
    error = seen.error()
    assert isinstance(error, StreamInterruptedError)
    assert not isinstance(error, ProviderError)
    assert "frame 6 " in error.message
    assert error.hint == RETRY_HINT
    assert seen.values == [frame_event(f) for f in decode([body])][:5]


def test_an_empty_body_is_no_events() -> None:
    seen = Notifications()
    seen.subscribe(from_eventstream(b""))
    seen.completed()
    assert seen.values == []


def prelude(total: int, headers: int) -> bytes:
    head = struct.pack(">II", total, headers)
    return head + struct.pack(">I", zlib.crc32(head))


@pytest.mark.parametrize(
    ("total", "headers", "words"),
    [
        (15, 0, "impossible lengths"),
        (0, 0, "impossible lengths"),
        (40, 25, "impossible lengths"),
        (2**32 - 1, 0, "format's maximum"),
        (16 + 200 * 1024, 200 * 1024, "format's maximum"),
    ],
)
def test_impossible_lengths_are_malformed(total: int, headers: int, words: str) -> None:
    decoder = EventStreamDecoder()
    with pytest.raises(MalformedChunkError, match=words):
        decoder.feed(prelude(total, headers))  # from the prelude alone: nothing buffered


def test_a_frame_past_max_event_is_a_limit() -> None:
    body = event_frame("messageStart", {"role": "assistant", "p": "x" * 200})
    decoder = EventStreamDecoder(limits=Limits(max_event=100))
    with pytest.raises(LimitExceededError) as raised:
        decoder.feed(body[:12])
    assert raised.value.limit == "max_event"
    assert raised.value.value == 100
    assert decode([body]) == EventStreamDecoder(limits=Limits(max_event=len(body))).feed(body)
    seen = Notifications()
    seen.subscribe(from_eventstream(body, limits=Limits(max_event=100)))
    assert isinstance(seen.error(), LimitExceededError)


def test_every_header_type() -> None:
    one = uuid.UUID("12345678-1234-5678-1234-567812345678")
    headers = b"".join(
        [
            header("yes", 0, b""),
            header("no", 1, b""),
            header("byte", 2, struct.pack(">b", -2)),
            header("short", 3, struct.pack(">h", -300)),
            header("int", 4, struct.pack(">i", -70000)),
            header("long", 5, struct.pack(">q", -(2**40))),
            header("blob", 6, struct.pack(">H", 3) + b"\x00\xff\x01"),
            header("text", 7, struct.pack(">H", 5) + "é€".encode()),
            header("time", 8, struct.pack(">q", 1_700_000_000_000)),
            header("id", 9, one.bytes),
        ]
    )
    (frame,) = decode([raw_frame(headers, b"payload")])
    assert frame.headers == {
        "yes": True,
        "no": False,
        "byte": -2,
        "short": -300,
        "int": -70000,
        "long": -(2**40),
        "blob": b"\x00\xff\x01",
        "text": "é€",
        "time": 1_700_000_000_000,
        "id": one,
    }
    assert frame.payload == b"payload"


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        (header("x", 10, b""), "unknown type 10"),
        (header("x", 255, b""), "unknown type 255"),
        (header("x", 7, struct.pack(">H", 9) + b"abc"), "cut short"),
        (header("x", 5, b"\x00\x01"), "cut short"),
        (header("x", 9, b"\x00" * 15), "cut short"),
        (b"\x05ab", "cut short"),
        (header("x", 7, struct.pack(">H", 2) + b"\xff\xfe"), "not UTF-8"),
        (b"\x02\xff\xfe\x00", "not UTF-8"),
        (header("x", 0, b"") + header("x", 1, b""), "repeats the header"),
    ],
)
def test_bad_headers_are_malformed(headers: bytes, words: str) -> None:
    with pytest.raises(MalformedChunkError, match=words):
        decode([raw_frame(headers, b"{}")])


@pytest.mark.parametrize("length", [12, 13, 16, 64, 1000, 5000])
def test_garbage_is_malformed(length: int) -> None:
    rng = random.Random(length)
    for _ in range(20):
        garbage = rng.randbytes(length)
        seen = Notifications()
        seen.subscribe(from_eventstream(garbage))
        error = seen.error()
        assert type(error) is MalformedChunkError, repr(error)
        # After real frames too, and whatever the split.
        pieces = random_pieces(body_of("pydantic-ai__nova_text_after_tool_result") + garbage, rng)
        seen = Notifications()
        seen.subscribe(from_eventstream(pieces))
        assert type(seen.error()) is MalformedChunkError
        assert len(seen.values) == 9


def test_short_garbage_is_a_cut_frame() -> None:
    for length in range(1, 12):
        seen = Notifications()
        seen.subscribe(from_eventstream(random.Random(length).randbytes(length)))
        assert type(seen.error()) is StreamInterruptedError


# Frames to events


@pytest.mark.parametrize(
    ("kind", "retryable"),
    [
        ("throttlingException", True),
        ("serviceUnavailableException", True),
        ("internalServerException", True),
        ("modelStreamErrorException", True),
        ("modelTimeoutException", True),
        ("validationException", False),
    ],
)
def test_exception_frames(kind: str, retryable: bool) -> None:
    body = event_frame("messageStart", {"role": "assistant"}) + exception_frame(kind, "It said so.")
    seen = Notifications()
    seen.subscribe(from_eventstream(body))
    assert seen.values == [{"messageStart": {"role": "assistant"}}]
    error = seen.error()
    assert isinstance(error, ProviderError)
    assert error.code == kind
    assert error.body == {"message": "It said so."}
    assert error.retryable is retryable
    assert (error.hint == RETRY_HINT) is retryable
    assert error.hint is not None
    assert "It said so." in error.message
    assert kind in (RETRYABLE_EXCEPTIONS if retryable else FINAL_EXCEPTIONS)
    assert kind[0].upper() + kind[1:] in (RETRYABLE_EXCEPTIONS if retryable else FINAL_EXCEPTIONS)


def test_the_exception_sets_are_the_service_models() -> None:
    """Every exception a Bedrock stream can carry is classed, and each at most once."""
    assert not RETRYABLE_EXCEPTIONS & FINAL_EXCEPTIONS
    for operation in ("ConverseStream", "InvokeModelWithResponseStream"):
        shape = _MODEL.operation_model(operation).get_event_stream_output()
        for name, member in shape.members.items():
            exception = bool(member.metadata.get("exception"))
            assert exception == (name in RETRYABLE_EXCEPTIONS | FINAL_EXCEPTIONS), name


def test_an_unknown_exception_is_not_classed() -> None:
    with pytest.raises(ProviderError) as raised:
        frame_event(decode([exception_frame("newKindOfException", "?")])[0])
    assert raised.value.retryable is None
    assert raised.value.hint is None


def test_an_exception_frame_that_is_not_json_keeps_its_type() -> None:
    frame = Frame({":message-type": "exception", ":exception-type": "throttlingException"}, b"<")
    with pytest.raises(ProviderError) as raised:
        frame_event(frame)
    assert raised.value.code == "throttlingException"
    assert raised.value.body is None
    assert raised.value.retryable is True


def test_an_error_frame() -> None:
    headers = {
        ":message-type": "error",
        ":error-code": "InternalFailure",
        ":error-message": "Something went wrong.",
    }
    seen = Notifications()
    seen.subscribe(from_eventstream(encode_frame(headers, b"")))
    error = seen.error()
    assert isinstance(error, ProviderError)
    assert error.code == "InternalFailure"
    assert "Something went wrong." in error.message


@pytest.mark.parametrize(
    ("headers", "payload", "words"),
    [
        ({**EVENT, ":event-type": "messageStart"}, b'{"role": "assis', "not JSON"),
        ({**EVENT, ":event-type": "messageStart"}, b"[1, 2]", "not a JSON object"),
        ({**EVENT, ":event-type": "messageStart"}, b"\xff\xfe", "not"),
        (EVENT, b"{}", "no :event-type"),
        ({":message-type": "note", ":event-type": "x"}, b"{}", "unknown :message-type"),
        (
            {**EVENT, ":event-type": "contentBlockDelta"},
            b'{"delta": {"reasoningContent": {"redactedContent": "abc"}}}',
            "not base64",
        ),
        ({**EVENT, ":event-type": "chunk"}, b'{"bytes": 12}', "not base64"),
    ],
)
def test_bad_payloads_are_malformed(headers: dict[str, str], payload: bytes, words: str) -> None:
    with pytest.raises(MalformedChunkError, match=words):
        frame_event(decode([encode_frame(headers, payload)])[0])


def test_what_boto3_accepts_passes() -> None:
    """A missing ``:message-type`` is an event, an empty payload ``{}``, unknown types kept."""
    assert frame_event(Frame({":event-type": "messageStop"}, b"")) == {"messageStop": {}}
    assert frame_event(Frame({":event-type": "futureEvent"}, b'{"a": 1, "p": "x"}')) == {
        "futureEvent": {"a": 1}
    }
    # "p" is padding at the top level only; a field of that name deeper is the event's.
    assert frame_event(Frame({":event-type": "x"}, b'{"a": {"p": 1}}')) == {"x": {"a": {"p": 1}}}


def test_encode_frame_round_trips() -> None:
    headers = {":event-type": "contentBlockDelta", "ünïcode": "välue", "": ""}
    payload = bytes(range(256)) * 3
    (frame,) = decode([encode_frame(headers, payload)])
    assert frame == Frame(dict(headers), payload)
    with pytest.raises(ValueError, match="too long"):
        encode_frame({"x" * 256: ""}, b"")
    with pytest.raises(ValueError, match="too long"):
        encode_frame({"x": "y" * 65536}, b"")


# from_eventstream: the sources


def expected_events(stem: str) -> list[dict[str, Any]]:
    return [frame_event(frame) for frame in decode([body_of(stem)])]


STEM = "pydantic-ai__nova_text_then_tool_use"


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_from_bytes(kind: type[bytes] | type[bytearray] | type[memoryview]) -> None:
    source = from_eventstream(kind(body_of(STEM)))
    for _ in range(2):  # each subscription reads it anew
        seen = Notifications()
        seen.subscribe(source)
        seen.completed()
        assert seen.values == expected_events(STEM)


def test_from_a_file() -> None:
    with (BEDROCK / f"{STEM}.eventstream").open("rb") as file:
        seen = Notifications()
        seen.subscribe(from_eventstream(file))
        assert file.closed
    seen.completed()
    assert seen.values == expected_events(STEM)
    assert from_eventstream(io.BytesIO(body_of(STEM))).pipe(ops.to_list()).run() == (
        expected_events(STEM)
    )


class Socketish:
    """A file read in small pieces, as from a network, that counts reads and closing."""

    def __init__(self, body: bytes, size: int = 100) -> None:
        self.body, self.size = body, size
        self.reads = 0
        self.closed = False

    def read(self, size: int) -> bytes:
        assert not self.closed
        assert size > 0
        piece = self.body[self.reads * self.size : (self.reads + 1) * self.size]
        self.reads += 1
        return piece

    def close(self) -> None:
        self.closed = True


def test_from_a_file_read_in_pieces_and_disposed() -> None:
    body = body_of(STEM)
    whole = Socketish(body)
    assert from_eventstream(whole).pipe(ops.to_list()).run() == expected_events(STEM)
    assert whole.closed
    assert whole.reads == -(-len(body) // 100) + 1  # the last read is b""

    first = Socketish(body)
    got = from_eventstream(first).pipe(ops.take(1), ops.to_list()).run()
    assert got == expected_events(STEM)[:1]
    assert first.closed
    # Stopped after the piece that completed the first frame.
    assert first.reads == -(-frame_ends(body)[0] // 100)


def test_from_a_list_of_pieces() -> None:
    body = body_of(STEM)
    pieces = random_pieces(body, random.Random(1))
    assert from_eventstream(pieces).pipe(ops.to_list()).run() == expected_events(STEM)


def test_a_generator_that_fails() -> None:
    body = body_of(STEM)
    ends = frame_ends(body)
    closed: list[bool] = []

    def pieces() -> Iterator[bytes]:
        try:
            yield body[: ends[3] + 7]
            raise ConnectionResetError("the peer hung up")
        finally:
            closed.append(True)

    seen = Notifications()
    seen.subscribe(from_eventstream(pieces()))
    error = seen.error()
    assert isinstance(error, StreamInterruptedError)
    assert isinstance(error.__cause__, ConnectionResetError)
    assert seen.values == expected_events(STEM)[:4]
    assert closed == [True]


def test_disposing_stops_reading_and_closes_the_generator() -> None:
    body = body_of(STEM)
    ends = frame_ends(body)
    reads: list[int] = []
    closed: list[bool] = []

    def pieces() -> Iterator[bytes]:
        try:
            for start, end in zip([0, *ends], ends, strict=False):
                reads.append(start)
                yield body[start:end]
        finally:
            closed.append(True)

    got = from_eventstream(pieces()).pipe(ops.take(3), ops.to_list()).run()
    assert got == expected_events(STEM)[:3]
    assert len(reads) == 3
    assert closed == [True]


def test_a_subscriber_that_raises_is_not_the_streams() -> None:
    def boom(_: object) -> None:
        raise ZeroDivisionError

    errors: list[Exception] = []
    with pytest.raises(ZeroDivisionError):
        from_eventstream(body_of(STEM)).subscribe(boom, errors.append)
    assert errors == []


class Response:
    """An httpx-like streamed response: not iterable, ``iter_bytes`` and ``close``."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.closed = False

    def iter_bytes(self) -> Iterator[bytes]:
        yield from random_pieces(self.body, random.Random(2))

    def close(self) -> None:
        self.closed = True


def test_from_an_httpx_like_response() -> None:
    response = Response(body_of(STEM))
    assert from_eventstream(response).pipe(ops.to_list()).run() == expected_events(STEM)
    assert response.closed


def test_from_an_async_iterable() -> None:
    body = body_of(STEM)
    closed: list[bool] = []

    async def pieces() -> AsyncIterator[bytes]:
        try:
            for piece in random_pieces(body, random.Random(3)):
                await asyncio.sleep(0)
                yield piece
        finally:
            closed.append(True)

    async def main() -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = await from_eventstream(pieces()).pipe(ops.to_list())
        return events

    assert asyncio.run(main()) == expected_events(STEM)
    assert closed == [True]


def test_an_async_iterable_that_fails() -> None:
    body = body_of(STEM)

    async def pieces() -> AsyncIterator[bytes]:
        yield body[:300]
        raise ConnectionResetError("the peer hung up")

    async def main() -> Notifications:
        seen = Notifications()
        seen.subscribe(from_eventstream(pieces()))
        for _ in range(1000):
            if seen.seen and seen.seen[-1][0] != "next":
                break
            await asyncio.sleep(0.001)
        return seen

    seen = asyncio.run(main())
    error = seen.error()
    assert isinstance(error, StreamInterruptedError)
    assert isinstance(error.__cause__, ConnectionResetError)
    assert seen.values == [frame_event(f) for f in EventStreamDecoder().feed(body[:300])]


def test_disposing_an_async_read_closes_it() -> None:
    body = body_of(STEM)
    ends = frame_ends(body)
    reads: list[int] = []
    closed: list[bool] = []

    async def pieces() -> AsyncIterator[bytes]:
        try:
            for start, end in zip([0, *ends], ends, strict=False):
                reads.append(start)
                yield body[start:end]
                await asyncio.sleep(0.001)
        finally:
            closed.append(True)

    async def main() -> list[Any]:
        got: list[Any] = []
        subscription = from_eventstream(pieces()).subscribe(got.append)
        for _ in range(1000):
            if got:
                break
            await asyncio.sleep(0.001)
        subscription.dispose()
        for _ in range(20):
            await asyncio.sleep(0.001)
        return got

    assert asyncio.run(main()) == expected_events(STEM)[:1]
    assert closed == [True]
    assert len(reads) <= 2


def damaged_pieces(log: list[str]) -> list[bytes]:
    body = bytearray(body_of(STEM))
    ends = frame_ends(bytes(body))
    body[ends[1] + 20] ^= 1
    log.append("opened")
    return [bytes(body[: ends[1]]), bytes(body[ends[1] : ends[2]]), bytes(body[ends[2] :])]


def test_a_damaged_frame_closes_the_source_unread() -> None:
    log: list[str] = []

    def pieces() -> Iterator[bytes]:
        try:
            for piece in damaged_pieces(log):
                log.append("read")
                yield piece
        finally:
            log.append("closed")

    seen = Notifications()
    seen.subscribe(from_eventstream(pieces()))
    assert isinstance(seen.error(), MalformedChunkError)
    assert seen.values == expected_events(STEM)[:2]
    assert log == ["opened", "read", "read", "closed"]


class AsyncPieces:
    """An async iterator that is not a generator: only an explicit ``aclose`` closes it."""

    def __init__(self, pieces: list[bytes], log: list[str]) -> None:
        self.pieces, self.log = pieces, log

    def __aiter__(self) -> AsyncPieces:
        return self

    async def __anext__(self) -> bytes:
        if not self.pieces:
            raise StopAsyncIteration
        self.log.append("read")
        return self.pieces.pop(0)

    async def aclose(self) -> None:
        self.log.append("closed")


def test_a_damaged_frame_closes_the_async_source_unread() -> None:
    log: list[str] = []
    source = AsyncPieces(damaged_pieces(log), log)

    async def main() -> Notifications:
        seen = Notifications()
        seen.subscribe(from_eventstream(source))
        for _ in range(1000):
            if seen.seen and seen.seen[-1][0] != "next":
                break
            await asyncio.sleep(0.001)
        return seen

    seen = asyncio.run(main())
    assert isinstance(seen.error(), MalformedChunkError)
    assert seen.values == expected_events(STEM)[:2]
    assert log == ["opened", "read", "read", "closed"]


@pytest.mark.parametrize("source", ["text", 12, None, object(), io.StringIO("text")])
def test_what_is_not_bytes_is_a_type_error(source: Any) -> None:
    with pytest.raises(TypeError, match="from_eventstream needs"):
        from_eventstream(source)


def test_boto3s_decoded_stream_is_a_type_error() -> None:
    decoded = EventStream(_Body(b""), None, None, "ConverseStream")
    with pytest.raises(TypeError, match="decoded already"):
        from_eventstream(decoded)


def test_a_piece_that_is_not_bytes_is_a_type_error() -> None:
    seen = Notifications()
    seen.subscribe(from_eventstream(["text"]))  # type: ignore[list-item]
    assert isinstance(seen.error(), TypeError)


def test_every_error_is_ours() -> None:
    """Whatever the bytes, a failure is a ``ToolCallStreamError``: ours, typed."""
    rng = random.Random(7)
    body = body_of(STEM)
    for _ in range(300):
        damaged = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        cut = bytes(damaged[: rng.randint(0, len(damaged))])
        seen = Notifications()
        seen.subscribe(from_eventstream(random_pieces(cut, rng) if len(cut) > 1 else [cut]))
        if seen.seen[-1][0] == "error":
            assert isinstance(seen.error(), ToolCallStreamError)
        else:
            seen.completed()
