"""The Anthropic Messages wire: ``message_start`` … ``message_stop`` events onto the core.

Rules (``AnthropicReader.feed``):

1. An event is a dict (the SSE ``data``, parsed) or an anthropic SDK ``RawMessageStreamEvent``;
   dispatch is on ``data["type"]``, never on the SSE event name. ``ping`` may come anywhere,
   even between two deltas of one block; unknown event and delta types are ignored.
2. Blocks are keyed by their ``index``. A second start at one index, or a delta or stop for an
   index never started, is a ``MalformedChunkError``.
3. A ``tool_use`` block is a call: ``id`` (``toolu_…``) and ``name`` come with its start; the
   ``input: {}`` there is a placeholder. The input is the ``input_json_delta.partial_json``
   pieces joined; none at all is ``{}`` (an input sent whole in the start is taken as it is).
4. ``server_tool_use`` and ``mcp_tool_use`` stream their input the same way but are run by
   the server: parsed, kept in ``items`` with their result blocks, never dispatched.
5. ``thinking`` (with its ``signature``) and ``redacted_thinking`` are kept verbatim in
   ``items``; thinking text is also ``reasoning``. Text blocks become ``content``; their
   ``citations`` are kept.
6. Stop reasons are the turn's ``finish_reason``: ``tool_use``, ``end_turn``,
   ``stop_sequence``, ``pause_turn`` (``needs_continuation``) and ``compaction`` emit;
   ``max_tokens`` and ``model_context_window_exceeded`` are a token ceiling (a call in the
   turn makes it a ``TruncatedToolCallError``); ``refusal`` is a ``ContentFilteredError``. A
   tool block without ``content_block_stop`` is a ``TruncatedToolCallError``, whatever the stop
   reason says.
7. ``error`` (``overloaded_error``, ``api_error``, ``rate_limit_error`` …) is a
   ``ProviderError`` with ``retryable``; an end without ``message_stop`` is a
   ``StreamInterruptedError``; an event after it is a ``MalformedChunkError``.
8. An event of another wire (``choices``, a ``response.*`` type) is a ``MalformedChunkError``.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from reactivex import Observable

from .._block_transcript import BlockShape, transcript
from .._blocks import Block, Blocks
from .._core import (
    _NO_EVENTS,
    as_dict,
    as_object,
    attr,
    event_dict,
)
from .._errors import MalformedChunkError, ProviderError, excerpt, provider_error, status_error
from .._sse import SSE_NAMED
from .._types import (
    AssistantTurn,
    ToolCall,
    ToolCallStarted,
    no_made_up_ids,
)
from .._wire import CANCELLED, Client, Request, Route, WireSpec, functions, given, prompt_as_text
from ..sources import _async_sdk, _is_manager, _sync_sdk

__all__ = [
    "WIRE",
    "AnthropicReader",
    "from_anthropic_stream",
    "from_async_anthropic_stream",
    "identifies",
]

_TYPES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
    }
)
_SERVER_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})
# Stop reasons in Chat Completions terms, for the core's finish rules.
_OUTCOMES = {
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def identifies(event: object) -> bool:
    """Whether an event's ``type`` is one of this wire's."""
    kind = attr(event, "type")
    return type(kind) is str and kind in _TYPES


def to_message(turn: AssistantTurn, empty_content: str | None) -> dict[str, Any]:
    """``{"role": "assistant", "content": [blocks]}``, reasoning and server blocks verbatim."""
    blocks = [
        dict(block)
        for block in turn.items
        # The API refuses empty text blocks; a stream may open one and send nothing.
        if not (block.get("type") == "text" and not block.get("text"))
    ]
    return {"role": "assistant", "content": blocks}


def tool_messages(
    turn: AssistantTurn, values: list[object], texts: list[str]
) -> list[dict[str, Any]]:
    """One user message of ``tool_result`` blocks, ``is_error`` on a failure."""
    blocks: list[dict[str, Any]] = []
    for call, value, text in zip(turn.tool_calls, values, texts, strict=True):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id, "content": text}
        if isinstance(value, BaseException):
            block["is_error"] = True
        blocks.append(block)
    return [{"role": "user", "content": blocks}] if blocks else []


def _render_call(block: dict[str, Any]) -> Callable[[ToolCall], dict[str, Any]]:
    def render(call: ToolCall) -> dict[str, Any]:
        return {**block, "id": call.id, "input": call.parsed_arguments}

    return render


class _Blocks(Blocks):
    """Content blocks and the calls among them: start, deltas, stop."""

    __slots__ = ()

    def _index(self, data: dict[str, Any]) -> int:
        return self.key_of(data, "index", data.get("type"))

    def _start(self, data: dict[str, Any]) -> Sequence[ToolCallStarted]:
        index = self._index(data)
        block = data.get("content_block")
        if not isinstance(block, dict):
            raise MalformedChunkError(
                f"content_block_start {index}: content_block must be an object", index=index
            )
        kind = block.get("type")
        if type(kind) is not str:
            raise MalformedChunkError(
                f"content_block_start {index}: the block's type must be a string, got "
                f"{excerpt(kind, 40)}",
                index=index,
            )
        if kind == "text" or kind == "thinking":
            self._check_text_start(index, block, kind)
        is_call = kind == "tool_use" or kind in _SERVER_CALLS
        begun = self.begin(index, kind, block, "content_block_start", call=is_call)
        if not is_call:
            text = block.get(kind)
            if text:
                # Text sent in the start counts as streamed: the first piece of the block.
                slot = "content" if kind == "text" else "reasoning"
                self.write_text(begun, None, slot, kind, text)
            return _NO_EVENTS
        _, started = self.open_call(
            index, block.get("id"), block.get("name"), id_field="id", server=kind in _SERVER_CALLS
        )
        return started

    def _check_text_start(self, index: int, block: dict[str, Any], kind: str) -> None:
        for field, expected in ((kind, str), ("signature", str), ("citations", list)):
            value = block.get(field)
            if value is not None and type(value) is not expected:
                raise MalformedChunkError(
                    f"content_block_start {index}: a {kind} block's {field} must be a "
                    f"{expected.__name__}, got {type(value).__name__}",
                    index=index,
                )

    def _block(self, data: dict[str, Any]) -> tuple[int, Block]:
        index = self._index(data)
        block = self.block(index, str(data.get("type")))
        if block is None:
            raise MalformedChunkError(
                f"{data.get('type')} for index {index}, where no block was started",
                index=index,
            )
        return index, block

    def _delta(self, data: dict[str, Any]) -> None:
        index, block = self._block(data)
        delta = data.get("delta")
        if not isinstance(delta, dict):
            raise MalformedChunkError(f"content_block_delta {index}: delta must be an object")
        kind = delta.get("type")
        if kind == "input_json_delta":
            call = self._calls0.get(index)
            if call is None:
                raise MalformedChunkError(
                    f"input_json_delta for block {index}, a {excerpt(block.kind, 40)} "
                    f"block: only tool blocks take input",
                    index=index,
                )
            self._piece(self._choices[0], call, delta.get("partial_json"))
        elif kind == "text_delta" or kind == "thinking_delta":
            field = "text" if kind == "text_delta" else "thinking"
            if block.kind != field:
                raise MalformedChunkError(
                    f"{kind} for block {index}, a {excerpt(block.kind, 40)} block",
                    index=index,
                )
            slot = "content" if field == "text" else "reasoning"
            self.write_text(block, None, slot, kind, delta.get(field))
        elif kind == "signature_delta":
            if not isinstance(block.detail.get("signature") or "", str):
                raise MalformedChunkError(
                    f"signature_delta for block {index}, whose signature is not a string",
                    index=index,
                )
            block.keep(
                "signature", self._charge_text(self._choices[0], kind, delta.get("signature"))
            )
        elif kind == "citations_delta":
            if not isinstance(block.detail.get("citations") or [], list):
                raise MalformedChunkError(
                    f"citations_delta for block {index}, whose citations are not a list",
                    index=index,
                )
            citation = delta.get("citation")
            self.charge_kept(citation, f"citations_delta for block {index}")
            block.keep("citations", citation)

    def _stop(self, data: dict[str, Any]) -> None:
        index, block = self._block(data)
        self.end_block(index, block, block.detail.get("input"), f"tool block {index}")

    def render_call(self, index: int, block: Block) -> Callable[[ToolCall], dict[str, Any]]:
        return _render_call(block.detail)

    def render(self, index: int, block: Block) -> dict[str, Any]:
        rendered = dict(block.detail)
        if block.kind == "text" or block.kind == "thinking":
            # The start's text is the first piece of it (``_start``).
            rendered[block.kind] = block.text()
        signature = block.pieces("signature")
        if signature:
            rendered["signature"] = (rendered.get("signature") or "") + "".join(signature)
        citations = block.pieces("citations")
        if citations:
            rendered["citations"] = [*(rendered.get("citations") or []), *citations]
        return rendered


class AnthropicReader(_Blocks):
    """Reads Anthropic Messages events (rules 1-8)."""

    __slots__ = ()

    wire = "anthropic"

    def feed(self, event: object) -> Sequence[ToolCallStarted]:
        """Apply one event; return the calls it named (usually none)."""
        # Fast path, an input piece of an open tool block: the bulk of a tool call.
        if self._fast:
            call = None
            try:
                if type(event) is dict:
                    delta = event["delta"]
                    if (
                        event["type"] == "content_block_delta"
                        and delta["type"] == "input_json_delta"
                    ):
                        piece = delta["partial_json"]
                        index = event["index"]
                        if type(index) is int:
                            call = self._calls0[index]
                elif event.type == "content_block_delta":  # type: ignore[attr-defined]
                    delta = event.delta  # type: ignore[attr-defined]
                    if delta.type == "input_json_delta":
                        piece = delta.partial_json
                        call = self._calls0[event.index]  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - the full path reads it again and reports
                pass
            if (
                call is not None
                and type(piece) is str
                and call.closed is False
                and self.store_piece(call, piece)
            ):
                return _NO_EVENTS
        return self._slow_feed(event)

    def _feed(self, event: object) -> Sequence[ToolCallStarted]:
        if isinstance(event, str) and event.strip() == "[DONE]":
            return _NO_EVENTS
        data = event_dict(event, "an Anthropic event")
        kind = data.get("type")
        if kind == "error":
            error = data.get("error")
            source = data if (found := as_object(error)) is None else found
            code = source.get("type") if source.get("type") != "error" else None
            raise provider_error(source.get("message") or source, code, data)
        if type(kind) is not str or kind not in _TYPES:
            raise self.foreign(data, "an Anthropic event")
        self.check_open(kind)
        if kind == "ping":
            return _NO_EVENTS
        if kind == "content_block_delta":
            self._delta(data)
            return _NO_EVENTS
        if kind == "content_block_start":
            return self._start(data)
        if kind == "content_block_stop":
            self._stop(data)
        elif kind == "message_start":
            message = data.get("message")
            usage = None if (found := as_object(message)) is None else found.get("usage")
            if usage is not None:
                self.usage = as_dict(usage)
        elif kind == "message_delta":
            self._message_delta(data)
        else:  # message_stop
            reason = self._choices[0].finish_reason
            self.end_message(
                "message_stop", None if reason is None else _OUTCOMES.get(reason, "stop")
            )
        return _NO_EVENTS

    def _message_delta(self, data: dict[str, Any]) -> None:
        delta = data.get("delta")
        state = self._choices[0]
        delta = as_object(delta)
        if delta is not None:
            reason = self._identity(state, None, "stop_reason", delta.get("stop_reason"))
            if reason is not None:
                if state.finish_reason is not None and state.finish_reason != reason:
                    raise MalformedChunkError(
                        f"stop_reason {excerpt(reason)} after {excerpt(state.finish_reason)}"
                    )
                state.finish_reason = reason
        usage = data.get("usage")
        if usage is not None:
            # Cumulative counts: the newest value of each wins, the input counts stay.
            merged = {**(self.usage or {}), **as_dict(usage)}
            if len(merged) > len(self.usage or ()):
                # Only new keys add up across events; a value replaced is bounded by max_event.
                self.charge_kept(merged, "message_delta usage", "usage")
            self.usage = merged


# -- The transcript, the replay server and the SDK ------------------------------------------


def _call_block(block: Mapping[str, Any]) -> tuple[str, object, object] | None:
    call_id = block.get("id")
    if block.get("type") != "tool_use" or not isinstance(call_id, str):
        return None
    return call_id, block.get("name"), block.get("input")


def _result_block(block: Mapping[str, Any]) -> tuple[str | None, object] | None:
    if block.get("type") != "tool_result":
        return None
    call_id = block.get("tool_use_id")
    return (call_id if isinstance(call_id, str) else None), block.get("content")


def _cancelled(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": CANCELLED, "is_error": True}


def _message(
    turns: tuple[AssistantTurn, ...], chunks: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The non-streaming ``message`` a recording stands for."""
    start: dict[str, Any] = next(
        (
            c["message"]
            for c in chunks
            if c.get("type") == "message_start" and isinstance(c.get("message"), dict)
        ),
        {"id": "msg_replay"},
    )
    stop_sequence = None
    usage = dict(start.get("usage") or {})
    for chunk in chunks:
        if chunk.get("type") == "message_delta":
            delta, more = chunk.get("delta"), chunk.get("usage")
            if isinstance(delta, dict):
                stop_sequence = delta.get("stop_sequence", stop_sequence)
            if isinstance(more, dict):
                usage.update(more)
    turn = turns[0]
    return {
        "type": "message",
        "role": "assistant",
        "model": "replay",
        **start,
        "content": turn.to_message()["content"],
        "stop_reason": turn.finish_reason,
        "stop_sequence": stop_sequence,
        "usage": usage,
    }


