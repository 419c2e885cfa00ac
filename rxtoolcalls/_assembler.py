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
    JSON object (no ``NaN``/``Infinity``): text ending inside a value is a
    ``TruncatedToolCallError`` whatever the finish_reason says, anything else an
    ``InvalidArgumentsError``.
15. Everything is computed before anything is returned: all calls of all choices, or one error.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from ._errors import (
    ContentFilteredError,
    InvalidArgumentsError,
    MalformedChunkError,
    MultipleChoicesError,
    ProviderError,
    StreamInterruptedError,
    TruncatedToolCallError,
)
from ._types import AssistantTurn, ChoiceEnd, StreamEnd, ToolCall, ToolCallBuffer, ToolCallStarted

__all__ = [
    "Assembler",
    "TurnReader",
    "build_turns",
    "check_finish",
    "every_turn",
    "single_turn",
]

_NO_EVENTS: tuple[ToolCallStarted, ...] = ()
_ABSENT = object()


def _discard(_piece: str) -> None:
    """Drop an argument piece (readers that only report progress)."""


class Call:
    """Mutable state of one tool call while the stream is open."""

    __slots__ = ("choice_index", "id", "index", "name", "sink", "text", "type")

    def __init__(
        self,
        choice_index: int,
        index: int,
        id: str | None,
        type: str | None,
        name: str | None,
        keep_arguments: bool,
    ) -> None:
        self.choice_index = choice_index
        self.index = index
        self.id = id
        self.type = type
        self.name = name
        # A StringIO appends as fast as list.append but lets each piece go at once: a list
        # kept ~7.5x the argument bytes alive on 1M 4-character pieces, StringIO 2x.
        self.text = io.StringIO()
        # The hot path calls ``sink`` once per piece: the buffer's write by default, a
        # group's push when an Rx operator routes the pieces to an inner stream.
        self.sink: Callable[[str], object] = self.text.write if keep_arguments else _discard

    def buffer(self) -> ToolCallBuffer:
        """The pieces received so far, joined (one copy, at the end)."""
        return ToolCallBuffer(
            self.choice_index, self.index, self.id, self.name, self.type, self.text.getvalue()
        )


class _Choice:
    __slots__ = ("calls", "content", "finish_reason", "index", "reasoning", "refusal")

    def __init__(self, index: int) -> None:
        self.index = index
        self.calls: dict[int, Call] = {}
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
        )


def _get(obj: object, name: str) -> Any:
    if type(obj) is dict:
        return obj.get(name)
    return getattr(obj, name, None)


def _extra(obj: object, name: str) -> Any:
    """Read a field a typed model may hold only as an extra (pydantic ``extra="allow"``)."""
    if type(obj) is dict:
        return obj.get(name)
    extra = getattr(obj, "__pydantic_extra__", None)
    if type(extra) is dict:
        return extra.get(name)
    return getattr(obj, name, None)


def _as_dict(value: object) -> dict[str, Any]:
    if type(value) is dict:
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_unset=True)
        if type(dumped) is dict:
            return dumped
    raise MalformedChunkError(f"usage must be an object, got {type(value).__name__}")


def _where(choice_index: int, index: int | None, name: str | None) -> str:
    where = f"tool call {index}" if index is not None else "a tool call"
    if name:
        where += f" ({name})"
    if choice_index:
        where += f" of choice {choice_index}"
    return where


