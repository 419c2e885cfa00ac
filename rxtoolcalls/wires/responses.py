"""The OpenAI Responses wire: ``response.*`` events onto the core.

Rules (``ResponsesReader.feed``):

1. An event is a dict (the SSE ``data``, parsed) or an openai SDK ``ResponseStreamEvent``;
   dispatch is on ``data["type"]``, never on the SSE event name. ``obfuscation`` and unknown
   event types are ignored; a ``[DONE]`` line is tolerated.
2. Calls are keyed by ``output_index``. The item id (``fc_…``) is kept for diagnostics only:
   proxies rotate it on every event. A ``function_call`` (or ``custom_tool_call``) opens at
   ``response.output_item.added`` with its ``call_id`` (the call's ``id``) and ``name``; a
   second item at one index, or a delta for an index never opened, is a
   ``MalformedChunkError``.
3. Argument deltas are provisional: ``function_call_arguments.done``, then the item of
   ``output_item.done``, then ``response.completed``'s ``output[i]`` each give the final value
   (the core's ``set_final_arguments``); a delta after a final value is a
   ``MalformedChunkError``. The terminal event's ``output`` items are matched to the stream's
   by ``call_id`` (calls) or ``id``, then by position: proxies leave out items they streamed.
   ``custom_tool_call`` input is free-form text.
4. A call is closed by its ``output_item.done`` (or its place in the terminal event's
   ``output``) with ``status`` ``completed``; ``in_progress`` or ``incomplete`` leaves it
   open, which the close reports as a ``TruncatedToolCallError``.
5. Endings: ``response.completed`` emits (finish ``completed``); ``response.incomplete``
   keeps its reason as the finish (``max_output_tokens`` is a token ceiling, ``content_filter``
   a filter); ``error`` (nested or flat) and ``response.failed`` are a ``ProviderError``; no
   terminal event is a ``StreamInterruptedError``; an event after the terminal one is a
   ``MalformedChunkError``.
6. Text: ``output_text`` deltas become ``content`` in output order, refusal deltas
   ``refusal``, reasoning summary and reasoning text ``reasoning``. Every item (reasoning
   with ``encrypted_content``, server calls, messages) is kept verbatim in ``items``; a
   message never sent in its final form goes back with the text streamed for it. A message
   item cannot turn into a call, nor a call into anything else.
7. An event of another wire (``choices``, an Anthropic type) is a ``MalformedChunkError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .._blocks import Block, Blocks
from .._core import (
    _NO_EVENTS,
    Call,
    TextBuffer,
    _at,
    as_dict,
    as_object,
    attr,
    event_dict,
)
from .._errors import MalformedChunkError, ProviderError, excerpt, provider_error
from .._policy import DEFAULT, Policy
from .._sse import SSE_NAMED
from .._types import (
    AssistantTurn,
    ToolCall,
    ToolCallStarted,
    no_made_up_ids,
)
from .._wire import (
    CANCELLED,
    MODES,
    Asked,
    Found,
    Messages,
    Request,
    Route,
    Transcript,
    WireSpec,
    answer_text,
    appended,
    functions,
    given,
    no_sdk_stream,
    prompt_as_text,
    text_of,
)
from .chat import (
    OPENAI_FINAL,
    OPENAI_RETRYABLE,
    function_schemas,
    openai_error_body,
    openai_sdk_error,
)
from .chat import WIRE as CHAT

__all__ = ["WIRE", "ResponsesReader", "identifies"]

_DELTA = "response.function_call_arguments.delta"
# Item types whose calls the client runs; everything else is kept verbatim and never run.
_CALLS = {"function_call": "function", "custom_tool_call": "custom"}
_INCOMPLETE = ("in_progress", "incomplete")


def identifies(event: object) -> bool:
    """Whether an event's ``type`` says Responses (``response.*``)."""
    kind = attr(event, "type")
    return type(kind) is str and kind.startswith("response.")


def to_message(turn: AssistantTurn, empty_content: str | None) -> list[dict[str, Any]]:
    """The turn's output items as input items (reasoning and server items verbatim)."""
    if turn.items:
        return [dict(item) for item in turn.items]
    text = turn.content if turn.content is not None else empty_content
    return [] if text is None else [{"role": "assistant", "content": text}]


