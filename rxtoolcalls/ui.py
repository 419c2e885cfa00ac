"""UI protocols: the library's events as AG-UI events or Vercel AI SDK UI message stream parts.

``to_ag_ui()`` and ``to_ui_message_stream()`` read what ``lifecycle()`` or ``agent_loop()``
emit (with ``fields=True`` and ``text=True`` for the most to show) and give plain dicts in each
protocol's JSON shape; ``ag_ui_sse`` and ``ui_message_sse`` write one as a Server-Sent Event,
for a web framework's streaming response with the headers here. Nothing is imported from
either protocol's SDK.

The rules both mappings keep, in one place (``_Mapper``); each protocol only renders:

1. A call's input is shown as available only once it is complete: at ``ToolCallCommitted``,
   at ``TurnFinished`` (each of its calls not shown yet), or, on Vercel, at ``ToolCallEarly``.
   Its arguments go out whole, never in fragments, so no half value is ever shown as a value.
2. A failed turn never leaves a call looking done. A retried turn voids everything its failed
   stream showed (Vercel ``reset-step``; AG-UI a ``rxtoolcalls.turn_retried`` custom event
   listing the void messages and calls); a terminal error ends the stream with the protocol's
   error (AG-UI ``RUN_ERROR``, Vercel ``error``), leaving open the text that was open. On
   Vercel each call whose input was shown and that has no output gets a ``tool-output-error``
   ("taken back: …") first, so the client never keeps a call waiting for an answer.
3. On AG-UI a tool call exists (``TOOL_CALL_START``) only once its turn committed: a started
   call is the custom event ``rxtoolcalls.tool_call_started``, a call started early
   ``rxtoolcalls.tool_call_early``. AG-UI cannot take a call back, and its client refuses
   ``RUN_FINISHED`` while a call is open, so a call of a failed stream must never have been
   opened.
4. Steps are turns: a step opens at the first event of its turn and closes once the turn is
   over (its tools answered, or no tools to run); a retried turn stays in its step.
5. Ids: a call keeps the model's id; one the model did not send yet gets a stand-in
   (``<base>.call<n>``), kept for that call to the end, also when the real id comes. A complete
   call is the started one of its choice and index (the same id, else the first one not
   complete: a lenient policy may rename a call at commit). AG-UI ids are unique in the
   thread: a model id seen before in the run (an id reused by a later turn, or by the retry of
   a turn) or held by the client (``taken_ids``) gets a suffix (``<id>~<n>``); Vercel ids are
   unique in their step, the same way.
6. A source error is the protocol's error event, then completion: a browser reads it as the
   run's end. The mapping's own errors (an event it cannot read, ``error_text`` raising) go
   to ``on_error``. What the browser reads of an error is safe by default: its type, a sentence
   of ours, a short code; never the error's own text (``_default_error_text``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

from reactivex import Observable, abc
from reactivex import operators as ops
from reactivex.notification import Notification, OnError

from ._errors import (
    ContentFilteredError,
    InvalidArgumentsError,
    LimitExceededError,
    MalformedChunkError,
    MultipleChoicesError,
    ProviderError,
    StreamInterruptedError,
    ToolCallStreamError,
    TruncatedToolCallError,
    UnknownToolError,
)
from ._lift import Fail, Stage, lift
from ._types import (
    AssistantTurn,
    TextDelta,
    ToolCall,
    ToolCallCommitted,
    ToolCallField,
    ToolCallProgress,
    ToolCallStarted,
    ToolCallText,
    _finite,
    call_input,
)
from .agent import (
    Conversation,
    ToolCallEarly,
    ToolCallFinished,
    ToolCallRetracted,
    ToolExecutionError,
    TurnFinished,
    TurnLimitError,
    TurnRetried,
)

__all__ = [
    "AG_UI_HEADERS",
    "UI_MESSAGE_STREAM_END",
    "UI_MESSAGE_STREAM_HEADERS",
    "UIEvent",
    "ag_ui_sse",
    "to_ag_ui",
    "to_ui_message_stream",
    "ui_message_sse",
]

UIEvent: TypeAlias = (
    "ToolCallStarted | ToolCallProgress | ToolCallField | ToolCallText | ToolCallCommitted"
    " | TextDelta | ToolCallEarly | ToolCallRetracted | TurnRetried | TurnFinished"
    " | ToolCallFinished | Conversation"
)
"""What the UI operators read: ``lifecycle()``'s events and ``agent_loop()``'s."""

AG_UI_HEADERS: Mapping[str, str] = MappingProxyType(
    {"content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no"}
)
"""The headers of an AG-UI response: its SSE content type (what ``ag_ui.encoder`` gives), and
no caching or proxy buffering, so that each event reaches the browser as it is sent."""

UI_MESSAGE_STREAM_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "connection": "keep-alive",
        "x-vercel-ai-ui-message-stream": "v1",
        "x-accel-buffering": "no",
    }
)
"""The headers of a Vercel AI SDK UI message stream response, as the SDK's own
``UI_MESSAGE_STREAM_HEADERS`` (``x-vercel-ai-ui-message-stream: v1`` marks the protocol)."""

UI_MESSAGE_STREAM_END = b"data: [DONE]\n\n"
"""The line that ends a UI message stream, after the last part (``JsonToSseTransformStream``)."""

Part: TypeAlias = dict[str, Any]


def _json(value: object) -> str:
    """``value`` as compact JSON, as ``JSON.stringify`` writes it (NaN and infinities as null)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _sse(value: object) -> bytes:
    r"""``data: {json}`` and a blank line, in UTF-8; a lone surrogate as its ``\uXXXX`` escape.

    JSON allows ``"\ud800"``, UTF-8 does not; the escape decodes to the same code unit, and two
    halves of a pair escaped side by side decode to their character, as ``JSON.parse`` reads
    them. Everything else stays readable UTF-8.
    """
    text = f"data: {_json(value)}\n\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text).encode()