class TurnReader:
    """Reads chunks into per-(choice, index) call slots and per-choice text (rules 1-11).

    ``on_open`` is called with each new call before its first argument piece; it may replace
    the call's ``sink``. ``keep_arguments=False`` drops the pieces (progress only).
    """

    __slots__ = ("_choices", "_keep", "_named", "_on_open", "usage")

    def __init__(
        self,
        *,
        on_open: Callable[[Call], None] | None = None,
        keep_arguments: bool = True,
    ) -> None:
        self._choices: dict[int, _Choice] = {}
        self._on_open = on_open
        self._keep = keep_arguments
        self._named = 0
        self.usage: dict[str, Any] | None = None

    # -- feeding -------------------------------------------------------------------------

    def feed(self, chunk: object) -> Sequence[ToolCallStarted]:
        """Apply one chunk; return the calls it named (usually none).

        Raises ``MalformedChunkError`` or ``ProviderError``.
        """
        # Fast path for the bulk of a stream, one bare argument piece of a known call:
        # {"choices": [{"index": c, "delta": {"tool_calls": [{"index": i, "function":
        # {"arguments": s}}]}}]}. It can break no rule; anything else takes the full path.
        if type(chunk) is dict:
            # Reads only; any surprise (a missing key, another type) leaves for the full path,
            # which reports it. The type checks come last, before anything is written.
            try:
                choices = chunk["choices"]
                if (
                    len(choices) == 1
                    and "error" not in chunk
                    and ("usage" not in chunk or chunk["usage"] is None)
                ):
                    choice = choices[0]
                    delta = choice["delta"]
                    if len(delta) == 1 and not choice["finish_reason"]:
                        entries = delta["tool_calls"]
                        if len(entries) == 1:
                            entry = entries[0]
                            fn = entry["function"]
                            if len(entry) == 2 and len(fn) == 1:
                                piece = fn["arguments"]
                                index = entry["index"]
                                ci = choice["index"]
                                if (
                                    type(piece) is str
                                    and type(index) is int
                                    and type(ci) is int
                                    and type(choices) is list
                                    and type(choice) is dict
                                    and type(delta) is dict
                                    and type(entries) is list
                                    and type(entry) is dict
                                    and type(fn) is dict
                                ):
                                    self._choices[ci].calls[index].sink(piece)
                                    return _NO_EVENTS
            except (KeyError, TypeError, IndexError):
                pass
        elif getattr(chunk, "__pydantic_extra__", _ABSENT) is not _ABSENT:
            # The same fast path for typed models (the openai SDK's ChatCompletionChunk);
            # a missing attribute means another shape, which the full path reads.
            try:
                choices = chunk.choices  # type: ignore[attr-defined]
                if (
                    type(choices) is list
                    and len(choices) == 1
                    and chunk.usage is None  # type: ignore[attr-defined]
                    and not chunk.__pydantic_extra__  # type: ignore[attr-defined]
                ):
                    choice = choices[0]
                    delta = choice.delta
                    entries = delta.tool_calls
                    if (
                        not choice.finish_reason
                        and type(entries) is list
                        and len(entries) == 1
                        and delta.content is None
                        and delta.refusal is None
                        and delta.function_call is None
                        and not delta.__pydantic_extra__
                    ):
                        entry = entries[0]
                        fn = entry.function
                        index = entry.index
                        ci = choice.index
                        if (
                            entry.id is None
                            and entry.type is None
                            and fn is not None
                            and fn.name is None
                            and type(index) is int
                            and type(ci) is int
                        ):
                            piece = fn.arguments
                            state = self._choices.get(ci)
                            if state is not None and type(piece) is str:
                                call = state.calls.get(index)
                                if call is not None:
                                    call.sink(piece)
                                    return _NO_EVENTS
            except AttributeError:
                pass
        return self._feed(chunk)

    def _feed(self, chunk: object) -> Sequence[ToolCallStarted]:
        events: list[ToolCallStarted] | None = None
        if type(chunk) is dict:
            choices = chunk.get("choices")
            if ("error" in chunk and chunk["error"] is not None) or (
                not choices and chunk.get("object") == "error"
            ):
                self._raise_provider_error(chunk)
            usage = chunk.get("usage")
        else:
            if chunk is None or isinstance(chunk, str | bytes | int | float | list | tuple):
                raise MalformedChunkError(f"a chunk must be an object, got {type(chunk).__name__}")
            choices = getattr(chunk, "choices", None)
            if _extra(chunk, "error") is not None:
                self._raise_provider_error(chunk)
            usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = _as_dict(usage)
        if not choices:
            return _NO_EVENTS
        if type(choices) is not list and type(choices) is not tuple:
            raise MalformedChunkError(f"choices must be a list, got {type(choices).__name__}")
        for choice in choices:
            if type(choice) is dict:
                ci = choice.get("index", 0)
                delta = choice.get("delta")
                finish = choice.get("finish_reason")
            elif choice is None or isinstance(choice, str | bytes | int | float | list):
                raise MalformedChunkError(
                    f"a choice must be an object, got {type(choice).__name__}"
                )
            else:
                ci = getattr(choice, "index", 0)
                delta = getattr(choice, "delta", None)
                finish = getattr(choice, "finish_reason", None)
            if ci is None:
                ci = 0
            state = self._choices.get(ci) if type(ci) is int else None
            if state is None:
                if type(ci) is not int:
                    raise MalformedChunkError(f"choice index must be an int, got {ci!r}")
                state = self._choices[ci] = _Choice(ci)
            if delta:
                if type(delta) is dict:
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
                    state.finish_reason = finish
        return _NO_EVENTS if events is None else events

    def _dict_delta(self, state: _Choice, delta: dict[str, Any]) -> list[ToolCallStarted] | None:
        named: list[ToolCallStarted] | None = None
        legacy = False
        mirrored = False
        for key, value in delta.items():
            if value is None:
                continue
            if key == "tool_calls":
                if type(value) is not list:
                    raise MalformedChunkError(
                        f"delta.tool_calls must be a list, got {type(value).__name__}"
                    )
                mirrored = True
                calls = state.calls
                for entry in value:
                    if type(entry) is dict:
                        # Fast path: a bare continuation {"index": i, "function": {"arguments": s}}
                        # skips the identity rules, which it cannot break.
                        index = entry.get("index")
                        fn = entry.get("function")
                        if (
                            type(index) is int
                            and len(entry) == 2
                            and type(fn) is dict
                            and len(fn) == 1
                        ):
                            call = calls.get(index)
                            piece = fn.get("arguments")
                            if call is not None and type(piece) is str:
                                call.sink(piece)
                                continue
                        event = self._fragment(
                            state,
                            index,
                            "index" in entry,
                            entry.get("id"),
                            entry.get("type"),
                            fn,
                        )
                    else:
                        event = self._object_fragment(state, entry)
                    if event is not None:
                        if named is None:
                            named = [event]
                        else:
                            named.append(event)
            elif key == "content":
                if state.content is None:
                    state.content = io.StringIO()
                state.content.write(self._text(state, "content", value))
            elif key == "reasoning_content" or key == "reasoning":
                if state.reasoning is None:
                    state.reasoning = io.StringIO()
                state.reasoning.write(self._text(state, key, value))
            elif key == "refusal":
                if state.refusal is None:
                    state.refusal = io.StringIO()
                state.refusal.write(self._text(state, "refusal", value))
            elif key == "function_call":
                legacy = True
        if legacy and not mirrored:
            self._legacy(state)
        return named

    def _object_delta(self, state: _Choice, delta: object) -> list[ToolCallStarted] | None:
        if isinstance(delta, str | bytes | int | float | list | tuple):
            raise MalformedChunkError(f"delta must be an object, got {type(delta).__name__}")
        named: list[ToolCallStarted] | None = None
        tool_calls = getattr(delta, "tool_calls", None)
        if tool_calls is not None:
            if type(tool_calls) is not list and type(tool_calls) is not tuple:
                raise MalformedChunkError(
                    f"delta.tool_calls must be a list, got {type(tool_calls).__name__}"
                )
            for entry in tool_calls:
                event = self._object_fragment(state, entry)
                if event is not None:
                    if named is None:
                        named = [event]
                    else:
                        named.append(event)
        content = getattr(delta, "content", None)
        if content is not None:
            if state.content is None:
                state.content = io.StringIO()
            state.content.write(self._text(state, "content", content))
        for key in ("reasoning_content", "reasoning"):
            value = _extra(delta, key)
            if value is not None:
                if state.reasoning is None:
                    state.reasoning = io.StringIO()
                state.reasoning.write(self._text(state, key, value))
        refusal = getattr(delta, "refusal", None)
        if refusal is not None:
            if state.refusal is None:
                state.refusal = io.StringIO()
            state.refusal.write(self._text(state, "refusal", refusal))
        if getattr(delta, "function_call", None) is not None and tool_calls is None:
            self._legacy(state)
        return named

    def _object_fragment(self, state: _Choice, entry: object) -> ToolCallStarted | None:
        if entry is None or isinstance(entry, str | bytes | int | float | list | tuple):
            raise MalformedChunkError(
                f"a tool_calls entry must be an object, got {type(entry).__name__}"
            )
        index = _get(entry, "index")
        has_index = index is not None or (type(entry) is dict and "index" in entry)
        return self._fragment(
            state, index, has_index, _get(entry, "id"), _get(entry, "type"), _get(entry, "function")
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
                f"tool call index must be an int, got {index!r}"
                + ("" if has_index else " (no index)")
            )
        else:
            call = state.calls.get(index)
        event: ToolCallStarted | None = None
        if call is None:
            new_index = index if type(index) is int else self._next_index(state)
            call = Call(state.index, new_index, id, type_, name, self._keep)
            state.calls[new_index] = call
            if name is not None:
                event = self._started(call)
            if self._on_open is not None:
                self._on_open(call)
        else:
            if id is not None:
                if call.id is None:
                    call.id = id
                elif call.id != id:
                    raise MalformedChunkError(
                        f"{_where(state.index, call.index, call.name)}: id changed from "
                        f"{call.id!r} to {id!r} inside one call; the provider reused an index "
                        f"for another call or changed the id mid-call"
                    )
            if type_ is not None:
                if call.type is None:
                    call.type = type_
                elif call.type != type_:
                    raise MalformedChunkError(
                        f"{_where(state.index, call.index, call.name)}: type changed from "
                        f"{call.type!r} to {type_!r} inside one call"
                    )
            if name is not None:
                if call.name is None:
                    call.name = name
                    event = self._started(call)
                elif call.name != name:
                    raise MalformedChunkError(
                        f"{_where(state.index, call.index, call.name)}: name {name!r} arrived "
                        f"after {call.name!r}; names are never concatenated"
                    )
        if piece is not None:
            if not isinstance(piece, str):
                raise MalformedChunkError(
                    f"{_where(state.index, call.index, call.name)}: arguments must be a JSON "
                    f"string piece, got {type(piece).__name__}"
                )
            call.sink(piece)
        return event

    @staticmethod
    def _identity(state: _Choice, index: object, field: str, value: object) -> str | None:
        if value is None or value == "":
            return None
        if type(value) is not str:
            raise MalformedChunkError(
                f"{_where(state.index, index if type(index) is int else None, None)}: "
                f"{field} must be a string, got {type(value).__name__}"
            )
        return value

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
            f"{len(calls)} calls are open: it could belong to any of them"
        )

    @staticmethod
    def _next_index(state: _Choice) -> int:
        return max(state.calls) + 1 if state.calls else 0

    def _started(self, call: Call) -> ToolCallStarted:
        self._named += 1
        return ToolCallStarted(call.index, call.id, call.name or "", self._named, call.choice_index)

    @staticmethod
    def _text(state: _Choice, field: str, value: object) -> str:
        if type(value) is not str:
            raise MalformedChunkError(
                f"choice {state.index}: delta.{field} must be a string, got {type(value).__name__}"
            )
        return value

    @staticmethod
    def _legacy(state: _Choice) -> None:
        raise MalformedChunkError(
            f"choice {state.index}: legacy delta.function_call is not supported; "
            f"request tools instead of functions"
        )

    @staticmethod
    def _raise_provider_error(chunk: object) -> None:
        error = _extra(chunk, "error")
        source = error if error is not None else chunk
        message = _get(source, "message") if not isinstance(source, str) else source
        code = _get(source, "code") if not isinstance(source, str) else None
        if code is None and not isinstance(source, str):
            code = _get(source, "type")
        raise ProviderError(
            f"the provider reported an error inside the stream: {message or source!r} "
            f"(code {code!r}); nothing was emitted, the request can be retried",
            code=code,
            body=source,
        )

    # -- reading the state ---------------------------------------------------------------

    def calls(self) -> list[Call]:
        """Every call opened so far, ordered by (choice index, index)."""
        return [
            call
            for ci in sorted(self._choices)
            for _, call in sorted(self._choices[ci].calls.items())
        ]

    def end(self) -> StreamEnd:
        """The per-choice text and finish state, ordered by choice index, and the usage."""
        return StreamEnd(tuple(self._choices[ci].end() for ci in sorted(self._choices)), self.usage)


