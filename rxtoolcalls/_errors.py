"""The error tree: every failure the library reports is a ``ToolCallStreamError``.

Any other exception escaping the assembler or the operators is a bug.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

__all__ = [
    "ContentFilteredError",
    "InvalidArgumentsError",
    "LimitExceededError",
    "MalformedChunkError",
    "MultipleChoicesError",
    "ProviderError",
    "StreamInterruptedError",
    "ToolCallStreamError",
    "TruncatedToolCallError",
    "UnknownToolError",
    "clip",
    "excerpt",
    "not_streamed",
    "provider_error",
    "retryable",
    "status_error",
]


def excerpt(value: object, width: int = 32) -> str:
    """A short, bounded rendering of ``value`` for an error message; never the whole value.

    Strings longer than ``width`` keep their first ``width`` characters and their length;
    containers and other objects are named by type and size, not rendered (a message must not
    carry a payload, and ``repr`` of an int past 4300 digits raises).

    >>> excerpt("call_1"), excerpt("x" * 100, 4), excerpt([1, 2])
    ("'call_1'", "'xxxx'… (100 characters)", 'a list of 2 items')
    """
    if isinstance(value, str):
        if len(value) <= width:
            return repr(value)
        return f"{value[:width]!r}… ({len(value):,} characters)"
    if isinstance(value, bytes):
        return f"{len(value):,} bytes"
    if value is None or isinstance(value, bool | float):
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() <= 64:
            return repr(value)
        return f"an integer of {value.bit_length():,} bits"
    kind = type(value).__name__
    try:
        size = len(value)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - any object may be described; its len() may raise
        return f"a {kind} object"
    return f"a {kind} of {size:,} item{'' if size == 1 else 's'}"


def clip(text: str, width: int = 200) -> str:
    """``text`` itself when short, else its first ``width`` characters and an ellipsis."""
    return text if len(text) <= width else text[:width] + "…"


def not_streamed(what: str) -> str:
    """``what`` (a non-streamed response) refused, with what to pass instead: one wording.

    >>> not_streamed("it")
    'it is a whole response, not a stream: pass stream=True, or on Bedrock call converse_stream'
    """
    return (
        f"{what} is a whole response, not a stream: pass stream=True, or on Bedrock call "
        f"converse_stream"
    )


def a_or_an(words: str) -> str:
    """``words`` after the article their first letter calls for (by spelling: "an anthropic")."""
    return f"an {words}" if words[:1].lower() in ("a", "e", "i", "o", "u") else f"a {words}"


class ToolCallStreamError(Exception):
    """Root of every error rxtoolcalls raises; nothing of the turn was emitted.

    The message says what happened; ``hint`` (or ``None``) says what to try, in words that
    fit any front end (a program, a log, a command line that formats it its own way).
    Diagnostics for logs and bug reports (``None`` when unknown or not about one call):
    ``choice_index``, ``index`` and ``name`` locate the call; ``received`` counts the argument
    characters it had received; ``finish_reason`` is the one the choice sent. Never a call
    that could be dispatched.
    """

    def __init__(
        self,
        message: str,
        *,
        choice_index: int | None = None,
        index: int | None = None,
        name: str | None = None,
        received: int | None = None,
        finish_reason: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.choice_index = choice_index
        self.index = index
        self.name = name
        self.received = received
        self.finish_reason = finish_reason
        self.hint = hint


class MalformedChunkError(ToolCallStreamError):
    """A chunk or tool-call fragment breaks the wire rules (wrong type, conflicting id or name)."""


class MultipleChoicesError(ToolCallStreamError):
    """A single-turn operator met a second choice (``n>1``); use ``assemble_choices()``."""


class StreamInterruptedError(ToolCallStreamError):
    """The stream did not end as its wire ends a turn.

    The source failed (the original kept as ``__cause__``), ended without a finish reason or
    without the wire's terminal event, held no choice at all, or a binary body was cut inside
    a frame. Sending the request again may help.
    """


@functools.cache
def _names() -> tuple[frozenset[str], frozenset[str]]:
    """Every wire's retryable and final error names (the wires import this module)."""
    from .wires import WIRES

    return (
        frozenset().union(*(spec.retryable for spec in WIRES)),
        frozenset().union(*(spec.final for spec in WIRES)),
    )


_CONTEXT_WORDS = ("context length", "context_length", "maximum context", "context window")


def retryable(code: object, body: object = None) -> bool | None:
    """Whether sending the same request again can help, from an error's code and body.

    ``True`` for HTTP 408, 409, 429 and 5xx and for the error types a wire lists as
    retryable (``overloaded_error``, ``rate_limit_exceeded``, ``throttlingException`` …);
    ``False`` for every other 4xx, for the types a wire lists as final
    (``invalid_request_error`` and the like: a bad key, a missing model), and for a
    context-length error, whatever its status; ``None`` when nothing says
    (``finish_reason: "error"`` alone, an unknown code).
    """
    found: list[object] = [code]
    text = ""
    stack = [body]
    while stack:
        part = stack.pop()
        if isinstance(part, Mapping):
            found.extend(part.get(k) for k in ("code", "type", "status", "status_code"))
            message = part.get("message")
            if isinstance(message, str):
                text += message[:1000].lower()
            stack.extend(v for k, v in part.items() if k == "error")
    words = {str(v) for v in found if isinstance(v, str)}
    words |= {word.lower() for word in words}
    again, final = _names()
    statuses = {v for v in found if type(v) is int}
    statuses |= {int(w) for w in words if w.isdigit() and len(w) == 3}
    if any(word in text for word in _CONTEXT_WORDS) or "context_length_exceeded" in words:
        return False
    if words & again or any(s in (408, 409, 429) or 500 <= s <= 599 for s in statuses):
        return True
    if words & final or any(400 <= s <= 499 for s in statuses):
        return False
    return None


