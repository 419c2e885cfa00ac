"""AWS event stream framing (``application/vnd.amazon.eventstream``), sans-IO, and its source.

AWS Bedrock streams (``ConverseStream``, ``InvokeModelWithResponseStream``) are not SSE but
binary frames. A frame is a 12-byte prelude (total length and headers length, big-endian
``uint32``, then the CRC32 of those 8 bytes), the headers, the payload, and the CRC32 of
everything before it. ``EventStreamDecoder`` cuts frames out of bytes split anywhere and checks
both CRCs; ``frame_event`` turns a frame into the event boto3 yields for it; ``from_eventstream``
reads a raw body as an Observable of those events. Written here, standard library only, so
that reading Bedrock's raw bytes does not need botocore; ``tests/test_eventstream.py`` checks
the events against botocore's own parser.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import struct
import threading
import uuid
import zlib
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reactivex import Observable, abc

from ._errors import (
    RETRY_HINT,
    LimitExceededError,
    MalformedChunkError,
    ProviderError,
    StreamInterruptedError,
    excerpt,
    provider_error,
)
from ._lift import interrupted
from ._policy import Limits
from ._sse import load_json
from .sources import (
    _blocking_source,
    _close,
    _Downstream,
    _from_async,
    _is_async_response,
    _StreamedResponse,
)

__all__ = [
    "EventStreamDecoder",
    "Frame",
    "encode_frame",
    "frame_event",
    "from_eventstream",
]


_PRELUDE = struct.Struct(">II")
_PRELUDE_SIZE = 12
_SMALLEST = 16  # a prelude and a message CRC: no headers, no payload
# The protocol's own ceilings (AWS SDKs reject frames past them too).
_MAX_HEADERS = 128 * 1024
_MAX_PAYLOAD = 24 * 1024 * 1024
_DEFAULT_LIMITS = Limits()
_READ_SIZE = 64 * 1024

# The header value types of a fixed size other than bool (0, 1) and UUID (9).
_FIXED: dict[int, struct.Struct] = {
    2: struct.Struct(">b"),
    3: struct.Struct(">h"),
    4: struct.Struct(">i"),
    5: struct.Struct(">q"),
    8: struct.Struct(">q"),  # a timestamp: milliseconds since the epoch, as on the wire
}
_U16 = struct.Struct(">H")


@dataclass(frozen=True, slots=True)
class Frame:
    """One event stream message: its decoded ``headers`` and its raw ``payload``.

    Header values are ``bool``, ``int`` (byte, short, int, long; a timestamp as milliseconds
    since the epoch), ``bytes``, ``str`` or ``uuid.UUID``, by their type on the wire.
    """

    headers: dict[str, object]
    payload: bytes


class EventStreamDecoder:
    """Cut AWS event stream frames out of bytes split anywhere, checking both CRCs.

    >>> body = encode_frame({":event-type": "messageStop"}, b"{}")
    >>> decoder = EventStreamDecoder()
    >>> decoder.feed(body[:5]), decoder.feed(body[5:])
    ([], [Frame(headers={':event-type': 'messageStop'}, payload=b'{}')])
    >>> decoder.end()

    A damaged frame (a CRC that fails, an impossible length, a bad header) is a
    ``MalformedChunkError``; a frame longer than ``limits.max_event`` bytes (``Limits()`` by
    default) a ``LimitExceededError``, raised when its prelude arrives. ``feed`` returns the
    frames before a damaged one and keeps the error in ``error``; the next ``feed`` or ``end``
    raises it, so the frames returned never depend on how the bytes were split. ``end`` raises
    ``StreamInterruptedError`` when the bytes stop inside a frame. Cost: linear in the bytes
    fed, however they are split (one copy into the buffer, one out, two CRCs).
    """

    __slots__ = ("_buffer", "_consumed", "_count", "_max", "_total", "error")

    def __init__(self, *, limits: Limits | None = None) -> None:
        self._buffer = bytearray()
        self._max = (limits or _DEFAULT_LIMITS).max_event
        # The length of the frame at the buffer's start, once its prelude has been checked.
        self._total = 0
        self._count = 0
        self._consumed = 0
        self.error: Exception | None = None
        """An error found after the frames ``feed`` returned last; raised by the next call."""

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Take the next bytes; return the frames they complete, in order."""
        if self.error is not None:
            raise self.error
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"an event stream is bytes, not {type(data).__name__}")
        buffer = self._buffer
        buffer += data
        frames: list[Frame] = []
        start = 0
        try:
            while True:
                if not self._total:
                    if len(buffer) - start < _PRELUDE_SIZE:
                        break
                    self._total = self._prelude(buffer, start)
                if len(buffer) - start < self._total:
                    break
                frames.append(self._frame(buffer, start, self._total))
                start += self._total
                self._consumed += self._total
                self._total = 0
        except (MalformedChunkError, LimitExceededError) as error:
            self.error = error
            if not frames:
                raise
        finally:
            # Once per feed: what is left is at most the bytes this feed brought after the
            # last frame it completed, so the copying stays linear (and CPython deletes
            # from a bytearray's front without copying at all).
            del buffer[:start]
        return frames

    def end(self) -> None:
        """Say that no more bytes come; raise if they stopped inside a frame."""
        if self.error is not None:
            raise self.error
        if self._buffer:
            expected = f" of {self._total:,}" if self._total else ""
            raise StreamInterruptedError(
                f"the event stream ended inside frame {self._count + 1} "
                f"({len(self._buffer):,}{expected} bytes): the body was cut off",
                hint=RETRY_HINT,
            )

    def _where(self) -> str:
        return f"frame {self._count + 1} (at byte {self._consumed:,})"

    def _prelude(self, buffer: bytearray, start: int) -> int:
        total, headers = _PRELUDE.unpack_from(buffer, start)
        with memoryview(buffer) as view:
            crc = zlib.crc32(view[start : start + 8])
        if crc != int.from_bytes(buffer[start + 8 : start + 12], "big"):
            raise MalformedChunkError(
                f"{self._where()} of the event stream fails its prelude CRC32 check: the bytes "
                f"are damaged or not an AWS event stream"
            )
        if total < _SMALLEST or headers > total - _SMALLEST:
            raise MalformedChunkError(
                f"{self._where()} of the event stream gives impossible lengths "
                f"(total {total:,} bytes, headers {headers:,})"
            )
        if headers > _MAX_HEADERS or total - _SMALLEST - headers > _MAX_PAYLOAD:
            raise MalformedChunkError(
                f"{self._where()} of the event stream is past the format's maximum "
                f"(headers {headers:,} bytes, payload {total - _SMALLEST - headers:,}; "
                f"at most {_MAX_HEADERS:,} and {_MAX_PAYLOAD:,})"
            )
        if total > self._max:
            raise LimitExceededError(
                f"{self._where()} of the event stream is {total:,} bytes, past "
                f"Limits.max_event ({self._max:,}); nothing of it was kept",
                limit="max_event",
                value=self._max,
            )
        return int(total)

    def _frame(self, buffer: bytearray, start: int, total: int) -> Frame:
        end = start + total - 4
        headers_end = start + _PRELUDE_SIZE + _PRELUDE.unpack_from(buffer, start)[1]
        # Slices of a view copy nothing; each is gone before the view is released, as a
        # bytearray with a live view cannot be resized.
        with memoryview(buffer) as view:
            crc = zlib.crc32(view[start:end])
        if crc != int.from_bytes(buffer[end : end + 4], "big"):
            raise MalformedChunkError(
                f"{self._where()} of the event stream fails its message CRC32 check: its bytes "
                f"were damaged"
            )
        headers = self._headers(bytes(buffer[start + _PRELUDE_SIZE : headers_end]))
        frame = Frame(headers, bytes(buffer[headers_end:end]))
        self._count += 1
        return frame

    def _headers(self, data: bytes) -> dict[str, object]:
        headers: dict[str, object] = {}
        at, size = 0, len(data)
        try:
            while at < size:
                length = data[at]
                name = data[at + 1 : at + 1 + length].decode("utf-8")
                at += 1 + length
                kind = data[at]
                at += 1
                value: object
                if kind <= 1:
                    value = kind == 0
                elif kind in _FIXED:
                    fixed = _FIXED[kind]
                    (value,) = fixed.unpack_from(data, at)
                    at += fixed.size
                elif kind in (6, 7):
                    (length,) = _U16.unpack_from(data, at)
                    raw = data[at + 2 : at + 2 + length]
                    if len(raw) < length:
                        raise IndexError
                    value = raw if kind == 6 else raw.decode("utf-8")
                    at += 2 + length
                elif kind == 9:
                    value = uuid.UUID(bytes=data[at : at + 16])
                    at += 16
                else:
                    raise MalformedChunkError(
                        f"{self._where()} of the event stream has a header of unknown type {kind}"
                    )
                if at > size:
                    raise IndexError
                if name in headers:
                    raise MalformedChunkError(
                        f"{self._where()} of the event stream repeats the header {excerpt(name)}"
                    )
                headers[name] = value
        except (IndexError, struct.error, ValueError) as error:
            # Cut short (IndexError, struct.error, a short UUID) or not UTF-8 (a ValueError).
            what = "is not UTF-8" if isinstance(error, UnicodeDecodeError) else "is cut short"
            raise MalformedChunkError(
                f"a header of {self._where()} of the event stream {what}"
            ) from None
        return headers


