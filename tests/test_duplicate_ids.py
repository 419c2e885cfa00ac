"""Two calls of one turn never share an id: refused by default, renamed under the lenient policy."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import rxtoolcalls as rt
from tests.wire_builders import (
    a_end,
    a_start,
    a_tool,
    g_call,
    g_response,
    g_stop,
    r_call,
    r_completed,
    r_created,
    r_fc_item,
    rx_turn,
    turn_of,
)


def chat(*calls: tuple[int, str, str, str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for index, call_id, name, arguments in calls:
        events.append(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": call_id,
                                    "type": "function",
                                    "function": {"name": name, "arguments": arguments},
                                }
                            ]
                        },
                    }
                ]
            }
        )
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return events


def responses(*calls: tuple[int, str, str, str]) -> list[dict[str, Any]]:
    events = [r_created()]
    for call in calls:
        events.extend(r_call(*call))
    events.append(r_completed([r_fc_item(*call) for call in calls]))
    return events


def anthropic(*calls: tuple[int, str, str, str]) -> list[dict[str, Any]]:
    events = [a_start()]
    for call in calls:
        events.extend(a_tool(*call))
    return [*events, *a_end()]


def gemini(*calls: tuple[int, str, str, str]) -> list[dict[str, Any]]:
    parts = [g_call(name, json.loads(args), id=call_id) for _, call_id, name, args in calls]
    return [g_response(*parts), g_stop()]


WIRES: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "chat": chat,
    "responses": responses,
    "anthropic": anthropic,
    "gemini": gemini,
}
SECRET = '{"token": "s3cr3t-value"}'
TWINS = ((0, "same", "read", SECRET), (1, "same", "read", '{"token": "other"}'))


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("run", [turn_of, rx_turn], ids=["assembler", "assemble"])
def test_two_calls_with_one_id_are_refused_by_default(
    wire: str, run: Callable[..., rt.AssistantTurn]
) -> None:
    with pytest.raises(rt.MalformedChunkError) as caught:
        run(WIRES[wire](*TWINS))
    assert "same" in str(caught.value)
    assert "s3cr3t" not in str(caught.value)
    assert caught.value.index == 1


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("run", [turn_of, rx_turn], ids=["assembler", "assemble"])
def test_the_lenient_policy_renames_the_second_and_the_transcript_stays_paired(
    wire: str, run: Callable[..., rt.AssistantTurn]
) -> None:
    turn = run(WIRES[wire](*TWINS), policy=rt.LENIENT)
    ids = [c.id for c in turn.tool_calls]
    assert ids[0] == "same"
    assert len(set(ids)) == 2
    assert turn.normalizations["renamed_duplicate_ids"] == 1
    # The assistant message and the answers carry the same, distinct ids.
    text = repr(turn.to_message())
    assert all(i in text for i in ids)
    answers = repr(turn.tool_messages(["a", "b"]))
    if wire != "gemini":
        assert all(i in answers for i in ids)


def test_unique_ids_pass_untouched() -> None:
    turn = turn_of(chat((0, "a", "read", "{}"), (1, "b", "read", "{}")))
    assert [c.id for c in turn.tool_calls] == ["a", "b"]
    assert "renamed_duplicate_ids" not in turn.normalizations