class ProviderError(StreamInterruptedError):
    """The provider reported an error inside the stream; ``code`` and ``body`` are its own.

    ``retryable`` says whether sending the same request again can help: ``True`` (rate
    limits, overload, server errors), ``False`` (a bad request, a context-length error) or
    ``None`` (unknown); ``retryable()`` decides it from ``code`` and ``body`` unless it is
    given. Only a ``True`` one says "retry" (in its ``hint``).
    """

    def __init__(
        self,
        message: str,
        *,
        code: object = None,
        body: object = None,
        retryable: bool | None = None,
        hint: str | None = None,
        choice_index: int | None = None,
        finish_reason: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint, choice_index=choice_index, finish_reason=finish_reason)
        self.code = code
        self.body = body
        self.retryable = _retryable(code, body) if retryable is None else retryable


class TruncatedToolCallError(ToolCallStreamError):
    """A tool call was cut off; it is never repaired.

    The token limit was hit during a call, its arguments end mid-value, or the stream never
    closed it.
    """


class ContentFilteredError(ToolCallStreamError):
    """The provider refused the turn.

    Chat's ``content_filter``, an incomplete Responses turn for ``content_filter``, Anthropic's
    ``refusal``, Gemini's ``SAFETY``, Bedrock's ``guardrail_intervened`` and the like (each
    wire's page in the manual lists its reasons).

    ``content`` holds the text that came before (a guardrail may mask rather than block it),
    for a caller that wants to show it; no call of the turn is ever emitted.
    """

    content: str | None = None


class InvalidArgumentsError(ToolCallStreamError):
    """A call's arguments are not one complete JSON object, or do not match its tool's schema.

    The schema is checked with ``Policy(validate_arguments=True).with_tools(…)``. Or the
    provider refused the model's call as malformed (Gemini ``MALFORMED_FUNCTION_CALL``, Bedrock
    ``malformed_tool_use``): ``provider_message`` then holds what it said (Gemini's
    ``finishMessage`` quotes the call, so it is never in the message text).
    """

    provider_message: str | None = None


_retryable = retryable

RETRY_HINT = "retry the request: nothing was emitted, so a retry cannot duplicate anything"


def provider_error(message: object, code: object, body: object, where: str = "") -> ProviderError:
    """The ``ProviderError`` for an in-band error: bounded text, ``retryable`` and its hint."""
    said = clip(message, 200) if isinstance(message, str) else excerpt(message, 200)
    error = ProviderError(
        f"{where}the provider reported an error inside the stream: {said}"
        f"{'' if code is None else f' (code {excerpt(code)})'}; nothing was emitted",
        code=code,
        body=body,
    )
    if error.retryable:
        error.hint = RETRY_HINT
    elif error.retryable is False:
        error.hint = (
            "sending the same request again fails the same way: shorten the conversation "
            "or lower max_tokens"
            if retryable(None, {"message": said}) is False
            else "sending the same request again fails the same way: fix the request"
        )
    return error


class LimitExceededError(ToolCallStreamError):
    """Output passed a ``Limits`` ceiling (sizes, counts, nesting depth, SSE event size).

    ``limit`` names the ceiling and ``value`` is its setting; nothing past it was stored.
    """

    def __init__(
        self,
        message: str,
        *,
        limit: str,
        value: int,
        choice_index: int | None = None,
        index: int | None = None,
        name: str | None = None,
        received: int | None = None,
        finish_reason: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(
            message,
            choice_index=choice_index,
            index=index,
            name=name,
            received=received,
            finish_reason=finish_reason,
            hint=hint,
        )
        self.limit = limit
        self.value = value


class UnknownToolError(ToolCallStreamError):
    """The model named a tool the request did not declare (``Policy.tools``)."""


def status_error(error: Exception) -> ProviderError:
    """An SDK's ``APIStatusError`` (anthropic's or openai's) as a ``ProviderError``."""
    body = getattr(error, "body", None)
    status = getattr(error, "status_code", None)
    said = getattr(error, "api_message", None) or getattr(error, "message", None) or str(error)
    # openai keeps the error's code in ``code``, anthropic its type in ``type``.
    code = getattr(error, "code", None) or getattr(error, "type", None)
    if not isinstance(status, int) or status < 400:
        # In band: the stream's own status (200) says nothing about the error.
        return provider_error(said, code, body)
    found = retryable(code, body)
    typed = ProviderError(
        f"the provider answered HTTP {status}: {clip(str(said), 200)}"
        f"{'' if code is None else f' (type {excerpt(code)})'}; nothing was emitted",
        code=code if code is not None else status,
        body=body,
        retryable=retryable(status) if found is None else found,
    )
    if typed.retryable:
        typed.hint = RETRY_HINT
    return typed
