"""``agent_loop(early=...)``: safe tools start before their turn ends, atomic still, on every wire.

Streams are gated where an order matters: a stream waits (bounded) for the tool to start
before it goes on, so no test depends on timing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.wires import names
from tests.helpers import settle
from tests.test_agent_wires import events_of, failure_of, prose, said
from tests.test_early import readiness
from tests.wire_builders import case, pieces

CALLS = (
    ("call_s", "search", pieces('{"q": "oslo"}')),
    ("call_f", "fetch", pieces('{"url": "https://a.test/"}')),
)
WAIT = 10.0  # the bound on a gate: reached only when the rule under test is broken


def asking(wire: str) -> list[Any]:
    return case(wire).turn(["Looking."], CALLS)


def cut_after_first(wire: str) -> list[Any]:
    """The turn cut right after the event that completes its first call: no end."""
    events = case(wire).turn(["Looking."], CALLS, end=False)
    at, call = readiness(events, {"search", "fetch"})[0]
    assert call.name == "search"
    return events[: at + 1]


class Gated:
    """open_stream of scripted turns; turn ``n``'s last ``hold`` events wait for ``gates[n]``."""

    def __init__(self, *turns: list[Any], gates: dict[int, Any], hold: int = 1) -> None:
        self.turns = list(turns)
        self.gates = gates
        self.hold = hold
        self.seen: list[list[dict[str, Any]]] = []
        self.ceilings: list[int | None] = []
        self.opened: dict[int, bool] = {}

    def __call__(self, messages: list[dict[str, Any]], max_tokens: int | None = None) -> Any:
        self.seen.append(list(messages))
        self.ceilings.append(max_tokens)
        number = len(self.seen) - 1
        return self._stream(number, self.turns[min(number, len(self.turns) - 1)])

    def _stream(self, number: int, events: list[Any]) -> Iterator[Any]:
        gate = self.gates.get(number)
        for at, event in enumerate(events):
            if gate is not None and at == len(events) - self.hold:
                self.opened[number] = gate.wait(WAIT)
            yield event
        if gate is not None and not self.hold:
            self.opened[number] = gate.wait(WAIT)


def plain(events: Sequence[Any], reuse: bool = True) -> list[Any]:
    """The events without what ``early`` adds: they must match the run without it.

    An error is its type and text (an exception compares by identity). ``reuse=False``
    leaves out whether an answer was reused (an early one is, after a cut).
    """
    kept: list[Any] = []
    for event in events:
        if isinstance(event, rt.ToolCallEarly | rt.ToolCallRetracted):
            continue
        if isinstance(event, rt.ToolCallFinished):
            error = None if event.error is None else (type(event.error), str(event.error))
            reused = event.reused if reuse else None
            kept.append(("finished", event.call, event.content, error, reused))
        elif isinstance(event, rt.TurnRetried):
            error = (type(event.error), str(event.error))
            kept.append(("retried", event.turn, event.attempt, error, event.max_tokens))
        else:
            kept.append(event)
    return kept


class Until:
    """A gate that opens once ``done()`` holds (polled)."""

    def __init__(self, done: Callable[[], bool]) -> None:
        self.done = done

    def wait(self, bound: float) -> bool:
        return settle(self.done, bound)


class Tool:
    """A sync tool that says when it started and can be held until released."""

    def __init__(self, result: str = "found", hold: bool = False) -> None:
        self.result = result
        self.started = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.hold = hold
        self.runs: list[dict[str, Any]] = []

    def __call__(self, **arguments: Any) -> str:
        self.runs.append(arguments)
        self.started.set()
        if self.hold:
            self.release.wait(WAIT)
        self.finished.set()
        return self.result


# -- the same conversation ------------------------------------------------------------------


@pytest.mark.parametrize("wire", names())
def test_every_wire_starts_the_early_tool_before_the_turn_ends_with_the_same_transcript(
    wire: str,
) -> None:
    runs = []
    for early in (None, {"search"}):
        search, fetch = Tool("3 hits"), Tool("<html>")
        gate = search.started if early else threading.Event()
        gate.set() if not early else None
        script = Gated(asking(wire), prose(wire), gates={0: gate})
        loop = rt.agent_loop(script, {"search": search, "fetch": fetch}, said(wire), early=early)
        runs.append((events_of(loop), script))
    (without, plain_script), (with_early, early_script) = runs
    assert early_script.opened == {0: True}  # search started before the turn's last event
    assert plain(with_early) == plain(without)
    assert early_script.seen == plain_script.seen
    [started] = [e for e in with_early if isinstance(e, rt.ToolCallEarly)]
    assert (started.turn, started.call.name, started.reused) == (1, "search", False)
    finished = [e for e in with_early if isinstance(e, rt.ToolCallFinished)]
    assert [(f.call.name, f.early) for f in finished] == [("search", True), ("fetch", False)]
    # Nothing held reaches the subscriber before the turn is complete.
    order = [type(e).__name__ for e in with_early]
    assert order.index("ToolCallEarly") < order.index("TurnFinished")
    assert order.index("TurnFinished") < order.index("ToolCallFinished")


