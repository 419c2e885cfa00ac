"""Every wire: detection, split invariance of the bytes, SDK event objects, and the peers.

The wires come from the registry (``rxtoolcalls.wires.names()``) and their streams from the
table in ``tests/wire_builders.py``: a new wire is covered here once it has its entry.
"""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import reactivex
from hypothesis import given, settings
from hypothesis import strategies as st

import rxtoolcalls as rt
from rxtoolcalls._eventstream import EventStreamDecoder
from rxtoolcalls._reader import reader
from rxtoolcalls._sse import DONE, SSEDecoder, chunk_from_event
from rxtoolcalls._types import made_up_ids
from rxtoolcalls.wires import lookup, names
from rxtoolcalls.wires.bedrock import frame_event
from rxtoolcalls.wires.chat import ChatReader
from tests.helpers import extra, outcome
from tests.wire_builders import (
    CASES,
    case,
    g_call,
    g_response,
    g_stop,
    load_wire,
    per_wire,
    pieces,
    source_of,
    wire_fixture_names,
)

RECORDED = per_wire(lambda entry: entry.recordings())
CALLS = (("call_a", "get_weather", pieces('{"city": "Paris"}')), ("call_b", "f", ["{}"]))


def assemble_events(events: list[Any], **kwargs: Any) -> rt.AssistantTurn:
    assembler = rt.Assembler(**kwargs)
    for event in events:
        assembler.feed(event)
    return assembler.close()


def comparable(result: Any) -> Any:
    """A turn with the ids its reader made up (random) written as ``*``; an error as is."""
    if not isinstance(result, rt.AssistantTurn):
        return result
    text = repr(result)
    for made in made_up_ids(result):
        text = text.replace(made, "*")
    return text


def test_every_registered_wire_has_one_entry_in_the_table() -> None:
    # A wire registered without an entry fails every cross-wire test; an entry for no wire is
    # a leftover.
    assert sorted(CASES) == sorted(names()), "add or remove entries in tests/wire_builders.py"


@pytest.mark.parametrize("wire", names())
def test_a_wire_s_entry_builds_the_turns_it_says(wire: str) -> None:
    entry = case(wire)
    turn = assemble_events(entry.turn(["Hel", "lo"], CALLS))
    assert (turn.wire, turn.content) == (wire, "Hello")
    assert [(c.id, c.name, c.parsed_arguments) for c in turn.tool_calls] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "f", {}),
    ]
    assert turn.finish_reason not in lookup(wire).pause_reasons
    prose = assemble_events(entry.turn(["Hi", " there"]))
    assert (prose.content, prose.tool_calls) == ("Hi there", ())
    for events in (entry.turn(["Hi"], CALLS, end=False), entry.cut(["Hi"])):
        with pytest.raises(rt.StreamInterruptedError):
            assemble_events(events)
    for name, closer in entry.closers.items():
        with pytest.raises(rt.TruncatedToolCallError):
            assemble_events([*entry.cut(["Hi"]), *closer])
        assert name == "finish" or next(iter(entry.closers)) == "finish"
    assert entry.recordings(), "every wire has recordings of real turns"


@pytest.mark.parametrize(("wire", "name"), RECORDED)
def test_the_wire_is_detected_and_every_recording_ends_typed(wire: str, name: str) -> None:
    events = case(wire).load(name)
    result = outcome(assemble_events, events)
    forced = outcome(assemble_events, events, wire=wire)
    assert comparable(result) == comparable(forced)
    if isinstance(result, rt.AssistantTurn):
        assert result.wire == wire
        assert bool(result.items) is case(wire).items
    else:
        assert issubclass(result[0], rt.ToolCallStreamError)
    rx = outcome(lambda e: reactivex.from_iterable(e).pipe(rt.assemble()).run(), events)
    assert comparable(rx) == comparable(result)


def sse_events(pieces: list[bytes]) -> Iterator[Any]:
    decoder = SSEDecoder()
    for piece in pieces:
        for event in decoder.feed(piece):
            chunk = chunk_from_event(event)
            if chunk is DONE:
                return
            if chunk is not None:
                yield chunk


