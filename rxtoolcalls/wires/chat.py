"""The Chat Completions wire: ``chat.completion.chunk`` events onto the core.

Rules (``ChatReader.feed``):

1. A chunk is a ``dict`` (parsed JSON) or any object with the chunk's attributes (the openai
   SDK's ``ChatCompletionChunk``); nested parts may mix both. Unknown fields are ignored.
2. A chunk with a top-level ``error`` (or ``"object": "error"``) is a ``ProviderError``.
3. ``choices`` may be missing, empty or null (filter annotations, the usage-only last chunk);
   ``delta`` may be null. A missing choice ``index`` means choice 0. A choice that opens with a
   ``message`` and no ``delta`` is a whole ``ChatCompletion``: refused (``not_streamed``); a
   ``message`` after deltas (a closing summary, as MiniMax sends) is skipped, its finish read.
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
   delta is applied before its finish_reason. It is the finish itself (no translation).
10. ``usage``: the last non-null value is kept.
11. A legacy ``function_call`` delta without ``tool_calls`` is assembled into
    ``turn.function_call`` (its fragments joined like a call's); one mirroring ``tool_calls`` in
    the same delta is ignored, and ``tool_calls`` after legacy deltas are a
    ``MalformedChunkError``.
12. A Responses or Anthropic event (a ``type`` and no ``choices``) is a ``MalformedChunkError``:
    one stream speaks one wire.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .._close import _where
from .._core import (
    _MAX_INDEX,
    _MIN_INDEX,
    _NO_EVENTS,
    _ZERO,
    Call,
    Core,
    TextBuffer,
    _at,
    _Choice,
    as_dict,
    attr,
    extra,
    get,
)
from .._errors import (
    LimitExceededError,
    MalformedChunkError,
    ProviderError,
    excerpt,
    not_streamed,
    provider_error,
    status_error,
)
from .._sse import SSE_DATA_DONE
from .._types import AssistantTurn, ToolCallStarted, no_made_up_ids
from .._wire import (
    CANCELLED,
    MODES,
    Asked,
    Client,
    Found,
    Messages,
    Request,
    Route,
    Transcript,
    WireSpec,
    answer_text,
    appended,
    given,
    no_sdk_stream,
)

__all__ = ["WIRE", "ChatReader", "identifies"]


# -- Recognising the wire, and answering in it ------------------------------------------------


def identifies(event: object) -> bool:
    """Whether an event is a Chat Completions chunk (``choices``, or its ``object``)."""
    if isinstance(event, Mapping):
        return "choices" in event or event.get("object") == "chat.completion.chunk"
    return attr(event, "choices") is not None


def to_message(turn: AssistantTurn, empty_content: str | None) -> dict[str, Any]:
    """The assistant message: content (``empty_content`` for none), refusal and calls."""
    content = turn.content if turn.content is not None else empty_content
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if turn.refusal is not None:
        message["refusal"] = turn.refusal
    if turn.tool_calls:
        message["tool_calls"] = [call.to_dict() for call in turn.tool_calls]
    if turn.function_call is not None:
        message["function_call"] = turn.function_call.to_dict()["function"]
    return message


def tool_messages(
    turn: AssistantTurn, values: list[object], texts: list[str]
) -> list[dict[str, Any]]:
    """One ``{"role": "tool", "tool_call_id", "content"}`` message per call."""
    return [
        {"role": "tool", "tool_call_id": call.id, "content": text}
        for call, text in zip(turn.tool_calls, texts, strict=True)
    ]


class _Fragments(Core):
    """The tool-call fragment rules (5-8): each entry of ``delta.tool_calls`` onto its call."""

    __slots__ = ()

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
        index = attr(entry, "index")
        return self._fragment(
            state,
            index,
            index is not None,
            attr(entry, "id"),
            attr(entry, "type"),
            attr(entry, "function"),
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
            name = get(fn, "name")
            piece = get(fn, "arguments")
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


class _Deltas(_Fragments):
    """Chunks, choices and deltas (rules 1-4, 9-12): the full path of every chunk."""

    __slots__ = ()

    def _feed(self, chunk: object) -> Sequence[ToolCallStarted]:
        events: list[ToolCallStarted] | None = None
        if isinstance(chunk, dict):
            choices = chunk.get("choices")
            if ("error" in chunk and chunk["error"] is not None) or (
                not choices and chunk.get("object") == "error"
            ):
                self._raise_provider_error(chunk)
            if choices is None:
                self.refuse_other_wire(chunk)
                if type(chunk.get("type")) is str:
                    raise MalformedChunkError(
                        f"an event of type {excerpt(chunk['type'], 60)} in a Chat Completions "
                        f"stream: one stream speaks one wire"
                    )
            usage = chunk.get("usage")
        else:
            if chunk is None or isinstance(chunk, str | bytes | int | float | list | tuple):
                raise MalformedChunkError(f"a chunk must be an object, got {type(chunk).__name__}")
            choices = attr(chunk, "choices")
            if extra(chunk, "error") is not None:
                self._raise_provider_error(chunk)
            if choices is None:
                self.refuse_other_wire(chunk)
                if type(kind := attr(chunk, "type")) is str:
                    raise MalformedChunkError(
                        f"an event of type {excerpt(kind, 60)} in a Chat Completions stream: "
                        f"one stream speaks one wire"
                    )
            usage = attr(chunk, "usage")
        if usage is not None:
            self.usage = as_dict(usage)
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
                ci = attr(choice, "index", 0)
                delta = attr(choice, "delta")
                finish = attr(choice, "finish_reason")
            if ci is None:
                ci = 0
            state = self._choices.get(ci) if type(ci) is int else None
            fresh = state is None
            if state is None:
                if type(ci) is not int or not _MIN_INDEX <= ci <= _MAX_INDEX:
                    raise MalformedChunkError(
                        f"choice index must be an int of at most 64 bits, got {excerpt(ci)}"
                    )
                state = self._state(ci)
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
            elif fresh and get(choice, "message") is not None:
                # A whole ChatCompletion opens with its message. After deltas, a message is a
                # summary some servers send last (MiniMax): its finish and usage are read.
                raise MalformedChunkError(not_streamed("this chunk"), choice_index=ci)
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
        entries = attr(delta, "tool_calls")
        named = None if entries is None else self._entries(state, entries)
        for slot, key in (
            ("content", "content"),
            ("reasoning", "reasoning_content"),
            ("reasoning", "reasoning"),
            ("refusal", "refusal"),
        ):
            value = extra(delta, key)
            if value is not None:
                self._write(state, slot, key, value)
        legacy = attr(delta, "function_call")
        if legacy is not None:
            self._function_call(state, legacy, list(entries) if entries is not None else None)
        return named

    def _function_call(self, state: _Choice, legacy: object, entries: list[Any] | None) -> None:
        """Apply a legacy ``function_call`` delta, or check it mirrors this delta's tool_calls."""
        if isinstance(legacy, str | bytes | int | float | list | tuple):
            raise MalformedChunkError(
                f"choice {state.index}: function_call must be an object, got "
                f"{type(legacy).__name__}"
            )
        name = self._identity(state, None, "function_call.name", get(legacy, "name"))
        piece = get(legacy, "arguments")
        if piece is not None and not isinstance(piece, str):
            raise MalformedChunkError(
                f"choice {state.index}: function_call.arguments must be a string fragment, got "
                f"{type(piece).__name__}"
            )
        if entries is not None:
            # llama.cpp's server mirrors each tool-call fragment here: ignore a faithful copy.
            names = {get(get(e, "function") or {}, "name") for e in entries}
            names |= {call.name for call in state.calls.values()}
            pieces = "".join(
                p
                for e in entries
                if isinstance(p := get(get(e, "function") or {}, "arguments"), str)
            )
            if (name is not None and name not in names) or (piece and piece != pieces):
                raise MalformedChunkError(
                    f"choice {state.index}: the legacy function_call (name {excerpt(name)}, "
                    f"{len(piece) if isinstance(piece, str) else 0:,} argument characters) "
                    f"contradicts the tool_calls of the same delta",
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
            state.legacy_arguments = TextBuffer()
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

    @staticmethod
    def _raise_provider_error(chunk: object) -> None:
        error = extra(chunk, "error")
        source = error if error is not None else chunk
        message = get(source, "message") if not isinstance(source, str) else source
        code = get(source, "code") if not isinstance(source, str) else None
        if code is None and not isinstance(source, str):
            code = get(source, "type")
        raise provider_error(message or source, code, source)


class ChatReader(_Deltas):
    """Reads Chat Completions chunks (rules 1-12); ``feed`` holds the fast path."""

    __slots__ = ()

    wire = "chat"

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
            # Within the call's grant, no limit can be passed; past it, the full path checks
            # the limits exactly and grants more.
            if call is not None and self.store_piece(call, piece):
                return _NO_EVENTS
        # Core._slow_feed's body, inline: a detecting reader's full path is the detected
        # wire's ``feed``, and this saves a call on every event of another wire. A chunk of
        # any Mapping is read through ``get``/``attr`` here, with no plain copy.
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


# -- The transcript: tool messages answer the assistant message right before them ------


def _tool_calls(message: Mapping[str, Any]) -> Sequence[Any]:
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list | tuple) else []


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    calls = _tool_calls(message)
    return [c["id"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str)]


