"""The AWS Bedrock ``ConverseStream`` wire: boto3's ``{name: body}`` events onto the core.

Rules (``BedrockReader.feed``):

1. An event is what boto3's ``client.converse_stream(...)["stream"]`` yields: a dict (or any
   ``Mapping``) of one key, the event's name, whose value is its body. Dispatch is on that
   name: ``messageStart``, ``contentBlockStart``, ``contentBlockDelta``, ``contentBlockStop``,
   ``messageStop``, ``metadata`` and the exception events (rule 8). Blobs are ``bytes``, as
   boto3 decodes them; a base64 string, as a raw frame carries one, is decoded the same way.
2. Blocks are keyed by ``contentBlockIndex``, an int of at most 64 bits. A start is optional:
   a ``text``, ``reasoningContent`` or ``citation`` delta for an index never seen opens a text
   or reasoning block, and a stop alone an empty one. A second start at one index, a
   ``toolUse`` or ``toolResult`` delta without its start, a delta of another kind than its
   block's, a delta of more than one kind, and any event for a block that had stopped are
   ``MalformedChunkError``. Delta kinds the reader does not know are ignored, unless they
   are the kind of a block started under that name (``image``): then they are merged into it.
3. A ``toolUse`` block is a call: ``toolUseId`` and ``name`` come with its start, the input is
   the ``toolUse.input`` pieces joined; none at all (or only ``""``) is ``{}``.
4. A ``toolUse`` start whose ``type`` is ``server_tool_use`` (or any type but ``tool_use``:
   what the reader does not know it never dispatches) is run by the provider, and a
   ``toolResult`` block is such a call's result: parsed like a call where it is one, kept in
   ``items``, never dispatched.
5. ``items`` are the turn's blocks in the shape Converse takes them back (``ContentBlock``):
   ``{"text"}`` (``{"citationsContent"}`` once citations came; an empty text is left out,
   Converse refuses a blank one), ``{"reasoningContent": {"reasoningText": {"text",
   "signature"}}}`` or ``{"reasoningContent": {"redactedContent": bytes}}``, ``{"toolUse":
   {"toolUseId", "name", "input", "type"?}}``, ``{"toolResult": {…start, "content": [the
   deltas' parts, in order]}}``, and any other block as started, its deltas merged in. Text
   is also the turn's ``content``, reasoning text its ``reasoning``.
6. ``messageStop.stopReason`` (required) is the turn's ``finish_reason``: ``tool_use``,
   ``end_turn``, ``stop_sequence`` and any reason not listed here emit; ``max_tokens`` and
   ``model_context_window_exceeded`` are a token ceiling (a call in the turn makes it a
   ``TruncatedToolCallError``); ``guardrail_intervened`` and ``content_filtered`` are a
   ``ContentFilteredError`` (no call of the turn is ever emitted); ``malformed_tool_use`` is
   an ``InvalidArgumentsError``, ``malformed_model_output`` a ``ProviderError``. A ``toolUse``
   block without ``contentBlockStop`` is a ``TruncatedToolCallError`` whatever the reason.
7. ``metadata`` may come before or after ``messageStop`` (a real stream sends it after); its
   ``usage`` is the turn's. Any other event after ``messageStop`` is a
   ``MalformedChunkError``; an end without ``messageStop`` a ``StreamInterruptedError``.
8. An exception event (``internalServerException``, ``modelStreamErrorException``,
   ``throttlingException``, ``serviceUnavailableException``, ``validationException``,
   InvokeModel's ``modelTimeoutException``, or any other name ending in ``Exception``) is,
   wherever it comes, the ``ProviderError`` its frame gives (``_eventstream``): ``code`` its
   name, ``retryable`` from the Bedrock tables there (``validationException`` is final, the
   others above retryable). Its text quotes the provider's ``message`` only.
9. An event of another wire (``choices``, ``type``, ``candidates``, an InvokeModel ``chunk``)
   is a ``MalformedChunkError``, as is an event of more or less than one key. Any other one-key
   event whose name is lowerCamelCase and whose body is an object is taken for a newer
   Bedrock event and ignored (boto3 itself drops the event types its model does not know).

``InvokeModelWithResponseStream`` carries Anthropic Messages events, each in a ``chunk``
envelope: ``unwrap_chunk`` takes one out, for the Anthropic reader. ``from_bedrock_stream``
and ``from_async_bedrock_stream`` read boto3's (and aiobotocore's) ``EventStream``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import io
import json
import re
import socket
import threading
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, Protocol

from reactivex import Observable, abc

from .._block_transcript import BlockShape, transcript
from .._blocks import Block, Blocks
from .._core import _NO_EVENTS, as_dict, as_object
from .._errors import (
    RETRY_HINT,
    MalformedChunkError,
    ProviderError,
    clip,
    excerpt,
    provider_error,
    retryable,
)
from .._eventstream import (
    _READ_SIZE,
    EventStreamDecoder,
    Frame,
    encode_frame,
    looks_like_eventstream,
)
from .._lift import interrupted
from .._policy import DEFAULT, Limits, Policy
from .._sse import load_json
from .._types import (
    AssistantTurn,
    ToolCall,
    ToolCallStarted,
    json_data,
    no_made_up_ids,
)
from .._wire import (
    CANCELLED,
    Client,
    ClientSetupError,
    Framing,
    Request,
    Route,
    WireSpec,
    functions,
    given,
)
from ..sources import (
    _blocking_source,
    _close,
    _Downstream,
    _from_async,
    _is_async_response,
    _StreamedResponse,
)

if TYPE_CHECKING:
    import asyncio

    from reactivex import Observable

    from .._core import Call

__all__ = [
    "FINAL_EXCEPTIONS",
    "RETRYABLE_EXCEPTIONS",
    "WIRE",
    "BedrockReader",
    "frame_event",
    "from_async_bedrock_stream",
    "from_bedrock_stream",
    "from_eventstream",
    "identifies",
    "sdk_error",
    "unwrap_chunk",
]


def _both_cases(*names: str) -> frozenset[str]:
    # Frames name an exception in lowerCamelCase (``:exception-type``); botocore's
    # ``ClientError`` codes for the same errors are in PascalCase.
    return frozenset(names) | {name[0].upper() + name[1:] for name in names}


RETRYABLE_EXCEPTIONS = _both_cases(
    "throttlingException",
    "serviceUnavailableException",
    "internalServerException",
    # "An error occurred while streaming the response. Retry your request." (service model)
    "modelStreamErrorException",
    # HTTP 408, which ``retryable()`` counts as retryable for every wire.
    "modelTimeoutException",
    # Before the stream only; botocore itself retries it (``retryable`` in the service model).
    "modelNotReadyException",
)
"""Bedrock error names a retry can help, as exception frames and botocore codes spell them."""

FINAL_EXCEPTIONS = _both_cases(
    "validationException",
    "accessDeniedException",
    "resourceNotFoundException",
    "serviceQuotaExceededException",
    "conflictException",
)
"""Bedrock error names (client errors) that sending the same request again cannot help."""


# The exception events of ConverseStream, and InvokeModelWithResponseStream's timeout (rule 8).
_EXCEPTIONS = frozenset(
    {
        "internalServerException",
        "modelStreamErrorException",
        "throttlingException",
        "serviceUnavailableException",
        "modelTimeoutException",
        "validationException",
    }
)
_EVENTS = frozenset(
    {
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    }
)
_NAMES = _EVENTS | _EXCEPTIONS
# The names that tell this wire from a first event.
_TELLING = _NAMES - {"metadata"}
# Keys that name another wire's events (rule 9).
_OTHER_WIRES = frozenset({"choices", "type", "candidates"})
_FUTURE_EVENT = re.compile(r"[a-z][a-zA-Z0-9]*")
# Stop reasons in Chat Completions terms, for the core's finish rules; any other emits.
_OUTCOMES = {
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "malformed_tool_use": "invalid_call",
    "malformed_model_output": "error",
}
# The block a delta kind opens where none was started (rule 2). Block kinds are "text" and
# "reasoning" (opened by their deltas), "toolUse" and "toolResult" (by their starts), or
# another start's own name.
_DELTA_BLOCKS = {"text": "text", "citation": "text", "reasoningContent": "reasoning"}


def identifies(event: object) -> bool:
    """Whether ``event`` is a ``ConverseStream`` event: a one-key dict (or ``Mapping``) named so.

    Reads the one key: ``{"messageStart": …}`` and ``{"throttlingException": …}`` are;
    ``{"chunk": …}`` (InvokeModel) and two-key dicts are not. ``metadata`` is a name too
    common to tell a wire by alone: it is Bedrock's when it holds ``usage`` or ``metrics``.
    """
    try:
        if type(event) is dict or isinstance(event, Mapping):
            if len(event) != 1:
                return False
            ((name, body),) = event.items()
            if name == "metadata":
                return isinstance(body, Mapping) and ("usage" in body or "metrics" in body)
            return name in _TELLING
    except Exception:  # noqa: BLE001 - a Mapping that cannot be read is nobody's event
        return False
    return False


def _blob(value: object, what: str) -> bytes:
    """A blob as boto3 gives it (``bytes``), or a base64 string as a raw frame carries it."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise MalformedChunkError(
                f"{what} is a string that is not base64 ({len(value):,} characters)"
            ) from None
    raise MalformedChunkError(f"{what} must be bytes, got {type(value).__name__}")


