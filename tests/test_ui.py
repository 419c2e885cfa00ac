"""``to_ag_ui()`` and ``to_ui_message_stream()``: every wire's turns as each UI protocol's events.

- Goldens (``tests/fixtures/ui/<wire>.json``): for each wire, a clean turn, a real recording, a
  truncated turn, a provider error mid-stream, and two retried turns of the agent loop, as
  both protocols' events. ``python -m tests.test_ui`` writes them again (see the README there).
- Exact short sequences, written by hand: the mapping rules on one wire, independent of the
  goldens.
- Every event checked against its protocol: AG-UI's own models (``ag_ui.core``, skipped
  without the ``ag-ui`` extra) and the rules of its client's verifier; the Vercel parts against
  the part types of ``ui-message-chunks.ts`` (ai 7.0.77) and the rules of
  ``processUIMessageStream``. Over every recording of every wire, through ``lifecycle()`` and
  through the agent loop.
- The operator spec: empty, never-completing and failing sources, callbacks that raise,
  disposal reaching the source, a subscriber's own exception, a fresh state per subscription.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex import Observable, abc
from reactivex import operators as ops
from reactivex.disposable import Disposable
from reactivex.notification import OnError, OnNext
from reactivex.testing import ReactiveTest, TestScheduler

import rxtoolcalls as rt
from rxtoolcalls.ui import (
    AG_UI_HEADERS,
    UI_MESSAGE_STREAM_END,
    UI_MESSAGE_STREAM_HEADERS,
    ag_ui_sse,
    to_ag_ui,
    to_ui_message_stream,
    ui_message_sse,
)
from rxtoolcalls.wires import names
from tests.helpers import call_open, content, extra, finish
from tests.test_agent_early import Gated, Tool, Until, asking, cut_after_first
from tests.test_agent_wires import prose, said
from tests.wire_builders import case, pieces

GOLDENS = Path(__file__).parent / "fixtures" / "ui"
Event = dict[str, Any]

# -- running the operators ----------------------------------------------------------------------


def ag_ui(events: Iterable[Any], error: Exception | None = None) -> list[Event]:
    """The AG-UI events of ``events`` (then ``error``, when given), with fixed ids."""
    return run(events, to_ag_ui(thread_id="t", run_id="r"), error)


def ui_parts(events: Iterable[Any], error: Exception | None = None) -> list[Event]:
    """The UI message stream parts of ``events`` (then ``error``), with a fixed message id."""
    return run(events, to_ui_message_stream(message_id="m"), error)


def run(
    events: Iterable[Any],
    operator: Callable[[Observable[Any]], Observable[Event]],
    error: Exception | None = None,
) -> list[Event]:
    source: Observable[Any] = reactivex.from_iterable(list(events))
    if error is not None:
        source = source.pipe(ops.concat(reactivex.throw(error)))
    out: list[Event] = source.pipe(operator, ops.to_list()).run()
    return out


def notes_of(source: Observable[Any]) -> tuple[list[Any], Exception | None]:
    """A source's events, and its error when it failed."""
    notes = source.pipe(ops.materialize(), ops.to_list()).run()
    errors = [n.exception for n in notes if isinstance(n, OnError)]
    return [n.value for n in notes if isinstance(n, OnNext)], errors[0] if errors else None


def lifecycle_of(chunks: Sequence[Any]) -> tuple[list[Any], Exception | None]:
    """A turn's lifecycle events with everything a UI can show, and its error."""
    operator = rt.lifecycle(fields=True, strings=True, text=True, every=4)
    return notes_of(reactivex.from_iterable(chunks).pipe(operator))


# -- the scenarios of the goldens -----------------------------------------------------------------

CALLS = (
    ("call_s", "search", pieces('{"q": "oslo"}')),
    ("call_f", "fetch", pieces('{"url": "https://a.test/"}')),
)
# One recording of each wire with prose (or reasoning) and calls, as the provider sent it.
RECORDING = {
    "chat": "deepseek__reasoner_tool_call",
    "responses": "pydantic-ai__reasoning_text_then_call_phase",
    "anthropic": "openllmetry__text_then_parallel_tool_use",
    "gemini": "vercel-ai__partial_args_parallel_and_no_args",
    "bedrock": "pydantic-ai__nova_text_then_tool_use",
}
# An error each wire's provider sends inside the stream.
IN_BAND_ERROR: dict[str, Any] = {
    "chat": {"error": {"message": "boom", "type": "server_error"}},
    "responses": {"type": "error", "code": "server_error", "message": "boom", "param": None},
    "anthropic": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    "gemini": {
        "error": {"code": 503, "message": "The model is overloaded", "status": "UNAVAILABLE"}
    },
    "bedrock": {"throttlingException": {"message": "Too many requests"}},
}


def fetch(url: str) -> str:
    raise ValueError(f"no route to {url}")


def retried_loop(wire: str) -> tuple[list[Any], Exception | None]:
    """A stream cut after its first call, which ran early; the turn streamed again; a failing
    tool; then the answer. The cut stream ends only once the early tool answered."""
    ledger: dict[str, str | None] = {}
    answered = Until(lambda: "3 hits" in ledger.values())
    script = Gated(cut_after_first(wire), asking(wire), prose(wire), gates={0: answered}, hold=0)
    loop = rt.agent_loop(
        script,
        {"search": Tool("3 hits"), "fetch": fetch},
        said(wire),
        early={"search"},
        backoff=0,
        ledger=ledger,
        fields=True,
        text=True,
    )
    return notes_of(loop)


def truncated_loop(wire: str) -> tuple[list[Any], Exception | None]:
    """A turn cut by the output-token ceiling inside a call, streamed again with a higher one."""
    cut = [*case(wire).cut(["Looking."], "call_s", "search", "q", "osl"), *case(wire).ceiling]
    script = Gated(cut, asking(wire), prose(wire), gates={})
    loop = rt.agent_loop(
        script,
        {"search": Tool("3 hits"), "fetch": Tool("<html>")},
        said(wire),
        max_tokens=100,
        max_tokens_limit=200,
        fields=True,
        text=True,
    )
    return notes_of(loop)


SCENARIOS: dict[str, Callable[[str], tuple[list[Any], Exception | None]]] = {
    "clean turn": lambda wire: lifecycle_of(case(wire).turn(["Looking", " around."], CALLS)),
    "recording": lambda wire: lifecycle_of(case(wire).load(RECORDING[wire])),
    "truncated turn": lambda wire: lifecycle_of(
        [*case(wire).cut(["Looking."], "call_s", "search", "q", "osl"), *case(wire).ceiling]
    ),
    "provider error mid-stream": lambda wire: lifecycle_of(
        [*case(wire).cut(["Looking."], "call_s", "search", "q", "osl"), IN_BAND_ERROR[wire]]
    ),
    "retried turn (agent loop)": retried_loop,
    "truncated turn streamed again (agent loop)": truncated_loop,
}
# What ends each scenario: a clean end, or the error the operators turn into the protocol's.
ENDS: dict[str, type[Exception] | None] = {
    "clean turn": None,
    "recording": None,
    "truncated turn": rt.TruncatedToolCallError,
    "provider error mid-stream": rt.ProviderError,
    "retried turn (agent loop)": None,
    "truncated turn streamed again (agent loop)": None,
}


MADE_UP = re.compile(r"call_[0-9a-f]{24}")


def stable(events: list[Event]) -> list[Event]:
    """``events`` with each id the Gemini reader made up (random) as its order of appearance."""
    seen: dict[str, str] = {}

    def placeholder(found: re.Match[str]) -> str:
        return seen.setdefault(found.group(0), f"call_<made up {len(seen) + 1}>")

    value: list[Event] = json.loads(MADE_UP.sub(placeholder, json.dumps(events)))
    return value


def rendered(wire: str) -> dict[str, dict[str, list[Event]]]:
    """Each scenario of ``wire`` as both protocols' events."""
    goldens = {}
    for scenario, make in SCENARIOS.items():
        events, error = make(wire)
        expected = ENDS[scenario]
        assert (error is None) if expected is None else isinstance(error, expected), error
        goldens[scenario] = {
            "ag_ui": stable(ag_ui(events, error)),
            "ui_message_stream": stable(ui_parts(events, error)),
        }
    return goldens


