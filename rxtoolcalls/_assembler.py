"""Every rule of tool-call assembly, in one place: no Rx, no I/O.

Chunks go in one at a time (``feed``); the events they unlock come out; ``close`` returns the
assembled turn or raises one ``ToolCallStreamError``. The Rx operators run these same functions.

Wire rules (applied by ``TurnReader.feed``):

1. A chunk is a ``dict`` (parsed JSON) or any object with the chunk's attributes (the openai
   SDK's ``ChatCompletionChunk``); nested parts may mix both. Unknown fields are ignored.
2. A chunk with a top-level ``error`` (or ``"object": "error"``) is a ``ProviderError``.
3. ``choices`` may be missing, empty or null (filter annotations, the usage-only last chunk);
   ``delta`` may be null. A missing choice ``index`` means choice 0.
4. Every delta field is read in the same pass: ``content``, ``refusal`` and
   ``reasoning_content``/``reasoning`` are appended per choice; null pieces are skipped.
5. Tool-call state is keyed on (choice index, tool-call ``index``). Indices are opaque ints
   (gateways start at 1, leave gaps); calls are ordered by index at the end.
6. A fragment without ``index`` joins the call holding its non-empty ``id``; else, with a new
   id, it opens a new call after the highest index; else it joins the choice's only call (or
   opens index 0 when there is none); with several calls and no id it is ambiguous.
7. ``id``, ``type`` and ``function.name``: the first non-empty value is kept; ``""`` or null
   means absent; an identical repeat is a no-op; a different value is a ``MalformedChunkError``.
8. ``function.arguments`` pieces must be strings; they are appended in arrival order and never
   parsed before the stream has closed.
9. The first non-empty ``finish_reason`` of a choice is kept (``""`` means null); a chunk's
   delta is applied before its finish_reason.
10. ``usage``: the last non-null value is kept.
11. A legacy ``function_call`` delta without ``tool_calls`` is a ``MalformedChunkError`` (not
    supported yet); one mirroring ``tool_calls`` in the same delta is ignored.

Close rules (``check_finish`` then ``build_turns``), per choice in index order:

12. No finish_reason: ``StreamInterruptedError``, unless ``require_finish_reason=False``.
13. ``length`` with a tool call: ``TruncatedToolCallError`` (never repaired); with prose only
    the turn is emitted with ``finish_reason="length"``. ``content_filter``:
    ``ContentFilteredError``. ``error``: ``ProviderError``. ``stop`` and ``tool_calls`` emit
    (``stop`` keeps the calls: OpenAI sends it when ``tool_choice`` forces a function).
14. Every call needs a name and an id; its arguments are parsed once and must be exactly one
    JSON object (no ``NaN``/``Infinity``, no number that overflows to infinity): text ending
    inside a value is a ``TruncatedToolCallError`` whatever the finish_reason says, anything
    else an ``InvalidArgumentsError``.
15. Everything is computed before anything is returned: all calls of all choices, or one error.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ._errors import (
    RETRY_HINT,
    ContentFilteredError,
    InvalidArgumentsError,
    LimitExceededError,
    MalformedChunkError,
    MultipleChoicesError,
    ProviderError,
    StreamInterruptedError,
    TruncatedToolCallError,
    UnknownToolError,
    excerpt,
    provider_error,
)
from ._policy import DEFAULT, Policy, PolicyName, named_policy
from ._types import AssistantTurn, ChoiceEnd, StreamEnd, ToolCall, ToolCallBuffer, ToolCallStarted

__all__ = [
    "Assembler",
    "TurnReader",
    "build_turns",
    "check_finish",
    "every_turn",
    "resolve_policy",
    "single_turn",
]

_NO_EVENTS: tuple[ToolCallStarted, ...] = ()
_NOTHING_KEPT = io.StringIO()
_ABSENT = object()
# Characters a call may take on the fast path between two exact limit checks. A grant is
# reserved from the turn's budget, so the fast path updates one counter per piece.
_GRANT = 1 << 16
# Choice index 0 is recognised by identity: CPython keeps one object per small int, so the
# one test also tells 0 from 0.0 and False (another int object 0 takes the general lookup).
_ZERO = 0
# Indices are opaque, but bounded: every message formats them.
_MIN_INDEX = -(1 << 63)
_MAX_INDEX = (1 << 63) - 1


def _discard(_piece: str) -> None:
    """Drop an argument piece nobody keeps (progress only, or a group nobody subscribed to)."""


class Call:
    """Mutable state of one tool call while the stream is open."""

    __slots__ = (
        "announced",
        "choice_index",
        "end",
        "id",
        "index",
        "name",
        "object_payload",
        "order",
        "room",
        "seen",
        "sink",
        "text",
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
        # What was received so far, kept only when resends must be recognised.
        self.seen: io.StringIO | None = None
        # A StringIO appends as fast as list.append but lets each piece go at once: a list
        # kept ~7.5x the argument bytes alive on 1M 4-character pieces, StringIO 2x.
        # Readers that route pieces elsewhere (an Rx group) or drop them share one empty
        # buffer that nothing writes to: thousands of concurrent turns allocate less.
        self.text = io.StringIO() if keep_arguments else _NOTHING_KEPT
        # The hot path calls ``sink`` once per piece: the buffer's write by default, a
        # group's push when an Rx operator routes the pieces to an inner stream.
        self.sink: Callable[[str], object] = self.text.write if keep_arguments else _discard

    @property
    def size(self) -> int:
        """Characters of arguments received so far."""
        return self.end - self.room

    def buffer(self) -> ToolCallBuffer:
        """The pieces received so far, joined (one copy, at the end)."""
        return ToolCallBuffer(
            self.choice_index,
            self.index,
            self.id,
            self.name,
            self.type,
            self.text.getvalue(),
            self.order,
        )


class _Choice:
    __slots__ = (
        "calls",
        "content",
        "every",
        "finish_reason",
        "index",
        "legacy_arguments",
        "legacy_name",
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
        self.legacy_arguments: io.StringIO | None = None
        # Created on the first piece: None means "never sent", unlike "".
        self.content: io.StringIO | None = None
        self.refusal: io.StringIO | None = None
        self.reasoning: io.StringIO | None = None
        self.finish_reason: str | None = None

    def end(self) -> ChoiceEnd:
        return ChoiceEnd(
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
        )


def _attr(obj: object, name: str, default: object = None) -> Any:
    """Read an attribute of a chunk object; whatever its reading raises is a bad chunk."""
    try:
        return getattr(obj, name, default)
    except Exception as exc:
        raise MalformedChunkError(
            f"reading {name!r} of a {type(obj).__name__} raised {type(exc).__name__}"
        ) from exc


def _get(obj: object, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return _attr(obj, name)


def _extra(obj: object, name: str) -> Any:
    """Read a field that a typed model may hold as an extra (pydantic ``extra="allow"``)."""
    if isinstance(obj, dict):
        return obj.get(name)
    extra = _attr(obj, "__pydantic_extra__", _ABSENT)
    if extra is _ABSENT:
        return _attr(obj, name)
    if isinstance(extra, dict) and name in extra:
        return extra[name]
    # A declared field, or nothing: pydantic's own lookup of a missing name is slow.
    fields = _attr(type(obj), "model_fields")
    return _attr(obj, name) if fields is None or name in fields else None


def _as_dict(value: object) -> dict[str, Any]:
    if type(value) is dict:
        return value
    dump = _attr(value, "model_dump")
    if callable(dump):
        try:
            dumped = dump(exclude_unset=True)
        except Exception as exc:
            raise MalformedChunkError(f"usage.model_dump() raised {type(exc).__name__}") from exc
        if type(dumped) is dict:
            return dumped
    raise MalformedChunkError(f"usage must be an object, got {type(value).__name__}")


def _where(choice_index: int, index: int | None, name: str | None) -> str:
    where = f"tool call {excerpt(index)}" if index is not None else "a tool call"
    if name:
        where += f" ({name if len(name) <= 64 else excerpt(name, 64)})"
    if choice_index:
        where += f" of choice {excerpt(choice_index)}"
    return where


def _where_buffer(buffer: ToolCallBuffer) -> str:
    return _where(buffer.choice_index, buffer.index, buffer.name)


def _at(call: Call) -> dict[str, Any]:
    """Where an error about ``call`` happened, for its diagnostics."""
    return {
        "choice_index": call.choice_index,
        "index": call.index,
        "name": call.name,
        "received": call.size,
    }


def _at_buffer(buffer: ToolCallBuffer, finish_reason: str | None) -> dict[str, Any]:
    """Where an error about a closed buffer happened, for its diagnostics."""
    return {
        "choice_index": buffer.choice_index,
        "index": buffer.index,
        "name": buffer.name,
        "received": len(buffer.arguments),
        "finish_reason": finish_reason,
    }


class TurnReader:
    """Reads chunks into per-(choice, index) call slots and per-choice text (rules 1-11).

    ``on_open`` is called with each new call before its first argument piece; it may replace
    the call's ``sink``. ``keep_arguments=False`` drops the pieces (progress only). With
    ``on_error``, ``feed`` never raises: it passes the first error there, returns no events,
    and stops. A stopped reader (``stop()``) ignores every chunk, so an Rx stage can
    subscribe ``feed`` directly.
    """

    __slots__ = (
        "_budget",
        "_calls0",
        "_choices",
        "_closed",
        "_fast",
        "_keep",
        "_max_call",
        "_max_identifier",
        "_named",
        "_on_error",
        "_on_open",
        "_opened",
        "_policy",
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
        self._choices: dict[int, _Choice] = {}
        # Choice 0's calls, read directly by the fast path (nearly every stream has one choice).
        self._calls0: dict[int, Call] = {}
        self._on_open = on_open
        self._on_error = on_error
        self._keep = keep_arguments
        self._named = 0
        self._opened = 0
        self._max_call = policy.limits.max_call_arguments
        self._budget = policy.limits.max_turn_arguments
        self._text_room = policy.limits.max_text
        self._max_identifier = policy.limits.max_identifier
        # The fast path only counts; recoveries that inspect pieces take the full path.
        self._fast = not policy.needs_piece_checks
        self._stopped = False
        self._closed = False
        self.usage: dict[str, Any] | None = None
        self.normalizations: dict[str, int] = {}

    def stop(self) -> None:
        """Ignore every later chunk (the subscription ended)."""
        self._stopped = True
        self._fast = False

    # -- feeding -------------------------------------------------------------------------

    def feed(self, chunk: object) -> Sequence[ToolCallStarted]:
        """Apply one chunk; return the calls it named (usually none).

        Raises ``MalformedChunkError`` or ``ProviderError`` (reports them, given ``on_error``).
        """
        # Fast path for the bulk of a stream, one bare argument piece of a known call:
        # {"choices": [{"index": c, "delta": {"tool_calls": [{"index": i, "function":
        # {"arguments": s}}]}}]}. It can break no rule; anything else takes the full path.
        if self._fast:
            call = None
            if type(chunk) is dict:
                # Reads first, then one test of everything read; any surprise (a missing key,
                # another shape or type) leaves for the full path, which reports it. Nested
                # dicts are read by key without a type check each (measured ~10% of the path).
                try:
                    choices = chunk["choices"]
                    (choice,) = choices
                    delta = choice["delta"]
                    entries = delta["tool_calls"]
                    (entry,) = entries
                    fn = entry["function"]
                    piece = fn["arguments"]
                    index = entry["index"]
                    ci = choice["index"]
                    if (
                        len(delta) == 1
                        and len(entry) == 2
                        and len(fn) == 1
                        and not choice["finish_reason"]
                        and "error" not in chunk
                        and ("usage" not in chunk or chunk["usage"] is None)
                        and type(piece) is str
                        and type(index) is int
                        and type(choices) is list
                        and type(entries) is list
                    ):
                        if ci is _ZERO:
                            call = self._calls0[index]
                        elif type(ci) is int:
                            call = self._choices[ci].calls[index]
                except Exception:  # noqa: BLE001 - the full path reads it again and reports
                    pass
            else:
                # The same for pydantic models (the openai SDK's ChatCompletionChunk). Their
                # field values live in ``__dict__``: one attribute read per object, then dict
                # reads (an attribute read of a model costs about three). Extra keys (an
                # in-band error, reasoning) are not fields: those chunks take the full path.
                # The last type tests and the lookup repeat the dict branch's: one shared
                # test after both branches measured ~2.5% slower per chunk.
                try:
                    if not chunk.__pydantic_extra__ and chunk.usage is None:  # type: ignore[attr-defined]
                        choices = chunk.choices  # type: ignore[attr-defined]
                        (choice,) = choices
                        choice_fields = choice.__dict__
                        delta = choice_fields["delta"]
                        ci = choice_fields["index"]
                        delta_fields = delta.__dict__
                        entries = delta_fields["tool_calls"]
                        (entry,) = entries
                        entry_fields = entry.__dict__
                        index = entry_fields["index"]
                        fn_fields = entry_fields["function"].__dict__
                        piece = fn_fields["arguments"]
                        if (
                            not choice_fields["finish_reason"]
                            and delta_fields["content"] is None
                            and delta_fields["refusal"] is None
                            and delta_fields["function_call"] is None
                            and not delta.__pydantic_extra__
                            and entry_fields["id"] is None
                            and entry_fields["type"] is None
                            and fn_fields["name"] is None
                            and type(piece) is str
                            and type(index) is int
                            and type(choices) is list
                            and type(entries) is list
                        ):
                            if ci is _ZERO:
                                call = self._calls0[index]
                            elif type(ci) is int:
                                call = self._choices[ci].calls[index]
                except Exception:  # noqa: BLE001 - the full path reads it again and reports
                    pass
            if call is not None:
                # Within the call's grant, no limit can be passed; past it, the full path
                # checks the limits exactly and grants more.
                room = call.room - len(piece)
                if room >= 0:
                    call.room = room
                    # Outside the reads' try: an error of the sink is the sink's own.
                    try:
                        call.sink(piece)
                    except Exception as error:  # noqa: BLE001 - raised or reported, never lost
                        self._report(error)
                    return _NO_EVENTS
        if self._stopped:
            if self._closed:
                raise RuntimeError(
                    "feed() after close(): an Assembler reads one turn; make a new one"
                )
            return _NO_EVENTS
        if self._on_error is None:
            return self._feed(chunk)
        try:
            return self._feed(chunk)
        except Exception as error:  # noqa: BLE001 - reported, never lost
            self._report(error)
            return _NO_EVENTS

    def _report(self, error: Exception) -> None:
        """Raise ``error``, or stop and pass it to ``on_error``: once, whatever comes later."""
        on_error = self._on_error
        if on_error is None:
            raise error
        self.stop()
        on_error(error)

    def _feed(self, chunk: object) -> Sequence[ToolCallStarted]:
        events: list[ToolCallStarted] | None = None
        if isinstance(chunk, dict):
            choices = chunk.get("choices")
            if ("error" in chunk and chunk["error"] is not None) or (
                not choices and chunk.get("object") == "error"
            ):
                self._raise_provider_error(chunk)
            usage = chunk.get("usage")
        else:
            if chunk is None or isinstance(chunk, str | bytes | int | float | list | tuple):
                raise MalformedChunkError(f"a chunk must be an object, got {type(chunk).__name__}")
            choices = _attr(chunk, "choices")
            if _extra(chunk, "error") is not None:
                self._raise_provider_error(chunk)
            usage = _attr(chunk, "usage")
        if usage is not None:
            self.usage = _as_dict(usage)
        if not choices:
            return _NO_EVENTS
        if type(choices) is not list and type(choices) is not tuple:
            raise MalformedChunkError(f"choices must be a list, got {type(choices).__name__}")
        for choice in choices:
            if isinstance(choice, dict):
                ci = choice.get("index", 0)
                delta = choice.get("delta")
                finish = choice.get("finish_reason")
            elif choice is None or isinstance(choice, str | bytes | int | float | list):
                raise MalformedChunkError(
                    f"a choice must be an object, got {type(choice).__name__}"
                )
            else:
                ci = _attr(choice, "index", 0)
                delta = _attr(choice, "delta")
                finish = _attr(choice, "finish_reason")
            if ci is None:
                ci = 0
            state = self._choices.get(ci) if type(ci) is int else None
            if state is None:
                if type(ci) is not int or not _MIN_INDEX <= ci <= _MAX_INDEX:
                    raise MalformedChunkError(
                        f"choice index must be an int of at most 64 bits, got {excerpt(ci)}"
                    )
                if len(self._choices) >= self._policy.limits.max_choices:
                    limit = self._policy.limits.max_choices
                    raise LimitExceededError(
                        f"more than {limit} choices in one stream (Limits.max_choices)",
                        limit="max_choices",
                        value=limit,
                        choice_index=ci,
                    )
                state = self._choices[ci] = _Choice(ci)
                if ci == 0:
                    self._calls0 = state.calls
            if delta:
                if isinstance(delta, dict):
                    named = self._dict_delta(state, delta)
                else:
                    named = self._object_delta(state, delta)
                if named:
                    if events is None:
                        events = named
                    else:
                        events.extend(named)
            if finish:
                if type(finish) is not str:
                    raise MalformedChunkError(
                        f"finish_reason must be a string, got {type(finish).__name__}"
                    )
                if state.finish_reason is None:
                    if len(finish) > self._max_identifier:
                        raise self._identifier_too_long(state, None, "finish_reason")
                    state.finish_reason = finish
        return _NO_EVENTS if events is None else events

    def _dict_delta(self, state: _Choice, delta: dict[str, Any]) -> list[ToolCallStarted] | None:
        named: list[ToolCallStarted] | None = None
        entries: list[Any] | None = None
        legacy: object = None
        for key, value in delta.items():
            if value is None:
                continue
            if key == "tool_calls":
                entries = value
                named = self._entries(state, value)
            elif key == "content":
                self._write(state, "content", key, value)
            elif key == "reasoning_content" or key == "reasoning":
                self._write(state, "reasoning", key, value)
            elif key == "refusal":
                self._write(state, "refusal", key, value)
            elif key == "function_call":
                legacy = value
        if legacy is not None:
            self._function_call(state, legacy, entries)
        return named

    def _object_delta(self, state: _Choice, delta: object) -> list[ToolCallStarted] | None:
        if isinstance(delta, str | bytes | int | float | list | tuple):
            raise MalformedChunkError(f"delta must be an object, got {type(delta).__name__}")
        entries = _attr(delta, "tool_calls")
        named = None if entries is None else self._entries(state, entries)
        for slot, key in (
            ("content", "content"),
            ("reasoning", "reasoning_content"),
            ("reasoning", "reasoning"),
            ("refusal", "refusal"),
        ):
            value = _extra(delta, key)
            if value is not None:
                self._write(state, slot, key, value)
        legacy = _attr(delta, "function_call")
        if legacy is not None:
            self._function_call(state, legacy, list(entries) if entries is not None else None)
        return named

    def _entries(self, state: _Choice, entries: object) -> list[ToolCallStarted] | None:
        """Apply a delta's ``tool_calls`` list, entry by entry in array order."""
        if type(entries) is not list and type(entries) is not tuple:
            raise MalformedChunkError(
                f"delta.tool_calls must be a list, got {type(entries).__name__}"
            )
        named: list[ToolCallStarted] | None = None
        for entry in entries:
            event = self._entry(state, entry)
            if event is not None:
                if named is None:
                    named = [event]
                else:
                    named.append(event)
        return named

    def _write(self, state: _Choice, slot: str, field: str, value: object) -> None:
        """Append a text piece (content, reasoning, refusal) to its per-choice buffer."""
        text = self._text(state, field, value)
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
        buffer = getattr(state, slot)
        if buffer is None:
            buffer = io.StringIO()
            setattr(state, slot, buffer)
        buffer.write(text)

    def _entry(self, state: _Choice, entry: object) -> ToolCallStarted | None:
        if state.legacy_name is not None or state.legacy_arguments is not None:
            raise MalformedChunkError(
                f"choice {state.index}: tool_calls after legacy function_call deltas; a turn "
                f"uses one or the other"
            )
        if isinstance(entry, dict):
            return self._fragment(
                state,
                entry.get("index"),
                "index" in entry,
                entry.get("id"),
                entry.get("type"),
                entry.get("function"),
            )
        if entry is None or isinstance(entry, str | bytes | int | float | list | tuple):
            raise MalformedChunkError(
                f"a tool_calls entry must be an object, got {type(entry).__name__}"
            )
        index = _attr(entry, "index")
        return self._fragment(
            state,
            index,
            index is not None,
            _attr(entry, "id"),
            _attr(entry, "type"),
            _attr(entry, "function"),
        )

    def _fragment(
        self,
        state: _Choice,
        index: object,
        has_index: bool,
        id: object,
        type_: object,
        fn: object,
    ) -> ToolCallStarted | None:
        """Apply one tool-call fragment (rules 5-8); return the start event if it named the call."""
        policy = self._policy
        if fn is None:
            name = piece = None
        elif isinstance(fn, str | bytes | int | float | list | tuple):
            raise MalformedChunkError(
                f"{_where(state.index, index if type(index) is int else None, None)}: "
                f"function must be an object, got {type(fn).__name__}"
            )
        else:
            name = _get(fn, "name")
            piece = _get(fn, "arguments")
        id = self._identity(state, index, "id", id)
        type_ = self._identity(state, index, "type", type_)
        name = self._identity(state, index, "name", name)
        if index is None:
            call = self._resolve_missing_index(state, id)
        elif type(index) is not int:
            raise MalformedChunkError(
                f"tool call index must be an int, got {excerpt(index)}"
                + ("" if has_index else " (no index)")
            )
        else:
            call = state.calls.get(index)
        if call is not None and id is not None and call.id is not None and call.id != id:
            # A new id on a busy index: another call reusing the index (item 2), or one call
            # whose id changed (item 6). Without a switch the fragment is ambiguous.
            if policy.split_reused_index and (
                name is not None or type_ is not None or not policy.keep_first_id
            ):
                self._count("split_reused_index")
                call = None
            elif policy.keep_first_id:
                self._count("kept_first_id")
                id = None
            else:
                raise MalformedChunkError(
                    f"{_where(state.index, call.index, call.name)}: id changed from "
                    f"{excerpt(call.id)} to {excerpt(id)} inside one call; the provider reused "
                    f"an index for another call or changed the id mid-call",
                    hint=("the lenient policy recovers either (split_reused_index, keep_first_id)"),
                    **_at(call),
                )
        event: ToolCallStarted | None = None
        if call is None:
            call = self._open(state, index if type(index) is int else None, id, type_, name)
            if name is not None:
                event = self._name_known(call)
        else:
            if id is not None and call.id is None:
                call.id = id
            if type_ is not None:
                if call.type is None:
                    call.type = type_
                elif call.type != type_:
                    raise MalformedChunkError(
                        f"{_where(state.index, call.index, call.name)}: type changed from "
                        f"{excerpt(call.type)} to {excerpt(type_)} inside one call",
                        **_at(call),
                    )
            if name is not None:
                if call.name is None:
                    call.name = name
                    event = self._name_known(call)
                elif call.name != name:
                    if not (policy.join_split_names and call.size == 0):
                        raise MalformedChunkError(
                            f"{_where(state.index, call.index, call.name)}: name {excerpt(name)} "
                            f"arrived after {excerpt(call.name)}; names are never concatenated",
                            hint=(
                                "the lenient policy (join_split_names) joins name fragments sent "
                                "before the arguments"
                            ),
                            **_at(call),
                        )
                    if len(call.name) + len(name) > self._max_identifier:
                        # Joining is bounded too: each piece copies at most this many.
                        raise self._identifier_too_long(state, call.index, "name")
                    self._count("joined_split_name")
                    # With the attribute cleared, the local holds the only reference and
                    # += grows the string in place (amortised linear, not a copy per piece).
                    joined = call.name
                    call.name = None
                    joined += name
                    call.name = joined
                    event = self._name_known(call)
        if piece is not None:
            self._piece(state, call, piece)
            if event is None and not call.announced and policy.join_split_names:
                event = self._name_known(call)
        return event

    def _open(
        self, state: _Choice, index: int | None, id: str | None, type_: str | None, name: str | None
    ) -> Call:
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
            index = self._next_index(state)
        elif not _MIN_INDEX <= index <= _MAX_INDEX:
            # Every message formats the index: Python refuses to format ints past 4300 digits.
            raise MalformedChunkError(
                f"choice {state.index}: tool call index must fit in 64 bits, got {excerpt(index)}",
                choice_index=state.index,
            )
        call = Call(state.index, index, len(state.every) + 1, id, type_, name, self._keep)
        self._grant(call, 0)
        if self._policy.drop_resent_arguments:
            call.seen = io.StringIO()
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
                try:
                    piece = json.dumps(piece, ensure_ascii=False, allow_nan=False)
                except (TypeError, ValueError, RecursionError) as exc:
                    # An int past 4300 digits, NaN, a nesting too deep to write.
                    raise MalformedChunkError(
                        f"{_where(state.index, call.index, call.name)}: the object arguments "
                        f"cannot be written as JSON ({type(exc).__name__})",
                        **_at(call),
                    ) from exc
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
        seen = call.seen
        if seen is not None and call.size and len(piece) >= call.size:
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
            self._budget += call.room
            call.room = 0
            call.end = size
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
        call.sink(piece)

    def _grant(self, call: Call, size: int) -> None:
        """Reserve the next characters ``call`` (now ``size`` long) may take on the fast path."""
        grant = min(_GRANT, self._max_call - size, self._budget)
        self._budget -= grant
        call.room = grant
        call.end = size + grant

    def _fits_turn(self, n: int) -> bool:
        """Whether ``n`` more characters fit the turn; reclaims every grant when short."""
        if n <= self._budget:
            return True
        for call in self._all_calls():
            self._budget += call.room
            call.end -= call.room
            call.room = 0
        return n <= self._budget

    def _name_known(self, call: Call) -> ToolCallStarted | None:
        """Check a (possibly partial) name; return the start event once it is final enough."""
        policy = self._policy
        name = call.name or ""
        tools = policy.tools
        if policy.join_split_names:
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
        self._named += 1
        return ToolCallStarted(call.index, call.id, name, self._named, call.choice_index)

    def _unknown(self, call: Call) -> UnknownToolError:
        tools = sorted(self._policy.tools or ())
        return UnknownToolError(
            f"{_where(call.choice_index, call.index, call.name)}: the model called a tool the "
            f"request did not declare; declared: {', '.join(tools) or 'none'}",
            **_at(call),
        )

    def _function_call(self, state: _Choice, legacy: object, entries: list[Any] | None) -> None:
        """Apply a legacy ``function_call`` delta, or check it mirrors this delta's tool_calls."""
        if isinstance(legacy, str | bytes | int | float | list | tuple):
            raise MalformedChunkError(
                f"choice {state.index}: function_call must be an object, got "
                f"{type(legacy).__name__}"
            )
        name = self._identity(state, None, "function_call.name", _get(legacy, "name"))
        piece = _get(legacy, "arguments")
        if piece is not None and not isinstance(piece, str):
            raise MalformedChunkError(
                f"choice {state.index}: function_call.arguments must be a string fragment, got "
                f"{type(piece).__name__}"
            )
        if entries is not None:
            # llama.cpp's server mirrors each tool-call fragment here: ignore a faithful copy.
            names = {_get(_get(e, "function") or {}, "name") for e in entries}
            names |= {call.name for call in state.calls.values()}
            pieces = "".join(
                p
                for e in entries
                if isinstance(p := _get(_get(e, "function") or {}, "arguments"), str)
            )
            if (name is not None and name not in names) or (piece and piece != pieces):
                raise MalformedChunkError(
                    f"choice {state.index}: the legacy function_call ({excerpt(name)}, "
                    f"{excerpt(piece)}) contradicts the tool_calls of the same delta",
                    choice_index=state.index,
                )
            self._count("ignored_function_call_mirror")
            return
        if state.calls:
            raise MalformedChunkError(
                f"choice {state.index}: a legacy function_call after tool_calls; a turn uses "
                f"one or the other",
                choice_index=state.index,
            )
        if name is not None:
            if state.legacy_name is None:
                state.legacy_name = name
            elif state.legacy_name != name:
                raise MalformedChunkError(
                    f"choice {state.index}: function_call name {excerpt(name)} arrived after "
                    f"{excerpt(state.legacy_name)}",
                    choice_index=state.index,
                    name=state.legacy_name,
                )
        if state.legacy_arguments is None:
            state.legacy_arguments = io.StringIO()
        if piece:
            size = state.legacy_arguments.tell() + len(piece)
            if size > self._max_call or not self._fits_turn(len(piece)):
                raise LimitExceededError(
                    f"choice {state.index}: the function_call arguments passed "
                    f"Limits.max_call_arguments or max_turn_arguments",
                    limit="max_call_arguments",
                    value=self._max_call,
                    choice_index=state.index,
                    name=state.legacy_name,
                    received=state.legacy_arguments.tell(),
                )
            self._budget -= len(piece)
            state.legacy_arguments.write(piece)

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

    def _resolve_missing_index(self, state: _Choice, id: str | None) -> Call | None:
        calls = state.calls
        if id is not None:
            for call in calls.values():
                if call.id == id:
                    return call
            return None
        if not calls:
            return None
        if len(calls) == 1:
            return next(iter(calls.values()))
        raise MalformedChunkError(
            f"a tool-call fragment of choice {state.index} has no index and no id, and "
            f"{len(calls)} calls are open: it could belong to any of them",
            choice_index=state.index,
        )

    @staticmethod
    def _next_index(state: _Choice) -> int:
        return max(state.calls) + 1 if state.calls else 0

    @staticmethod
    def _text(state: _Choice, field: str, value: object) -> str:
        if type(value) is not str:
            raise MalformedChunkError(
                f"choice {state.index}: delta.{field} must be a string, got {type(value).__name__}"
            )
        return value

    @staticmethod
    def _raise_provider_error(chunk: object) -> None:
        error = _extra(chunk, "error")
        source = error if error is not None else chunk
        message = _get(source, "message") if not isinstance(source, str) else source
        code = _get(source, "code") if not isinstance(source, str) else None
        if code is None and not isinstance(source, str):
            code = _get(source, "type")
        raise provider_error(message or source, code, source)

    # -- reading the state ---------------------------------------------------------------

    def finish_reason(self) -> str | None:
        """The finish_reason of the lowest choice, once sent (cheap: no copy)."""
        return self._choices[min(self._choices)].finish_reason if self._choices else None

    def content_size(self) -> int:
        """Characters of content received so far, over all choices (cheap: no copy)."""
        return sum(c.content.tell() for c in self._choices.values() if c.content is not None)

    def calls(self) -> list[Call]:
        """Every call opened so far, ordered by (choice index, index, order of opening)."""
        return sorted(self._all_calls(), key=lambda c: (c.choice_index, c.index, c.order))

    def _all_calls(self) -> list[Call]:
        return [call for state in self._choices.values() for call in state.every]

    def end(self) -> StreamEnd:
        """The per-choice text and finish state, ordered by choice index, and the usage."""
        return StreamEnd(
            tuple(self._choices[ci].end() for ci in sorted(self._choices)),
            self.usage,
            dict(self.normalizations),
        )

    def close_choices(self) -> tuple[AssistantTurn, ...]:
        """Return one turn per choice, ordered by choice index, or raise (rules 12-15).

        Once only: a second call, or ``feed`` after it, raises ``RuntimeError``.
        """
        if self._closed:
            raise RuntimeError("close() was already called: an Assembler reads one turn")
        self._closed = True
        self.stop()
        buffers = [call.buffer() for call in self.calls()]
        end = check_finish(self.end(), buffers, self._policy)
        return every_turn(build_turns(buffers, end, self._policy))