def ag_ui_sse(event: Mapping[str, Any]) -> bytes:
    r"""One AG-UI event as a Server-Sent Event: ``data: {json}`` and a blank line, in UTF-8.

    The JSON is compact, as AG-UI's own encoder writes it; NaN and infinities become ``null``,
    a lone surrogate an escape. Serve it with ``AG_UI_HEADERS``.

    >>> ag_ui_sse({"type": "STEP_STARTED", "stepName": "turn 1"})
    b'data: {"type":"STEP_STARTED","stepName":"turn 1"}\n\n'
    """
    return _sse(event)


def ui_message_sse(part: Mapping[str, Any]) -> bytes:
    r"""One UI message stream part as a Server-Sent Event, as the Vercel AI SDK writes it.

    End the stream with ``UI_MESSAGE_STREAM_END`` after the last part; serve it with
    ``UI_MESSAGE_STREAM_HEADERS``.

    >>> ui_message_sse({"type": "text-delta", "id": "t1", "delta": "Hi"})
    b'data: {"type":"text-delta","id":"t1","delta":"Hi"}\n\n'
    """
    return _sse(part)


# What the browser reads of each of our errors: a sentence written here, never the error's
# message, which may quote what came from outside (an HTTP error's URL with its key, a network
# error's text, a tool's exception). A subclass reads as its nearest listed ancestor.
_SAFE_TEXT: dict[type[BaseException], str] = {
    ToolCallStreamError: "the tool-call stream failed",
    MalformedChunkError: "the provider sent a chunk that breaks its wire's rules",
    MultipleChoicesError: "the stream held more than one choice",
    StreamInterruptedError: "the stream ended before the turn was complete",
    ProviderError: "the provider answered with an error",
    TruncatedToolCallError: "a tool call was cut off",
    ContentFilteredError: "the provider refused the turn",
    InvalidArgumentsError: "a tool call's arguments are not valid",
    LimitExceededError: "the output passed a size limit",
    UnknownToolError: "the model named a tool the request did not declare",
    TurnLimitError: "the model still asked for tools after the last turn allowed",
    ToolExecutionError: "a tool could not run",
}
_SAFE_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


def _safe_code(code: object) -> str | None:
    """A provider error's code when it is a status or a short name, else ``None``."""
    if type(code) is int and 0 <= code < 10_000:
        return str(code)
    if isinstance(code, str) and _SAFE_CODE.fullmatch(code):
        return code
    return None


def _default_error_text(error: BaseException) -> str:
    """What the browser is told of an error: its type and, for ours, a sentence written here.

    Never the error's message: an HTTP error's holds its URL (a key in ``?key=``), a network
    error's the address, a tool's exception whatever the tool put in it. A ``ProviderError``
    adds its ``code`` when it is a status or a short name (``503``, ``overloaded_error``).

    >>> _default_error_text(ProviderError("HTTP 403 for https://x.test/?key=secret", code=403))
    'ProviderError: the provider answered with an error (code 403)'
    >>> _default_error_text(RuntimeError("postgres://admin:hunter2@db"))
    "RuntimeError (details are in the server's log)"
    """
    name = type(error).__name__
    sentence = next((_SAFE_TEXT[t] for t in type(error).__mro__ if t in _SAFE_TEXT), None)
    if sentence is None:
        return f"{name} (details are in the server's log)"
    code = _safe_code(error.code) if isinstance(error, ProviderError) else None
    return f"{name}: {sentence}" + ("" if code is None else f" (code {code})")


# -- the rules, once ----------------------------------------------------------------------


@dataclass(slots=True)
class _Call:
    """One call of the turn's current stream as the browser sees it."""

    choice: int
    index: int
    model_id: str | None
    ui_id: str
    name: str
    started: bool = False
    """Its start was sent (AG-UI: the custom event; Vercel: ``tool-input-start``)."""
    early: bool = False
    """It was started early (``ToolCallEarly``): AG-UI shows it only as its custom event."""
    complete: bool = False
    """Its whole input was sent."""
    arguments: str | None = None
    """The arguments its input showed (``None`` before)."""
    answered: bool = False
    """Its output was sent."""


@dataclass(slots=True)
class _Segment:
    """Prose being streamed: ``kind`` is ``"text"`` (answer, refusal) or ``"reasoning"``."""

    choice: int
    kind: str
    id: str


