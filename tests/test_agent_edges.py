"""The agent loop's failure paths: retry under asyncio, what open_stream returns, dispose,
exactly-once dispatch, async tools, the subscriber's own exceptions, async sources."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex import abc
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler, ThreadPoolScheduler, VirtualTimeScheduler

import rxtoolcalls as rt
from rxtoolcalls.agent import final_conversation
from rxtoolcalls.serve import ReplayServer
from rxtoolcalls.sources import from_async_iterable
from tests.helpers import Script, answer, call_open, content, extra, open_sockets, tool_turn

openai = pytest.importorskip("openai", reason=extra("openai"))

USER = [{"role": "user", "content": "pay the bill"}]


class Counter:
    """A tool that counts its runs by call."""

    def __init__(self, result: object = "paid") -> None:
        self.runs = 0
        self.result = result
        self.lock = threading.Lock()

    def __call__(self, **_: Any) -> object:
        with self.lock:
            self.runs += 1
        return self.result


class Outcome(abc.ObserverBase[Any]):
    """Every notification of one subscription, and an Event set on the terminal one."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.errors: list[Exception] = []
        self.completed = 0
        self.ended = threading.Event()

    def on_next(self, value: Any) -> None:
        self.values.append(value)

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.ended.set()

    def on_completed(self) -> None:
        self.completed += 1
        self.ended.set()

    @property
    def terminals(self) -> int:
        return len(self.errors) + self.completed


# -- 1, 2: retry under asyncio, and what open_stream returns ------------------------------------


def test_async_retry_with_the_coroutine_of_async_openai() -> None:
    # Turn 1 is cut after two chunks; the retry, the next turn and the tool all run on the
    # asyncio loop, with no extra argument.
    pay = tool_turn(("call_pay_1", "pay", '{"amount": 3}'))
    with ReplayServer([pay, pay, answer()], cut={0: 1}) as server:

        async def main() -> list[Any]:
            client = openai.AsyncOpenAI(api_key="x", base_url=server.base_url, max_retries=0)

            def open_stream(messages: list[dict[str, Any]]) -> Any:
                return client.chat.completions.create(model="m", messages=messages, stream=True)

            events = rt.agent_loop(open_stream, {"pay": Counter()}, USER, backoff=0.01)
            collected: list[Any] = await asyncio.wait_for(events.pipe(ops.to_list()), 20)
            await client.close()
            return collected

        events = asyncio.run(main())
        assert len(server.requests) == 3
    retried = [e for e in events if isinstance(e, rt.TurnRetried)]
    assert [(e.turn, e.attempt) for e in retried] == [(1, 1)]
    assert isinstance(retried[0].error, rt.StreamInterruptedError)
    conversation = events[-1]
    assert isinstance(conversation, rt.Conversation)
    assert [m["role"] for m in conversation.messages] == ["user", "assistant", "tool", "assistant"]


def test_async_stream_and_async_open_stream() -> None:
    pay = tool_turn(("call_pay_1", "pay", '{"amount": 3}'))
    with ReplayServer([pay, answer()]) as server:

        async def main() -> rt.Conversation:
            client = openai.AsyncOpenAI(api_key="x", base_url=server.base_url, max_retries=0)

            async def open_stream(messages: list[dict[str, Any]]) -> Any:
                return await client.chat.completions.create(
                    model="m", messages=messages, stream=True
                )

            events = rt.agent_loop(open_stream, {"pay": Counter()}, USER)
            conversation = await asyncio.wait_for(events.pipe(final_conversation()), 20)
            await client.close()
            return conversation

        conversation = asyncio.run(main())
    assert conversation.turns == 2


def test_sync_stream_with_run() -> None:
    pay = tool_turn(("call_pay_1", "pay", '{"amount": 3}'))
    tool = Counter()
    with ReplayServer([pay, answer()]) as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)

        def open_stream(messages: list[dict[str, Any]]) -> Any:
            return client.chat.completions.create(model="m", messages=messages, stream=True)

        conversation = (
            rt.agent_loop(open_stream, {"pay": tool}, USER).pipe(final_conversation()).run()
        )
        client.close()
    assert conversation.turns == 2
    assert tool.runs == 1


