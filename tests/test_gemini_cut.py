"""Gemini: a call cut off mid-stream is never a call, however the cut stream is then closed.

Every recording and built case is cut after every event and closed the ways the wire closes
a turn: a finish alone, an empty ``functionCall {}`` with or before the finish, or a new named
call. The outcome is one typed error, or a turn whose calls are the uncut turn's calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from tests.helpers import Script
from tests.wire_builders import (
    G_CLOSE,
    g_arg,
    g_call,
    g_open,
    g_response,
    g_stop,
    g_text,
    load_wire,
    rx_turn,
    turn_of,
    wire_fixture_names,
)

Event = dict[str, Any]

BUILT: dict[str, list[Event]] = {
    "string in pieces": [
        g_response(g_open("write")),
        g_response(g_arg("$.text", "Once upon", more=True)),
        g_response(g_arg("$.text", " a time", more=True)),
        g_response(g_arg("$.text", "")),
        g_response(G_CLOSE),
        g_stop(),
    ],
    "two calls, nested values": [
        g_response(g_text("Checking.")),
        g_response(g_open("plan")),
        g_response(g_arg("$.trip.city", "Os", more=True)),
        g_response(g_arg("$.trip.city", "lo", more=True)),
        g_response(g_arg("$.trip.city", "")),
        g_response(g_arg("$.trip.days", 3)),
        g_response(g_arg("$.tags[0]", "north", more=True)),
        g_response(g_arg("$.tags[0]", "")),
        g_response(G_CLOSE),
        g_response(g_open("book")),
        g_response(g_arg("$.ok", True)),
        g_response(G_CLOSE),
        g_stop(),
    ],
    "a string ended by its last piece": [
        g_response(g_open("note")),
        g_response(g_arg("$.body", "a", more=True)),
        g_response(g_arg("$.body", "b")),
        g_response(G_CLOSE, finish="STOP"),
    ],
}

CASES = [("recording", name) for name in wire_fixture_names("gemini")] + [
    ("built", name) for name in BUILT
]

CLOSERS: dict[str, list[Event]] = {
    "finish": [g_stop()],
    "close with the finish": [g_response(G_CLOSE, finish="STOP")],
    "close then finish": [g_response(G_CLOSE), g_stop()],
    "new call": [g_response(g_call("closer")), g_stop()],
}


def events_of(kind: str, name: str) -> list[Event]:
    return load_wire("gemini", name) if kind == "recording" else BUILT[name]


def open_string_at(events: list[Event]) -> bool:
    """Whether a string value is still being written after ``events`` (a plain model)."""
    growing: set[str] = set()
    for event in events:
        for candidate in event.get("candidates") or ():
            for part in (candidate.get("content") or {}).get("parts") or ():
                call = part.get("functionCall")
                if call is None:
                    continue
                if call.get("name") is not None:
                    growing.clear()
                for entry in call.get("partialArgs") or ():
                    if "stringValue" not in entry:
                        continue
                    if entry.get("willContinue") is True:
                        growing.add(entry["jsonPath"])
                    else:
                        growing.discard(entry["jsonPath"])
    return bool(growing)


def outcome(run: Callable[..., rt.AssistantTurn], events: list[Event], **kwargs: Any) -> Any:
    try:
        return run(events, **kwargs)
    except rt.ToolCallStreamError as error:
        return error


def named(turn: rt.AssistantTurn) -> list[tuple[str, Any]]:
    return [(c.name, c.parsed_arguments) for c in turn.tool_calls if c.name != "closer"]


@pytest.mark.parametrize(("kind", "name"), CASES)
@pytest.mark.parametrize("policy", [rt.DEFAULT, rt.LENIENT], ids=["default", "lenient"])
def test_a_cut_stream_gives_an_error_or_the_uncut_calls(
    kind: str, name: str, policy: rt.Policy
) -> None:
    events = events_of(kind, name)
    whole = named(turn_of(events))
    assert whole, "every case streams at least one call"
    for cut in range(len(events)):
        head = events[:cut]
        inside = open_string_at(head)
        for closer_name, closer in CLOSERS.items():
            got = outcome(turn_of, head + closer, policy=policy)
            where = f"cut after {cut} events, then {closer_name}"
            if inside:
                assert isinstance(got, rt.TruncatedToolCallError), where
                continue
            if isinstance(got, rt.ToolCallStreamError):
                continue
            calls = named(got)
            if closer_name == "finish" and policy is rt.DEFAULT:
                # Nothing but the finish closed what was open: only whole calls may come out.
                assert calls == whole[: len(calls)], where
            else:
                # An explicit close may end a call early, but never mid-value: every value
                # the turn holds is one the uncut turn holds too.
                for (got_name, got_args), (want_name, want_args) in zip(calls, whole, strict=False):
                    assert got_name == want_name, where
                    assert within(got_args, want_args), where


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


REPRO = [
    g_response(g_open("delete_path")),
    g_response(g_arg("$.path", "/home/user/project", more=True)),
    g_stop(),
]


@pytest.mark.parametrize(
    "ending",
    [
        [g_stop()],
        [g_response(G_CLOSE), g_stop()],
        [g_response(G_CLOSE, finish="STOP")],
        [g_response(g_call("other")), g_stop()],
        [g_response(g_open("other")), g_response(G_CLOSE), g_stop()],
    ],
    ids=["stop", "close-then-stop", "close-with-stop", "new-call", "new-streamed-call"],
)
@pytest.mark.parametrize("run", [turn_of, rx_turn], ids=["assembler", "assemble"])
@pytest.mark.parametrize("policy", [rt.DEFAULT, rt.LENIENT], ids=["default", "lenient"])
def test_a_string_still_being_written_is_a_truncated_call(
    ending: list[Event], run: Callable[..., rt.AssistantTurn], policy: rt.Policy
) -> None:
    with pytest.raises(rt.TruncatedToolCallError) as caught:
        run(REPRO[:2] + ending, policy=policy)
    assert caught.value.name == "delete_path"
    assert "/home/user/project" not in str(caught.value)


def test_the_agent_loop_never_runs_a_call_whose_string_was_cut() -> None:
    ran: list[Any] = []

    def delete_path(path: str) -> str:
        ran.append(path)
        return "deleted"

    loop = rt.agent_loop(
        Script(REPRO),
        {"delete_path": delete_path},
        [{"role": "user", "parts": [{"text": "clean up"}]}],
        retries=1,
        backoff=0.0,
    )
    errors: list[Exception] = []
    loop.pipe(ops.to_list()).subscribe(on_error=errors.append)
    assert ran == []
    assert len(errors) == 1
    assert isinstance(errors[0], rt.TruncatedToolCallError)


def test_a_streamed_call_the_stream_never_closed_is_cut_unless_lenient() -> None:
    # Only the finish closes the last call: its values may be all there were, or the first few.
    events = [
        g_response(g_open("f")),
        g_response(g_arg("$.q", "abc", more=True)),
        g_response(g_arg("$.q", "")),
        g_stop(),
    ]
    for run in (turn_of, rx_turn):
        with pytest.raises(rt.TruncatedToolCallError):
            run(events)
        turn = run(events, policy=rt.LENIENT)
        assert named(turn) == [("f", {"q": "abc"})]
        assert turn.normalizations["implicitly_closed_call"] == 1
