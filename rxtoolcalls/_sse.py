"""A small Server-Sent Events decoder (sans-IO), and the provider error shapes it meets.

Written here rather than taken from a library: ``httpx-sse`` is tied to httpx (the openai SDK
now uses httpx2), and the SDK's own decoder is private. This one is fed bytes or text split
anywhere (inside a UTF-8 sequence, inside a CRLF) and follows the WHATWG event-stream rules:
``data:`` lines (one optional space removed) joined by newlines, ``event:`` names, comment lines
starting with ``:``, an event dispatched on a blank line; other fields are ignored.
"""

from __future__ import annotations

import codecs
import json
import sys
from json.scanner import c_make_scanner  # type: ignore[attr-defined]
from typing import Any, NamedTuple

from ._errors import (
    LimitExceededError,
    MalformedChunkError,
    ProviderError,
    excerpt,
    provider_error,
)
from ._policy import Limits

DEFAULT_LIMITS = Limits()

try:
    # The ``fast`` extra. msgspec, not orjson: orjson turns an integer past 64 bits into a
    # float without an error, so its result can differ from the standard library's with
    # nothing to tell; msgspec keeps such integers exact, and every other difference it has
    # (NaN, Infinity, 1e999, lone surrogates, deep nesting) is an error, after which the
    # standard library parses the text again. Either way the value is the standard library's.
    from msgspec.json import Decoder as _Decoder
except ImportError:  # pragma: no cover - depends on the extras installed
    _fast_decode = None
else:
    _fast_decode = _Decoder().decode

# The standard library's own C scanner, called directly: json.loads adds about a microsecond of
# Python around it per call, a third of the cost of a small chunk. Only a text it reads whole
# from its first character is taken; any other goes to json.loads, which decides.
_scan = c_make_scanner(json.JSONDecoder()) if c_make_scanner is not None else None

FAST_JSON = "msgspec" if _fast_decode is not None else None
"""The JSON parser of the ``fast`` extra in use for chunks, or ``None`` (the standard library)."""

__all__ = [
    "DONE",
    "FAST_JSON",
    "SSEDecoder",
    "ServerSentEvent",
    "chunk_from_event",
    "load_json",
    "load_json_stdlib",
]


class ServerSentEvent(NamedTuple):
    """One dispatched event: its ``event`` name (``"message"`` by default) and its ``data``."""

    # A named tuple: made once per event, it costs a third less than a frozen dataclass.
    event: str
    data: str


DONE = object()
"""Returned by ``chunk_from_event`` for the ``[DONE]`` sentinel."""


class SSEDecoder:
    r"""Turn pieces of an event stream into ``ServerSentEvent``s.

    >>> decoder = SSEDecoder()
    >>> decoder.feed(b'data: {"a"') + decoder.feed(b": 1}\n\n: comment\n")
    [ServerSentEvent(event='message', data='{"a": 1}')]

    A leading byte order mark is ignored (WHATWG). One line, and the data of one event (its
    data lines together), may hold at most ``limits.max_event`` characters: past that,
    ``feed`` raises ``LimitExceededError`` before buffering more (a stream without newlines
    cannot grow without end). Cost: linear in the characters fed, however they are split.
    """

    __slots__ = (
        "_data",
        "_decoder",
        "_event",
        "_line",
        "_line_size",
        "_max",
        "_pending_cr",
        "_size",
        "_started",
        "error_field",
    )

    def __init__(self, *, limits: Limits | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._max = (limits or DEFAULT_LIMITS).max_event
        self._line: list[str] = []
        self._line_size = 0
        self._data: list[str] = []
        # Characters of the event's data so far (its name is one line, bounded as a line).
        self._size = 0
        self._event = ""
        self._pending_cr = False
        self._started = False
        self.error_field: str | None = None
        """The value of a non-standard ``error:`` field (old llama.cpp), if one was seen."""

    def feed(self, piece: bytes | str) -> list[ServerSentEvent]:
        """Decode one piece; return the events it completes."""
        try:
            text = piece if isinstance(piece, str) else self._decoder.decode(piece)
        except UnicodeDecodeError as exc:
            raise MalformedChunkError(f"the event stream is not UTF-8: {exc.reason}") from exc
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._pending_cr:
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]  # the LF of a CRLF split across pieces
        if "\r" in text:
            # A last CR ends a line, or starts a CRLF whose LF the next piece brings.
            self._pending_cr = text[-1] == "\r"
            # Two passes in C keep the scan linear (one find per line end was quadratic).
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        events: list[ServerSentEvent] = []
        last = lines.pop()  # the start of a line not ended yet ("" after a line end)
        data = self._data
        for line in lines:
            if self._line:
                line = "".join(self._line) + line
                self._line = []
                self._line_size = 0
            if len(line) > self._max:
                raise self._too_long("a line")
            # The two lines of nearly every event inline, "data: …" and the blank line; the
            # others (and a "data:" without its space) in _line_done.
            if line[:6] == "data: ":
                self._size += len(line) - 5
                if self._size > self._max:
                    raise self._too_long("an event")
                data.append(line[6:])
            elif line:
                self._line_done(line)
            elif data or self._event:
                events.append(
                    ServerSentEvent(
                        self._event or "message", data[0] if len(data) == 1 else "\n".join(data)
                    )
                )
                data = self._data = []
                self._event = ""
                self._size = 0
        if last:
            self._line_size += len(last)
            if self._line_size > self._max:
                raise self._too_long("a line")
            self._line.append(last)
        return events

    def close(self) -> list[ServerSentEvent]:
        """End the stream; an event without its closing blank line is dropped (as specified)."""
        try:
            tail = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise MalformedChunkError(
                f"the event stream ends inside a UTF-8 sequence: {exc.reason}"
            ) from exc
        if tail:
            self._line.append(tail)
        if self._line:
            self._line_done("".join(self._line))
            self._line = []
            self._line_size = 0
        return []

    def _too_long(self, what: str) -> LimitExceededError:
        return LimitExceededError(
            f"{what} of the event stream passed Limits.max_event ({self._max:,} characters); "
            f"nothing past it was kept",
            limit="max_event",
            value=self._max,
        )

    def _line_done(self, line: str) -> ServerSentEvent | None:
        if not line:
            if not self._data and not self._event:
                return None
            event = ServerSentEvent(self._event or "message", "\n".join(self._data))
            self._data = []
            self._event = ""
            self._size = 0
            return event
        if line[0] == ":":
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._size += len(value) + 1
            if self._size > self._max:
                raise self._too_long("an event")
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "error":
            self.error_field = value
        return None