def golden_text(goldens: dict[str, dict[str, list[Event]]]) -> str:
    """The goldens as JSON, one event a line: a diff shows the events that changed."""
    lines = ["{"]
    for s_at, (scenario, protocols) in enumerate(goldens.items()):
        lines.append(f"  {json.dumps(scenario)}: {{")
        for p_at, (protocol, events) in enumerate(protocols.items()):
            lines.append(f"    {json.dumps(protocol)}: [")
            rows = [f"      {json.dumps(event, ensure_ascii=False)}" for event in events]
            lines.append(",\n".join(rows))
            lines.append("    ]" + ("," if p_at < len(protocols) - 1 else ""))
        lines.append("  }" + ("," if s_at < len(goldens) - 1 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_goldens() -> None:
    GOLDENS.mkdir(exist_ok=True)
    for wire in names():
        (GOLDENS / f"{wire}.json").write_text(golden_text(rendered(wire)), encoding="utf-8")


# -- what each protocol allows ------------------------------------------------------------------

CUSTOM_NAMES = {
    f"rxtoolcalls.{name}"
    for name in (
        "tool_call_started",
        "tool_call_early",
        "tool_call_progress",
        "tool_call_field",
        "tool_call_text",
        "tool_call_failed",
        "tool_call_retracted",
        "turn_retried",
    )
}


def check_ag_ui(events: Sequence[Event]) -> None:
    """The rules of AG-UI's client (``verifyEvents``, and what its reducer needs), for one run.

    RUN_STARTED first; nothing after RUN_FINISHED or RUN_ERROR; messages, reasoning, calls and
    steps opened and closed in pairs; none open at RUN_FINISHED. Stricter than the client: a
    call id starts once in the run (its reducer would add the arguments of a second start to
    the first's), its arguments come in exactly one TOOL_CALL_ARGS holding a JSON object, a
    result follows the call's end, and no call of a stream a retry voids was ever started (the
    client could not drop it: it would stay in the thread, complete and unanswered).
    """
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    messages: set[str] = set()
    reasoning: dict[str, bool] = {}  # id -> its message is open
    calls: dict[str, int] = {}  # open call -> TOOL_CALL_ARGS seen
    ended: set[str] = set()
    steps: set[str] = set()
    started: set[str] = set()
    shown: set[str] = set()  # every id a custom event or a message named
    for event in events[1:-1]:
        kind = event["type"]
        assert kind not in ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"), event
        if kind == "TEXT_MESSAGE_START":
            assert event["messageId"] not in messages
            messages.add(event["messageId"])
            shown.add(event["messageId"])
        elif kind == "TEXT_MESSAGE_CONTENT":
            assert event["messageId"] in messages
            assert event["delta"]
        elif kind == "TEXT_MESSAGE_END":
            messages.remove(event["messageId"])
        elif kind == "REASONING_START":
            assert event["messageId"] not in reasoning
            reasoning[event["messageId"]] = False
            shown.add(event["messageId"])
        elif kind == "REASONING_MESSAGE_START":
            assert reasoning[event["messageId"]] is False
            reasoning[event["messageId"]] = True
        elif kind == "REASONING_MESSAGE_CONTENT":
            assert reasoning[event["messageId"]] is True
            assert event["delta"]
        elif kind == "REASONING_MESSAGE_END":
            assert reasoning[event["messageId"]] is True
            reasoning[event["messageId"]] = False
        elif kind == "REASONING_END":
            assert reasoning.pop(event["messageId"]) is False
        elif kind == "TOOL_CALL_START":
            assert event["toolCallId"] not in started, "a call id starts once in a run"
            started.add(event["toolCallId"])
            calls[event["toolCallId"]] = 0
            shown |= {event["toolCallId"], event["parentMessageId"]}
        elif kind == "TOOL_CALL_ARGS":
            calls[event["toolCallId"]] += 1
            assert isinstance(json.loads(event["delta"]), dict)
        elif kind == "TOOL_CALL_END":
            assert calls.pop(event["toolCallId"]) == 1, "the whole arguments, in one event"
            ended.add(event["toolCallId"])
        elif kind == "TOOL_CALL_RESULT":
            assert event["toolCallId"] in ended
            assert event["role"] == "tool"
        elif kind == "STEP_STARTED":
            assert event["stepName"] not in steps
            steps.add(event["stepName"])
        elif kind == "STEP_FINISHED":
            steps.remove(event["stepName"])
        elif kind == "CUSTOM":
            assert event["name"] in CUSTOM_NAMES, event["name"]
            value = event["value"]
            if event["name"] == "rxtoolcalls.turn_retried":
                assert set(value["messageIds"]) | set(value["toolCallIds"]) <= shown
                assert not set(value["toolCallIds"]) & started, "a void call was opened"
            elif "toolCallId" in value:
                shown.add(value["toolCallId"])
                if "parentMessageId" in value:
                    shown.add(value["parentMessageId"])
        else:
            raise AssertionError(f"an event the mapping never sends: {kind}")
    if events[-1]["type"] == "RUN_FINISHED":
        open_ones = (messages, reasoning, calls, steps)
        assert not any(open_ones), open_ones


def validate_ag_ui(events: Sequence[Event]) -> None:
    """Each event as AG-UI's own models read it: valid, every key known, written back the same,
    and encoded by AG-UI's encoder to the very bytes ``ag_ui_sse`` writes."""
    core = pytest.importorskip("ag_ui.core", reason=extra("ag-ui"))
    encoder = pytest.importorskip("ag_ui.encoder", reason=extra("ag-ui")).EventEncoder()
    from pydantic import TypeAdapter

    adapter: Any = TypeAdapter(core.Event)
    for event in events:
        model = adapter.validate_python(event)
        assert not model.model_extra, f"keys AG-UI does not know: {model.model_extra}"
        assert model.model_dump(mode="json", by_alias=True) == event
        assert encoder.encode(model).encode() == ag_ui_sse(event)


FINISH_REASONS = {"stop", "length", "content-filter", "tool-calls", "error", "other"}
TOOL_EXTRAS = {
    "providerExecuted": bool,
    "providerMetadata": dict,
    "toolMetadata": dict,
    "dynamic": bool,
    "title": str,
}
# ui-message-chunks.ts (ai 7.0.77): each part type's required and optional fields.
VERCEL_PARTS: dict[str, tuple[dict[str, type], dict[str, type]]] = {
    "text-start": ({"id": str}, {"providerMetadata": dict}),
    "text-delta": ({"id": str, "delta": str}, {"providerMetadata": dict}),
    "text-end": ({"id": str}, {"providerMetadata": dict}),
    "reasoning-start": ({"id": str}, {"providerMetadata": dict}),
    "reasoning-delta": ({"id": str, "delta": str}, {"providerMetadata": dict}),
    "reasoning-end": ({"id": str}, {"providerMetadata": dict}),
    "error": ({"errorText": str}, {}),
    "tool-input-start": ({"toolCallId": str, "toolName": str}, TOOL_EXTRAS),
    "tool-input-delta": ({"toolCallId": str, "inputTextDelta": str}, {}),
    "tool-input-available": ({"toolCallId": str, "toolName": str, "input": object}, TOOL_EXTRAS),
    "tool-input-error": (
        {"toolCallId": str, "toolName": str, "input": object, "errorText": str},
        TOOL_EXTRAS,
    ),
    "tool-output-available": (
        {"toolCallId": str, "output": object},
        {**TOOL_EXTRAS, "preliminary": bool},
    ),
    "tool-output-error": ({"toolCallId": str, "errorText": str}, TOOL_EXTRAS),
    "tool-output-denied": ({"toolCallId": str}, {}),
    "start-step": ({}, {}),
    "finish-step": ({}, {}),
    "reset-step": ({}, {}),
    "start": ({}, {"messageId": str, "messageMetadata": object}),
    "finish": ({}, {"finishReason": str, "messageMetadata": object}),
    "abort": ({}, {"reason": str}),
    "message-metadata": ({"messageMetadata": object}, {}),
}
DATA_PART = ({"data": object}, {"id": str, "transient": bool})


def check_part(part: Event) -> None:
    """A part as ``uiMessageChunkSchema`` reads it; unknown keys refused (the SDK keeps them)."""
    kind = part["type"]
    required, optional = DATA_PART if kind.startswith("data-") else VERCEL_PARTS[kind]
    assert set(part) - {"type"} <= set(required) | set(optional), part
    for key, want in {**required, **optional}.items():
        if key in part:
            assert isinstance(part[key], want), (key, part)
        else:
            assert key not in required, (key, part)
    if kind == "finish" and "finishReason" in part:
        assert part["finishReason"] in FINISH_REASONS
    assert json.loads(ui_message_sse(part)[len(b"data: ") :]) == part


def check_ui_message_stream(parts: Sequence[Event]) -> None:
    """The rules ``processUIMessageStream`` (ai 7.0.77) holds a stream to, and then some.

    ``start`` first and ``finish`` last; steps neither nested nor left open; a text or
    reasoning delta or end only for a part started and not ended, in the current step (a
    ``finish-step`` or ``reset-step`` forgets them); a tool output only for a call whose input
    was available; after an ``error`` only the ``finish``, and no call left available without
    an output (the client would keep it, waiting). Unless the stream failed, every started call
    got its input (or was reset) and every text ended: nothing looks unfinished.
    """
    for part in parts:
        check_part(part)
    assert parts[0]["type"] == "start"
    assert parts[-1]["type"] == "finish"
    in_step = False
    texts: dict[str, set[str]] = {"text": set(), "reasoning": set()}
    ids: set[str] = set()
    partial: set[str] = set()
    available: set[str] = set()
    answered: set[str] = set()
    in_this_step: set[str] = set()
    failed = False
    for part in parts[1:-1]:
        kind = part["type"]
        assert not failed, f"{kind} after the error"
        head, _, tail = kind.rpartition("-")
        if kind == "start-step":
            assert not in_step
            in_step = True
            in_this_step = set()
        elif kind == "finish-step":
            assert in_step
            assert not texts["text"]
            assert not texts["reasoning"]
            in_step = False
        elif kind == "reset-step":
            assert in_step
            texts = {"text": set(), "reasoning": set()}
            partial -= in_this_step
            available -= in_this_step
        elif head in texts and tail == "start":
            assert in_step
            assert part["id"] not in ids
            ids.add(part["id"])
            texts[head].add(part["id"])
        elif head in texts and tail == "delta":
            assert part["id"] in texts[head]
            assert part["delta"]
        elif head in texts and tail == "end":
            texts[head].remove(part["id"])
        elif kind == "tool-input-start":
            assert in_step
            partial.add(part["toolCallId"])
            in_this_step.add(part["toolCallId"])
        elif kind == "tool-input-available":
            partial.discard(part["toolCallId"])
            available.add(part["toolCallId"])
            in_this_step.add(part["toolCallId"])
        elif kind in ("tool-output-available", "tool-output-error"):
            assert part["toolCallId"] in available
            assert part["toolCallId"] not in answered
            answered.add(part["toolCallId"])
        elif kind == "error":
            failed = True
        elif kind.startswith("data-"):
            assert kind.startswith("data-rxtoolcalls-")
            assert part["transient"] is True
        else:
            raise AssertionError(f"a part the mapping never sends: {kind}")
    finish = parts[-1]
    if failed:
        assert finish["finishReason"] == "error"
        assert available <= answered, f"left waiting for an answer: {available - answered}"
    else:
        assert finish["finishReason"] in ("stop", "tool-calls")
        assert not in_step
        assert not partial
        assert not texts["text"]
        assert not texts["reasoning"]


def check_both(events: Sequence[Any], error: Exception | None) -> None:
    check_ag_ui(ag_ui(events, error))
    check_ui_message_stream(ui_parts(events, error))


# -- goldens --------------------------------------------------------------------------------------


@pytest.mark.parametrize("wire", names())
def test_every_wire_maps_as_its_golden_says(wire: str) -> None:
    path = GOLDENS / f"{wire}.json"
    assert path.exists(), f"no goldens for {wire}: run python -m tests.test_ui"
    golden = json.loads(path.read_text(encoding="utf-8"))
    now = rendered(wire)
    assert list(golden) == list(SCENARIOS)
    for scenario, protocols in now.items():
        for protocol, events in protocols.items():
            assert events == golden[scenario][protocol], f"{wire}, {scenario}: {protocol}"


@pytest.mark.parametrize("wire", names())
def test_every_golden_keeps_the_protocols_rules(wire: str) -> None:
    golden = json.loads((GOLDENS / f"{wire}.json").read_text(encoding="utf-8"))
    for protocols in golden.values():
        check_ag_ui(protocols["ag_ui"])
        check_ui_message_stream(protocols["ui_message_stream"])


@pytest.mark.parametrize("wire", names())
def test_every_golden_ag_ui_event_is_one_ag_ui_reads(wire: str) -> None:
    golden = json.loads((GOLDENS / f"{wire}.json").read_text(encoding="utf-8"))
    for protocols in golden.values():
        validate_ag_ui(protocols["ag_ui"])


def test_every_wire_has_an_in_band_error_and_a_recording_here() -> None:
    assert set(IN_BAND_ERROR) == set(RECORDING) == set(names())
    for wire, name in RECORDING.items():
        assert name in case(wire).recordings()


# -- every recording ------------------------------------------------------------------------------

RECORDINGS = [(wire, name) for wire in names() for name in case(wire).recordings()]


@pytest.mark.parametrize(("wire", "name"), RECORDINGS, ids=[f"{w}/{n}" for w, n in RECORDINGS])
def test_every_recording_maps_within_the_rules(wire: str, name: str) -> None:
    events, error = lifecycle_of(case(wire).load(name))
    check_both(events, error)
    validate_ag_ui(ag_ui(events, error))


@pytest.mark.parametrize(("wire", "name"), RECORDINGS, ids=[f"{w}/{n}" for w, n in RECORDINGS])
def test_every_recording_as_an_agent_turn_maps_within_the_rules(wire: str, name: str) -> None:
    # No tools: each call is answered with an error; a second turn answers in prose.
    script = Gated(case(wire).load(name), prose(wire), gates={})
    loop = rt.agent_loop(script, {}, said(wire), retries=0, text=True, fields=True)
    events, error = notes_of(loop)
    check_both(events, error)
    validate_ag_ui(ag_ui(events, error))
    calls = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    outputs = [p for p in ui_parts(events, error) if p["type"] == "tool-output-error"]
    assert len(outputs) == len(calls)


# -- the mapping rules, written out ----------------------------------------------------------------


def chat_turn() -> list[Any]:
    calls = [("call_s", "search", ['{"q": "os', 'lo"}'])]
    events, error = lifecycle_of(case("chat").turn(["Looking", " around."], calls))
    assert error is None
    return events


def test_a_clean_turn_in_ag_ui() -> None:
    started = {"toolCallId": "call_s", "toolCallName": "search"}
    assert ag_ui(chat_turn()) == [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STEP_STARTED", "stepName": "turn 1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "r.msg1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r.msg1", "delta": "Looking"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r.msg1", "delta": " around."},
        {
            "type": "CUSTOM",
            "name": "rxtoolcalls.tool_call_started",
            "value": {**started, "parentMessageId": "r.msg1"},
        },
        {
            "type": "CUSTOM",
            "name": "rxtoolcalls.tool_call_text",
            "value": {**started, "path": ["q"], "text": "os"},
        },
        {
            "type": "CUSTOM",
            "name": "rxtoolcalls.tool_call_text",
            "value": {**started, "path": ["q"], "text": "lo"},
        },
        {
            "type": "CUSTOM",
            "name": "rxtoolcalls.tool_call_field",
            "value": {**started, "path": ["q"], "value": "oslo"},
        },
        {
            "type": "CUSTOM",
            "name": "rxtoolcalls.tool_call_field",
            "value": {**started, "path": [], "value": {"q": "oslo"}},
        },
        # Committed: the prose is whole, and the call exists, complete, in the same message.
        {"type": "TEXT_MESSAGE_END", "messageId": "r.msg1"},
        {**started, "type": "TOOL_CALL_START", "parentMessageId": "r.msg1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call_s", "delta": '{"q": "oslo"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "call_s"},
        {"type": "STEP_FINISHED", "stepName": "turn 1"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]


def test_a_clean_turn_in_the_ui_message_stream() -> None:
    call = {"toolCallId": "call_s", "toolCallName": "search"}
    assert ui_parts(chat_turn()) == [
        {"type": "start", "messageId": "m"},
        {"type": "start-step"},
        {"type": "text-start", "id": "m.text1"},
        {"type": "text-delta", "id": "m.text1", "delta": "Looking"},
        {"type": "text-delta", "id": "m.text1", "delta": " around."},
        {"type": "tool-input-start", "toolCallId": "call_s", "toolName": "search"},
        {
            "type": "data-rxtoolcalls-text",
            "data": {**call, "path": ["q"], "text": "os"},
            "transient": True,
        },
        {
            "type": "data-rxtoolcalls-text",
            "data": {**call, "path": ["q"], "text": "lo"},
            "transient": True,
        },
        {
            "type": "data-rxtoolcalls-field",
            "data": {**call, "path": ["q"], "value": "oslo"},
            "transient": True,
        },
        {
            "type": "data-rxtoolcalls-field",
            "data": {**call, "path": [], "value": {"q": "oslo"}},
            "transient": True,
        },
        {"type": "text-end", "id": "m.text1"},
        {
            "type": "tool-input-available",
            "toolCallId": "call_s",
            "toolName": "search",
            "input": {"q": "oslo"},
        },
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "tool-calls"},
    ]


def test_a_failed_turn_leaves_what_it_opened_open_and_ends_with_the_protocols_error() -> None:
    events, error = lifecycle_of(
        [*case("chat").cut(["Looking."], "call_s", "search", "q", "osl"), *case("chat").ceiling]
    )
    assert isinstance(error, rt.TruncatedToolCallError)
    events_ag_ui = ag_ui(events, error)
    assert [e["type"] for e in events_ag_ui] == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "CUSTOM",  # started: the call never exists in AG-UI's messages
        "CUSTOM",  # its text so far, as text (never a value)
        "RUN_ERROR",
    ]
    cut_off = "TruncatedToolCallError: a tool call was cut off"
    assert events_ag_ui[-1] == {
        "type": "RUN_ERROR",
        "message": cut_off,
        "code": "TruncatedToolCallError",
    }
    parts = ui_parts(events, error)
    assert [p["type"] for p in parts] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "tool-input-start",  # left streaming: no input, never available
        "data-rxtoolcalls-text",
        "error",
        "finish",
    ]
    assert parts[-2:] == [
        {"type": "error", "errorText": cut_off},
        {"type": "finish", "finishReason": "error"},
    ]


def test_a_retried_turn_voids_its_failed_stream() -> None:
    events, error = retried_loop("chat")
    assert error is None
    events_ag_ui = ag_ui(events, error)
    kinds = [e["type"] if e["type"] != "CUSTOM" else e["name"] for e in events_ag_ui]
    retry = kinds.index("rxtoolcalls.turn_retried")
    # Neither call exists: the early one is only its custom event, its turn not committed.
    assert kinds[:retry] == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "rxtoolcalls.tool_call_started",
        "rxtoolcalls.tool_call_field",
        "rxtoolcalls.tool_call_field",
        "rxtoolcalls.tool_call_started",
        "rxtoolcalls.tool_call_early",
        "rxtoolcalls.tool_call_retracted",
        "TEXT_MESSAGE_END",
    ]
    assert events_ag_ui[kinds.index("rxtoolcalls.tool_call_early")]["value"] == {
        "toolCallId": "call_s",
        "toolCallName": "search",
        "input": {"q": "oslo"},
    }
    assert events_ag_ui[retry]["value"] == {
        "turn": 1,
        "attempt": 1,
        "code": "StreamInterruptedError",
        "message": "StreamInterruptedError: the stream ended before the turn was complete",
        "messageIds": ["r.msg1"],
        "toolCallIds": ["call_s", "call_f"],
    }
    # The retry's calls get ids of their own: the client still holds the void ones.
    again = [e for e in events_ag_ui[retry:] if e["type"] == "TOOL_CALL_START"]
    assert [e["toolCallId"] for e in again] == ["call_s~2", "call_f~2"]
    assert {e["parentMessageId"] for e in again} == {"r.msg2"}
    parts = ui_parts(events, error)
    kinds = [p["type"] for p in parts]
    reset = kinds.index("reset-step")
    assert kinds[reset - 2 : reset + 2] == [
        "data-rxtoolcalls-retracted",
        "data-rxtoolcalls-turn-retried",
        "reset-step",
        "text-start",  # the same step goes on: its parts were dropped, nothing was ended
    ]
    assert "text-end" not in kinds[:reset]
    outputs = [p for p in parts if p["type"].startswith("tool-output")]
    assert outputs == [
        {"type": "tool-output-available", "toolCallId": "call_s", "output": "3 hits"},
        {
            "type": "tool-output-error",
            "toolCallId": "call_f",
            "errorText": "ValueError: no route to https://a.test/",
        },
    ]