class _Mapper:
    """One subscription's state: turns, steps, calls and prose, whatever the protocol.

    ``feed`` takes one event and returns what to send; so do ``opened`` (at subscription),
    ``failed`` (the source's error) and ``completed``. A protocol renders through the hooks.
    ``base`` is the run's id (AG-UI ``runId``) or the message's (Vercel ``messageId``);
    generated ids start with it.
    """

    def __init__(self, base: str, error_text: Callable[[BaseException], str] | None) -> None:
        self.base = base
        self.error_text = error_text or _default_error_text
        self.out: list[Part] = []
        # idle | streaming | dispatch (tools running) | over (step closed) | ended (run over)
        self.phase = "idle"
        self.turn = 0
        self.calls: list[_Call] = []
        self.segments: dict[int, _Segment] = {}
        self.streamed: set[tuple[int, str]] = set()  # (choice, kind) that came as TextDelta
        self.awaiting: set[str] = set()
        self.asked_tools = False
        self.counter = 0
        self.choice = 0  # the choice of the latest event: the agent loop's turns have one
        self.taken: set[str] = set()  # the call ids no new call may get (see ``unique_id``)
        self.used: dict[str, int] = {}  # model id -> the suffix its latest call got

    # -- entry points (each returns what to send) --

    def take(self) -> list[Part]:
        out, self.out = self.out, []
        return out

    def opened(self) -> list[Part]:
        self.run_started()
        return self.take()

    def feed(self, event: object) -> list[Part]:
        handle = _HANDLERS.get(type(event))
        if handle is None:
            handle = next((h for t, h in _HANDLERS.items() if isinstance(event, t)), None)
            if handle is None:
                raise TypeError(
                    f"a UI mapping reads lifecycle() and agent_loop() events, got "
                    f"{type(event).__name__}: pipe the chunks through rt.lifecycle(...) first"
                )
        handle(self, event)
        return self.take()

    def failed(self, error: Exception) -> list[Part]:
        self.phase = "ended"
        message = self.error_text(error)
        for shown in self.unanswered():
            shown.answered = True
            self.taken_back(shown, message)
        self.run_error(error, message)
        return self.take()

    def completed(self) -> list[Part]:
        if self.phase in ("streaming", "dispatch"):
            self.close_step()
        self.phase = "ended"
        self.run_finished()
        return self.take()

    # -- turns and steps --

    def enter(self, turn: int | None = None) -> None:
        """The event belongs to turn ``turn`` (``None``: the one streaming, or the next)."""
        phase = self.phase
        if phase == "streaming":
            return
        if phase == "idle":
            self.open_step(turn or 1)
            return
        if turn is not None and turn <= self.turn:
            return  # late news of a turn already over (a retraction after its finish)
        if phase == "dispatch":
            self.close_step()
        self.open_step(turn if turn is not None else self.turn + 1)

    def open_step(self, turn: int) -> None:
        self.turn = turn
        self.phase = "streaming"
        self.new_stream()
        self.step_started(turn)

    def close_step(self) -> None:
        self.close_segments()
        self.step_finished(self.turn)
        self.phase = "over"

    def new_stream(self) -> None:
        self.calls = []
        self.segments = {}
        self.streamed = set()
        self.awaiting = set()
        self.stream_started()

    def new_id(self, kind: str) -> str:
        self.counter += 1
        return f"{self.base}.{kind}{self.counter}"

    def unique_id(self, model_id: str) -> str:
        """The id a call the model named ``model_id`` gets: its own, else ``<id>~<n>``.

        The first of ``model_id``, ``model_id~2``, … not in ``taken``, which then holds it. What
        ``taken`` spans is the protocol's: AG-UI's the thread (the run and ``taken_ids``),
        Vercel's the step (it starts empty with each stream).
        """
        seen = self.used.get(model_id, 0)
        while True:
            seen += 1
            ui_id = model_id if seen == 1 else f"{model_id}~{seen}"
            if ui_id not in self.taken:
                break
        self.used[model_id] = seen
        self.taken.add(ui_id)
        return ui_id

    # -- prose --

    def delta(self, choice: int, kind: str, text: str) -> None:
        group = "reasoning" if kind == "reasoning" else "text"
        segment = self.segments.get(choice)
        if segment is None or segment.kind != group:
            if segment is not None:
                self.segment_closed(segment)
            segment = self.segments[choice] = _Segment(
                choice, group, self.segment_id(choice, group)
            )
            self.segment_opened(segment)
        self.segment_delta(segment, text)

    def close_segments(self, choice: int | None = None) -> None:
        for at, segment in list(self.segments.items()):
            if choice is None or at == choice:
                del self.segments[at]
                self.segment_closed(segment)

    # -- calls --

    def find(self, choice: int, index: int, model_id: str | None) -> _Call | None:
        """The call a streaming event names: the same id, else the latest at its index without one.

        Without one: a call whose id came late, or an event sent before its call's id.
        """
        found = None
        for call in reversed(self.calls):
            if call.choice != choice or call.index != index:
                continue
            if model_id is not None and call.model_id == model_id:
                return call
            if found is None and (call.model_id is None or model_id is None):
                found = call
        return found

    def add(self, choice: int, index: int, model_id: str | None, name: str) -> _Call:
        ui_id = self.new_id("call") if model_id is None else self.unique_id(model_id)
        call = _Call(choice, index, model_id, ui_id, name)
        self.calls.append(call)
        return call

    def of(self, call: ToolCall, choice: int) -> _Call:
        """The call a complete call is, which takes its id (the one its answer will name).

        The same id at its choice and index, else the first there not complete yet (a lenient
        policy renames a repeated id at commit), else a new one.
        """
        same = pending = None
        for shown in self.calls:
            if shown.choice != choice or shown.index != call.index:
                continue
            if shown.model_id == call.id:
                same = shown
            elif pending is None and not (shown.complete or shown.early):
                pending = shown
        found = same or pending
        if found is None:
            return self.add(choice, call.index, call.id, call.name)
        found.model_id = call.id
        return found

    def locate(self, call: ToolCall) -> _Call | None:
        """The call an agent loop's event names, which says no choice.

        The same index and id, in the turn's choice first; else as a streaming event finds it.
        """
        same = [
            shown for shown in self.calls if (shown.index, shown.model_id) == (call.index, call.id)
        ]
        mine = [shown for shown in same if shown.choice == self.choice]
        if mine or same:
            return (mine or same)[-1]
        return self.find(self.choice, call.index, call.id)

    def make_available(self, shown: _Call, call: ToolCall) -> None:
        if not shown.complete:
            shown.complete = True
            shown.arguments = call.arguments
            self.input_available(shown, call)
        elif (shown.arguments or "").rstrip() != call.arguments.rstrip():
            # Committed with other arguments than it started early with (final ones won).
            shown.arguments = call.arguments
            self.input_changed(shown, call)

    def unanswered(self) -> list[_Call]:
        """The calls of this stream whose input was shown and that have no output."""
        return [shown for shown in self.calls if shown.complete and not shown.answered]

    # -- the events --

    def on_started(self, event: ToolCallStarted) -> None:
        self.enter()
        self.choice = event.choice_index
        shown = self.add(event.choice_index, event.index, event.id, event.name)
        shown.started = True
        self.call_started(shown)

    def on_progress(self, event: ToolCallProgress) -> None:
        self.enter()
        shown = self.find(event.choice_index, event.index, event.id)
        if shown is not None:
            progress = {"characters": event.characters, "fragments": event.fragments}
            self.call_data(shown.ui_id, shown.name, "progress", progress)

    def on_field(self, event: ToolCallField) -> None:
        self.enter()
        shown = self.find(event.choice_index, event.index, event.id)
        if shown is not None:
            field = {"path": list(event.path), "value": event.value}
            self.call_data(shown.ui_id, shown.name, "field", field)

    def on_text(self, event: ToolCallText) -> None:
        self.enter()
        shown = self.find(event.choice_index, event.index, event.id)
        if shown is not None:
            text = {"path": list(event.path), "text": event.text}
            self.call_data(shown.ui_id, shown.name, "text", text)

    def on_text_delta(self, event: TextDelta) -> None:
        self.enter()
        self.choice = event.choice_index
        self.streamed.add((event.choice_index, event.kind))
        self.delta(event.choice_index, event.kind, event.text)

    def on_committed(self, event: ToolCallCommitted) -> None:
        self.enter()
        self.choice = event.choice_index
        self.close_segments(event.choice_index)  # the turn validated: its prose is whole
        self.asked_tools = True
        self.make_available(self.of(event.call, event.choice_index), event.call)

    def on_early(self, event: ToolCallEarly) -> None:
        self.enter(event.turn)
        shown = self.locate(event.call) or self.of(event.call, self.choice)
        shown.model_id = event.call.id
        if not (shown.early or shown.complete):
            shown.early = True
            self.call_early(shown, event.call)

    def on_turn_finished(self, event: TurnFinished) -> None:
        self.enter(event.turn)
        turn = event.assistant
        choice = self.choice = turn.choice_index
        self.close_segments()
        self.backfill(turn)
        shown = [self.of(call, choice) for call in turn.tool_calls]
        for entry, call in zip(shown, turn.tool_calls, strict=True):
            self.make_available(entry, call)
        self.asked_tools = bool(shown)
        if shown and not turn.needs_continuation:
            self.phase = "dispatch"
            self.awaiting = {entry.ui_id for entry in shown}
        else:
            self.close_step()

    def backfill(self, turn: AssistantTurn) -> None:
        """The turn's prose that did not stream as ``TextDelta`` (``text=False``), whole."""
        choice = turn.choice_index
        for kind, text in (
            ("reasoning", turn.reasoning),
            ("content", turn.content),
            ("refusal", turn.refusal),
        ):
            if text and (choice, kind) not in self.streamed:
                self.delta(choice, kind, text)
        self.close_segments(choice)

    def on_finished(self, event: ToolCallFinished) -> None:
        call = event.call
        shown = None
        if self.phase == "dispatch":
            shown = self.find(self.choice, call.index, call.id)
        if shown is None:
            # A call this run never showed: a resumed turn's, which the client sent back.
            shown = _Call(self.choice, call.index, call.id, self.held_id(call.id), call.name)
            self.calls.append(shown)
            self.answered_unseen(shown, call)
        shown.answered = True
        self.tool_result(shown, event.content, event.error)
        self.awaiting.discard(shown.ui_id)
        if self.phase == "dispatch" and not self.awaiting:
            self.close_step()

    def on_retracted(self, event: ToolCallRetracted) -> None:
        self.enter(event.turn)
        call = event.call
        shown = self.locate(call)
        ui_id = call.id if shown is None else shown.ui_id
        retracted = {"reason": event.reason, "cancelled": event.cancelled}
        self.call_data(ui_id, call.name, "retracted", retracted)
        if shown is not None and self.phase == "over" and shown.complete and not shown.answered:
            # Its turn is over without running it (a paused turn): no answer comes.
            shown.answered = True
            self.taken_back(shown, event.reason)

    def on_retried(self, event: TurnRetried) -> None:
        self.enter(event.turn)
        error = event.error
        retry: dict[str, Any] = {
            "turn": event.turn,
            "attempt": event.attempt,
            "code": type(error).__name__,
            "message": self.error_text(error),
        }
        if event.max_tokens is not None:
            retry["maxTokens"] = event.max_tokens
        self.turn_retried(retry)
        self.phase = "streaming"
        self.new_stream()

    def on_conversation(self, event: Conversation) -> None:
        """The loop's last event: what it holds was shown already."""

    # -- what a protocol renders --

    def run_started(self) -> None:
        raise NotImplementedError

    def run_finished(self) -> None:
        raise NotImplementedError

    def run_error(self, error: Exception, message: str) -> None:
        raise NotImplementedError

    def step_started(self, turn: int) -> None:
        raise NotImplementedError

    def step_finished(self, turn: int) -> None:
        raise NotImplementedError

    def stream_started(self) -> None:
        """A new stream of the turn (its first, or a retry): ids of the void one are done."""

    def segment_id(self, choice: int, kind: str) -> str:
        return self.new_id(kind)

    def segment_opened(self, segment: _Segment) -> None:
        raise NotImplementedError

    def segment_delta(self, segment: _Segment, text: str) -> None:
        raise NotImplementedError

    def segment_closed(self, segment: _Segment) -> None:
        raise NotImplementedError

    def held_id(self, model_id: str) -> str:
        """The id of a call the client holds already (a resumed turn's): the model's own."""
        return model_id

    def call_started(self, call: _Call) -> None:
        raise NotImplementedError

    call_prefix = ""
    """What a call's extension is named before its kind (AG-UI ``tool_call_progress``)."""

    def extension(self, name: str, value: dict[str, Any]) -> None:
        """What the protocol has no part for, as its extension named ``rxtoolcalls…<name>``."""
        raise NotImplementedError

    def call_data(self, ui_id: str, name: str, kind: str, data: dict[str, Any]) -> None:
        """News of one call (its progress, a field, its retraction…) as an extension."""
        self.extension(self.call_prefix + kind, {"toolCallId": ui_id, "toolCallName": name, **data})

    def input_available(self, shown: _Call, call: ToolCall) -> None:
        raise NotImplementedError

    def input_changed(self, shown: _Call, call: ToolCall) -> None:
        """A call shown early was committed with other arguments: its input again."""

    def call_early(self, shown: _Call, call: ToolCall) -> None:
        """A call complete before its turn (``ToolCallEarly``), its tool starting."""
        self.make_available(shown, call)

    def taken_back(self, shown: _Call, why: str) -> None:
        """A call whose input was shown will never be answered."""

    def answered_unseen(self, shown: _Call, call: ToolCall) -> None:
        """A call answered that this run never showed: its input first, by default."""
        self.make_available(shown, call)

    def tool_result(self, call: _Call, content: str, error: Exception | None) -> None:
        raise NotImplementedError

    def turn_retried(self, retry: dict[str, Any]) -> None:
        raise NotImplementedError


