"""Builders for each wire's event streams, the wire fixture loader, and turn helpers.

``CASES`` at the end is the one per-wire table the cross-wire tests read: for each registered
wire (``rxtoolcalls.wires.names()``) a ``WireCase`` with its recordings, builders of a turn, a
cut, its endings, and its transcripts. A test parametrized over ``names()`` reads an entry with
``case(wire)``, which fails (never skips) for a wire with no entry; ``per_wire`` makes the
parameters of a test that runs on each key of each entry (its recordings, its kept streams).
Adding a wire: one ``WireCase`` here, and every cross-wire test covers it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from rxtoolcalls._eventstream import encode_frame
from rxtoolcalls.wires import lookup, names
from tests.helpers import args, call_open, content, finish, fixture_names, load_fixture

WIRE_FIXTURES = Path(__file__).parent / "fixtures" / "wire"

Event = dict[str, Any]


def turn_of(events: list[Any], **kwargs: Any) -> rt.AssistantTurn:
    """The turn of ``events`` through an ``Assembler`` (``kwargs`` as it takes them)."""
    assembler = rt.Assembler(**kwargs)
    for event in events:
        assembler.feed(event)
    return assembler.close()


def rx_turn(events: list[Any], **kwargs: Any) -> rt.AssistantTurn:
    """The turn of ``events`` through ``assemble()``."""
    turn: rt.AssistantTurn = reactivex.from_iterable(events).pipe(rt.assemble(**kwargs)).run()
    return turn


def calls(turn: rt.AssistantTurn) -> list[tuple[int, str, str, Any]]:
    """Each call's index, id, name and parsed arguments."""
    return [(c.index, c.id, c.name, c.parsed_arguments) for c in turn.tool_calls]


def wire_fixture_names(wire: str) -> list[str]:
    return sorted(p.name.removesuffix(".jsonl") for p in (WIRE_FIXTURES / wire).glob("*.jsonl"))


def load_wire(wire: str, name: str) -> list[Event]:
    """The ``data`` of every recorded event, in order."""
    with (WIRE_FIXTURES / wire / f"{name}.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line)["data"] for line in lines if line.strip()]


def load_wire_lines(wire: str, name: str) -> list[dict[str, Any]]:
    with (WIRE_FIXTURES / wire / f"{name}.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def sse_bytes(lines: list[dict[str, Any]]) -> bytes:
    """The recorded events as a raw event stream (``event:`` when recorded, ``data:``)."""
    out = []
    for line in lines:
        if line["event"] is not None:
            out.append(f"event: {line['event']}\n")
        out.append(f"data: {json.dumps(line['data'])}\n\n")
    return "".join(out).encode()


# -- Responses ----------------------------------------------------------------------------


def r_created() -> Event:
    return {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}


def r_fc_added(index: int, call_id: str, name: str, item_id: str | None = None) -> Event:
    return {
        "type": "response.output_item.added",
        "output_index": index,
        "item": {
            "type": "function_call",
            "id": item_id or f"fc_{index}",
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        },
    }


def r_delta(index: int, piece: str, item_id: str | None = None) -> Event:
    return {
        "type": "response.function_call_arguments.delta",
        "item_id": item_id or f"fc_{index}",
        "output_index": index,
        "delta": piece,
        "obfuscation": "xq",
    }


def r_args_done(index: int, arguments: str) -> Event:
    return {
        "type": "response.function_call_arguments.done",
        "item_id": f"fc_{index}",
        "output_index": index,
        "arguments": arguments,
    }


def r_fc_item(
    index: int, call_id: str, name: str, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{index}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def r_item_done(index: int, item: dict[str, Any]) -> Event:
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def r_completed(output: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> Event:
    return {
        "type": "response.completed",
        "response": {"id": "resp_1", "status": "completed", "output": output, "usage": usage},
    }


def r_incomplete(reason: str, output: list[dict[str, Any]] | None = None) -> Event:
    return {
        "type": "response.incomplete",
        "response": {
            "id": "resp_1",
            "status": "incomplete",
            "incomplete_details": {"reason": reason},
            "output": output or [],
        },
    }


def r_call(index: int, call_id: str, name: str, arguments: str, pieces: int = 3) -> list[Event]:
    """One whole function call: added, deltas, done, item done."""
    size = max(1, len(arguments) // pieces)
    parts = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    item = r_fc_item(index, call_id, name, arguments)
    return [
        r_fc_added(index, call_id, name),
        *(r_delta(index, p) for p in parts),
        r_args_done(index, arguments),
        r_item_done(index, item),
    ]


def r_message(index: int, text: str) -> list[Event]:
    item = {
        "type": "message",
        "id": f"msg_{index}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "content": [], "status": "in_progress"},
        },
        {
            "type": "response.output_text.delta",
            "output_index": index,
            "content_index": 0,
            "delta": text,
        },
        {
            "type": "response.output_text.done",
            "output_index": index,
            "content_index": 0,
            "text": text,
        },
        r_item_done(index, item),
    ]


# -- Anthropic ----------------------------------------------------------------------------


def a_start() -> Event:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "content": [],
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }


def a_text(index: int, text: str) -> list[Event]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        },
        {"type": "content_block_stop", "index": index},
    ]


def a_tool_open(index: int, id: str, name: str, kind: str = "tool_use") -> Event:
    return {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": kind, "id": id, "name": name, "input": {}},
    }


def a_piece(index: int, piece: str) -> Event:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": piece},
    }


