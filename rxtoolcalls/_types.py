"""Frozen values crossing the public boundary: calls, turns, and the operators' elements."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AssistantTurn",
    "ChoiceEnd",
    "StreamEnd",
    "ToolCall",
    "ToolCallBuffer",
    "ToolCallCommitted",
    "ToolCallProgress",
    "ToolCallStarted",
    "tool_content",
]


def _finite(value: object) -> object:
    """``value`` with every NaN or infinite float replaced by ``None`` (keys by their name)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {
            (str(k) if isinstance(k, float) and not math.isfinite(k) else k): _finite(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def tool_content(value: object, default: Callable[[Any], Any] | None = None) -> str:
    """The content of a tool message for a tool's result: a ``str`` as is, else strict JSON.

    NaN and infinite floats, which JSON cannot hold (``json.dumps`` would write the non-JSON
    tokens ``NaN``/``Infinity``), become ``null``, as JavaScript's ``JSON.stringify`` writes
    them. ``default`` is passed to ``json.dumps`` for objects it cannot encode.

    >>> tool_content({"ratio": float("nan"), "n": 2})
    '{"ratio": null, "n": 2}'
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, allow_nan=False, default=default)
    except ValueError:
        # Non-finite floats, here or from default; a circular or oversized value (an int
        # past 4300 digits) raises again, as json.dumps does.
        given = default
        finite_default = None if given is None else (lambda o: _finite(given(o)))
        return json.dumps(_finite(value), allow_nan=False, default=finite_default)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One complete tool call whose ``arguments`` parsed as a JSON object."""

    index: int
    id: str
    name: str
    arguments: str
    parsed_arguments: dict[str, Any] = field(compare=False, repr=False)
    type: str = "function"

    def to_dict(self) -> dict[str, Any]:
        """Return the call in the Chat Completions ``tool_calls`` entry shape."""
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class AssistantTurn:
    """One assembled assistant turn of one choice: prose, refusal, reasoning and tool calls.

    ``content`` is ``None`` when no content delta was sent; ``tool_calls`` is ordered by
    ``index``; ``usage`` is the last usage object any chunk carried, as a dict.
    ``function_call`` holds a legacy ``function_call`` (deprecated functions API; its ``id``
    is ``""``). ``normalizations`` counts each recovery the policy applied, by name, for logs.
    """

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    refusal: str | None = None
    reasoning: str | None = None
    # Dicts stay out of the hash, so a frozen turn can be a set member or a dict key.
    usage: dict[str, Any] | None = field(default=None, hash=False)
    choice_index: int = 0
    function_call: ToolCall | None = None
    normalizations: dict[str, int] = field(default_factory=dict, hash=False)

    @property
    def has_tool_calls(self) -> bool:
        """Whether the turn asks for tools (whatever ``finish_reason`` says)."""
        return bool(self.tool_calls)

    def to_message(self, empty_content: str | None = None) -> dict[str, Any]:
        """Return the assistant message to send back to the Chat Completions API.

        ``empty_content`` replaces a ``None`` content (llama-cpp-python's server refuses
        ``"content": null`` next to ``tool_calls``; pass ``""`` for it).

        >>> AssistantTurn(content="Hi", finish_reason="stop").to_message()
        {'role': 'assistant', 'content': 'Hi'}
        """
        content = self.content if self.content is not None else empty_content
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if self.refusal is not None:
            message["refusal"] = self.refusal
        if self.tool_calls:
            message["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.function_call is not None:
            message["function_call"] = self.function_call.to_dict()["function"]
        return message

    def tool_messages(
        self, results: Mapping[str, object] | Sequence[object]
    ) -> list[dict[str, Any]]:
        """Return one ``{"role": "tool", "tool_call_id", "content"}`` message per call, in order.

        ``results`` maps each call id to its result, or lists the results in call order.
        A ``str`` result is sent as is; anything else is JSON-encoded (``tool_content``).
        Raises ``ValueError`` unless there is exactly one result per call.
        """
        ids = [call.id for call in self.tool_calls]
        if isinstance(results, Mapping):
            missing = [i for i in ids if i not in results]
            extra = [k for k in results if k not in ids]
            if missing or extra:
                raise ValueError(
                    f"results must answer every tool call exactly once: "
                    f"missing {missing}, unknown {extra}"
                )
            values = [results[i] for i in ids]
        else:
            if isinstance(results, str | bytes) or len(results) != len(ids):
                raise ValueError(
                    f"expected {len(ids)} results in call order, got "
                    f"{'a string' if isinstance(results, str | bytes) else len(results)}"
                )
            values = list(results)
        return [
            {"role": "tool", "tool_call_id": call_id, "content": tool_content(value)}
            for call_id, value in zip(ids, values, strict=True)
        ]

    def exchange(
        self, results: Mapping[str, object] | Sequence[object], empty_content: str | None = None
    ) -> list[dict[str, Any]]:
        """The assistant message and one tool message per call, as one list to append.

        Appending this (never the assistant message alone) keeps a transcript valid: every
        ``tool_call_id`` answered, in order. Raises ``ValueError`` like ``tool_messages``.
        """
        return [self.to_message(empty_content), *self.tool_messages(results)]


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """Progress signal: call ``index`` of choice ``choice_index`` is named ``name``.

    ``count`` is how many calls have been named so far in the stream, this one included.
    """

    index: int
    id: str | None
    name: str
    count: int
    choice_index: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallProgress:
    """Arguments are arriving for a call: ``characters`` and ``fragments`` received so far.

    Never the partial JSON itself; ``partial_arguments()`` reads it on demand (unparsed, and
    never a call to dispatch). Both describe the call as it was when the event was made.
    """

    index: int
    id: str | None
    name: str | None
    characters: int
    fragments: int
    choice_index: int = 0
    _view: Callable[[], str] = field(default=str, repr=False, compare=False)

    def partial_arguments(self) -> str:
        """The first ``characters`` of the arguments: the text as it was at this event.

        Read on demand (one copy per call), so events nobody reads cost no copy.
        """
        return self._view()[: self.characters]


@dataclass(frozen=True, slots=True)
class ToolCallCommitted:
    """The turn closed and validated: this call is complete and may be dispatched.

    ``index``, ``id`` and ``name`` are the call's, as on ``ToolCallStarted`` and
    ``ToolCallProgress``.
    """

    call: ToolCall
    choice_index: int = 0

    @property
    def index(self) -> int:
        """The call's ``index``."""
        return self.call.index

    @property
    def id(self) -> str:
        """The call's id (always known once committed)."""
        return self.call.id

    @property
    def name(self) -> str:
        """The function name."""
        return self.call.name


@dataclass(frozen=True, slots=True)
class ToolCallBuffer:
    """A tool call whose argument fragments are joined but not yet parsed."""

    choice_index: int
    index: int
    id: str | None
    name: str | None
    type: str | None
    arguments: str
    order: int = 0
    """Opening order within the choice: tells apart calls that reuse one index."""


@dataclass(frozen=True, slots=True)
class ChoiceEnd:
    """Everything of one choice except its tool calls, as it stood when the source completed."""

    index: int
    content: str | None
    refusal: str | None
    reasoning: str | None
    finish_reason: str | None
    function_call: ToolCallBuffer | None = None


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The last element before completion: per-choice ends (ordered by index) and usage."""

    choices: tuple[ChoiceEnd, ...]
    usage: dict[str, Any] | None
    normalizations: dict[str, int] = field(default_factory=dict)