# Anthropic's error types by status.
_KINDS = {404: "not_found_error", 413: "request_too_large", 502: "api_error"}


def _error_body(status: int, message: str, kind: str, code: object) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": _KINDS.get(status, "invalid_request_error"), "message": message},
    }


def _sdk_error(error: Exception) -> ProviderError | None:
    """The anthropic SDK's ``APIStatusError`` (also raised for an in-band ``error``)."""
    kind = type(error)
    if kind.__module__.startswith("anthropic") and any(
        base.__name__ == "APIStatusError" for base in kind.__mro__
    ):
        return status_error(error)
    return None


def _tool_schemas(tool: Mapping[str, Any]) -> list[tuple[str, object]] | None:
    """``{"name", "input_schema"}``, as the Messages API declares a tool."""
    name = tool.get("name")
    if not isinstance(name, str) or "input_schema" not in tool:
        return None
    return [(name, tool.get("input_schema"))]


def _sdk_stream(value: object, loop: asyncio.AbstractEventLoop | None) -> Observable[Any] | None:
    """An anthropic stream, MessageStream or manager, read by the anthropic sources.

    They leave out the events the manager adds, and enter a manager on each attempt.
    """
    if type(value).__module__.partition(".")[0] != "anthropic" or inspect.isawaitable(value):
        return None
    if isinstance(value, AsyncIterable) or hasattr(value, "__aenter__"):
        return None if loop is None else from_async_anthropic_stream(value, loop=loop)
    if isinstance(value, Iterable) or hasattr(value, "__enter__"):
        return from_anthropic_stream(value)
    return None


