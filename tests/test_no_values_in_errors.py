"""An error message names fields and sizes, never an argument value (a secret stays out of logs)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import rxtoolcalls as rt
from rxtoolcalls.wires import names
from tests.test_duplicate_ids import build
from tests.wire_builders import (
    G_CLOSE,
    g_arg,
    g_open,
    g_response,
    g_stop,
    r_call,
    r_completed,
    r_created,
    r_fc_item,
    turn_of,
)

SECRET = "hunter2-s3cr3t"
ARGUMENTS = json.dumps({"password": SECRET, "n": 1})


def message_of(events: list[Any], policy: rt.Policy = rt.DEFAULT) -> str:
    with pytest.raises(rt.ToolCallStreamError) as caught:
        turn_of(events, policy=policy)
    error = caught.value
    return f"{error} {error.hint} {error!r}"


def chat_delta(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_a_legacy_function_call_that_differs_from_its_tool_calls() -> None:
    delta = {
        "tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": "login", "arguments": ARGUMENTS}}
        ],
        "function_call": {"name": "login", "arguments": ARGUMENTS.replace("1", "2")},
    }
    text = message_of([chat_delta(delta), chat_delta({}, "tool_calls")])
    assert "function_call" in text
    assert SECRET not in text


def test_a_final_value_that_contradicts_the_pieces() -> None:
    call = (0, "c1", "login", ARGUMENTS)
    events = [r_created(), *r_call(*call)]
    other = r_fc_item(0, "c1", "login", ARGUMENTS.replace("1", "2"))
    events.append(r_completed([other]))
    # The done events say the same as the pieces; only the completed output differs.
    text = message_of(events)
    assert "arguments" in text
    assert SECRET not in text


@pytest.mark.parametrize("value", [float("nan"), "12", [1]], ids=["nan", "string", "list"])
def test_a_gemini_number_that_is_not_one(value: Any) -> None:
    entry = {"jsonPath": "$.password", "numberValue": value}
    events = [
        g_response(g_open("login")),
        g_response(g_arg("$.note", SECRET)),
        g_response({"functionCall": {"partialArgs": [entry], "willContinue": True}}),
        g_response(G_CLOSE),
        g_stop(),
    ]
    text = message_of(events)
    assert "numberValue" in text
    assert SECRET not in text
    if isinstance(value, str):
        assert value not in text.replace("12 ", "")


@pytest.mark.parametrize("wire", names())
def test_no_mutation_of_a_turn_puts_its_arguments_in_a_message(wire: str) -> None:
    events = build(wire, (0, "c1", "login", ARGUMENTS), (1, "c2", "login", ARGUMENTS))
    raw = [json.dumps(e) for e in events]
    said: list[str] = []
    for at in range(len(events)):
        mutations: list[list[Any]] = [
            events[:at],  # cut
            events[:at] + events[at + 1 :],  # one event lost
            events[: at + 1] + events[at:],  # one event twice
            [*events[:at], json.loads(raw[at].replace("1", "2")), *events[at + 1 :]],
            [*events[:at], json.loads(raw[at].replace('"login"', '"other"')), *events[at + 1 :]],
        ]
        for mutated in mutations:
            for policy in (rt.DEFAULT, rt.LENIENT):
                try:
                    turn_of(mutated, policy=policy)
                except rt.ToolCallStreamError as error:
                    said.append(f"{error} {error.hint} {error!r}")
    assert len(said) > len(events)
    assert [text for text in said if SECRET in text] == []
