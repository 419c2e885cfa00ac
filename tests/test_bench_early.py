"""The early-execution benchmark: the turns it streams and their pacing, the summary of its runs,
its check of the transcripts, and its section and command at a scale of milliseconds. Nothing
here asserts a time: the benchmark reports the ratios."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

import rxtoolcalls as rt
from tests.benchmarks import bench

pytest.importorskip("openai")

TINY = 0.02  # seconds the two-call turn streams over here (the benchmark's is 1 s)


def assembled(events: list[dict[str, Any]]) -> rt.AssistantTurn:
    assembler = rt.Assembler()
    for event in events:
        assembler.feed(event)
    return assembler.close()


def expected_calls() -> list[tuple[str, str, Any]]:
    return [(id_, name, json.loads(text)) for id_, name, text, _ in bench.EARLY_CALLS]


def sent_at(pauses: list[float], index: int) -> float:
    """When event ``index`` is sent, as a share of the stream's time (pause after each)."""
    return sum(pauses[:index])


def test_the_chat_turn_writes_call_0_fast_and_call_1_slowly() -> None:
    turn, pauses, prose = bench.build_early_chat()
    assert [bench._calls(assembled(turn))] == [expected_calls()]
    assert assembled(turn).finish_reason == "tool_calls"
    for chunk in [*turn, *prose]:  # the keys the openai SDK needs
        assert {"id", "object", "created", "model", "choices"} <= chunk.keys()
        assert chunk["object"] == "chat.completion.chunk"
    assert assembled(prose).content == bench.EARLY_ANSWER
    opened = [
        i
        for i, c in enumerate(turn)
        for tc in c["choices"][0]["delta"].get("tool_calls") or ()
        if "id" in tc
    ]
    assert len(opened) == 2
    # Call 1 opens at EARLY_FIRST; the finish is sent at the stream's end.
    assert sent_at(pauses, opened[1]) == pytest.approx(bench.EARLY_FIRST / bench.EARLY_STREAM)
    assert sent_at(pauses, len(turn) - 1) == pytest.approx(1.0)
    assert len(pauses) == len(turn) - 1
    assert all(p > 0 for p in pauses)


def test_the_anthropic_turn_stops_call_0_s_block_at_the_same_time() -> None:
    turn, pauses, prose = bench.build_early_anthropic()
    assert bench._calls(assembled(turn)) == expected_calls()
    assert assembled(prose).content == bench.EARLY_ANSWER
    stops = [i for i, e in enumerate(turn) if e["type"] == "content_block_stop"]
    first = bench.EARLY_FIRST / bench.EARLY_STREAM
    assert sent_at(pauses, stops[0]) == pytest.approx(first)
    assert sent_at(pauses, stops[0] + 1) == pytest.approx(first)  # call 1 opens at once
    assert sent_at(pauses, stops[1]) == pytest.approx(1.0)
    assert len(pauses) < len(turn)  # the stop events after call 1 come at once


def test_the_summary_gives_each_ratio_its_median_and_spread() -> None:
    summary = bench.EarlySummary([2.0, 1.0, 4.0], [1.2, 0.7, 2.0], [0.3, 0.3, 0.3])
    assert summary.ratios == pytest.approx([0.6, 0.7, 0.5])
    assert summary.median == pytest.approx(0.6)
    assert summary.spread == pytest.approx((0.5, 0.7))


def test_the_tools_answer_the_same_sync_and_async() -> None:
    import asyncio

    sync, asynchronous = bench.early_tools(0.0, False), bench.early_tools(0.0, True)
    for name, text in (("search", '{"query": "q"}'), ("clock", '{"zone": "Z", "format": "f"}')):
        arguments = json.loads(text)
        assert sync[name](**arguments) == asyncio.run(asynchronous[name](**arguments))


@pytest.mark.parametrize("mode", bench.EARLY_MODES)
def test_a_loop_with_early_starts_call_0_before_the_turn_ends(mode: str) -> None:
    plain = bench.early_loop("openai", mode, False, TINY)
    early = bench.early_loop("openai", mode, True, TINY)
    assert plain.early_at is None
    assert early.early_at is not None
    assert early.messages == plain.messages
    assert [m["role"] for m in early.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    kinds = [type(e) for _, e in early.marks]
    assert kinds.index(rt.ToolCallEarly) < kinds.index(rt.TurnFinished)


def test_the_section_reports_the_ratios_and_judges_only_at_full_scale(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "EARLY_QUICK", TINY)  # the untimed first runs
    results = bench.early_section(1, TINY, ("openai",))
    out = capsys.readouterr().out
    assert "| client | mode | without (s) | with `early` (s) | ratio each run | median |" in out
    rows = [line for line in out.splitlines() if line.startswith("| openai |")]
    assert [row.split(" | ")[1] for row in rows] == ["sync", "async"]
    assert len(results) == 2
    for text, ok, figure in results:
        assert "within 0.8x of without" in text
        assert ok is None  # not judged at this scale
        assert "median" in figure
        assert "spread" in figure


def test_a_transcript_that_differs_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(client: str, mode: str, early: bool, stream: float) -> bench.EarlyRun:
        messages = ({"role": "user", "content": "early" if early else "without"},)
        return bench.EarlyRun(1.0, messages, [])

    monkeypatch.setattr(bench, "early_loop", fake)
    with pytest.raises(SystemExit, match="openai sync with early: the transcript differs"):
        bench.early_section(1, bench.EARLY_STREAM, ("openai",))


def test_full_scale_runs_are_judged_on_the_worst_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    times = iter([1.0, 0.7, 1.0, 0.7, 1.0, 0.85, 1.0, 0.7])  # (without, with): sync, async, twice

    def fake(client: str, mode: str, early: bool, stream: float) -> bench.EarlyRun:
        if stream < bench.EARLY_STREAM:
            return bench.EarlyRun(0.0, (), [])  # the untimed first runs
        marks = [(0.3, rt.ToolCallEarly(1, rt.ToolCall(0, "call_0", "search", "{}", {})))]
        return bench.EarlyRun(next(times), (), marks if early else [])

    monkeypatch.setattr(bench, "early_loop", fake)
    results = bench.early_section(2, bench.EARLY_STREAM, ("openai",))
    assert [ok for _, ok, _ in results] == [False, True]  # sync: 0.70x, then 0.85x
    assert results[0][2] == "median 0.775x, spread 0.700-0.850x over 2 run(s)"


def test_a_missing_client_is_not_measured(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # import anthropic raises ImportError
    results = bench.early_section(1, TINY, ("anthropic",))
    assert results == [("early: anthropic", None, "not measured: anthropic not installed")]
    assert "| anthropic |" not in capsys.readouterr().out


def test_the_command_runs_the_section_quickly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "EARLY_CLIENTS", ("openai",))
    monkeypatch.setattr(bench, "EARLY_QUICK", TINY)
    assert bench.main(["--early", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "# rxtoolcalls early execution" in out
    assert "openai" in out
    assert out.count("- [-] early: the loop's wall time within 0.8x of without") == 2


def test_the_anthropic_client_runs_the_loop_too() -> None:
    pytest.importorskip("anthropic")
    plain = bench.early_loop("anthropic", "sync", False, TINY)
    early = bench.early_loop("anthropic", "async", True, TINY)
    assert early.messages == plain.messages
    assert early.early_at is not None
