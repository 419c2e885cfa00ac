"""The error tree: every failure the library reports is a ``ToolCallStreamError``.

Any other exception escaping the assembler or the operators is a bug.
"""

from __future__ import annotations

__all__ = [
    "ContentFilteredError",
    "InvalidArgumentsError",
    "MalformedChunkError",
    "MultipleChoicesError",
    "ProviderError",
    "StreamInterruptedError",
    "ToolCallStreamError",
    "TruncatedToolCallError",
]


class ToolCallStreamError(Exception):
    """Root of every error rxtoolcalls raises; nothing of the turn was emitted.

    ``choice_index``, ``index`` and ``name`` locate the call when the error concerns one
    (``None`` otherwise).
    """

    def __init__(
        self,
        message: str,
        *,
        choice_index: int | None = None,
        index: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.choice_index = choice_index
        self.index = index
        self.name = name


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