_HANDLERS: dict[type, Callable[[_Mapper, Any], None]] = {
    TextDelta: _Mapper.on_text_delta,
    ToolCallStarted: _Mapper.on_started,
    ToolCallProgress: _Mapper.on_progress,
    ToolCallField: _Mapper.on_field,
    ToolCallText: _Mapper.on_text,
    ToolCallCommitted: _Mapper.on_committed,
    ToolCallEarly: _Mapper.on_early,
    TurnFinished: _Mapper.on_turn_finished,
    ToolCallFinished: _Mapper.on_finished,
    ToolCallRetracted: _Mapper.on_retracted,
    TurnRetried: _Mapper.on_retried,
    Conversation: _Mapper.on_conversation,
}


# -- AG-UI ----------------------------------------------------------------------------------


class _AgUi(_Mapper):
    def __init__(
        self,
        thread_id: str,
        run_id: str,
        error_text: Callable[[BaseException], str] | None,
        taken_ids: Collection[str],
    ) -> None:
        super().__init__(run_id, error_text)
        self.thread_id = thread_id
        self.taken = set(taken_ids)  # every call id the client holds, or this run gave
        self.messages: dict[int, str] = {}  # the assistant message of each choice, this stream
        self.void_messages: list[str] = []
        self.void_calls: list[str] = []

    call_prefix = "tool_call_"

    def extension(self, name: str, value: dict[str, Any]) -> None:
        self.out.append({"type": "CUSTOM", "name": f"rxtoolcalls.{name}", "value": value})

    def message_id(self, choice: int) -> str:
        found = self.messages.get(choice)
        if found is None:
            found = self.messages[choice] = self.new_id("msg")
            self.void_messages.append(found)
        return found

    def run_started(self) -> None:
        self.out.append({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.base})

    def run_finished(self) -> None:
        self.out.append({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.base})

    def run_error(self, error: Exception, message: str) -> None:
        self.out.append({"type": "RUN_ERROR", "message": message, "code": type(error).__name__})

    def step_started(self, turn: int) -> None:
        self.out.append({"type": "STEP_STARTED", "stepName": f"turn {turn}"})

    def step_finished(self, turn: int) -> None:
        self.out.append({"type": "STEP_FINISHED", "stepName": f"turn {turn}"})

    def stream_started(self) -> None:
        self.messages = {}
        self.void_messages = []
        self.void_calls = []

    def segment_id(self, choice: int, kind: str) -> str:
        if kind == "text":
            return self.message_id(choice)
        found = self.new_id("reasoning")
        self.void_messages.append(found)
        return found

    def segment_opened(self, segment: _Segment) -> None:
        if segment.kind == "text":
            self.out.append(
                {"type": "TEXT_MESSAGE_START", "messageId": segment.id, "role": "assistant"}
            )
        else:
            self.out += [
                {"type": "REASONING_START", "messageId": segment.id},
                {"type": "REASONING_MESSAGE_START", "messageId": segment.id, "role": "reasoning"},
            ]

    def segment_delta(self, segment: _Segment, text: str) -> None:
        kind = "TEXT_MESSAGE_CONTENT" if segment.kind == "text" else "REASONING_MESSAGE_CONTENT"
        self.out.append({"type": kind, "messageId": segment.id, "delta": text})

    def segment_closed(self, segment: _Segment) -> None:
        if segment.kind == "text":
            self.out.append({"type": "TEXT_MESSAGE_END", "messageId": segment.id})
        else:
            self.out += [
                {"type": "REASONING_MESSAGE_END", "messageId": segment.id},
                {"type": "REASONING_END", "messageId": segment.id},
            ]

    def held_id(self, model_id: str) -> str:
        self.used.setdefault(model_id, 1)
        self.taken.add(model_id)
        return model_id

    def void(self, call: _Call) -> None:
        """``call`` was named in this stream: a retry lists it as void."""
        if call.ui_id not in self.void_calls:
            self.void_calls.append(call.ui_id)

    def call_started(self, call: _Call) -> None:
        self.void(call)
        parent = {"parentMessageId": self.message_id(call.choice)}
        self.call_data(call.ui_id, call.name, "started", parent)

    def call_early(self, shown: _Call, call: ToolCall) -> None:
        # Not a TOOL_CALL_START: its turn may still fail, and AG-UI cannot take a call back.
        self.void(shown)
        self.call_data(shown.ui_id, call.name, "early", {"input": call_input(call)})

    def input_available(self, shown: _Call, call: ToolCall) -> None:
        self.void(shown)
        self.out += [
            {
                "type": "TOOL_CALL_START",
                "toolCallId": shown.ui_id,
                "toolCallName": call.name,
                "parentMessageId": self.message_id(shown.choice),
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": shown.ui_id, "delta": call.arguments},
            {"type": "TOOL_CALL_END", "toolCallId": shown.ui_id},
        ]

    def answered_unseen(self, shown: _Call, call: ToolCall) -> None:
        # The client holds the call it sent back: a second start would add its arguments to
        # the ones it has (AG-UI's client appends TOOL_CALL_ARGS to the call of that id).
        shown.complete = True

    def tool_result(self, call: _Call, content: str, error: Exception | None) -> None:
        self.out.append(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": self.new_id("result"),
                "toolCallId": call.ui_id,
                "content": content,
                "role": "tool",
            }
        )
        if error is not None:
            self.call_data(call.ui_id, call.name, "failed", {"code": type(error).__name__})

    def turn_retried(self, retry: dict[str, Any]) -> None:
        self.close_segments()
        retry["messageIds"] = list(self.void_messages)
        retry["toolCallIds"] = list(self.void_calls)
        self.extension("turn_retried", retry)