def _chat_find(messages: Messages) -> list[tuple[int, list[str]]]:
    broken: list[tuple[int, list[str]]] = []
    for position, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        wanted = _call_ids(message)
        if not wanted:
            continue
        answered = set()
        for follower in messages[position + 1 :]:
            if follower.get("role") != "tool":
                break
            answered.add(follower.get("tool_call_id"))
        missing = [call_id for call_id in wanted if call_id not in answered]
        if missing:
            broken.append((position, missing))
    return broken


def _chat_repair(messages: Messages, mode: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    position = 0
    while position < len(messages):
        message = dict(messages[position])
        position += 1
        role = message.get("role")
        if role == "tool":
            continue  # an answer to no open call: the API refuses it
        wanted = _call_ids(message) if role == "assistant" else []
        if not wanted:
            out.append(message)
            continue
        answers: dict[str, dict[str, Any]] = {}
        while position < len(messages) and messages[position].get("role") == "tool":
            answer = dict(messages[position])
            position += 1
            if answer.get("tool_call_id") in wanted and answer["tool_call_id"] not in answers:
                answers[answer["tool_call_id"]] = answer
        if len(answers) == len(wanted):
            out.append(message)
            out.extend(answers[call_id] for call_id in wanted)
        elif mode == "cancel":
            out.append(message)
            out.extend(
                answers.get(call_id)
                or {"role": "tool", "tool_call_id": call_id, "content": CANCELLED}
                for call_id in wanted
            )
    return out


def _chat_open(messages: Messages) -> Found | None:
    at = len(messages)
    while at and messages[at - 1].get("role") == "tool":
        at -= 1
    if not at or messages[at - 1].get("role") != "assistant":
        return None
    at -= 1
    answers: dict[str, str] = {}
    for answer in messages[at + 1 :]:
        call_id = answer.get("tool_call_id")
        if isinstance(call_id, str):
            answers.setdefault(call_id, answer_text(answer.get("content")))
    calls: list[Asked] = []
    for index, entry in enumerate(_tool_calls(messages[at])):
        if isinstance(entry, Mapping) and isinstance(entry.get("id"), str):
            function = entry.get("function")
            function = function if isinstance(function, Mapping) else {}
            name, arguments = function.get("name"), function.get("arguments")
            calls.append((at, index, entry["id"], name, arguments, "function", None))
    return calls, (), answers


def _shows(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "tool" or bool(message.get("tool_calls"))


# -- The replay server and the SDK ----------------------------------------------------------


def _completion(
    turns: tuple[AssistantTurn, ...], chunks: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` a recording stands for."""
    first = chunks[0]
    usage = next((c["usage"] for c in reversed(chunks) if c.get("usage")), None)
    return {
        "id": first.get("id", "chatcmpl-replay"),
        "object": "chat.completion",
        "created": first.get("created", 0),
        "model": first.get("model", "replay"),
        "choices": [
            {
                "index": turn.choice_index,
                "message": turn.to_message(),
                "finish_reason": turn.finish_reason,
                "logprobs": None,
            }
            for turn in turns
        ],
        **({"usage": usage} if usage is not None else {}),
    }


# OpenAI's error codes (Chat Completions and Responses: one provider, one SDK).
OPENAI_RETRYABLE = frozenset({"rate_limit_exceeded", "server_error"})
OPENAI_FINAL = frozenset(
    {"invalid_request_error", "context_length_exceeded", "invalid_api_key", "insufficient_quota"}
)


def openai_error_body(status: int, message: str, kind: str, code: object) -> dict[str, Any]:
    """OpenAI's error body: ``{"error": {"message", "type", "code"}}``."""
    return {"error": {"message": message, "type": kind, "code": code}}


def openai_sdk_error(error: Exception) -> ProviderError | None:
    """An openai SDK error (``APIError`` in the stream, ``APIStatusError``) as ours."""
    kind = type(error)
    if not kind.__module__.startswith("openai"):
        return None
    if kind.__name__ == "APIError":
        code = getattr(error, "code", None) or getattr(error, "type", None)
        return ProviderError(
            f"the provider reported an error inside the stream: "
            f"{getattr(error, 'message', error)!r} (code {code!r}); nothing was emitted, the "
            f"request can be retried",
            code=code,
            body=getattr(error, "body", None),
        )
    if any(base.__name__ == "APIStatusError" for base in kind.__mro__):
        return status_error(error)
    return None


def function_schemas(tool: Mapping[str, Any]) -> list[tuple[str, object]] | None:
    """``{"type": "function", "function": {"name", "parameters"}}``, or without ``function``.

    The second form (``{"type": "function", "name", "parameters"}``) is the Responses API's.
    """
    function = tool.get("function")
    if function is None and (tool.get("type") == "function" or "parameters" in tool):
        function = tool
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str) or not isinstance(function, Mapping):
        return None
    return [(name, function.get("parameters"))]


def connect_openai(sdk: Any, base_url: str | None) -> tuple[Any, str]:
    """An ``openai.OpenAI`` client (key from ``OPENAI_API_KEY``), one attempt per request."""
    key = os.environ.get("OPENAI_API_KEY", "unused")
    client = sdk.OpenAI(api_key=key, base_url=base_url, max_retries=0)
    return client, base_url or str(client.base_url)


def _first_messages(prompt: str, system: str | None) -> list[dict[str, Any]]:
    first = [{"role": "system", "content": system}] if system is not None else []
    return [*first, {"role": "user", "content": prompt}]


def _open(client: Any, ask: Request, messages: list[dict[str, Any]]) -> Any:
    named = {"type": "function", "function": {"name": ask.choice}}
    return client.chat.completions.create(
        model=ask.model,
        messages=messages,
        stream=True,
        **given(
            tools=ask.tools or None,
            tool_choice=ask.choice if ask.choice in (None, *MODES) else named,
            temperature=ask.temperature,
            max_tokens=ask.max_tokens,
        ),
    )


WIRE = WireSpec(
    name="chat",
    title="OpenAI Chat Completions",
    identifies=identifies,
    unwrap=None,
    reader=ChatReader,
    terminal=False,
    pause_reasons=frozenset(),
    to_message=to_message,
    tool_messages=tool_messages,
    made_up_ids=no_made_up_ids,
    transcript=Transcript(
        shows=_shows, find=_chat_find, repair=_chat_repair, open=_chat_open, add_answers=appended
    ),
    retryable=OPENAI_RETRYABLE,
    final=OPENAI_FINAL,
    sdk_error=openai_sdk_error,
    sdk_packages=frozenset({"openai"}),
    sdk_stream=no_sdk_stream,
    path="/v1/chat/completions",
    routes=(Route("/chat/completions", None, SSE_DATA_DONE),),
    reply=_completion,
    error_body=openai_error_body,
    tool_schemas=function_schemas,
    client=Client(
        sdk="openai",
        package="openai",
        extra="openai",
        credentials="OPENAI_API_KEY",
        address="http://host/v1",
        modes=MODES,
        max_tokens=None,
        connect=connect_openai,
        messages=_first_messages,
        open=_open,
    ),
)
