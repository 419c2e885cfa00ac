"""The timeline: what the trace says (lanes, completeness, where the error is) and what the
picture draws from it (legend, the error's lane)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rxtoolcalls.viz import Trace, draw, trace
from tests.helpers import call_open, content, extra, finish, load_fixture

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
        "finish",
    ]
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