def encode_frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    r"""One event stream frame with string ``headers`` and ``payload``, both CRCs computed.

    >>> encode_frame({}, b"")
    b'\x00\x00\x00\x10\x00\x00\x00\x00\x05\xc2H\xeb}\x98\xc8\xff'
    """
    parts = []
    for name, value in headers.items():
        key, text = name.encode("utf-8"), value.encode("utf-8")
        if len(key) > 255 or len(text) > 65535:
            raise ValueError(f"the header {excerpt(name)} is too long for an event stream")
        parts += [bytes((len(key),)), key, b"\x07", _U16.pack(len(text)), text]
    encoded = b"".join(parts)
    prelude = _PRELUDE.pack(_SMALLEST + len(encoded) + len(payload), len(encoded))
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + encoded + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


# Where the blob members of Bedrock's event shapes are (``botocore/data/bedrock-runtime/
# 2023-09-30/service-2.json``): base64 in JSON on the wire, ``bytes`` in what boto3 yields.
_BLOBS: dict[str, tuple[tuple[str, ...], ...]] = {
    "chunk": (("bytes",),),  # InvokeModelWithResponseStream's PayloadPart
    "contentBlockDelta": (
        ("delta", "reasoningContent", "redactedContent"),
        ("delta", "image", "source", "bytes"),
    ),
}


