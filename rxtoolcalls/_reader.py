"""Choosing the wire: one reader per stream, detected from its first identifying event.

``reader(policy, wire=...)`` makes the reader every operator and the ``Assembler`` use. With
``wire=None`` the first event that a wire's descriptor identifies decides it (the registry
asks each wire in turn); an envelope (Bedrock's InvokeModel ``chunk``) is read as the event
inside it. Events that identify nothing (an in-band ``error`` before anything else) are read
on their own. Once decided, an event of another wire is a ``MalformedChunkError``.

The detecting reader has a Chat reader's layout, so that a Chat stream, the most common,
pays nothing for detection; any other wire's reader is delegated to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from ._close import resolve_policy, single_turn
from ._core import _NO_EVENTS, Call, Core
from ._policy import DEFAULT, Policy, PolicyName
from ._types import AssistantTurn, StreamEnd, ToolCallStarted, Wire
from .wires import WIRES, detect, lookup, names
from .wires.chat import ChatReader

__all__ = ["Assembler", "detect_wire", "reader", "recording_wire", "resolve_wire"]


def resolve_wire(wire: object) -> Wire | None:
    """``wire`` itself when it names a wire, or ``None``; ``TypeError``/``ValueError`` at once."""
    if wire is None:
        return None
    known = names()
    if not isinstance(wire, str):
        raise TypeError(
            f"wire must be one of {', '.join(known)} or None, got {type(wire).__name__}"
        )
    if wire not in known:
        shown = wire if len(wire) <= 32 else wire[:32] + "…"
        raise ValueError(f"no wire is named {shown!r}: use {', '.join(map(repr, known))} or None")
    return cast("Wire", wire)


def detect_wire(event: object) -> Wire | None:
    """The wire that ``event`` belongs to, or ``None`` when it could belong to any."""
    spec = detect(event)
    return None if spec is None else spec.name


def recording_wire(event: object) -> str | None:
    """The wire of an event as recorded: its own, or that of the event it wraps."""
    spec = detect(event)
    if spec is None and (found := _unwrapped(event)) is not None:
        spec = detect(found[1])
    return None if spec is None else spec.name


def _make(
    wire: str,
    policy: Policy,
    on_open: Callable[[Call], None] | None,
    keep_arguments: bool,
    on_error: Callable[[Exception], None] | None,
) -> Core:
    return lookup(wire).reader(
        policy, on_open=on_open, keep_arguments=keep_arguments, on_error=on_error
    )


def _unwrapped(event: object) -> tuple[Callable[[object], object | None], object] | None:
    """The unwrapping and the event inside, for an event that wraps another wire's."""
    for spec in WIRES:
        if spec.unwrap is not None:
            inner = spec.unwrap(event)
            if inner is not None:
                return spec.unwrap, inner
    return None


class _Reading(ChatReader):
    """The layout a detecting reader keeps whatever its class becomes (one of the three below).

    It is a Chat reader because that wire's fast path lives in ``feed``, which an Rx stage
    binds before the first event: a Chat stream pays nothing for detection, another wire one
    call per event.
    """

    # ``_feed`` is a slot here, shadowing the Chat reader's method: the full path of ``feed``
    # calls what it holds, the detected wire's ``feed`` itself. Before the detection, and
    # after it finds Chat, the class shadows the slot with its own ``_feed``.
    __slots__ = ("_delegate", "_feed", "_made", "_parts")
    _delegate: Core | None
    # on_open and keep_arguments, for the reader of the wire detected.
    _parts: tuple[Callable[[Call], None] | None, bool]
    # Whether the Chat state was made (a _Detecting makes it on first use).
    _made: bool

    def __getstate__(self) -> object:
        state, slots = cast("tuple[None, dict[str, object]]", super().__getstate__())
        if "_feed" in type(self).__dict__:
            # ``_feed`` reads as this class's method, which a copy cannot set: it is no state.
            slots.pop("_feed", None)
        return state, slots

    def _detect(self, chunk: object) -> Sequence[ToolCallStarted]:
        event = chunk
        spec = detect(event)
        unwrap = None
        if spec is None and (found := _unwrapped(event)) is not None:
            unwrap, event = found
            spec = detect(event)
        if spec is None:
            if isinstance(event, str) and event.strip() == "[DONE]":
                return _NO_EVENTS
            _chat_state(self)
            if isinstance(event, dict) and event.get("type") == "error":
                self._raise_provider_error(event)
            return ChatReader._feed(self, event)
        if spec.reader is ChatReader and unwrap is None:
            # Decided: from now on the Chat rules alone, with no detection per event.
            _chat_state(self)
            self.__class__ = _Chat
            self._fast = not self._policy.needs_piece_checks
            return ChatReader._feed(self, event)
        # Errors of the delegate reach this reader's own reporting (it has no on_error).
        delegate = self._delegate = _make(spec.name, self._policy, *self._parts, None)
        delegate._announce = self._announce
        delegate._on_text = self._on_text
        # Chat's fast path stays off (it would fail on every event of another wire): the
        # delegate's feed (its own fast path) is called with nothing in between, from the
        # slot (set once the class no longer shadows it).
        self.__class__ = _Delegating
        if unwrap is None:
            self._feed = delegate.feed  # type: ignore[method-assign,assignment]
        else:
            self._feed = _unwrapping(delegate.feed, unwrap)  # type: ignore[method-assign,assignment]
        return delegate.feed(event)