def a_stop(index: int) -> Event:
    return {"type": "content_block_stop", "index": index}


def a_tool(index: int, id: str, name: str, arguments: str, pieces: int = 3) -> list[Event]:
    size = max(1, len(arguments) // pieces)
    parts = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    return [
        a_tool_open(index, id, name),
        a_piece(index, ""),
        *(a_piece(index, p) for p in parts),
        a_stop(index),
    ]


def a_end(stop_reason: str = "tool_use") -> list[Event]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 42},
        },
        {"type": "message_stop"},
    ]


PING: Event = {"type": "ping"}


# -- Gemini -------------------------------------------------------------------------------


def g_response(*parts: Event, finish: str | None = None, **candidate: Any) -> Event:
    """One ``GenerateContentResponse`` with one candidate holding ``parts``."""
    body: Event = {"content": {"role": "model", "parts": list(parts)}, **candidate}
    if finish is not None:
        body["finishReason"] = finish
    return {"candidates": [body], "modelVersion": "gemini-test"}


def g_text(text: str, thought: bool = False) -> Event:
    return {"text": text, "thought": True} if thought else {"text": text}


def g_call(name: str, args: dict[str, Any] | None = None, id: str | None = None) -> Event:
    call: Event = {"name": name}
    if args is not None:
        call["args"] = args
    if id is not None:
        call["id"] = id
    return {"functionCall": call}


def g_open(name: str) -> Event:
    return {"functionCall": {"name": name, "willContinue": True}}


def g_arg(path: str, value: Any, more: bool = False, kind: str | None = None) -> Event:
    """A streamed fragment setting ``value`` at ``path`` (its kind from its type)."""
    if kind is None:
        kind = (
            "nullValue"
            if value is None
            else "boolValue"
            if isinstance(value, bool)
            else "stringValue"
            if isinstance(value, str)
            else "numberValue"
        )
    entry: Event = {"jsonPath": path, kind: "NULL_VALUE" if kind == "nullValue" else value}
    if more:
        entry["willContinue"] = True
    return {"functionCall": {"partialArgs": [entry], "willContinue": True}}


G_CLOSE: Event = {"functionCall": {}}


def g_stop(finish: str = "STOP") -> Event:
    return g_response(g_text(""), finish=finish)


# -- Bedrock (ConverseStream, as boto3 yields it) -------------------------------------------

BEDROCK = WIRE_FIXTURES / "bedrock"


def boto_event(line: dict[str, Any]) -> Event:
    """A recording's ``{"event", "data"}`` line as boto3 yields it: ``{event: data}``.

    boto3 drops the padding ``p``, decodes blobs from base64 to ``bytes``, and (botocore 1.44)
    drops the usage member its model does not know (``serverToolUsage``).
    """
    data = {k: v for k, v in line["data"].items() if k != "p"}
    reasoning = data.get("delta", {}).get("reasoningContent")
    if reasoning is not None and "redactedContent" in reasoning:
        data["delta"] = {
            "reasoningContent": {
                **reasoning,
                "redactedContent": base64.b64decode(reasoning["redactedContent"]),
            }
        }
    if line["event"] == "chunk":
        data = {**data, "bytes": base64.b64decode(data["bytes"])}
    usage = data.get("usage")
    if line["event"] == "metadata" and usage is not None:
        data["usage"] = {k: v for k, v in usage.items() if k != "serverToolUsage"}
    return {line["event"]: data}