def unwrap_chunk(event: object) -> object | None:
    """The Anthropic event inside an InvokeModel ``{"chunk": {"bytes": …}}`` envelope, else None.

    ``bytes`` is one Anthropic Messages event as JSON (boto3 gives ``bytes``; a base64 string is
    decoded first); what is not a JSON object there is a ``MalformedChunkError``. An exception
    event among the envelopes (``modelStreamErrorException`` …) is the stream's own error: its
    ``ProviderError`` is raised (rule 8).

    >>> unwrap_chunk({"chunk": {"bytes": b'{"type": "ping"}'}})
    {'type': 'ping'}
    """
    if type(event) is dict:
        if len(event) != 1:
            return None
        if "chunk" not in event:
            _raise_if_exception(event)
            return None
        part = event["chunk"]
    elif isinstance(event, Mapping):
        try:
            if len(event) != 1:
                return None
            if "chunk" not in event:
                _raise_if_exception(event)
                return None
            part = event["chunk"]
        except Exception as exc:
            raise MalformedChunkError(
                f"reading a {type(event).__name__} event raised {type(exc).__name__}"
            ) from exc
    else:
        return None
    body = as_object(part)
    if body is None:
        raise MalformedChunkError(
            f"an InvokeModel chunk must be an object, got {type(part).__name__}"
        )
    inner = load_json(_blob(body.get("bytes"), "an InvokeModel chunk's bytes"), "a chunk's bytes")
    if type(inner) is not dict:
        raise MalformedChunkError(
            f"an InvokeModel chunk's bytes must be one JSON object, got {type(inner).__name__}"
        )
    return inner


def _exception_error(name: str, body: object) -> ProviderError:
    """The ``ProviderError`` of an exception event: the one its frame gives (``_eventstream``)."""
    found = as_object(body)
    said = None if found is None else found.get("message", found.get("Message"))
    return _provider_error(said, name, found)


def _raise_if_exception(event: Mapping[Any, Any]) -> None:
    """Raise the ``ProviderError`` of a one-key exception event; nothing for another event."""
    ((name, body),) = event.items()
    if _is_exception(name):
        raise _exception_error(name, body)


def _object(value: object, what: str) -> dict[str, Any]:
    found = as_object(value)
    if found is None:
        # Its type alone: a value here may be a piece of a call's input.
        raise MalformedChunkError(f"{what} must be an object, got {type(value).__name__}")
    return found


def _one(value: dict[str, Any], what: str) -> tuple[str, Any]:
    """The one (name, value) of a union (a start, a delta); another count is malformed."""
    if len(value) != 1:
        raise MalformedChunkError(
            f"{what} must name one kind, got {len(value)}: "
            f"{', '.join(excerpt(k, 40) for k in list(value)[:4])}"
        )
    ((kind, inner),) = value.items()
    if type(kind) is not str:
        raise MalformedChunkError(f"{what} names a kind that is no string: {excerpt(kind)}")
    return kind, inner


def _render_call(detail: dict[str, Any]) -> Callable[[ToolCall], dict[str, Any]]:
    def render(call: ToolCall) -> dict[str, Any]:
        return {"toolUse": {**detail, "toolUseId": call.id, "input": call.parsed_arguments}}

    return render


