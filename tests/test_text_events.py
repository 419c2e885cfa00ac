"""``TextDelta``: the turn's prose as it streams, in ``lifecycle(text=True)`` and the agent loop."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.wires import names
from tests.test_agent_early import Gated, Tool, asking
from tests.test_agent_wires import events_of, prose, said
from tests.wire_builders import case


def _cases() -> list[tuple[str, str]]:
    return [(wire, name) for wire in names() for name in case(wire).recordings()]


def joined(events: list[Any], kind: str) -> str | None:
    pieces = [e.text for e in events if isinstance(e, rt.TextDelta) and e.kind == kind]
    return "".join(pieces) if pieces else None


@pytest.mark.parametrize(("wire", "name"), _cases())
def test_a_recording_s_text_events_join_to_the_turn_s_text(wire: str, name: str) -> None:
    events = case(wire).load(name)
    notes: list[Any] = (
        reactivex.from_iterable(events)
        .pipe(rt.lifecycle("lenient", text=True), ops.materialize(), ops.to_list())
        .run()
    )
    seen = [n.value for n in notes if n.kind == "N"]
    assert all(e.text for e in seen if isinstance(e, rt.TextDelta))
    failed = [n.exception for n in notes if n.kind == "E"]
    if failed:
        return  # the turn is refused: its text events said what came, nothing more
    turns = reactivex.from_iterable(events).pipe(rt.assemble_choices("lenient")).run()
    for turn in turns:
        mine = [
            e for e in seen if isinstance(e, rt.TextDelta) and e.choice_index == turn.choice_index
        ]
        assert joined(mine, "content") == (turn.content or None)
        assert joined(mine, "reasoning") == (turn.reasoning or None)
        assert joined(mine, "refusal") == (turn.refusal or None)


@pytest.mark.parametrize("wire", names())
def test_text_comes_in_stream_order_with_the_call_events(wire: str) -> None:
    events = case(wire).turn(["Let me ", "look."], [("c1", "f", ['{"a":', " 1}"])])
    seen = reactivex.from_iterable(events).pipe(rt.lifecycle(text=True), ops.to_list()).run()
    kinds = [(type(e).__name__, getattr(e, "text", None)) for e in seen]
    assert kinds[:2] == [("TextDelta", "Let me "), ("TextDelta", "look.")]
    assert [k for k, _ in kinds[2:]] == ["ToolCallStarted", "ToolCallCommitted"]


def test_without_text_no_text_event_comes() -> None:
    events = case("chat").turn(["Hi."])
    seen = reactivex.from_iterable(events).pipe(rt.lifecycle(), ops.to_list()).run()
    assert seen == []


@pytest.mark.parametrize("wire", names())
@pytest.mark.parametrize("early", [None, {"search"}])
def test_the_agent_loop_adds_fields_and_text_and_keeps_its_conversation(
    wire: str, early: set[str] | None
) -> None:
    def run(**flags: Any) -> list[Any]:
        script = Gated(asking(wire), prose(wire), gates={})
        tools = {"search": Tool("3 hits"), "fetch": Tool("<html>")}
        return events_of(rt.agent_loop(script, tools, said(wire), early=early, **flags))

    plain, shown = run(), run(fields=True, text=True)
    assert shown[-1].messages == plain[-1].messages
    # Every other event is the same, in the same order.
    assert [e for e in shown if not isinstance(e, rt.ToolCallField | rt.TextDelta)] == plain
    fields = [(e.name, e.path, e.value) for e in shown if isinstance(e, rt.ToolCallField)]
    assert ("search", ("q",), "oslo") in fields
    assert ("fetch", (), {"url": "https://a.test/"}) in fields
    # Each turn's text events come before its TurnFinished and join to its content.
    text: list[str] = []
    for event in shown:
        if isinstance(event, rt.TextDelta):
            text.append(event.text)
        elif isinstance(event, rt.TurnFinished):
            assert "".join(text) == (event.assistant.content or "")
            text = []
    # A call's fields follow its start.
    first_field = next(i for i, e in enumerate(shown) if isinstance(e, rt.ToolCallField))
    first_start = next(i for i, e in enumerate(shown) if isinstance(e, rt.ToolCallStarted))
    assert first_start < first_field


def test_the_join_is_checked_on_recordings_of_every_wire_with_prose() -> None:
    """The recordings test above compares real text, not only ``None`` with ``None``."""
    with_prose: dict[str, int] = {}
    for wire, name in _cases():
        events = case(wire).load(name)
        try:
            turns = reactivex.from_iterable(events).pipe(rt.assemble_choices("lenient")).run()
        except rt.ToolCallStreamError:
            continue
        if any(turn.content or turn.reasoning or turn.refusal for turn in turns):
            with_prose[wire] = with_prose.get(wire, 0) + 1
    assert set(with_prose) == set(names())
    assert sum(with_prose.values()) >= 30