def check_finish(
    end: StreamEnd, calls: Sequence[ToolCallBuffer], policy: Policy = DEFAULT
) -> StreamEnd:
    """Apply the finish policy (rules 12-13) to every choice; raise the first violation.

    Returns ``end``, with the recoveries the policy applied added to its normalizations.
    """
    normalizations = dict(end.normalizations)
    for choice in end.choices:
        reason = choice.finish_reason
        where = f"choice {choice.index}: " if choice.index else ""
        mine = [c for c in calls if c.choice_index == choice.index]
        if choice.function_call is not None:
            mine.append(choice.function_call)
        last = max(mine, key=lambda c: (c.index, c.order)) if mine else None
        about: dict[str, Any] = {
            "choice_index": choice.index,
            "finish_reason": reason,
            "index": None if last is None else last.index,
            "name": None if last is None else last.name,
            "received": None if last is None else len(last.arguments),
        }
        if reason is None:
            if not policy.require_finish_reason:
                continue
            if policy.accept_clean_end:
                # Complete arguments are still required: build_turns parses every buffer.
                normalizations["accepted_missing_finish"] = (
                    normalizations.get("accepted_missing_finish", 0) + 1
                )
                continue
            raise StreamInterruptedError(
                f"{where}the stream ended without a finish_reason, so the turn may be cut off",
                hint=f"{RETRY_HINT}; a provider that never sends one needs "
                f"require_finish_reason=False",
                **about,
            )
        if reason == "length":
            if last is not None:
                raise TruncatedToolCallError(
                    f"{_where(choice.index, last.index, last.name)}: finish_reason 'length' "
                    f"while a tool call was open, after {len(last.arguments):,} argument "
                    f"characters: the token limit cut it off (never repaired)",
                    hint="raise max_tokens and retry the request",
                    **about,
                )
        elif reason == "content_filter":
            raise ContentFilteredError(
                f"{where}the provider's content filter stopped the turn "
                f"(finish_reason 'content_filter'); nothing was emitted",
                **about,
            )
        elif reason == "error":
            raise ProviderError(
                f"{where}the provider ended the choice with finish_reason 'error'; "
                f"nothing was emitted",
                choice_index=choice.index,
                finish_reason=reason,
            )
        elif reason == "tool_calls" and last is None:
            if not policy.accept_tool_calls_finish_without_calls:
                raise MalformedChunkError(
                    f"{where}finish_reason 'tool_calls' but no tool call was streamed: calls "
                    f"may have been lost",
                    hint=(
                        "retry the request; the lenient policy "
                        "(accept_tool_calls_finish_without_calls) accepts it"
                    ),
                    **about,
                )
            normalizations["tool_calls_finish_without_calls"] = (
                normalizations.get("tool_calls_finish_without_calls", 0) + 1
            )
    if normalizations == end.normalizations:
        return end
    return StreamEnd(end.choices, end.usage, normalizations)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_INFINITY = float("inf")