def to_ag_ui(
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    error_text: Callable[[BaseException], str] | None = None,
    taken_ids: Collection[str] = (),
) -> Callable[[Observable[UIEvent]], Observable[dict[str, Any]]]:
    """The events of ``lifecycle()`` or ``agent_loop()`` as AG-UI events, in one subscription.

    ``Observable[UIEvent] -> Observable[dict]``: each event a dict in AG-UI's JSON shape
    (camelCase keys, ``type`` as ``"TOOL_CALL_START"``), ready for ``ag_ui_sse``. The run is
    framed by ``RUN_STARTED`` (at subscription) and ``RUN_FINISHED``; each turn is a step
    ``"turn <n>"``; prose is a text message (its assistant message, which also holds the
    turn's calls) or a reasoning message; a call is ``TOOL_CALL_START``, its whole arguments
    in one ``TOOL_CALL_ARGS``, ``TOOL_CALL_END``, once its turn committed, and
    ``TOOL_CALL_RESULT`` when its tool answered::

        events:  ----started----field---(committed,|)      lifecycle(fields=True)
        output:  R---(S,C)------C-------(T,A,E,s,F,|)

    (R ``RUN_STARTED`` at subscription, S ``STEP_STARTED "turn 1"``, C ``CUSTOM``, T A E the
    call's start, arguments and end, s ``STEP_FINISHED``, F ``RUN_FINISHED``.)

    What AG-UI has no event for comes as ``CUSTOM`` events named ``rxtoolcalls.…``: a call
    started, its progress, fields and text, a call whose tool started early (with its whole
    input: AG-UI cannot take back a call its turn then fails), a tool that failed, a call
    taken back, a turn streamed again (with the ids of the messages and calls it voids). A
    source error is one ``RUN_ERROR`` (``message`` from ``error_text``, by default only the
    error's type and a sentence the library wrote, never the error's own text: pass
    ``error_text=str`` for it; ``code`` the error's type), then completion; an element that is
    none of ``UIEvent`` (a raw chunk) is a ``TypeError`` sent to ``on_error``. ``thread_id``
    and ``run_id`` are those of the client's ``RunAgentInput`` (new ones per subscription when
    not given); generated ids start with the run id. ``taken_ids``: the call ids the client
    holds (its messages' ``toolCalls``); a model id among them gets a suffix (``call_0~2``), as
    one repeated within the run does. Mapping tables: the manual's "UI protocols" page.

    >>> import reactivex
    >>> from reactivex import operators as ops
    >>> from rxtoolcalls import lifecycle
    >>> chunks = [
    ...     {"choices": [{"delta": {"content": "Hi"}}]},
    ...     {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1",
    ...         "function": {"name": "f", "arguments": "{}"}}]}}]},
    ...     {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ... ]
    >>> events = reactivex.from_iterable(chunks).pipe(
    ...     lifecycle(text=True), to_ag_ui(run_id="r"), ops.to_list()).run()
    >>> [event["type"] for event in events]  # doctest: +NORMALIZE_WHITESPACE
    ['RUN_STARTED', 'STEP_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'CUSTOM',
     'TEXT_MESSAGE_END', 'TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END',
     'STEP_FINISHED', 'RUN_FINISHED']

    Cost: a few dicts per event. The alternative for a Vercel AI SDK frontend:
    ``to_ui_message_stream()``.
    """

    def make() -> _Mapper:
        return _AgUi(
            thread_id if thread_id is not None else f"thread_{uuid.uuid4().hex}",
            run_id if run_id is not None else f"run_{uuid.uuid4().hex}",
            error_text,
            taken_ids,
        )

    return _operator(make)


