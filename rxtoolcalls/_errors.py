"""The error tree: every failure the library reports is a ``ToolCallStreamError``.

Any other exception escaping the assembler or the operators is a bug.
"""

from __future__ import annotations

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
    "excerpt",
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


class ToolCallStreamError(Exception):
    """Root of every error rxtoolcalls raises; nothing of the turn was emitted.

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
    ) -> None:
        super().__init__(message)
        self.message = message
        self.choice_index = choice_index
        self.index = index
        self.name = name
        self.received = received
        self.finish_reason = finish_reason


class MalformedChunkError(ToolCallStreamError):
    """A chunk or tool-call fragment breaks the wire rules (wrong type, conflicting id or name)."""


class MultipleChoicesError(ToolCallStreamError):
    """A single-turn operator met a second choice (``n>1``); use ``assemble_choices()``."""


class StreamInterruptedError(ToolCallStreamError):
    """The source failed (original kept as ``__cause__``) or ended without a finish_reason."""


class ProviderError(StreamInterruptedError):
    """The provider reported an error inside the stream; ``code`` and ``body`` are its own."""

    def __init__(self, message: str, *, code: object = None, body: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.body = body


class TruncatedToolCallError(ToolCallStreamError):
    """A tool call was cut off: ``finish_reason="length"``, or arguments ending mid-value."""


class ContentFilteredError(ToolCallStreamError):
    """The provider stopped the turn with ``finish_reason="content_filter"``."""


class InvalidArgumentsError(ToolCallStreamError):
    """A closed argument buffer is not exactly one complete JSON object."""


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
    ) -> None:
        super().__init__(
            message,
            choice_index=choice_index,
            index=index,
            name=name,
            received=received,
            finish_reason=finish_reason,
        )
        self.limit = limit
        self.value = value


class UnknownToolError(ToolCallStreamError):
    """The model named a tool the request did not declare (``Policy.tools``)."""
