"""The agent loop, lifecycle events, transcripts, and combining with other event sources."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.scheduler import VirtualTimeScheduler
from reactivex.subject import Subject
from reactivex.testing import ReactiveTest, TestScheduler

import rxtoolcalls as rt
from rxtoolcalls.transcript import CANCELLED, find_unanswered, repair_transcript
from tests.helpers import Script, answer, args, call_open, collect, content, finish, tool_turn

USER = [{"role": "user", "content": "hi"}]


def run_loop(
    script: Script, tools: dict[str, Any], **kwargs: Any
) -> tuple[list[Any], list[Exception]]:
    values, errors, _ = collect(rt.agent_loop(script, tools, USER, **kwargs))
    return values, errors


def test_sync_async_and_observable_tools_answer_in_call_order() -> None:
    async def slow(x: int) -> int:
        await asyncio.sleep(0.02)
        return x * 10

    tools = {
        "sync": lambda x: x + 1,
        "async": slow,
        "rx": lambda x: reactivex.of(x, x * 2),  # the last value is the result
    }
    script = Script(
        tool_turn(("a", "async", '{"x": 1}'), ("b", "sync", '{"x": 1}'), ("c", "rx", '{"x": 2}')),
        answer(),
    )

    async def main() -> list[Any]:
        events: list[Any] = await rt.agent_loop(script, tools, USER).pipe(ops.to_list())
        return events

    events = asyncio.run(main())
    conversation = events[-1]
    tool_messages = [m for m in conversation.messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("a", "10"),
        ("b", "2"),
        ("c", "4"),
    ]
    assert conversation.turns == 2
    assert script.seen[1][1]["tool_calls"][0]["id"] == "a"


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        ({}, "LookupError: unknown tool 'f'"),
        ({"f": lambda x: 1 / 0}, "ZeroDivisionError: division by zero"),
    ],
    ids=["unknown", "raises"],
)
def test_tool_failures_become_messages(tools: dict[str, Any], expected: str) -> None:
    values, errors = run_loop(Script(tool_turn(("a", "f", '{"x": 1}')), answer()), tools)
    assert errors == []
    finished = [v for v in values if isinstance(v, rt.ToolCallFinished)]
    assert finished[0].content == expected
    assert finished[0].error is not None
    assert values[-1].messages[2]["content"] == expected


def test_tool_failures_can_be_errors() -> None:
    values, errors = run_loop(
        Script(tool_turn(("a", "f", '{"x": 1}')), answer()),
        {"f": lambda x: 1 / 0},
        tool_errors="raise",
    )
    assert isinstance(errors[0], rt.ToolExecutionError)
    assert isinstance(errors[0].__cause__, ZeroDivisionError)
    assert not any(isinstance(v, rt.Conversation) for v in values)


def test_schema_declared_by_the_tool() -> None:
    def f(city: str) -> str:
        return city

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    f.parameters = schema  # type: ignore[attr-defined]
    values, _ = run_loop(Script(tool_turn(("a", "f", '{"town": "x"}')), answer()), {"f": f})
    finished = [v for v in values if isinstance(v, rt.ToolCallFinished)]
    assert "schema" in finished[0].content


def test_turn_limit_is_an_error_not_a_loop() -> None:
    script = Script(
        tool_turn(("a", "f", "{}")), tool_turn(("b", "f", "{}")), tool_turn(("c", "f", "{}"))
    )
    _, errors = run_loop(script, {"f": lambda: "ok"}, max_turns=2)
    assert isinstance(errors[0], rt.TurnLimitError)
    assert len(script.seen) == 2


def test_retries_are_bounded() -> None:
    broken = reactivex.from_iterable([call_open(0, "a", "f", "{")]).pipe(
        ops.concat(reactivex.throw(ConnectionError("reset")))
    )
    scheduler = VirtualTimeScheduler()
    script = Script(broken)
    observable = rt.agent_loop(
        script, {"f": lambda: 1}, USER, retries=2, backoff=1.0, scheduler=scheduler
    )
    values: list[Any] = []
    errors: list[Exception] = []
    observable.subscribe(values.append, errors.append)
    scheduler.start()
    assert [v.attempt for v in values if isinstance(v, rt.TurnRetried)] == [1, 2]
    assert isinstance(errors[0], rt.StreamInterruptedError)
    assert isinstance(errors[0].__cause__, ConnectionError)
    assert len(script.seen) == 3
    assert scheduler.clock == 3.0  # backoff 1 s then 2 s


def test_invalid_model_output_is_not_retried() -> None:
    script = Script(tool_turn(("a", "f", '{"x": 1}}')))
    _, errors = run_loop(script, {"f": lambda x: x})
    assert isinstance(errors[0], rt.InvalidArgumentsError)
    assert len(script.seen) == 1


def test_dispose_cancels_the_running_tool() -> None:
    state: dict[str, Any] = {}
    started = asyncio.Event()

    async def forever() -> str:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        return "never"

    async def main() -> None:
        disposable = rt.agent_loop(
            Script(tool_turn(("a", "wait", "{}"))), {"wait": forever}, USER
        ).subscribe()
        await asyncio.wait_for(started.wait(), 5)
        disposable.dispose()
        await asyncio.sleep(0.05)

    asyncio.run(main())
    assert state == {"cancelled": True}


def test_dispose_cancels_the_stream_in_flight() -> None:
    scheduler = TestScheduler()
    stream = scheduler.create_cold_observable(
        ReactiveTest.on_next(10, call_open(0, "a", "f", "{")),
        ReactiveTest.on_next(500, args(0, "}")),
        ReactiveTest.on_completed(600),
    )
    scheduler.start(lambda: rt.agent_loop(Script(stream), {"f": lambda: 1}, USER), disposed=300)
    assert stream.subscriptions == [ReactiveTest.subscribe(200, 300)]


# -- combining with other event sources ---------------------------------------------------


def test_user_abort_with_take_until() -> None:
    scheduler = TestScheduler()
    stream = scheduler.create_cold_observable(
        ReactiveTest.on_next(10, call_open(0, "a", "f", "{")),
        ReactiveTest.on_next(500, args(0, "}")),
        ReactiveTest.on_next(510, finish()),
        ReactiveTest.on_completed(520),
    )
    abort: Subject[None] = Subject()
    scheduler.schedule_absolute(250, lambda *_: abort.on_next(None))
    res = scheduler.start(lambda: stream.pipe(rt.assemble(), ops.take_until(abort)))
    notes: list[Any] = [m.value for m in res.messages]
    assert [n.kind for n in notes] == ["C"]
    assert res.messages[0].time == 250
    assert stream.subscriptions == [ReactiveTest.subscribe(200, 250)]


def test_timeout_with_a_typed_error() -> None:
    scheduler = TestScheduler()
    stalled = scheduler.create_cold_observable(
        ReactiveTest.on_next(10, call_open(0, "a", "f", "{"))
    )
    res = scheduler.start(
        lambda: stalled.pipe(
            rt.assemble(),
            ops.timeout(
                100, other=reactivex.throw(rt.StreamInterruptedError("stalled for 100 ticks"))
            ),
        )
    )
    note: Any = res.messages[0].value
    assert note.kind == "E"
    assert isinstance(note.exception, rt.StreamInterruptedError)


def test_race_two_models_first_turn_wins() -> None:
    scheduler = TestScheduler()
    fast = scheduler.create_cold_observable(
        ReactiveTest.on_next(10, content("fast")),
        ReactiveTest.on_next(20, finish("stop")),
        ReactiveTest.on_completed(30),
    )
    slow = scheduler.create_cold_observable(
        ReactiveTest.on_next(50, content("slow")),
        ReactiveTest.on_next(60, finish("stop")),
        ReactiveTest.on_completed(70),
    )
    res = scheduler.start(lambda: reactivex.amb(slow.pipe(rt.assemble()), fast.pipe(rt.assemble())))
    first: Any = res.messages[0].value
    assert first.value.content == "fast"
    assert slow.subscriptions == [ReactiveTest.subscribe(200, 230)]


def test_merge_progress_of_several_conversations() -> None:
    def conversation(name: str, tool: str) -> reactivex.Observable[Any]:
        chunks = [call_open(0, f"{name}-1", tool, "{}"), finish("tool_calls")]

        def label(event: rt.ToolCallStarted) -> tuple[str, str]:
            return (name, event.name)

        return reactivex.from_iterable(chunks).pipe(rt.progress(), ops.map(label))

    merged = reactivex.merge(conversation("alice", "search"), conversation("bob", "calc"))
    assert sorted(merged.pipe(ops.to_list()).run()) == [("alice", "search"), ("bob", "calc")]


# -- lifecycle ------------------------------------------------------------------------------


def test_lifecycle_started_progress_committed() -> None:
    chunks = [call_open(0, "a", "f", "")] + [args(0, c) for c in '{"k": "abcdef"}'] + [finish()]
    events = reactivex.from_iterable(chunks).pipe(rt.lifecycle(every=5), ops.to_list()).run()
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "ToolCallStarted",
        "ToolCallProgress",
        "ToolCallProgress",
        "ToolCallProgress",
        "ToolCallCommitted",
    ]
    progress = events[1]
    assert isinstance(progress, rt.ToolCallProgress)
    assert (progress.fragments, progress.characters) == (5, 5)
    assert progress.partial_arguments() == '{"k":'  # a snapshot, like characters
    assert "partial" not in repr(progress)
    committed = events[-1]
    assert isinstance(committed, rt.ToolCallCommitted)
    assert committed.call.parsed_arguments == {"k": "abcdef"}


def test_lifecycle_commits_nothing_when_the_turn_fails() -> None:
    chunks = [call_open(0, "a", "f", '{"k": '), finish("length")]
    values, errors, _ = collect(reactivex.from_iterable(chunks).pipe(rt.lifecycle()))
    assert [type(v).__name__ for v in values] == ["ToolCallStarted"]
    assert isinstance(errors[0], rt.TruncatedToolCallError)


# -- transcript -----------------------------------------------------------------------------


def assistant(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ],
    }


def tool(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def test_exchange_is_one_value() -> None:
    turn = rt.Assembler()
    for chunk in tool_turn(("a", "f", "{}"), ("b", "g", "{}")):
        turn.feed(chunk)
    messages = turn.close().exchange({"b": 2, "a": "one"})
    assert [m["role"] for m in messages] == ["assistant", "tool", "tool"]
    assert [m.get("tool_call_id") for m in messages[1:]] == ["a", "b"]
    assert find_unanswered(USER + messages) == []


def test_repair_drops_or_cancels_dangling_calls() -> None:
    broken = [*USER, assistant("a", "b"), tool("a"), {"role": "user", "content": "again"}]
    assert find_unanswered(broken) == [(1, ["b"])]
    assert repair_transcript(broken) == [USER[0], {"role": "user", "content": "again"}]
    cancelled = repair_transcript(broken, "cancel")
    assert [m.get("content") for m in cancelled[2:4]] == ["ok", CANCELLED]
    assert find_unanswered(cancelled) == []
    valid = [*USER, assistant("a"), tool("a")]
    assert repair_transcript(valid) == valid
    orphan = [*USER, tool("zzz")]
    assert repair_transcript(orphan) == USER
    with pytest.raises(ValueError, match="mode"):
        repair_transcript(valid, "fix")  # type: ignore[arg-type]


def test_sync_tools_then_a_timed_stream_for_the_next_turn() -> None:
    scheduler = TestScheduler()

    def timed(chunks: list[dict[str, Any]]) -> reactivex.Observable[Any]:
        notes = [ReactiveTest.on_next(10 * (i + 1), c) for i, c in enumerate(chunks)]
        return scheduler.create_cold_observable(
            *notes, ReactiveTest.on_completed(10 * (len(chunks) + 1))
        )

    script = Script(timed(tool_turn(("a", "f", "{}"))), timed(answer("All done.")))
    res = scheduler.start(lambda: rt.agent_loop(script, {"f": lambda: "ok"}, USER))
    notes: list[Any] = [m.value for m in res.messages]
    assert isinstance(notes[-2].value, rt.Conversation)
    assert notes[-2].value.final.content == "All done."
    assert notes[-1].kind == "C"