# -- Vercel AI SDK UI message stream -----------------------------------------------------


class _UiMessages(_Mapper):
    def __init__(
        self, message_id: str, dynamic: bool, error_text: Callable[[BaseException], str] | None
    ) -> None:
        super().__init__(message_id, error_text)
        self.dynamic = dynamic

    def tool(self, part: Part) -> Part:
        if self.dynamic:
            part["dynamic"] = True
        return part

    def extension(self, name: str, value: dict[str, Any]) -> None:
        self.out.append({"type": f"data-rxtoolcalls-{name}", "data": value, "transient": True})

    def run_started(self) -> None:
        self.out.append({"type": "start", "messageId": self.base})

    def run_finished(self) -> None:
        reason = "tool-calls" if self.asked_tools else "stop"
        self.out.append({"type": "finish", "finishReason": reason})

    def run_error(self, error: Exception, message: str) -> None:
        self.out += [
            {"type": "error", "errorText": message},
            {"type": "finish", "finishReason": "error"},
        ]

    def step_started(self, turn: int) -> None:
        self.out.append({"type": "start-step"})

    def stream_started(self) -> None:
        # The client finds a call by id in its step: two calls of one step (two choices, an
        # id a lenient policy renames at commit) must not share one.
        self.taken = set()
        self.used = {}

    def step_finished(self, turn: int) -> None:
        self.out.append({"type": "finish-step"})

    def segment_opened(self, segment: _Segment) -> None:
        self.out.append({"type": f"{segment.kind}-start", "id": segment.id})

    def segment_delta(self, segment: _Segment, text: str) -> None:
        self.out.append({"type": f"{segment.kind}-delta", "id": segment.id, "delta": text})

    def segment_closed(self, segment: _Segment) -> None:
        self.out.append({"type": f"{segment.kind}-end", "id": segment.id})

    def call_started(self, call: _Call) -> None:
        part = {"type": "tool-input-start", "toolCallId": call.ui_id, "toolName": call.name}
        self.out.append(self.tool(part))

    def input_available(self, shown: _Call, call: ToolCall) -> None:
        part = {
            "type": "tool-input-available",
            "toolCallId": shown.ui_id,
            "toolName": call.name,
            "input": call_input(call),
        }
        self.out.append(self.tool(part))

    def input_changed(self, shown: _Call, call: ToolCall) -> None:
        self.input_available(shown, call)  # the client updates the part's input

    def taken_back(self, shown: _Call, why: str) -> None:
        part = {
            "type": "tool-output-error",
            "toolCallId": shown.ui_id,
            "errorText": f"taken back: {why}",
        }
        self.out.append(self.tool(part))

    def tool_result(self, call: _Call, content: str, error: Exception | None) -> None:
        if error is None:
            part = {"type": "tool-output-available", "toolCallId": call.ui_id, "output": content}
        else:
            part = {"type": "tool-output-error", "toolCallId": call.ui_id, "errorText": content}
        self.out.append(self.tool(part))

    def turn_retried(self, retry: dict[str, Any]) -> None:
        # The client drops the step's parts, its open text and its partial calls: none is ended.
        self.extension("turn-retried", retry)
        self.out.append({"type": "reset-step"})