def _item(block: Block) -> dict[str, Any] | None:
    """A block other than a call as Converse takes it back; ``None`` for an empty text."""
    text = block.text()
    citations = block.pieces("citations")
    if block.kind == "text":
        if citations:
            return {
                "citationsContent": {
                    "content": [{"text": text}] if text else [],
                    "citations": citations,
                }
            }
        return {"text": text} if text else None
    if block.kind == "reasoning":
        redacted = block.pieces("redacted")
        if redacted:
            return {"reasoningContent": {"redactedContent": b"".join(redacted)}}
        said: dict[str, Any] = {"text": text}
        signature = block.pieces("signature")
        if signature:
            said["signature"] = "".join(signature)
        return {"reasoningContent": {"reasoningText": said}}
    if block.kind == "toolResult":
        return {"toolResult": {**block.detail, "content": block.pieces("parts")}}
    return {block.kind: block.detail}


class _Blocks(Blocks):
    """Content blocks and the calls among them: start, deltas, stop."""

    __slots__ = ("_started",)

    def __init__(
        self,
        policy: Policy = DEFAULT,
        *,
        on_open: Callable[[Call], None] | None = None,
        keep_arguments: bool = True,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        super().__init__(policy, on_open=on_open, keep_arguments=keep_arguments, on_error=on_error)
        self._started = False

    def _start(self, body: dict[str, Any]) -> Sequence[ToolCallStarted]:
        index = self.key_of(body, "contentBlockIndex", "contentBlockStart")
        what = f"contentBlockStart {index}: start"
        kind, detail = _one(_object(body.get("start"), what), what)
        # A copy: the block's own deltas may be merged into it.
        detail = dict(_object(detail, f"contentBlockStart {index}: start.{kind}"))
        if kind != "toolUse":
            self.begin(index, kind, detail, "contentBlockStart", call=False)
            return _NO_EVENTS
        tool_type = detail.get("type")
        if tool_type is not None and type(tool_type) is not str:
            raise MalformedChunkError(
                f"contentBlockStart {index}: toolUse.type must be a string, got "
                f"{type(tool_type).__name__}",
                index=index,
            )
        self.begin(index, kind, detail, "contentBlockStart", call=True)
        _, started = self.open_call(
            index,
            detail.get("toolUseId"),
            detail.get("name"),
            id_field="toolUseId",
            server=tool_type is not None and tool_type != "tool_use",
        )
        return started

    def _delta(self, body: dict[str, Any]) -> None:
        index = self.key_of(body, "contentBlockIndex", "contentBlockDelta")
        what = f"contentBlockDelta {index}: delta"
        kind, value = _one(_object(body.get("delta"), what), what)
        block = self.block(index, f"a {excerpt(kind, 40)} delta")
        if kind == "toolUse":
            call = self._calls0.get(index) if block is not None else None
            if call is None:
                raise MalformedChunkError(
                    f"a toolUse delta for block {index}, "
                    + (
                        "never started: a call's toolUseId and name come with its start"
                        if block is None
                        else f"a {excerpt(block.kind, 40)} block: only toolUse blocks take input"
                    ),
                    index=index,
                )
            self._piece(self._choices[0], call, _object(value, f"{what}.toolUse").get("input"))
            return
        opens = _DELTA_BLOCKS.get(kind)
        if opens is not None:
            if block is None:
                block = self.implicit(index, opens, f"a {kind} delta")
            elif block.kind != opens:
                raise MalformedChunkError(
                    f"a {kind} delta for block {index}, a {excerpt(block.kind, 40)} block",
                    index=index,
                )
            if kind == "text":
                self.write_text(block, None, "content", "text", value)
            elif kind == "reasoningContent":
                self._reasoning(block, index, _object(value, f"{what}.reasoningContent"))
            else:
                citation = _object(value, f"{what}.citation")
                self.charge_kept(citation, f"a citation delta for block {index}")
                block.keep("citations", citation)
        elif kind == "toolResult":
            if block is None or block.kind != "toolResult":
                raise MalformedChunkError(
                    f"a toolResult delta for block {index}, "
                    + ("never started" if block is None else f"a {excerpt(block.kind, 40)} block"),
                    index=index,
                )
            if not isinstance(value, list):
                raise MalformedChunkError(
                    f"{what}.toolResult must be a list, got {type(value).__name__}", index=index
                )
            self.charge_kept(value, f"a toolResult delta for block {index}")
            block.kept.setdefault("parts", []).extend(value)
        elif block is not None and block.kind == kind:
            part = _object(value, f"{what}.{kind}")
            self.charge_kept(part, f"a {kind} delta for block {index}")
            block.detail.update(part)

    def _reasoning(self, block: Block, index: int, said: dict[str, Any]) -> None:
        text = said.get("text")
        signature = said.get("signature")
        redacted = said.get("redactedContent")
        # Converse's reasoning block is one or the other: text and its signature, or a blob.
        if (
            redacted is not None
            and (
                text is not None
                or signature is not None
                or block.has_text()
                or block.pieces("signature")
            )
        ) or (block.pieces("redacted") and (text is not None or signature is not None)):
            raise MalformedChunkError(
                f"reasoning block {index} has both redactedContent and text or a signature",
                index=index,
            )
        if text is not None:
            self.write_text(block, None, "reasoning", "reasoningContent.text", text)
        if signature is not None:
            state = self._choices[0]
            block.keep(
                "signature", self._charge_text(state, "reasoningContent.signature", signature)
            )
        if redacted is not None:
            blob = _blob(redacted, f"reasoning block {index}'s redactedContent")
            self.charge_kept(blob, f"reasoning block {index}'s redactedContent")
            block.keep("redacted", blob)

    def _stop(self, body: dict[str, Any]) -> None:
        index = self.key_of(body, "contentBlockIndex", "contentBlockStop")
        block = self.block(index, "contentBlockStop")
        if block is None:
            # A block with neither start nor delta: empty, nothing to keep.
            block = self.implicit(index, "text", "contentBlockStop")
        # A start that carries the input whole (no deltas) gives it, as on Anthropic.
        given = block.detail.get("input") if block.kind == "toolUse" else None
        self.end_block(index, block, given, f"toolUse block {index}")

    def render_call(self, index: int, block: Block) -> Callable[[ToolCall], dict[str, Any]]:
        return _render_call(block.detail)

    def render(self, index: int, block: Block) -> dict[str, Any] | None:
        return _item(block)


class BedrockReader(_Blocks):
    """Reads AWS Bedrock ``ConverseStream`` events as boto3 yields them (rules 1-9)."""

    __slots__ = ()

    wire = "bedrock"

    def feed(self, event: object) -> Sequence[ToolCallStarted]:
        """Apply one event; return the calls it named (usually none)."""
        # Fast path, an input piece of an open call: the bulk of a tool call.
        if self._fast:
            call = None
            try:
                if type(event) is dict and len(event) == 1:
                    body = event["contentBlockDelta"]
                    delta = body["delta"]
                    if len(delta) == 1:
                        piece = delta["toolUse"]["input"]
                        index = body["contentBlockIndex"]
                        if type(index) is int:
                            call = self._calls0[index]
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
        if type(event) is not dict:
            raise MalformedChunkError(
                f"a Bedrock event must be a one-key dict, as boto3 yields it, got "
                f"{type(event).__name__}"
            )
        if len(event) != 1:
            raise self._not_an_event(event)
        ((name, body),) = event.items()
        if name not in _EVENTS:
            if _is_exception(name):
                raise _exception_error(name, body)
            return self._unknown_event(event, name, body)
        if name != "metadata":
            self.check_open(name)
        data = _object(body, name)
        if name == "contentBlockDelta":
            self._delta(data)
        elif name == "contentBlockStart":
            return self._start(data)
        elif name == "contentBlockStop":
            self._stop(data)
        elif name == "messageStart":
            if self._started:
                raise MalformedChunkError("a second messageStart: one stream carries one message")
            self._started = True
        elif name == "messageStop":
            self._message_stop(data)
        else:  # metadata
            usage = data.get("usage")
            if usage is not None:
                found = as_dict(usage)
                self.charge_kept(found, "metadata usage", "usage")
                self.usage = found
        return _NO_EVENTS

    def _unknown_event(
        self, event: dict[Any, Any], name: object, body: object
    ) -> Sequence[ToolCallStarted]:
        if name in _OTHER_WIRES:
            raise self.foreign(event, "a Bedrock event")
        if name == "chunk":
            raise MalformedChunkError(
                "an InvokeModel chunk in a ConverseStream stream: its bytes hold another wire's "
                "event (Anthropic's, on Claude); one stream speaks one wire",
                hint="leave wire unset: the events inside an envelope are read as the wire they "
                "belong to",
            )
        if type(name) is str and _FUTURE_EVENT.fullmatch(name) and isinstance(body, Mapping):
            return _NO_EVENTS  # a newer Bedrock event (rule 9)
        raise MalformedChunkError(f"a Bedrock event of unknown name {excerpt(name, 60)}")

    def _not_an_event(self, event: dict[Any, Any]) -> MalformedChunkError:
        """The error for a dict of another shape than ``{name: body}``."""
        if not _OTHER_WIRES.isdisjoint(event):
            return self.foreign(event, "a Bedrock event")
        if set(event) == {"event", "data"}:
            return MalformedChunkError(
                "a recording's {event, data} line, not an event: boto3 yields {event: data}"
            )
        return MalformedChunkError(
            f"a Bedrock event must have one key, its name, got {len(event)}"
            + (f": {', '.join(excerpt(k, 40) for k in list(event)[:4])}" if event else "")
        )

    def _message_stop(self, data: dict[str, Any]) -> None:
        state = self._choices[0]
        reason = data.get("stopReason")
        if reason is None or reason == "":
            raise MalformedChunkError("messageStop without a stopReason")
        if type(reason) is not str:
            raise MalformedChunkError(
                f"messageStop: stopReason must be a string, got {type(reason).__name__}"
            )
        self._identity(state, None, "stopReason", reason)  # its length
        state.finish_reason = reason
        self.end_message("messageStop", _OUTCOMES.get(reason, "stop"))


# -- the boto3 source ------------------------------------------------------------------------


def _is(error: Exception, name: str, module: str) -> bool:
    return any(b.__name__ == name and b.__module__.startswith(module) for b in type(error).__mro__)


def sdk_error(error: Exception) -> ProviderError | None:
    """The ``ProviderError`` of botocore's ``EventStreamError`` (an exception frame), else None.

    Its code is the frame's exception type (``throttlingException`` …), ``retryable`` as for
    the exception events (rule 8).
    """
    if not _is(error, "EventStreamError", "botocore"):
        return None
    response = getattr(error, "response", None)
    found = response.get("Error") if isinstance(response, Mapping) else None
    found = found if isinstance(found, Mapping) else {}
    code = found.get("Code")
    # botocore leaves the code empty for an exception its model of the operation lacks.
    name = code if isinstance(code, str) and code else "EventStreamError"
    return _exception_error(name, {"message": found.get("Message")})


def _typed(error: Exception) -> Exception:
    """An error reading a botocore stream, typed: ours, or itself (a connection error)."""
    typed: Exception | None = sdk_error(error)
    if typed is None and _is(error, "ParserError", "botocore.eventstream"):
        # A frame whose length or checksum is wrong: the bytes were damaged.
        typed = MalformedChunkError(
            f"a Bedrock event-stream frame could not be decoded ({type(error).__name__})"
        )
    if typed is None:
        return error
    typed.__cause__ = error
    return typed


def _shut_down(stream: object) -> None:
    """Shut the socket under a botocore ``EventStream`` down, while its response holds it."""
    # botocore keeps urllib3's response as _raw_stream. urllib3 (2.3+) shuts its socket down
    # itself, and refuses once the connection went back to the pool, where it may serve
    # another request; an older one shows the connection until then.
    raw = getattr(stream, "_raw_stream", None)
    shutdown = getattr(raw, "shutdown", None)
    if callable(shutdown):
        with contextlib.suppress(Exception):  # released, closed, or never set: nothing to do
            shutdown()
        return
    found = getattr(getattr(raw, "connection", None), "sock", None)
    if isinstance(found, socket.socket):
        with contextlib.suppress(OSError):
            found.shutdown(socket.SHUT_RDWR)


class _Closer:
    """Closes an ``EventStream`` from any thread, waking a read that waits on its socket."""

    __slots__ = ("_stream",)

    def __init__(self, stream: object) -> None:
        self._stream = stream

    def close(self) -> None:
        # Closing the response from another thread leaves a blocked recv waiting for the
        # server; shutting the socket down ends it at once (the sources' dispose rule).
        _shut_down(self._stream)
        closer = getattr(self._stream, "close", None)
        if callable(closer):
            closer()


def _stream_of(value: object, function: str) -> object:
    """The event stream itself, from boto3's whole response dict if that was given."""
    if isinstance(value, Mapping):
        found = value.get("stream", value.get("body"))
        if found is None:
            raise TypeError(
                f"{function} got a response without a 'stream' or 'body': pass what "
                f"converse_stream(...) or invoke_model_with_response_stream(...) returns"
            )
        return found
    return value


def _events(stream: Iterable[Any]) -> Iterator[Any]:
    try:
        for event in stream:
            inner = unwrap_chunk(event)
            yield event if inner is None else inner
    except Exception as error:
        typed = _typed(error)
        if typed is error:
            raise
        raise typed from error


def from_bedrock_stream(stream: Any) -> Observable[Any]:
    """The events of a boto3 Bedrock stream, sync: ConverseStream dicts or Anthropic events.

    ``stream`` is the ``EventStream`` of ``client.converse_stream(...)["stream"]`` or of
    ``client.invoke_model_with_response_stream(...)["body"]``, or that whole response. Each
    InvokeModel ``chunk`` arrives as the Anthropic event it holds (``unwrap_chunk``). Reads on
    the subscribing thread, or on the scheduler given (``subscribe_on``, ``.run()``).
    Completing, failing or disposing closes the stream (its HTTP connection); disposing shuts
    its socket down at once, even while a read waits on a silent server. An exception frame
    (botocore's ``EventStreamError``) arrives as ``ProviderError`` with its code and
    ``retryable``, a damaged frame as ``MalformedChunkError``, a connection error as itself.
    A stream can be read once. Anything that is no such stream is a ``TypeError`` at once.
    """
    from .. import sources  # imported here: the reader needs no I/O module

    found = _stream_of(stream, "from_bedrock_stream")
    if (
        not isinstance(found, Iterable)
        or isinstance(found, str | bytes | bytearray | Mapping)
        or hasattr(found, "__aiter__")
        or callable(getattr(found, "read", None))
    ):
        raise _not_a_stream("from_bedrock_stream", found)
    return sources._sdk_source(_events(found), _Closer(found), sources._every)


def from_async_bedrock_stream(
    stream: Any, *, loop: asyncio.AbstractEventLoop | None = None
) -> Observable[Any]:
    """The events of an aiobotocore Bedrock stream, read on an asyncio loop.

    ``stream`` is the ``AioEventStream`` (``response["stream"]`` or ``response["body"]`` of
    the aiobotocore client's ``converse_stream`` or ``invoke_model_with_response_stream``), or
    that whole response. Events and errors are as in ``from_bedrock_stream``. Disposing cancels
    the pending read and closes the stream. Anything else is a ``TypeError`` at once. Use
    ``await from_async_bedrock_stream(s).pipe(...)`` inside the loop.
    """
    from .. import sources  # imported here: the reader needs no I/O module

    found = _stream_of(stream, "from_async_bedrock_stream")
    if not isinstance(found, AsyncIterable):
        raise _not_a_stream("from_async_bedrock_stream", found)
    opened = found

    async def events() -> AsyncIterator[Any]:
        try:
            async for event in opened:
                inner = unwrap_chunk(event)
                yield event if inner is None else inner
        except Exception as error:
            typed = _typed(error)
            if typed is error:
                raise
            raise typed from error
        finally:
            await sources._close(opened)

    return sources.from_async_iterable(events, loop=loop)


def _not_a_stream(function: str, stream: object) -> TypeError:
    sync = "async" not in function
    other = "from_async_bedrock_stream" if sync else "from_bedrock_stream"
    fits = hasattr(stream, "__aiter__") if sync else isinstance(stream, Iterable)
    hint = f": use {other}" if fits and not isinstance(stream, str | bytes | Mapping) else ""
    if callable(getattr(stream, "read", None)) and not hasattr(stream, "__aiter__"):
        hint = " (a whole body: was it invoke_model, not invoke_model_with_response_stream?)"
    return TypeError(
        f"{function} needs the event stream of converse_stream(...)['stream'] or "
        f"invoke_model_with_response_stream(...)['body'], or that response, not "
        f"{type(stream).__name__}{hint}"
    )


# -- raw event-stream bytes ----------------------------------------------------------------


# Where the blob members of Bedrock's event shapes are (``botocore/data/bedrock-runtime/
# 2023-09-30/service-2.json``): base64 in JSON on the wire, ``bytes`` in what boto3 yields.
_BLOBS: dict[str, tuple[tuple[str, ...], ...]] = {
    "chunk": (("bytes",),),  # InvokeModelWithResponseStream's PayloadPart
    "contentBlockDelta": (
        ("delta", "reasoningContent", "redactedContent"),
        ("delta", "image", "source", "bytes"),
    ),
}


# The fields of a delta under which a blob may be.
_HOLD_BLOBS = frozenset({"reasoningContent", "image"})


def frame_event(frame: Frame) -> dict[str, Any]:
    """The event boto3 yields for ``frame``: ``{<:event-type>: <its JSON payload>}``.

    As in boto3, the padding field ``p`` is left out of the payload and its blobs
    (``chunk.bytes``; ``contentBlockDelta.delta.reasoningContent.redactedContent`` and
    ``.image.source.bytes``) are base64-decoded to ``bytes``. Unlike boto3, fields and event
    types that the installed botocore's model does not list are kept, not dropped.

    >>> frame_event(Frame({":event-type": "chunk"}, b'{"bytes": "e30=", "p": "abc"}'))
    {'chunk': {'bytes': b'{}'}}

    An ``exception`` frame raises ``ProviderError``: ``code`` its ``:exception-type``
    (``throttlingException`` …), ``body`` its JSON payload, ``retryable`` from
    the error names the Bedrock wire lists. An ``error`` frame raises one from its
    ``:error-code`` and ``:error-message`` headers. A payload that is not a JSON object, or a
    frame without an ``:event-type``, raises ``MalformedChunkError``.
    """
    headers = frame.headers
    kind = headers.get(":message-type", "event")
    if kind == "exception":
        raise _exception(headers, frame.payload)
    if kind == "error":
        code, said = headers.get(":error-code"), headers.get(":error-message")
        raise _provider_error(said, code, {":error-code": code, ":error-message": said})
    if kind != "event":
        raise MalformedChunkError(
            f"an event stream frame has an unknown :message-type {excerpt(kind)}"
        )
    name = headers.get(":event-type")
    if not isinstance(name, str):
        raise MalformedChunkError("an event stream event frame has no :event-type string header")
    event: Any = (
        load_json(frame.payload, "an event stream frame's payload") if frame.payload else {}
    )
    if type(event) is not dict:
        raise MalformedChunkError(
            f"the payload of a {excerpt(name)} frame is not a JSON object: {type(event).__name__}"
        )
    # Bedrock pads every payload with a random-length ``p`` to hide token lengths.
    event.pop("p", None)
    blobs = _BLOBS.get(name)
    if blobs is not None:
        delta = event.get("delta")
        # Most deltas hold text or input: only a delta that names a blob's field is walked.
        if name != "contentBlockDelta" or (
            type(delta) is dict and not _HOLD_BLOBS.isdisjoint(delta)
        ):
            for path in blobs:
                _decode_blob(event, path, name)
    return {name: event}


def _decode_blob(event: dict[str, Any], path: tuple[str, ...], name: str) -> None:
    parent: Any = event
    for key in path[:-1]:
        parent = parent.get(key)
        if not isinstance(parent, dict):
            return
    value = parent.get(path[-1])
    if value is None:
        return
    try:
        # boto3's blob parser is base64.b64decode, which skips characters outside the alphabet.
        parent[path[-1]] = base64.b64decode(value)
    except (binascii.Error, TypeError, ValueError):
        raise MalformedChunkError(
            f"{'.'.join((name, *path))} in an event stream frame is not base64"
        ) from None


def _exception(headers: Mapping[str, object], payload: bytes) -> ProviderError:
    code = headers.get(":exception-type")
    try:
        body: Any = load_json(payload, "an exception frame's payload")
    except MalformedChunkError:
        # The header says what failed; a payload that is not JSON must not hide it.
        body = None
    said = None
    if isinstance(body, dict):
        said = body.get("message", body.get("Message"))
    return _provider_error(said, code, body)


def _provider_error(said: object, code: object, body: object) -> ProviderError:
    # ``retryable`` from the error names the wires list (Bedrock's descriptor for these).
    return provider_error(said if isinstance(said, str) and said else "no message", code, body)


class _BinaryFile(Protocol):
    """A binary file object: ``open(path, "rb")``, ``io.BytesIO``, an HTTP response."""

    def read(self, size: int, /) -> bytes:
        """At most ``size`` bytes; ``b""`` at the end."""
        ...


def from_eventstream(
    source: bytes
    | bytearray
    | memoryview
    | _BinaryFile
    | Iterable[bytes]
    | AsyncIterable[bytes]
    | _StreamedResponse,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    limits: Limits | None = None,
) -> Observable[dict[str, Any]]:
    """The events of a raw AWS event stream body, as boto3 yields them (see ``frame_event``).

    ``source`` is the body itself (``bytes``), a binary file object (read with ``read1`` when
    it has one, so a network stream gives what has arrived), an iterable of byte chunks split
    anywhere (``iter_bytes()``, a list), a streamed ``httpx.Response`` or an async iterable of
    chunks (``aiter_bytes()``, read on the asyncio ``loop``, or the one running when
    subscribing). Each subscription reads it anew. The source is closed (``close``/``aclose``)
    on completion, error or dispose; disposing stops the read after the current chunk (at once
    for an httpx response over HTTP/1.x, as in ``from_sse``). An exception or error frame ends
    the stream with its ``ProviderError``; a damaged frame with ``MalformedChunkError``; a body
    cut inside a frame, or a source that fails (kept as ``__cause__``), with
    ``StreamInterruptedError``. A ``str``, a text file or anything else is a ``TypeError`` at
    once.

    >>> from reactivex import operators as ops
    >>> from rxtoolcalls._eventstream import encode_frame  # one frame, as AWS sends it
    >>> headers = {":message-type": "event", ":event-type": "messageStart"}
    >>> body = encode_frame(headers, b'{"role": "assistant", "p": "abcd"}')
    >>> from_eventstream(body).pipe(ops.to_list()).run()
    [{'messageStart': {'role': 'assistant'}}]

    Cost: linear in the bytes, however they are split; one ``json`` parse per frame.
    """
    if isinstance(source, str | io.TextIOBase):
        raise TypeError(
            f"from_eventstream needs bytes, not {type(source).__name__}: an event stream is "
            f"binary (open a file with 'rb')"
        )
    if isinstance(source, bytes | bytearray | memoryview):
        body = bytes(source)
        return _blocking(lambda: (body,), _nothing, None, limits)
    if type(source).__module__ == "botocore.eventstream":
        raise TypeError(
            f"from_eventstream reads raw bytes; a botocore {type(source).__name__} yields "
            f"events decoded already: give those to the Bedrock wire as they are"
        )
    if isinstance(source, AsyncIterable):
        pieces = source
        return _from_async(_async_events(lambda: pieces, None, limits), loop)
    if not isinstance(source, Iterable):
        # An httpx response: not iterable, and its read() takes no size.
        iter_bytes = getattr(source, "iter_bytes", None)
        aiter_bytes = getattr(source, "aiter_bytes", None)
        if callable(aiter_bytes) and _is_async_response(source):
            return _from_async(_async_events(aiter_bytes, source, limits), loop)
        if callable(iter_bytes):
            return _blocking(iter_bytes, _closer(source), source, limits, close_any_thread=True)
    read = getattr(source, "read1", None) or getattr(source, "read", None)
    if callable(read):
        # Not iterated: a file iterates by lines, cutting binary frames at every 0x0a byte.
        return _blocking(lambda: _read_all(read), _closer(source), None, limits)
    if not isinstance(source, Iterable):
        raise TypeError(
            f"from_eventstream needs bytes, a binary file, or an iterable or async iterable "
            f"of bytes, not {type(source).__name__}"
        )
    chunks = source
    return _blocking(lambda: chunks, _closer(source), None, limits)


def _nothing() -> None:
    pass


def _closer(source: object) -> Callable[[], None]:
    close = getattr(source, "close", None)
    return close if callable(close) else _nothing


def _read_all(read: Callable[[int], bytes]) -> Iterable[bytes]:
    while piece := read(_READ_SIZE):
        yield piece


def _blocking(
    pieces: Callable[[], Iterable[bytes]],
    close: Callable[[], None],
    response: object,
    limits: Limits | None,
    *,
    close_any_thread: bool = False,
) -> Observable[dict[str, Any]]:
    def read(observer: abc.ObserverBase[Any], stopped: threading.Event) -> None:
        decoder = EventStreamDecoder(limits=limits)
        on_next, is_set = observer.on_next, stopped.is_set
        iterator: Iterator[bytes] | None = None
        while True:
            try:
                if iterator is None:
                    iterator = iter(pieces())
                piece = next(iterator)
            except StopIteration:
                break
            except Exception as error:  # the source's: typed, cause kept
                raise interrupted(error) from error
            for frame in decoder.feed(piece):
                event = frame_event(frame)
                try:
                    on_next(event)
                except Exception as error:  # noqa: BLE001 - the subscriber's: raised by run()
                    raise _Downstream(error) from None
                if is_set():
                    return
            if decoder.error is not None:
                raise decoder.error
        decoder.end()

    return _blocking_source(read, close, response, close_any_thread=close_any_thread)


def _async_events(
    pieces: Callable[[], AsyncIterable[bytes]], owner: object, limits: Limits | None
) -> Callable[[], AsyncIterator[dict[str, Any]]]:
    async def events() -> AsyncIterator[dict[str, Any]]:
        decoder = EventStreamDecoder(limits=limits)
        iterator = aiter(pieces())
        try:
            while True:
                try:
                    piece = await anext(iterator)
                except StopAsyncIteration:
                    break
                except Exception as error:  # the source's: typed, cause kept
                    raise interrupted(error) from error
                for frame in decoder.feed(piece):
                    yield frame_event(frame)
                if decoder.error is not None:
                    raise decoder.error
            decoder.end()
        finally:
            await _close(iterator)
            if owner is not None:
                await _close(owner)

    return events


# -- Answering in the wire, the transcript, the replay server --------------------------------


def to_message(turn: AssistantTurn, empty_content: str | None) -> dict[str, Any]:
    """``{"role": "assistant", "content": [blocks]}``: the turn's blocks as Converse takes them.

    A turn with no block (nothing came) carries ``empty_content`` as its text, if given.
    """
    content = [dict(block) for block in turn.items]
    if not content and empty_content:
        content = [{"text": empty_content}]
    return {"role": "assistant", "content": content}


def tool_messages(
    turn: AssistantTurn, values: list[object], texts: list[str]
) -> list[dict[str, Any]]:
    """One user message of ``toolResult`` blocks: ``json`` for a mapping, else ``text``.

    A failure (an exception) is ``"status": "error"`` with its text.
    """
    blocks: list[dict[str, Any]] = []
    for call, value, text in zip(turn.tool_calls, values, texts, strict=True):
        result: dict[str, Any] = {"toolUseId": call.id}
        if isinstance(value, Mapping):
            result["content"] = [{"json": json_data(value)}]
        else:
            result["content"] = [{"text": text}]
        if isinstance(value, BaseException):
            result["status"] = "error"
        blocks.append({"toolResult": result})
    return [{"role": "user", "content": blocks}] if blocks else []


def _call_block(block: Mapping[str, Any]) -> tuple[str, object, object] | None:
    use = block.get("toolUse")
    if not isinstance(use, Mapping) or not isinstance(use.get("toolUseId"), str):
        return None
    return use["toolUseId"], use.get("name"), use.get("input")


def _result_block(block: Mapping[str, Any]) -> tuple[str | None, object] | None:
    result = block.get("toolResult")
    if not isinstance(result, Mapping):
        return None
    call_id = result.get("toolUseId")
    content = result.get("content")
    # One JSON part is the value itself; text parts are the text (answer_text joins them).
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], Mapping)
        and "json" in content[0]
    ):
        content = content[0]["json"]
    return (call_id if isinstance(call_id, str) else None), content