@pytest.mark.parametrize(
    "returned",
    [None, 42, "data: {}", {"choices": []}],
    ids=["none", "int", "str", "dict"],
)
def test_unusable_return_is_a_type_error_at_once(returned: object) -> None:
    calls = []

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        calls.append(messages)
        return returned

    outcome = Outcome()
    rt.agent_loop(open_stream, {}, USER, backoff=0).subscribe(outcome)
    assert outcome.ended.wait(5)
    assert len(calls) == 1
    assert not any(isinstance(v, rt.TurnRetried) for v in outcome.values)
    assert isinstance(outcome.errors[0], TypeError)
    assert "open_stream returned" in str(outcome.errors[0])


@pytest.mark.parametrize(
    "raised",
    [TypeError("bad call"), AttributeError("no attribute"), ValueError("invalid literal")],
    ids=["type", "attribute", "unknown"],
)
def test_bugs_and_unknown_errors_in_open_stream_arrive_as_raised(raised: Exception) -> None:
    calls = 0

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        nonlocal calls
        calls += 1
        raise raised

    outcome = Outcome()
    rt.agent_loop(open_stream, {}, USER, backoff=0).subscribe(outcome)
    assert calls == 1
    assert outcome.errors == [raised]  # as raised, not a StreamInterruptedError


def test_a_network_error_in_open_stream_is_retried() -> None:
    attempts = 0

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionRefusedError("refused")
        return reactivex.from_iterable(answer())

    outcome = Outcome()
    rt.agent_loop(open_stream, {}, USER, backoff=0).subscribe(outcome)
    assert attempts == 2
    assert outcome.completed == 1
    assert isinstance(outcome.values[0], rt.TurnRetried)


def test_a_coroutine_without_a_running_loop_is_a_type_error_and_no_warning() -> None:
    async def create() -> Any:
        raise AssertionError("never awaited")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outcome = Outcome()
        rt.agent_loop(lambda _: create(), {}, USER).subscribe(outcome)
        import gc

        gc.collect()
    assert isinstance(outcome.errors[0], TypeError)
    assert "asyncio" in str(outcome.errors[0])


# -- 3: dispose stops everything; subscribe(scheduler=...) --------------------------------------


def slow_pay_server() -> ReplayServer:
    pay = [content("Paying. "), *tool_turn(("call_pay_1", "pay", '{"amount": 3}'))]
    return ReplayServer([pay, answer()], delay=0.15)


def test_dispose_mid_turn_with_subscribe_on_a_pool_runs_no_tool_and_sends_nothing() -> None:
    tool = Counter()
    pool = ThreadPoolScheduler(2)
    with slow_pay_server() as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)

        def open_stream(messages: list[dict[str, Any]]) -> Any:
            return client.chat.completions.create(model="m", messages=messages, stream=True)

        outcome = Outcome()
        subscription = (
            rt.agent_loop(open_stream, {"pay": tool}, USER).pipe(ops.subscribe_on(pool))
        ).subscribe(outcome)
        deadline = time.monotonic() + 5
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # inside turn 1: its chunks arrive every 0.15 s
        subscription.dispose()
        time.sleep(1.0)  # the rest of turn 1 would have arrived by now
        requests = len(server.requests)
        client.close()
    pool.executor.shutdown(wait=True)
    assert requests == 1
    assert tool.runs == 0
    assert outcome.terminals == 0


def test_subscribe_with_a_scheduler_returns_at_once() -> None:
    tool = Counter()
    with slow_pay_server() as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)

        def open_stream(messages: list[dict[str, Any]]) -> Any:
            return client.chat.completions.create(model="m", messages=messages, stream=True)

        outcome = Outcome()
        rt.agent_loop(open_stream, {"pay": tool}, USER).subscribe(
            outcome, scheduler=NewThreadScheduler()
        )
        returned_before_the_end = not outcome.ended.is_set()
        assert outcome.ended.wait(20)
        client.close()
    assert returned_before_the_end
    assert outcome.completed == 1
    assert tool.runs == 1


# -- 4: exactly once, across retries too --------------------------------------------------------


def test_retrying_the_whole_loop_runs_each_call_once() -> None:
    pay = Counter()
    seen: list[list[dict[str, Any]]] = []

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        seen.append(messages)
        if messages[-1]["role"] == "user":  # turn 1, each time the loop starts over
            return reactivex.from_iterable(tool_turn(("call_pay_1", "pay", "{}")))
        return reactivex.from_iterable([call_open(0, "call_x", "pay", "{")]).pipe(
            ops.concat(reactivex.throw(ConnectionError("reset")))
        )

    outcome = Outcome()
    rt.agent_loop(open_stream, {"pay": pay}, USER, retries=0).pipe(ops.retry(3)).subscribe(outcome)
    assert len(seen) == 6  # three subscriptions, two requests each
    assert pay.runs == 1
    reused = [v for v in outcome.values if isinstance(v, rt.ToolCallFinished) and v.reused]
    assert [v.call.id for v in reused] == ["call_pay_1", "call_pay_1"]
    assert isinstance(outcome.errors[0], rt.StreamInterruptedError)


