"""The timeline: what the trace says (lanes, completeness, where the error is, when each
top-level field completed) and what the picture draws from it (legend, the error's lane, the
fields' marks and keys); an agent loop's run over time (requests, chunks, tool runs, the
loop's events) and its picture."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex.scheduler import NewThreadScheduler

import rxtoolcalls as rt
from rxtoolcalls.viz import (
    AgentTimeline,
    Lane,
    Trace,
    agent_timeline,
    draw,
    draw_agent,
    trace,
)
from rxtoolcalls.wires import names
from tests.helpers import Chunk, args, call_open, content, extra, finish, load_fixture
from tests.wire_builders import (
    WireCase,
    case,
    per_wire,
    r_args_done,
    r_completed,
    r_created,
    r_delta,
    r_fc_added,
    r_fc_item,
    r_item_done,
    turn_of,
)

pytest.importorskip("matplotlib", reason=extra("viz"))


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


CUT = load_fixture("llamacpp__gemma3_270m_max_tokens_4_cut_labelled_tool_calls")
PARALLEL = load_fixture("openai__parallel_tool_calls")
# Call 0 closed, call 1 cut by the token limit.
HALF_CUT = [
    content("Let me check."),
    call_open(0, "call_a", "first", '{"a": 1}'),
    call_open(1, "call_b", "second", '{"b": '),
    finish("length"),
]


def _legend(figure: Any) -> list[str]:
    return [text.get_text() for legend in figure.legends for text in legend.get_texts()]


def test_no_content_lane_without_content() -> None:
    picture = trace(PARALLEL)
    assert picture.lanes == picture.calls
    assert [lane.label for lane in picture.lanes] == ["0: GetWeatherArgs", "1: get_stock_price"]
    figure = draw(picture)
    labels = [label.get_text() for label in figure.axes[0].get_yticklabels()]
    assert labels == ["1: get_stock_price", "0: GetWeatherArgs"]


def test_a_content_lane_when_there_is_content() -> None:
    picture = trace(HALF_CUT)
    assert picture.lanes == [picture.content, *picture.calls]


def test_a_cut_call_is_not_complete_and_carries_the_error() -> None:
    picture = trace(HALF_CUT)
    first, second = picture.calls
    assert (first.complete, second.complete) == (True, False)
    assert picture.error is not None
    assert picture.error_lane is second
    assert all(lane.complete for lane in trace(PARALLEL).calls)


def test_the_recorded_cut_stream() -> None:
    picture = trace(CUT)
    [call] = picture.calls
    assert not call.complete
    assert picture.error_lane is call


def _error_mark_row(picture: Trace) -> float:
    figure = draw(picture)
    assert picture.error is not None
    [mark] = [t for t in figure.axes[0].texts if t.get_text() == type(picture.error).__name__]
    return float(mark.xy[1])


def test_the_error_is_drawn_on_the_lane_of_the_call_that_broke() -> None:
    picture = trace(HALF_CUT)
    rows = {lane.label: len(picture.lanes) - 1 - n for n, lane in enumerate(picture.lanes)}
    assert _error_mark_row(picture) == rows["1: second"]


def test_an_error_of_the_whole_turn_is_drawn_at_the_top() -> None:
    picture = trace([content("Hel"), content("lo")])  # no finish_reason, and no call to blame
    assert picture.error is not None
    assert picture.error_lane is None
    assert _error_mark_row(picture) > len(picture.lanes) - 1


def test_the_legend_names_the_marks() -> None:
    assert _legend(draw(trace(PARALLEL))) == [
        "argument fragment",
        "name known",
        "last fragment (call complete)",
        "top-level field complete",
        "finish",
    ]
    # The cut came inside the first value: no field completed.
    assert _legend(draw(trace(CUT))) == ["argument fragment", "name known", "error"]


def test_a_cut_call_gets_no_complete_mark() -> None:
    import numpy
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_rgba

    def colors(picture: Trace) -> set[tuple[float, ...]]:
        axes = draw(picture).axes[0]
        marks = [c for c in axes.collections if isinstance(c, PathCollection)]
        faces = [numpy.asarray(c.get_facecolor()).reshape(-1, 4) for c in marks]
        return {tuple(float(v) for v in row) for rows in faces for row in rows}

    green = tuple(to_rgba("tab:green"))
    assert green in colors(trace(PARALLEL))
    assert green not in colors(trace(CUT))


@pytest.mark.parametrize("name", ["look\udc00up", "price_in_$", "$x^2$", "a$b$c"])
def test_names_are_drawn_literally(tmp_path: Path, name: str) -> None:
    picture = trace([call_open(0, "call_1", name, "{}"), finish("tool_calls")])
    target = tmp_path / "t.png"
    figure = draw(picture, target, title=f"capture of {name}")
    assert target.read_bytes()[:4] == b"\x89PNG"
    [label] = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert label == "0: " + name.replace("\udc00", "\\udc00").replace("$", "\\$")


# -- Top-level fields ---------------------------------------------------------------------


def _turn(events: list[Any]) -> rt.AssistantTurn | None:
    try:
        return turn_of(events)
    except rt.ToolCallStreamError:
        return None


def _with_arguments(wire: WireCase) -> list[str]:
    """The recordings of a wire whose turn commits a call with arguments."""
    found = []
    for name in wire.recordings():
        turn = _turn(wire.load(name))
        if turn is not None and any(call.parsed_arguments for call in turn.tool_calls):
            found.append(name)
    return found


def _lane_of(picture: Trace, index: int, choice_index: int = 0) -> Lane | None:
    found = [c for c in picture.calls if (c.index, c.choice_index) == (index, choice_index)]
    assert len(found) <= 1
    return found[0] if found else None


def _field_marks(figure: Any) -> tuple[int, list[str]]:
    """The number of field triangles drawn, and the keys written, left to right per lane."""
    import numpy
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_rgba

    axes = figure.axes[0]
    purple = to_rgba("tab:purple")
    points = 0
    for marks in axes.collections:
        if not isinstance(marks, PathCollection):
            continue  # the lanes' lines
        faces = numpy.asarray(marks.get_facecolor()).reshape(-1, 4)
        if tuple(float(v) for v in faces[0]) == purple:
            points += len(numpy.asarray(marks.get_offsets()))
    keys = [t for t in axes.texts if to_rgba(t.get_color()) == purple]
    keys.sort(key=lambda t: (-t.xy[1], t.xy[0]))
    return points, [t.get_text() for t in keys]


@pytest.mark.parametrize("wire", names())
def test_every_wire_has_a_recording_with_arguments(wire: str) -> None:
    assert _with_arguments(case(wire))


@pytest.mark.parametrize(("wire", "name"), per_wire(_with_arguments))
def test_each_top_level_field_on_its_call_lane(wire: str, name: str, tmp_path: Path) -> None:
    events = case(wire).load(name)
    picture = trace(events)
    turn = turn_of(events)
    assert picture.error is None
    for call in turn.tool_calls:
        lane = _lane_of(picture, call.index, turn.choice_index)
        assert lane is not None
        assert [key for _, key in lane.fields] == list(call.parsed_arguments)
        times = [at for at, _ in lane.fields]
        assert times == sorted(times)
        # Gemini's values set by path are written as text once, at the close: its one tick
        # comes after the fields; a field still comes after the call opened.
        first = lane.ticks[0] if case(wire).arguments_as_text else lane.named_at
        assert first is not None
        assert all(first <= at <= lane.ticks[-1] <= picture.end for at in times)
    marks = sum(len(lane.fields) for lane in picture.calls)
    points, keys = _field_marks(draw(picture, tmp_path / "t.png"))
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert points == marks
    assert 0 < len(keys) <= marks


@pytest.mark.parametrize(("wire", "name"), per_wire(_with_arguments))
def test_a_cut_stream_records_the_fields_complete_before_the_cut(wire: str, name: str) -> None:
    events = case(wire).load(name)
    whole = trace(events)
    for cut in range(len(events)):
        picture = trace(events[:cut])
        for lane in whole.calls:
            assert lane.index is not None
            assert lane.choice_index is not None
            part = _lane_of(picture, lane.index, lane.choice_index)
            before = [mark for mark in lane.fields if mark[0] < cut]
            assert (part.fields if part is not None else []) == before


def test_a_cut_call_keeps_the_fields_it_finished() -> None:
    picture = trace(HALF_CUT)
    first, second = picture.calls
    assert (first.fields, second.fields) == ([(1.0, "a")], [])
    assert _field_marks(draw(picture)) == (1, ["a"])


def test_the_keys_on_the_lanes_of_two_calls() -> None:
    picture = trace(PARALLEL)
    first, second = picture.calls
    assert [key for _, key in first.fields] == ["city", "country", "units"]
    assert [key for _, key in second.fields] == ["ticker", "exchange"]
    assert _field_marks(draw(picture)) == (5, ["city", "country", "units", "ticker", "exchange"])


def test_only_top_level_fields_and_those_of_one_chunk_share_a_label() -> None:
    whole = {"a": 1, "b": "x", "c": [1, {"d": 2}], "e": {"f": {"g": True}}}
    picture = trace([call_open(0, "c", "f", json.dumps(whole)), finish("tool_calls")])
    [lane] = picture.calls
    assert lane.fields == [(0.0, "a"), (0.0, "b"), (0.0, "c"), (0.0, "e")]
    assert _field_marks(draw(picture)) == (4, ["a, b, c, e"])


def test_a_long_label_is_cut() -> None:
    keys = {f"a_rather_long_key_{n}": n for n in range(3)}
    picture = trace([call_open(0, "c", "f", json.dumps(keys)), finish("tool_calls")])
    [label] = _field_marks(draw(picture))[1]
    assert len(label) == 24
    assert label == ", ".join(keys)[:23] + "…"


def test_a_crowded_lane_writes_the_keys_it_has_room_for() -> None:
    text = json.dumps({f"key_{n}": n for n in range(60)})
    pieces = [text[i : i + 6] for i in range(0, len(text), 6)]
    chunks = [call_open(0, "c", "f", pieces[0]), *(args(0, p) for p in pieces[1:])]
    picture = trace([*chunks, finish("tool_calls")])
    [lane] = picture.calls
    assert len(lane.fields) == 60
    figure = draw(picture)
    points, keys = _field_marks(figure)
    assert points == 60
    assert keys[0] == "key_0"
    assert 1 < len(keys) < 60
    # The keys written do not overlap, as drawn.
    figure.draw_without_rendering()
    written = [t for t in figure.axes[0].texts if t.get_text().startswith("key_")]
    boxes = sorted((t.get_window_extent() for t in written), key=lambda box: box.x0)
    assert len(boxes) == len(keys)
    assert all(left.x1 < right.x0 for left, right in pairwise(boxes))


def test_a_final_value_that_replaced_the_pieces_gives_the_fields() -> None:
    item = r_fc_item(0, "call_1", "f", '{"x": 3}')
    events = [
        r_created(),
        r_fc_added(0, "call_1", "f"),
        r_delta(0, '{"a": 1, '),
        r_delta(0, '"b": 2}'),
        r_args_done(0, '{"x": 3}'),
        r_item_done(0, item),
        r_completed([item]),
    ]
    [lane] = trace(events, policy=rt.LENIENT).calls
    # Stamped with the chunk of the final value, after the last piece.
    assert lane.fields == [(4.0, "x")]
    assert lane.ticks[-1] < 4.0
    # Without the lenient policy the turn fails on it: the pieces' fields stay.
    refused = trace(events)
    assert refused.error is not None
    assert refused.calls[0].fields == [(2.0, "a"), (3.0, "b")]


def test_a_repeated_key_is_marked_each_time() -> None:
    picture = trace([call_open(0, "c", "f", '{"a": 1, "b": 2, "a": 3}'), finish("tool_calls")])
    assert [key for _, key in picture.calls[0].fields] == ["a", "b", "a"]


def test_fields_with_times_in_seconds() -> None:
    picture = trace(PARALLEL, times=[10.0 + 0.5 * n for n in range(len(PARALLEL))])
    first = picture.calls[0]
    assert [at for at, _ in first.fields] == [at * 0.5 for at, _ in trace(PARALLEL).calls[0].fields]


def test_no_fields_no_marks() -> None:
    picture = trace([call_open(0, "c", "f", "{}"), finish("tool_calls")])
    assert picture.calls[0].fields == []
    figure = draw(picture)
    assert _field_marks(figure) == (0, [])
    assert "top-level field complete" not in _legend(figure)


@pytest.mark.parametrize("key", ["look\udc00up", "price_in_$", "$x^2$", "天气"])
def test_keys_are_drawn_literally(tmp_path: Path, key: str) -> None:
    picture = trace([call_open(0, "c", "f", json.dumps({key: 1})), finish("tool_calls")])
    assert picture.calls[0].fields == [(0.0, key)]
    figure = draw(picture, tmp_path / "t.png")
    assert _field_marks(figure)[1] == [key.replace("\udc00", "\\udc00").replace("$", "\\$")]


# -- An agent loop over time --------------------------------------------------------------

QUESTION = [{"role": "user", "content": "Weather and time in Paris?"}]
WEATHER = [
    call_open(0, "call_a", "get_weather", '{"city": '),
    args(0, '"Paris"}'),
    call_open(1, "call_b", "get_time", '{"zone": '),  # moves past call 0: it is complete
    args(1, '"CET"}'),
    finish("tool_calls"),
]
ANSWER = [content("Sunny, at noon."), finish("stop")]
OpenStream = Callable[[list[dict[str, Any]]], Iterator[Chunk]]


def _streams(*turns: list[Chunk], started: threading.Event | None = None) -> OpenStream:
    """Each request gets the next of ``turns``; with ``started``, the first waits after its
    third chunk (call 0 complete) until the early tool has started."""
    left = iter(turns)

    def open_stream(messages: list[dict[str, Any]]) -> Iterator[Chunk]:
        chunks = next(left)
        first = started is not None and chunks is turns[0]

        def read() -> Iterator[Chunk]:
            for number, chunk in enumerate(chunks):
                if first and number == 3:
                    assert started is not None
                    started.wait(10)  # a guard against a hang, not a timing
                yield chunk

        return read()

    return open_stream


def _tools(started: threading.Event | None = None) -> dict[str, Callable[..., str]]:
    def get_weather(city: str) -> str:
        if started is not None:
            started.set()
        return f"sunny in {city}"

    def get_time(zone: str) -> str:
        return f"noon in {zone}"

    return {"get_weather": get_weather, "get_time": get_time}


def _counter() -> Callable[[], float]:
    """A clock that ticks once per reading: the record's times are the order things happened."""
    return itertools.count().__next__