def _unwrapping(
    feed: Callable[[object], Sequence[ToolCallStarted]], unwrap: Callable[[object], object | None]
) -> Callable[[object], Sequence[ToolCallStarted]]:
    """``feed`` for the events inside an envelope; an event outside one is read as it is."""

    def read(event: object) -> Sequence[ToolCallStarted]:
        inner = unwrap(event)
        return feed(event if inner is None else inner)

    return read


class _Detecting(_Reading):
    """A reader before its first identifying event: Chat's state is made only when read.

    A stream of another wire never needs it (making it was about a quarter of what detecting
    a short Gemini turn cost). Until it is made, only what ``feed`` and the detection read is
    set; any other attribute read makes it first (``__getattr__``, called for an unset slot
    only). The classes this one becomes have no ``__getattr__``: it would slow every read.
    """

    __slots__ = ()
    # The detection, as a method of the class: held in the slot, a bound method would make a
    # cycle through this reader, keeping it and all that holds it until a collection.
    _feed = _Reading._detect  # type: ignore[assignment]

    def __init__(
        self,
        policy: Policy = DEFAULT,
        *,
        on_open: Callable[[Call], None] | None = None,
        keep_arguments: bool = True,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self._policy = policy
        self._on_error = on_error
        self._on_text = None
        self._announce = True
        self._stopped = False
        self._closed = False
        # Chat's fast path waits for a Chat chunk: tried on another wire's first event, it
        # would raise and catch a KeyError (no first chunk needs it: no call is open yet).
        self._fast = False
        self._delegate = None
        self._parts = (on_open, keep_arguments)
        self._made = False

    def __getattr__(self, name: str) -> Any:
        # Only Chat's state is made here: any other name (a copy's __setstate__, a blank
        # copy's own slots) is missing as it would be on any reader.
        if name in _CHAT_STATE and _chat_state(self):
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


# The slots Chat's __init__ sets (every Core's state).
_CHAT_STATE = frozenset(
    name for kind in ChatReader.__mro__ for name in getattr(kind, "__slots__", ())
)


def _chat_state(reader: _Reading) -> bool:
    """Make the Chat state of ``reader`` unless it has it; whether it was made now."""
    if reader._made:
        return False
    # What _Detecting.__init__ set, and may have changed since (a stop, ``announce``), stays.
    kept = (reader._announce, reader._stopped, reader._closed, reader._fast, reader._on_text)
    on_open, keep_arguments = reader._parts
    ChatReader.__init__(
        reader,
        reader._policy,
        on_open=on_open,
        keep_arguments=keep_arguments,
        on_error=reader._on_error,
    )
    (reader._announce, reader._stopped, reader._closed, reader._fast, reader._on_text) = kept
    reader._made = True
    return True


class _Chat(_Reading):
    __slots__ = ()
    # The Chat rules themselves (no call in between): the slow path of prose chunks.
    _feed = ChatReader._feed  # type: ignore[assignment]


class _Delegating(_Reading):
    """Hands every event and every question to the reader of the detected wire."""

    __slots__ = ()
    _delegate: Core

    def stop(self) -> None:
        """Ignore every later event."""
        super().stop()
        self._delegate.stop()

    def finish_reason(self) -> str | None:
        """The wire's finish, once sent."""
        return self._delegate.finish_reason()

    def content_size(self) -> int:
        """Characters of content received so far."""
        return self._delegate.content_size()

    def calls(self) -> list[Call]:
        """Every call opened so far, ordered by key."""
        return self._delegate.calls()

    def end(self) -> StreamEnd:
        """The stream's end, from the wire's reader."""
        return self._delegate.end()

    # The wire's reader holds these: this reader never made Chat's.
    @property
    def usage(self) -> dict[str, Any] | None:
        """The last usage the stream sent, as a dict."""
        return self._delegate.usage

    @usage.setter
    def usage(self, value: dict[str, Any] | None) -> None:
        self._delegate.usage = value

    @property
    def normalizations(self) -> dict[str, int]:
        """The recoveries the policy applied so far, by name."""
        return self._delegate.normalizations

    @normalizations.setter
    def normalizations(self, value: dict[str, int]) -> None:
        self._delegate.normalizations = value

    def close_choices(self) -> tuple[AssistantTurn, ...]:
        """The turns, from the wire's reader (once only)."""
        if self._closed:
            raise RuntimeError("close() was already called: an Assembler reads one turn")
        self._closed = True
        self.stop()
        return self._delegate.close_choices()


def reader(
    policy: Policy = DEFAULT,
    *,
    wire: Wire | None = None,
    on_open: Callable[[Call], None] | None = None,
    keep_arguments: bool = True,
    on_error: Callable[[Exception], None] | None = None,
    announce: bool = True,
    on_text: Callable[[int, str, str], None] | None = None,
) -> Core:
    """A reader for one stream: of ``wire``, or of the wire its first identifying event shows.

    ``announce=False``: ``feed`` returns no start events (for callers that never read them).
    ``on_text(choice_index, kind, piece)`` hears each piece of prose as it is kept.
    """
    made = (
        _Detecting(policy, on_open=on_open, keep_arguments=keep_arguments, on_error=on_error)
        if wire is None
        else _make(wire, policy, on_open, keep_arguments, on_error)
    )
    made._announce = announce
    made._on_text = on_text
    return made


class Assembler:
    """Sans-IO assembler: ``feed`` events, then ``close`` for the turn or one typed error.

    >>> a = Assembler()
    >>> a.feed({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]})
    ()
    >>> a.close().content
    'Hi'

    ``feed(event)`` applies one event of any wire ``Wire`` names, as a dict or an SDK object,
    and returns a ``ToolCallStarted`` for every call it named. The wire is detected from the
    first event that identifies it, or forced with ``wire=``.
    Cost: O(1) per fragment, one copy and one ``json.loads`` per call at ``close``.
    """

    __slots__ = ("_reader", "feed")

    def __init__(
        self,
        policy: Policy | PolicyName | None = None,
        *,
        require_finish_reason: bool | None = None,
        wire: Wire | None = None,
    ) -> None:
        self._reader = reader(
            resolve_policy(policy, require_finish_reason), wire=resolve_wire(wire)
        )
        # The reader's own method: no extra call per event.
        self.feed: Callable[[object], Sequence[ToolCallStarted]] = self._reader.feed

    @property
    def wire(self) -> Wire | None:
        """The stream's wire, once an event has shown it (or as forced)."""
        found = self._reader
        if type(found) is _Detecting:
            return None
        if isinstance(found, _Delegating):
            return found._delegate.wire
        return found.wire

    @property
    def normalizations(self) -> dict[str, int]:
        """The recoveries the policy applied so far, by name."""
        return dict(self._reader.normalizations)

    def calls(self) -> list[Call]:
        """Every call opened so far, ordered by (choice index, key, order of opening).

        Empty once ``close`` has failed: the reader lets go of the turn (a progress event kept
        still reads its call's text).
        """
        return self._reader.calls()

    def close_choices(self) -> tuple[AssistantTurn, ...]:
        """Return one turn per choice, ordered by choice index, or raise (once only)."""
        return self._reader.close_choices()

    def close(self) -> AssistantTurn:
        """Return the turn of a single-choice stream, or raise."""
        return single_turn(self.close_choices())