def frame_event(frame: Frame) -> dict[str, Any]:
    """The event boto3 yields for ``frame``: ``{<:event-type>: <its JSON payload>}``.

    As in boto3, the padding field ``p`` is left out of the payload and its blobs
    (``chunk.bytes``; ``contentBlockDelta.delta.reasoningContent.redactedContent`` and
    ``.image.source.bytes``) are base64-decoded to ``bytes``. Unlike boto3, fields and event
    types that the installed botocore's model does not list are kept, not dropped.

    >>> frame_event(Frame({":event-type": "chunk"}, b'{"bytes": "e30=", "p": "abc"}'))
    {'chunk': {'bytes': b'{}'}}

    An ``exception`` frame raises ``ProviderError``: ``code`` its ``:exception-type``
    (``throttlingException`` …), ``body`` its JSON payload, ``retryable`` from
    the error names the Bedrock wire lists. An ``error`` frame raises one from its
    ``:error-code`` and ``:error-message`` headers. A payload that is not a JSON object, or a
    frame without an ``:event-type``, raises ``MalformedChunkError``.
    """
    headers = frame.headers
    kind = headers.get(":message-type", "event")
    if kind == "exception":
        raise _exception(headers, frame.payload)
    if kind == "error":
        code, said = headers.get(":error-code"), headers.get(":error-message")
        raise _provider_error(said, code, {":error-code": code, ":error-message": said})
    if kind != "event":
        raise MalformedChunkError(
            f"an event stream frame has an unknown :message-type {excerpt(kind)}"
        )
    name = headers.get(":event-type")
    if not isinstance(name, str):
        raise MalformedChunkError("an event stream event frame has no :event-type string header")
    event: Any = (
        load_json(frame.payload, f"the payload of a {excerpt(name)} frame") if frame.payload else {}
    )
    if type(event) is not dict:
        raise MalformedChunkError(
            f"the payload of a {excerpt(name)} frame is not a JSON object: {type(event).__name__}"
        )
    # Bedrock pads every payload with a random-length ``p`` to hide token lengths.
    event.pop("p", None)
    for path in _BLOBS.get(name, ()):
        _decode_blob(event, path, name)
    return {name: event}


