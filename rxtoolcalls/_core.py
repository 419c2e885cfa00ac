"""The wire-neutral rules of assembly, in one place: no Rx, no I/O, no wire's shape.

A wire reader (``rxtoolcalls.wires``) maps its events onto these operations; ``close_choices``
returns the assembled turns or raises one ``ToolCallStreamError``. What every wire shares:

1. Call slots are keyed by (choice index, the wire's key: ``ToolCall.index`` names each
   wire's). Keys are opaque ints of at most 64 bits; calls are ordered by key at the end.
2. ``id``, ``type`` and ``name``: the first non-empty value is kept; ``""`` or null means
   absent; an identical repeat is a no-op (the wire reader refuses a different one).
3. Argument pieces are strings, appended in arrival order and never parsed before the close.
   They are provisional where the wire sends a final value (``set_final_arguments``): a
   final value that extends the pieces (the empty prefix included) completes them; one that
   contradicts them is a ``MalformedChunkError`` (``Policy.final_arguments_win`` takes it).
4. Limits (``Limits``) are checked before anything is stored: argument characters per call
   and per turn, calls, choices, text, identifiers.
5. A wire that says where each call ends (an item done, a block stopped) marks it
   ``closed``; a call still open at the end was cut off: ``TruncatedToolCallError``,
   whatever the finish.
6. The finish is classified once per choice (``_close.check_finish``), every buffer is parsed
   once (``_close.build_turns``), and everything is computed before anything is returned:
   all calls of all choices, or one error.
7. Server-run calls (Anthropic ``server_tool_use``) are parsed like any call but never
   dispatched: they appear in ``AssistantTurn.items`` only. Free-form calls (Responses
   ``custom_tool_call``) are never JSON-parsed.
8. Arguments may instead arrive as values set at JSON paths (Gemini ``partialArgs``):
   ``set_path`` builds them (``_paths.PathTree``), charging an estimate of their size to the
   limits as they come; ``close_paths`` writes them once as the call's only text piece, which
   then takes the exact limits and is parsed like any other. A call takes one kind or the
   other, never both. A string still growing when its call is closed was cut off mid-value:
   the call stays open, so the close reports it (rule 5).
"""

from __future__ import annotations

import io
import json
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, cast

from ._close import _ORDER, _where, build_turns, check_finish, every_turn
from ._errors import (
    LimitExceededError,
    MalformedChunkError,
    ToolCallStreamError,
    UnknownToolError,
    excerpt,
    not_streamed,
)
from ._fields import CallFields
from ._paths import PathError, PathTree
from ._policy import DEFAULT, Policy
from ._types import (
    AssistantTurn,
    CallItem,
    ChoiceEnd,
    StreamEnd,
    ToolCallBuffer,
    ToolCallStarted,
    Wire,
    new_buffer,
    new_choice_end,
    new_started,
)

__all__ = [
    "Call",
    "Core",
    "TextBuffer",
    "as_dict",
    "attr",
    "event_dict",
    "extra",
    "get",
    "whole_response",
]


_NO_EVENTS: tuple[ToolCallStarted, ...] = ()


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8, lone surrogates kept (surrogatepass), by str's own encode."""
    try:
        return str.encode(text)
    except UnicodeEncodeError:
        return str.encode(text, "utf-8", "surrogatepass")


class TextBuffer:
    """Text kept as UTF-8: one byte a character for ASCII, lone surrogates as they came.

    A StringIO's ``write``, ``getvalue`` and ``tell`` (in characters). On CPython 3.11 a new
    StringIO keeps each piece written as an object (53 bytes for 4 characters), a copying one
    4 bytes a character: most of the memory of a long answer streamed token by token.
    """

    __slots__ = ("chars", "data")

    def __init__(self, text: str = "") -> None:
        self.data = bytearray()
        self.chars = 0
        if text:
            self.write(text)

    def write(self, text: str) -> int:
        """Append ``text``; return its length."""
        self.data += _utf8(text)
        # str's own length: a subclass's __len__ would pass the limits by.
        size = str.__len__(text)
        self.chars += size
        return size

    def getvalue(self) -> str:
        """The text written so far."""
        return self.data.decode("utf-8", "surrogatepass")

    def tell(self) -> int:
        """Characters written so far."""
        return self.chars


def _json_writer() -> Callable[[object], str]:
    """``json.dumps(value, ensure_ascii=False, allow_nan=False)``, its C encoder made once.

    ``json.dumps`` makes that encoder anew for each value: half the cost of writing a small
    object (one per call sent whole). Without circular-reference markers, which a failed
    write would leave behind, a cycle is a ``RecursionError``, as deep nesting is.
    """
    encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
    plain = encoder.encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain
    try:
        # The arguments JSONEncoder.iterencode passes it for these options.
        encode = make(
            None, encoder.default, json.encoder.encode_basestring,
            None, ": ", ", ", False, False, False,
        )  # fmt: skip
        probe = {"a": [1, 2.5, None, True, "\u00e9"]}
        if "".join(encode(probe, 0)) != plain(probe):
            return plain
    except Exception:  # noqa: BLE001 - another interpreter's encoder: the plain one serves
        return plain
    join = "".join

    def write(value: object) -> str:
        return join(encode(value, 0))

    return write


_WRITE_JSON = _json_writer()
_ABSENT = object()
# Characters a call (or a tree of values set by path) may take on a fast path between two
# exact limit checks. A grant is reserved from the turn's budget, so the fast path updates one
# counter per piece.
_GRANT = 1 << 16
# Choice index 0 is recognised by identity: CPython keeps one object per small int, so the
# one test also tells 0 from 0.0 and False (another int object 0 takes the general lookup).
_ZERO = 0
# Indices are opaque, but bounded: every message formats them.
_MIN_INDEX = -(1 << 63)
_MAX_INDEX = (1 << 63) - 1


def _discard(_piece: str) -> None:
    """Drop an argument piece nobody keeps (progress only, or a group nobody subscribed to)."""


