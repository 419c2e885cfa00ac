"""AWS event stream framing (``application/vnd.amazon.eventstream``), sans-IO.

AWS streams (Bedrock's ``ConverseStream`` and ``InvokeModelWithResponseStream``) are not SSE
but binary frames. A frame is a 12-byte prelude (total length and headers length, big-endian
``uint32``, then the CRC32 of those 8 bytes), the headers, the payload, and the CRC32 of
everything before it. ``EventStreamDecoder`` cuts frames out of bytes split anywhere and checks
both CRCs; ``encode_frame`` writes one. Standard library only, so that reading raw bytes does
not need botocore. What a frame means is the wire's (``wires/bedrock.py``: ``frame_event``,
``from_eventstream``).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Mapping
from typing import NamedTuple

from ._errors import (
    RETRY_HINT,
    LimitExceededError,
    MalformedChunkError,
    StreamInterruptedError,
    excerpt,
)
from ._policy import Limits

__all__ = ["EventStreamDecoder", "Frame", "encode_frame", "looks_like_eventstream"]


_PRELUDE = struct.Struct(">II")
_PRELUDE_SIZE = 12
_SMALLEST = 16  # a prelude and a message CRC: no headers, no payload
# The protocol's own ceilings (AWS SDKs reject frames past them too).
_MAX_HEADERS = 128 * 1024
_MAX_PAYLOAD = 24 * 1024 * 1024
_DEFAULT_LIMITS = Limits()
_READ_SIZE = 64 * 1024
# How many distinct header blocks a decoder remembers, and how long one may be: the memory
# they take stays small whatever a stream sends.
_KNOWN = 64
_KNOWN_SIZE = 512

# The header value types of a fixed size other than bool (0, 1) and UUID (9).
_FIXED: dict[int, struct.Struct] = {
    2: struct.Struct(">b"),
    3: struct.Struct(">h"),
    4: struct.Struct(">i"),
    5: struct.Struct(">q"),
    8: struct.Struct(">q"),  # a timestamp: milliseconds since the epoch, as on the wire
}
_U16 = struct.Struct(">H")


class Frame(NamedTuple):
    """One event stream message: its decoded ``headers`` and its raw ``payload``.

    Header values are ``bool``, ``int`` (byte, short, int, long; a timestamp as milliseconds
    since the epoch), ``bytes``, ``str`` or ``uuid.UUID``, by their type on the wire. Frames
    with the same header bytes share one ``headers`` dict: read it, never change it.
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

    __slots__ = ("_buffer", "_consumed", "_count", "_known", "_max", "_total", "error")

    def __init__(self, *, limits: Limits | None = None) -> None:
        self._buffer = bytearray()
        self._max = (limits or _DEFAULT_LIMITS).max_event
        # The length of the frame at the buffer's start, once its prelude has been checked.
        self._total = 0
        self._count = 0
        self._consumed = 0
        # Headers read, by their bytes: a stream repeats a few header blocks in every frame
        # (reading them was the largest cost of a frame). Frames share these dicts.
        self._known: dict[bytes, dict[str, object]] = {}
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
        size = len(buffer)
        known = self._known
        crc32 = zlib.crc32
        try:
            # One pass per frame, the checks of _prelude and _frame written out: a frame is
            # often under 200 bytes, and two calls a frame were a fifth of its cost.
            with memoryview(buffer) as view:
                while True:
                    total = self._total
                    if not total:
                        if size - start < _PRELUDE_SIZE:
                            break
                        total = self._total = self._prelude(view, start)
                    end = start + total
                    if size < end:
                        break
                    if crc32(view[start : end - 4]) != int.from_bytes(view[end - 4 : end], "big"):
                        raise MalformedChunkError(
                            f"{self._where()} of the event stream fails its message CRC32 "
                            f"check: its bytes were damaged"
                        )
                    headers_end = (
                        start + _PRELUDE_SIZE + int.from_bytes(view[start + 4 : start + 8], "big")
                    )
                    raw = bytes(view[start + _PRELUDE_SIZE : headers_end])
                    headers = known.get(raw)
                    if headers is None:
                        headers = self._headers(raw)
                        if len(known) < _KNOWN and len(raw) <= _KNOWN_SIZE:
                            known[raw] = headers
                    frames.append(Frame(headers, bytes(view[headers_end : end - 4])))
                    self._count += 1
                    self._consumed += total
                    self._total = 0
                    start = end
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

    def _prelude(self, view: memoryview, start: int) -> int:
        total, headers = _PRELUDE.unpack_from(view, start)
        crc = zlib.crc32(view[start : start + 8])
        if crc != int.from_bytes(view[start + 8 : start + 12], "big"):
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


def looks_like_eventstream(head: bytes) -> bool:
    """Whether ``head`` (a body's first 12 bytes or more) opens with a frame's prelude.

    Its checksum must hold: text, or bytes of another kind, pass with a chance of 2**-32.
    """
    if len(head) < _PRELUDE_SIZE:
        return False
    return zlib.crc32(head[:8]) == int.from_bytes(head[8:12], "big")