def _finite_float(text: str) -> float:
    # 1e999 (or 400 digits) is valid JSON text but parses to infinity, which no tool can use
    # and json.dumps would write back as the non-JSON token Infinity.
    value = float(text)
    if value == _INFINITY or value == -_INFINITY:
        raise ValueError("a number is too large for a double (it would parse to infinity)")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        repeated = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {excerpt(repeated)} appears twice in one object")
    return value


# A text that more characters could still turn into a JSON number: JSON's own grammar, ASCII
# digits only. Possessive quantifiers never backtrack, so a failed match is linear in its length
# (the old greedy pattern retried every split of a digit run: quadratic).
_OPEN_NUMBER = re.compile(r"-?(?:(?:0|[1-9][0-9]*+)(?:\.[0-9]*+|(?:\.[0-9]++)?[eE][-+]?[0-9]*+)?)?")
# The characters of a number token, read backwards from where the scanner stopped.
_NUMBER_RUN = re.compile(r"[-+.eE0-9]*+")
_LITERALS = ("true", "false", "null")


# One decoder each, made once: json.loads with hooks builds a new decoder on every call.
# Decoders keep no state between calls, so sharing them is safe.
_STRICT = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_UNIQUE_KEYS = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
)


def _ends_inside_value(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether the parser stopped because the text ran out, not because it was wrong.

    True when ``text`` (trailing whitespace aside) is the start of some valid JSON text.
    Linear in the length of the text (it runs only after a failed parse).
    """
    msg, pos = exc.msg, exc.pos
    if msg.startswith("Unterminated string"):
        return True
    if msg.startswith("Invalid \\uXXXX escape"):
        # A cut escape: at most four characters after its "\u" (the scanner wants one more
        # after a complete escape at the end), every one a hex digit.
        # (pos is at the backslash or at the "u", depending on the scanner.)
        start = text.rfind("\\u", max(0, pos - 1), pos + 2)
        digits = text[start + 2 :]
        return start >= 0 and len(digits) <= 4 and all(c in _HEX for c in digits)
    if msg == "Extra data" or msg.startswith("Invalid"):
        # A control character or an unknown escape inside a string: no text can mend it
        # (a control character may be whitespace, which the next step would strip).
        return False
    tail = text[pos:].rstrip()
    if not tail:
        return True
    if msg == "Expecting value" and len(tail) < 5 and any(t.startswith(tail) for t in _LITERALS):
        return True
    if msg == "Expecting value":
        # The scanner stops at the start of a number it cannot read yet ("-").
        token = tail
    else:
        # Or right after the part it accepted ("1" of "1.", "1.5" of "1.5e+"): the token
        # runs from the number's start to the end.
        run = _NUMBER_RUN.match(text[pos - 1 :: -1]).end() if pos else 0  # type: ignore[union-attr]
        if not run:
            return False
        token = text[pos - run :].rstrip()
    return token[:1] in _NUMBER_START and _OPEN_NUMBER.fullmatch(token) is not None


_HEX = frozenset("0123456789abcdefABCDEF")
_NUMBER_START = frozenset("-0123456789")


def _json_failure(exc: json.JSONDecodeError) -> str:
    # Some of the parser's messages end in "at" ("Invalid control character at").
    return f"{exc.msg.removesuffix(' at')} at character {exc.pos}"


def _depth(value: object, limit: int) -> bool:
    """Whether ``value`` nests containers deeper than ``limit`` (iterative, linear)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if type(item) is dict:
            stack.extend((v, depth + 1) for v in item.values() if type(v) in (dict, list))
        elif type(item) is list:
            stack.extend((v, depth + 1) for v in item if type(v) in (dict, list))
    return False


def _parse(buffer: ToolCallBuffer, policy: Policy, finish_reason: str | None) -> dict[str, Any]:
    text = buffer.arguments
    # The messages are built only on failure: on success this is one decode per call.
    if not text.strip():
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: no arguments were sent "
            f"(a call without parameters must send '{{}}')",
            **_at_buffer(buffer, finish_reason),
        )
    if text[0] == "\ufeff":
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments start "
            f"with a byte order mark, which JSON text must not have",
            **_at_buffer(buffer, finish_reason),
        )
    try:
        value = (_UNIQUE_KEYS if policy.reject_duplicate_keys else _STRICT).decode(text)
    except json.JSONDecodeError as exc:
        where = _where_buffer(buffer)
        if _ends_inside_value(text, exc):
            raise TruncatedToolCallError(
                f"{where}: the arguments end inside a JSON value ({_json_failure(exc)} of "
                f"{len(text)}): the call was cut off (never repaired)",
                hint=RETRY_HINT,
                **_at_buffer(buffer, finish_reason),
            ) from exc
        raise InvalidArgumentsError(
            f"{where}: the arguments are not valid JSON ({_json_failure(exc)}): the model "
            f"produced a malformed call",
            hint="retry the request: the model may well get it right the next time",
            **_at_buffer(buffer, finish_reason),
        ) from exc
    except RecursionError as exc:
        raise LimitExceededError(
            f"{_where_buffer(buffer)}: the arguments nest deeper than the JSON parser allows",
            limit="max_depth",
            value=policy.limits.max_depth,
            **_at_buffer(buffer, finish_reason),
        ) from exc
    except ValueError as exc:
        reason = str(exc)
        if "integer string conversion" in reason:
            # Python's own text names sys.set_int_max_str_digits: advice for the caller.
            reason = f"an integer has more than {sys.get_int_max_str_digits()} digits"
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments are not strict JSON ({reason})",
            **_at_buffer(buffer, finish_reason),
        ) from exc
    if type(value) is not dict:
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments must be "
            f"a JSON object, got {type(value).__name__}",
            **_at_buffer(buffer, finish_reason),
        )
    # Nesting can't exceed the number of opening brackets: counting them (in C) spares the
    # walk over the value for nearly every call.
    limit = policy.limits.max_depth
    if text.count("{") + text.count("[") > limit and _depth(value, limit):
        raise LimitExceededError(
            f"{_where_buffer(buffer)}: the arguments nest deeper than Limits.max_depth ({limit})",
            limit="max_depth",
            value=policy.limits.max_depth,
            **_at_buffer(buffer, finish_reason),
        )
    return value