def load_bedrock_lines(name: str) -> list[dict[str, Any]]:
    with (BEDROCK / f"{name}.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def load_bedrock(name: str) -> list[Event]:
    return [boto_event(line) for line in load_bedrock_lines(name)]


def converse_names() -> list[str]:
    """Every ConverseStream recording (not the InvokeModel one, whose events are ``chunk``)."""
    return sorted(
        p.name.removesuffix(".jsonl")
        for p in BEDROCK.glob("*.jsonl")
        if not p.name.endswith(".anthropic.jsonl")
        and load_bedrock_lines(p.stem)[0]["event"] != "chunk"
    )


def bedrock_body(name: str) -> bytes:
    """A recording's HTTP body: the recorded bytes, or its lines framed as Bedrock frames them."""
    recorded = BEDROCK / f"{name}.eventstream"
    if recorded.exists():
        return recorded.read_bytes()
    headers = {":message-type": "event", ":content-type": "application/json"}
    return b"".join(
        encode_frame({**headers, ":event-type": line["event"]}, json.dumps(line["data"]).encode())
        for line in load_bedrock_lines(name)
    )


B_START: Event = {"messageStart": {"role": "assistant"}}
B_USAGE: Event = {"metadata": {"usage": {"inputTokens": 5, "outputTokens": 7, "totalTokens": 12}}}


def b_open(index: int, id: str, name: str, kind: str | None = None) -> Event:
    tool: dict[str, Any] = {"toolUseId": id, "name": name}
    if kind is not None:
        tool["type"] = kind
    return {"contentBlockStart": {"contentBlockIndex": index, "start": {"toolUse": tool}}}


def b_delta(index: int, delta: dict[str, Any]) -> Event:
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": delta}}


def b_piece(index: int, piece: str) -> Event:
    return b_delta(index, {"toolUse": {"input": piece}})


def b_text(index: int, text: str) -> Event:
    return b_delta(index, {"text": text})


def b_stop(index: int) -> Event:
    return {"contentBlockStop": {"contentBlockIndex": index}}


def b_end(reason: str = "tool_use") -> list[Event]:
    return [{"messageStop": {"stopReason": reason}}, B_USAGE]


def b_tool(index: int, id: str, name: str, arguments: str, pieces: int = 3) -> list[Event]:
    size = -(-len(arguments) // pieces) or 1
    parts = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    return [b_open(index, id, name), *(b_piece(index, p) for p in parts), b_stop(index)]


# -- the per-wire table: every cross-wire test builds its streams and transcripts here -------

CallSpec = tuple[str, str, Sequence[str]]
"""A call as a test streams it: its id, its name and its arguments' JSON text, in pieces."""
Named = tuple[str | None, str]
"""A call as a transcript holds it: its id (``None``: sent without one) and its name."""
Item = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WireCase:
    """What the cross-wire tests need of one wire: its streams and transcripts, in its shapes.

    Every field is required: a new wire's entry is complete or mypy says what it lacks. Tests
    parametrized over ``rxtoolcalls.wires.names()`` read a wire's entry with ``case(wire)``,
    which fails (never skips) for a registered wire with no entry.
    """

    recordings: Callable[[], list[str]]
    """The names of the wire's recordings of one turn, each read by this wire alone."""
    load: Callable[[str], list[Any]]
    """A recording's events, as the wire's source yields them."""
    body: Callable[[str], bytes]
    """A recording as its HTTP body, in the framing of the wire's first route."""
    build: Callable[[Sequence[str], Sequence[CallSpec], bool], list[Event]]
    """A turn: its text in the pieces given, then each call, then (when asked) the turn's end:
    the wire's tool-call finish when there are calls, its prose finish when there are none.
    Use ``turn()``."""
    build_cut: Callable[[Sequence[str], str, str, str, str], list[Event]]
    """A turn cut off inside a call, with no end: the text in pieces, then the call (id, name)
    whose arguments stop inside the string value of a key (key, value). Use ``cut()``."""
    closers: Mapping[str, list[Event]]
    """What ends a turn cut anywhere, by name; ``"finish"`` (the wire's plain end) is first."""
    ceiling: list[Event]
    """What ends a turn that the output-token ceiling cut (after ``cut()``): its length finish."""
    items: bool
    """Whether a turn keeps what it streamed as items in the wire's shape (``turn.items``)."""
    arguments_as_text: bool
    """Whether the wire streams a call's arguments as JSON text, kept as sent; ``False`` when
    it sends values that the reader writes out (Gemini)."""
    choice: Callable[[int], Event] | None
    """An event of choice ``n`` that says nothing, for a wire of several choices; else ``None``."""
    kept: Mapping[str, Callable[[str], Iterator[Event]]]
    """Endless streams whose every event keeps ``payload`` verbatim (``Limits.max_kept``)."""
    nested: Mapping[str, Callable[[Mapping[str, Any]], Event]]
    """Events that hold a given Mapping where the reader reads a field of it."""
    user: Callable[[Sequence[str], bool], Item]
    """A user message saying the words (as a list of blocks when asked and the wire has both)."""
    asked: Callable[[str, Sequence[Named]], list[Item]]
    """A transcript's entries for an assistant turn of text and calls (arguments ``{}``)."""
    answers: Callable[[Sequence[Named], Item | None], list[Item]]
    """The answers (``"r"``) to calls, then the user's message, merged where the wire pairs
    answers inside a user message (the user's words after the answers)."""
    calls_in: Callable[[Sequence[Item]], int]
    """How many calls the assistant entries of a transcript ask for."""
    optional_ids: bool
    """Whether a call may come without an id (its answer then pairs by name, in order)."""
    alternates: bool
    """Whether the API refuses two messages of one role in a row, so that a repaired
    transcript joins them (Bedrock's Converse)."""
    unrunnable: tuple[Item, Item]
    """An assistant entry asking for call ``a`` (``f``) whose arguments are no object, and the
    answer to it."""

    def turn(
        self, text: Sequence[str] = (), calls: Sequence[CallSpec] = (), *, end: bool = True
    ) -> list[Event]:
        return self.build(text, calls, end)

    def cut(
        self,
        text: Sequence[str] = (),
        id: str = "call_1",
        name: str = "f",
        key: str = "q",
        value: str = "abc",
    ) -> list[Event]:
        return self.build_cut(text, id, name, key, value)


def pieces(text: str, count: int = 3) -> list[str]:
    """``text`` in ``count`` pieces or fewer (at least one, ``""`` for an empty text)."""
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _opened(key: str, value: str) -> str:
    """The JSON text of ``{key: value}`` cut off inside the string ``value``, after all of it."""
    return "{" + json.dumps(key) + ": " + json.dumps(value)[:-1]


def _one_user_message(
    results: list[Item], said: Item | None, key: str, block: Callable[[str], Item]
) -> list[Item]:
    """The answers in one user message, the user's own words after them (block wires)."""
    if not results:
        return [] if said is None else [said]
    content = [] if said is None else said[key]
    words = content if isinstance(content, list) else [block(content)]
    return [{"role": "user", key: [*results, *words]}]


# Chat Completions.


def _chat_turn(text: Sequence[str], calls: Sequence[CallSpec], end: bool) -> list[Event]:
    events = [content(p) for p in text]
    for index, (call_id, name, parts) in enumerate(calls):
        events.append(call_open(index, call_id, name))
        events.extend(args(index, p) for p in parts)
    return [*events, finish("tool_calls" if calls else "stop")] if end else events


def _chat_cut(text: Sequence[str], call_id: str, name: str, key: str, value: str) -> list[Event]:
    return _chat_turn(text, [(call_id, name, [_opened(key, value)])], False)


def _chat_body(name: str) -> bytes:
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in load_fixture(name)]
    return "".join([*lines, "data: [DONE]\n\n"]).encode()


def _chat_user(words: Sequence[str], as_list: bool) -> Item:
    said = [{"type": "text", "text": w} for w in words] if as_list else " ".join(words)
    return {"role": "user", "content": said}


def _chat_asked(text: str, calls: Sequence[Named]) -> list[Item]:
    message: Item = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}
            for i, n in calls
        ]
    return [message]