def tool_messages(
    turn: AssistantTurn, values: list[object], texts: list[str]
) -> list[dict[str, Any]]:
    """One ``function_call_output`` (``custom_tool_call_output``) item per call."""
    return [
        {
            "type": "custom_tool_call_output" if call.type == "custom" else "function_call_output",
            "call_id": call.id,
            "output": text,
        }
        for call, text in zip(turn.tool_calls, texts, strict=True)
    ]


def _render_call(item: dict[str, Any], field: str) -> Callable[[ToolCall], dict[str, Any]]:
    def render(call: ToolCall) -> dict[str, Any]:
        # The item as sent (namespace, status, ids), with the arguments as assembled, and the
        # call's id (renamed when another call had it).
        if "call_id" in item:
            return {**item, "call_id": call.id, field: call.arguments}
        return {**item, field: call.arguments}

    return render


class _Items(Blocks):
    """Output items and the calls among them: opening, pieces, final values, closing."""

    __slots__ = ("_text",)

    block_noun = "output_index"

    def __init__(
        self,
        policy: Policy = DEFAULT,
        *,
        on_open: Callable[[Call], None] | None = None,
        keep_arguments: bool = True,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        super().__init__(policy, on_open=on_open, keep_arguments=keep_arguments, on_error=on_error)
        # Text by (output_index, part, what): output text, refusal, reasoning; joined in
        # output order. Apart from the items: minimal servers stream text for an index whose
        # item never comes.
        self._text: dict[tuple[int, int, str], TextBuffer] = {}

    def _index(self, data: dict[str, Any]) -> int:
        return self.key_of(data, "output_index", data.get("type"))

    def _call(self, data: dict[str, Any], kind: str) -> Call:
        index = self._index(data)
        call = self._calls0.get(index)
        if call is None:
            raise MalformedChunkError(
                f"{excerpt(data.get('type'), 60)} for output_index {index}, where no "
                f"{kind} was opened (no output_item.added)",
                index=index,
            )
        if (call.json and kind != "function_call") or (not call.json and kind == "function_call"):
            raise MalformedChunkError(
                f"{excerpt(data.get('type'), 60)} for output_index {index}, which holds "
                f"another kind of item",
                **_at(call),
            )
        return call

    def _added(self, data: dict[str, Any]) -> Sequence[ToolCallStarted]:
        index = self._index(data)
        item = _item(data.get("item"), "output_item.added")
        kind = item.get("type")
        self.begin(index, str(kind), item, "output_item.added", call=kind in _CALLS)
        if kind not in _CALLS:
            return _NO_EVENTS
        call, started = self.open_call(
            index, item.get("call_id"), item.get("name"), id_field="call_id", type_=_CALLS[kind]
        )
        call.json = kind == "function_call"
        call.item_id = self._identity(self._choices[0], index, "id", item.get("id"))
        first = item.get("arguments" if call.json else "input")
        if first:
            self._piece(self._choices[0], call, first)
        return started

    def _delta(self, data: dict[str, Any]) -> Sequence[ToolCallStarted]:
        call = self._call(data, "function_call")
        self._piece(self._choices[0], call, data.get("delta"))
        return _NO_EVENTS

    def _custom_delta(self, data: dict[str, Any]) -> Sequence[ToolCallStarted]:
        call = self._call(data, "custom_tool_call")
        self._piece(self._choices[0], call, data.get("delta"))
        return _NO_EVENTS

    def _arguments_done(self, data: dict[str, Any]) -> Sequence[ToolCallStarted]:
        call = self._call(data, "function_call")
        self.set_final_arguments(call, data.get("arguments"), "function_call_arguments.done")
        return _NO_EVENTS

    def _custom_done(self, data: dict[str, Any]) -> Sequence[ToolCallStarted]:
        call = self._call(data, "custom_tool_call")
        self.set_final_arguments(call, data.get("input"), "custom_tool_call_input.done")
        return _NO_EVENTS

    def _item_done(self, data: dict[str, Any]) -> Sequence[ToolCallStarted]:
        index = self._index(data)
        item = _item(data.get("item"), "output_item.done")
        started = self._final_item(index, item, "output_item.done")
        return _NO_EVENTS if started is None else (started,)

    def _final_item(
        self, index: int, item: dict[str, Any], source: str, terminal: bool = False
    ) -> ToolCallStarted | None:
        """Apply an item in its final form: it replaces what came before and closes a call.

        The items of the terminal event's output are not charged to ``Limits.max_kept``: one
        event, bounded by ``max_event``, after which the stream takes no more.
        """
        found = self._blocks.get(index)
        before = None if found is None else found.detail
        kind = item.get("type")
        if kind not in _CALLS and not terminal:
            self.charge_kept(item, f"{source} {index}", index)
        if found is None:
            found = self._blocks[index] = Block(str(kind), item)
        else:
            found.detail, found.kind = item, str(kind)
        call = self._calls0.get(index)
        if kind not in _CALLS:
            if call is not None or (before is not None and before.get("type") != kind):
                raise MalformedChunkError(
                    f"{source} at output_index {index} is a {excerpt(kind, 40)} item, where a "
                    f"{excerpt((before or {}).get('type'), 40)} item was opened",
                    index=index,
                )
            return None
        state = self._choices[0]
        started: ToolCallStarted | None = None
        if call is None and before is not None:
            raise MalformedChunkError(
                f"{source} at output_index {index} is a {kind} item, where a "
                f"{excerpt(before.get('type'), 40)} item was opened",
                index=index,
            )
        if call is None:
            # Never opened (a server that sends only the final output): open it now.
            self._blocks.pop(index)
            started_events = self._added({"output_index": index, "item": {**item, "arguments": ""}})
            self._blocks[index].detail = item
            started = started_events[0] if started_events else None
            call = self._calls0[index]
        if call.json != (kind == "function_call"):
            raise MalformedChunkError(
                f"{source} at output_index {index} changes the item's type", **_at(call)
            )
        for field, value in (("call_id", item.get("call_id")), ("name", item.get("name"))):
            value = self._identity(state, index, field, value)
            known = call.id if field == "call_id" else call.name
            if value is not None and known is not None and value != known:
                raise MalformedChunkError(
                    f"{source} at output_index {index}: {field} {excerpt(value)} differs from "
                    f"{excerpt(known)} sent when the item opened",
                    **_at(call),
                )
        self.set_final_arguments(
            call, item.get("arguments" if call.json else "input", ""), f"{source} item"
        )
        call.closed = item.get("status", "completed") not in _INCOMPLETE
        return started


class ResponsesReader(_Items):
    """Reads Responses API events (rules 1-7)."""

    __slots__ = ()

    wire = "responses"

    def feed(self, event: object) -> Sequence[ToolCallStarted]:
        """Apply one event; return the calls it named (usually none)."""
        # Fast path, an argument delta of an open function call: the bulk of a stream.
        if self._fast:
            call = None
            try:
                if type(event) is dict:
                    if event["type"] == _DELTA:
                        piece = event["delta"]
                        index = event["output_index"]
                        if type(index) is int:  # not True, which a dict takes for 1
                            call = self._calls0[index]
                elif event.type == _DELTA:  # type: ignore[attr-defined]
                    # An SDK event: its attributes, as model_dump() costs ten times more.
                    piece = event.delta  # type: ignore[attr-defined]
                    call = self._calls0[event.output_index]  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - the full path reads it again and reports
                pass
            if (
                call is not None
                and type(piece) is str
                and call.final is None
                and call.json
                and self.store_piece(call, piece)
            ):
                return _NO_EVENTS
        return self._slow_feed(event)

    # -- events ------------------------------------------------------------------------

    def _feed(self, event: object) -> Sequence[ToolCallStarted]:
        if isinstance(event, str) and event.strip() == "[DONE]":
            return _NO_EVENTS
        data = event_dict(event, "a Responses event")
        kind = data.get("type")
        if kind == "error":
            _raise_error(data)
        if type(kind) is not str or not kind.startswith("response."):
            raise self.foreign(data, "a Responses event")
        self.check_open(kind)
        handler = _HANDLERS.get(kind)
        if handler is None:
            return _NO_EVENTS  # events this wire adds later, and server tools' progress
        return handler(self, data)

    def _key(self, data: dict[str, Any], what: str) -> tuple[int, int, str]:
        part = data.get("content_index", data.get("summary_index", 0))
        return (self._index(data), part if type(part) is int else 0, what)

    def _write_text(self, data: dict[str, Any], what: str, field: str) -> Sequence[ToolCallStarted]:
        # Text for an index never opened is kept: minimal servers skip output_item.added for
        # messages, and text can never make a half-built call.
        key = self._key(data, what)
        text = self._charge_text(self._choices[0], excerpt(data.get("type"), 60), data.get(field))
        buffer = self._text.get(key)
        if buffer is None:
            # Each text of the turn is kept apart: even an empty one takes room.
            self.charge_kept(key, f"{excerpt(data.get('type'), 60)} for a new text")
            buffer = self._text[key] = TextBuffer()
        buffer.write(text)
        if self._on_text is not None and text:
            self._on_text(0, what, text)
        return _NO_EVENTS

    def _text_done(self, data: dict[str, Any], what: str, field: str) -> Sequence[ToolCallStarted]:
        """A final text: it completes deltas that stopped short (done-only servers)."""
        final = data.get(field)
        buffer = self._text.get(self._key(data, what))
        so_far = "" if buffer is None else buffer.getvalue()
        if type(final) is str and final.startswith(so_far) and len(final) > len(so_far):
            self._write_text({**data, field: final[len(so_far) :]}, what, field)
        return _NO_EVENTS

    def _terminal(self, data: dict[str, Any]) -> Sequence[ToolCallStarted]:
        kind = data["type"]
        response = data.get("response")
        if not isinstance(response, dict):
            raise MalformedChunkError(f"{kind} without a response object")
        if kind == "response.failed":
            error = response.get("error")
            found = as_object(error)
            _raise_error(response if found is None else found, "response.failed: ")
        self.end_message(kind, None)
        output = response.get("output")
        started: list[ToolCallStarted] = []
        if isinstance(output, list):
            items = [_item(item, kind + " output") for item in output]
            for index, item in zip(self._placed(items), items, strict=True):
                event = self._final_item(index, item, f"{kind} output", terminal=True)
                if event is not None:
                    started.append(event)
        usage = response.get("usage")
        if usage is not None:
            self.usage = as_dict(usage)
        state = self._choices[0]
        if kind == "response.completed":
            state.finish_reason = "completed"
            state.outcome = "tool_calls" if self._calls0 else "stop"
        else:
            details = response.get("incomplete_details")
            reason = None if (found := as_object(details)) is None else found.get("reason")
            reason = self._identity(state, None, "incomplete_details.reason", reason)
            state.finish_reason = reason or "incomplete"
            state.outcome = "content_filter" if reason == "content_filter" else "length"
        return started

    def _placed(self, items: list[dict[str, Any]]) -> list[int]:
        """The output_index of each item of a terminal ``output`` list.

        A call is found by its ``call_id`` (one no other call has), another item by its
        ``id``; an item found by neither takes its position when that holds nothing or an item
        of its type, else the next free index. Proxies send ``output`` without items they
        streamed (a reasoning item before a call), so a position alone cannot say which item
        it is. Calls that share a ``call_id`` (the close refuses or renames them) take that
        call_id's items in order when the output has one for each; with fewer or more, which
        is which cannot be told, and that is a ``MalformedChunkError``.
        """
        calls: dict[str, list[int]] = {}
        for i, call in self._calls0.items():
            if type(call.id) is str:
                calls.setdefault(call.id, []).append(i)
        ids: dict[str, int] = {}
        for at, known in self._blocks.items():
            ident = known.detail.get("id")
            if type(ident) is str:
                ids.setdefault(ident, at)
        # First what names its place (a call_id of one call, an item id), then the calls of
        # a shared call_id in order among the places left to it, then the rest by position.
        found: list[int | None] = []
        shared: list[int] = []
        for at, item in enumerate(items):
            call_id, ident = item.get("call_id"), item.get("id")
            index: int | None = None
            sharing = (
                calls.get(call_id) if item["type"] in _CALLS and type(call_id) is str else None
            )
            if sharing is not None and len(sharing) == 1:
                index = sharing[0]
            if index is None and type(ident) is str:
                index = ids.get(ident)
            if index is None and sharing is not None and len(sharing) > 1:
                shared.append(at)
            found.append(index)
        taken = {index for index in found if index is not None}
        if shared:
            self._place_shared(items, calls, shared, found, taken)
        placed: list[int] = []
        seen: set[int] = set()
        for position, (item, index) in enumerate(zip(items, found, strict=True)):
            if index is None or index in seen:
                before = self._blocks.get(position)
                free = position not in seen and position not in taken
                if free and (before is None or before.detail["type"] == item["type"]):
                    index = position
                else:
                    index = max([*self._blocks, *taken, *seen, position]) + 1
            seen.add(index)
            placed.append(index)
        return placed

    def _place_shared(
        self,
        items: list[dict[str, Any]],
        calls: dict[str, list[int]],
        shared: list[int],
        found: list[int | None],
        taken: set[int],
    ) -> None:
        """Place the items at ``shared`` (calls of a call_id several calls have), in order."""
        sent: dict[str, int] = {}
        for item in items:
            call_id = item.get("call_id")
            if item["type"] in _CALLS and type(call_id) is str:
                sent[call_id] = sent.get(call_id, 0) + 1
        for at in shared:
            call_id = str(items[at]["call_id"])
            sharing = calls[call_id]
            if sent[call_id] != len(sharing):
                raise MalformedChunkError(
                    f"the terminal output has {sent[call_id]} call items for a call_id "
                    f"{len(sharing)} calls share: which is which cannot be told"
                )
            index = next((i for i in sorted(sharing) if i not in taken), None)
            if index is not None:
                found[at] = index
                taken.add(index)

    # -- the end -----------------------------------------------------------------------

    def _release(self) -> None:
        super()._release()
        self._text.clear()

    def _settle(self) -> None:
        state = self._choices[0]
        parts: dict[str, list[str]] = {"content": [], "refusal": [], "reasoning": []}
        for (_, _, what), buffer in sorted(self._text.items(), key=lambda kv: kv[0]):
            parts[what].append(buffer.getvalue())
        for what, pieces in parts.items():
            if pieces:
                setattr(state, what, TextBuffer("".join(pieces)))
        super()._settle()

    def render(self, index: int, block: Block) -> dict[str, Any]:
        """The item in its latest form; a message never sent whole gets its streamed text."""
        item = block.detail
        if item["type"] == "message" and not item.get("content"):
            # Never sent in its final form: what was streamed is its content.
            streamed = self._streamed(index)
            if streamed:
                return {**item, "content": streamed}
        return item

    def _streamed(self, index: int) -> list[dict[str, Any]]:
        """The text and refusal parts streamed for the item at ``index``, in order."""
        found: list[dict[str, Any]] = []
        for (at, _, what), buffer in sorted(self._text.items(), key=lambda kv: kv[0]):
            if at != index:
                continue
            if what == "content":
                found.append({"type": "output_text", "text": buffer.getvalue(), "annotations": []})
            elif what == "refusal":
                found.append({"type": "refusal", "refusal": buffer.getvalue()})
        return found

    def render_call(self, index: int, block: Block) -> Callable[[ToolCall], dict[str, Any]]:
        """The call's item as sent, with the arguments (or input) as assembled."""
        field = "arguments" if self._calls0[index].json else "input"
        return _render_call(block.detail, field)

    def content_size(self) -> int:
        """Characters of output text received so far."""
        return sum(b.tell() for (_, _, what), b in self._text.items() if what == "content")


def _item(value: object, source: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedChunkError(
            f"{source}: the item must be an object, got {type(value).__name__}"
        )
    if type(value.get("type")) is not str:
        raise MalformedChunkError(
            f"{source}: the item's type must be a string, got {excerpt(value.get('type'), 40)}"
        )
    return value


def _raise_error(data: Mapping[str, Any], where: str = "") -> None:
    """The ``ProviderError`` of an ``error`` event (nested or flat) or a failed response."""
    error = data.get("error")
    source = data if (found := as_object(error)) is None else found
    code = source.get("code")
    if code is None:
        code = source.get("type") if source.get("type") != "error" else None
    raised: ProviderError = provider_error(source.get("message") or source, code, source, where)
    raise raised


_HANDLERS: dict[str, Callable[[ResponsesReader, dict[str, Any]], Sequence[ToolCallStarted]]] = {
    "response.output_item.added": ResponsesReader._added,
    "response.function_call_arguments.delta": ResponsesReader._delta,
    "response.function_call_arguments.done": ResponsesReader._arguments_done,
    "response.custom_tool_call_input.delta": ResponsesReader._custom_delta,
    "response.custom_tool_call_input.done": ResponsesReader._custom_done,
    "response.output_item.done": ResponsesReader._item_done,
    "response.output_text.delta": lambda r, d: r._write_text(d, "content", "delta"),
    "response.output_text.done": lambda r, d: r._text_done(d, "content", "text"),
    "response.refusal.delta": lambda r, d: r._write_text(d, "refusal", "delta"),
    "response.refusal.done": lambda r, d: r._text_done(d, "refusal", "refusal"),
    "response.reasoning_summary_text.delta": lambda r, d: r._write_text(d, "reasoning", "delta"),
    "response.reasoning_text.delta": lambda r, d: r._write_text(d, "reasoning", "delta"),
    "response.completed": ResponsesReader._terminal,
    "response.incomplete": ResponsesReader._terminal,
    "response.failed": ResponsesReader._terminal,
}


# Responses items that answer a call, by the call item type they answer.
_OUTPUTS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
_ANSWERS = frozenset(_OUTPUTS.values())
_INPUT_ROLES = frozenset({"user", "system", "developer"})


def _shows(message: Mapping[str, Any]) -> bool:
    kind = message.get("type")
    return isinstance(kind, str) and kind != "message"


# -- The transcript: output items answered by output items anywhere after them -----------


def _is_answer(item: Mapping[str, Any]) -> bool:
    return text_of(item.get("type")) in _ANSWERS


def _is_output(item: Mapping[str, Any]) -> bool:
    """Whether an item is the model's (a turn's), not an input or an answer."""
    return not _is_answer(item) and text_of(item.get("role")) not in _INPUT_ROLES


def _call_of(item: Mapping[str, Any]) -> str | None:
    call_id = text_of(item.get("call_id"))
    return call_id if text_of(item.get("type")) in _OUTPUTS else None


def _responses_turns(
    items: Messages,
) -> list[tuple[int, int, list[Mapping[str, Any]], list[str]]]:
    """Each turn: start, end (exclusive), its call items, and the ids no later item answers."""
    answered_after: list[set[str]] = [set() for _ in range(len(items) + 1)]
    for position in range(len(items) - 1, -1, -1):
        answered_after[position] = answered_after[position + 1]
        item = items[position]
        if _is_answer(item) and isinstance(item.get("call_id"), str):
            answered_after[position] = {*answered_after[position], item["call_id"]}
    turns: list[tuple[int, int, list[Mapping[str, Any]], list[str]]] = []
    position = 0
    while position < len(items):
        if not _is_output(items[position]):
            position += 1
            continue
        end = position
        while end < len(items) and _is_output(items[end]):
            end += 1
        calls = [item for item in items[position:end] if _call_of(item) is not None]
        later = answered_after[end]
        missing = [item["call_id"] for item in calls if item["call_id"] not in later]
        turns.append((position, end, calls, missing))
        position = end
    return turns


def _find(items: Messages) -> list[tuple[int, list[str]]]:
    return [(start, missing) for start, _, _, missing in _responses_turns(items) if missing]


def _responses_repair(items: Messages, mode: str) -> list[dict[str, Any]]:
    turns = {start: (end, calls, missing) for start, end, calls, missing in _responses_turns(items)}
    out: list[dict[str, Any]] = []
    waiting: set[str] = set()
    position = 0
    while position < len(items):
        item = items[position]
        if position in turns:
            end, calls, missing = turns[position]
            if missing and mode == "drop":
                position = end  # with its calls unopened, their partial answers go too
                continue
            out.extend(dict(entry) for entry in items[position:end])
            waiting.update(c["call_id"] for c in calls if c["call_id"] not in missing)
            out.extend(
                {"type": _OUTPUTS[c["type"]], "call_id": c["call_id"], "output": CANCELLED}
                for c in calls
                if c["call_id"] in missing
            )
            position = end
            continue
        position += 1
        if _is_answer(item):
            if text_of(item.get("call_id")) in waiting:
                waiting.discard(item["call_id"])
                out.append(dict(item))
            continue  # an answer to no open call (or a second one): the API refuses it
        out.append(dict(item))
    return out


def _responses_open(items: Messages) -> Found | None:
    turns = _responses_turns(items)
    if not turns:
        return None
    start, end, _, _ = turns[-1]
    if not all(_is_answer(item) for item in items[end:]):
        return None
    answers: dict[str, str] = {}
    for item in items[end:]:
        call_id = text_of(item.get("call_id"))
        if call_id is not None:
            answers.setdefault(call_id, answer_text(item.get("output")))
    calls: list[Asked] = []
    for at in range(start, end):
        item = items[at]
        call_id = _call_of(item)
        if call_id is not None:
            custom = item.get("type") == "custom_tool_call"
            arguments = item.get("input" if custom else "arguments")
            kind = "custom" if custom else "function"
            item_id = text_of(item.get("id"))
            calls.append((at, len(calls), call_id, item.get("name"), arguments, kind, item_id))
    return calls, tuple(dict(item) for item in items[start:end]), answers


def _response(
    turns: tuple[AssistantTurn, ...], chunks: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The non-streaming ``response`` a recording stands for."""
    last: dict[str, Any] = next(
        (c["response"] for c in reversed(chunks) if isinstance(c.get("response"), dict)), {}
    )
    turn = turns[0]
    return {
        "id": "resp_replay",
        "object": "response",
        "created_at": 0,
        "model": "replay",
        **last,
        "output": list(turn.items),
        **({"usage": turn.usage} if turn.usage is not None else {}),
    }


def _tool_schemas(tool: Mapping[str, Any]) -> list[tuple[str, object]] | None:
    """A function or custom tool (``{"type": "custom", "name"}``, free-form input, no schema).

    A tool OpenAI runs (``web_search``, ``file_search``, ``mcp`` …) declares none.
    """
    kind = tool.get("type")
    if kind == "custom" and isinstance(tool.get("name"), str):
        return [(tool["name"], None)]
    if isinstance(kind, str) and kind != "function" and "function" not in tool:
        return []
    return function_schemas(tool)


def _open(client: Any, ask: Request, messages: list[dict[str, Any]]) -> Any:
    tools = [
        # Not strict, as on Chat: the Responses API would otherwise refuse a loose schema.
        {
            "type": "function",
            "name": name,
            "description": said,
            "parameters": schema,
            "strict": False,
        }
        for name, said, schema in functions(ask)
    ]
    return client.responses.create(
        model=ask.model,
        input=messages,
        stream=True,
        **given(
            instructions=ask.system,
            tools=tools or None,
            tool_choice=(
                ask.choice
                if ask.choice in (None, *MODES)
                else {"type": "function", "name": ask.choice}
            ),
            temperature=ask.temperature,
            max_output_tokens=ask.max_tokens,
        ),
    )


WIRE = WireSpec(
    name="responses",
    title="OpenAI Responses",
    identifies=identifies,
    unwrap=None,
    reader=ResponsesReader,
    terminal=True,
    pause_reasons=frozenset(),
    to_message=to_message,
    tool_messages=tool_messages,
    made_up_ids=no_made_up_ids,
    transcript=Transcript(
        shows=_shows,
        find=_find,
        repair=_responses_repair,
        open=_responses_open,
        add_answers=appended,
    ),
    retryable=OPENAI_RETRYABLE,
    final=OPENAI_FINAL,
    sdk_error=openai_sdk_error,
    sdk_packages=frozenset({"openai"}),
    sdk_stream=no_sdk_stream,
    path="/v1/responses",
    routes=(Route("/responses", None, SSE_NAMED),),
    reply=_response,
    error_body=openai_error_body,
    tool_schemas=_tool_schemas,
    client=replace(CHAT.client, messages=prompt_as_text, open=_open),
)