def eventstream_events(pieces: list[bytes]) -> Iterator[Any]:
    decoder = EventStreamDecoder()
    for piece in pieces:
        yield from map(frame_event, decoder.feed(piece))
    decoder.end()


# The decoders of each framing a wire's first route names, as its public source reads them.
DECODERS: dict[str, Callable[[list[bytes]], Iterator[Any]]] = {
    "sse": sse_events,
    "eventstream": eventstream_events,
}


def from_pieces(wire: str, pieces: list[bytes]) -> rt.AssistantTurn:
    """The turn of a body given in ``pieces``, decoded as the wire's framing says."""
    framing = lookup(wire).routes[0].framing.name
    assert framing in DECODERS, f"add a decoder for {framing!r} to DECODERS in {__file__}"
    return assemble_events(list(DECODERS[framing](pieces)))


@pytest.mark.json_parser
@pytest.mark.parametrize(("wire", "name"), RECORDED)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_split_of_the_body_gives_the_same_turn(wire: str, name: str, data: Any) -> None:
    raw = case(wire).body(name)
    expected = comparable(outcome(lambda p: from_pieces(wire, p), [raw]))
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(raw)), max_size=40))))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert comparable(outcome(lambda p: from_pieces(wire, p), pieces)) == expected


@pytest.mark.json_parser
@pytest.mark.parametrize("wire", names())
def test_one_byte_at_a_time(wire: str) -> None:
    entry = case(wire)
    raw = entry.body(entry.recordings()[0])
    whole = comparable(outcome(lambda p: from_pieces(wire, p), [raw]))
    by_byte = outcome(lambda p: from_pieces(wire, p), [raw[i : i + 1] for i in range(len(raw))])
    assert comparable(by_byte) == whole
    # The wire's public source reads the body as the decoder does.
    through = outcome(lambda b: source_of(wire)([b]).pipe(rt.assemble()).run(), raw)
    assert comparable(through) == whole
    assert comparable(outcome(assemble_events, entry.load(entry.recordings()[0]))) == whole


MIXED = [pytest.param(a, b, id=f"{a}-{b}") for a in names() for b in names() if a != b]


@pytest.mark.parametrize(("first", "second"), MIXED)
def test_a_stream_that_mixes_wires_is_malformed(first: str, second: str) -> None:
    one, other = (case(w).turn(["a"], [("c", "f", ["{}"])]) for w in (first, second))
    mixed = [*one[:3], *other[:3], *one[3:]]
    with pytest.raises(rt.MalformedChunkError):
        assemble_events(mixed)
    with pytest.raises(rt.MalformedChunkError):
        reactivex.from_iterable(mixed).pipe(rt.assemble()).run()


def test_an_error_before_anything_identifies_the_wire() -> None:
    flat = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}
    with pytest.raises(rt.ProviderError) as caught:
        assemble_events([flat])
    assert caught.value.retryable is True


@pytest.mark.parametrize("wire", names())
def test_assembler_reports_its_wire(wire: str) -> None:
    assembler = rt.Assembler()
    before = assembler.wire
    assembler.feed(case(wire).turn(["Hi"])[0])
    assert (before, assembler.wire) == (None, wire)
    assert rt.Assembler(wire=wire).wire == wire  # type: ignore[arg-type]


# A Chat chunk that names a call: feed returns its start event unless told not to.
_NAMING = {
    "choices": [
        {
            "index": 0,
            "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f"}}]},
            "finish_reason": None,
        }
    ]
}


def test_a_reader_asked_before_its_first_event_answers_as_a_chat_reader() -> None:
    # Before any event the Chat state is not made yet: every question makes it, and the
    # answers are those of a reader made for Chat.
    for ask in ("calls", "finish_reason", "content_size", "end"):
        detecting, chat = reader(), reader(wire="chat")
        assert getattr(detecting, ask)() == getattr(chat, ask)()
        assert (detecting.usage, detecting.normalizations) == (None, {})
    with pytest.raises(rt.StreamInterruptedError):
        reader().close_choices()