def _decode_blob(event: dict[str, Any], path: tuple[str, ...], name: str) -> None:
    parent: Any = event
    for key in path[:-1]:
        parent = parent.get(key)
        if not isinstance(parent, dict):
            return
    value = parent.get(path[-1])
    if value is None:
        return
    try:
        # boto3's blob parser is base64.b64decode, which skips characters outside the alphabet.
        parent[path[-1]] = base64.b64decode(value)
    except (binascii.Error, TypeError, ValueError):
        raise MalformedChunkError(
            f"{'.'.join((name, *path))} in an event stream frame is not base64"
        ) from None


def _exception(headers: Mapping[str, object], payload: bytes) -> ProviderError:
    code = headers.get(":exception-type")
    try:
        body: Any = load_json(payload, "an exception frame's payload")
    except MalformedChunkError:
        # The header says what failed; a payload that is not JSON must not hide it.
        body = None
    said = None
    if isinstance(body, dict):
        said = body.get("message", body.get("Message"))
    return _provider_error(said, code, body)


def _provider_error(said: object, code: object, body: object) -> ProviderError:
    # ``retryable`` from the error names the wires list (Bedrock's descriptor for these).
    return provider_error(said if isinstance(said, str) else "no message", code, body)


class _BinaryFile(Protocol):
    """A binary file object: ``open(path, "rb")``, ``io.BytesIO``, an HTTP response."""

    def read(self, size: int, /) -> bytes:
        """At most ``size`` bytes; ``b""`` at the end."""
        ...