def to_ui_message_stream(
    *,
    message_id: str | None = None,
    dynamic: bool = False,
    error_text: Callable[[BaseException], str] | None = None,
) -> Callable[[Observable[UIEvent]], Observable[dict[str, Any]]]:
    """The events of ``lifecycle()`` or ``agent_loop()`` as Vercel AI SDK UI message parts.

    ``Observable[UIEvent] -> Observable[dict]``: each part a dict in the UI message stream's
    JSON shape (``{"type": "tool-input-start", "toolCallId": …, "toolName": …}``), ready for
    ``ui_message_sse``; send ``UI_MESSAGE_STREAM_END`` after the last. The message is framed
    by ``start`` (at subscription, with ``message_id``, new per subscription when not given)
    and ``finish``; each turn is a step (``start-step``, ``finish-step``); prose is
    ``text-*`` or ``reasoning-*`` parts; a call is ``tool-input-start`` when named,
    ``tool-input-available`` with its whole input once complete, then
    ``tool-output-available`` or ``tool-output-error``::

        events:  ----started----field---(committed,|)      lifecycle(fields=True)
        output:  s---(S,i)------d-------(a,F,f,|)

    (s ``start`` at subscription, S ``start-step``, i ``tool-input-start``, d a data part,
    a ``tool-input-available``, F ``finish-step``, f ``finish``.)

    Fields, argument text, progress, retractions and retries come as transient data parts
    ``data-rxtoolcalls-…`` (``useChat``'s ``onData`` sees them; they stay out of the
    message). A retried turn is a ``reset-step``: the client drops the step's parts. A source
    error is an ``error`` part (``errorText`` from ``error_text``, by default only the error's
    type and a sentence the library wrote: pass ``error_text=str`` for its own text), then
    ``finish`` with ``finishReason: "error"``; before it, each call whose input was shown and
    that has no output gets ``tool-output-error`` ("taken back: …"). An element that is none
    of ``UIEvent`` (a raw chunk) is a ``TypeError`` sent to ``on_error``.
    ``dynamic=True`` marks tool parts ``dynamic`` (``dynamic-tool`` parts in the client, for
    tools it does not declare). Mapping tables: the manual's "UI protocols" page.

    >>> import reactivex
    >>> from reactivex import operators as ops
    >>> from rxtoolcalls import lifecycle
    >>> chunks = [
    ...     {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1",
    ...         "function": {"name": "f", "arguments": "{}"}}]}}]},
    ...     {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ... ]
    >>> parts = reactivex.from_iterable(chunks).pipe(
    ...     lifecycle(), to_ui_message_stream(message_id="m"), ops.to_list()).run()
    >>> [part["type"] for part in parts]  # doctest: +NORMALIZE_WHITESPACE
    ['start', 'start-step', 'tool-input-start', 'tool-input-available', 'finish-step',
     'finish']

    Cost: a few dicts per event. The alternative for an AG-UI frontend: ``to_ag_ui()``.
    """

    def make() -> _Mapper:
        given = message_id if message_id is not None else f"msg_{uuid.uuid4().hex}"
        return _UiMessages(given, dynamic, error_text)

    return _operator(make)