# -- calls started early, and calls a failure takes back ------------------------------------------

TAKEN_BACK = "taken back: "


def early_then_failed(wire: str) -> tuple[list[Any], Exception | None]:
    """An early call's tool answered, then its stream is cut, and the turn is not retried."""
    ledger: dict[str, str | None] = {}
    answered = Until(lambda: "3 hits" in ledger.values())
    script = Gated(cut_after_first(wire), asking(wire), prose(wire), gates={0: answered}, hold=0)
    loop = rt.agent_loop(
        script,
        {"search": Tool("3 hits"), "fetch": Tool("x")},
        said(wire),
        early={"search"},
        backoff=0,
        retries=0,
        ledger=ledger,
        fields=True,
        text=True,
    )
    return notes_of(loop)


@pytest.mark.parametrize("wire", names())
def test_an_early_call_of_a_turn_that_then_fails_is_never_opened_on_ag_ui(wire: str) -> None:
    events, error = early_then_failed(wire)
    assert isinstance(error, rt.StreamInterruptedError)
    assert any(isinstance(e, rt.ToolCallEarly) for e in events)
    events_ag_ui = ag_ui(events, error)
    check_ag_ui(events_ag_ui)
    # Its client keeps every TOOL_CALL_START in the thread: the call would stay, unanswered.
    assert not [e for e in events_ag_ui if e["type"].startswith("TOOL_CALL")]
    [early] = [e["value"] for e in events_ag_ui if e.get("name") == "rxtoolcalls.tool_call_early"]
    assert early == {"toolCallId": "call_s", "toolCallName": "search", "input": {"q": "oslo"}}