def _chat_answers(calls: Sequence[Named], said: Item | None) -> list[Item]:
    answers = [{"role": "tool", "tool_call_id": i, "content": "r"} for i, _ in calls]
    return [*answers, *([] if said is None else [said])]


# Responses.


def _r_prose(index: int, text: Sequence[str]) -> list[Event]:
    head, _, done, item_done = r_message(index, "".join(text))
    deltas = [
        {
            "type": "response.output_text.delta",
            "output_index": index,
            "content_index": 0,
            "delta": p,
        }
        for p in text
    ]
    return [head, *deltas, done, item_done]


def _responses_turn(text: Sequence[str], calls: Sequence[CallSpec], end: bool) -> list[Event]:
    events = [r_created()]
    output: list[dict[str, Any]] = []
    if text:
        events.extend(_r_prose(0, text))
        output.append(events[-1]["item"])
    for index, (call_id, name, parts) in enumerate(calls, start=len(output)):
        arguments = "".join(parts)
        item = r_fc_item(index, call_id, name, arguments)
        events += [
            r_fc_added(index, call_id, name),
            *(r_delta(index, p) for p in parts),
            r_args_done(index, arguments),
            r_item_done(index, item),
        ]
        output.append(item)
    return [*events, r_completed(output)] if end else events


def _responses_cut(
    text: Sequence[str], call_id: str, name: str, key: str, value: str
) -> list[Event]:
    index = 1 if text else 0
    opened = [r_fc_added(index, call_id, name), r_delta(index, _opened(key, value))]
    return [*_responses_turn(text, (), False), *opened]