MAX_TOKENS = 4096
"""``max_tokens`` sent when none is asked: the Messages API requires one."""
_MODES = {"auto": "auto", "none": "none", "required": "any"}


def _connect(sdk: Any, base_url: str | None) -> tuple[Any, str]:
    key = os.environ.get("ANTHROPIC_API_KEY", "unused")
    client = sdk.Anthropic(api_key=key, base_url=base_url, max_retries=0)
    return client, base_url or str(client.base_url)


def _open(client: Any, ask: Request, messages: list[dict[str, Any]]) -> Any:
    tools = [
        {"name": name, "description": said, "input_schema": schema}
        for name, said, schema in functions(ask)
    ]
    mode = _MODES.get(ask.choice or "")
    choice = {"type": mode} if mode else {"type": "tool", "name": ask.choice}
    return client.messages.create(
        model=ask.model,
        max_tokens=ask.max_tokens or MAX_TOKENS,
        messages=messages,
        stream=True,
        **given(
            system=ask.system,
            tools=tools or None,
            tool_choice=None if ask.choice is None else choice,
            temperature=ask.temperature,
        ),
    )


WIRE = WireSpec(
    name="anthropic",
    title="Anthropic Messages",
    identifies=identifies,
    unwrap=None,
    reader=AnthropicReader,
    terminal=True,
    pause_reasons=frozenset({"pause_turn"}),
    to_message=to_message,
    tool_messages=tool_messages,
    made_up_ids=no_made_up_ids,
    transcript=transcript(
        BlockShape(
            call=_call_block,
            result=_result_block,
            cancelled=_cancelled,
            alternate=False,
            text=lambda text: {"type": "text", "text": text},
        )
    ),
    retryable=frozenset({"overloaded_error", "rate_limit_error", "api_error"}),
    final=frozenset(
        {"invalid_request_error", "authentication_error", "permission_error", "not_found_error"}
    ),
    sdk_error=_sdk_error,
    sdk_packages=frozenset({"anthropic"}),
    sdk_stream=_sdk_stream,
    path="/v1/messages",
    routes=(Route("/messages", None, SSE_NAMED),),
    reply=_message,
    error_body=_error_body,
    tool_schemas=_tool_schemas,
    client=Client(
        sdk="anthropic",
        package="anthropic",
        extra="anthropic",
        credentials="ANTHROPIC_API_KEY",
        address="http://host",
        modes=tuple(_MODES),
        max_tokens=MAX_TOKENS,
        connect=_connect,
        messages=prompt_as_text,
        open=_open,
    ),
)