@pytest.mark.parametrize("wire", names())
def test_a_tool_not_named_early_starts_only_after_the_turn_finished(wire: str) -> None:
    log: list[str] = []

    def search(q: str) -> str:
        log.append("search ran")
        return "hits"

    def fetch(url: str) -> str:
        log.append("fetch ran")
        return "page"

    loop = rt.agent_loop(
        Gated(asking(wire), prose(wire), gates={}),
        {"search": search, "fetch": fetch},
        said(wire),
        early={"search"},
        scheduler=None,
    )
    events = loop.pipe(ops.do_action(lambda e: log.append(type(e).__name__)), ops.to_list()).run()
    assert log.index("TurnFinished") < log.index("fetch ran")
    assert [e.call.name for e in events if isinstance(e, rt.ToolCallEarly)] == ["search"]


# -- a failed turn: retracted, reused, never run twice -------------------------------------


@pytest.mark.parametrize("wire", names())
def test_every_wire_retracts_an_early_answer_on_a_cut_and_reuses_it_on_the_retry(
    wire: str,
) -> None:
    search, fetch = Tool("3 hits"), Tool("<html>")
    ledger: dict[str, str | None] = {}
    # The cut stream ends only once search has answered: its answer is in the ledger.
    answered = Until(lambda: "3 hits" in ledger.values())
    script = Gated(cut_after_first(wire), asking(wire), prose(wire), gates={0: answered}, hold=0)
    events = events_of(
        rt.agent_loop(
            script,
            {"search": search, "fetch": fetch},
            said(wire),
            early={"search"},
            backoff=0,
            ledger=ledger,
        )
    )
    assert script.opened == {0: True}
    kinds = [type(e).__name__ for e in events]
    retracted = [e for e in events if isinstance(e, rt.ToolCallRetracted)]
    assert [(r.turn, r.call.name, r.cancelled) for r in retracted] == [(1, "search", False)]
    assert isinstance(retracted[0].error, rt.StreamInterruptedError)
    assert kinds.index("ToolCallRetracted") < kinds.index("TurnRetried")
    # The retried turn repeats the call: its answer is reused, the tool ran once.
    assert len(search.runs) == len(fetch.runs) == 1
    reused = [e for e in events if isinstance(e, rt.ToolCallEarly)]
    assert [e.reused for e in reused] == [False, True]
    finished = {e.call.name: e for e in events if isinstance(e, rt.ToolCallFinished)}
    assert (finished["search"].reused, finished["search"].content) == (True, "3 hits")
    # The transcript holds the retried turn only, as a run that never failed gives.
    clean = events_of(
        rt.agent_loop(
            Gated(asking(wire), prose(wire), gates={}),
            {"search": Tool("3 hits"), "fetch": Tool("<html>")},
            said(wire),
        )
    )
    assert events[-1].messages == clean[-1].messages


def run_to_end(loop: Any) -> tuple[list[Any], Exception | None]:
    """The events and the error of a loop run with ``run()`` (a scheduler with threads)."""
    notes = loop.pipe(ops.materialize(), ops.to_list()).run()
    events = [n.value for n in notes if n.kind == "N"]
    errors = [n.exception for n in notes if n.kind == "E"]
    return events, errors[0] if errors else None


def test_a_tool_still_running_when_the_turn_fails_is_cancelled_and_its_result_dropped() -> None:
    search = Tool("late", hold=True)
    script = Gated(cut_after_first("chat"), gates={0: search.started}, hold=0)
    ledger: dict[str, str | None] = {}
    loop = rt.agent_loop(
        script,
        {"search": search, "fetch": Tool()},
        said("chat"),
        early={"search"},
        retries=0,
        ledger=ledger,
    )
    seen, error = run_to_end(loop)
    assert script.opened == {0: True}
    [retracted] = [e for e in seen if isinstance(e, rt.ToolCallRetracted)]
    assert retracted.cancelled
    assert isinstance(retracted.error, rt.StreamInterruptedError)
    assert isinstance(error, rt.StreamInterruptedError)
    assert isinstance(seen[-1], rt.ToolCallRetracted)  # then the error, nothing else
    # The abandoned tool finishes later: nothing of it is kept.
    search.release.set()
    assert search.finished.wait(WAIT)
    assert ledger == {}  # its claim was let go: a later run of the loop may run it