def _responses_user(words: Sequence[str], as_list: bool) -> Item:
    said = [{"type": "input_text", "text": w} for w in words] if as_list else " ".join(words)
    return {"role": "user", "content": said}


def _responses_asked(text: str, calls: Sequence[Named]) -> list[Item]:
    reasoning = {"type": "reasoning", "id": f"rs_{text}", "summary": [], "encrypted_content": "x"}
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }
    return [
        reasoning,
        message,
        *(r_fc_item(n, i or "", name, "{}") for n, (i, name) in enumerate(calls)),
    ]


def _responses_answers(calls: Sequence[Named], said: Item | None) -> list[Item]:
    answers = [{"type": "function_call_output", "call_id": i, "output": "r"} for i, _ in calls]
    return [*answers, *([] if said is None else [said])]


def _responses_reasoning(payload: str) -> Iterator[Event]:
    yield r_created()
    for n in range(50_000):
        item = {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": payload}
        yield {"type": "response.output_item.done", "output_index": n, "item": item}


def _responses_empty_texts(payload: str) -> Iterator[Event]:
    # Each new text (a content index) is a key kept in the turn's items.
    yield r_created()
    for n in range(50_000):
        yield {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": n,
            "delta": "",
        }


# Anthropic Messages.


def _a_prose(index: int, text: Sequence[str]) -> list[Event]:
    start, delta, stop = a_text(index, "")
    return [start, *({**delta, "delta": {"type": "text_delta", "text": p}} for p in text), stop]


def _anthropic_turn(text: Sequence[str], calls: Sequence[CallSpec], end: bool) -> list[Event]:
    events = [a_start(), *(_a_prose(0, text) if text else [])]
    for index, (call_id, name, parts) in enumerate(calls, start=1 if text else 0):
        events += [a_tool_open(index, call_id, name), *(a_piece(index, p) for p in parts)]
        events.append(a_stop(index))
    return [*events, *a_end("tool_use" if calls else "end_turn")] if end else events


def _anthropic_cut(
    text: Sequence[str], call_id: str, name: str, key: str, value: str
) -> list[Event]:
    index = 1 if text else 0
    opened = [a_tool_open(index, call_id, name), a_piece(index, _opened(key, value))]
    return [*_anthropic_turn(text, (), False), *opened]


def _anthropic_user(words: Sequence[str], as_list: bool) -> Item:
    said = [{"type": "text", "text": w} for w in words] if as_list else " ".join(words)
    return {"role": "user", "content": said}


def _anthropic_asked(text: str, calls: Sequence[Named]) -> list[Item]:
    uses: list[Item] = [{"type": "tool_use", "id": i, "name": n, "input": {}} for i, n in calls]
    return [{"role": "assistant", "content": [{"type": "text", "text": text}, *uses]}]


def _anthropic_answers(calls: Sequence[Named], said: Item | None) -> list[Item]:
    results = [{"type": "tool_result", "tool_use_id": i, "content": "r"} for i, _ in calls]
    return _one_user_message(results, said, "content", lambda w: {"type": "text", "text": w})


def _anthropic_usage_keys(payload: str) -> Iterator[Event]:
    yield a_start()
    for n in range(50_000):
        yield {"type": "message_delta", "delta": {}, "usage": {f"k{n}": payload}}


def _anthropic_server_results(payload: str) -> Iterator[Event]:
    yield a_start()
    for n in range(50_000):
        block = {
            "type": "web_search_tool_result",
            "tool_use_id": f"srvtoolu_{n}",
            "content": [
                {"type": "web_search_result", "url": "https://a.example", "title": payload}
            ],
        }
        yield {"type": "content_block_start", "index": n, "content_block": block}
        yield {"type": "content_block_stop", "index": n}


def _anthropic_citations(payload: str) -> Iterator[Event]:
    yield a_start()
    yield {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    for _ in range(50_000):
        citation = {"type": "char_location", "cited_text": payload, "document_index": 0}
        yield {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "citations_delta", "citation": citation},
        }


# Gemini.


def _gemini_turn(text: Sequence[str], calls: Sequence[CallSpec], end: bool) -> list[Event]:
    # Gemini sends a call's arguments as values: the pieces' text is parsed into one call.
    events = [g_response(g_text(p)) for p in text]
    if calls:
        parts = [g_call(name, json.loads("".join(p)), id=i) for i, name, p in calls]
        events.append(g_response(*parts))
    return [*events, g_stop()] if end else events


def _gemini_cut(text: Sequence[str], call_id: str, name: str, key: str, value: str) -> list[Event]:
    # A streamed call (Gemini 3) has no id: the string value is still being written.
    opened = [g_response(g_open(name)), g_response(g_arg(f"$.{key}", value, more=True))]
    return [*(g_response(g_text(p)) for p in text), *opened]


def _gemini_user(words: Sequence[str], as_list: bool) -> Item:
    return {"role": "user", "parts": [{"text": w} for w in words]}


def _g_id(call_id: str | None) -> dict[str, str]:
    return {} if call_id is None else {"id": call_id}


def _gemini_asked(text: str, calls: Sequence[Named]) -> list[Item]:
    parts = [{"functionCall": {"name": n, "args": {}, **_g_id(i)}} for i, n in calls]
    return [{"role": "model", "parts": [{"text": text}, *parts]}]


def _gemini_answers(calls: Sequence[Named], said: Item | None) -> list[Item]:
    results = [{"functionResponse": {"name": n, **_g_id(i), "response": {}}} for i, n in calls]
    return _one_user_message(results, said, "parts", lambda w: {"text": w})


def _gemini_inline_data(payload: str) -> Iterator[Event]:
    for _ in range(50_000):
        yield g_response({"inlineData": {"mimeType": "image/png", "data": payload}})


def _gemini_signed_text(payload: str) -> Iterator[Event]:
    for _ in range(50_000):
        yield g_response({"text": "", "thoughtSignature": payload})


def _gemini_thought_values(payload: str) -> Iterator[Event]:
    # A thought part between two makes each its own part; a "thought" that is not True is
    # kept as sent.
    for _ in range(50_000):
        yield g_response({"text": "y", "thought": True})
        yield g_response({"text": "x", "thought": payload})


# Bedrock ConverseStream.


def _bedrock_turn(text: Sequence[str], calls: Sequence[CallSpec], end: bool) -> list[Event]:
    # As Nova sends it: the text block has no start.
    events = [B_START, *(b_text(0, p) for p in text), *([b_stop(0)] if text else [])]
    for index, (call_id, name, parts) in enumerate(calls, start=1 if text else 0):
        events += [b_open(index, call_id, name), *(b_piece(index, p) for p in parts)]
        events.append(b_stop(index))
    return [*events, *b_end("tool_use" if calls else "end_turn")] if end else events


def _bedrock_cut(text: Sequence[str], call_id: str, name: str, key: str, value: str) -> list[Event]:
    index = 1 if text else 0
    opened = [b_open(index, call_id, name), b_piece(index, _opened(key, value))]
    return [*_bedrock_turn(text, (), False), *opened]


def _bedrock_user(words: Sequence[str], as_list: bool) -> Item:
    return {"role": "user", "content": [{"text": w} for w in words]}


def _bedrock_asked(text: str, calls: Sequence[Named]) -> list[Item]:
    uses: list[Item] = [{"toolUse": {"toolUseId": i, "name": n, "input": {}}} for i, n in calls]
    return [{"role": "assistant", "content": [{"text": text}, *uses]}]


def _bedrock_answers(calls: Sequence[Named], said: Item | None) -> list[Item]:
    results = [{"toolResult": {"toolUseId": i, "content": [{"text": "r"}]}} for i, _ in calls]
    return _one_user_message(results, said, "content", lambda w: {"text": w})


def _bedrock_citations(payload: str) -> Iterator[Event]:
    yield B_START
    yield b_text(0, "a")
    for _ in range(50_000):
        yield b_delta(0, {"citation": {"title": payload, "location": {}}})


def _bedrock_tool_results(payload: str) -> Iterator[Event]:
    yield B_START
    start = {"toolResult": {"toolUseId": "tooluse_s", "status": "success"}}
    yield {"contentBlockStart": {"contentBlockIndex": 0, "start": start}}
    for _ in range(50_000):
        yield b_delta(0, {"toolResult": [{"text": payload}]})


def _bedrock_image_parts(payload: str) -> Iterator[Event]:
    yield B_START
    yield {"contentBlockStart": {"contentBlockIndex": 0, "start": {"image": {"format": "png"}}}}
    for n in range(50_000):
        yield b_delta(0, {"image": {f"part{n}": payload}})


def _bedrock_redacted(payload: str) -> Iterator[Event]:
    yield B_START
    for _ in range(50_000):
        yield b_delta(0, {"reasoningContent": {"redactedContent": payload.encode()}})


def _counting(key: str, is_call: Callable[[Item], bool]) -> Callable[[Sequence[Item]], int]:
    """How many of the blocks under ``key`` in a transcript's messages are calls."""

    def calls_in(messages: Sequence[Item]) -> int:
        return sum(
            is_call(block)
            for message in messages
            for block in message.get(key) or ()
            if isinstance(block, dict)
        )

    return calls_in


CASES: dict[str, WireCase] = {
    "chat": WireCase(
        recordings=fixture_names,
        load=load_fixture,
        body=_chat_body,
        build=_chat_turn,
        build_cut=_chat_cut,
        closers={"finish": [finish("tool_calls")]},
        ceiling=[finish("length")],
        items=False,
        arguments_as_text=True,
        choice=lambda n: {"choices": [{"index": n, "delta": {"content": ""}}]},
        kept={},
        nested={"a choice's delta": lambda m: {"choices": [{"index": 0, "delta": m}]}},
        user=_chat_user,
        asked=_chat_asked,
        answers=_chat_answers,
        calls_in=lambda messages: sum(len(m.get("tool_calls") or ()) for m in messages),
        optional_ids=False,
        alternates=False,
        unrunnable=(
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "x"},
        ),
    ),
    "responses": WireCase(
        recordings=lambda: wire_fixture_names("responses"),
        load=lambda name: load_wire("responses", name),
        body=lambda name: sse_bytes(load_wire_lines("responses", name)),
        build=_responses_turn,
        build_cut=_responses_cut,
        closers={"finish": [r_completed([])]},
        ceiling=[r_incomplete("max_output_tokens")],
        items=True,
        arguments_as_text=True,
        choice=None,
        kept={"reasoning items": _responses_reasoning, "empty texts": _responses_empty_texts},
        nested={
            "a failed response's error": lambda m: {
                "type": "response.failed",
                "response": {"error": m},
            }
        },
        user=_responses_user,
        asked=_responses_asked,
        answers=_responses_answers,
        calls_in=lambda messages: sum(m.get("type") == "function_call" for m in messages),
        optional_ids=False,
        alternates=False,
        unrunnable=(
            r_fc_item(0, "a", "f", "[1]"),
            {"type": "function_call_output", "call_id": "a", "output": "x"},
        ),
    ),
    "anthropic": WireCase(
        recordings=lambda: wire_fixture_names("anthropic"),
        load=lambda name: load_wire("anthropic", name),
        body=lambda name: sse_bytes(load_wire_lines("anthropic", name)),
        build=_anthropic_turn,
        build_cut=_anthropic_cut,
        closers={"finish": a_end("tool_use")},
        ceiling=a_end("max_tokens"),
        items=True,
        arguments_as_text=True,
        choice=None,
        kept={
            "usage keys": _anthropic_usage_keys,
            "server results": _anthropic_server_results,
            "citations": _anthropic_citations,
        },
        nested={
            "a message delta": lambda m: {"type": "message_delta", "delta": m},
            "an error": lambda m: {"type": "error", "error": m},
        },
        user=_anthropic_user,
        asked=_anthropic_asked,
        answers=_anthropic_answers,
        calls_in=_counting("content", lambda block: block.get("type") == "tool_use"),
        optional_ids=False,
        alternates=False,
        unrunnable=(
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
        ),
    ),
    "gemini": WireCase(
        recordings=lambda: wire_fixture_names("gemini"),
        load=lambda name: load_wire("gemini", name),
        body=lambda name: sse_bytes(load_wire_lines("gemini", name)),
        build=_gemini_turn,
        build_cut=_gemini_cut,
        closers={
            "finish": [g_stop()],
            "close with the finish": [g_response(G_CLOSE, finish="STOP")],
            "close then finish": [g_response(G_CLOSE), g_stop()],
            "new call": [g_response(g_call("closer")), g_stop()],
        },
        ceiling=[g_stop("MAX_TOKENS")],
        items=True,
        arguments_as_text=False,
        choice=lambda n: {"candidates": [{"index": n, "content": {"parts": [{"text": ""}]}}]},
        kept={
            "thought values": _gemini_thought_values,
            "inlineData": _gemini_inline_data,
            "signatures": _gemini_signed_text,
        },
        nested={
            "a candidate's content": lambda m: {
                "candidates": [{"content": m, "finishReason": "STOP"}]
            },
            "the prompt feedback": lambda m: {"candidates": [], "promptFeedback": m},
        },
        user=_gemini_user,
        asked=_gemini_asked,
        answers=_gemini_answers,
        calls_in=_counting("parts", lambda block: "functionCall" in block),
        optional_ids=True,
        alternates=False,
        unrunnable=(
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": 3}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
        ),
    ),
    "bedrock": WireCase(
        recordings=converse_names,
        load=load_bedrock,
        body=bedrock_body,
        build=_bedrock_turn,
        build_cut=_bedrock_cut,
        closers={"finish": b_end("tool_use")},
        ceiling=b_end("max_tokens"),
        items=True,
        arguments_as_text=True,
        choice=None,
        kept={
            "citations": _bedrock_citations,
            "toolResult parts": _bedrock_tool_results,
            "image parts": _bedrock_image_parts,
            "redacted reasoning": _bedrock_redacted,
        },
        nested={
            "a delta": lambda m: {"contentBlockDelta": {"contentBlockIndex": 0, "delta": m}},
            "the usage": lambda m: {"metadata": {"usage": m}},
        },
        user=_bedrock_user,
        asked=_bedrock_asked,
        answers=_bedrock_answers,
        calls_in=_counting("content", lambda block: "toolUse" in block),
        optional_ids=False,
        alternates=True,
        unrunnable=(
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "a", "name": "f", "input": [1]}}],
            },
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "a", "content": [{"text": "x"}]}}],
            },
        ),
    ),
}