def _kinds(record: AgentTimeline) -> list[str]:
    return [mark.kind for mark in record.marks]


def _late() -> AgentTimeline:
    return agent_timeline(_streams(WEATHER, ANSWER), _tools(), QUESTION, clock=_counter())


def _soon() -> AgentTimeline:
    started = threading.Event()
    stream = _streams(WEATHER, ANSWER, started=started)
    return agent_timeline(
        stream, _tools(started), QUESTION, early={"get_weather"}, clock=_counter()
    )


def test_an_early_tool_starts_before_its_turn_finished_the_other_after() -> None:
    record = _soon()
    assert record.error is None
    assert record.early == {"get_weather"}
    assert record.lanes == ("stream", "0: get_weather", "1: get_time")
    assert _kinds(record) == ["request", "early", "finished", "request", "finished"]
    weather, clock = record.runs  # in the order they started
    assert (weather.name, weather.turn, weather.early, weather.failed) == (
        "get_weather",
        1,
        True,
        False,
    )
    assert (clock.name, clock.turn, clock.early) == ("get_time", 1, False)
    assert weather.call is not None
    assert clock.call is not None
    assert (weather.call.index, clock.call.index) == (0, 1)
    early, finished, again, answered = record.marks[1:]
    assert early.call == weather.call
    # Stamped as each chunk reached the loop: call 1's first chunk made call 0 early.
    assert len(record.chunks) == len(WEATHER) + len(ANSWER)
    assert list(record.chunks) == sorted(record.chunks)
    assert record.chunks[2] < early.at < weather.start < record.chunks[3]
    assert record.chunks[len(WEATHER) - 1] < finished.at < clock.start
    assert weather.end is not None
    assert clock.end is not None
    assert max(weather.end, clock.end) < again.at < record.chunks[len(WEATHER)]
    assert answered.at < record.end
    assert isinstance(record.events[-1], rt.Conversation)
    [finished_event] = [e for e in record.events if isinstance(e, rt.ToolCallFinished) and e.early]
    assert finished_event.call == weather.call