@pytest.mark.parametrize("wire", names())
def test_an_early_call_of_a_turn_that_then_fails_is_taken_back_on_vercel(wire: str) -> None:
    events, error = early_then_failed(wire)
    parts = ui_parts(events, error)
    check_ui_message_stream(parts)
    kinds = [p["type"] for p in parts]
    # Shown as running (useChat's input-available), then answered as taken back: never waiting.
    assert "tool-input-available" in kinds
    assert parts[-3:] == [
        {
            "type": "tool-output-error",
            "toolCallId": "call_s",
            "errorText": TAKEN_BACK
            + "StreamInterruptedError: the stream ended before the turn was complete",
        },
        {
            "type": "error",
            "errorText": "StreamInterruptedError: the stream ended before the turn was complete",
        },
        {"type": "finish", "finishReason": "error"},
    ]


def committed_then_failed(wire: str, kind: str) -> tuple[list[Any], Exception | None]:
    """A turn that committed two calls, then the loop fails: the turn limit, or a tool raising."""
    script = Gated(case(wire).turn(["Looking."], CALLS), prose(wire), gates={})
    if kind == "max_turns":
        tools: dict[str, Callable[..., Any]] = {"search": Tool("3 hits"), "fetch": Tool("x")}
        loop = rt.agent_loop(script, tools, said(wire), max_turns=1, fields=True, text=True)
    else:
        tools = {"search": Tool("3 hits"), "fetch": fetch}
        loop = rt.agent_loop(script, tools, said(wire), tool_errors="raise", text=True)
    return notes_of(loop)


