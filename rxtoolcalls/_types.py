"""Frozen values crossing the public boundary: calls, turns, and the operators' elements."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

if TYPE_CHECKING:
    from ._wire import WireSpec

__all__ = [
    "AssistantTurn",
    "CallItem",
    "ChoiceEnd",
    "StreamEnd",
    "TextDelta",
    "ToolCall",
    "ToolCallBuffer",
    "ToolCallCommitted",
    "ToolCallField",
    "ToolCallProgress",
    "ToolCallStarted",
    "ToolCallText",
    "Wire",
    "documented_state",
    "tool_content",
]

Wire: TypeAlias = Literal["chat", "responses", "anthropic", "gemini", "bedrock"]
"""The streaming formats read: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages,
Google Gemini ``streamGenerateContent``, AWS Bedrock ``ConverseStream``."""


_Value = TypeVar("_Value", bound="type[Any]")


def documented_state(cls: _Value) -> _Value:
    """``cls``, a frozen slotted dataclass, with a documented ``__getstate__``/``__setstate__``.

    CPython gives such a class a pair with no docstring, so ``help()`` shows the comment above
    their source instead. These pickle the same state: the fields' values, in order.
    """
    # typeshed reads object's __getstate__ as already bound (no self): the same function.
    cls.__getstate__ = _getstate  # type: ignore[assignment]
    cls.__setstate__ = _setstate
    return cls


def _getstate(self: Any) -> list[Any]:
    """The field values in order, for pickle and copy: a slotted class has no ``__dict__``."""
    return [getattr(self, f.name) for f in fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    """Set the field values ``__getstate__`` gave; ``ValueError`` for a state of another length."""
    for f, value in zip(fields(self), state, strict=True):
        object.__setattr__(self, f.name, value)  # frozen: the class's own setattr refuses


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


def json_data(value: object) -> Any:
    """``value`` as plain JSON data (non-finite floats as null, as ``tool_content`` writes)."""
    return json.loads(tool_content(value))


def error_text(value: BaseException) -> str:
    """An exception as a tool's answer: its type, and its message when it has one."""
    return f"{type(value).__name__}: {value}" if str(value) else type(value).__name__


def _results(ids: list[str], results: Mapping[str, object] | Sequence[object]) -> list[object]:
    """The results in call order; ``ValueError`` unless there is exactly one per call."""
    if isinstance(results, Mapping):
        missing = [i for i in ids if i not in results]
        unknown = [k for k in results if k not in ids]
        if missing or unknown:
            raise ValueError(
                f"results must answer every tool call exactly once: "
                f"missing {missing}, unknown {unknown}"
            )
        return [results[i] for i in ids]
    if isinstance(results, str | bytes) or len(results) != len(ids):
        raise ValueError(
            f"expected {len(ids)} results in call order, got "
            f"{'a string' if isinstance(results, str | bytes) else len(results)}"
        )
    return list(results)


