"""Builders for each wire's event streams, the wire fixture loader, and turn helpers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import reactivex

import rxtoolcalls as rt

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