def from_eventstream(
    source: bytes
    | bytearray
    | memoryview
    | _BinaryFile
    | Iterable[bytes]
    | AsyncIterable[bytes]
    | _StreamedResponse,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    limits: Limits | None = None,
) -> Observable[dict[str, Any]]:
    """The events of a raw AWS event stream body, as boto3 yields them (see ``frame_event``).

    ``source`` is the body itself (``bytes``), a binary file object (read with ``read1`` when
    it has one, so a network stream gives what has arrived), an iterable of byte pieces split
    anywhere (``iter_bytes()``, a list), a streamed ``httpx.Response`` or an async iterable of
    pieces (``aiter_bytes()``, read on the asyncio ``loop``, or the one running when
    subscribing). Each subscription reads it anew. The source is closed (``close``/``aclose``)
    on completion, error or dispose; disposing stops the read after the current piece (at once
    for an httpx response over HTTP/1.x, as in ``from_sse``). An exception or error frame ends
    the stream with its ``ProviderError``; a damaged frame with ``MalformedChunkError``; a body
    cut inside a frame, or a source that fails (kept as ``__cause__``), with
    ``StreamInterruptedError``. A ``str``, a text file or anything else is a ``TypeError`` at
    once.

    >>> from reactivex import operators as ops
    >>> headers = {":message-type": "event", ":event-type": "messageStart"}
    >>> body = encode_frame(headers, b'{"role": "assistant", "p": "abcd"}')
    >>> from_eventstream(body).pipe(ops.to_list()).run()
    [{'messageStart': {'role': 'assistant'}}]

    Cost: linear in the bytes, however they are split; one ``json`` parse per frame.
    """
    if isinstance(source, str | io.TextIOBase):
        raise TypeError(
            f"from_eventstream needs bytes, not {type(source).__name__}: an event stream is "
            f"binary (open a file with 'rb')"
        )
    if isinstance(source, bytes | bytearray | memoryview):
        body = bytes(source)
        return _blocking(lambda: (body,), _nothing, None, limits)
    if type(source).__module__ == "botocore.eventstream":
        raise TypeError(
            f"from_eventstream reads raw bytes; a botocore {type(source).__name__} yields "
            f"events decoded already: give those to the Bedrock wire as they are"
        )
    if isinstance(source, AsyncIterable):
        pieces = source
        return _from_async(_async_events(lambda: pieces, None, limits), loop)
    if not isinstance(source, Iterable):
        # An httpx response: not iterable, and its read() takes no size.
        iter_bytes = getattr(source, "iter_bytes", None)
        aiter_bytes = getattr(source, "aiter_bytes", None)
        if callable(aiter_bytes) and _is_async_response(source):
            return _from_async(_async_events(aiter_bytes, source, limits), loop)
        if callable(iter_bytes):
            return _blocking(iter_bytes, _closer(source), source, limits, close_any_thread=True)
    read = getattr(source, "read1", None) or getattr(source, "read", None)
    if callable(read):
        # Not iterated: a file iterates by lines, cutting binary frames at every 0x0a byte.
        return _blocking(lambda: _read_all(read), _closer(source), None, limits)
    if not isinstance(source, Iterable):
        raise TypeError(
            f"from_eventstream needs bytes, a binary file, or an iterable or async iterable "
            f"of bytes, not {type(source).__name__}"
        )
    chunks = source
    return _blocking(lambda: chunks, _closer(source), None, limits)


def _nothing() -> None:
    pass


def _closer(source: object) -> Callable[[], None]:
    close = getattr(source, "close", None)
    return close if callable(close) else _nothing


def _read_all(read: Callable[[int], bytes]) -> Iterable[bytes]:
    while piece := read(_READ_SIZE):
        yield piece


def _blocking(
    pieces: Callable[[], Iterable[bytes]],
    close: Callable[[], None],
    response: object,
    limits: Limits | None,
    *,
    close_any_thread: bool = False,
) -> Observable[dict[str, Any]]:
    def read(observer: abc.ObserverBase[Any], stopped: threading.Event) -> None:
        decoder = EventStreamDecoder(limits=limits)
        on_next, is_set = observer.on_next, stopped.is_set
        iterator: Iterator[bytes] | None = None
        while True:
            try:
                if iterator is None:
                    iterator = iter(pieces())
                piece = next(iterator)
            except StopIteration:
                break
            except Exception as error:  # the source's: typed, cause kept
                raise interrupted(error) from error
            for frame in decoder.feed(piece):
                event = frame_event(frame)
                try:
                    on_next(event)
                except Exception as error:  # noqa: BLE001 - the subscriber's: raised by run()
                    raise _Downstream(error) from None
                if is_set():
                    return
            if decoder.error is not None:
                raise decoder.error
        decoder.end()

    return _blocking_source(read, close, response, close_any_thread=close_any_thread)


def _async_events(
    pieces: Callable[[], AsyncIterable[bytes]], owner: object, limits: Limits | None
) -> Callable[[], AsyncIterator[dict[str, Any]]]:
    async def events() -> AsyncIterator[dict[str, Any]]:
        decoder = EventStreamDecoder(limits=limits)
        iterator = aiter(pieces())
        try:
            while True:
                try:
                    piece = await anext(iterator)
                except StopAsyncIteration:
                    break
                except Exception as error:  # the source's: typed, cause kept
                    raise interrupted(error) from error
                for frame in decoder.feed(piece):
                    yield frame_event(frame)
                if decoder.error is not None:
                    raise decoder.error
            decoder.end()
        finally:
            await _close(iterator)
            if owner is not None:
                await _close(owner)

    return events