def test_a_ledger_outlives_the_loop() -> None:
    pay = Counter()
    ledger: rt.Ledger = {}
    for _ in range(2):
        script = Script(tool_turn(("call_pay_1", "pay", "{}")), answer())
        conversation = (
            rt.agent_loop(script, {"pay": pay}, USER, ledger=ledger)
            .pipe(final_conversation())
            .run()
        )
        assert conversation.messages[2]["content"] == "paid"
    assert pay.runs == 1
    assert list(ledger.values()) == ["paid"]
    assert json.loads(next(iter(ledger)))[:3] == ["call_pay_1", 1, "pay"]


def test_a_call_started_but_never_answered_is_not_run_again() -> None:
    ledger: rt.Ledger = {}
    pay = Counter()

    def lost(**_: Any) -> str:
        pay.runs += 1
        raise ConnectionError("the payment service hung up: did it pay?")

    first = Outcome()
    script = Script(tool_turn(("call_pay_1", "pay", "{}")), answer())
    rt.agent_loop(script, {"pay": lost}, USER, ledger=ledger, tool_errors="raise").subscribe(first)
    assert isinstance(first.errors[0], rt.ToolExecutionError)
    assert list(ledger.values()) == [None]  # started; its result is unknown
    script = Script(tool_turn(("call_pay_1", "pay", "{}")), answer())
    conversation = (
        rt.agent_loop(script, {"pay": lost}, USER, ledger=ledger).pipe(final_conversation()).run()
    )
    assert pay.runs == 1
    assert "not run again" in conversation.messages[2]["content"]


def test_the_same_id_in_a_later_turn_is_a_new_call() -> None:
    # TGI numbers calls "0", "1"… in every turn: an id alone does not identify a call.
    seen: list[str] = []

    def weather(location: str) -> str:
        seen.append(location)
        return f"sunny in {location}"

    script = Script(
        tool_turn(("0", "weather", '{"location": "Brooklyn"}')),
        tool_turn(("0", "weather", '{"location": "Paris"}')),
        answer(),
    )
    conversation = (
        rt.agent_loop(script, {"weather": weather}, USER).pipe(final_conversation()).run()
    )
    assert seen == ["Brooklyn", "Paris"]
    answers = [m["content"] for m in conversation.messages if m["role"] == "tool"]
    assert answers == ["sunny in Brooklyn", "sunny in Paris"]


def test_calls_answered_in_the_given_messages_last_turn_are_not_dispatched() -> None:
    # The messages stop in a turn: one call answered, one not. Only the other one runs, and
    # the first request already holds its answer.
    earlier: list[dict[str, Any]] = [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "pay", "arguments": "{}"}}
                for call_id in ("call_pay_1", "call_pay_2")
            ],
        },
        {"role": "tool", "tool_call_id": "call_pay_1", "content": "paid earlier"},
    ]
    pay = Counter()
    script = Script(answer())
    events = rt.agent_loop(script, {"pay": pay}, earlier).pipe(ops.to_list()).run()
    assert pay.runs == 1
    finished = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert [(f.content, f.reused) for f in finished] == [("paid earlier", True), ("paid", False)]
    assert script.seen[0] == [
        *earlier,
        {"role": "tool", "tool_call_id": "call_pay_2", "content": "paid"},
    ]


def test_two_calls_sharing_an_id_are_a_typed_error() -> None:
    pay = Counter()
    script = Script(tool_turn(("same", "pay", "{}"), ("same", "pay", "{}")), answer())
    outcome = Outcome()
    rt.agent_loop(script, {"pay": pay}, USER).subscribe(outcome)
    assert isinstance(outcome.errors[0], rt.MalformedChunkError)
    assert pay.runs == 0
    assert len(script.seen) == 1  # model output: not retried


def test_lenient_renames_a_shared_id() -> None:
    pay = Counter()
    script = Script(tool_turn(("same", "pay", "{}"), ("same", "pay", "{}")), answer())
    conversation = (
        rt.agent_loop(script, {"pay": pay}, USER, policy=rt.LENIENT)
        .pipe(final_conversation())
        .run()
    )
    ids = [m["tool_call_id"] for m in conversation.messages if m["role"] == "tool"]
    assert ids == ["same", "same_1"]
    assert pay.runs == 2