def _cancelled(call_id: str) -> dict[str, Any]:
    return {
        "toolResult": {"toolUseId": call_id, "content": [{"text": CANCELLED}], "status": "error"}
    }


def _frame(event: Mapping[str, Any]) -> bytes:
    """One ConverseStream event as a frame: an exception event as an exception frame."""
    ((name, body),) = event.items()
    payload = json.dumps(body, default=_base64).encode()
    if _is_exception(name):
        headers = {":exception-type": name, ":content-type": "application/json"}
        return encode_frame({**headers, ":message-type": "exception"}, payload)
    headers = {":event-type": name, ":content-type": "application/json"}
    return encode_frame({**headers, ":message-type": "event"}, payload)


def _is_exception(name: object) -> bool:
    """Whether an event's name is an exception's (rule 8)."""
    return name in _EXCEPTIONS or (type(name) is str and name.endswith("Exception"))


def _chunk_frame(event: Mapping[str, Any]) -> bytes:
    """One Anthropic event as InvokeModel sends it: a ``chunk`` frame, its bytes base64.

    An exception event goes as the exception frame it stands for, as on ConverseStream.
    """
    if len(event) == 1 and _is_exception(next(iter(event))):
        return _frame(event)
    inner = unwrap_chunk(event)
    body = json.dumps(event if inner is None else inner).encode()
    return _frame({"chunk": {"bytes": base64.b64encode(body).decode("ascii")}})