@pytest.mark.parametrize("kind", ["max_turns", "raise"])
@pytest.mark.parametrize("wire", names())
def test_calls_shown_and_never_answered_are_taken_back_before_the_error(
    wire: str, kind: str
) -> None:
    events, error = committed_then_failed(wire, kind)
    expected = rt.TurnLimitError if kind == "max_turns" else rt.ToolExecutionError
    assert isinstance(error, expected)
    check_both(events, error)
    parts = ui_parts(events, error)
    shown = [p["toolCallId"] for p in parts if p["type"] == "tool-input-available"]
    assert shown == ["call_s", "call_f"]
    outputs = [p for p in parts if p["type"].startswith("tool-output")]
    assert {p["toolCallId"] for p in outputs} == {"call_s", "call_f"}
    error_at = [p["type"] for p in parts].index("error")
    assert all(parts.index(p) < error_at for p in outputs)
    taken = [p for p in outputs if p["type"] == "tool-output-error"]
    assert taken
    assert all(p["errorText"].startswith(TAKEN_BACK + expected.__name__) for p in taken)


@pytest.mark.parametrize("wire", names())
def test_every_cut_of_a_turn_with_an_early_call_keeps_both_protocols_rules(wire: str) -> None:
    body = case(wire).turn(["Looking."], CALLS, end=False)
    for at in range(len(body) + 1):
        for retries in (0, 1):
            script = Gated(body[:at], asking(wire), prose(wire), gates={})
            loop = rt.agent_loop(
                script,
                {"search": Tool("3 hits"), "fetch": fetch},
                said(wire),
                early={"search"},
                backoff=0,
                retries=retries,
                fields=True,
                text=True,
            )
            events, error = notes_of(loop)
            check_both(events, error)


def test_an_early_call_committed_with_other_arguments_shows_the_committed_ones() -> None:
    # A lenient policy lets the final arguments win: the tool runs again with them.
    early = rt.ToolCall(0, "call_s", "search", '{"q": "oslo"}', {"q": "oslo"})
    final = rt.ToolCall(0, "call_s", "search", '{"q": "bergen"}', {"q": "bergen"})
    turn = rt.AssistantTurn(tool_calls=(final,), finish_reason="tool_calls", wire="chat")
    events = [
        rt.ToolCallStarted(0, "call_s", "search", 1),
        rt.ToolCallEarly(1, early),
        rt.TurnFinished(1, turn),
        rt.ToolCallRetracted(1, early, "its arguments changed after it started"),
        rt.ToolCallFinished(final, "hits in Bergen"),
    ]
    check_both(events, None)
    [args] = [e for e in ag_ui(events) if e["type"] == "TOOL_CALL_ARGS"]
    assert args["delta"] == '{"q": "bergen"}'
    parts = ui_parts(events)
    inputs = [p["input"] for p in parts if p["type"] == "tool-input-available"]
    assert inputs == [{"q": "oslo"}, {"q": "bergen"}]  # the client updates the part's input


def test_an_early_call_of_a_paused_turn_is_taken_back_at_once_on_vercel() -> None:
    call = rt.ToolCall(0, "toolu_s", "search", '{"q": "oslo"}', {"q": "oslo"})
    paused = rt.AssistantTurn(tool_calls=(call,), finish_reason="pause_turn", wire="anthropic")
    assert paused.needs_continuation
    answer = rt.AssistantTurn(content="Oslo.", finish_reason="end_turn", wire="anthropic")
    why = "the provider paused the turn; it goes on streaming"
    events = [
        rt.ToolCallStarted(0, "toolu_s", "search", 1),
        rt.ToolCallEarly(1, call),
        rt.TurnFinished(1, paused),
        rt.ToolCallRetracted(1, call, why),
        rt.TurnFinished(2, answer),
    ]
    parts = ui_parts(events)
    check_ui_message_stream(parts)
    outputs = [p for p in parts if p["type"].startswith("tool-output")]
    assert outputs == [
        {"type": "tool-output-error", "toolCallId": "toolu_s", "errorText": TAKEN_BACK + why}
    ]


def test_a_turn_cut_by_the_ceiling_is_reset_and_says_the_new_ceiling() -> None:
    events, error = truncated_loop("anthropic")
    assert error is None
    [retried] = [e["value"] for e in ag_ui(events) if e.get("name") == "rxtoolcalls.turn_retried"]
    assert (retried["code"], retried["maxTokens"]) == ("TruncatedToolCallError", 200)
    assert retried["toolCallIds"] == ["call_s"]  # started, never a TOOL_CALL_START
    [data] = [p["data"] for p in ui_parts(events) if p["type"] == "data-rxtoolcalls-turn-retried"]
    assert data == {k: v for k, v in retried.items() if k not in ("messageIds", "toolCallIds")}


def test_steps_are_turns_and_close_once_their_tools_answered() -> None:
    events, error = retried_loop("responses")
    assert error is None
    kinds = [e["type"] for e in ag_ui(events)]
    results = [at for at, kind in enumerate(kinds) if kind == "TOOL_CALL_RESULT"]
    assert kinds[results[-1] + 2 : results[-1] + 4] == ["STEP_FINISHED", "STEP_STARTED"]
    steps = [e["stepName"] for e in ag_ui(events) if e["type"] == "STEP_STARTED"]
    assert steps == ["turn 1", "turn 2"]
    parts = ui_parts(events)
    assert [p["type"] for p in parts].count("start-step") == 2
    assert parts[-1] == {"type": "finish", "finishReason": "stop"}


def test_prose_that_did_not_stream_comes_whole_with_its_turn() -> None:
    # agent_loop without text=True: the answer and the reasoning still reach the page.
    turn = rt.AssistantTurn(
        content="Oslo.", reasoning="Think.", finish_reason="stop", wire="anthropic"
    )
    events = [rt.TurnFinished(1, turn)]
    assert [(e["type"], e.get("delta")) for e in ag_ui(events)][2:-2] == [
        ("REASONING_START", None),
        ("REASONING_MESSAGE_START", None),
        ("REASONING_MESSAGE_CONTENT", "Think."),
        ("REASONING_MESSAGE_END", None),
        ("REASONING_END", None),
        ("TEXT_MESSAGE_START", None),
        ("TEXT_MESSAGE_CONTENT", "Oslo."),
        ("TEXT_MESSAGE_END", None),
    ]
    streamed = [rt.TextDelta("Oslo.", "content"), *events]
    contents = [p for p in ui_parts(streamed) if p["type"].endswith("-delta")]
    assert [p["delta"] for p in contents] == ["Oslo.", "Think."]  # what streamed, not twice


def test_a_call_named_before_its_id_keeps_one_stand_in_to_its_answer() -> None:
    call = rt.ToolCall(0, "call_late", "search", '{"q": "oslo"}', {"q": "oslo"})
    turn = rt.AssistantTurn(tool_calls=(call,), finish_reason="tool_calls", wire="chat")
    events = [
        rt.ToolCallStarted(0, None, "search", 1),
        rt.ToolCallField(0, None, "search", ("q",), "oslo"),
        rt.ToolCallField(0, "call_late", "search", (), {"q": "oslo"}),
        rt.TurnFinished(1, turn),
        rt.ToolCallFinished(call, "3 hits"),
    ]
    named = [e for e in ag_ui(events) if "toolCallId" in e or "toolCallId" in e.get("value", {})]
    assert {e.get("toolCallId") or e["value"]["toolCallId"] for e in named} == {"r.call1"}
    assert len(named) == 7  # started, 2 fields, start, args, end, result
    parts = [p for p in ui_parts(events) if "toolCallId" in p or "toolCallId" in p.get("data", {})]
    assert {p.get("toolCallId") or p["data"]["toolCallId"] for p in parts} == {"m.call1"}
    assert len(parts) == 5  # start, 2 fields, available, output