class Hanging:
    """An ``async`` tool that waits until it is cancelled (make it on the loop that runs it)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, **_: Any) -> str:
        self.started.set()
        try:
            await asyncio.sleep(WAIT)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return "never"


def test_an_async_early_tool_sees_cancelled_error_when_the_turn_fails() -> None:
    async def main() -> list[Any]:
        search = Hanging()

        async def stream(messages: list[Any]) -> Any:
            for event in cut_after_first("chat"):
                yield event
            await asyncio.wait_for(search.started.wait(), WAIT)

        seen: list[Any] = []
        with pytest.raises(rt.StreamInterruptedError):
            await rt.agent_loop(
                stream,
                {"search": search, "fetch": Tool()},
                said("chat"),
                early={"search"},
                retries=0,
            ).pipe(ops.do_action(seen.append), ops.to_list())
        await asyncio.wait_for(search.cancelled.wait(), WAIT)
        return seen

    seen = asyncio.run(main())
    [retracted] = [e for e in seen if isinstance(e, rt.ToolCallRetracted)]
    assert retracted.cancelled


def test_dispose_during_an_early_tool_cancels_it_and_sends_no_request() -> None:
    script_calls: list[int] = []

    async def main() -> None:
        search = Hanging()

        async def stream(messages: list[Any]) -> Any:
            script_calls.append(1)
            for event in cut_after_first("chat"):
                yield event
            await asyncio.sleep(WAIT)  # the rest of the turn never comes

        seen: list[Any] = []
        subscription = rt.agent_loop(
            stream, {"search": search, "fetch": Tool()}, said("chat"), early={"search"}
        ).subscribe(seen.append)
        await asyncio.wait_for(search.started.wait(), WAIT)
        subscription.dispose()
        await asyncio.wait_for(search.cancelled.wait(), WAIT)
        assert [type(e).__name__ for e in seen][-1] == "ToolCallEarly"

    asyncio.run(main())
    assert script_calls == [1]


def test_an_early_tool_error_under_raise_comes_only_once_the_turn_committed() -> None:
    def search(q: str) -> str:
        raise RuntimeError("index offline")

    fetch = Tool()
    seen: list[Any] = []
    loop = rt.agent_loop(
        Gated(asking("chat"), prose("chat"), gates={}),
        {"search": search, "fetch": fetch},
        said("chat"),
        early={"search"},
        tool_errors="raise",
    ).pipe(ops.do_action(seen.append))
    error = failure_of(loop)
    assert isinstance(error, rt.ToolExecutionError)
    assert isinstance(seen[-1], rt.TurnFinished)


def test_a_call_changed_after_it_started_is_retracted_and_run_as_committed() -> None:
    from tests.wire_builders import r_call, r_completed, r_created, r_fc_item

    started = r_call(0, "call_s", "search", '{"q": "oslo"}')
    # Under final_arguments_win the item's arguments replace what .done said.
    changed = r_fc_item(0, "call_s", "search", '{"q": "bergen"}')
    turn = [
        r_created(),
        *started[:-1],
        {"type": "response.output_item.done", "output_index": 0, "item": changed},
        r_completed([changed]),
    ]
    search = Tool("hits")
    events = events_of(
        rt.agent_loop(
            Gated(turn, prose("responses"), gates={0: search.finished}, hold=2),
            {"search": search},
            said("responses"),
            early={"search"},
            policy="lenient",
        )
    )
    [retracted] = [e for e in events if isinstance(e, rt.ToolCallRetracted)]
    assert retracted.reason == "its arguments changed after it started"
    assert search.runs == [{"q": "oslo"}, {"q": "bergen"}]
    [finished] = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert (finished.call.parsed_arguments, finished.early) == ({"q": "bergen"}, False)


# -- truncation recovery --------------------------------------------------------------------


def truncated(wire: str) -> list[Any]:
    return [*case(wire).cut(["Looking."], "call_s", "search", "q", "osl"), *case(wire).ceiling]


@pytest.mark.parametrize("wire", names())
def test_every_wire_streams_a_truncated_turn_again_with_a_doubled_ceiling(wire: str) -> None:
    search, fetch = Tool("3 hits"), Tool("<html>")
    script = Gated(truncated(wire), truncated(wire), asking(wire), prose(wire), gates={})
    events = events_of(
        rt.agent_loop(
            script,
            {"search": search, "fetch": fetch},
            said(wire),
            max_tokens=100,
            max_tokens_limit=400,
            early={"search"},
        )
    )
    assert script.ceilings == [100, 200, 400, 100]  # each turn starts from max_tokens
    retried = [e for e in events if isinstance(e, rt.TurnRetried)]
    assert [(r.turn, r.attempt, r.max_tokens) for r in retried] == [(1, 1, 200), (1, 2, 400)]
    assert all(isinstance(r.error, rt.TruncatedToolCallError) for r in retried)
    assert len(search.runs) == len(fetch.runs) == 1
    clean = Gated(asking(wire), prose(wire), gates={})
    tools = {"search": Tool("3 hits"), "fetch": Tool("<html>")}
    events_of(rt.agent_loop(clean, tools, said(wire)))
    assert script.seen[-1] == clean.seen[-1]  # only the final turn is in the transcript


@pytest.mark.parametrize("wire", names())
def test_every_wire_delivers_the_truncation_past_the_limit(wire: str) -> None:
    script = Gated(truncated(wire), gates={})
    loop = rt.agent_loop(
        script, {"search": Tool()}, said(wire), max_tokens=100, max_tokens_limit=250
    )
    error = failure_of(loop)
    assert isinstance(error, rt.TruncatedToolCallError)
    assert script.ceilings == [100, 200, 250]


def test_without_a_limit_a_truncated_turn_fails_as_before_and_the_ceiling_still_goes_out() -> None:
    script = Gated(truncated("chat"), gates={})
    error = failure_of(rt.agent_loop(script, {"search": Tool()}, said("chat"), max_tokens=64))
    assert isinstance(error, rt.TruncatedToolCallError)
    assert script.ceilings == [64]


def test_an_early_tool_of_a_truncated_turn_is_retracted() -> None:
    search = Tool("3 hits")
    ledger: dict[str, str | None] = {}
    cut = [*cut_after_first("chat"), *case("chat").ceiling]
    answered = Until(lambda: "3 hits" in ledger.values())
    script = Gated(cut, asking("chat"), prose("chat"), gates={0: answered}, hold=1)
    events = events_of(
        rt.agent_loop(
            script,
            {"search": search, "fetch": Tool()},
            said("chat"),
            early={"search"},
            max_tokens=10,
            max_tokens_limit=20,
            ledger=ledger,
        )
    )
    [retracted] = [e for e in events if isinstance(e, rt.ToolCallRetracted)]
    assert isinstance(retracted.error, rt.TruncatedToolCallError)
    retried = [e for e in events if isinstance(e, rt.TurnRetried)]
    assert [r.max_tokens for r in retried] == [20]
    assert len(search.runs) == 1  # the same call on the retry: its answer reused


# -- misuse, at the call --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "kind", "says"),
    [
        ({"early": "search"}, TypeError, "collection of tool names"),
        ({"early": {1}}, TypeError, "tool names"),
        ({"early": {"nope"}}, ValueError, "not in tools: nope"),
        ({"max_tokens_limit": 10}, ValueError, "needs max_tokens"),
        ({"max_tokens": 10, "max_tokens_limit": 5}, ValueError, "at least max_tokens"),
        ({"early": [["search"]]}, TypeError, "tool names"),
        ({"early": {"search": 1}}, TypeError, "collection of tool names"),
        ({"max_tokens": 0}, ValueError, "at least 1"),
        ({"max_tokens": True}, TypeError, "an int or None"),
        ({"max_tokens": "100"}, TypeError, "an int or None"),
        ({"max_tokens": 10, "max_tokens_limit": 20.0}, TypeError, "an int or None"),
    ],
)
def test_misuse_is_refused_at_the_call(kwargs: dict[str, Any], kind: type, says: str) -> None:
    with pytest.raises(kind, match=says):
        rt.agent_loop(Gated(gates={}), {"search": Tool()}, said("chat"), **kwargs)


def test_an_open_stream_without_the_keyword_is_refused_when_a_ceiling_is_given() -> None:
    def open_stream(messages: list[Any]) -> Any:
        return []

    with pytest.raises(TypeError, match=r"max_tokens=\.\.\."):
        rt.agent_loop(open_stream, {}, said("chat"), max_tokens=100)
    rt.agent_loop(open_stream, {}, said("chat"))  # as it always was


# -- the property: early on and off give equal conversations ------------------------------

ARGS = st.dictionaries(st.sampled_from("abc"), st.integers(-5, 5) | st.text("xy é", max_size=4))


@settings(max_examples=60, deadline=None)
@given(
    wire=st.sampled_from(names()),
    arguments=st.lists(ARGS, min_size=1, max_size=3),
    split=st.integers(1, 4),
    early=st.sets(st.sampled_from(["t0", "t1", "t2"])),
    cut=st.booleans(),
)
def test_early_on_and_off_give_equal_conversations(
    wire: str, arguments: list[dict[str, Any]], split: int, early: set[str], cut: bool
) -> None:
    import json

    calls = [
        (f"call_{n}", f"t{n}", pieces(json.dumps(value), split))
        for n, value in enumerate(arguments)
    ]
    whole = case(wire).turn(["Hm."], calls)
    first = case(wire).turn(["Hm."], calls, end=False)[:-1] if cut else whole
    outcomes = []
    runs: list[dict[str, int]] = []
    for chosen in (None, early):
        counts: dict[str, int] = {}

        def tool(name: str, counts: dict[str, int] = counts) -> Callable[..., str]:
            def run(**kwargs: Any) -> str:
                counts[name] = counts.get(name, 0) + 1
                return f"{name}:{sorted(kwargs.items())}"

            return run

        tools = {f"t{n}": tool(f"t{n}") for n in range(3)}
        script = Gated(first, whole, prose(wire), gates={})
        events = events_of(rt.agent_loop(script, tools, said(wire), early=chosen, backoff=0))
        outcomes.append((plain(events, reuse=False), script.seen))
        runs.append(counts)
        started = [e.call.name for e in events if isinstance(e, rt.ToolCallEarly)]
        named = [f"t{n}" for n in range(len(arguments)) if f"t{n}" in (chosen or ())]
        if not cut:  # two whole turns, each calling every tool: each early one starts early
            assert sorted(started) == sorted(named * 2)
    assert outcomes[0] == outcomes[1]
    plain_runs, early_runs = runs
    for name, count in plain_runs.items():
        # As often with early as without; after a cut, an early tool the cut abandoned mid-run
        # may run once more (it left no answer to reuse).
        assert early_runs[name] - count in ((0, 1) if cut and name in early else (0,))


def test_an_early_tool_that_failed_under_raise_runs_again_on_the_retried_turn() -> None:
    tries: list[str] = []

    def search(q: str) -> str:
        tries.append(q)
        if len(tries) == 1:
            raise RuntimeError("index offline")
        return "3 hits"

    failed = Until(lambda: len(tries) == 1)
    script = Gated(
        cut_after_first("chat"), asking("chat"), prose("chat"), gates={0: failed}, hold=0
    )
    events = events_of(
        rt.agent_loop(
            script,
            {"search": search, "fetch": Tool()},
            said("chat"),
            early={"search"},
            tool_errors="raise",
            backoff=0,
        )
    )
    # No answer was recorded for the failed run: its claim was let go, and the retry ran it.
    assert tries == ["oslo", "oslo"]
    finished = {e.call.name: e for e in events if isinstance(e, rt.ToolCallFinished)}
    assert (finished["search"].content, finished["search"].reused) == ("3 hits", False)


@pytest.mark.parametrize(
    ("tools", "says"),
    [(None, "tools must be a mapping"), ({"search": 3}, "'search' does not")],
)
def test_tools_that_are_no_mapping_of_callables_are_a_type_error_at_the_call(
    tools: Any, says: str
) -> None:
    for early in (None, {"search"}):
        with pytest.raises(TypeError, match=says):
            rt.agent_loop(Gated(gates={}), tools, said("chat"), early=early)


# -- what the review found: a reused answer is the answer itself ---------------------------


def cut_and_retried(wire: str, early: set[str] | None, search: Callable[..., Any]) -> Any:
    """A conversation whose first stream is cut once search is done, then retried."""
    ledger: dict[str, str | None] = {}
    answered = Until(lambda: any(v is not None for v in ledger.values()))
    gate: Any = answered if early else threading.Event()
    if not early:
        gate.set()
    script = Gated(cut_after_first(wire), asking(wire), prose(wire), gates={0: gate}, hold=0)
    loop = rt.agent_loop(
        script,
        {"search": search, "fetch": Tool("<html>")},
        said(wire),
        early=early,
        backoff=0,
        ledger=ledger,
    )
    return events_of(loop)[-1], script


@pytest.mark.parametrize("wire", names())
@pytest.mark.parametrize("outcome", ["a mapping", "an error"])
def test_a_reused_early_answer_goes_back_as_the_tool_gave_it(wire: str, outcome: str) -> None:
    def search(q: str) -> dict[str, int]:
        if outcome == "an error":
            raise RuntimeError("index offline")
        return {"hits": 3}

    plain_run, _ = cut_and_retried(wire, None, search)
    early_run, script = cut_and_retried(wire, {"search"}, search)
    assert script.opened == {0: True}
    # The result's shape (a Gemini response object, a Bedrock json block) and the error's
    # marks (is_error, status) are the ones a run without early sends.
    assert early_run.messages == plain_run.messages


def test_two_calls_sharing_an_index_each_get_their_own_early_answer() -> None:
    from tests.helpers import call_open, finish

    turn = [
        call_open(0, "a", "search", '{"q": "zero"}'),
        call_open(0, "b", "search", '{"q": "one"}'),
        finish("tool_calls"),
    ]
    conversations = []
    for early in (None, {"search"}):

        def search(q: str) -> str:
            return f"hits for {q}"

        loop = rt.agent_loop(
            Gated(turn, prose("chat"), gates={}),
            {"search": search},
            said("chat"),
            early=early,
            policy="lenient",
        )
        conversations.append(events_of(loop)[-1])
    assert conversations[1].messages == conversations[0].messages
    answers = [m["content"] for m in conversations[1].messages if m["role"] == "tool"]
    assert answers == ["hits for zero", "hits for one"]


def test_whitespace_after_a_chat_call_started_early_does_not_run_it_again() -> None:
    from tests.helpers import args, call_open, finish

    search = Tool("3 hits")
    turn = [
        call_open(0, "a", "search", '{"q": "oslo"}'),
        call_open(1, "b", "fetch", '{"url": "x"}'),
        args(0, " "),
        finish("tool_calls"),
    ]
    events = events_of(
        rt.agent_loop(
            Gated(turn, prose("chat"), gates={0: search.finished}, hold=2),
            {"search": search, "fetch": Tool()},
            said("chat"),
            early={"search"},
        )
    )
    assert len(search.runs) == 1
    assert not any(isinstance(e, rt.ToolCallRetracted) for e in events)
    finished = [e for e in events if isinstance(e, rt.ToolCallFinished)]
    assert [(f.call.arguments, f.early) for f in finished] == [
        ('{"q": "oslo"} ', True),
        ('{"url": "x"}', False),
    ]


def test_every_early_call_of_a_stream_of_several_choices_is_taken_back() -> None:
    from tests.helpers import call_open, finish

    turn = [
        call_open(0, "a", "search", '{"q": "zero"}', choice_index=0),
        call_open(0, "b", "search", '{"q": "one"}', choice_index=1),
        finish("tool_calls", index=0),
        finish("tool_calls", index=1),
    ]
    seen, error = run_to_end(
        rt.agent_loop(
            Gated(turn, gates={}), {"search": Tool()}, said("chat"), early={"search"}, retries=0
        )
    )
    assert isinstance(error, rt.MultipleChoicesError)
    started = [e for e in seen if isinstance(e, rt.ToolCallEarly)]
    retracted = [e for e in seen if isinstance(e, rt.ToolCallRetracted)]
    assert len(started) == len(retracted) >= 1


@pytest.mark.parametrize("wire", ["chat", "anthropic"])
def test_calls_sharing_an_id_never_run_twice_when_the_close_renames_one(wire: str) -> None:
    calls = [("x", "search", ['{"q": "zero"}']), ("x", "search", ['{"q": "one"}'])]
    turn = case(wire).turn((), calls)
    outcomes = []
    for early in (None, {"search"}):
        ran: list[str] = []

        def search(q: str, ran: list[str] = ran) -> str:
            ran.append(q)
            return f"hits for {q}"

        loop = rt.agent_loop(
            Gated(turn, prose(wire), gates={}),
            {"search": search},
            said(wire),
            early=early,
            policy="lenient",
        )
        events = events_of(loop)
        assert sorted(ran) == ["one", "zero"]
        assert not any(isinstance(e, rt.ToolCallRetracted) for e in events)
        outcomes.append(events[-1].messages)
    assert outcomes[0] == outcomes[1]