def _base64(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON")


_MEDIA = "application/vnd.amazon.eventstream"


def _read_body(body: bytes) -> list[dict[str, Any]] | None:
    """The events of a whole raw event-stream body, as ``from_eventstream`` reads them.

    ``None`` when its first prelude's checksum fails: that is no event stream at all.
    """
    if not looks_like_eventstream(body):
        return None
    decoder = EventStreamDecoder()
    events = [frame_event(frame) for frame in decoder.feed(body)]
    decoder.end()
    return events


_CONVERSE = Framing("eventstream", _MEDIA, _frame, b"", _read_body)
_INVOKE = Framing("eventstream", _MEDIA, _chunk_frame, b"", _read_body)


def _converse(
    turns: tuple[AssistantTurn, ...], chunks: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The non-streaming ``Converse`` response a recording stands for."""
    turn = turns[0]
    metrics = next(
        (
            c["metadata"]["metrics"]
            for c in chunks
            if isinstance(c.get("metadata"), dict)
            and isinstance(c["metadata"].get("metrics"), dict)
        ),
        {"latencyMs": 0},
    )
    # Through JSON: blobs (a redacted reasoning) as the base64 text the body carries.
    reply: dict[str, Any] = json.loads(
        json.dumps(
            {
                "output": {"message": turn.to_message()},
                "stopReason": turn.finish_reason,
                "usage": turn.usage or {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0},
                "metrics": metrics,
            },
            default=_base64,
        )
    )
    return reply


# AWS's error types by status, as botocore reads them from the body's ``__type``.
_KINDS = {
    400: "ValidationException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    411: "ValidationException",
    413: "ValidationException",
    500: "InternalServerException",
    502: "InternalServerException",
}


def _error_body(status: int, message: str, kind: str, code: object) -> dict[str, Any]:
    """``{"__type", "message"}``: the exception a recording holds, else the status's type."""
    if isinstance(code, str) and (code in RETRYABLE_EXCEPTIONS or code in FINAL_EXCEPTIONS):
        return {"__type": code[0].upper() + code[1:], "message": message}
    return {"__type": _KINDS.get(status, "ValidationException"), "message": message}


def _client_error(error: Exception) -> ProviderError | None:
    """Botocore's ``EventStreamError`` (an exception frame) or ``ClientError`` (a status)."""
    found = sdk_error(error)
    if found is not None or not _is(error, "ClientError", "botocore"):
        return found
    response = getattr(error, "response", None)
    said = response.get("Error") if isinstance(response, Mapping) else None
    said = said if isinstance(said, Mapping) else {}
    meta = response.get("ResponseMetadata") if isinstance(response, Mapping) else None
    status = meta.get("HTTPStatusCode") if isinstance(meta, Mapping) else None
    code = said.get("Code") or status
    again = retryable(code)
    typed = ProviderError(
        f"the provider answered HTTP {status}: {clip(str(said.get('Message')), 200)} "
        f"(type {excerpt(code)}); nothing was emitted",
        code=code,
        body=dict(said),
        retryable=retryable(status) if again is None else again,
    )
    if typed.retryable:
        typed.hint = RETRY_HINT
    return typed


def _tool_schemas(tool: Mapping[str, Any]) -> list[tuple[str, object]] | None:
    """``{"toolSpec": {"name", "inputSchema": {"json": schema}}}``, as Converse declares.

    A ``systemTool`` (run by Bedrock) or a ``cachePoint`` declares no client tool: none.
    """
    if len(tool) == 1 and ("systemTool" in tool or "cachePoint" in tool):
        return []
    spec = tool.get("toolSpec")
    name = spec.get("name") if isinstance(spec, Mapping) else None
    if not isinstance(spec, Mapping) or not isinstance(name, str):
        return None
    schema = spec.get("inputSchema")
    return [(name, schema.get("json") if isinstance(schema, Mapping) else None)]


def _sdk_stream(value: object, loop: asyncio.AbstractEventLoop | None) -> Observable[Any] | None:
    """A botocore (or aiobotocore) ``EventStream``, or the response dict holding one."""
    found = value.get("stream", value.get("body")) if isinstance(value, Mapping) else value
    if not type(found).__module__.startswith(("botocore", "aiobotocore")):
        return None
    if isinstance(found, AsyncIterable):
        return None if loop is None else from_async_bedrock_stream(found, loop=loop)
    return from_bedrock_stream(found)


_MODES = {"auto": "auto", "required": "any"}


def _connect(sdk: Any, base_url: str | None) -> tuple[Any, str]:
    session = sdk.session.Session()
    credentials = session.get_credentials()
    keys: dict[str, str] = {}
    if base_url is None:
        if session.region_name is None:
            raise ClientSetupError("no AWS region: set AWS_DEFAULT_REGION (or give --base-url)")
        if credentials is None:
            raise ClientSetupError(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                "AWS_PROFILE"
            )
    elif credentials is None:
        # A local endpoint (a replay server) checks no signature, but boto3 signs every call.
        keys = {"aws_access_key_id": "unused", "aws_secret_access_key": "unused"}
    client = session.client(
        "bedrock-runtime",
        region_name=session.region_name or "us-east-1",
        endpoint_url=base_url,
        # One attempt a call: the agent loop retries, as --retries says.
        config=sdk.session.Config(retries={"total_max_attempts": 1, "mode": "standard"}),
        **keys,
    )
    return client, base_url or str(client.meta.endpoint_url)


def _first_messages(prompt: str, system: str | None) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"text": prompt}]}]