def test_what_was_set_before_the_chat_state_was_made_is_kept() -> None:
    quiet = reader(announce=False)
    assert quiet.normalizations == {}  # the Chat state is made here
    assert quiet.feed(_NAMING) == ()
    assert [c.name for c in quiet.calls()] == ["f"]
    stopped = reader()
    stopped.stop()
    assert stopped.calls() == []
    assert stopped.feed(_NAMING) == ()
    assert stopped.calls() == []
    told = reader()
    assert [s.name for s in told.feed(_NAMING)] == ["f"]
    closed = reader()
    with pytest.raises(rt.StreamInterruptedError):
        closed.close_choices()  # closed first, then the state is made
    with pytest.raises(RuntimeError, match=r"feed\(\) after close\(\)"):
        closed.feed(_NAMING)
    with pytest.raises(RuntimeError, match="already called"):
        closed.close_choices()


@pytest.mark.parametrize("wire", names())
def test_an_assembler_copies_and_pickles_before_and_after_its_first_event(wire: str) -> None:
    turn = case(wire).turn((), [("call_a", "f", ['{"a": 1}'])])
    for events, fed in ((turn, 0), (turn, 1), ([{}, *turn], 1)):
        turns = []
        original = rt.Assembler()
        for event in events[:fed]:
            original.feed(event)
        for copied in (copy.deepcopy(original), pickle.loads(pickle.dumps(original)), original):
            for event in events[fed:]:
                copied.feed(event)
            turns.append([(c.name, c.arguments) for c in copied.close().tool_calls])
        assert turns[0] == turns[1] == turns[2] != []


def _without_ids(value: Any) -> Any:
    """``value`` with every ``id`` key left out (Gemini's made-up ids differ per copy)."""
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "id"}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def _finished(assembler: rt.Assembler, events: list[Any]) -> Any:
    """What ``assembler`` gives once fed ``events`` and closed: the message, or the error type."""
    try:
        for event in events:
            assembler.feed(event)
        return _without_ids(json.loads(json.dumps(assembler.close().to_message(), default=repr)))
    except rt.ToolCallStreamError as error:
        return type(error)


