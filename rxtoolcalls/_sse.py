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
from collections.abc import Callable, Mapping
from json.scanner import c_make_scanner  # type: ignore[attr-defined]
from typing import Any, NamedTuple

from ._errors import (
    LimitExceededError,
    MalformedChunkError,
    ProviderError,
    provider_error,
)
from ._policy import Limits
from ._wire import Framing

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
    "SSE_DATA",
    "SSE_DATA_DONE",
    "SSE_NAMED",
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
    r"""Turn pieces of an event stream into ``ServerSentEvent``s (``feed``), or chunks.

    >>> decoder = SSEDecoder()
    >>> decoder.feed(b'data: {"a"') + decoder.feed(b": 1}\n\n: comment\n")
    [ServerSentEvent(event='message', data='{"a": 1}')]

    A leading byte order mark is ignored (WHATWG). One line, and the data of one event (its
    data lines together), may hold at most ``limits.max_event`` characters: past that,
    ``feed`` raises ``LimitExceededError`` before buffering more (a stream without newlines
    cannot grow without end). ``chunks`` is the fast way to chunks (``from_sse`` reads with
    it); a decoder is read with one of the two. Cost: linear in the characters fed, however
    they are split.
    """

    __slots__ = (
        "_carry",
        "_carry_size",
        "_data",
        "_decoder",
        "_deferred",
        "_event",
        "_line",
        "_line_size",
        "_lined",
        "_max",
        "_paired",
        "_pending_cr",
        "_size",
        "_started",
        "ended",
        "error_field",
    )

    def __init__(self, *, limits: Limits | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._max = (limits or DEFAULT_LIMITS).max_event
        # ``chunks`` keeps the text of the event in progress (its pieces) and cuts whole
        # events out of each piece ("\n\n" found in C): an event of one data line costs no
        # per-line Python. ``feed``, and ``chunks`` once an event passes max_event, read line
        # by line (_lined), every line and event checked as it ends.
        self._carry: list[str] = []
        self._carry_size = 0
        self._lined = False
        self._paired = True
        # An error found in a piece after events that come first (``chunks``).
        self._deferred: Exception | None = None
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
        self.ended: object | None = None
        """What ended the stream in ``chunks``: ``DONE`` or an exception; ``None`` before."""

    def feed(self, piece: bytes | str) -> list[ServerSentEvent]:
        """Decode one piece; return the events it completes."""
        text = self._text(piece, defer=False)
        if not self._lined:
            self._lined = True
            if self._carry:  # read by ``chunks`` so far: its event in progress goes on
                text = "".join(self._carry) + text
                self._carry.clear()
                self._carry_size = 0
        return self._lines(text, defer=False) if text else []

    def chunks(self, piece: bytes | str) -> list[dict[str, Any]]:
        """Decode one piece; return the chunks (dicts) of the events it completes.

        What ``chunk_from_event`` gives, events it skips left out. The stream's end, if this
        piece holds it, is kept in ``ended`` rather than raised, after the chunks before it:
        ``DONE`` (nothing after it is read) or the error that ends it (a provider error, an
        ``error:`` field before ``DONE``, a malformed event or piece, a limit passed).
        """
        out: list[dict[str, Any]] = []
        if self.ended is not None:
            return out
        append = out.append
        fast = _fast_decode
        try:
            for item in self._split(piece):
                if type(item) is not str:
                    if self._chunk_of(item, append):
                        return out
                    continue
                # Nearly every event is one data line holding a JSON object, or (Responses,
                # Anthropic) an event line and such a data line: parsed here, inline.
                if item[:7] == "data: {" and "\n" not in item:
                    data = item[6:]
                elif item[:7] == "event: " and _is_named_object(item):
                    data = item[item.find("\n") + 7 :]
                else:
                    event = self._event_of(item)
                    if event is not None and self._chunk_of(event, append):
                        return out
                    continue
                if fast is None:
                    payload = load_json(data, "an event's data")
                else:
                    try:
                        payload = fast(data)
                    except Exception:  # noqa: BLE001 - the standard library decides
                        payload = load_json_stdlib(data, "an event's data")
                if "error" in payload or payload.get("object") == "error":
                    payload = _object_chunk(payload, data)
                append(payload)
        except Exception as error:  # noqa: BLE001 - the caller raises it in its turn
            self.ended = error
            return out
        if self._deferred is not None:
            self.ended = self._deferred
        return out

    def _chunk_of(self, event: ServerSentEvent, append: Callable[[Any], None]) -> bool:
        """Append the chunk of one event, if any; whether it was ``DONE`` (kept in ``ended``)."""
        chunk = chunk_from_event(event)
        if chunk is DONE:
            if self.error_field is not None:
                # An old llama.cpp "error:" field, then [DONE]: the error wins.
                raise error_field_error(self.error_field)
            self.ended = DONE
            return True
        if chunk is not None:
            append(chunk)
        return False

    def close(self) -> list[ServerSentEvent]:
        """End the stream; an event without its closing blank line is dropped (as specified)."""
        try:
            tail = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise MalformedChunkError(
                f"the event stream ends inside a UTF-8 sequence: {exc.reason}"
            ) from exc
        if not self._lined:
            # Its lines are read for their fields (an "error:" among them); no event is due.
            for line in ("".join(self._carry) + tail).split("\n"):
                self._line_done(line)
            self._carry.clear()
            return []
        if tail:
            self._line.append(tail)
        if self._line:
            self._line_done("".join(self._line))
            self._line = []
            self._line_size = 0
        return []

    def _text(self, piece: bytes | str, *, defer: bool) -> str:
        """The piece as text: UTF-8 decoded, a first BOM dropped, every line end a line feed.

        Bytes that are not UTF-8 raise, or with ``defer`` end the text there and are kept in
        ``_deferred``, so that the events before them still come out.
        """
        try:
            text = piece if isinstance(piece, str) else self._decoder.decode(piece)
        except UnicodeDecodeError as exc:
            error = MalformedChunkError(f"the event stream is not UTF-8: {exc.reason}")
            if not defer:
                raise error from exc
            self._deferred = error
            text = exc.object[: exc.start].decode("utf-8")
        if not text:
            return text
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
        return text

    def _split(self, piece: bytes | str) -> list[Any]:
        """The events a piece completes, as text or (reading line by line) as events.

        An event's text is its lines, without the blank line that ends it. Each character is
        scanned once (``_carry`` keeps the pieces of an event in progress, joined when it
        ends), so a large event in small pieces costs what it would in one.
        """
        text = self._text(piece, defer=True)
        if not text:
            return []
        if self._lined:
            return self._lines(text, defer=True)
        out: list[Any] = []
        carry = self._carry
        if carry:
            # The event in progress ends at the first blank line: maybe where the two meet.
            if carry[-1][-1] == "\n" and text[0] == "\n":
                head = "".join(carry)[:-1]
                rest = 1
            else:
                cut = text.find("\n\n")
                if cut < 0:
                    self._carry_size += len(text)
                    if self._carry_size > self._max:
                        return self._lined_from("".join(carry) + text)
                    carry.append(text)
                    return out
                if self._carry_size + cut > self._max:
                    return self._lined_from("".join(carry) + text)
                head = "".join(carry) + text[:cut]
                rest = cut + 2
            carry.clear()
            self._carry_size = 0
            out.append(head)
            text = text[rest:]
            if not text:
                return out
        if len(text) > self._max:
            # A line or an event may be past the limit: from here on every one is checked.
            out += self._lined_from(text)
            return out
        if self._paired:
            # Events of one line each, as most servers send: the lines alternate with blank
            # ones, and one split on a single character (memchr) is twice as fast as on two.
            lines = text.split("\n")
            if len(lines) & 1:
                if not any(lines[1:-1:2]):
                    self._keep(lines[-1])
                    out += lines[0:-1:2]
                    return out
            elif not any(lines[1:-2:2]):
                # The piece ends between an event's line and its blank line.
                self._keep(lines[-2] + "\n" + lines[-1])
                out += lines[0:-2:2]
                return out
            self._paired = False
        segments = text.split("\n\n")
        self._keep(segments.pop())
        out += segments
        return out

    def _keep(self, rest: str) -> None:
        """Keep the start of the next event (no blank line in it)."""
        if rest:
            self._carry.append(rest)
            self._carry_size = len(rest)

    def _lined_from(self, text: str) -> list[Any]:
        """Read line by line from here on, starting with ``text``."""
        self._lined = True
        self._carry.clear()
        self._carry_size = 0
        return self._lines(text, defer=True)

    def _event_of(self, segment: str) -> ServerSentEvent | None:
        """The event of one segment's lines (a leading blank line dispatches nothing)."""
        for line in segment.split("\n"):
            self._line_done(line)
        return self._line_done("")

    def _lines(self, text: str, *, defer: bool) -> list[ServerSentEvent]:
        """Read ``text`` line by line; a limit passed raises, or with ``defer`` is kept."""
        lines = text.split("\n")
        events: list[ServerSentEvent] = []
        last = lines.pop()  # the start of a line not ended yet ("" after a line end)
        try:
            for line in lines:
                if self._line:
                    line = "".join(self._line) + line
                    self._line = []
                    self._line_size = 0
                if len(line) > self._max:
                    raise self._too_long("a line")
                event = self._line_done(line)
                if event is not None:
                    events.append(event)
            if last:
                self._line_size += len(last)
                if self._line_size > self._max:
                    raise self._too_long("a line")
                self._line.append(last)
        except LimitExceededError as error:
            if not defer:
                raise
            self._deferred = error
        return events

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
            data = self._data
            event = ServerSentEvent(
                self._event or "message", data[0] if len(data) == 1 else "\n".join(data)
            )
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


def _is_named_object(segment: str) -> bool:
    """Whether a segment is one ``event:`` line (not ``error``), then one ``data: {`` line."""
    end = segment.find("\n")
    return (
        segment[end + 1 : end + 8] == "data: {"
        and segment.find("\n", end + 1) < 0
        and segment[7:end] != "error"
    )


def _object_chunk(payload: dict[str, Any], data: str) -> dict[str, Any]:
    """``payload``, unless it is a provider error (raised)."""
    if payload.get("error") is not None or payload.get("object") == "error":
        raise _provider_error(payload, data)
    return payload


def error_field_error(value: str) -> ProviderError:
    """The ``ProviderError`` for a non-standard ``error:`` SSE field."""
    try:
        payload = json.loads(value)
    except ValueError:
        payload = {"message": value}
    try:
        chunk_from_event(ServerSentEvent("error", json.dumps(payload)))
    except ProviderError as error:
        return error
    return provider_error(value, None, {"message": value})


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

    Bounded in what it reports (a position and a size, never the text, which may hold
    arguments) and in what it raises: nesting
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
    elif (
        _scan is not None
        and type(text) is bytes
        and text.startswith(b"{")
        and text.find(0, 1, 4) < 0
    ):
        # An object's bytes (an event-stream payload), which json.loads would take as UTF-8:
        # scanned as their text, without its guess of the encoding and its check for
        # whitespace in Python. Anything else, or any failure, is json.loads's to decide.
        try:
            decoded = text.decode("utf-8")
            value, end = _scan(decoded, 0)
        except Exception:  # noqa: BLE001 - StopIteration or an error: json.loads decides
            pass
        else:
            if end == len(decoded):
                return value
    return load_json_stdlib(text, what)


def load_json_stdlib(text: str | bytes, what: str = "the text") -> Any:
    """``load_json`` with the standard library's parser only."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedChunkError(
            f"{what} is not JSON ({exc.msg.removesuffix(' at')} at character {exc.pos} of "
            f"{len(text):,})"
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
            raise MalformedChunkError(
                f"an event's data is not a JSON object: a {type(payload).__name__}"
            )
    if payload.get("error") is not None or payload.get("object") == "error":
        raise _provider_error(payload, data)
    return payload


def _data_only(event: Mapping[str, Any]) -> bytes:
    """One SSE event: a ``data:`` line alone."""
    return f"data: {json.dumps(event)}\n\n".encode()


def _named(event: Mapping[str, Any]) -> bytes:
    """One SSE event with an ``event:`` line holding its ``type``, as the providers send it."""
    data = f"data: {json.dumps(event)}\n\n"
    kind = event.get("type")
    if isinstance(kind, str) and kind and "\n" not in kind and "\r" not in kind:
        return f"event: {kind}\n{data}".encode()
    return data.encode()


SSE_DATA = Framing("sse", "text/event-stream", _data_only, b"", None)
"""SSE with ``data:`` lines alone and no end marker (Gemini)."""
SSE_DATA_DONE = Framing("sse", "text/event-stream", _data_only, b"data: [DONE]\n\n", None)
"""SSE with ``data:`` lines, ended by ``data: [DONE]`` (Chat Completions)."""
SSE_NAMED = Framing("sse", "text/event-stream", _named, b"", None)
"""SSE whose events are named by their ``type`` (Responses, Anthropic)."""
