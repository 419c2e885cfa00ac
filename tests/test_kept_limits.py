"""What a turn keeps verbatim (items, blocks, parts, citations) has a ceiling: ``Limits.max_kept``.

With every limit small, a stream of events that are each small but keep something must stop
at the ceiling with a ``LimitExceededError``, not hold everything it is sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import rxtoolcalls as rt
from rxtoolcalls.wires import names
from tests.wire_builders import case, g_response, per_wire, r_created, turn_of

SMALL = rt.Policy(
    limits=rt.Limits(
        max_call_arguments=1000,
        max_turn_arguments=1000,
        max_text=1000,
        max_identifier=1000,
        max_event=1000,
        max_kept=1000,
    )
)
PAYLOAD = "x" * 200


# Every registered wire's streams that keep something verbatim (tests/wire_builders.py).
KEPT = per_wire(lambda entry: list(entry.kept))


def stream(wire: str, what: str) -> Iterator[Any]:
    return case(wire).kept[what](PAYLOAD)


@pytest.mark.parametrize(("wire", "what"), KEPT)
def test_what_is_kept_verbatim_stops_at_max_kept(wire: str, what: str) -> None:
    assembler = rt.Assembler(SMALL)
    fed = 0

    def feed_all() -> None:
        nonlocal fed
        for event in stream(wire, what):
            fed += 1
            assembler.feed(event)

    with pytest.raises(rt.LimitExceededError) as caught:
        feed_all()
    assert caught.value.limit == "max_kept"
    assert caught.value.value == 1000
    # Each event keeps at least 20 characters: the ceiling is met within a few events.
    assert fed < 100


@pytest.mark.parametrize(("wire", "what"), KEPT)
def test_the_same_streams_are_taken_in_whole_under_the_default_limits(wire: str, what: str) -> None:
    # The first 200 events keep far more than the small ceiling, far less than 16 Mi.
    assembler = rt.Assembler()
    fed = [assembler.feed(event) for _, event in zip(range(200), stream(wire, what), strict=False)]
    assert len(fed) == 200
    assert rt.Limits().max_kept == 16 * 1024 * 1024


def test_a_final_item_replaces_what_its_index_held_in_the_count() -> None:
    # The same reasoning item sent again at one index (added, then done) is counted once.
    assembler = rt.Assembler(SMALL)
    assembler.feed(r_created())
    item = {"type": "reasoning", "id": "rs_0", "summary": [], "encrypted_content": "y" * 600}
    assembler.feed({"type": "response.output_item.added", "output_index": 0, "item": item})
    assembler.feed({"type": "response.output_item.done", "output_index": 0, "item": item})
    assembler.feed(
        {
            "type": "response.completed",
            "response": {"id": "r", "status": "completed", "output": [item]},
        }
    )
    turn = assembler.close()
    assert turn.items[0]["encrypted_content"] == "y" * 600


@pytest.mark.parametrize("wire", names())
def test_every_wire_counts_its_choices(wire: str) -> None:
    policy = rt.Policy(limits=rt.Limits(max_choices=4))
    choice = case(wire).choice
    if choice is None:
        # A wire of one choice: a whole turn is within max_choices=1.
        one = rt.Policy(limits=rt.Limits(max_choices=1))
        turn = turn_of(case(wire).turn(["Hi"], [("call_a", "f", ["{}"])]), policy=one)
        assert [c.name for c in turn.tool_calls] == ["f"]
        return
    assembler = rt.Assembler(policy)
    for n in range(4):
        assembler.feed(choice(n))
    with pytest.raises(rt.LimitExceededError) as caught:
        assembler.feed(choice(4))
    assert caught.value.limit == "max_choices"


class Text(str):
    """A str subclass: as long as the str it is."""


def test_subclasses_count_their_size_and_shared_or_cyclic_values_end() -> None:
    shared: list[Any] = ["a"]
    for _ in range(60):
        shared = [shared, shared]  # 61 lists, 2**60 paths through them
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    values = {
        "str subclass": Text("A" * 5000),
        "list subclass": type("Items", (list,), {})(["x" * 50] * 100),
        "shared subtrees": shared,
        "a list holding itself": cyclic,
    }
    for label, value in values.items():
        assembler = rt.Assembler(SMALL)
        with pytest.raises(rt.LimitExceededError) as caught:
            assembler.feed(g_response({"inlineData": {"mimeType": "image/png", "data": value}}))
        assert caught.value.limit == "max_kept", label


def test_a_whole_call_on_the_fast_path_past_max_choices_is_refused_and_the_close_typed() -> None:
    assembler = rt.Assembler(rt.Policy(limits=rt.Limits(max_choices=1)), wire="gemini")
    assembler.feed({"candidates": [{"index": 1, "content": {"parts": [{"text": "hi"}]}}]})
    whole = {"functionCall": {"name": "f", "args": {}}}
    with pytest.raises(rt.LimitExceededError):
        assembler.feed({"candidates": [{"content": {"parts": [whole]}}]})
    with pytest.raises(rt.ToolCallStreamError):
        assembler.close()
