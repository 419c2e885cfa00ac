"""The registry at the seams between wires: envelopes, detection, hand-made turns, declared tools.

Each test is a defect a review found in the descriptor change, or a rule that keeps one out.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from rxtoolcalls.wires import WIRES, lookup, names
from tests.helpers import args, call_open, content, finish
from tests.wire_builders import B_START, b_open, b_piece, b_stop, b_text, case

MESSAGE_START = {"type": "message_start", "message": {"id": "msg_bdrk_1", "usage": {}}}


def chunk(event: dict[str, Any]) -> dict[str, Any]:
    """An InvokeModel envelope around ``event``, as boto3 yields it."""
    return {"chunk": {"bytes": json.dumps(event).encode()}}


def outcome(events: list[Any], **options: Any) -> rt.AssistantTurn | Exception:
    try:
        turn: rt.AssistantTurn = reactivex.from_iterable(events).pipe(rt.assemble(**options)).run()
    except Exception as error:  # noqa: BLE001 - the outcome under test
        return error
    return turn


# -- an InvokeModel stream's own exception event -------------------------------------------


@pytest.mark.json_parser
@pytest.mark.parametrize(
    ("name", "again"),
    [
        ("modelStreamErrorException", True),
        ("throttlingException", True),
        ("validationException", False),
    ],
)
def test_an_exception_event_among_envelopes_is_a_provider_error(name: str, again: bool) -> None:
    found = outcome([chunk(MESSAGE_START), {name: {"message": "try later"}}])
    assert isinstance(found, rt.ProviderError), found
    assert (found.code, found.retryable) == (name, again)


@pytest.mark.json_parser
def test_an_envelope_in_another_wires_stream_is_refused() -> None:
    for forced in (None, "chat"):
        found = outcome([content("hi"), chunk(MESSAGE_START), finish("stop")], wire=forced)
        assert isinstance(found, rt.MalformedChunkError), found
        assert "envelope" in str(found)


@pytest.mark.json_parser
@pytest.mark.parametrize("forced", ["anthropic", "bedrock"])
def test_forcing_a_wire_on_envelopes_says_to_leave_it_unset(forced: str) -> None:
    found = outcome([chunk(MESSAGE_START)], wire=forced)
    assert isinstance(found, rt.MalformedChunkError), found
    assert found.hint is not None
    assert "leave wire unset" in found.hint


# -- detection -------------------------------------------------------------------------------


def test_a_first_event_named_metadata_tells_no_wire() -> None:
    # A name too common to tell Bedrock by: the Chat stream after it is read as Chat.
    events = [{"metadata": {"request_id": "x"}}, content("Hi"), finish("stop")]
    found = outcome(events)
    assert isinstance(found, rt.AssistantTurn), found
    assert (found.wire, found.content) == ("chat", "Hi")


@pytest.mark.parametrize("other", [spec.name for spec in WIRES if spec.name != "bedrock"])
def test_a_bedrock_event_in_another_stream_is_refused(other: str) -> None:
    spec = lookup("bedrock")
    for event in (B_START, b_text(0, "a"), b_open(0, "tooluse_1", "delete_all")):
        assert spec.identifies(event)
        reader = lookup(other).reader(rt.DEFAULT)
        with pytest.raises(rt.MalformedChunkError, match="one stream speaks one wire"):
            reader.feed(event)


# -- a turn made by hand names a registered wire ---------------------------------------------


@pytest.mark.parametrize(
    ("wire", "kind"), [(None, TypeError), (5, TypeError), ("bogus", ValueError)]
)
def test_a_turn_made_by_hand_needs_a_registered_wire(wire: object, kind: type[Exception]) -> None:
    with pytest.raises(kind, match="wire must be one of"):
        rt.AssistantTurn(content="hi", wire=wire)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rt.AssistantTurn(content="hi")  # type: ignore[call-arg]


@pytest.mark.parametrize("wire", names())
def test_every_registered_wire_makes_a_turn(wire: str) -> None:
    turn = rt.AssistantTurn(content="hi", finish_reason="stop", wire=wire)  # type: ignore[arg-type]
    assert turn.to_message() is not None
    assert turn.tool_messages([]) == []


# -- declared tools: the provider's own tools declare no client tool --------------------------


def test_with_tools_passes_over_the_tools_the_provider_runs() -> None:
    declared = [
        {"cachePoint": {"type": "default"}},
        {"systemTool": {"name": "nova_code_interpreter"}},
        {"googleSearch": {}},
        {"type": "web_search"},
        {"type": "custom", "name": "patch"},
        {"toolSpec": {"name": "bedrock_f", "inputSchema": {"json": {"type": "object"}}}},
    ]
    assert rt.DEFAULT.with_tools(declared).tools == {
        "patch": None,
        "bedrock_f": {"type": "object"},
    }
    with pytest.raises(TypeError, match="without a function name"):
        rt.DEFAULT.with_tools([{"description": "no name"}])


# -- Bedrock's limits, values and starts ------------------------------------------------------


def blocks_taken(make: Any) -> int:
    """How many blocks ``make(index)`` begins before ``Limits.max_kept`` (1,000) stops them."""
    assembler = rt.Assembler(rt.Policy(limits=rt.Limits(max_kept=1000)), wire="bedrock")
    for index in range(10_000):
        try:
            assembler.feed(make(index))
        except rt.LimitExceededError as error:
            return index if error.limit == "max_kept" else -1
    return 10_000


def test_blocks_begun_without_a_start_are_charged_to_max_kept() -> None:
    # Each block takes room: the limit stops the stream long before its end.
    assert 0 < blocks_taken(b_stop) < 200
    assert 0 < blocks_taken(lambda index: b_text(index, "")) < 200


@pytest.mark.parametrize(
    "event",
    [
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": '{"pw": "hunter2"}'}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": '{"pw": "hunter2"}'}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": '{"pw": "hunter2"}'}},
        {"contentBlockDelta": '{"pw": "hunter2"}'},
        {"chunk": '{"pw": "hunter2"}'},
    ],
)
def test_a_bedrock_error_never_quotes_a_value(event: dict[str, Any]) -> None:
    found = outcome([B_START, b_open(0, "tooluse_1", "f"), event], wire=None)
    assert isinstance(found, rt.ToolCallStreamError), found
    assert "hunter2" not in str(found)
    assert "hunter2" not in (found.hint or "")


def test_a_start_that_carries_the_input_gives_it() -> None:
    start = {
        "contentBlockStart": {
            "contentBlockIndex": 0,
            "start": {"toolUse": {"toolUseId": "t", "name": "f", "input": {"city": "Paris"}}},
        }
    }
    end = [b_stop(0), {"messageStop": {"stopReason": "tool_use"}}]
    turn = outcome([B_START, start, *end])
    assert isinstance(turn, rt.AssistantTurn), turn
    assert turn.tool_calls[0].parsed_arguments == {"city": "Paris"}
    # Pieces win over the start's placeholder, as on Anthropic.
    turn = outcome([B_START, start, b_piece(0, '{"city": "Rome"}'), *end])
    assert isinstance(turn, rt.AssistantTurn), turn
    assert turn.tool_calls[0].parsed_arguments == {"city": "Rome"}


@pytest.mark.parametrize("wire", ["anthropic", "bedrock"])
def test_a_start_input_that_is_no_object_is_refused(wire: str) -> None:
    if wire == "anthropic":
        block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": '{"pw": "hunter2"}'}
        events: list[Any] = [
            MESSAGE_START,
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_stop", "index": 0},
        ]
    else:
        use = {"toolUseId": "t", "name": "f", "input": '{"pw": "hunter2"}'}
        events = [
            B_START,
            {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": use}}},
            b_stop(0),
        ]
    found = outcome(events, wire=wire)
    assert isinstance(found, rt.MalformedChunkError), found
    assert "must be an object" in str(found)
    assert "hunter2" not in str(found)


def test_a_stop_reason_of_another_type_says_so() -> None:
    found = outcome([B_START, b_text(0, "a"), b_stop(0), {"messageStop": {"stopReason": 5}}])
    assert isinstance(found, rt.MalformedChunkError), found
    assert str(found) == "messageStop: stopReason must be a string, got int"


def test_a_cut_stream_names_its_wire_as_people_do() -> None:
    found = outcome([B_START, b_text(0, "a")])
    assert isinstance(found, rt.StreamInterruptedError), found
    assert "AWS Bedrock" in str(found)


def test_an_interrupted_chat_turn_is_unchanged() -> None:
    found = outcome([call_open(0, "c", "f"), args(0, "{}")])
    assert isinstance(found, rt.StreamInterruptedError), found
    assert "ended without a finish_reason" in str(found)


@pytest.mark.parametrize("wire", [spec.name for spec in WIRES if spec.terminal])
def test_a_wire_with_a_terminal_event_gets_no_finish_switch_advice(wire: str) -> None:
    # require_finish_reason=False cannot help a wire that always ends with its terminal event.
    found = outcome(case(wire).build(["a"], [], False), wire=wire)
    assert isinstance(found, rt.StreamInterruptedError), found
    assert "require_finish_reason" not in (found.hint or "")


def test_a_chat_stream_without_a_finish_gets_the_switch_advice() -> None:
    found = outcome([content("Hi")])
    assert isinstance(found, rt.StreamInterruptedError), found
    assert "require_finish_reason=False" in (found.hint or "")


@pytest.mark.parametrize("wire", names())
def test_every_wire_has_a_client_the_chat_command_can_install_and_ask(wire: str) -> None:
    import tomllib
    from pathlib import Path

    from rxtoolcalls._wire import MODES

    client = lookup(wire).client
    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    extra = project["project"]["optional-dependencies"][client.extra]
    assert any(requirement.startswith(client.package) for requirement in extra)
    assert set(client.modes) <= set(MODES)
    assert "auto" in client.modes