def test_without_early_every_tool_starts_after_its_turn_finished() -> None:
    record = _late()
    assert record.error is None
    assert record.early == frozenset()
    assert record.lanes == ("stream", "0: get_weather", "1: get_time")
    assert _kinds(record) == ["request", "finished", "request", "finished"]
    finished = record.marks[1]
    assert finished.turn == 1
    # The two start at once, on threads of their own: in either order.
    runs = sorted(record.runs, key=lambda run: run.call.index if run.call else -1)
    assert [run.name for run in runs] == ["get_weather", "get_time"]
    assert all(not run.early and finished.at < run.start for run in runs)


def test_tools_of_every_kind_are_timed_and_a_failure_is_kept() -> None:
    async def asynchronous(n: int) -> int:
        return n

    def observed(n: int) -> reactivex.Observable[int]:
        return reactivex.of(n, n + 1)

    def broken(n: int) -> int:
        raise ValueError("no")

    tools = {"asynchronous": asynchronous, "observed": observed, "broken": broken}
    turn = [
        call_open(0, "c0", "asynchronous", '{"n": 1}'),
        call_open(1, "c1", "observed", '{"n": 2}'),
        call_open(2, "c2", "broken", '{"n": 3}'),
        call_open(3, "c3", "observed", '{"n": 4}'),
        finish("tool_calls"),
    ]
    record = agent_timeline(_streams(turn, ANSWER), tools, QUESTION, clock=_counter())
    assert record.error is None
    assert record.lanes == ("stream", "0: asynchronous", "1: observed", "2: broken", "3: observed")
    by_index = {run.call.index: run for run in record.runs if run.call is not None}
    assert sorted(by_index) == [0, 1, 2, 3]
    assert [by_index[n].failed for n in range(4)] == [False, False, True, False]
    for run in record.runs:
        assert run.end is not None
        assert run.start < run.end < record.end
    # Each run was told to the call it ran for (two calls of one tool too).
    told = {run.call.index: run.call.arguments for run in record.runs if run.call is not None}
    assert [json.loads(told[n])["n"] for n in range(4)] == [1, 2, 3, 4]