def check_finish(
    end: StreamEnd, calls: Sequence[ToolCallBuffer], *, require_finish_reason: bool = True
) -> None:
    """Apply the finish policy (rules 12-13) to every choice; raise the first violation."""
    for choice in end.choices:
        reason = choice.finish_reason
        where = f"choice {choice.index}: " if choice.index else ""
        if reason is None:
            if require_finish_reason:
                raise StreamInterruptedError(
                    f"{where}the stream ended without a finish_reason, so the turn may be cut "
                    f"off; retry, or pass require_finish_reason=False for a provider that "
                    f"never sends one",
                    choice_index=choice.index,
                )
        elif reason == "length":
            cut = [c for c in calls if c.choice_index == choice.index]
            if cut:
                last = max(cut, key=lambda c: c.index)
                raise TruncatedToolCallError(
                    f"{_where(choice.index, last.index, last.name)}: finish_reason 'length' "
                    f"while a tool call was open: the token limit cut it off; raise "
                    f"max_tokens and retry (never repaired)",
                    choice_index=choice.index,
                    index=last.index,
                    name=last.name,
                )
        elif reason == "content_filter":
            raise ContentFilteredError(
                f"{where}the provider's content filter stopped the turn "
                f"(finish_reason 'content_filter'); nothing was emitted",
                choice_index=choice.index,
            )
        elif reason == "error":
            raise ProviderError(
                f"{where}the provider ended the choice with finish_reason 'error'; "
                f"nothing was emitted, the request can be retried"
            )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# A tail that a longer text could still turn into a number or a literal.
