"""Two calls of one turn never share an id: refused by default, renamed under the lenient policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import rxtoolcalls as rt
from rxtoolcalls.wires import names
from tests.wire_builders import (
    a_end,
    a_start,
    a_stop,
    a_tool,
    a_tool_open,
    case,
    pieces,
    r_created,
    rx_turn,
    turn_of,
)


def build(wire: str, *calls: tuple[int, str, str, str]) -> list[dict[str, Any]]:
    """A turn of ``wire`` asking for ``calls`` (index, id, name, arguments), in that order."""
    return case(wire).turn((), [(i, name, pieces(arguments)) for _, i, name, arguments in calls])


SECRET = '{"token": "s3cr3t-value"}'
TWINS = ((0, "same", "read", SECRET), (1, "same", "read", '{"token": "other"}'))


@pytest.mark.parametrize("wire", names())
@pytest.mark.parametrize("run", [turn_of, rx_turn], ids=["assembler", "assemble"])
def test_two_calls_with_one_id_are_refused_by_default(
    wire: str, run: Callable[..., rt.AssistantTurn]
) -> None:
    with pytest.raises(rt.MalformedChunkError) as caught:
        run(build(wire, *TWINS))
    assert "same" in str(caught.value)
    assert "s3cr3t" not in str(caught.value)
    assert caught.value.index == 1


@pytest.mark.parametrize("wire", names())
@pytest.mark.parametrize("run", [turn_of, rx_turn], ids=["assembler", "assemble"])
def test_the_lenient_policy_renames_the_second_and_the_transcript_stays_paired(
    wire: str, run: Callable[..., rt.AssistantTurn]
) -> None:
    turn = run(build(wire, *TWINS), policy=rt.LENIENT)
    ids = [c.id for c in turn.tool_calls]
    assert ids[0] == "same"
    assert len(set(ids)) == 2
    assert turn.normalizations["renamed_duplicate_ids"] == 1
    # The assistant message and the answers carry the same, distinct ids.
    text = repr(turn.to_message())
    assert all(i in text for i in ids)
    answers = repr(turn.tool_messages(["a", "b"]))
    assert all(i in answers for i in ids)


def test_unique_ids_pass_untouched() -> None:
    turn = turn_of(build("chat", (0, "a", "read", "{}"), (1, "b", "read", "{}")))
    assert [c.id for c in turn.tool_calls] == ["a", "b"]
    assert "renamed_duplicate_ids" not in turn.normalizations


@pytest.mark.parametrize("wire", names())
def test_a_new_name_never_takes_a_later_call_s_own_id(wire: str) -> None:
    calls = ((0, "a", "read", "{}"), (1, "a", "read", "{}"), (2, "a_1", "read", "{}"))
    turn = turn_of(build(wire, *calls), policy=rt.LENIENT)
    ids = [c.id for c in turn.tool_calls]
    assert ids[0] == "a"
    assert ids[2] == "a_1"
    assert len(set(ids)) == 3
    assert turn.normalizations["renamed_duplicate_ids"] == 1


def _transfer(arguments: str, status: str = "completed") -> dict[str, Any]:
    """A function_call item without an item id, as a minimal server sends it."""
    return {
        "type": "function_call",
        "call_id": "a",
        "name": "transfer",
        "arguments": arguments,
        "status": status,
    }


def _two_transfers(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    events = [r_created()]
    for index, arguments in enumerate(('{"usd": 5}', '{"usd": 500}')):
        events += [
            {"type": "response.output_item.added", "output_index": index, "item": _transfer("")},
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": _transfer(arguments),
            },
        ]
    events.append(
        {
            "type": "response.completed",
            "response": {"id": "r", "status": "completed", "output": output},
        }
    )
    return events


def test_terminal_items_of_a_shared_call_id_pair_in_order_or_not_at_all() -> None:
    both = _two_transfers([_transfer('{"usd": 5}'), _transfer('{"usd": 500}')])
    turn = turn_of(both, policy=rt.LENIENT)
    assert [(c.id, c.parsed_arguments) for c in turn.tool_calls] == [
        ("a", {"usd": 5}),
        ("a_1", {"usd": 500}),
    ]
    # One item for two calls: which one it is cannot be told, so nothing is guessed.
    with pytest.raises(rt.MalformedChunkError, match="cannot be told"):
        turn_of(_two_transfers([_transfer('{"usd": 500}')]), policy=rt.LENIENT)


def test_a_new_name_never_takes_a_server_call_s_id() -> None:
    events = [
        a_start(),
        *a_tool(0, "a", "read", "{}"),
        *a_tool(1, "a", "read", "{}"),
        a_tool_open(2, "a_1", "web_search", kind="server_tool_use"),
        a_stop(2),
        *a_end(),
    ]
    turn = turn_of(events, policy=rt.LENIENT)
    items = [(item["type"], item["id"]) for item in turn.items]
    assert len({i for _, i in items}) == 3
    assert items[2] == ("server_tool_use", "a_1")
    assert [c.id for c in turn.tool_calls] == ["a", items[1][1]]


def test_a_terminal_item_with_an_id_takes_its_place_before_the_shared_call_id_fill() -> None:
    events = _two_transfers([])[:-1]
    # The first call's item has an id, added and done; the second's has none.
    events[1]["item"]["id"] = events[2]["item"]["id"] = "fc_0"
    first = {**_transfer('{"usd": 5}'), "id": "fc_0"}
    output = [_transfer('{"usd": 500}'), first]  # listed second, named by its id
    events.append(
        {
            "type": "response.completed",
            "response": {"id": "r", "status": "completed", "output": output},
        }
    )
    turn = turn_of(events, policy=rt.LENIENT)
    assert [c.parsed_arguments for c in turn.tool_calls] == [{"usd": 5}, {"usd": 500}]
    assert "replaced_provisional_arguments" not in turn.normalizations