def ag_ui_run(events: Iterable[Any], run_id: str, taken_ids: Iterable[str] = ()) -> list[Event]:
    return run(events, to_ag_ui(thread_id="t", run_id=run_id, taken_ids=set(taken_ids)))


def test_ids_the_client_holds_from_earlier_runs_are_not_given_again() -> None:
    # A provider that numbers its calls from call_0 in every request: run 2 of one thread.
    events, error = lifecycle_of([content("ok"), call_open(0, "call_0", "get", "{}"), finish()])
    assert error is None

    def started(taken: Iterable[str]) -> list[str]:
        found = ag_ui_run(events, "run2", taken)
        check_ag_ui(found)
        ids = [e["toolCallId"] for e in found if e["type"].startswith("TOOL_CALL")]
        customs = [e["value"]["toolCallId"] for e in found if e["type"] == "CUSTOM"]
        assert set(customs) == set(ids)
        return sorted(set(ids))

    assert started(()) == ["call_0"]
    assert started(["call_0", "u1"]) == ["call_0~2"]
    assert started(["call_0", "call_0~2"]) == ["call_0~3"]


def test_a_resumed_turns_answer_names_the_call_the_client_holds() -> None:
    held = rt.ToolCall(0, "call_a", "f", "{}", {})
    turn = rt.AssistantTurn(tool_calls=(held,), finish_reason="tool_calls", wire="chat")
    events = [rt.ToolCallFinished(held, "ok"), rt.TurnFinished(2, turn)]
    found = ag_ui_run(events, "r", ["call_a"])
    check_ag_ui([e for e in found if e["type"] != "TOOL_CALL_RESULT"])
    assert [(e["type"], e["toolCallId"]) for e in found if "toolCallId" in e] == [
        ("TOOL_CALL_RESULT", "call_a"),  # the client's own call
        ("TOOL_CALL_START", "call_a~2"),  # a new call reusing its id
        ("TOOL_CALL_ARGS", "call_a~2"),
        ("TOOL_CALL_END", "call_a~2"),
    ]


def choice_one(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"index": 1, "delta": delta}
    if reason is not None:
        entry["finish_reason"] = reason
    return {"choices": [entry]}


@pytest.mark.parametrize("early", [None, {"search"}], ids=["late", "early"])
def test_a_single_choice_numbered_1_is_the_turns_choice(early: set[str] | None) -> None:
    function = {"name": "search", "arguments": '{"q": "oslo"}'}
    asked = [
        choice_one({"content": "Looking."}),
        choice_one({"tool_calls": [{"index": 0, "id": "call_s", "function": function}]}),
        choice_one({}, "tool_calls"),
    ]
    script = Gated(asked, [choice_one({"content": "Done."}, "stop")], gates={})
    loop = rt.agent_loop(
        script, {"search": Tool("3 hits")}, said("chat"), early=early, fields=True, text=True
    )
    events, error = notes_of(loop)
    assert error is None
    assert any(isinstance(e, rt.TurnFinished) and e.assistant.choice_index == 1 for e in events)
    check_both(events, error)
    named = [(e["type"], e["toolCallId"]) for e in ag_ui(events) if "toolCallId" in e]
    assert named == [
        ("TOOL_CALL_START", "call_s"),
        ("TOOL_CALL_ARGS", "call_s"),
        ("TOOL_CALL_END", "call_s"),
        ("TOOL_CALL_RESULT", "call_s"),
    ]
    parts = [(p["type"], p["toolCallId"]) for p in ui_parts(events) if "toolCallId" in p]
    assert parts == [
        ("tool-input-start", "call_s"),
        ("tool-input-available", "call_s"),
        ("tool-output-available", "call_s"),
    ]


def test_a_suffixed_id_never_takes_one_the_model_sent_in_the_same_step() -> None:
    # Choice 0 sends "a" and "a~2"; choice 1 sends "a" again: its suffix must skip "a~2".
    def call(choice: int, index: int, call_id: str, name: str) -> Event:
        function = {"name": name, "arguments": "{}"}
        delta = {"tool_calls": [{"index": index, "id": call_id, "function": function}]}
        return {"choices": [{"index": choice, "delta": delta}]}

    chunks = [call(0, 0, "a", "f"), call(0, 1, "a~2", "g"), call(1, 0, "a", "h")] + [
        {"choices": [{"index": choice, "delta": {}, "finish_reason": "tool_calls"}]}
        for choice in (0, 1)
    ]
    events, error = notes_of(reactivex.from_iterable(chunks).pipe(rt.lifecycle()))
    assert error is None
    want = [("a", "f"), ("a~2", "g"), ("a~3", "h")]
    parts = ui_parts(events)
    for kind in ("tool-input-start", "tool-input-available"):
        assert [(p["toolCallId"], p["toolName"]) for p in parts if p["type"] == kind] == want
    starts = [e for e in ag_ui(events) if e["type"] == "TOOL_CALL_START"]
    assert [(e["toolCallId"], e["toolCallName"]) for e in starts] == want


def two_calls_one_id(wire: str) -> list[Any]:
    token = [("same", "read", pieces('{"token": "a"}')), ("same", "read", pieces('{"token": "b"}'))]
    return case(wire).turn((), token)


@pytest.mark.parametrize("wire", ["chat", "anthropic"])
def test_calls_sharing_an_id_renamed_at_commit_are_the_calls_that_started(wire: str) -> None:
    # The lenient policy renames the second "same" to "same_1" when the turn commits.
    operator = rt.lifecycle(rt.LENIENT, fields=True, text=True)
    events, error = notes_of(reactivex.from_iterable(two_calls_one_id(wire)).pipe(operator))
    assert error is None
    assert [e.call.id for e in events if isinstance(e, rt.ToolCallCommitted)] == ["same", "same_1"]
    check_both(events, error)
    events_ag_ui = ag_ui(events)
    assert [(e["toolCallId"], e["delta"]) for e in events_ag_ui if "delta" in e] == [
        ("same", '{"token": "a"}'),
        ("same~2", '{"token": "b"}'),
    ]
    customs = {e["value"]["toolCallId"] for e in events_ag_ui if e["type"] == "CUSTOM"}
    assert customs == {"same", "same~2"}
    parts = ui_parts(events)
    assert [(p["type"], p["toolCallId"], p.get("input")) for p in parts if "toolCallId" in p] == [
        ("tool-input-start", "same", None),
        ("tool-input-start", "same~2", None),
        ("tool-input-available", "same", {"token": "a"}),
        ("tool-input-available", "same~2", {"token": "b"}),
    ]


def test_the_answer_to_a_call_renamed_at_commit_reaches_the_call_that_started() -> None:
    script = Gated(two_calls_one_id("chat"), prose("chat"), gates={})
    tools = {"read": lambda token: f"read {token}"}
    loop = rt.agent_loop(script, tools, said("chat"), policy="lenient", fields=True, text=True)
    events, error = notes_of(loop)
    assert error is None
    check_both(events, error)
    results = [(e["toolCallId"], e["content"]) for e in ag_ui(events) if "content" in e]
    assert results == [("same", "read a"), ("same~2", "read b")]
    outputs = [(p["toolCallId"], p["output"]) for p in ui_parts(events) if "output" in p]
    assert outputs == [("same", "read a"), ("same~2", "read b")]