# -- the anthropic SDK's streams ----------------------------------------------------------


def _raw_anthropic(event: object) -> bool:
    """Whether ``event`` is on the wire: not one the SDK's ``MessageStream`` adds to it."""
    # The manager adds "text", "input_json", "citation", "thinking", "signature" (and beta
    # "compaction") events, and re-types the stop events it enriches. Those classes live in
    # anthropic.lib.streaming; the wire's own (and dicts) pass.
    if not type(event).__module__.startswith("anthropic.lib"):
        return True
    return identifies(event) or getattr(event, "type", None) == "error"


def from_anthropic_stream(stream: Any) -> Observable[Any]:
    """The raw events of an anthropic SDK stream, sync (``RawMessageStreamEvent`` objects).

    ``stream`` is ``client.messages.create(..., stream=True)``, the ``MessageStream`` that
    ``with client.messages.stream(...) as s`` gives, or the manager ``messages.stream(...)``
    itself (not entered): then each subscription enters it, sending the request, and leaves it
    at the end, so a retry sends a new request. The manager's own events (``text``,
    ``input_json``, ``citation``, ``thinking``, ``signature``) are left out: the wire's events
    alone reach ``assemble()``. Reading, closing and disposing are as in
    ``from_openai_stream``: disposing shuts the socket down at once. An ``error`` event and an
    error status (``APIStatusError``: overloaded, rate limit, …) arrive as ``ProviderError``
    with ``retryable``; a connection error as itself. Anything else is a ``TypeError`` at once.
    """
    if not (isinstance(stream, Iterable) or _is_manager(stream, "__enter__", "__iter__")):
        raise _not_a_stream("from_anthropic_stream", stream, "from_async_anthropic_stream")
    return _sync_sdk(stream, _raw_anthropic)