def test_a_call_no_event_announced_is_on_its_tool_s_lane() -> None:
    asked = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_t",
                "type": "function",
                "function": {"name": "get_time", "arguments": '{"zone": "CET"}'},
            }
        ],
    }
    # A resumed turn: its call runs before the first stream, with no event before it.
    record = agent_timeline(_streams(ANSWER), _tools(), [*QUESTION, asked], clock=_counter())
    [run] = record.runs
    assert (run.name, run.turn, run.call, run.early) == ("get_time", None, None, False)
    assert record.lanes == ("stream", "get_time")
    assert run.end is not None
    assert run.end < record.marks[0].at  # then the stream was requested
    assert _kinds(record) == ["request", "finished"]


def test_a_retried_turn_retracts_its_early_call() -> None:
    cut = WEATHER[:3]  # call 0 complete, then the stream ends with no finish
    stream = _streams(cut, WEATHER, ANSWER)
    record = agent_timeline(
        stream, _tools(), QUESTION, early={"get_weather"}, backoff=0, clock=_counter()
    )
    assert record.error is None
    assert _kinds(record) == [
        "request",
        "early",
        "retracted",
        "retried",
        "request",
        "early",
        "finished",
        "request",
        "finished",
    ]
    first, retracted = record.marks[1:3]
    assert retracted.call == first.call
    assert record.marks[4].turn == 1  # the same turn, streamed again
    assert record.lanes == ("stream", "0: get_weather", "1: get_time")
    legend = _legend(draw_agent(record))
    assert {"ToolCallEarly", "ToolCallRetracted", "TurnRetried", "answer"} <= set(legend)
    assert "error" not in legend