def case(wire: str) -> WireCase:
    """The table's entry for ``wire``; a registered wire without one fails the test, loudly."""
    try:
        return CASES[wire]
    except KeyError:
        raise LookupError(
            f"the wire {wire!r} is registered in rxtoolcalls.wires but has no entry in CASES in "
            f"tests/wire_builders.py: add a WireCase for it there (its recordings, turn and cut "
            f"builders, closers, transcripts); every cross-wire test reads its streams from it"
        ) from None


MISSING = "<no entry in tests/wire_builders.py CASES>"


def per_wire(select: Callable[[WireCase], Iterable[str]]) -> list[Any]:
    """``pytest.param(wire, key)`` for each key ``select`` gives of each registered wire.

    A wire with no entry gives one ``(wire, MISSING)``: its test calls ``case(wire)`` and fails.
    """
    params = []
    for wire in names():
        if wire not in CASES:
            params.append(pytest.param(wire, MISSING, id=f"{wire}/no-entry"))
            continue
        params += [pytest.param(wire, key, id=f"{wire}/{key}") for key in select(CASES[wire])]
    return params


def source_of(wire: str) -> Callable[[Any], reactivex.Observable[Any]]:
    """The public source that reads a body in the framing of ``wire``'s first route."""
    framing = lookup(wire).routes[0].framing.name
    sources: dict[str, Callable[[Any], reactivex.Observable[Any]]] = {
        "sse": rt.from_sse,
        "eventstream": rt.from_eventstream,
    }
    if framing not in sources:
        raise LookupError(f"no source in tests/wire_builders.py source_of reads {framing!r}")
    return sources[framing]
