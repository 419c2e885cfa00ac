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
from dataclasses import dataclass
from typing import Any

from ._errors import MalformedChunkError, ProviderError, excerpt

__all__ = ["DONE", "SSEDecoder", "ServerSentEvent", "chunk_from_event", "load_json"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its ``event`` name (``"message"`` by default) and its ``data``."""

    event: str
    data: str


DONE = object()
"""Returned by ``chunk_from_event`` for the ``[DONE]`` sentinel."""


class SSEDecoder:
    r"""Turn pieces of an event stream into ``ServerSentEvent``s.

    >>> decoder = SSEDecoder()
    >>> decoder.feed(b'data: {"a"') + decoder.feed(b": 1}\n\n: comment\n")
    [ServerSentEvent(event='message', data='{"a": 1}')]
    """

    __slots__ = ("_data", "_decoder", "_event", "_line", "_pending_cr", "error_field")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._line: list[str] = []
        self._data: list[str] = []
        self._event = ""
        self._pending_cr = False
        self.error_field: str | None = None
        """The value of a non-standard ``error:`` field (old llama.cpp), if one was seen."""

    def feed(self, piece: bytes | str) -> list[ServerSentEvent]:
        """Decode one piece; return the events it completes."""
        try:
            text = piece if isinstance(piece, str) else self._decoder.decode(piece)
        except UnicodeDecodeError as exc:
            raise MalformedChunkError(f"the event stream is not UTF-8: {exc}") from exc
        events: list[ServerSentEvent] = []
        start = 0
        if self._pending_cr and text.startswith("\n"):
            start = 1  # the LF of a CRLF split across pieces
        self._pending_cr = False
        length = len(text)
        while start < length:
            cr = text.find("\r", start)
            lf = text.find("\n", start)
            ends = [i for i in (cr, lf) if i >= 0]
            if not ends:
                self._line.append(text[start:])
                break
            end = min(ends)
            self._line.append(text[start:end])
            line = "".join(self._line)
            self._line = []
            event = self._line_done(line)
            if event is not None:
                events.append(event)
            if text[end] == "\r":
                if end + 1 < length:
                    start = end + 2 if text[end + 1] == "\n" else end + 1
                else:
                    self._pending_cr = True
                    start = length
            else:
                start = end + 1
        return events

    def close(self) -> list[ServerSentEvent]:
        """End the stream; an event without its closing blank line is dropped (as specified)."""
        try:
            tail = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise MalformedChunkError(
                f"the event stream ends inside a UTF-8 sequence: {exc}"
            ) from exc
        if tail:
            self._line.append(tail)
        if self._line:
            self._line_done("".join(self._line))
            self._line = []
        return []

    def _line_done(self, line: str) -> ServerSentEvent | None:
        if not line:
            if not self._data and not self._event:
                return None
            event = ServerSentEvent(self._event or "message", "\n".join(self._data))
            self._data = []
            self._event = ""
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
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
    return ProviderError(
        f"the provider reported an error inside the stream: {excerpt(message or raw, 200)} "
        f"(code {excerpt(code)}); "
        f"nothing was emitted, the request can be retried",
        code=code,
        body=payload,
    )


def load_json(text: str | bytes, what: str = "the text") -> Any:
    """Parse one JSON text; anything that is not one is a ``MalformedChunkError``.

    Bounded in what it reports (an excerpt, never the text) and in what it raises: nesting
    past the parser's recursion limit and integers past 4300 digits are typed errors too.
    ``what`` names the text in the message ("line 3", "an event's data").
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedChunkError(
            f"{what} is not JSON ({exc.msg} at character {exc.pos}): {excerpt(text, 16)}"
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
    data = event.data
    if data.strip() == "[DONE]":
        return DONE
    if not data.strip():
        return None
    try:
        payload = load_json(data, "an event's data")
    except MalformedChunkError as exc:
        if event.event == "error":
            raise _provider_error({"message": data}, data) from exc
        raise
    if event.event == "error":
        raise _provider_error(payload, data)
    if not isinstance(payload, dict):
        raise MalformedChunkError(f"an event's data is not a JSON object: {excerpt(data)}")
    if payload.get("error") is not None or payload.get("object") == "error":
        raise _provider_error(payload, data)
    return payload