def _complete(
    buffer: ToolCallBuffer, policy: Policy, finish_reason: str | None, count: Callable[[str], None]
) -> ToolCall:
    if buffer.name is None:
        raise MalformedChunkError(
            f"{_where_buffer(buffer)}: no function name was ever sent",
            choice_index=buffer.choice_index,
            index=buffer.index,
            received=len(buffer.arguments),
            finish_reason=finish_reason,
        )
    if policy.tools is not None and buffer.name not in policy.tools:
        raise UnknownToolError(
            f"{_where_buffer(buffer)}: the model called a tool the request did not declare; "
            f"declared: {', '.join(sorted(policy.tools)) or 'none'}",
            **_at_buffer(buffer, finish_reason),
        )
    call_id = buffer.id
    if call_id is None:
        if not policy.synthesize_missing_ids:
            raise MalformedChunkError(
                f"{_where_buffer(buffer)}: no id was ever sent, so no tool message could answer it",
                hint="the lenient policy (synthesize_missing_ids) makes one up",
                **_at_buffer(buffer, finish_reason),
            )
        count("synthesized_id")
        call_id = f"call_rx_{buffer.choice_index}_{buffer.index}_{buffer.order}"
    parsed = _parse(buffer, policy, finish_reason)
    schema = policy.tools.get(buffer.name) if policy.tools is not None else None
    if schema is not None and policy.validate_arguments:
        _validate(buffer, parsed, schema, finish_reason)
    return ToolCall(
        buffer.index, call_id, buffer.name, buffer.arguments, parsed, buffer.type or "function"
    )


