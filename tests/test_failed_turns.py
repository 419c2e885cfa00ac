"""A failed turn's error holds no turn: whoever keeps the error keeps a few hundred bytes.

The error's traceback holds the frames it passed, and through them the reader; a reader whose
turn failed lets go of what it read (arguments, text, items), on every wire.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from rxtoolcalls.wires import names
from tests.wire_builders import case

BIG = "x" * 1_000_000


def cut(wire: str, finished: bool) -> list[Any]:
    """A megabyte of text, then a call cut inside a megabyte string; no end, or the finish."""
    entry = case(wire)
    events = entry.cut([BIG[:500_000], BIG[500_000:]], "c", "f", "a", BIG)
    return [*events, *entry.closers["finish"]] if finished else events


def chat_length() -> list[dict[str, Any]]:
    # Text and the call's start in one chunk, then a finish that says the call was cut.
    entry = {"index": 0, "id": "c", "type": "function", "function": {"name": "f"}}
    return [
        {"choices": [{"index": 0, "delta": {"content": BIG, "tool_calls": [entry]}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"arguments": '{"a": "' + BIG}}]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    ]


def chat_parsed() -> list[dict[str, Any]]:
    # Finished as if whole: the parse finds the text cut, and its error holds the text.
    return [
        *chat_length()[:2],
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]


# Two more Chat turns: failed by the finish, and failed by the parse of a cut text.
CHAT: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "chat, length": chat_length,
    "chat, cut text parsed": chat_parsed,
}
# Every wire's turn cut off, then left without an end or finished as if whole.
TURNS = [f"{wire}{how}" for wire in names() for how in ("", ", then finished")]


@pytest.mark.parametrize("turn", [*TURNS, *CHAT])
@pytest.mark.parametrize("how", ["assemble", "Assembler"])
def test_a_kept_error_keeps_no_turn(turn: str, how: str) -> None:
    wire, finished = turn.removesuffix(", then finished"), turn.endswith(", then finished")
    events = CHAT[turn]() if turn in CHAT else cut(wire, finished)
    kept: list[Exception] = []
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            if how == "assemble":
                reactivex.from_iterable(events).pipe(rt.assemble()).subscribe(on_error=kept.append)
            else:
                assembler = rt.Assembler()
                try:
                    for event in events:
                        assembler.feed(event)
                    assembler.close()
                except rt.ToolCallStreamError as error:
                    kept.append(error)
                del assembler
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(kept) == 5
    assert all(isinstance(error, rt.ToolCallStreamError) for error in kept)
    # No parser's error chained either: it holds the whole text it read. (reactivex's
    # from_iterable completes inside its StopIteration handler: that one is the context.)
    assert all(e.__cause__ is None for e in kept)
    assert all(e.__context__ is None or type(e.__context__) is StopIteration for e in kept)
    # Five failed turns of 1 MB each or more: what is left is well under one of them.
    assert held < 500_000, f"{held:,} bytes held by 5 kept errors"


def test_a_progress_event_kept_still_reads_its_text_after_the_turn_failed() -> None:
    entry = {"index": 0, "id": "c", "type": "function", "function": {"name": "f"}}
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"arguments": '{"path": "/ho'}}]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    seen: list[Any] = []
    reactivex.from_iterable(chunks).pipe(rt.lifecycle(every=1)).subscribe(seen.append, seen.append)
    assert isinstance(seen[-1], rt.TruncatedToolCallError)
    progress = [e for e in seen if isinstance(e, rt.ToolCallProgress)]
    assert progress[-1].partial_arguments() == '{"path": "/ho'


def test_an_assembler_whose_turn_failed_holds_no_call() -> None:
    assembler = rt.Assembler()
    for chunk in chat_length():
        assembler.feed(chunk)
    assert len(assembler.calls()) == 1
    with pytest.raises(rt.TruncatedToolCallError):
        assembler.close()
    assert assembler.calls() == []
    with pytest.raises(RuntimeError):
        assembler.close()
