"""Timeline pictures of a turn: one lane per tool call plus a content lane (matplotlib extra).

``trace(chunks)`` reads a stream once and records when each fragment arrived; ``draw(trace)``
turns it into a marble diagram. Works headless (Agg) and inline in Jupyter.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._assembler import Call, TurnReader, build_turns, check_finish, single_turn
from ._errors import ToolCallStreamError
from ._policy import Policy

__all__ = ["Lane", "Trace", "draw", "trace"]


@dataclass
class Lane:
    """One lane of the picture: the content, or one tool call."""

    label: str
    ticks: list[float] = field(default_factory=list)
    named_at: float | None = None


@dataclass
class Trace:
    """What happened when: lanes of fragment times, the finish, and the error if any.

    Times are seconds since the first chunk, or chunk numbers when ``clock`` was ``None``.
    """

    content: Lane
    calls: list[Lane]
    end: float
    finish_reason: str | None = None
    finished_at: float | None = None
    error: ToolCallStreamError | None = None
    unit: str = "chunk"


def trace(
    chunks: Iterable[Any],
    *,
    times: Iterable[float] | None = None,
    policy: Policy | None = None,
) -> Trace:
    """Read ``chunks`` (dicts or SDK objects) and record when each piece arrived.

    ``times`` gives each chunk's arrival time in seconds (as ``replay`` measures it); without
    it the chunk number is the clock. A stream that fails is traced up to the failure, and the
    error is kept for the picture.
    """
    from ._policy import DEFAULT

    chosen = policy or DEFAULT
    content = Lane("content")
    lanes: dict[int, Lane] = {}
    now = 0.0

    def on_open(call: Call) -> None:
        lane = lanes[id(call)] = Lane(f"call {call.index}")
        write = call.text.write

        def sink(piece: str) -> None:
            write(piece)
            lane.ticks.append(now)

        call.sink = sink

    reader = TurnReader(chosen, on_open=on_open)
    clock = iter(times) if times is not None else None
    error: ToolCallStreamError | None = None
    seen_content = 0
    start: float | None = None
    finished_at: float | None = None
    for number, chunk in enumerate(chunks):
        if clock is not None:
            stamp = next(clock, None)
            stamp = time.monotonic() if stamp is None else stamp
            start = stamp if start is None else start
            now = stamp - start
        else:
            now = float(number)
        try:
            for event in reader.feed(chunk):
                for call in reader.calls():
                    if call.index == event.index and call.choice_index == event.choice_index:
                        lanes[id(call)].named_at = now
        except ToolCallStreamError as exc:
            error = exc
            break
        if finished_at is None and reader.finish_reason() is not None:
            finished_at = now
        size = reader.content_size()
        if size > seen_content:
            content.ticks.append(now)
            seen_content = size
    if error is None:
        buffers = [call.buffer() for call in reader.calls()]
        try:
            end = check_finish(reader.end(), buffers, chosen)
            single_turn(build_turns(buffers, end, chosen))
        except ToolCallStreamError as exc:
            error = exc
    ends = reader.end().choices
    finish = ends[0].finish_reason if ends else None
    calls = []
    for call in reader.calls():
        lane = lanes[id(call)]
        lane.label = f"{call.index}: {call.name or '?'}"
        calls.append(lane)
    unit = "s" if times is not None else "chunk"
    return Trace(content, calls, now, finish, finished_at, error, unit)


def draw(record: Trace, path: str | Path | None = None, *, title: str = "") -> Any:
    """Draw ``record`` as a marble diagram; save it to ``path`` (PNG) if given.

    Ticks are argument pieces (and content pieces), a diamond marks where the name became
    known, a bar where each call's last piece arrived, the finish reason is written at the
    end, and an error is drawn as a red cross where it happened. Returns the matplotlib figure.
    """
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    lanes = [record.content, *record.calls]
    figure, axes = plt.subplots(figsize=(9, 1.1 + 0.55 * len(lanes)))
    for row, lane in enumerate(reversed(lanes)):
        y = row
        color = "tab:gray" if lane is record.content else "tab:blue"
        axes.hlines(y, 0, record.end, color="0.85", linewidth=1, zorder=1)
        if lane.ticks:
            axes.scatter(
                lane.ticks, [y] * len(lane.ticks), marker="|", s=160, color=color, zorder=2
            )
            if lane is not record.content:
                axes.scatter([lane.ticks[-1]], [y], marker="s", s=40, color="tab:green", zorder=3)
        if lane.named_at is not None:
            axes.scatter([lane.named_at], [y], marker="D", s=50, color="tab:orange", zorder=4)
    axes.set_yticks(range(len(lanes)))
    axes.set_yticklabels([lane.label for lane in reversed(lanes)])
    axes.set_xlabel("seconds" if record.unit == "s" else "chunk number")
    top = len(lanes) - 0.5
    if record.error is not None:
        axes.scatter([record.end], [top - 0.25], marker="X", s=120, color="tab:red", zorder=5)
        axes.annotate(
            type(record.error).__name__,
            (record.end, top - 0.25),
            textcoords="offset points",
            xytext=(-8, 4),
            ha="right",
            color="tab:red",
        )
    else:
        at = record.end if record.finished_at is None else record.finished_at
        axes.axvline(at, color="0.4", linestyle="--", linewidth=1)
        axes.annotate(
            f"finish_reason={record.finish_reason!r}",
            (at, top - 0.25),
            textcoords="offset points",
            xytext=(-8, 4),
            ha="right",
        )
    axes.set_ylim(-0.6, len(lanes) - 0.1)
    axes.set_title(title or "tool-call stream timeline (◆ name known, ■ last piece)")
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=110)
    return figure