def _validate(
    buffer: ToolCallBuffer, value: dict[str, Any], schema: Any, finish_reason: str | None
) -> None:
    import jsonschema  # the "schema" extra; Policy checks it is installed

    try:
        error = jsonschema.exceptions.best_match(
            jsonschema.validators.validator_for(schema)(schema).iter_errors(value)
        )
    except RecursionError as exc:
        # Policy refuses a schema that recurses on any value; this one recursed on this value.
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments nest too deep to check against the "
            f"tool's JSON schema",
            **_at_buffer(buffer, finish_reason),
        ) from exc
    if error is not None:
        raise InvalidArgumentsError(
            f"{_where_buffer(buffer)}: the arguments do not match the tool's JSON schema "
            f"at {error.json_path[:64]}{'…' if len(error.json_path) > 64 else ''}: "
            f"{_schema_failure(error)}",
            **_at_buffer(buffer, finish_reason),
        )


def _schema_failure(error: Any) -> str:
    """What a schema error says, without the value itself (it may hold a secret)."""
    kind = type(error.instance).__name__
    keyword = error.validator
    if keyword == "type":
        return f"a value of type {kind} is not of type {excerpt(error.validator_value, 40)}"
    if keyword == "required":
        missing = [p for p in error.validator_value if p not in error.instance]
        return f"{excerpt(missing[0] if missing else '?', 40)} is a required property"
    return f"a value of type {kind} fails {excerpt(keyword)} ({excerpt(error.validator_value, 40)})"