# -- the Rx skin ------------------------------------------------------------------------------

_OPEN = object()  # sent first: the run's opening events go out at subscription


def _operator(
    make: Callable[[], _Mapper],
) -> Callable[[Observable[UIEvent]], Observable[dict[str, Any]]]:
    """A mapper per subscription; the source's notifications, its error too, are its input."""

    def make_stage(observer: abc.ObserverBase[Part], fail: Fail) -> Stage[Notification[Any]]:
        mapper = make()
        ended = False

        def on_next(note: Notification[Any]) -> None:
            nonlocal ended
            if ended:
                return
            kind = note.kind
            if kind == "N":
                value = note.value
                out = mapper.opened() if value is _OPEN else mapper.feed(value)
            else:
                ended = True
                if isinstance(note, OnError):
                    out = mapper.failed(note.exception)
                else:
                    out = mapper.completed()
            for item in out:
                observer.on_next(item)
            if ended:
                observer.on_completed()

        def on_completed() -> None:
            """The materialized source ends right after its last notification, handled."""

        return Stage(on_next, on_completed)

    lifted = lift(make_stage)

    def operator(source: Observable[UIEvent]) -> Observable[dict[str, Any]]:
        opened: Observable[Any] = source
        return lifted(opened.pipe(ops.start_with(_OPEN), ops.materialize()))

    return operator