@documented_state
@dataclass(frozen=True, slots=True)
class ToolCall:
    """One complete tool call whose ``arguments`` parsed as a JSON object.

    ``index`` is the wire's key (Chat ``index``, Responses ``output_index``, Anthropic block
    ``index``, Gemini order of appearance, Bedrock ``contentBlockIndex``); ``id`` is the id its
    answer quotes (Chat ``id``, Responses ``call_id``, Anthropic ``toolu_…``, Gemini's own or a
    synthesized one, Bedrock ``toolUseId``). ``type`` is
    ``"function"`` for JSON arguments on every wire, ``"custom"`` for a Responses custom
    tool, whose free-form ``arguments`` are never parsed (its ``parsed_arguments`` is empty).
    ``item_id`` is the Responses item id (``fc_…``), kept for diagnostics and the round trip.
    """

    index: int
    id: str
    name: str
    arguments: str
    parsed_arguments: dict[str, Any] = field(compare=False, repr=False)
    type: str = "function"
    item_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the call in the Chat Completions ``tool_calls`` entry shape."""
        return {
            "id": self.id,
            "type": self.type,
            "function": {"name": self.name, "arguments": self.arguments},
        }


def call_input(call: ToolCall) -> str | dict[str, Any]:
    """What ``call`` gives its tool: a custom call its text, a function call its parsed object.

    A custom (free-form, Responses custom tool) call's text is never parsed. Not public: the
    UI mappings, the agent loop and the timeline share the rule.
    """
    return call.arguments if call.type == "custom" else call.parsed_arguments


@documented_state
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
    wire: Wire = field(kw_only=True)
    """The format the turn was streamed in; ``to_message`` and ``tool_messages`` answer in it."""
    items: tuple[dict[str, Any], ...] = field(default=(), hash=False, repr=False)
    """Responses output items, Anthropic or Bedrock content blocks, or Gemini parts, in order:
    verbatim (reasoning, signatures, server calls and their results), calls as assembled.
    Empty on Chat."""

    def __post_init__(self) -> None:
        # Made by hand: the wire must be one the registry knows (readers make turns without
        # this check, through ``new_turn``).
        from .wires import names  # the wires import this module

        if not isinstance(self.wire, str) or self.wire not in names():
            raise (TypeError if not isinstance(self.wire, str) else ValueError)(
                f"wire must be one of {', '.join(names())}, got {self.wire!r:.40}"
            )

    @property
    def has_tool_calls(self) -> bool:
        """Whether the turn asks for tools (whatever ``finish_reason`` says)."""
        return bool(self.tool_calls)

    @property
    def needs_continuation(self) -> bool:
        """Whether the provider paused the turn (Anthropic ``pause_turn``): send it back."""
        return self.finish_reason in _spec(self.wire).pause_reasons

    def to_message(self, empty_content: str | None = None) -> Any:
        """Return what the wire's next request needs to carry this turn.

        Chat: the assistant message (a dict). Responses: the list of input items (the output
        items, reasoning and server items verbatim). Anthropic: ``{"role": "assistant",
        "content": [blocks]}``. Gemini: the ``model`` content. Bedrock: ``{"role":
        "assistant", "content": [{"text"}, {"toolUse"} …]}``. ``empty_content`` replaces a
        ``None`` Chat content (llama-cpp-python's server refuses ``"content": null`` next to
        ``tool_calls``).

        >>> AssistantTurn(content="Hi", finish_reason="stop", wire="chat").to_message()
        {'role': 'assistant', 'content': 'Hi'}
        """
        return _spec(self.wire).to_message(self, empty_content)

    def tool_messages(
        self, results: Mapping[str, object] | Sequence[object]
    ) -> list[dict[str, Any]]:
        """Return the answers to the calls, in call order, in the wire's shape.

        Chat: one ``{"role": "tool", "tool_call_id", "content"}`` per call. Responses: one
        ``function_call_output`` (``custom_tool_call_output``) item per call. Anthropic: one
        user message of ``tool_result`` blocks. Gemini: one user ``Content`` of
        ``functionResponse {name, id?, response}`` parts (a mapping is the response itself, an
        exception ``{"error": text}``, anything else ``{"output": value}``; the id only where
        the model sent one). Bedrock: one user message of ``toolResult`` blocks (``json``
        content for a mapping, else ``text``). ``results`` maps each call id to its result,
        or lists the results in call order. A ``str`` is sent as is, an exception as its text
        (Anthropic and Bedrock mark it as an error), anything else as JSON (``tool_content``).
        Raises ``ValueError`` unless there is exactly one result per call.
        """
        ids = [call.id for call in self.tool_calls]
        values = _results(ids, results)
        texts = [
            error_text(value) if isinstance(value, BaseException) else tool_content(value)
            for value in values
        ]
        return _spec(self.wire).tool_messages(self, values, texts)

    def exchange(
        self, results: Mapping[str, object] | Sequence[object], empty_content: str | None = None
    ) -> list[dict[str, Any]]:
        """The turn and its answers, as one list to append to the wire's transcript.

        Appending this (never the turn alone) keeps a transcript valid: every call answered,
        in order. Raises ``ValueError`` like ``tool_messages``.
        """
        message = self.to_message(empty_content)
        turn = message if isinstance(message, list) else [message]
        return [*turn, *self.tool_messages(results)]


@documented_state
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


@documented_state
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


@documented_state
@dataclass(frozen=True, slots=True)
class ToolCallField:
    """A value in a call's arguments is complete: ``value`` is the final parse's at ``path``.

    ``path`` holds keys and list positions; ``()`` is the whole arguments, which says they are
    structurally complete (``ToolCallCommitted`` is still the commitment). A container holds
    the very values its members' events carried: read them, never change them.
    """

    index: int
    id: str | None
    name: str | None
    path: tuple[str | int, ...]
    value: Any
    choice_index: int = 0


@documented_state
@dataclass(frozen=True, slots=True)
class ToolCallText:
    """Characters appended to the string at ``path`` since the last event for it: decoded text.

    Never empty; joined, a string's events make its value, and its ``ToolCallField`` follows.
    """

    index: int
    id: str | None
    name: str | None
    path: tuple[str | int, ...]
    text: str
    choice_index: int = 0


@documented_state
@dataclass(frozen=True, slots=True)
class TextDelta:
    """Prose of the turn as it streams: ``text`` added to its ``kind`` of choice ``choice_index``.

    ``kind`` is ``"content"`` (the answer), ``"reasoning"`` or ``"refusal"``. Never empty: each
    is the text one event brought, in the order it came; the turn still decides what holds.
    """

    text: str
    kind: Literal["content", "reasoning", "refusal"]
    choice_index: int = 0


@documented_state
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


@documented_state
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
    item_id: str | None = None
    closed: bool | None = None
    """Whether the wire closed the call (``None``: the wire has no close event)."""
    server: bool = False
    """Run by the provider (Anthropic ``server_tool_use``): parsed, kept, never dispatched."""
    json: bool = True
    """Whether the arguments are JSON (``False``: free-form custom tool input)."""


@documented_state
@dataclass(frozen=True, slots=True)
class CallItem:
    """A place in a turn's items that holds a call: rendered from the call once it is built."""

    index: int
    render: Callable[[ToolCall], dict[str, Any]] = field(compare=False)