def build_turns(
    buffers: Sequence[ToolCallBuffer], end: StreamEnd, policy: Policy = DEFAULT
) -> tuple[AssistantTurn, ...]:
    """Parse every buffer once and build one turn per choice (rules 14-15), or raise."""
    normalizations = dict(end.normalizations)

    def count(name: str) -> None:
        normalizations[name] = normalizations.get(name, 0) + 1

    finish = {choice.index: choice.finish_reason for choice in end.choices}
    by_choice: dict[int, list[ToolCall]] = {}
    for buffer in sorted(buffers, key=lambda b: (b.choice_index, b.index, b.order)):
        call = _complete(buffer, policy, finish.get(buffer.choice_index), count)
        by_choice.setdefault(buffer.choice_index, []).append(call)
    legacy: dict[int, ToolCall] = {}
    for choice in end.choices:
        if choice.function_call is not None:
            buffer = choice.function_call
            if buffer.name is None:
                raise MalformedChunkError(
                    f"choice {choice.index}: the legacy function_call never got a name",
                    choice_index=choice.index,
                    finish_reason=choice.finish_reason,
                )
            legacy[choice.index] = ToolCall(
                0, "", buffer.name, buffer.arguments, _parse(buffer, policy, choice.finish_reason)
            )
    return tuple(
        AssistantTurn(
            content=choice.content,
            tool_calls=tuple(by_choice.get(choice.index, ())),
            finish_reason=choice.finish_reason,
            refusal=choice.refusal,
            reasoning=choice.reasoning,
            usage=end.usage,
            choice_index=choice.index,
            function_call=legacy.get(choice.index),
            normalizations=normalizations,
        )
        for choice in end.choices
    )