# -- 5: async tools and run() -------------------------------------------------------------------


def test_async_tool_with_a_synchronous_run() -> None:
    async def pay(amount: int) -> str:
        await asyncio.sleep(0.01)
        return f"paid {amount}"

    script = Script(tool_turn(("call_pay_1", "pay", '{"amount": 3}')), answer())
    result: list[rt.Conversation] = []

    def run() -> None:
        result.append(rt.agent_loop(script, {"pay": pay}, USER).pipe(final_conversation()).run())

    worker = threading.Thread(target=run, daemon=True)  # a hang fails the test, not the suite
    worker.start()
    worker.join(10)
    assert result, "run() did not return"
    assert result[0].messages[2]["content"] == "paid 3"


# -- 6: the subscriber's own exceptions ---------------------------------------------------------


class Boom(Exception):
    pass


@pytest.mark.parametrize(
    "kind",
    [rt.ToolCallStarted, rt.TurnFinished, rt.ToolCallFinished, rt.Conversation],
    ids=lambda kind: kind.__name__,
)
def test_a_raising_on_next_ends_the_loop_once_with_that_exception(kind: type) -> None:
    pay = Counter()
    script = Script(tool_turn(("call_pay_1", "pay", "{}")), answer())
    raised = Boom("the subscriber's own bug")
    outcome = Outcome()

    def on_next(event: Any) -> None:
        outcome.on_next(event)
        if isinstance(event, kind):
            raise raised

    rt.agent_loop(script, {"pay": pay}, USER, backoff=0).subscribe(
        on_next, outcome.on_error, outcome.on_completed
    )
    assert outcome.errors == [raised]
    assert outcome.completed == 0
    assert not any(isinstance(v, rt.TurnRetried) for v in outcome.values)
    assert sum(isinstance(v, kind) for v in outcome.values) == 1  # nothing after it
    expected_requests = 2 if kind is rt.Conversation else 1
    assert len(script.seen) == expected_requests
    assert pay.runs == (0 if kind in (rt.ToolCallStarted, rt.TurnFinished) else 1)


# -- 10, 14: what reaches a tool message --------------------------------------------------------


def test_non_finite_results_are_json_in_the_tool_message() -> None:
    script = Script(tool_turn(("a", "f", "{}")), answer())
    tools = {"f": lambda: {"ratio": float("nan"), "top": float("inf"), "ok": 1.5}}
    conversation = rt.agent_loop(script, tools, USER).pipe(final_conversation()).run()
    assert conversation.messages[2]["content"] == '{"ratio": null, "top": null, "ok": 1.5}'


def test_schema_errors_do_not_echo_the_argument_values() -> None:
    def f(amount: int) -> str:
        return "paid"

    f.parameters = {  # type: ignore[attr-defined]
        "type": "object",
        "properties": {"amount": {"type": "integer"}},
    }
    script = Script(tool_turn(("a", "f", '{"amount": "sk-LIVE-0123456789"}')), answer())
    conversation = rt.agent_loop(script, {"f": f}, USER).pipe(final_conversation()).run()
    message = conversation.messages[2]["content"]
    assert "schema" in message
    assert "$.amount" in message
    assert "sk-LIVE" not in message


# -- 7: from_async_iterable reports the factory's and aclose()'s errors --------------------------


def test_a_raising_factory_is_reported() -> None:
    def factory() -> AsyncIterator[int]:
        raise Boom("cannot open")

    async def main() -> Exception:
        with pytest.raises(Boom) as caught:
            await asyncio.wait_for(from_async_iterable(factory).pipe(ops.to_list()), 5)
        return caught.value

    assert str(asyncio.run(main())) == "cannot open"


def test_an_aclose_error_after_completion_is_reported() -> None:
    class Stream:
        def __init__(self) -> None:
            self.items = iter([1, 2])

        def __aiter__(self) -> Stream:
            return self

        async def __anext__(self) -> int:
            try:
                return next(self.items)
            except StopIteration:
                raise StopAsyncIteration from None

        async def aclose(self) -> None:
            raise Boom("close failed")

    async def main() -> tuple[list[int], list[Exception]]:
        values: list[int] = []
        errors: list[Exception] = []
        done = asyncio.Event()

        def on_error(error: Exception) -> None:
            errors.append(error)
            done.set()

        from_async_iterable(Stream).subscribe(values.append, on_error, done.set)
        await asyncio.wait_for(done.wait(), 5)
        return values, errors

    values, errors = asyncio.run(main())
    assert values == [1, 2]
    assert [str(e) for e in errors] == ["close failed"]