def test_two_choices_with_one_id_are_two_calls_in_both_protocols() -> None:
    chunks = [
        call_open(0, "x", "f", "{}", choice_index=0),
        call_open(0, "x", "f", '{"a": 1}', choice_index=1),
        finish("tool_calls", index=0),
        finish("tool_calls", index=1),
    ]
    events, error = lifecycle_of(chunks)
    assert error is None
    check_both(events, error)
    starts = [e["toolCallId"] for e in ag_ui(events) if e["type"] == "TOOL_CALL_START"]
    assert starts == ["x", "x~2"]
    given = [(p["toolCallId"], p["input"]) for p in ui_parts(events) if "input" in p]
    assert given == [("x", {}), ("x~2", {"a": 1})]


def test_a_custom_tools_free_form_input_is_its_text() -> None:
    call = rt.ToolCall(0, "call_p", "apply_patch", "*** Begin Patch", {}, type="custom")
    events = [rt.ToolCallCommitted(call)]
    [args] = [e for e in ag_ui(events) if e["type"] == "TOOL_CALL_ARGS"]
    assert args["delta"] == "*** Begin Patch"
    [given] = [p for p in ui_parts(events) if p["type"] == "tool-input-available"]
    assert given["input"] == "*** Begin Patch"


def test_a_refusal_is_the_answers_text() -> None:
    events = [rt.TextDelta("I can't", "refusal"), rt.TextDelta(" help.", "refusal")]
    kinds = [(p["type"], p.get("delta")) for p in ui_parts(events)]
    assert kinds[2:6] == [
        ("text-start", None),
        ("text-delta", "I can't"),
        ("text-delta", " help."),
        ("text-end", None),
    ]


def test_dynamic_marks_every_tool_part() -> None:
    events = chat_turn()
    parts = run(events, to_ui_message_stream(message_id="m", dynamic=True))
    tools = [p for p in parts if p["type"].startswith("tool-")]
    assert tools
    assert all(p["dynamic"] is True for p in tools)


def test_a_resumed_turns_answer_is_its_result_alone_on_ag_ui() -> None:
    # The client sent the call back itself: a second TOOL_CALL_START would double its arguments.
    call = rt.ToolCall(0, "call_a", "f", "{}", {})
    events = [rt.ToolCallFinished(call, "ok")]
    assert [e["type"] for e in ag_ui(events)] == ["RUN_STARTED", "TOOL_CALL_RESULT", "RUN_FINISHED"]
    assert [p["type"] for p in ui_parts(events)] == [
        "start",
        "tool-input-available",  # updates the client's part, or makes one it can answer
        "tool-output-available",
        "finish",
    ]


# -- errors ---------------------------------------------------------------------------------------


def test_another_exceptions_details_stay_on_the_server_unless_error_text_says() -> None:
    secret = RuntimeError("https://key:s3cret@proxy.test")
    [*_, failure] = ag_ui([], secret)
    assert failure == {
        "type": "RUN_ERROR",
        "message": "RuntimeError (details are in the server's log)",
        "code": "RuntimeError",
    }
    shown = run([], to_ui_message_stream(error_text=lambda e: f"oops: {e}"), secret)
    assert shown[-2] == {"type": "error", "errorText": "oops: https://key:s3cret@proxy.test"}


SECRET = "AIzaSECRETKEY123"
URL = (
    f"https://generativelanguage.googleapis.com/v1beta/models/m:streamGenerateContent?key={SECRET}"
)


class HTTPStatusError(Exception):
    """An HTTP client's status error (httpx's, say): its message holds the request's URL."""

    def __init__(self, status: int) -> None:
        super().__init__(f"Server error '{status}' for url '{URL}'")
        self.status_code = status


def everything_said(events: Iterable[Any], error: Exception | None) -> str:
    return json.dumps([*ag_ui(events, error), *ui_parts(events, error)])


@pytest.mark.parametrize("status", [403, 503])
def test_an_http_errors_url_never_reaches_the_browser(status: int) -> None:
    def open_stream(messages: list[dict[str, Any]]) -> Any:
        raise HTTPStatusError(status)

    loop = rt.agent_loop(open_stream, {}, said("gemini"), backoff=0, retries=1)
    events, error = notes_of(loop)
    assert isinstance(error, rt.ProviderError)
    assert SECRET in str(error)  # the library's message quotes the HTTP client's
    assert SECRET not in everything_said(events, error)
    safe = f"ProviderError: the provider answered with an error (code {status})"
    assert ag_ui(events, error)[-1]["message"] == safe
    assert ui_parts(events, error)[-2] == {"type": "error", "errorText": safe}
    if status == 503:  # retried first: the retry says the same, no more
        [retried] = [e for e in ag_ui(events, error) if e.get("name") == "rxtoolcalls.turn_retried"]
        assert retried["value"]["message"] == safe
        [data] = [p["data"] for p in ui_parts(events, error) if "data" in p]
        assert data["message"] == safe


def test_a_network_errors_text_never_reaches_the_browser() -> None:
    def chunks() -> Iterator[dict[str, Any]]:
        yield content("Hi")
        raise ConnectionError(f"Read timed out. url: {URL}")

    events, error = notes_of(reactivex.from_iterable(chunks()).pipe(rt.lifecycle(text=True)))
    assert isinstance(error, rt.StreamInterruptedError)
    assert SECRET in str(error)
    assert SECRET not in everything_said(events, error)


def test_a_tools_exception_never_reaches_the_browser_as_the_runs_error() -> None:
    def search(q: str) -> str:
        raise RuntimeError("could not connect to postgres://admin:hunter2@db.internal/prod")

    script = Gated(case("chat").turn(["x"], CALLS), prose("chat"), gates={})
    tools: dict[str, Callable[..., Any]] = {"search": search, "fetch": Tool("ok")}
    loop = rt.agent_loop(script, tools, said("chat"), tool_errors="raise")
    events, error = notes_of(loop)
    assert isinstance(error, rt.ToolExecutionError)
    assert "hunter2" in str(error)
    assert "hunter2" not in everything_said(events, error)
    assert ag_ui(events, error)[-1]["message"] == "ToolExecutionError: a tool could not run"


def test_the_default_error_text_is_a_type_a_sentence_of_ours_and_a_short_code() -> None:
    class Cut(rt.StreamInterruptedError):
        pass

    def said_of(error: Exception) -> str:
        [*_, failure] = ag_ui([], error)
        message: str = failure["message"]
        return message

    provider = "ProviderError: the provider answered with an error"
    assert said_of(rt.ProviderError("x", code=429)) == f"{provider} (code 429)"
    assert said_of(rt.ProviderError("x", code="overloaded_error")) == (
        f"{provider} (code overloaded_error)"
    )
    assert said_of(rt.ProviderError("x", code=f"see {URL}")) == provider
    assert said_of(rt.ProviderError("x", code={"key": SECRET})) == provider
    assert said_of(Cut("x")) == "Cut: the stream ended before the turn was complete"
    assert said_of(rt.ToolCallStreamError("x")) == (
        "ToolCallStreamError: the tool-call stream failed"
    )


def test_error_text_str_shows_the_whole_message() -> None:
    error = rt.ProviderError(f"the provider answered HTTP 403: {URL}", code=403)
    [*_, failure] = run([], to_ag_ui(error_text=str), error)
    assert failure["message"] == str(error)


# -- encoders and headers -------------------------------------------------------------------------


def test_encoders_write_compact_utf8_json_as_the_protocols_encoders_do() -> None:
    event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Zürich 🌧"}
    assert (
        ag_ui_sse(event)
        == 'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"Zürich 🌧"}\n\n'.encode()
    )
    assert ui_message_sse({"type": "finish-step"}) == b'data: {"type":"finish-step"}\n\n'
    assert UI_MESSAGE_STREAM_END == b"data: [DONE]\n\n"


def test_encoders_write_what_json_cannot_hold_as_javascript_would() -> None:
    value = {"type": "data-x", "data": {"r": float("nan"), "s": "\ud800"}}
    line = ui_message_sse(value)
    assert line == b'data: {"type":"data-x","data":{"r":null,"s":"\\ud800"}}\n\n'
    assert json.loads(line[6:]) == {"type": "data-x", "data": {"r": None, "s": "\ud800"}}