def test_a_failed_loop_is_recorded_up_to_its_error(tmp_path: Path) -> None:
    stream = _streams(WEATHER[:3])
    record = agent_timeline(
        stream, _tools(), QUESTION, early={"get_weather"}, retries=0, clock=_counter()
    )
    assert isinstance(record.error, rt.StreamInterruptedError)
    assert _kinds(record) == ["request", "early", "retracted"]
    assert record.marks[-1].at < record.end
    assert not any(isinstance(event, rt.Conversation) for event in record.events)
    figure = draw_agent(record, tmp_path / "t.png")
    assert "error" in _legend(figure)
    assert "answer" not in _legend(figure)
    assert (
        figure.axes[0]
        .get_title(loc="left")
        .startswith("early={'get_weather'}: StreamInterruptedError")
    )


@pytest.fixture(scope="module")
def both() -> tuple[AgentTimeline, AgentTimeline]:
    return _late(), _soon()


def test_draw_agent_stacks_two_runs_on_one_time_axis(
    both: tuple[AgentTimeline, AgentTimeline], tmp_path: Path
) -> None:
    late, soon = both
    target = tmp_path / "t.svg"
    figure = draw_agent([late, soon], tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    draw_agent([late, soon], target)
    assert b"<svg" in target.read_bytes()[:400]
    top, bottom = figure.axes
    assert top.get_shared_x_axes().joined(top, bottom)
    assert top.get_title(loc="left").startswith("without early: the answer after")
    assert bottom.get_title(loc="left").startswith("early={'get_weather'}: the answer after")
    labels = [t.get_text() for t in bottom.get_yticklabels()]
    assert labels == ["1: get_time", "0: get_weather", "stream"]
    assert _legend(figure) == [
        "chunk",
        "request",
        "tool started early",
        "tool after its turn",
        "ToolCallEarly",
        "TurnFinished",
        "answer",
    ]
    assert _legend(draw_agent(late)) == [
        "chunk",
        "request",
        "tool after its turn",
        "TurnFinished",
        "answer",
    ]
    titled = draw_agent([late, soon], titles=["before", "price_in_$"])
    assert [axes.get_title(loc="left") for axes in titled.axes] == ["before", "price_in_\\$"]


def test_the_records_are_frozen(both: tuple[AgentTimeline, AgentTimeline]) -> None:
    late, soon = both
    with pytest.raises(dataclasses.FrozenInstanceError):
        soon.end = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        soon.runs[0].start = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        late.marks[0].at = 0.0  # type: ignore[misc]


def test_bad_input_is_refused_before_anything_runs(
    both: tuple[AgentTimeline, AgentTimeline],
) -> None:
    late, soon = both
    with pytest.raises(ValueError, match="one or two runs, not 0"):
        draw_agent([])
    with pytest.raises(ValueError, match="one or two runs, not 3"):
        draw_agent([late, soon, late])
    with pytest.raises(TypeError, match="AgentTimeline runs, not Trace"):
        draw_agent(trace(PARALLEL))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 titles for 1 runs"):
        draw_agent(late, titles=["a", "b"])
    opened: list[object] = []

    def open_stream(messages: list[dict[str, Any]]) -> list[Chunk]:
        opened.append(messages)
        return ANSWER

    with pytest.raises(ValueError, match="early names tools that are not in tools: nope"):
        agent_timeline(open_stream, _tools(), QUESTION, early={"nope"})
    with pytest.raises(TypeError, match="tools must be a mapping"):
        agent_timeline(open_stream, [("f", len)], QUESTION)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tools must map names to callables: 'f' does not"):
        agent_timeline(open_stream, {"f": 3}, QUESTION)  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="no scheduler"):
        agent_timeline(open_stream, _tools(), QUESTION, scheduler=NewThreadScheduler())
    with pytest.raises(ValueError, match="max_turns must be at least 1"):
        agent_timeline(open_stream, _tools(), QUESTION, max_turns=0)
    assert opened == []


def test_the_readme_picture_is_drawn_from_a_real_run(tmp_path: Path) -> None:
    pytest.importorskip("openai", reason=extra("notebooks"))
    path = Path(__file__).parent.parent / "notebooks" / "timeline_early.py"
    spec = importlib.util.spec_from_file_location("timeline_early", path)
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    late, soon = script.record(0.0)  # no pauses: the same runs, at once
    assert late.lanes == soon.lanes == ("stream", "0: get_weather", "1: get_time")
    assert not any(run.early for run in late.runs)
    assert [run.early for run in soon.runs if run.name == "get_weather"] == [True]
    assert len(late.chunks) == len(soon.chunks) == len(script.TURN) + len(script.ANSWER)
    script.main(tmp_path / "t.png", 0.0)
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