@pytest.mark.parametrize(("wire", "name"), RECORDED)
def test_an_assembler_copies_and_pickles_midway_through_every_recording(
    wire: str, name: str
) -> None:
    events = case(wire).load(name)
    for cut in sorted({1, len(events) // 2, len(events) - 1}):
        original = rt.Assembler()
        try:
            for event in events[:cut]:
                original.feed(event)
        except rt.ToolCallStreamError:
            continue  # refused before the cut: nothing left to copy
        copies = (copy.deepcopy(original), pickle.loads(pickle.dumps(original)), original)
        ends = [_finished(copied, events[cut:]) for copied in copies]
        assert ends[0] == ends[1] == ends[2], cut


def test_a_reader_that_hands_events_on_answers_as_the_wire_s_reader() -> None:
    events = [
        {**g_response(g_call("f", {"a": 1})), "usageMetadata": {"promptTokenCount": 3}},
        g_stop(),
    ]
    detecting, forced = reader(), reader(wire="gemini")
    for event in events:
        detecting.feed(event)
        forced.feed(event)
        assert (detecting.usage, detecting.normalizations) == (
            forced.usage,
            forced.normalizations,
        )
    assert detecting.usage == {"promptTokenCount": 3}
    assert detecting.normalizations == {"synthesized_id": 1}


@pytest.mark.parametrize("wire", names())
def test_a_reader_that_hands_events_on_keeps_what_the_wire_s_reader_has(wire: str) -> None:
    events = case(wire).turn(["Hi"], CALLS)
    detecting, forced = reader(), reader(wire=wire)  # type: ignore[arg-type]
    for event in events:
        assert comparable_starts(detecting.feed(event)) == comparable_starts(forced.feed(event))
        assert (detecting.usage, detecting.normalizations) == (forced.usage, forced.normalizations)
    assert [c.name for c in detecting.close_choices()[0].tool_calls] == ["get_weather", "f"]


def comparable_starts(started: Any) -> list[tuple[int, str, str]]:
    return [(s.index, s.id, s.name) for s in started]


@pytest.mark.parametrize("wire", [w for w in names() if lookup(w).reader is not ChatReader])
def test_a_stream_of_another_wire_never_makes_the_chat_state(wire: str) -> None:
    detecting = reader()
    for event in case(wire).turn((), [("c", "f", ["{}"])]):
        detecting.feed(event)
    (turn,) = detecting.close_choices()
    assert [c.name for c in turn.tool_calls] == ["f"]
    assert detecting._made is False  # type: ignore[attr-defined]


# -- the SDKs' own event objects --------------------------------------------------------


@pytest.mark.parametrize("name", wire_fixture_names("responses"))
def test_openai_sdk_response_events_assemble_like_dicts(name: str) -> None:
    from openai._models import construct_type
    from openai.types.responses import ResponseStreamEvent

    events = load_wire("responses", name)
    typed = [construct_type(type_=ResponseStreamEvent, value=e) for e in events]
    assert all(not isinstance(t, dict) for t in typed)
    assert outcome(assemble_events, typed) == outcome(assemble_events, events)


@pytest.mark.parametrize("name", wire_fixture_names("anthropic"))
def test_anthropic_sdk_events_assemble_like_dicts(name: str) -> None:
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    from anthropic._models import construct_type

    events = load_wire("anthropic", name)
    typed = [construct_type(type_=anthropic.types.RawMessageStreamEvent, value=e) for e in events]
    assert all(not isinstance(t, dict) for t in typed)
    assert outcome(assemble_events, typed) == outcome(assemble_events, events)


# -- the peers, on the streams where they are right --------------------------------------


@pytest.mark.parametrize(
    "name",
    [n for n in wire_fixture_names("responses") if "error" not in n],
)
def test_differential_against_openai_response_stream_state(name: str) -> None:
    from openai import omit
    from openai._models import construct_type
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    events = load_wire("responses", name)
    state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=event))
    theirs = [
        (i, item.call_id, item.name, json.loads(item.arguments))
        for i, item in enumerate(state._completed_response.output)
        if item.type == "function_call"
    ]
    turn = assemble_events(events)
    assert [(c.index, c.id, c.name, c.parsed_arguments) for c in turn.tool_calls] == theirs
    text = "".join(
        part.text
        for item in state._completed_response.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text"
    )
    assert (turn.content or "") == text


@pytest.mark.parametrize(
    "name",
    [n for n in wire_fixture_names("anthropic") if "max_tokens" not in n],
)
def test_differential_against_anthropic_accumulate_event(name: str) -> None:
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    from anthropic._models import construct_type
    from anthropic.lib.streaming._messages import accumulate_event

    events = load_wire("anthropic", name)
    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for event in events:
        typed: Any = construct_type(type_=anthropic.types.RawMessageStreamEvent, value=event)
        snapshot = accumulate_event(event=typed, current_snapshot=snapshot, json_bufs=buffers)
    theirs = [
        (i, b.id, b.name, b.input) for i, b in enumerate(snapshot.content) if b.type == "tool_use"
    ]
    turn = assemble_events(events)
    assert [(c.index, c.id, c.name, c.parsed_arguments) for c in turn.tool_calls] == theirs
    assert turn.finish_reason == snapshot.stop_reason
    text = "".join(b.text for b in snapshot.content if b.type == "text")
    assert (turn.content or "") == text


def test_where_the_anthropic_sdk_is_wrong_we_refuse() -> None:
    """On a max_tokens cut the SDK's accumulator returns a dict with the cut string dropped."""
    anthropic = pytest.importorskip("anthropic", reason=extra("anthropic"))
    from anthropic._models import construct_type
    from anthropic.lib.streaming._messages import accumulate_event

    events = load_wire("anthropic", "anthropic-sdk-python__max_tokens_mid_tool_input")
    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for event in events:
        typed: Any = construct_type(type_=anthropic.types.RawMessageStreamEvent, value=event)
        snapshot = accumulate_event(event=typed, current_snapshot=snapshot, json_bufs=buffers)
    assert isinstance(snapshot.content[1].input, dict)  # looks valid, is not the model's
    with pytest.raises(rt.TruncatedToolCallError):
        assemble_events(events)