# -- the fuzz: cuts, raising tools and callbacks, dispose at random moments -----------------------


def _fuzz_case(seed: int) -> None:
    import random

    rng = random.Random(seed)
    scheduler = VirtualTimeScheduler()
    ledger: rt.Ledger = {}
    runs: dict[tuple[int, str], int] = {}  # by (turn, call id): what the ledger keys on

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        if rng.random() < 0.1:
            raise ConnectionResetError("refused")
        call_id = f"call_{rng.randrange(4)}"  # ids repeat across turns: the ledger decides
        chunks = tool_turn((call_id, "t", "{}")) if rng.random() < 0.6 else answer("fine")
        if rng.random() < 0.25:
            cut = rng.randrange(len(chunks))
            return reactivex.from_iterable(chunks[:cut]).pipe(
                ops.delay(0.1, scheduler=scheduler),
                ops.concat(reactivex.throw(ConnectionError("cut"))),
            )
        if rng.random() < 0.1:
            return reactivex.never()  # a stall: only dispose ends it
        return reactivex.from_iterable(chunks).pipe(ops.delay(0.1, scheduler=scheduler))

    def t(**_: Any) -> str:
        call = current_call[0]
        runs[call] = runs.get(call, 0) + 1
        if rng.random() < 0.2:
            raise Boom("tool failed")
        return "ok"

    current_call: list[tuple[int, str]] = [(0, "")]

    def on_next(event: Any) -> None:
        if isinstance(event, rt.TurnFinished) and event.assistant.tool_calls:
            current_call[0] = (event.turn, event.assistant.tool_calls[0].id)
        if rng.random() < 0.03:
            raise Boom("callback failed")

    observable = rt.agent_loop(
        open_stream, {"t": t}, USER, scheduler=scheduler, ledger=ledger, backoff=0.5, max_turns=4
    )
    for _ in range(3):  # resubscriptions share the ledger
        outcome = Outcome()
        disposed_open: list[bool] = []
        subscription = observable.subscribe(on_next, outcome.on_error, outcome.on_completed)

        def dispose(
            *_: Any, s: Any = subscription, o: Outcome = outcome, d: list[bool] = disposed_open
        ) -> None:
            d.append(o.terminals == 0)
            s.dispose()

        scheduler.schedule_relative(rng.uniform(0, 3), dispose)
        scheduler.start()
        # Exactly one terminal notification, or none because the dispose came first.
        assert outcome.terminals == 1 or (outcome.terminals == 0 and disposed_open == [True])
    assert all(count == 1 for count in runs.values()), runs


@pytest.mark.parametrize("seed", range(200))
def test_fuzz_one_ending_and_each_call_at_most_once(seed: int) -> None:
    _fuzz_case(seed)


def _sockets() -> frozenset[str]:
    """Open sockets of this process (the server's and the clients')."""
    if not Path("/proc/self/fd").exists():
        pytest.skip("counting sockets needs /proc")
    return open_sockets()


def _threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive()}


def test_dispose_at_random_moments_leaves_no_thread() -> None:
    import random

    rng = random.Random(7)
    pay = [content("x"), *tool_turn(("call_1", "pay", "{}"))]
    with ReplayServer([pay, answer()], delay=0.02) as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)

        def open_stream(messages: list[dict[str, Any]]) -> Any:
            return client.chat.completions.create(model="m", messages=messages, stream=True)

        ledger: rt.Ledger = {}
        tool = Counter()
        before = _threads()
        sockets_before = _sockets()
        for _ in range(12):
            outcome = Outcome()
            subscription = rt.agent_loop(open_stream, {"pay": tool}, USER, ledger=ledger).subscribe(
                outcome, scheduler=NewThreadScheduler()
            )
            time.sleep(rng.uniform(0, 0.2))
            subscription.dispose()
            assert outcome.terminals <= 1
        client.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            # The server's own handler threads are named "Thread-N (process_request_thread)".
            left = {
                t.name
                for t in _threads() - before
                if "process_request" not in t.name and t is not threading.current_thread()
            }
            sockets = _sockets() - sockets_before
            if not left and not sockets:
                break
            time.sleep(0.05)
    assert tool.runs <= 1
    assert left == set()
    assert sockets == frozenset()  # every connection a loop opened is closed again