_OPEN_NUMBER = re.compile(r"-?\d*\.?\d*(?:[eE][-+]?\d*)?")
_LITERALS = ("true", "false", "null")


def _ends_inside_value(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether the parser stopped because the text ran out, not because it was wrong."""
    msg, pos = exc.msg, exc.pos
    if msg.startswith("Unterminated string"):
        return True
    if msg.startswith("Invalid \\uXXXX escape"):
        # pos is the backslash: a cut escape has fewer than four characters after "\u".
        return len(text) - pos < 6
    if msg == "Extra data":
        return False
    tail = text[pos:].rstrip()
    if not tail:
        return True
    if msg == "Expecting value":
        if any(literal.startswith(tail) for literal in _LITERALS):
            return True
        return tail[0] in "-0123456789" and _OPEN_NUMBER.fullmatch(tail) is not None
    # The scanner stops inside "1." or "1e" right after the digits it accepted.
    start = pos
    while start > 0 and text[start - 1] in "-0123456789":
        start -= 1
    return start < pos and _OPEN_NUMBER.fullmatch(text[start:].rstrip()) is not None


def _parse(buffer: ToolCallBuffer) -> dict[str, Any]:
    where = _where(buffer.choice_index, buffer.index, buffer.name)
    text = buffer.arguments
    if not text.strip():
        raise InvalidArgumentsError(
            f"{where}: no arguments were sent (a call without parameters must send '{{}}')",
            choice_index=buffer.choice_index,
            index=buffer.index,
            name=buffer.name,
        )
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        if _ends_inside_value(text, exc):
            raise TruncatedToolCallError(
                f"{where}: the arguments end inside a JSON value ({exc.msg} at {exc.pos} of "
                f"{len(text)} characters): the call was cut off; retry (never repaired)",
                choice_index=buffer.choice_index,
                index=buffer.index,
                name=buffer.name,
            ) from exc
        raise InvalidArgumentsError(
            f"{where}: the arguments are not valid JSON ({exc.msg} at character {exc.pos}); "
            f"the model produced a malformed call, retry the turn",
            choice_index=buffer.choice_index,
            index=buffer.index,
            name=buffer.name,
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise InvalidArgumentsError(
            f"{where}: the arguments are not strict JSON ({exc})",
            choice_index=buffer.choice_index,
            index=buffer.index,
            name=buffer.name,
        ) from exc
    if type(value) is not dict:
        raise InvalidArgumentsError(
            f"{where}: the arguments must be a JSON object, got {type(value).__name__}",
            choice_index=buffer.choice_index,
            index=buffer.index,
            name=buffer.name,
        )
    return value


def _complete(buffer: ToolCallBuffer) -> ToolCall:
    where = _where(buffer.choice_index, buffer.index, buffer.name)
    if buffer.name is None:
        raise MalformedChunkError(
            f"{where}: no function name was ever sent",
            choice_index=buffer.choice_index,
            index=buffer.index,
        )
    if buffer.id is None:
        raise MalformedChunkError(
            f"{where}: no id was ever sent, so no tool message could answer it",
            choice_index=buffer.choice_index,
            index=buffer.index,
            name=buffer.name,
        )
    return ToolCall(
        buffer.index,
        buffer.id,
        buffer.name,
        buffer.arguments,
        _parse(buffer),
        buffer.type or "function",
    )


def build_turns(buffers: Sequence[ToolCallBuffer], end: StreamEnd) -> tuple[AssistantTurn, ...]:
    """Parse every buffer once and build one turn per choice (rules 14-15), or raise."""
    by_choice: dict[int, list[ToolCall]] = {}
    for buffer in sorted(buffers, key=lambda b: (b.choice_index, b.index)):
        by_choice.setdefault(buffer.choice_index, []).append(_complete(buffer))
    return tuple(
        AssistantTurn(
            content=choice.content,
            tool_calls=tuple(by_choice.get(choice.index, ())),
            finish_reason=choice.finish_reason,
            refusal=choice.refusal,
            reasoning=choice.reasoning,
            usage=end.usage,
            choice_index=choice.index,
        )
        for choice in end.choices
    )


def every_turn(turns: tuple[AssistantTurn, ...]) -> tuple[AssistantTurn, ...]:
    """All turns, one per choice; a stream without any choice is an interruption."""
    if not turns:
        raise StreamInterruptedError(
            "the stream completed without any choice: no turn to assemble; retry"
        )
    return turns


def single_turn(turns: tuple[AssistantTurn, ...]) -> AssistantTurn:
    """The only turn of a single-choice stream (an empty stream is an interruption)."""
    if len(every_turn(turns)) == 1:
        return turns[0]
    raise MultipleChoicesError(
        f"the stream carries {len(turns)} choices (n>1); use assemble_choices() to get "
        f"every choice atomically"
    )


class Assembler:
    """Sans-IO assembler: ``feed`` chunks, then ``close`` for the turn or one typed error.

    >>> a = Assembler()
    >>> a.feed({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]})
    ()
    >>> a.close().content
    'Hi'

    Cost: O(1) per fragment, one join and one ``json.loads`` per call at ``close``.
    """

    __slots__ = ("_reader", "_require")

    def __init__(self, *, require_finish_reason: bool = True) -> None:
        self._reader = TurnReader()
        self._require = require_finish_reason

    def feed(self, chunk: object) -> Sequence[ToolCallStarted]:
        """Apply one chunk; return a ``ToolCallStarted`` for every call it named."""
        return self._reader.feed(chunk)

    def close_choices(self) -> tuple[AssistantTurn, ...]:
        """Return one turn per choice, ordered by choice index, or raise."""
        end = self._reader.end()
        buffers = [call.buffer() for call in self._reader.calls()]
        check_finish(end, buffers, require_finish_reason=self._require)
        return every_turn(build_turns(buffers, end))

    def close(self) -> AssistantTurn:
        """Return the turn of a single-choice stream, or raise."""
        return single_turn(self.close_choices())