def _not_a_stream(function: str, stream: object, other: str) -> TypeError:
    sync = "async" not in function
    fits = isinstance(stream, AsyncIterable if sync else Iterable) or hasattr(
        stream, "__aenter__" if sync else "__enter__"
    )
    return TypeError(
        f"{function} needs an anthropic {'' if sync else 'Async'}Stream, "
        f"{'' if sync else 'Async'}MessageStream or messages.stream(...) manager, not "
        f"{type(stream).__name__}" + (f": use {other}" if fits else "")
    )


def from_async_anthropic_stream(
    stream: Any, *, loop: asyncio.AbstractEventLoop | None = None
) -> Observable[Any]:
    """The raw events of an anthropic SDK stream, async, read on an asyncio loop.

    ``stream`` is ``await client.messages.create(..., stream=True)`` (an ``AsyncStream``),
    the ``AsyncMessageStream`` of ``async with client.messages.stream(...) as s``, or that
    manager itself (each subscription enters it, sending the request). The manager's own
    events are left out, as in ``from_anthropic_stream``. Disposing cancels the pending read
    and closes the stream (its HTTP response); SDK errors arrive typed as there; anything that
    is not such a stream is a ``TypeError`` at once. Use
    ``await from_async_anthropic_stream(s).pipe(assemble())`` inside the loop.
    """
    if not (isinstance(stream, AsyncIterable) or _is_manager(stream, "__aenter__", "__aiter__")):
        raise _not_a_stream("from_async_anthropic_stream", stream, "from_anthropic_stream")
    return _async_sdk(stream, _raw_anthropic, loop)