@pytest.mark.parametrize("how", ["new-thread", "subscribe-on-pool"])
def test_disposing_the_loop_closes_a_stalled_connection(how: str) -> None:
    from tests.test_cancel import BOUND, StallingServer, new_threads

    before = set(threading.enumerate())
    pool = ThreadPoolScheduler(2)
    with StallingServer() as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)

        def open_stream(messages: list[dict[str, Any]]) -> Any:
            return client.chat.completions.create(model="m", messages=messages, stream=True)

        outcome = Outcome()
        loop = rt.agent_loop(open_stream, {}, USER)
        if how == "new-thread":
            subscription = loop.subscribe(outcome, scheduler=NewThreadScheduler())
        else:
            subscription = loop.pipe(ops.subscribe_on(pool)).subscribe(outcome)
        assert server.sent.wait(BOUND)
        time.sleep(0.2)  # the reader is blocked in recv on a silent server
        subscription.dispose()
        assert server.closed.wait(BOUND), "the server never saw the connection close"
        client.close()
    pool.executor.shutdown(wait=False)
    assert new_threads(before) == []
    assert outcome.terminals == 0


# -- where each step runs: asyncio from any thread, immediate schedulers, pools ------------------


def in_a_thread(main: Any, seconds: float = 15) -> Any:
    """Run ``main()`` on a daemon thread: a hang fails the test instead of the suite."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(main()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert result, "it never returned"
    return result[0]


def test_an_awaited_loop_over_a_sync_sdk_stream_ends() -> None:
    # The sync stream is read on a thread of its own; every step still runs on the loop.
    pay = tool_turn(("call_pay_1", "pay", "{}"))
    with ReplayServer([pay, answer()]) as server:
        client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)

        def open_stream(messages: list[dict[str, Any]]) -> Any:
            return client.chat.completions.create(model="m", messages=messages, stream=True)

        async def main() -> rt.Conversation:
            events = rt.agent_loop(open_stream, {"pay": Counter()}, USER)
            return await events.pipe(final_conversation())

        conversation = in_a_thread(lambda: asyncio.run(main()))
        client.close()
    assert conversation.turns == 2


@pytest.mark.parametrize("where", ["source-on-a-pool", "tool-on-a-pool", "scheduler-a-pool"])
def test_an_awaited_loop_with_work_on_a_pool_ends(where: str) -> None:
    pool = ThreadPoolScheduler(2)
    script = Script(tool_turn(("call_pay_1", "pay", "{}")), answer())

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        source = script(messages)
        return source.pipe(ops.subscribe_on(pool)) if where == "source-on-a-pool" else source

    def pay() -> Any:
        if where == "tool-on-a-pool":
            return reactivex.of("paid").pipe(ops.subscribe_on(pool))
        return "paid"

    async def main() -> rt.Conversation:
        chosen = pool if where == "scheduler-a-pool" else None
        events = rt.agent_loop(open_stream, {"pay": pay}, USER, scheduler=chosen)
        return await events.pipe(final_conversation())

    try:
        conversation = in_a_thread(lambda: asyncio.run(main()))
    finally:
        pool.executor.shutdown(wait=True)
    assert conversation.messages[2]["content"] == "paid"


def test_an_immediate_scheduler_with_a_timed_source() -> None:
    from reactivex.scheduler import ImmediateScheduler, TimeoutScheduler

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        return reactivex.from_iterable(answer()).pipe(
            ops.delay(0.01, scheduler=TimeoutScheduler.singleton())
        )

    outcome = Outcome()
    rt.agent_loop(open_stream, {}, USER, scheduler=ImmediateScheduler()).subscribe(outcome)
    assert outcome.ended.wait(10)
    assert outcome.completed == 1


def test_subscribe_on_a_pool_runs_a_turns_tools_concurrently() -> None:
    both = threading.Barrier(2, timeout=5)  # broken unless the two calls run at once

    def meet(**_: Any) -> str:
        both.wait()
        return "met"

    script = Script(tool_turn(("a", "meet", "{}"), ("b", "meet", "{}")), answer())
    outcome = Outcome()
    pool = ThreadPoolScheduler(2)
    rt.agent_loop(script, {"meet": meet}, USER).pipe(ops.subscribe_on(pool)).subscribe(outcome)
    assert outcome.ended.wait(10)
    pool.executor.shutdown(wait=True)
    finished = [v.content for v in outcome.values if isinstance(v, rt.ToolCallFinished)]
    assert finished == ["met", "met"]


def test_one_ledger_two_subscriptions_at_once_run_a_call_once() -> None:
    ledger: rt.Ledger = {}
    pay = Counter()
    ready = threading.Barrier(2, timeout=5)

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            ready.wait()  # both turns end together, before either tool starts
            return reactivex.from_iterable(tool_turn(("call_pay_1", "pay", "{}")))
        return reactivex.from_iterable(answer())

    outcomes = [Outcome(), Outcome()]
    loop = rt.agent_loop(open_stream, {"pay": pay}, USER, ledger=ledger)
    for outcome in outcomes:
        loop.subscribe(outcome, scheduler=NewThreadScheduler())
    assert all(o.ended.wait(10) for o in outcomes)
    assert pay.runs == 1
    finished = [v for o in outcomes for v in o.values if isinstance(v, rt.ToolCallFinished)]
    ran = [f for f in finished if not f.reused and f.error is None]
    assert [f.content for f in ran] == ["paid"]
    (other,) = (f for f in finished if f is not ran[0])
    # The other subscription finds the answer recorded, or, claiming the call while the tool
    # still runs, is told that it was not run again.
    assert other.reused or "it was not run again" in str(other.error)


def test_run_inside_a_running_loop_with_an_async_tool() -> None:
    # What a notebook cell does: a blocking run() on the loop's own thread.
    async def pay() -> str:
        await asyncio.sleep(0)
        return "paid"

    async def cell() -> rt.Conversation:
        script = Script(tool_turn(("call_pay_1", "pay", "{}")), answer())
        return rt.agent_loop(script, {"pay": pay}, USER).pipe(final_conversation()).run()

    conversation = in_a_thread(lambda: asyncio.run(cell()))
    assert conversation.messages[2]["content"] == "paid"


def test_dispose_cancels_an_async_tool_that_runs_on_a_loop_of_its_own() -> None:
    log: list[str] = []
    started = threading.Event()

    async def slow() -> str:
        log.append("started")
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            log.append("cancelled")
            raise
        return "never"

    script = Script(tool_turn(("call_1", "slow", "{}")), answer())
    subscription = rt.agent_loop(script, {"slow": slow}, USER).subscribe(
        scheduler=NewThreadScheduler()
    )
    assert started.wait(5)
    subscription.dispose()
    deadline = time.monotonic() + 5
    while "cancelled" not in log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log == ["started", "cancelled"]


# -- how a failed request is typed --------------------------------------------------------------


class StatusServer:
    """Answers each POST with the next (status, JSON body) of a script, then 200 SSE turns."""

    def __init__(self, *answers: tuple[int, dict[str, Any]]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.answers = list(answers)
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests += 1
                if server.answers:
                    status, body = server.answers.pop(0)
                    data = json.dumps(body).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                events = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in answer())
                events += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(events)))
                self.end_headers()
                self.wfile.write(events)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> StatusServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def sdk_loop(server: StatusServer) -> Outcome:
    client = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        return client.chat.completions.create(model="m", messages=messages, stream=True)

    outcome = Outcome()
    rt.agent_loop(open_stream, {}, USER, backoff=0).subscribe(outcome)
    client.close()
    return outcome


def test_http_400_is_a_provider_error_that_is_not_retried() -> None:
    bad = {"error": {"message": "bad model", "type": "invalid_request_error"}}
    with StatusServer((400, bad)) as server:
        outcome = sdk_loop(server)
    error = outcome.errors[0]
    assert isinstance(error, rt.ProviderError)
    assert (error.code, error.retryable) == (400, False)
    assert "retry" not in (error.hint or "")
    assert server.requests == 1


def test_http_429_is_retried() -> None:
    with StatusServer(
        (429, {"error": {"message": "slow down", "type": "rate_limit_error"}})
    ) as server:
        outcome = sdk_loop(server)
    assert outcome.completed == 1
    retried = [v for v in outcome.values if isinstance(v, rt.TurnRetried)]
    assert isinstance(retried[0].error, rt.ProviderError)
    assert retried[0].error.code == 429
    assert server.requests == 2


def test_a_whole_completion_is_a_type_error() -> None:
    completion = openai.types.chat.ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "hi"},
                }
            ],
        }
    )
    outcome = Outcome()
    rt.agent_loop(lambda _: completion, {}, USER).subscribe(outcome)
    assert isinstance(outcome.errors[0], TypeError)
    assert "stream=True" in str(outcome.errors[0])


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"max_turns": float("nan")}, TypeError),
        ({"max_turns": 0}, ValueError),
        ({"retries": "2"}, TypeError),
        ({"retries": -1}, ValueError),
        ({"backoff": float("nan")}, ValueError),
        ({"backoff": float("inf")}, ValueError),
        ({"backoff": -1}, ValueError),
    ],
)
def test_bad_numbers_are_refused_at_the_call(arguments: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        rt.agent_loop(Script(answer()), {}, USER, **arguments)


def test_a_raising_on_completed_under_asyncio_reaches_the_loop_s_handler() -> None:
    seen: list[BaseException] = []

    def on_completed() -> None:
        raise Boom("from on_completed")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _, context: seen.append(context["exception"])
        )
        rt.agent_loop(Script(answer()), {}, USER).subscribe(on_completed=on_completed)
        for _ in range(20):
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert [str(e) for e in seen] == ["from on_completed"]


# -- from a second review -----------------------------------------------------------------------


def test_a_tool_that_lets_out_its_own_cancellation_fails_and_the_loop_goes_on() -> None:
    async def pay() -> str:
        inner = asyncio.ensure_future(asyncio.sleep(10))
        asyncio.get_running_loop().call_soon(inner.cancel)  # someone else cancels it
        await inner
        return "never"

    script = Script(tool_turn(("call_pay_1", "pay", "{}")), answer())
    conversation = in_a_thread(
        lambda: rt.agent_loop(script, {"pay": pay}, USER).pipe(final_conversation()).run()
    )
    assert "cancelled" in conversation.messages[2]["content"]


def test_run_inside_a_running_loop_refuses_an_async_stream_at_once() -> None:
    async def chunks() -> Any:
        for chunk in answer():
            yield chunk

    async def cell() -> Exception:
        with pytest.raises(TypeError) as caught:
            rt.agent_loop(lambda _: chunks(), {}, USER).run()
        return caught.value

    error = in_a_thread(lambda: asyncio.run(cell()))
    assert "asyncio" in str(error)


@pytest.mark.parametrize(
    ("raised", "retried"),
    [
        (FileNotFoundError(2, "No such file or directory"), False),
        (PermissionError(13, "Permission denied"), False),
        (ConnectionResetError(104, "reset"), True),
        (TimeoutError("timed out"), True),
    ],
    ids=["missing-file", "permission", "reset", "timeout"],
)
def test_only_network_os_errors_are_retried(raised: Exception, retried: bool) -> None:
    calls = 0

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        nonlocal calls
        calls += 1
        raise raised

    outcome = Outcome()
    rt.agent_loop(open_stream, {}, USER, retries=1, backoff=0).subscribe(outcome)
    assert calls == (2 if retried else 1)
    if not retried:
        assert outcome.errors == [raised]


def test_an_http_status_error_of_another_client_is_a_provider_error() -> None:
    import urllib.error

    refused = urllib.error.HTTPError("http://127.0.0.1/v1", 400, "Bad Request", None, None)  # type: ignore[arg-type]

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        raise refused

    outcome = Outcome()
    rt.agent_loop(open_stream, {}, USER, backoff=0).subscribe(outcome)
    error = outcome.errors[0]
    assert isinstance(error, rt.ProviderError)
    assert (error.code, error.retryable) == (400, False)


def test_ledger_keys_never_collide_across_fields() -> None:
    ledger: rt.Ledger = {}
    ran: list[str] = []

    def tool(name: str) -> Any:
        def run(**_: Any) -> str:
            ran.append(name)
            return name

        return run

    long = "mcp__server__" + "x" * 80
    script = Script(tool_turn(("0", long + "__create", "{}")), answer())
    rt.agent_loop(script, {long + "__create": tool("create")}, USER, ledger=ledger).run()
    script = Script(tool_turn(("0", long + "__delete", "{}")), answer())
    rt.agent_loop(script, {long + "__delete": tool("delete")}, USER, ledger=ledger).run()
    assert ran == ["create", "delete"]


def test_dispose_after_the_asyncio_loop_closed_returns() -> None:
    async def stalled() -> Any:
        await asyncio.sleep(10)
        yield {}

    async def main() -> Any:
        subscription = rt.agent_loop(lambda _: stalled(), {}, USER).subscribe()
        await asyncio.sleep(0.05)
        return subscription

    subscription = asyncio.run(main())
    subscription.dispose()  # the loop is gone: nothing to cancel, and no error