@documented_state
@dataclass(frozen=True, slots=True)
class ChoiceEnd:
    """Everything of one choice except its tool calls, as it stood when the source completed."""

    index: int
    content: str | None
    refusal: str | None
    reasoning: str | None
    finish_reason: str | None
    function_call: ToolCallBuffer | None = None
    outcome: str | None = None
    """The finish in Chat Completions terms, where the wire's own ``finish_reason`` differs."""
    items: tuple[dict[str, Any] | CallItem, ...] = ()
    message: str | None = None
    """What the provider said about the finish (Gemini ``finishMessage``)."""


@documented_state
@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The last element before completion: per-choice ends (ordered by index) and usage."""

    choices: tuple[ChoiceEnd, ...]
    usage: dict[str, Any] | None
    normalizations: dict[str, int] = field(default_factory=dict)
    wire: Wire = field(kw_only=True)


def made_up_ids(turn: AssistantTurn) -> frozenset[str]:
    """The ids of ``turn``'s calls that the model never sent (the reader made them up)."""
    return _spec(turn.wire).made_up_ids(turn)


def no_made_up_ids(turn: AssistantTurn) -> frozenset[str]:
    """None: a wire whose calls always carry the model's ids."""
    return frozenset()


def _spec(wire: str) -> WireSpec:
    from .wires import lookup  # the wires import this module

    return lookup(wire)


def _direct(cls: type) -> Callable[..., Any]:
    """``cls(...)`` for a frozen, slotted dataclass, every field given, at a third of the cost.

    A frozen dataclass's ``__init__`` calls ``object.__setattr__`` per field, and these values
    are made once per call or turn. Here the fields are set on an instance of a plain twin
    class with the same slots, which then becomes a ``cls``: CPython allows that change of
    class between types of one layout. Where it is refused, each slot's descriptor sets it
    (half the cost). Fields go by name or in order.
    """
    names = [f.name for f in fields(cls)]
    twin = type(f"_{cls.__name__}Fields", (), {"__slots__": cls.__dict__["__slots__"]})
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_twin": twin}
    lines = [f"def make({', '.join(names)}):"]
    try:
        probe: Any = object.__new__(twin)
        probe.__class__ = cls
    except TypeError:
        lines.append("    obj = _new(_cls)")
        for at, name in enumerate(names):
            slot = next(k.__dict__[name] for k in cls.__mro__ if name in k.__dict__)
            namespace[f"_set{at}"] = slot.__set__
            lines.append(f"    _set{at}(obj, {name})")
    else:
        lines.append("    obj = _new(_twin)")
        lines += [f"    obj.{name} = {name}" for name in names]
        lines.append("    obj.__class__ = _cls")
    lines.append("    return obj")
    exec("\n".join(lines), namespace)
    make: Callable[..., Any] = namespace["make"]
    return make


new_tool_call: Callable[..., ToolCall] = _direct(ToolCall)
new_buffer: Callable[..., ToolCallBuffer] = _direct(ToolCallBuffer)
new_call_item: Callable[..., CallItem] = _direct(CallItem)
new_started: Callable[..., ToolCallStarted] = _direct(ToolCallStarted)
new_field: Callable[..., ToolCallField] = _direct(ToolCallField)
new_text: Callable[..., ToolCallText] = _direct(ToolCallText)
new_text_delta: Callable[..., TextDelta] = _direct(TextDelta)
new_turn: Callable[..., AssistantTurn] = _direct(AssistantTurn)
new_choice_end: Callable[..., ChoiceEnd] = _direct(ChoiceEnd)
