"""Every wire: a turn cut after any event, then ended, is one typed error or the uncut calls.

Every recording and a built turn of each registered wire (tests/wire_builders.py) is cut after
every event and ended each way the wire ends a turn (its ``closers``). The outcome is one
typed error, or a turn whose calls are calls of the uncut turn: whole ones when only the
finish came (under the default policy); never a value the uncut turn does not hold.
"""

from __future__ import annotations

from typing import Any

import pytest

import rxtoolcalls as rt
from tests.wire_builders import case, per_wire, pieces, turn_of

BUILT = "built: text, then two calls in pieces"
CASES = per_wire(lambda entry: [BUILT, *entry.recordings()])


def events_of(wire: str, name: str) -> list[Any]:
    entry = case(wire)
    if name != BUILT:
        return entry.load(name)
    calls = [
        ("call_a", "plan", pieces('{"city": "Oslo", "days": [1, 2], "note": "north"}', 5)),
        ("call_b", "book", ['{"ok": true}']),
    ]
    return entry.turn(["Let me ", "plan."], calls)


def named(turn: rt.AssistantTurn) -> list[tuple[str, Any]]:
    # A closer may name a call of its own ("closer"): it is no call of the uncut turn.
    return [(c.name, c.parsed_arguments) for c in turn.tool_calls if c.name != "closer"]


def within(part: Any, whole: Any) -> bool:
    """Whether every value of ``part`` is the value at the same place in ``whole``."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            k in whole and within(v, whole[k]) for k, v in part.items()
        )
    if isinstance(part, list):
        return (
            isinstance(whole, list)
            and len(part) <= len(whole)
            and all(within(a, b) for a, b in zip(part, whole, strict=False))
        )
    return bool(part == whole and type(part) is type(whole))


@pytest.mark.parametrize(("wire", "name"), CASES)
@pytest.mark.parametrize("policy", [rt.DEFAULT, rt.LENIENT], ids=["default", "lenient"])
def test_a_cut_turn_ended_gives_an_error_or_the_uncut_calls(
    wire: str, name: str, policy: rt.Policy
) -> None:
    entry = case(wire)
    events = events_of(wire, name)
    try:
        whole: list[tuple[str, Any]] | None = named(turn_of(events))
    except rt.ToolCallStreamError:
        whole = None  # the uncut turn fails: a cut one may only hold whole objects
    if name == BUILT:
        assert whole is not None
        assert len(whole) == 2
    for cut in range(len(events)):
        for closer_name, closer in entry.closers.items():
            where = f"cut after {cut} events, then {closer_name}"
            try:
                got = turn_of(events[:cut] + closer, policy=policy)
            except rt.ToolCallStreamError:
                continue
            calls = named(got)
            if whole is None:
                assert all(isinstance(args, dict) for _, args in calls), where
            elif closer_name == "finish" and policy is rt.DEFAULT:
                # Nothing but the finish closed what was open: only whole calls come out.
                assert calls == whole[: len(calls)], where
            else:
                # An explicit close may end a call early, but never mid-value: every value
                # the turn holds is one the uncut turn holds too.
                assert len(calls) <= len(whole), where
                for (got_name, got_args), (want_name, want_args) in zip(calls, whole, strict=False):
                    assert got_name == want_name, where
                    assert within(got_args, want_args), where