def test_a_lone_surrogate_is_escaped_and_the_rest_stays_readable_utf8() -> None:
    # A delta cut inside a pair: its high half alone, next to prose that is not ASCII.
    event = {"type": "TEXT_MESSAGE_CONTENT", "delta": "Zürich \ud83c"}
    line = ag_ui_sse(event)
    assert line == 'data: {"type":"TEXT_MESSAGE_CONTENT","delta":"Zürich \\ud83c"}\n\n'.encode()
    assert json.loads(line[6:]) == event
    # Both halves in one string (as Python holds them apart): JSON.parse joins them.
    line = ui_message_sse({"type": "text-delta", "id": "t", "delta": "\ud83c\udf27 é"})
    assert line == 'data: {"type":"text-delta","id":"t","delta":"\\ud83c\\udf27 é"}\n\n'.encode()
    assert json.loads(line[6:])["delta"] == "🌧 é"


def test_headers_are_the_protocols() -> None:
    # packages/ai/src/ui-message-stream/ui-message-stream-headers.ts (ai 7.0.77)
    assert dict(UI_MESSAGE_STREAM_HEADERS) == {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "connection": "keep-alive",
        "x-vercel-ai-ui-message-stream": "v1",
        "x-accel-buffering": "no",
    }
    assert AG_UI_HEADERS["content-type"] == "text/event-stream"
    with pytest.raises(TypeError):
        AG_UI_HEADERS["x"] = "y"  # type: ignore[index]


def test_the_ag_ui_encoder_gives_the_content_type_of_the_headers() -> None:
    encoder = pytest.importorskip("ag_ui.encoder", reason=extra("ag-ui"))
    assert encoder.EventEncoder().get_content_type() == AG_UI_HEADERS["content-type"]


# -- the operator spec ----------------------------------------------------------------------------

OPERATORS = {
    "ag_ui": lambda: to_ag_ui(thread_id="t", run_id="r"),
    "ui_message_stream": lambda: to_ui_message_stream(message_id="m"),
}
on_next, on_completed, on_error = (
    ReactiveTest.on_next,
    ReactiveTest.on_completed,
    ReactiveTest.on_error,
)
subscribe = ReactiveTest.subscribe


def test_an_empty_source_is_a_run_with_nothing_in_it() -> None:
    assert ag_ui([]) == [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    assert ui_parts([]) == [
        {"type": "start", "messageId": "m"},
        {"type": "finish", "finishReason": "stop"},
    ]


def timeline(messages: list[Any]) -> list[tuple[float, str]]:
    """Each recorded notification's time and kind."""
    return [(m.time, m.value.kind) for m in messages]


def value_of(record: Any) -> Any:
    note = record.value
    assert isinstance(note, OnNext)
    return note.value


@pytest.mark.parametrize("protocol", OPERATORS)
def test_a_source_error_is_the_protocols_error_then_completion(protocol: str) -> None:
    scheduler = TestScheduler()
    error = rt.StreamInterruptedError("cut")
    source = scheduler.create_hot_observable(
        on_next(210, rt.TextDelta("Hi", "content")), on_error(220, error)
    )
    observer = scheduler.start(lambda: source.pipe(OPERATORS[protocol]()))
    said = "StreamInterruptedError: the stream ended before the turn was complete"
    if protocol == "ag_ui":  # one RUN_ERROR, the last event
        assert timeline(observer.messages)[-2:] == [(220, "N"), (220, "C")]
        assert value_of(observer.messages[-2]) == {
            "type": "RUN_ERROR",
            "message": said,
            "code": "StreamInterruptedError",
        }
    else:  # an error part, then finish with its reason
        assert timeline(observer.messages)[-3:] == [(220, "N"), (220, "N"), (220, "C")]
        assert [value_of(message) for message in observer.messages[-3:-1]] == [
            {"type": "error", "errorText": said},
            {"type": "finish", "finishReason": "error"},
        ]
    assert source.subscriptions == [subscribe(200, 220)]


@pytest.mark.parametrize("protocol", OPERATORS)
def test_a_never_ending_source_opens_the_run_and_disposal_reaches_it(protocol: str) -> None:
    scheduler = TestScheduler()
    source = scheduler.create_hot_observable(on_next(210, rt.TextDelta("Hi", "content")))
    observer = scheduler.start(lambda: source.pipe(OPERATORS[protocol]()), disposed=500)
    # The run opens at subscription; the step and the text at the event; nothing ends it.
    assert timeline(observer.messages) == [(200, "N"), (210, "N"), (210, "N"), (210, "N")]
    assert source.subscriptions == [subscribe(200, 500)]


@pytest.mark.parametrize("protocol", OPERATORS)
def test_an_event_it_cannot_read_is_an_error_and_unsubscribes(protocol: str) -> None:
    scheduler = TestScheduler()
    messages: list[Any] = [
        on_next(210, {"choices": []}),
        on_next(220, rt.TextDelta("Hi", "content")),
    ]
    source = scheduler.create_hot_observable(messages)
    observer = scheduler.start(lambda: source.pipe(OPERATORS[protocol]()))
    assert timeline(observer.messages)[-1] == (210, "E")
    failure = observer.messages[-1].value
    assert isinstance(failure, OnError)
    assert isinstance(failure.exception, TypeError)
    assert "lifecycle" in str(failure.exception)
    assert source.subscriptions == [subscribe(200, 210)]


@pytest.mark.parametrize(
    "make",
    [
        lambda text: to_ag_ui(error_text=text),
        lambda text: to_ui_message_stream(error_text=text),
    ],
    ids=list(OPERATORS),
)
def test_error_text_raising_is_an_error_not_swallowed(make: Any) -> None:
    class Broken(Exception):
        pass

    def text(error: BaseException) -> str:
        raise Broken

    got: list[Exception] = []
    parts: list[Event] = []
    reactivex.throw(rt.ProviderError("x")).pipe(make(text)).subscribe(parts.append, got.append)
    assert [type(e) for e in got] == [Broken]
    assert parts[-1]["type"] in ("RUN_STARTED", "start")


@pytest.mark.parametrize("protocol", OPERATORS)
def test_a_subscribers_own_exception_leaves_as_raised(protocol: str) -> None:
    class Own(Exception):
        pass

    seen: list[Event] = []

    def take(event: Event) -> None:
        seen.append(event)
        if len(seen) == 3:
            raise Own

    errors: list[Exception] = []
    with pytest.raises(Own):
        reactivex.from_iterable(chat_turn()).pipe(OPERATORS[protocol]()).subscribe(
            take, errors.append
        )
    assert len(seen) == 3
    assert errors == []  # never taken for the stream's error


@pytest.mark.parametrize("protocol", OPERATORS)
def test_each_subscription_has_its_own_state(protocol: str) -> None:
    mapped = reactivex.from_iterable(chat_turn()).pipe(OPERATORS[protocol](), ops.to_list())
    assert mapped.run() == mapped.run()
    fresh = reactivex.from_iterable(chat_turn()).pipe(to_ag_ui(), ops.to_list())
    first, second = fresh.run()[0], fresh.run()[0]
    assert first["runId"] != second["runId"]
    assert first["threadId"] != second["threadId"]


def test_disposal_reaches_the_agent_loops_stream() -> None:
    disposed: list[bool] = []

    def open_stream(messages: list[dict[str, Any]]) -> Observable[Any]:
        def subscribe_(observer: abc.ObserverBase[Any], _: Any = None) -> abc.DisposableBase:
            observer.on_next(case("chat").turn(["Hi"])[0])
            return Disposable(lambda: disposed.append(True))

        return Observable(subscribe_)

    parts: list[Event] = []
    loop = rt.agent_loop(open_stream, {}, said("chat"), text=True)
    subscription = loop.pipe(to_ui_message_stream(message_id="m")).subscribe(parts.append)
    assert [p["type"] for p in parts] == ["start", "start-step", "text-start", "text-delta"]
    subscription.dispose()
    assert disposed == [True]


if __name__ == "__main__":
    # python -m tests.test_ui: write the goldens from the mapping as it is (review the diff).
    write_goldens()
    sys.stdout.write(f"wrote {len(names())} goldens to {GOLDENS}\n")