def _differs_at(a: str, b: str) -> int:
    """The first position where ``a`` and ``b`` differ (a message says where, never what)."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


class Call:
    """Mutable state of one tool call while the stream is open."""

    __slots__ = (
        "announced",
        "choice_index",
        "closed",
        "data",
        "end",
        "fields",
        "final",
        "id",
        "index",
        "item_id",
        "json",
        "made_up",
        "name",
        "object_payload",
        "order",
        "parsed",
        "room",
        "seen",
        "server",
        "sink",
        "streamed",
        "tree",
        "type",
    )

    def __init__(
        self,
        choice_index: int,
        index: int,
        order: int,
        id: str | None,
        type: str | None,
        name: str | None,
        keep_arguments: bool,
    ) -> None:
        self.choice_index = choice_index
        self.index = index
        self.order = order
        self.id = id
        self.type = type
        self.name = name
        # Characters reserved for the fast path, and the size the call reaches when they
        # are used up: the size itself is their difference.
        self.room = 0
        self.end = 0
        self.announced = False
        self.object_payload = False
        # Set by wires that close each call: False until its close event, None where the
        # wire has no such event (Chat Completions).
        self.closed: bool | None = None
        # A final value that replaced the pieces (``set_final_arguments`` under a policy
        # that lets the final value win).
        self.final: str | None = None
        self.item_id: str | None = None
        # The reader made the id up (Gemini sent none): a new one on each stream of the turn.
        self.made_up = False
        # The arguments parsed already: a copy of the object they were written from.
        self.parsed: dict[str, Any] | None = None
        self.server = False
        self.json = True
        # Arguments set by path (rule 8), until ``close_paths`` writes them as text.
        self.tree: PathTree | None = None
        # What was received so far, kept only when resends must be recognised.
        self.seen: TextBuffer | None = None
        # The arguments as UTF-8: one byte a character for the usual ASCII JSON, where a
        # StringIO holds four (a copying one) or a 53-byte object a piece (a new one, on
        # CPython 3.11), most of the memory of thousands of open turns. A lone surrogate
        # (half of an escaped pair) is kept as such ("surrogatepass"), to come out as it went
        # in. ``None``: the reader keeps no arguments.
        self.data: bytearray | None = bytearray() if keep_arguments else None
        # The pieces joined, once ``settle`` let their bytes go.
        self.streamed: str | None = None
        # Where pieces go: ``None`` for ``data`` (the hot paths append inline), otherwise a
        # group's push when an Rx operator routes them to an inner stream, or a drop.
        self.sink: Callable[[str], object] | None = None if keep_arguments else _discard
        # Field events (``fields()``, ``lifecycle(fields=True)``): told of values set by path
        # and of a final value that replaced the pieces; the sink passes it the pieces.
        self.fields: CallFields | None = None

    def write(self, piece: str) -> None:
        """Append a piece to ``data`` (the hot paths inline this)."""
        data = self.data
        assert data is not None
        data += _utf8(piece)

    def text(self) -> str:
        """The argument pieces kept so far, joined (a final value that replaced them aside)."""
        data = self.data
        if data is None:
            return self.streamed or ""
        return data.decode("utf-8", "surrogatepass")

    def settle(self, arguments: str) -> None:
        """Hold the pieces joined instead of their bytes: the turn is read, no piece follows.

        ``arguments`` is the call's text at the close. A large call's parse then holds its text
        and its value, not its bytes as well.
        """
        self.seen = None
        if self.data is not None:
            self.streamed = arguments if self.final is None else self.text()
            self.data = None
            self.sink = _discard  # a sink of lifecycle() holds the bytes too

    @property
    def whole(self) -> bool:
        """Whether the wire said the arguments are complete: the call's close, or a final value.

        Never on Chat Completions, which closes no call before the turn ends.
        """
        return self.closed is True or self.final is not None

    @property
    def size(self) -> int:
        """Characters of arguments received so far."""
        return self.end - self.room

    def buffer(self, text: io.StringIO | None = None) -> ToolCallBuffer:
        """The pieces received so far (in ``text``, or kept here), joined once, at the end."""
        if self.final is not None:
            arguments = self.final
        else:
            arguments = self.text() if text is None else text.getvalue()
        return new_buffer(
            self.choice_index,
            self.index,
            self.id,
            self.name,
            self.type,
            arguments,
            self.order,
            self.item_id,
            self.closed,
            self.server,
            self.json,
        )


def keeping(call: Call, then: Callable[[str], object]) -> Callable[[str], None]:
    """A sink that keeps each piece in ``call.data``, as having none does, then passes it on."""
    data = call.data
    assert data is not None  # a sink is given only to a reader that keeps the arguments

    def sink(piece: str) -> None:
        nonlocal data
        try:
            data += str.encode(piece)
        except UnicodeEncodeError:
            call.write(piece)  # a lone surrogate, kept as such
        then(piece)

    return sink


class _Choice:
    __slots__ = (
        "calls",
        "content",
        "every",
        "finish_message",
        "finish_reason",
        "index",
        "items",
        "legacy_arguments",
        "legacy_name",
        "outcome",
        "reasoning",
        "refusal",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        # The call each index routes to now (the latest one, when an index is reused).
        self.calls: dict[int, Call] = {}
        self.every: list[Call] = []
        # Legacy function_call deltas: the name, and the arguments (None: never sent).
        self.legacy_name: str | None = None
        self.legacy_arguments: TextBuffer | None = None
        # Created on the first piece: None means "never sent", unlike "".
        self.content: TextBuffer | None = None
        self.refusal: TextBuffer | None = None
        self.reasoning: TextBuffer | None = None
        self.finish_reason: str | None = None
        # What the provider said about its finish (Gemini ``finishMessage``).
        self.finish_message: str | None = None
        # The finish in Chat Completions terms, where the wire's own finish_reason differs.
        self.outcome: str | None = None
        # The wire's output in order (verbatim items, and calls rendered once built).
        self.items: tuple[dict[str, Any] | CallItem, ...] = ()

    def end(self) -> ChoiceEnd:
        return new_choice_end(
            self.index,
            None if self.content is None else self.content.getvalue(),
            None if self.refusal is None else self.refusal.getvalue(),
            None if self.reasoning is None else self.reasoning.getvalue(),
            self.finish_reason,
            None
            if self.legacy_arguments is None and self.legacy_name is None
            else ToolCallBuffer(
                self.index,
                0,
                None,
                self.legacy_name,
                None,
                "" if self.legacy_arguments is None else self.legacy_arguments.getvalue(),
            ),
            self.outcome,
            self.items,
            self.finish_message,
        )


def lookup_title(wire: str) -> str:
    """How people name the wire ``wire``."""
    from .wires import lookup  # the wires import this module

    return lookup(wire).title


def attr(obj: object, name: str, default: object = None) -> Any:
    """Read an attribute of a chunk object (a key of a ``Mapping`` that is no dict).

    Whatever its reading raises is a bad chunk.
    """
    try:
        value = getattr(obj, name, _ABSENT)
        if value is _ABSENT:
            # An SDK object has its fields as attributes: only a missing one pays for the ABC.
            return obj.get(name, default) if isinstance(obj, Mapping) else default
        return value
    except Exception as exc:
        raise MalformedChunkError(
            f"reading {name!r} of a {type(obj).__name__} raised {type(exc).__name__}"
        ) from exc


# The ``object`` of openai's non-streamed ChatCompletion and Response; their streams' events
# say ``chat.completion.chunk``, or have a ``type`` and no ``object``.
_WHOLE_OBJECTS = frozenset({"chat.completion", "response"})


def whole_response(value: object) -> bool:
    """Whether ``value`` is what a call without ``stream=True`` returns, not a stream's event.

    openai's ``ChatCompletion`` and ``Response``, anthropic's ``Message``, boto3's ``converse``
    output: as the SDK's object or as a dict. No stream sends one as an event.
    """
    if value is None or isinstance(value, str | bytes | int | float | list | tuple):
        return False
    kind = get(value, "object")
    if type(kind) is str and kind in _WHOLE_OBJECTS:
        return True
    if get(value, "type") == "message" and get(value, "role") is not None:
        return True  # a stream's message_start holds one; none comes bare
    return get(value, "output") is not None and get(value, "stopReason") is not None


def as_object(value: object) -> dict[str, Any] | None:
    """``value`` as a JSON object: a dict itself, any other ``Mapping`` as a plain copy.

    ``None`` for anything else; a ``Mapping`` that cannot be read is a ``MalformedChunkError``.
    """
    if type(value) is dict:
        return value
    if isinstance(value, Mapping):
        return cast("dict[str, Any]", _plain_event(value))
    return None


def get(obj: object, name: str) -> Any:
    """Read a field of a dict (any ``Mapping``) or an object."""
    if isinstance(obj, dict):
        return obj.get(name)
    if isinstance(obj, Mapping):
        return _looked_up(obj, name)
    return attr(obj, name)


def _looked_up(obj: Mapping[str, Any], name: str) -> Any:
    """``obj.get(name)`` of a ``Mapping`` that is no dict: whatever its lookup raises is typed."""
    try:
        return obj.get(name)
    except Exception as exc:
        raise MalformedChunkError(
            f"reading {name!r} of a {type(obj).__name__} raised {type(exc).__name__}"
        ) from exc


def extra(obj: object, name: str) -> Any:
    """Read a field that a typed model may hold as an extra (pydantic ``extra="allow"``)."""
    if isinstance(obj, dict):
        return obj.get(name)
    if isinstance(obj, Mapping):
        return _looked_up(obj, name)
    extras = attr(obj, "__pydantic_extra__", _ABSENT)
    if extras is _ABSENT:
        return attr(obj, name)
    if isinstance(extras, dict) and name in extras:
        return extras[name]
    # A declared field, or nothing: pydantic's own lookup of a missing name is slow.
    fields = attr(type(obj), "model_fields")
    return attr(obj, name) if fields is None or name in fields else None


def as_dict(value: object) -> dict[str, Any]:
    """A usage-like value as a dict (a pydantic model is dumped with what was set)."""
    found = as_object(value)
    if found is not None:
        return found
    dump = attr(value, "model_dump")
    if callable(dump):
        try:
            dumped = dump(exclude_unset=True)
        except Exception as exc:
            raise MalformedChunkError(f"usage.model_dump() raised {type(exc).__name__}") from exc
        if type(dumped) is dict:
            return dumped
    raise MalformedChunkError(f"usage must be an object, got {type(value).__name__}")


def _plain_event(event: object) -> object:
    """``event``, or, when it is a ``Mapping`` other than a plain dict, a plain copy of it.

    Every ``Mapping`` in it (an ``OrderedDict`` from ``object_pairs_hook``, a read-only view)
    becomes a dict at every depth; lists and everything else are kept. A plain dict passes as
    it is: the readers take dict subclasses inside it as dicts, with no walk of every event.
    """
    if type(event) is dict or not isinstance(event, Mapping):
        return event
    try:
        return _plain(event)
    except RecursionError as exc:
        raise MalformedChunkError("an event nests deeper than Python can copy") from exc
    except Exception as exc:
        raise MalformedChunkError(
            f"reading a {type(event).__name__} event raised {type(exc).__name__}"
        ) from exc


def _plain(value: object) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(inner) for key, inner in value.items()}
    if type(value) is list:
        return [_plain(inner) for inner in value]
    return value


def kept_size(value: object, limit: int) -> int:
    """About the characters ``value`` writes as JSON: strings and keys exactly, a few per other.

    A walk of its containers, never a write (writing a 4 KB item measured ten times the cost).
    It stops once past ``limit``: every step adds at least two, so a value that holds itself,
    or one subtree many times over, ends there too.
    """
    size = 0
    stack: list[Any] = [value]
    while stack and size <= limit:
        found = stack.pop()
        kind = type(found)
        if kind is dict:
            size += 2 + 4 * len(found)
            for key, inner in found.items():
                size += len(key) if type(key) is str else 8
                if type(inner) is str:
                    size += len(inner)  # its quotes are in the 4 above
                else:
                    stack.append(inner)
        elif kind is str:
            size += len(found) + 2
        elif kind is list or kind is tuple:
            size += 2 + len(found)
            stack.extend(found)
        elif kind is int:
            # A digit per 3.3 bits, with no decimal text made (it may be past 4300 digits).
            size += found.bit_length() // 3 + 2
        elif kind is float or kind is bool or found is None:
            size += 8
        elif isinstance(found, Mapping):
            size += 2
            stack.append(dict(found))
        elif isinstance(found, str | bytes | bytearray):
            size += len(found) + 2
        elif isinstance(found, list | tuple):
            size += 2
            stack.append(list(found))
        elif isinstance(found, int):
            size += int(found).bit_length() // 3 + 2
        else:
            size += 8
    return size


def event_dict(event: object, what: str) -> dict[str, Any]:
    """An SDK event object as the dict of what was sent (dicts pass as they are).

    ``what`` names the wire's events in messages ("a Responses event").
    """
    if type(event) is dict:
        return event
    if event is None or isinstance(event, str | bytes | int | float | list | tuple):
        raise MalformedChunkError(f"{what} must be an object, got {type(event).__name__}")
    dump = attr(event, "model_dump")
    if not callable(dump):
        raise MalformedChunkError(
            f"{what} must be a dict or an SDK event, got {type(event).__name__}"
        )
    try:
        # An SDK older than the wire parses a new block type into a wrong model and would
        # warn while writing it back; the extras it kept still hold every field sent.
        dumped = dump(mode="json", exclude_unset=True, warnings=False)
    except Exception as exc:
        raise MalformedChunkError(f"{type(event).__name__}.model_dump() raised") from exc
    if type(dumped) is not dict:
        raise MalformedChunkError(f"{type(event).__name__}.model_dump() gave no object")
    return dumped


def _object_text(call: Call, value: dict[str, Any]) -> str:
    """Arguments sent as an object, as the strict JSON text the core keeps."""
    try:
        return _WRITE_JSON(value)
    except Exception as exc:
        # An int past 4300 digits, NaN, a nesting too deep to write, an object's own failure.
        raise MalformedChunkError(
            f"{_where(call.choice_index, call.index, call.name)}: the object arguments "
            f"cannot be written as JSON ({type(exc).__name__})",
            **_at(call),
        ) from exc


_LEAVES = frozenset({str, int, float, bool, type(None)})
_COPY_DEPTH = 32


def _copied(value: object, room: int) -> Any:
    """``value`` as parsing its JSON text gives it (new containers), or ``_ABSENT``.

    Only JSON's own types are copied: anything else (a tuple, a subclass, a key that is not
    a ``str``) or containers nested deeper than ``room`` more levels is ``_ABSENT``, and
    left to the parse at the close, which gives the exact result or error.
    """
    if room <= 0:
        return _ABSENT
    if type(value) is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                return _ABSENT
            if type(item) not in _LEAVES:
                item = _copied(item, room - 1)
                if item is _ABSENT:
                    return _ABSENT
            out[key] = item
        return out
    if type(value) is list:
        items: list[Any] = []
        for item in value:
            if type(item) not in _LEAVES:
                item = _copied(item, room - 1)
                if item is _ABSENT:
                    return _ABSENT
            items.append(item)
        return items
    return _ABSENT


def _at(call: Call) -> dict[str, Any]:
    """Where an error about ``call`` happened, for its diagnostics."""
    return {
        "choice_index": call.choice_index,
        "index": call.index,
        "name": call.name,
        "received": call.size,
    }


class _State:
    """What a turn holds besides its calls' pieces: choices, text, counts, error reporting."""

    __slots__ = (
        "_announce",
        "_budget",
        "_calls0",
        "_choices",
        "_closed",
        "_fast",
        "_keep",
        "_kept",
        "_kept_room",
        "_max_call",
        "_max_identifier",
        "_named",
        "_on_error",
        "_on_open",
        "_on_text",
        "_opened",
        "_policy",
        "_resend",
        "_stopped",
        "_text_room",
        "normalizations",
        "usage",
    )

    def __init__(
        self,
        policy: Policy = DEFAULT,
        *,
        on_open: Callable[[Call], None] | None = None,
        keep_arguments: bool = True,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self._policy = policy
        # False where nobody reads the start events feed returns (``assemble()``).
        self._announce = True
        self._choices: dict[int, _Choice] = {}
        # Choice 0's calls, read directly by the fast path (nearly every stream has one choice).
        self._calls0: dict[int, Call] = {}
        self._on_open = on_open
        # Told each piece of the turn's prose as it is kept (``lifecycle(text=True)``): its
        # choice, its kind (``content``, ``reasoning``, ``refusal``) and the piece.
        self._on_text: Callable[[int, str, str], None] | None = None
        self._on_error = on_error
        self._keep = keep_arguments
        self._named = 0
        self._opened = 0
        self._max_call = policy.limits.max_call_arguments
        self._budget = policy.limits.max_turn_arguments
        self._text_room = policy.limits.max_text
        # What is kept verbatim for the turn's items: the room left, and the size each key
        # holds now (a later value under one key replaces the earlier).
        self._kept_room = policy.limits.max_kept
        self._kept: dict[object, int] = {}
        self._max_identifier = policy.limits.max_identifier
        # The fast path only counts; recoveries that inspect pieces take the full path.
        self._fast = not policy.needs_piece_checks
        self._resend = policy.drop_resent_arguments
        self._stopped = False
        self._closed = False
        self.usage: dict[str, Any] | None = None
        self.normalizations: dict[str, int] = {}

    def stop(self) -> None:
        """Ignore every later chunk (the subscription ended)."""
        self._stopped = True
        self._fast = False

    # -- feeding -------------------------------------------------------------------------

    def _slow_feed(self, event: object) -> Sequence[ToolCallStarted]:
        """The full path of a wire's ``feed``: refuse after close, report errors (given one)."""
        if self._stopped:
            if self._closed:
                raise RuntimeError(
                    "feed() after close(): an Assembler reads one turn; make a new one"
                )
            return _NO_EVENTS
        if self._on_error is None:
            return self._feed(_plain_event(event))
        try:
            return self._feed(_plain_event(event))
        except Exception as error:  # noqa: BLE001 - reported, never lost
            self._report(error)
            return _NO_EVENTS

    def feed(self, event: object) -> Sequence[ToolCallStarted]:
        """Apply one event; return the calls it named (usually none).

        Raises ``MalformedChunkError`` or ``ProviderError`` (reports them, given ``on_error``).
        """
        return self._slow_feed(event)

    def _feed(self, event: object) -> Sequence[ToolCallStarted]:
        """Apply one event of the wire (each wire reader defines it)."""
        raise NotImplementedError

    def store_piece(self, call: Call, piece: str) -> bool:
        """Append an argument piece within the call's grant: every fast path's tail.

        ``False`` (nothing stored) past the grant: the full path then checks the limits
        exactly and grants more. An error of the call's sink is reported, never lost.
        """
        room = call.room - len(piece)
        if room < 0:
            return False
        call.room = room
        if call.seen is not None:
            call.seen.write(piece)
        # Outside the wire's reads: an error of the sink is the sink's own.
        sink = call.sink
        if sink is None:
            try:
                call.data += piece.encode()  # type: ignore[operator]
            except UnicodeEncodeError:
                call.write(piece)
            return True
        try:
            sink(piece)
        except Exception as error:  # noqa: BLE001 - raised or reported, never lost
            self._report(error)
        return True

    def key_of(self, data: Mapping[str, Any], field: str, kind: object) -> int:
        """The block or item index ``data[field]``: an int of at most 64 bits, or refused."""
        index = data.get(field)
        if type(index) is not int or not _MIN_INDEX <= index <= _MAX_INDEX:
            raise MalformedChunkError(
                f"{excerpt(kind, 60)}: {field} must be an int of at most 64 bits, got "
                f"{excerpt(index)}"
            )
        return index

    def _report(self, error: Exception) -> None:
        """Raise ``error``, or stop and pass it to ``on_error``: once, whatever comes later."""
        on_error = self._on_error
        if on_error is None:
            raise error
        self.stop()
        on_error(error)

    def _state(self, choice_index: int = 0) -> _Choice:
        """The state of a choice, made on first use (wires with one choice use choice 0).

        Raises ``LimitExceededError`` for a choice past ``Limits.max_choices``.
        """
        state = self._choices.get(choice_index)
        if state is None:
            if len(self._choices) >= self._policy.limits.max_choices:
                limit = self._policy.limits.max_choices
                raise LimitExceededError(
                    f"more than {limit} choices in one stream (Limits.max_choices)",
                    limit="max_choices",
                    value=limit,
                    choice_index=choice_index,
                )
            state = self._choices[choice_index] = _Choice(choice_index)
            if choice_index == 0:
                self._calls0 = state.calls
        return state

    def _write(self, state: _Choice, slot: str, field: str, value: object) -> None:
        """Append a text piece (content, reasoning, refusal) to its per-choice buffer."""
        # _charge_text's work, inline: prose streams pass here once per chunk.
        if type(value) is not str:
            raise MalformedChunkError(
                f"choice {state.index}: {field} must be a string, got {type(value).__name__}"
            )
        room = self._text_room - len(value)
        if room < 0:
            self._charge_text(state, field, value)  # raises
        self._text_room = room
        text = value
        buffer = getattr(state, slot)
        if buffer is None:
            buffer = TextBuffer()
            setattr(state, slot, buffer)
        buffer.write(text)
        if self._on_text is not None and text:
            self._on_text(state.index, slot, text)

    def _charge_text(self, state: _Choice, field: str, value: object) -> str:
        """Check a text piece's type and take it from ``Limits.max_text``; return it."""
        if type(value) is not str:
            raise MalformedChunkError(
                f"choice {state.index}: {field} must be a string, got {type(value).__name__}"
            )
        text = value
        room = self._text_room - len(text)
        if room < 0:
            limit = self._policy.limits.max_text
            raise LimitExceededError(
                f"choice {state.index}: {field} passed Limits.max_text ({limit:,} characters "
                f"of content, refusal and reasoning in one turn); nothing past it was kept",
                limit="max_text",
                value=limit,
                choice_index=state.index,
            )
        self._text_room = room
        return text

    def charge_kept(self, value: object, what: str, key: object = None) -> None:
        """Take ``value``'s size as JSON from ``Limits.max_kept`` (kept for the turn's items).

        The size is ``kept_size(value)``. A value under ``key`` (not ``None``) replaces the one
        that key held: only the difference is taken. Raises ``LimitExceededError`` past the
        limit, before anything is kept.
        """
        before = 0 if key is None else self._kept.get(key, 0)
        try:
            size = kept_size(value, self._kept_room + before)
        except Exception as exc:  # a Mapping of the caller's whose reading fails
            raise MalformedChunkError(f"{what} cannot be read ({type(exc).__name__})") from exc
        room = self._kept_room - size + before
        if room < 0:
            limit = self._policy.limits.max_kept
            raise LimitExceededError(
                f"{what} passed Limits.max_kept ({limit:,} characters kept verbatim in one "
                f"turn); nothing past it was kept",
                limit="max_kept",
                value=limit,
            )
        self._kept_room = room
        if key is not None:
            self._kept[key] = size

    def _all_calls(self) -> list[Call]:
        return [call for state in self._choices.values() for call in state.every]

    def _count(self, normalization: str) -> None:
        self.normalizations[normalization] = self.normalizations.get(normalization, 0) + 1

    def _identity(self, state: _Choice, index: object, field: str, value: object) -> str | None:
        if value is None or value == "":
            return None
        if type(value) is not str:
            raise MalformedChunkError(
                f"{_where(state.index, index if type(index) is int else None, None)}: "
                f"{field} must be a string, got {type(value).__name__}"
            )
        if len(value) > self._max_identifier:
            raise self._identifier_too_long(state, index, field)
        return value

    def _identifier_too_long(self, state: _Choice, index: object, field: str) -> LimitExceededError:
        limit = self._max_identifier
        return LimitExceededError(
            f"{_where(state.index, index if type(index) is int else None, None)}: {field} "
            f"passed Limits.max_identifier ({limit:,} characters)",
            limit="max_identifier",
            value=limit,
            choice_index=state.index,
            index=index if type(index) is int else None,
        )


class _Calls(_State):
    """Call slots: opening, argument pieces and final values, and the limits they take."""

    __slots__ = ()

    def _open(
        self,
        state: _Choice,
        index: int | None,
        id: str | None,
        type_: str | None,
        name: str | None,
        *,
        provisional: bool = False,
    ) -> Call:
        """Open a call at ``index`` (``None``: after the highest).

        ``provisional`` keeps its pieces for ``set_final_arguments`` even when the reader
        keeps no arguments.
        """
        limit = self._policy.limits.max_calls
        if self._opened >= limit:
            raise LimitExceededError(
                f"choice {state.index}: more than {limit} tool calls in one turn "
                f"(Limits.max_calls)",
                limit="max_calls",
                value=limit,
                choice_index=state.index,
                index=index,
                name=name,
            )
        self._opened += 1
        if index is None:
            index = max(state.calls) + 1 if state.calls else 0
        elif not _MIN_INDEX <= index <= _MAX_INDEX:
            # Every message formats the index: Python refuses to format ints past 4300 digits.
            raise MalformedChunkError(
                f"choice {state.index}: tool call index must fit in 64 bits, got {excerpt(index)}",
                choice_index=state.index,
            )
        call = Call(state.index, index, len(state.every) + 1, id, type_, name, self._keep)
        self._grant(call, 0)
        if self._resend or (provisional and not self._keep):
            call.seen = TextBuffer()
        state.calls[index] = call
        state.every.append(call)
        if self._on_open is not None:
            self._on_open(call)
        return call

    def _piece(self, state: _Choice, call: Call, piece: object) -> None:
        """Store one argument piece: type rules, recoveries, limits, then the sink."""
        policy = self._policy
        if not isinstance(piece, str):
            if policy.object_arguments and isinstance(piece, dict) and call.size == 0:
                piece = _object_text(call, piece)
                self._count("object_arguments")
                call.object_payload = True
            else:
                raise MalformedChunkError(
                    f"{_where(state.index, call.index, call.name)}: arguments must be a JSON "
                    f"string fragment, got {type(piece).__name__}",
                    hint=(
                        "the lenient policy (object_arguments) accepts an object as the only "
                        "payload"
                        if isinstance(piece, dict)
                        else None
                    ),
                    **_at(call),
                )
        elif call.object_payload and piece:
            raise MalformedChunkError(
                f"{_where(state.index, call.index, call.name)}: string argument fragments after "
                f"an object payload; the two cannot be joined",
                **_at(call),
            )
        if not piece:
            return
        if call.final is not None:
            raise MalformedChunkError(
                f"{_where(state.index, call.index, call.name)}: argument pieces after the "
                f"call's final arguments",
                **_at(call),
            )
        seen = call.seen
        if seen is not None and self._resend and call.size and len(piece) >= call.size:
            so_far = seen.getvalue()  # only when the piece is as long as everything so far
            if piece == so_far:
                self._count("dropped_resent_arguments")
                return
            if piece.startswith(so_far):
                self._count("cumulative_arguments")
                piece = piece[call.size :]
        n = len(piece)
        room = call.room - n
        if room >= 0:
            call.room = room
        else:
            # Past the grant: give it back, check both limits exactly, reserve the next.
            size = call.size
            self._give_back(call)
            if size + n > self._max_call or not self._fits_turn(n):
                which, value = (
                    ("max_call_arguments", self._max_call)
                    if size + n > self._max_call
                    else ("max_turn_arguments", self._policy.limits.max_turn_arguments)
                )
                raise LimitExceededError(
                    f"{_where(state.index, call.index, call.name)}: the arguments passed "
                    f"Limits.{which} ({value:,} characters); nothing past it was kept",
                    limit=which,
                    value=value,
                    **_at(call),
                )
            self._budget -= n
            self._grant(call, size + n)
        if seen is not None:
            seen.write(piece)
        sink = call.sink
        if sink is None:
            call.write(piece)
        else:
            sink(piece)

    def set_final_arguments(self, call: Call, value: object, source: str) -> None:
        """Apply a final value of the arguments (rule 3): it completes or replaces the pieces.

        Raises ``MalformedChunkError`` when it contradicts them, unless the policy lets the
        final value win (counted as ``replaced_provisional_arguments``).
        """
        state = self._choices[call.choice_index]
        if type(value) is not str:
            raise MalformedChunkError(
                f"{_where(state.index, call.index, call.name)}: {source} must be a string, "
                f"got {type(value).__name__}",
                **_at(call),
            )
        if call.final is not None:
            so_far = call.final
        elif call.seen is not None:
            so_far = call.seen.getvalue()
        elif call.data is not None:
            so_far = call.text()
        else:
            return  # a progress-only reader keeps nothing to compare or complete
        # From here on the arguments are final: a later piece is refused (``_piece``).
        if value == so_far:
            if value:  # an empty final value says nothing yet (a later one may follow)
                call.final = value
            return
        if value.startswith(so_far) and call.final is None:
            # The usual case where deltas stop short or never came (done-only servers).
            self._piece(state, call, value[len(so_far) :])
            call.final = value
            return
        if not self._policy.final_arguments_win:
            raise MalformedChunkError(
                f"{_where(state.index, call.index, call.name)}: {source} says the arguments "
                f"are {len(value):,} characters that differ from the {len(so_far):,} the "
                f"pieces streamed before, from character {_differs_at(value, so_far):,}",
                hint="the lenient policy (final_arguments_win) takes the final value",
                **_at(call),
            )
        grown = len(value) - len(so_far)
        if grown > 0:
            # The turn pays for what the final value adds, as it would for pieces.
            self._give_back(call)
        if len(value) > self._max_call or (grown > 0 and not self._fits_turn(grown)):
            which, limit = (
                ("max_call_arguments", self._max_call)
                if len(value) > self._max_call
                else ("max_turn_arguments", self._policy.limits.max_turn_arguments)
            )
            raise LimitExceededError(
                f"{_where(state.index, call.index, call.name)}: the final arguments passed "
                f"Limits.{which} ({limit:,} characters)",
                limit=which,
                value=limit,
                **_at(call),
            )
        if grown > 0:
            self._budget -= grown
        self._count("replaced_provisional_arguments")
        call.final = value
        if call.fields is not None:
            call.fields.replaced(value)

    def set_path(self, call: Call, path: object, value: object, grows: bool) -> None:
        """Set one value of ``call``'s arguments at a JSON path (rule 8).

        A ``str`` value grows the string at ``path`` while ``grows`` was said of its last
        piece. Raises ``MalformedChunkError`` for a bad or conflicting path and
        ``LimitExceededError`` past the limits. A tree of choice 0 then gets a grant (``end``):
        characters its wire's fast path may add with no check, reserved from the turn's budget.
        """
        if type(path) is not str:
            raise MalformedChunkError(
                f"{_where(call.choice_index, call.index, call.name)}: jsonPath must be a "
                f"string, got {type(path).__name__}",
                **_at(call),
            )
        if call.size or call.final is not None:
            raise MalformedChunkError(
                f"{_where(call.choice_index, call.index, call.name)}: arguments set by path "
                f"after arguments sent whole",
                **_at(call),
            )
        tree = call.tree
        if tree is None:
            tree = call.tree = PathTree(
                self._policy.limits.max_depth, None if call.fields is None else call.fields.path
            )
            # An open tree's size is charged to the turn's budget, as any argument text is,
            # and given back when the tree is written as its call's text. Until then the
            # call takes no text: its grant for text goes back.
            self._give_back(call)
            self._budget -= tree.size
        else:
            self._ungrant(tree)
        before = tree.size
        try:
            tree.set(path, value, grows)
        except PathError as exc:
            # Containers made before the refusal stay in the tree: their size is charged too.
            self._budget -= tree.size - before
            where = _where(call.choice_index, call.index, call.name)
            if exc.too_deep:
                raise LimitExceededError(
                    f"{where}: {exc} (Limits.max_depth, {self._policy.limits.max_depth})",
                    limit="max_depth",
                    value=self._policy.limits.max_depth,
                    **_at(call),
                ) from exc
            raise MalformedChunkError(f"{where}: {exc}", **_at(call)) from exc
        self._budget -= tree.size - before
        # Short, every grant comes back before the exact check (``_fits_turn``).
        if tree.size > self._max_call or not self._fits_turn(0):
            where = _where(call.choice_index, call.index, call.name)
            which, limit = (
                ("max_call_arguments", self._max_call)
                if tree.size > self._max_call
                else ("max_turn_arguments", self._policy.limits.max_turn_arguments)
            )
            raise LimitExceededError(
                f"{where}: the arguments set by path passed Limits.{which} ({limit:,} "
                f"characters); nothing past it was kept",
                limit=which,
                value=limit,
                **_at(call),
            )
        if call.choice_index == 0:
            # The next characters this tree may take on the fast path (which reads choice 0
            # alone), reserved from the turn's budget: that path checks and updates ``size``.
            grant = min(_GRANT, self._max_call - tree.size)
            if grant > self._budget:
                self._fits_turn(grant)  # takes back every other grant when short
            grant = min(grant, self._budget)
            self._budget -= grant
            tree.end = tree.size + grant

    def _ungrant(self, tree: PathTree) -> None:
        """End ``tree``'s grant: what it has not used goes back to the turn's budget."""
        if tree.end > tree.size:
            self._budget += tree.end - tree.size
        tree.end = 0

    def set_object_arguments(self, call: Call, value: dict[str, Any]) -> None:
        """Take arguments the wire sends whole, as an object (Gemini ``args``).

        Written once as strict JSON, which then takes the limits like any piece. Where the
        object holds JSON's own types alone, a copy of it is the parsed value, and the text
        is not parsed again at the close.
        """
        if call.size or call.tree is not None or call.final is not None:
            raise MalformedChunkError(
                f"{_where(call.choice_index, call.index, call.name)}: whole arguments after "
                f"other arguments",
                **_at(call),
            )
        self._piece(self._choices[call.choice_index], call, _object_text(call, value))
        if self._keep:
            # Deeper objects are parsed (a copy this deep would recurse far), as are those
            # past max_depth: the parse gives the error.
            parsed = _copied(value, min(self._policy.limits.max_depth, _COPY_DEPTH))
            if parsed is not _ABSENT:
                call.parsed = parsed

    def close_paths(self, call: Call, said: bool = True) -> bool:
        """Write the values set by path as the call's arguments (``{}`` when none were).

        Returns whether every value was finished: ``False`` when a string still said it
        continues, so the call was cut off mid-value (rule 8), however its wire closed it.
        ``said``: the wire said the call ended (a close it never sent may be a cut, so its
        field events stop instead of reporting the containers).
        """
        tree = call.tree
        if call.fields is not None and (not said or (tree is not None and tree.growing)):
            call.fields.stop()
        if tree is None:
            if call.size == 0 and call.final is None:
                self._piece(self._choices[call.choice_index], call, "{}")
            return True
        call.tree = None
        self._ungrant(tree)
        self._budget += tree.size
        text = tree.text()
        if call.fields is not None:
            call.fields.paths_closed(text)
        self._piece(self._choices[call.choice_index], call, text)
        return not tree.growing

    def _grant(self, call: Call, size: int) -> None:
        """Reserve the next characters ``call`` (now ``size`` long) may take on the fast path."""
        grant = min(_GRANT, self._max_call - size, self._budget)
        self._budget -= grant
        call.room = grant
        call.end = size + grant

    def _give_back(self, call: Call) -> None:
        """End ``call``'s grant for text: what it has not used goes back to the turn's budget."""
        self._budget += call.room
        call.end -= call.room
        call.room = 0

    def _fits_turn(self, n: int) -> bool:
        """Whether ``n`` more characters fit the turn; reclaims every grant when short."""
        if n <= self._budget:
            return True
        for call in self._all_calls():
            self._give_back(call)
            if call.tree is not None:
                self._ungrant(call.tree)
        return n <= self._budget


class Core(_Calls):
    """The state of one turn being read: call slots, text, limits, finish (rules 1-7).

    A wire reader subclasses it and adds ``feed``. ``on_open`` is called with each new call
    before its first argument piece; it may replace the call's ``sink``.
    ``keep_arguments=False`` drops the pieces (progress only). With ``on_error``, ``feed``
    never raises: it passes the first error there, returns no events, and stops. A stopped
    reader (``stop()``) ignores every chunk, so an Rx stage can subscribe ``feed`` directly.
    """

    __slots__ = ()

    # Each wire's reader names its wire; a reader that does not is an AttributeError at once.
    wire: ClassVar[Wire]

    def close_input(self, call: Call, given: object, what: str) -> None:
        """Close a call whose block ended: no input pieces at all means ``{}``.

        A tool without parameters sends only ``""`` (or nothing); a proxy may put the whole
        input in the block's start (``given``), taken as it is.
        """
        if call.size == 0 and call.final is None:
            if given is not None:
                found = as_object(given)
                if found is None:
                    raise MalformedChunkError(
                        f"{what}: the input its start carries must be an object, got "
                        f"{type(given).__name__}",
                        **_at(call),
                    )
                given = found
            try:
                whole = json.dumps(given) if isinstance(given, dict) and given else "{}"
            except (RecursionError, ValueError, TypeError) as error:
                raise MalformedChunkError(
                    f"{what}: its input cannot be written as JSON ({type(error).__name__})",
                    **_at(call),
                ) from None
            self.set_final_arguments(call, whole, f"{what}'s input")
        call.closed = True

    def after_end(self, kind: object, end: str) -> MalformedChunkError:
        """The error for an event after the wire's terminal event ``end``."""
        return MalformedChunkError(
            f"an event of type {excerpt(kind, 60)} after {end}: the stream had ended"
        )

    def refuse_other_wire(self, event: object) -> None:
        """Raise ``MalformedChunkError`` when ``event`` is another wire's: one stream, one wire.

        An envelope (Bedrock's InvokeModel ``chunk``) is refused too: the events inside it are
        read by the wire they belong to, which a detecting reader finds. So are what no stream
        sends, each with what to pass instead: a whole response (``whole_response``) and
        LangChain's ``AIMessageChunk``.
        """
        from .wires import WIRES, detect  # the wires import this module

        other = detect(event)
        if other is not None and other.name != self.wire:
            raise MalformedChunkError(
                f"an event of {other.title} in a stream of {lookup_title(self.wire)}: one stream "
                f"speaks one wire",
                hint=f"read it with wire={other.name!r}",
            )
        if other is None:
            for spec in WIRES:
                if spec.unwrap is not None and spec.unwrap(event) is not None:
                    raise MalformedChunkError(
                        f"an envelope of {spec.title} in a stream of {lookup_title(self.wire)}",
                        hint="leave wire unset: the events inside an envelope are read as the "
                        "wire they belong to",
                    )
            if whole_response(event):
                raise MalformedChunkError(not_streamed("this event"))
            if get(event, "tool_call_chunks") is not None:
                # LangChain's AIMessageChunk: its own fields, with no provider event in it.
                raise MalformedChunkError(
                    f"a LangChain AIMessageChunk is not a stream event: rxtoolcalls reads the "
                    f"events of a provider's own stream ({', '.join(s.title for s in WIRES)}), "
                    f"as dicts or its SDK's objects, and not LangChain's tool_call_chunks",
                    hint="pass the provider's stream instead: its SDK's (client.chat."
                    "completions.create(..., stream=True) and the like), or its raw HTTP body "
                    "through from_sse",
                )

    def foreign(self, data: Mapping[str, Any], what: str) -> MalformedChunkError:
        """The error for an event this wire does not know: another wire's, or an unknown one."""
        try:
            self.refuse_other_wire(data)
        except MalformedChunkError as error:
            return error
        return MalformedChunkError(f"{what} of unknown type {excerpt(data.get('type'), 60)}")

    def _name_known(self, call: Call, *, whole: bool = False) -> ToolCallStarted | None:
        """Check a (possibly partial) name; return the start event once it is final enough.

        ``whole``: the wire sends the name in one piece (it cannot grow), so it is announced
        at once whatever ``join_split_names`` says.
        """
        policy = self._policy
        if call.server:
            # Run by the provider: never announced, never dispatched, no field events.
            if call.fields is not None:
                call.fields.stop()
            return None
        name = call.name or ""
        tools = policy.tools
        if policy.join_split_names and not whole:
            # A name may still grow until the arguments start: announce it then.
            if tools is not None and not any(t.startswith(name) for t in tools):
                raise self._unknown(call)
            if call.size == 0 and (tools is None or name not in tools):
                return None
        elif tools is not None and name not in tools:
            raise self._unknown(call)
        if call.announced:
            return None
        call.announced = True
        if call.fields is not None:
            call.fields.named()
        self._named += 1
        if not self._announce:
            return None
        return new_started(call.index, call.id, name, self._named, call.choice_index)

    def _unknown(self, call: Call) -> UnknownToolError:
        tools = sorted(self._policy.tools or ())
        return UnknownToolError(
            f"{_where(call.choice_index, call.index, call.name)}: the model called a tool the "
            f"request did not declare; declared: {', '.join(tools) or 'none'}",
            **_at(call),
        )

    # -- reading the state ---------------------------------------------------------------

    def finish_reason(self) -> str | None:
        """The finish_reason of the lowest choice, once sent (cheap: no copy)."""
        return self._choices[min(self._choices)].finish_reason if self._choices else None

    def content_size(self) -> int:
        """Characters of content received so far, over all choices (cheap: no copy)."""
        return sum(c.content.tell() for c in self._choices.values() if c.content is not None)

    def calls(self) -> list[Call]:
        """Every call opened so far, ordered by (choice index, index, order of opening)."""
        return sorted(self._all_calls(), key=_ORDER)

    def end(self) -> StreamEnd:
        """The per-choice text and finish state, ordered by choice index, and the usage."""
        self._settle()
        return StreamEnd(
            tuple(self._choices[ci].end() for ci in sorted(self._choices)),
            self.usage,
            dict(self.normalizations),
            wire=self.wire,
        )

    def _settle(self) -> None:
        """Bring the choices' text and items up to date before ``end`` (a wire's hook)."""

    def close_choices(self) -> tuple[AssistantTurn, ...]:
        """Return one turn per choice, ordered by choice index, or raise (rule 6).

        Once only: a second call, or ``feed`` after it, raises ``RuntimeError``.
        """
        if self._closed:
            raise RuntimeError("close() was already called: an Assembler reads one turn")
        self._closed = True
        self.stop()
        try:
            return self._turns()
        except ToolCallStreamError as error:
            # Whoever keeps the error keeps the frames it passed: those that ended let go of
            # their locals (the buffers), and this reader of what it read.
            traceback.clear_frames(error.__traceback__)
            self._release()
            raise

    def _turns(self) -> tuple[AssistantTurn, ...]:
        calls = self.calls()
        buffers = [call.buffer() for call in calls]
        for call, buffer in zip(calls, buffers, strict=True):
            call.settle(buffer.arguments)
        end = check_finish(self.end(), buffers, self._policy)
        # Arguments this reader wrote from an object it copied need no parse.
        known = {
            (c.choice_index, c.index, c.order): c.parsed for c in calls if c.parsed is not None
        }
        return every_turn(build_turns(buffers, end, self._policy, known))

    def _release(self) -> None:
        """Let go of the turn's calls, text and items, as it failed (``calls()`` is empty).

        Whoever keeps the error keeps this reader (its traceback's frames hold it), never
        the turn. The calls themselves are left as they are: a progress event someone keeps
        still reads its text. A wire extends it with what it keeps of its own.
        """
        for state in self._choices.values():
            for call in state.every:
                call.sink = None  # a sink of lifecycle() and its call hold each other
            state.calls = {}
            state.every = []
            state.content = state.refusal = state.reasoning = state.legacy_arguments = None
            state.items = ()
        self._calls0 = {}
