"""The Gemini wire: ``streamGenerateContent`` responses onto the core.

Rules (``GeminiReader.feed``):

1. An event is one ``GenerateContentResponse``: a dict (the SSE ``data``, parsed) or a
   google-genai SDK object (read as the JSON it came from: camelCase keys, every
   ``thoughtSignature`` in the standard base64 the wire sent). Each candidate is a choice,
   keyed by its ``index`` (0 when absent); its parts are in ``content.parts``.
2. A ``functionCall`` part that has a ``name`` opens a call. Calls have no key on this wire:
   their order of appearance within the candidate is their ``index``. The ``id`` the model
   sent is kept; without one an id unique across conversations is made (``synthesized_id``):
   from the response's ``responseId`` and the call's place when the stream carries one, so
   every reader of one stream makes the same ids; drawn at random when it does not.
3. A call sent whole (``{name, args}``) is complete at once; ``args`` is an object, written
   as the call's arguments text, so the limits see its serialized size. A bare ``{name}``
   has no arguments (``{}``).
4. ``{name, willContinue: true}`` opens a streamed call. Later ``functionCall`` parts without
   a ``name`` are its fragments: each ``partialArgs`` entry sets a value at its ``jsonPath``
   (``stringValue`` growing across entries while they say ``willContinue``, ``numberValue``,
   ``boolValue``, ``nullValue``; an entry with no value is skipped, counted as
   ``empty_partial_args``). An empty ``functionCall {}``, or fragments that no longer
   say ``willContinue``, close it. A string value whose last entry still said
   ``willContinue`` was cut off mid-value: its call is a ``TruncatedToolCallError`` however
   it was closed. A call never closed (a new named call starts, or the candidate finishes
   with ``STOP``) may have been cut between two values: a ``TruncatedToolCallError`` too,
   unless ``Policy.accept_clean_end`` takes it as complete (``implicitly_closed_call``). A
   bad or conflicting path is a ``MalformedChunkError``.
5. ``text`` parts become ``content``, ``thought: true`` parts ``reasoning``. Every part is kept
   in ``items`` in order, with its ``thoughtSignature`` verbatim (adjacent text parts without
   a signature are joined; empty ones are dropped).
6. ``finishReason``: ``STOP`` emits (with or without calls); ``MAX_TOKENS`` is the token
   ceiling (a call makes it a ``TruncatedToolCallError``); ``SAFETY``, ``RECITATION``,
   ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``, ``MODEL_ARMOR`` and the image filters are a
   ``ContentFilteredError``, as is a prompt blocked in ``promptFeedback``;
   ``MALFORMED_FUNCTION_CALL``, ``UNEXPECTED_TOOL_CALL`` and ``TOO_MANY_TOOL_CALLS`` are an
   ``InvalidArgumentsError`` carrying ``finishMessage``; any other reason is a
   ``ProviderError``. A candidate that never finished is a ``StreamInterruptedError``.
7. An ``error`` object is a ``ProviderError`` (``retryable`` from its code and status). Parts
   after a candidate's finish, and events of another wire, are a ``MalformedChunkError``.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import os
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import asyncio

    from reactivex import Observable

from .._core import (
    _ABSENT,
    _COPY_DEPTH,
    _NO_EVENTS,
    _WRITE_JSON,
    _ZERO,
    Call,
    Core,
    _Choice,
    _copied,
    as_dict,
    as_object,
    attr,
)
from .._errors import (
    RETRY_HINT,
    MalformedChunkError,
    ProviderError,
    clip,
    excerpt,
    provider_error,
    retryable,
)
from .._policy import DEFAULT, Policy
from .._sse import SSE_DATA
from .._types import (
    AssistantTurn,
    CallItem,
    ToolCall,
    ToolCallStarted,
    error_text,
    json_data,
    new_call_item,
    new_started,
    new_tool_call,
    new_turn,
    tool_content,
)
from .._wire import (
    CANCELLED,
    Asked,
    Client,
    Found,
    Messages,
    Request,
    Route,
    Transcript,
    WireSpec,
    answer_text,
    functions,
    given,
    no_sdk_stream,
    text_of,
)
from ..sources import (
    _close,
    _every,
    _sdk_source,
    _typed_errors,
    from_async_iterable,
)

__all__ = [
    "WIRE",
    "GeminiReader",
    "from_async_gemini_stream",
    "from_gemini_stream",
    "identifies",
    "new_call_id",
]

_FILTERS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
_BAD_CALLS = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"})
_VALUES = ("stringValue", "numberValue", "boolValue", "nullValue")
# Fields of the SDK's response object that were never on the wire.
_SDK_ONLY = frozenset({"sdk_http_response", "automatic_function_calling_history", "parsed"})


def identifies(event: object) -> bool:
    """Whether an event is a ``GenerateContentResponse`` (a dict, or the SDK's object)."""
    if isinstance(event, Mapping):
        return "candidates" in event or "promptFeedback" in event
    fields = attr(type(event), "model_fields")
    return isinstance(fields, dict) and "candidates" in fields


def new_call_id() -> str:
    """An id for a call the model sent without one: random, so unique across turns."""
    # 96 random bits, as uuid4 gives, at a sixth of its cost (one per call of a turn).
    return f"call_{os.urandom(12).hex()}"


_ID_BITS = (1 << 96) - 1


def _outcome(reason: str) -> str:
    """A finishReason in Chat Completions terms, for the core's finish rules."""
    if reason == "STOP":
        return "stop"
    if reason == "MAX_TOKENS":
        return "length"
    if reason in _FILTERS:
        return "content_filter"
    if reason in _BAD_CALLS:
        return "invalid_call"
    return "error"


def _data(event: object) -> dict[str, Any]:
    """The response as the JSON the wire sent (an SDK object is dumped by its aliases)."""
    if type(event) is dict:
        return event
    if event is None or isinstance(event, str | bytes | int | float | list | tuple):
        raise MalformedChunkError(
            f"a Gemini response must be an object, got {type(event).__name__}"
        )
    dump = attr(event, "model_dump")
    if not callable(dump):
        raise MalformedChunkError(
            f"a Gemini response must be a dict or an SDK object, got {type(event).__name__}"
        )
    try:
        dumped = dump(mode="json", by_alias=True, exclude_none=True, exclude=_SDK_ONLY)
    except Exception as exc:
        raise MalformedChunkError(f"{type(event).__name__}.model_dump() raised") from exc
    if type(dumped) is not dict:
        raise MalformedChunkError(f"{type(event).__name__}.model_dump() gave no object")
    # The SDK holds signatures as bytes and writes them back URL-safe: restore the wire's own.
    for c, candidate in enumerate(attr(event, "candidates") or ()):
        for p, part in enumerate(attr(attr(candidate, "content"), "parts") or ()):
            signature = attr(part, "thought_signature")
            if isinstance(signature, bytes):
                parts = dumped["candidates"][c]["content"]["parts"]
                parts[p]["thoughtSignature"] = base64.b64encode(signature).decode("ascii")
    return dumped


def _render_given(call: ToolCall) -> dict[str, Any]:
    return {"functionCall": {"name": call.name, "args": call.parsed_arguments, "id": call.id}}


def _render_made(call: ToolCall) -> dict[str, Any]:
    return {"functionCall": {"name": call.name, "args": call.parsed_arguments}}


def _render_call(part: dict[str, Any], given_id: bool) -> Callable[[ToolCall], dict[str, Any]]:
    if not part:
        # Nearly every part holds the call alone: one shared function, nothing made per call.
        return _render_given if given_id else _render_made
    return _Rendered(part, given_id)


class _Rendered:
    """A call's part as sent, with what it held besides the call (``thoughtSignature``…).

    A class, not a closure: a reader holding it still copies and pickles.
    """

    __slots__ = ("given_id", "part")

    def __init__(self, part: dict[str, Any], given_id: bool) -> None:
        self.part = part
        self.given_id = given_id

    def __call__(self, call: ToolCall) -> dict[str, Any]:
        function_call: dict[str, Any] = {"name": call.name, "args": call.parsed_arguments}
        if self.given_id:
            function_call["id"] = call.id
        return {"functionCall": function_call, **self.part}


class _Signed:
    """A rendering, with the keys a later part added to the call (kept where it has none)."""

    __slots__ = ("extra", "render")

    def __init__(self, extra: dict[str, Any], render: Callable[[ToolCall], dict[str, Any]]) -> None:
        self.extra = extra
        self.render = render

    def __call__(self, call: ToolCall) -> dict[str, Any]:
        rendered = self.render(call)
        for key, value in self.extra.items():
            rendered.setdefault(key, value)
        return rendered


class _Candidate:
    """One candidate's parts, its open streamed call, and the calls its fast path took whole.

    ``whole`` holds those calls; their parts are the dicts in ``parts`` that hold a
    ``functionCall`` (the full path's calls are ``CallItem``s there, and a part it keeps as
    sent holds none).
    """

    __slots__ = ("calls", "ended", "open", "parts", "tail", "whole")

    def __init__(self) -> None:
        self.parts: list[dict[str, Any] | CallItem] = []
        # The pieces of the last part's text while more join it, joined once (``flush``):
        # adding to the part's str each time copied it, quadratic in a long answer.
        self.tail: list[str] | None = None
        self.open: Call | None = None
        self.calls = 0
        self.ended = False
        # Calls sent whole and taken by the fast path, already built: they become ``Call``s
        # only when something asks for those (``_held``).
        self.whole: list[ToolCall] = []

    def add(self, part: dict[str, Any] | CallItem) -> None:
        """Append ``part``, after the last part's text is joined."""
        if self.tail is not None:
            self.flush()
        self.parts.append(part)

    def flush(self) -> None:
        """Join the last part's text pieces into it."""
        tail = self.tail
        if tail is not None:
            cast("dict[str, Any]", self.parts[-1])["text"] = "".join(tail)
            self.tail = None


class _Parts(Core):
    """The parts of each candidate: text, thoughts, whole and streamed calls."""

    __slots__ = (
        "_candidates",
        "_copy_depth",
        "_first",
        "_max_calls",
        "_next_id",
        "_response_id",
        "_whole_ok",
    )

    def __init__(
        self,
        policy: Policy = DEFAULT,
        *,
        on_open: Callable[[Call], None] | None = None,
        keep_arguments: bool = True,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        super().__init__(policy, on_open=on_open, keep_arguments=keep_arguments, on_error=on_error)
        self._candidates: dict[int, _Candidate] = {}
        # Candidate 0, read by the fast paths (nearly every stream has no other).
        self._first: _Candidate | None = None
        self._next_id: int | None = None
        # The first ``responseId`` read on the full path (every stream's first response takes
        # it), for made-up ids: the same for every reader of the stream, whatever path each
        # event of theirs takes.
        self._response_id: str | None = None
        # Deeper objects are parsed at the close (a copy this deep would recurse far).
        self._copy_depth = min(policy.limits.max_depth, _COPY_DEPTH)
        self._max_calls = policy.limits.max_calls
        # Whether a call sent whole may take the fast path: nobody watches calls open, the
        # reader keeps arguments (the fast path builds their text), and they need nothing but
        # their limits and a copy (no schema to check them).
        self._whole_ok = on_open is None and keep_arguments and not policy.validate_arguments

    def _candidate(self, data: object) -> tuple[_Choice, _Candidate]:
        if not isinstance(data, dict):
            raise MalformedChunkError(
                f"a Gemini candidate must be an object, got {type(data).__name__}"
            )
        index = data.get("index", 0)
        if type(index) is not int or not 0 <= index < 1 << 31:
            raise MalformedChunkError(
                f"a Gemini candidate index must be a small int, got {excerpt(index)}"
            )
        state = self._state(index)  # first: it refuses a candidate past Limits.max_choices
        found = self._candidates.get(index)
        if found is None:
            found = self._candidates[index] = _Candidate()
            if index == 0:
                self._first = found
        return state, found

    def _part(
        self, state: _Choice, candidate: _Candidate, part: object
    ) -> Sequence[ToolCallStarted]:
        if not isinstance(part, dict):
            raise MalformedChunkError(f"a Gemini part must be an object, got {type(part).__name__}")
        if candidate.ended:
            raise MalformedChunkError(
                f"candidate {state.index}: a part after its finishReason "
                f"{excerpt(state.finish_reason)}",
                choice_index=state.index,
            )
        function_call = part.get("functionCall")
        if function_call is not None:
            return self._function_call(state, candidate, part, function_call)
        text = part.get("text")
        if text is not None:
            self._text(state, candidate, part, text)
        else:
            # A copy: the parts are the reader's own (the turn holds them, ``_held`` reads them).
            self.charge_kept(part, f"candidate {state.index}: a part")
            candidate.add(dict(part))
        return _NO_EVENTS

    def _text(
        self, state: _Choice, candidate: _Candidate, part: dict[str, Any], text: object
    ) -> None:
        thought = part.get("thought") is True
        if text == "" and "thoughtSignature" not in part:
            return
        self._write(state, "reasoning" if thought else "content", "text", text)
        if len(part) > 1 + thought:
            # What the part holds besides its text (a signature) is kept as sent.
            self.charge_kept(
                {k: v for k, v in part.items() if k != "text" and (k != "thought" or not thought)},
                f"candidate {state.index}: a text part",
            )
        last = candidate.parts[-1] if candidate.parts else None
        if (
            isinstance(last, dict)
            and type(text) is str  # as _write made sure: for the type checker
            and "thoughtSignature" not in part
            and "thoughtSignature" not in last
            and type(last.get("text")) is str
            and (last.get("thought") is True) == thought
            and set(part) <= {"text", "thought"}
            and set(last) <= {"text", "thought"}
        ):
            if candidate.tail is None:
                candidate.tail = [last["text"]]
            candidate.tail.append(text)
            return
        candidate.add(dict(part))

    def _function_call(
        self, state: _Choice, candidate: _Candidate, part: dict[str, Any], function_call: object
    ) -> Sequence[ToolCallStarted]:
        if not isinstance(function_call, dict):
            raise MalformedChunkError(
                f"candidate {state.index}: functionCall must be an object, got "
                f"{type(function_call).__name__}",
                choice_index=state.index,
            )
        if candidate.whole:
            self._held()  # before a call of the full path takes its place after them
        name = self._identity(state, candidate.calls, "name", function_call.get("name"))
        goes_on = function_call.get("willContinue") is True
        fragments = function_call.get("partialArgs")
        if name is None:
            call = candidate.open
            if call is None:
                raise MalformedChunkError(
                    f"candidate {state.index}: a functionCall part without a name, and no "
                    f"streamed call is open",
                    choice_index=state.index,
                )
            if "thoughtSignature" in part:
                self._sign(candidate, call, part)
            if fragments is not None:
                self._fragments(call, fragments)
            if not goes_on:
                self._close_call(candidate, call)
            return _NO_EVENTS
        if candidate.open is not None:
            self._close_call(candidate, candidate.open, explicit=False)
        given = self._identity(state, candidate.calls, "id", function_call.get("id"))
        if given is None:
            self._count("synthesized_id")
        call = self._open(
            state,
            candidate.calls,
            given or self._new_id(self._response_id),
            "function",
            name,
            provisional=True,
        )
        call.closed = False
        call.made_up = given is None
        candidate.calls += 1
        shown = {k: v for k, v in part.items() if k != "functionCall"} if len(part) > 1 else {}
        if shown:
            self.charge_kept(shown, f"candidate {state.index}: a functionCall part")
        candidate.add(new_call_item(call.index, _render_call(shown, given is not None)))
        # A part names its call whole: a later part without a name only continues its values.
        started = self._name_known(call, whole=True)
        args = function_call.get("args")
        if args is not None:
            if fragments is not None:
                raise _malformed(
                    call, f"functionCall {excerpt(name)} has both args and partialArgs"
                )
            if not isinstance(args, dict):
                raise self._bad_args(call, args)
            self.set_object_arguments(call, args)
            if not goes_on:
                # Sent whole: nothing was set by path, so there is nothing left to write.
                call.closed = True
                return _NO_EVENTS if started is None else (started,)
        elif fragments is not None:
            self._fragments(call, fragments)
        if goes_on:
            candidate.open = call
        else:
            self._close_call(candidate, call)
        return _NO_EVENTS if started is None else (started,)

    def _held(self) -> None:
        """Make the calls the fast path built into the core's ``Call``s, in their order."""
        for index, candidate in self._candidates.items():
            if candidate.whole:
                state = self._choices[index]
                parts = candidate.parts
                places = [
                    at
                    for at, part in enumerate(parts)
                    if type(part) is dict and part.get("functionCall") is not None
                ]
                for built, at in zip(candidate.whole, places, strict=True):
                    # Its part becomes a CallItem, so that ``end()`` shows it as the full path.
                    given = "id" in parts[at]["functionCall"]  # type: ignore[index]
                    render = _render_given if given else _render_made
                    parts[at] = new_call_item(built.index, render)
                    call = Call(
                        index,
                        built.index,
                        len(state.every) + 1,
                        built.id,
                        "function",
                        built.name,
                        False,
                    )
                    call.end = len(built.arguments)
                    call.closed = True
                    call.made_up = not given
                    call.streamed = built.arguments
                    call.parsed = built.parsed_arguments
                    call.announced = True
                    state.calls[built.index] = call
                    state.every.append(call)
                candidate.whole.clear()

    def _all_calls(self) -> list[Call]:
        self._held()
        return super()._all_calls()

    def _note_response_id(self, data: dict[str, Any]) -> None:
        """Keep ``data``'s ``responseId`` for the ids made up (the first one read, on any path)."""
        found = data.get("responseId")
        if type(found) is str and found:
            self._response_id = found

    def _new_id(self, response_id: object) -> str:
        """An id of ``new_call_id``'s shape; the turn's calls count on from one first draw.

        The draw is a hash of ``response_id`` when it is a non-empty string (every reader of
        the stream makes the same ids, and another response other ones), else random.
        """
        # Per turn, not once per process: a process cloned from a memory snapshot (Lambda
        # SnapStart) would repeat a process-wide count, not the kernel's random bytes.
        drawn = self._next_id
        if drawn is None:
            if type(response_id) is str and response_id:
                key = response_id.encode("utf-8", "surrogatepass")
                drawn = int.from_bytes(hashlib.blake2b(key, digest_size=12).digest())
            else:
                drawn = int.from_bytes(os.urandom(12))
        self._next_id = (drawn + 1) & _ID_BITS
        # The 24 hex digits of f"{drawn:024x}", at half its cost.
        return "call_" + drawn.to_bytes(12).hex()

    def _bad_args(self, call: Call, args: object) -> MalformedChunkError:
        return _malformed(
            call,
            f"functionCall {excerpt(call.name)} args must be an object, got {type(args).__name__}",
        )

    def _fragments(self, call: Call, fragments: object) -> None:
        if not isinstance(fragments, list):
            raise _malformed(call, f"partialArgs must be a list, got {type(fragments).__name__}")
        for fragment in fragments:
            if not isinstance(fragment, dict):
                raise _malformed(
                    call,
                    f"a partialArgs entry must be an object, got {type(fragment).__name__}",
                )
            # As the wire's JSON writes them: an unset value is absent or null, but a
            # nullValue is null whatever it holds (protobuf's NullValue writes as null).
            kinds = [
                k
                for k in _VALUES
                if fragment.get(k) is not None or (k == "nullValue" and k in fragment)
            ]
            if not kinds:
                self._count("empty_partial_args")
                continue
            if len(kinds) != 1:
                raise _malformed(
                    call,
                    f"a partialArgs entry at "
                    f"{excerpt(fragment.get('jsonPath'), 80)} must carry exactly one of "
                    f"{', '.join(_VALUES)}, got {len(kinds)}",
                )
            kind = kinds[0]
            value = fragment[kind]
            if kind == "nullValue":
                value = None
            elif (kind == "stringValue" and type(value) is not str) or (
                kind == "boolValue" and type(value) is not bool
            ):
                raise _malformed(
                    call,
                    f"{kind} must be a "
                    f"{'string' if kind == 'stringValue' else 'bool'}, got {type(value).__name__}",
                )
            elif kind == "numberValue" and (
                type(value) not in (int, float) or value != value or value in (_INF, -_INF)
            ):
                raise _malformed(
                    call,
                    f"numberValue must be a finite number, got "
                    f"{'a non-finite float' if type(value) is float else type(value).__name__}",
                )
            self.set_path(
                call, fragment.get("jsonPath"), value, fragment.get("willContinue") is True
            )

    def _sign(self, candidate: _Candidate, call: Call, part: dict[str, Any]) -> None:
        """Keep a signature sent on a fragment with the call's own part."""
        extra = {k: v for k, v in part.items() if k != "functionCall"}
        self.charge_kept(extra, f"candidate {call.choice_index}: a functionCall part")
        for at, item in enumerate(candidate.parts):
            if isinstance(item, CallItem) and item.index == call.index:
                render = item.render
                if isinstance(render, _Signed):
                    # One layer however many fragments are signed (each a frame when drawn);
                    # what an earlier one added still wins.
                    extra, render = {**extra, **render.extra}, render.render
                candidate.parts[at] = new_call_item(call.index, _Signed(extra, render))
                return

    def _close_call(self, candidate: _Candidate, call: Call, explicit: bool = True) -> None:
        """End ``call``: closed only if every value was finished, and its close was said.

        A close the wire never sent (``explicit=False``: a new named call, the finish) looks
        exactly like a stream cut between two values, so it counts only under
        ``accept_clean_end``.
        """
        said = explicit or self._policy.accept_clean_end
        finished = self.close_paths(call, said)
        if not explicit:
            self._count("implicitly_closed_call")
        call.closed = finished and said
        if candidate.open is call:
            candidate.open = None


_INF = float("inf")


def _malformed(call: Call, message: str) -> MalformedChunkError:
    """A ``MalformedChunkError`` about ``call``: ``message``, after its candidate."""
    return MalformedChunkError(
        f"candidate {call.choice_index}: {message}",
        choice_index=call.choice_index,
        index=call.index,
        name=call.name,
    )


class GeminiReader(_Parts):
    """Reads Gemini ``GenerateContentResponse`` events (rules 1-7)."""

    __slots__ = ()

    wire = "gemini"

    def feed(self, event: object) -> Sequence[ToolCallStarted]:
        """Apply one response; return the calls it named (usually none)."""
        # Fast paths for the usual responses: one more piece of a string growing in the open
        # streamed call, one call sent whole, a piece of the answer's text, the last response
        # of a turn. A surprise (another shape, a missing key, a wrong type, a rule that could
        # refuse it) leaves for the full path, which reports it; nothing is changed until every
        # test has passed.
        if not self._fast or type(event) is not dict:
            return self._slow_feed(event)
        first = self._first
        call = None if first is None else first.open
        # Each container's type is tested before it is read: a dict subclass (a defaultdict)
        # would make up a missing key, and write it into the caller's event; a list subclass
        # or a generator would be read differently (or used up) by the full path.
        try:
            found = event["candidates"]
            if type(found) is not list:
                return self._slow_feed(event)
            (candidate,) = found
            if type(candidate) is not dict:
                return self._slow_feed(event)
            content = candidate["content"]
            if type(content) is not dict:
                return self._slow_feed(event)
            parts = content["parts"]
            if type(parts) is not list:
                return self._slow_feed(event)
            (part,) = parts
        except (KeyError, ValueError):
            return self._slow_feed(event)
        usage = event.get("usageMetadata")
        if not (
            type(part) is dict
            and len(part) == 1
            and candidate.get("index", 0) is _ZERO
            and "error" not in event
            and (usage is None or type(usage) is dict)
        ):
            return self._slow_feed(event)
        function_call = part.get("functionCall")
        if call is not None:
            # The bulk of a call with streamed arguments, read here with no call in between.
            tree = call.tree
            if (
                tree is None
                or tree.watch is not None
                or type(function_call) is not dict
                or len(function_call) != 2
                or "finishReason" in candidate
            ):
                return self._slow_feed(event)
            try:
                fragments = function_call["partialArgs"]
                if type(fragments) is not list or function_call["willContinue"] is not True:
                    return self._slow_feed(event)
                (entry,) = fragments
                if type(entry) is not dict or len(entry) != 3:
                    return self._slow_feed(event)
                piece = entry["stringValue"]
                path = entry["jsonPath"]
                # The last piece of a string says no more (or nothing): the full path ends it.
                more = entry["willContinue"]
            except (KeyError, ValueError):
                return self._slow_feed(event)
            if (
                type(piece) is not str
                or type(path) is not str
                or more is not True
                # Within the tree's grant no limit can be passed; past it, the full path
                # checks them exactly and grants more.
                or (size := tree.size + len(piece)) > tree.end
            ):
                return self._slow_feed(event)
            text = tree.growing.get(path)
            if text is None:
                return self._slow_feed(event)
            text.pieces.append(piece)
            tree.size = size
            if usage is not None:
                self.usage = usage
            return _NO_EVENTS
        if function_call is not None:
            started = self._whole_call(first, candidate, function_call, event)
        elif "finishReason" in candidate:
            started = self._last(first, candidate, part)
        else:
            started = self._prose(first, part)
        if started is None:
            return self._slow_feed(event)
        if usage is not None:
            self.usage = usage
        return started

    def _whole_call(
        self,
        first: _Candidate | None,
        candidate: dict[str, Any],
        function_call: object,
        event: dict[str, Any],
    ) -> Sequence[ToolCallStarted] | None:
        """Rule 3 for one call sent whole in candidate 0, or ``None``."""
        if type(function_call) is not dict:
            return None
        name = function_call.get("name")
        args = function_call.get("args")
        given = function_call.get("id")
        tools = self._policy.tools
        if not (
            type(name) is str
            and type(args) is dict
            and self._whole_ok
            and "finishReason" not in candidate
            and len(function_call) == (2 if given is None else 3)
            and 0 < len(name) <= self._max_identifier
            and (given is None or (type(given) is str and 0 < len(given) <= self._max_identifier))
            and (tools is None or name in tools)
            and (first is None or not first.ended)
            and self._opened < self._max_calls
        ):
            return None
        try:
            text = _WRITE_JSON(args)
        except Exception:  # noqa: BLE001 - the full path writes it again and reports
            return None
        size = len(text)
        if size > self._max_call or size > self._budget:
            return None
        parsed = _copied(args, self._copy_depth)
        if parsed is _ABSENT:
            return None  # parsed at the close, by the full path
        if self._response_id is None:
            self._note_response_id(event)
        if first is None:
            if len(self._choices) >= self._policy.limits.max_choices:
                return None  # the full path refuses the candidate (Limits.max_choices)
            self._state(0)
            first = self._first = self._candidates[0] = _Candidate()
        self._opened += 1
        self._budget -= size
        number = first.calls
        first.calls = number + 1
        # The part as the turn's items show it, made now: its call is complete already.
        if given is None:
            given = self._new_id(self._response_id)
            counts = self.normalizations
            counts["synthesized_id"] = counts.get("synthesized_id", 0) + 1
            first.add({"functionCall": {"name": name, "args": parsed}})
        else:
            first.add({"functionCall": {"name": name, "args": parsed, "id": given}})
        first.whole.append(new_tool_call(number, given, name, text, parsed, "function", None))
        self._named += 1
        if not self._announce:
            return _NO_EVENTS
        return [new_started(number, given, name, self._named, 0)]

    def _prose(
        self, first: _Candidate | None, part: dict[str, Any]
    ) -> Sequence[ToolCallStarted] | None:
        """One piece of the answer's text, as the full path's ``_text`` takes it, or ``None``."""
        text = part.get("text")
        if (
            first is None
            or first.ended
            or type(text) is not str
            or str.__len__(text) > self._text_room
        ):
            return None
        self._text(self._choices[0], first, part, text)
        return _NO_EVENTS

    def _last(
        self, first: _Candidate | None, candidate: dict[str, Any], part: dict[str, Any]
    ) -> Sequence[ToolCallStarted] | None:
        """The usual last response, ``STOP`` with an empty text, or ``None`` (rule 6)."""
        reason = candidate["finishReason"]
        text = part.get("text")
        message = candidate.get("finishMessage")
        if not (
            first is not None
            and not first.ended
            and type(reason) is str
            and reason == "STOP"
            and type(text) is str
            and not text
            and (message is None or type(message) is str)
        ):
            return None
        first.ended = True
        state = self._choices[0]
        state.finish_reason = "STOP"
        state.outcome = "stop"
        if message is not None:
            state.finish_message = message
        return _NO_EVENTS

    def _feed(self, event: object) -> Sequence[ToolCallStarted]:
        if isinstance(event, str) and event.strip() == "[DONE]":
            return _NO_EVENTS
        data = _data(event)
        if self._response_id is None:
            self._note_response_id(data)
        error = data.get("error")
        if error is not None:
            source = data if (found := as_object(error)) is None else found
            code = source.get("code")
            raise provider_error(source.get("message") or source, code, data)
        candidates = data.get("candidates")
        usage = data.get("usageMetadata")
        if usage is not None:
            self.usage = as_dict(usage)
        if not candidates:
            if candidates is None:
                self.refuse_other_wire(data)
                if "type" in data:
                    raise MalformedChunkError(
                        "a typed event in a Gemini stream: one stream speaks one wire"
                    )
            # A blocked prompt has no candidates, whether the key is absent, null or [].
            self._prompt_feedback(data.get("promptFeedback"))
            if candidates is None:
                return _NO_EVENTS
        if not isinstance(candidates, list):
            raise MalformedChunkError(f"candidates must be a list, got {type(candidates).__name__}")
        started: list[ToolCallStarted] = []
        for found in candidates:
            state, candidate = self._candidate(found)
            content = found.get("content")
            parts = None if (shown := as_object(content)) is None else shown.get("parts")
            if parts is not None:
                if not isinstance(parts, list):
                    raise MalformedChunkError(
                        f"candidate {state.index}: parts must be a list, got "
                        f"{type(parts).__name__}",
                        choice_index=state.index,
                    )
                for part in parts:
                    started.extend(self._part(state, candidate, part))
            reason = found.get("finishReason")
            if reason is not None:
                self._finish(state, candidate, reason, found.get("finishMessage"))
        return started or _NO_EVENTS

    def _finish(
        self, state: _Choice, candidate: _Candidate, reason: object, message: object
    ) -> None:
        if type(reason) is not str or not reason:
            raise MalformedChunkError(
                f"candidate {state.index}: finishReason must be a string, got {excerpt(reason)}",
                choice_index=state.index,
            )
        if candidate.ended and reason != state.finish_reason:
            raise MalformedChunkError(
                f"candidate {state.index}: finishReason {excerpt(reason)} after "
                f"{excerpt(state.finish_reason)}",
                choice_index=state.index,
            )
        candidate.ended = True
        state.finish_reason = reason
        state.outcome = _outcome(reason)
        if isinstance(message, str):
            state.finish_message = message
        if state.outcome == "stop" and candidate.open is not None:
            # The last streamed call may never get its closing part (rule 4).
            self._close_call(candidate, candidate.open, explicit=False)
        # Any other end leaves it open for good: the close finds it cut off.
        candidate.open = None

    def _prompt_feedback(self, feedback: object) -> None:
        reason = None if (found := as_object(feedback)) is None else found.get("blockReason")
        if reason is None:
            return
        state, candidate = self._candidate({})
        candidate.ended = True
        # Ended: the piece's fast path looks for an open call, and must find none to grow.
        candidate.open = None
        state.finish_reason = reason if type(reason) is str else excerpt(reason)
        state.outcome = "content_filter"

    def close_choices(self) -> tuple[AssistantTurn, ...]:
        """Return the turn (or one per candidate), or raise (once only)."""
        if not self._closed and len(self._candidates) == 1:
            candidate = self._candidates.get(0)
            if candidate is not None:
                turn = self._whole_turn(self._choices[0], candidate)
                if turn is not None:
                    return (turn,)
        return super().close_choices()

    def _whole_turn(self, state: _Choice, candidate: _Candidate) -> AssistantTurn | None:
        """The turn of a candidate that ended ``STOP``, every call taken by the fast path.

        ``None`` for any other turn. The fast path applied every rule of the general close to
        those calls but the tools', applied again here: the caller's mapping may have changed.
        """
        if state.outcome != "stop" or state.every:
            return None
        calls = candidate.whole
        tools = self._policy.tools
        if tools is not None and any(call.name not in tools for call in calls):
            return None  # tools changed since: the general close says which is unknown
        if len({call.id for call in calls}) != len(calls):
            return None  # two share an id: the general close refuses or renames it
        self._closed = True
        self.stop()
        # No CallItem: one is made only with a call of the core's, and there is none. The
        # parts go to the turn uncopied: each is a dict the reader made or copied, and a
        # closed reader changes none of them.
        candidate.flush()
        items = cast("list[dict[str, Any]]", candidate.parts)
        return new_turn(
            None if state.content is None else state.content.getvalue(),
            tuple(calls),
            state.finish_reason,
            None if state.refusal is None else state.refusal.getvalue(),
            None if state.reasoning is None else state.reasoning.getvalue(),
            self.usage,
            0,
            None,
            dict(self.normalizations),
            "gemini",
            tuple(items),
        )

    def _release(self) -> None:
        super()._release()
        for candidate in self._candidates.values():
            candidate.parts.clear()
            candidate.whole.clear()
            candidate.tail = None

    def _settle(self) -> None:
        self._held()
        for index, candidate in self._candidates.items():
            candidate.flush()
            self._choices[index].items = tuple(
                dict(p) if isinstance(p, dict) else p for p in candidate.parts
            )


# -- Answering in the wire ------------------------------------------------------------------


def to_message(turn: AssistantTurn, empty_content: str | None) -> dict[str, Any]:
    """The ``model`` content: the turn's parts, signatures and calls as the model sent them."""
    return {"role": "model", "parts": [dict(part) for part in turn.items]}


def tool_messages(
    turn: AssistantTurn, values: list[object], texts: list[str]
) -> list[dict[str, Any]]:
    """One user content of ``functionResponse`` parts, in call order."""
    # Only ids the model sent go back: a made-up one means nothing to the API.
    made_up = made_up_ids(turn)
    parts: list[dict[str, Any]] = []
    for call, value in zip(turn.tool_calls, values, strict=True):
        response: dict[str, Any]
        if isinstance(value, BaseException):
            response = {"error": error_text(value)}
        elif isinstance(value, Mapping):
            response = json.loads(tool_content(value))
        else:
            response = {"output": value if isinstance(value, str) else json_data(value)}
        answer: dict[str, Any] = {"name": call.name}
        if call.id not in made_up:
            answer["id"] = call.id
        answer["response"] = response
        parts.append({"functionResponse": answer})
    return [{"role": "user", "parts": parts}] if parts else []


def made_up_ids(turn: AssistantTurn) -> frozenset[str]:
    """The ids the reader made up: those in no ``functionCall`` part the model sent."""
    sent = {
        part["functionCall"]["id"]
        for part in turn.items
        if isinstance(part.get("functionCall"), dict) and "id" in part["functionCall"]
    }
    return frozenset(call.id for call in turn.tool_calls if call.id not in sent)


# -- The transcript: a model content answered by the content right after it --------------

# A call of a model content: its name, its id (None: the model sent none), its part.
_GeminiCall = tuple[str, str | None, Mapping[str, Any]]


def _parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    parts = message.get("parts")
    if not isinstance(parts, list):
        return []
    return [part for part in parts if isinstance(part, Mapping)]


def _is_model(message: Mapping[str, Any] | None) -> bool:
    return message is not None and message.get("role") == "model"


def _function_calls(message: Mapping[str, Any]) -> list[_GeminiCall]:
    """The calls of a model content, in order."""
    if not _is_model(message):
        return []
    calls: list[_GeminiCall] = []
    for part in _parts(message):
        call = part.get("functionCall")
        if isinstance(call, Mapping) and isinstance(call.get("name"), str):
            calls.append((call["name"], text_of(call.get("id")) or None, call))
    return calls


def _response_of(part: object) -> Mapping[str, Any] | None:
    """The ``functionResponse`` a part holds, if it is one."""
    if not isinstance(part, Mapping):
        return None
    response = part.get("functionResponse")
    return response if isinstance(response, Mapping) else None


def _match(calls: Sequence[_GeminiCall], parts: Sequence[object]) -> dict[int, int]:
    """Which part answers which call: {call position: part position}.

    An answer quoting an id takes the call with that id; one without takes the first call
    of its name not yet answered. A second answer to a call, or one to no call, takes none.
    """
    by_id: dict[str, int] = {}
    for at, (_, call_id, _) in enumerate(calls):
        if call_id is not None:
            by_id.setdefault(call_id, at)
    taken: dict[int, int] = {}
    for at, part in enumerate(parts):
        response = _response_of(part)
        call_id = None if response is None else text_of(response.get("id")) or None
        if call_id is not None:
            found = by_id.get(call_id)
            if found is not None and found not in taken:
                taken[found] = at
    for at, part in enumerate(parts):
        response = _response_of(part)
        if response is None or text_of(response.get("id")):
            continue
        name = text_of(response.get("name"))
        for found, (call_name, _, _) in enumerate(calls):
            if call_name == name and found not in taken:
                taken[found] = at
                break
    return taken


def _answering(messages: Messages, position: int) -> Mapping[str, Any] | None:
    """The content after the model content at ``position``, if it can answer it."""
    following = messages[position + 1] if position + 1 < len(messages) else None
    if following is None or _is_model(following) or not isinstance(following.get("parts"), list):
        return None
    return following


def _answer_parts(message: Mapping[str, Any] | None) -> list[object]:
    parts = None if message is None else message.get("parts")
    return parts if isinstance(parts, list) else []


def _gemini_turns(messages: Messages) -> list[tuple[int, dict[int, int], list[_GeminiCall]]]:
    """Each model content with calls: position, which parts answer them, the calls unanswered."""
    turns = []
    for position, message in enumerate(messages):
        calls = _function_calls(message)
        if calls:
            taken = _match(calls, _answer_parts(_answering(messages, position)))
            missing = [call for at, call in enumerate(calls) if at not in taken]
            turns.append((position, taken, missing))
    return turns


def _cancelled_response(call: _GeminiCall) -> dict[str, Any]:
    name, call_id, _ = call
    answer: dict[str, Any] = {"name": name}
    if call_id is not None:
        answer["id"] = call_id
    answer["response"] = {"error": CANCELLED}
    return {"functionResponse": answer}


def _gemini_answers_only(
    message: Mapping[str, Any], calls: Sequence[_GeminiCall], fill: bool
) -> dict[str, Any] | None:
    """A content with its answers to ``calls`` kept once; with ``fill``, every call answered.

    Filled answers are all the calls', in call order, where the first answer was (Gemini
    wants a turn's answers together). ``None`` when nothing is left of it.
    """
    parts = message.get("parts")
    if not isinstance(parts, list):
        return dict(message)
    taken = _match(calls, parts)
    answers = set(taken.values())
    kept: list[Any] = []
    block: int | None = None
    for at, part in enumerate(parts):
        if _response_of(part) is None:
            kept.append(part)
            continue
        if block is None:
            block = len(kept)
        if at in answers and not fill:
            kept.append(dict(part))
        # else: an answer to no call of the turn before (the API refuses it), or one
        # that the filled block below puts in its call's place
    if fill:
        ordered = [
            dict(parts[taken[at]]) if at in taken else _cancelled_response(call)
            for at, call in enumerate(calls)
        ]
        at = 0 if block is None else block
        kept[at:at] = ordered
    if parts and not kept:
        return None
    return {**message, "parts": kept}


def _gemini_repair(messages: Messages, mode: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    calls: list[_GeminiCall] = []
    fill = False
    for position, message in enumerate(messages):
        if not _is_model(message):
            answered = _gemini_answers_only(message, calls, fill)
            calls, fill = [], False
            if answered is not None:
                out.append(answered)
            continue
        found = _function_calls(message)
        following = _answering(messages, position)
        calls, fill = [], False
        if found:
            taken = _match(found, _answer_parts(following))
            if len(taken) < len(found) and mode == "drop":
                continue  # with no calls wanted, the next content's answers to it go too
            calls, fill = found, len(taken) < len(found)
        out.append(dict(message))
        if fill and following is None:
            out.append({"role": "user", "parts": [_cancelled_response(c) for c in calls]})
            calls, fill = [], False
    return out


def _gemini_open(messages: Messages) -> Found | None:
    at = len(messages) - 1
    parts: list[object] = []
    if at >= 0 and not _is_model(messages[at]):
        parts = _answer_parts(messages[at])
        if not isinstance(messages[at].get("parts"), list) or any(
            _response_of(part) is None for part in parts
        ):
            return None
        at -= 1
    found = _function_calls(messages[at]) if at >= 0 else []
    if not found:
        return None
    sent = {call_id for _, call_id, _ in found}
    calls: list[Asked] = []
    for index, (name, call_id, call) in enumerate(found):
        given = call_id
        if given is None:
            # Its place in the turn, not its id, is what the loop's ledger keys on.
            given = f"call_{index}"
            while given in sent:
                given += "_"
        calls.append((at, index, given, name, call.get("args", {}), "function", None))
    answers: dict[str, str] = {}
    for index, part_at in _match(found, parts).items():
        response = _response_of(parts[part_at])
        value = None if response is None else response.get("response")
        if isinstance(value, Mapping) and set(value) == {"output"}:
            value = value["output"]
        answers[calls[index][2]] = answer_text(value)
    return calls, tuple(dict(part) for part in _parts(messages[at])), answers


def _shows(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "model" or any(
        "functionCall" in p or "functionResponse" in p for p in _parts(message)
    )


def _find(messages: Messages) -> list[tuple[int, list[str]]]:
    return [
        (position, [call_id or name for name, call_id, _ in missing])
        for position, _, missing in _gemini_turns(messages)
        if missing
    ]


def _add_answers(out: list[dict[str, Any]], added: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = out[-1]
    if _is_model(last):
        return [*out, *added]
    parts = [*last["parts"], *added[0]["parts"]]
    taken = _match(_function_calls(out[-2]), parts)
    answering = [taken[at] for at in sorted(taken)]
    others = set(range(len(parts))) - set(answering)
    last["parts"] = [parts[at] for at in [*answering, *sorted(others)]]
    return out


# -- The replay server and the SDK ----------------------------------------------------------


def _generated(
    turns: tuple[AssistantTurn, ...], chunks: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The non-streaming ``GenerateContentResponse`` a recording stands for."""
    turn = turns[0]
    version = next((c["modelVersion"] for c in chunks if "modelVersion" in c), None)
    return {
        "candidates": [
            {"content": turn.to_message(), "finishReason": turn.finish_reason, "index": 0}
        ],
        **({"usageMetadata": turn.usage} if turn.usage is not None else {}),
        **({"modelVersion": version} if version is not None else {}),
    }


# Google's status names for the codes the replay server answers with.
_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 411: "INVALID_ARGUMENT"}


def _error_body(status: int, message: str, kind: str, code: object) -> dict[str, Any]:
    # Google's bodies carry the HTTP status as their code.
    return {
        "error": {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, kind)}
    }


def _sdk_error(error: Exception) -> ProviderError | None:
    if any(
        base.__name__ == "APIError" and base.__module__.startswith("google.genai")
        for base in type(error).__mro__
    ):
        return _genai_error(error)
    return None


def _genai_error(error: Exception) -> ProviderError:
    """A google-genai ``APIError`` (an error status, or an ``error`` object in the stream)."""
    code = getattr(error, "code", None)
    status = getattr(error, "status", None)
    body = getattr(error, "details", None)
    said = getattr(error, "message", None) or str(error)
    found = retryable(code, body)
    if found is None:
        found = retryable(status)
    typed = ProviderError(
        f"the provider reported an error: {clip(str(said), 200)} (code {excerpt(code)}"
        f"{'' if status is None else f', {excerpt(status)}'}); nothing was emitted",
        code=code if code is not None else status,
        body=body,
        retryable=found,
    )
    if typed.retryable:
        typed.hint = RETRY_HINT
    return typed


# The tools of a Gemini request that Google runs itself (``types.Tool``'s other fields).
_GOOGLE_TOOLS = frozenset(
    {
        "googleSearch",
        "google_search",
        "googleSearchRetrieval",
        "google_search_retrieval",
        "codeExecution",
        "code_execution",
        "urlContext",
        "url_context",
        "retrieval",
        "computerUse",
        "computer_use",
        "fileSearch",
        "file_search",
        "googleMaps",
        "google_maps",
        "enterpriseWebSearch",
        "enterprise_web_search",
    }
)


def _tool_schemas(tool: Mapping[str, Any]) -> list[tuple[str, object]] | None:
    """``{"functionDeclarations": [{"name", "parameters"}]}``, as a Gemini request declares.

    A tool Google runs (``googleSearch``, ``codeExecution`` …) declares no function: none.
    """
    declared = tool.get("functionDeclarations", tool.get("function_declarations"))
    if not isinstance(declared, list):
        return [] if tool and _GOOGLE_TOOLS.issuperset(tool) else None
    found: list[tuple[str, object]] = []
    for entry in declared:
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if isinstance(name, str):
            schema = entry.get("parametersJsonSchema", entry.get("parameters"))
            found.append((name, schema))
    return found


_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def _connect(sdk: Any, base_url: str | None) -> tuple[Any, str]:
    key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY") or "unused"
    options = sdk.types.HttpOptions(base_url=base_url) if base_url else None
    client = sdk.Client(api_key=key, http_options=options)
    return client, base_url or "https://generativelanguage.googleapis.com"


def _first_messages(prompt: str, system: str | None) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"text": prompt}]}]


def _open(client: Any, ask: Request, messages: list[dict[str, Any]]) -> Any:
    declared = [
        {"name": name, "description": said, "parameters_json_schema": schema}
        for name, said, schema in functions(ask)
    ]
    mode = _MODES.get(ask.choice or "")
    calling = {"mode": mode} if mode else {"mode": "ANY", "allowed_function_names": [ask.choice]}
    config = given(
        system_instruction=ask.system,
        tools=[{"function_declarations": declared}] if declared else None,
        tool_config=None if ask.choice is None else {"function_calling_config": calling},
        temperature=ask.temperature,
        max_output_tokens=ask.max_tokens,
    )
    return client.models.generate_content_stream(
        model=ask.model, contents=messages, config=config or None
    )


WIRE = WireSpec(
    name="gemini",
    title="Google Gemini",
    identifies=identifies,
    unwrap=None,
    reader=GeminiReader,
    terminal=True,
    pause_reasons=frozenset(),
    to_message=to_message,
    tool_messages=tool_messages,
    made_up_ids=made_up_ids,
    transcript=Transcript(
        shows=_shows, find=_find, repair=_gemini_repair, open=_gemini_open, add_answers=_add_answers
    ),
    retryable=frozenset({"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"}),
    final=frozenset({"INVALID_ARGUMENT", "PERMISSION_DENIED", "UNAUTHENTICATED", "NOT_FOUND"}),
    sdk_error=_sdk_error,
    sdk_packages=frozenset(),
    sdk_stream=no_sdk_stream,
    path="/v1beta/models/{model}:streamGenerateContent",
    routes=(
        Route(":streamGenerateContent", True, SSE_DATA),
        Route(":generateContent", False, SSE_DATA),
    ),
    reply=_generated,
    error_body=_error_body,
    tool_schemas=_tool_schemas,
    client=Client(
        sdk="google.genai",
        package="google-genai",
        extra="gemini",
        credentials="GEMINI_API_KEY or GOOGLE_API_KEY",
        address="http://host",
        modes=tuple(_MODES),
        max_tokens=None,
        connect=_connect,
        messages=_first_messages,
        open=_open,
    ),
)


# -- google-genai's streams ---------------------------------------------------------------


def from_gemini_stream(stream: Any) -> Observable[Any]:
    """The ``GenerateContentResponse`` chunks of a google-genai stream, sync.

    ``stream`` is ``client.models.generate_content_stream(...)``, a generator: the request is
    sent when the subscription first reads it, so it can be read once. Reads on the subscribing
    thread, or on the scheduler given (``subscribe_on``, ``.run()``). Completing, failing or
    disposing closes the generator, which closes its HTTP response; a dispose from another
    thread while a read waits lands when the next chunk (or the read timeout) arrives, since a
    running generator cannot be closed. An ``APIError`` (an error status, or an ``error``
    object in the stream) arrives as ``ProviderError`` with ``retryable`` (429 and 5xx); a
    connection error as itself. Anything else is a ``TypeError`` at once.
    """
    if not isinstance(stream, Iterable) or isinstance(stream, str | bytes | Mapping):
        raise _not_a_gemini_stream("from_gemini_stream", stream)

    # google-genai's stream is a generator: closed by its reader, never from another thread.
    return _sdk_source(stream, stream, _every, close_any_thread=False)


def from_async_gemini_stream(
    stream: Any, *, loop: asyncio.AbstractEventLoop | None = None
) -> Observable[Any]:
    """The ``GenerateContentResponse`` chunks of a google-genai async stream, on an asyncio loop.

    ``stream`` is ``client.aio.models.generate_content_stream(...)`` itself (a coroutine: the
    subscription awaits it, sending the request) or what awaiting it gave (an async iterator);
    either can be read once. Disposing cancels the pending read, which closes the HTTP
    response, and closes the iterator. Errors are typed as in ``from_gemini_stream``; anything
    else is a ``TypeError`` at once. Use ``await from_async_gemini_stream(s).pipe(assemble())``
    inside the loop.
    """
    if not (inspect.isawaitable(stream) or isinstance(stream, AsyncIterable)):
        raise _not_a_gemini_stream("from_async_gemini_stream", stream)

    async def chunks() -> AsyncIterator[Any]:
        async with _typed_errors():
            opened = await stream if inspect.isawaitable(stream) else stream
            if not isinstance(opened, AsyncIterable):
                raise _not_a_gemini_stream("from_async_gemini_stream", opened)
            try:
                async for chunk in opened:
                    yield chunk
            finally:
                await _close(opened)

    return from_async_iterable(chunks, loop=loop)


def _not_a_gemini_stream(function: str, stream: object) -> TypeError:
    sync = "async" not in function
    fits = (
        (isinstance(stream, AsyncIterable) or inspect.isawaitable(stream))
        if sync
        else isinstance(stream, Iterable) and not isinstance(stream, str | bytes | Mapping)
    )
    other = "from_async_gemini_stream" if sync else "from_gemini_stream"
    made = "client.models" if sync else "client.aio.models"
    return TypeError(
        f"{function} needs what {made}.generate_content_stream(...) returns, not "
        f"{type(stream).__name__}" + (f": use {other}" if fits else "")
    )