def _open(client: Any, ask: Request, messages: list[dict[str, Any]]) -> Any:
    specs = [
        {"toolSpec": {"name": name, "description": said, "inputSchema": {"json": schema}}}
        for name, said, schema in functions(ask)
    ]
    mode = _MODES.get(ask.choice or "")
    choice = {mode: {}} if mode else {"tool": {"name": ask.choice}}
    return client.converse_stream(
        modelId=ask.model,
        messages=messages,
        **given(
            system=None if ask.system is None else [{"text": ask.system}],
            toolConfig=(
                given(tools=specs, toolChoice=None if ask.choice is None else choice)
                if specs
                else None
            ),
            inferenceConfig=(given(temperature=ask.temperature, maxTokens=ask.max_tokens) or None),
        ),
    )


WIRE = WireSpec(
    name="bedrock",
    title="AWS Bedrock Converse",
    identifies=identifies,
    unwrap=unwrap_chunk,
    reader=BedrockReader,
    terminal=True,
    pause_reasons=frozenset(),
    to_message=to_message,
    tool_messages=tool_messages,
    made_up_ids=no_made_up_ids,
    transcript=transcript(
        BlockShape(
            call=_call_block,
            result=_result_block,
            cancelled=_cancelled,
            alternate=True,
            text=lambda text: {"text": text},
        )
    ),
    retryable=RETRYABLE_EXCEPTIONS,
    final=FINAL_EXCEPTIONS,
    sdk_error=_client_error,
    sdk_packages=frozenset({"botocore", "urllib3"}),
    sdk_stream=_sdk_stream,
    path="/model/{modelId}/converse-stream",
    routes=(
        Route("/converse-stream", True, _CONVERSE),
        # InvokeModel carries another wire's events (Anthropic's, on Claude), in chunks.
        Route("/invoke-with-response-stream", True, _INVOKE, serves="anthropic"),
        Route("/converse", False, _CONVERSE),
    ),
    reply=_converse,
    error_body=_error_body,
    tool_schemas=_tool_schemas,
    client=Client(
        sdk="boto3",
        package="boto3",
        extra="bedrock",
        credentials="boto3's AWS credentials and region; with --base-url and none, placeholders",
        address="http://host, its endpoint_url",
        modes=tuple(_MODES),
        max_tokens=None,
        connect=_connect,
        messages=_first_messages,
        open=_open,
    ),
)