def _provider_error(payload: Any, raw: str) -> ProviderError:
    error = payload.get("error") if isinstance(payload, dict) else None
    source = error if isinstance(error, dict) else payload
    message = source.get("message") if isinstance(source, dict) else None
    code = source.get("code") if isinstance(source, dict) else None
    if code is None and isinstance(source, dict):
        code = source.get("type")
    if message is None and isinstance(error, str):
        message = error
    return provider_error(message or raw, code, payload)


def load_json(text: str | bytes, what: str = "the text") -> Any:
    """Parse one JSON text; anything that is not one is a ``MalformedChunkError``.

    Bounded in what it reports (an excerpt, never the text) and in what it raises: nesting
    past the parser's recursion limit and integers past 4300 digits are typed errors too.
    ``what`` names the text in the message ("line 3", "an event's data"). With the ``fast``
    extra installed msgspec parses first; the value and the errors are the standard
    library's all the same (``load_json_stdlib``).
    """
    if _fast_decode is not None:
        try:
            return _fast_decode(text)
        except Exception:  # noqa: BLE001 - the standard library decides, value or error
            pass
    elif _scan is not None and type(text) is str:
        try:
            value, end = _scan(text, 0)
        except Exception:  # noqa: BLE001 - StopIteration or an error: json.loads decides
            pass
        else:
            if end == len(text):
                return value
    return load_json_stdlib(text, what)


def load_json_stdlib(text: str | bytes, what: str = "the text") -> Any:
    """``load_json`` with the standard library's parser only."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedChunkError(
            f"{what} is not JSON ({exc.msg.removesuffix(' at')} at character {exc.pos}): "
            f"{excerpt(text, 16)}"
        ) from exc
    except RecursionError as exc:
        raise MalformedChunkError(f"{what} nests deeper than the JSON parser allows") from exc
    except ValueError as exc:  # an int past 4300 digits, bytes that are not UTF-8
        reason = (
            f"an integer has more than {sys.get_int_max_str_digits()} digits"
            if "integer string conversion" in str(exc)
            else type(exc).__name__
        )
        raise MalformedChunkError(f"{what} is not usable JSON ({reason})") from exc


def chunk_from_event(event: ServerSentEvent) -> dict[str, Any] | object | None:
    """The chunk an event carries, ``DONE``, or ``None`` to skip it; provider errors raise.

    Error shapes recognised: ``data: {"error": …}`` (OpenAI, SGLang, llama.cpp), ``event:
    error`` with any payload, ``{"object": "error", …}`` (vLLM), and a chunk with a top-level
    ``error`` next to ``finish_reason: "error"`` (OpenRouter).
    """
    event_name, data = event
    if data[:1] == "{" and event_name != "error":
        payload: dict[str, Any] = load_json(data, "an event's data")  # nearly every event
    else:
        stripped = data.strip()
        if stripped == "[DONE]":
            return DONE
        if not stripped:
            return None
        try:
            payload = load_json(data, "an event's data")
        except MalformedChunkError as exc:
            if event_name == "error":
                raise _provider_error({"message": data}, data) from exc
            raise
        if event_name == "error":
            raise _provider_error(payload, data)
        if not isinstance(payload, dict):
            raise MalformedChunkError(f"an event's data is not a JSON object: {excerpt(data)}")
    if payload.get("error") is not None or payload.get("object") == "error":
        raise _provider_error(payload, data)
    return payload