def every_turn(turns: tuple[AssistantTurn, ...]) -> tuple[AssistantTurn, ...]:
    """All turns, one per choice; a stream without any choice is an interruption."""
    if not turns:
        raise StreamInterruptedError(
            "the stream completed without any choice: no turn to assemble",
            hint=(
                "retry the request; if the chunks were read by another subscriber first "
                "(share() over a synchronous source), use assemble_with_progress()"
            ),
        )
    return turns


def single_turn(turns: tuple[AssistantTurn, ...]) -> AssistantTurn:
    """The only turn of a single-choice stream (an empty stream is an interruption)."""
    if len(every_turn(turns)) == 1:
        return turns[0]
    raise MultipleChoicesError(
        f"the stream carries {len(turns)} choices (n>1) and this operator returns one",
        hint="assemble_choices() returns every choice atomically",
    )


def resolve_policy(
    policy: Policy | PolicyName | None, require_finish_reason: bool | None
) -> Policy:
    """``policy`` (``DEFAULT`` when None, or a name) with the ``require_finish_reason`` shortcut.

    Raises ``TypeError`` (``ValueError`` for an unknown name) at once for anything else.
    """
    chosen = named_policy(policy)
    if require_finish_reason is not None and type(require_finish_reason) is not bool:
        raise TypeError(
            f"require_finish_reason must be a bool or None, got "
            f"{type(require_finish_reason).__name__}"
        )
    if require_finish_reason is None or require_finish_reason == chosen.require_finish_reason:
        return chosen
    return replace(chosen, require_finish_reason=require_finish_reason)


class Assembler(TurnReader):
    """Sans-IO assembler: ``feed`` chunks, then ``close`` for the turn or one typed error.

    >>> a = Assembler()
    >>> a.feed({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]})
    ()
    >>> a.close().content
    'Hi'

    ``feed(chunk)`` applies one chunk and returns a ``ToolCallStarted`` for every call it
    named (it is the reader's own method: no extra call per chunk). Cost: O(1) per fragment,
    one copy and one ``json.loads`` per call at ``close``.
    """

    __slots__ = ()

    def __init__(
        self,
        policy: Policy | PolicyName | None = None,
        *,
        require_finish_reason: bool | None = None,
    ) -> None:
        super().__init__(resolve_policy(policy, require_finish_reason))

    def close(self) -> AssistantTurn:
        """Return the turn of a single-choice stream, or raise."""
        return single_turn(self.close_choices())
