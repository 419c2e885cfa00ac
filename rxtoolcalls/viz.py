"""Timeline pictures of a turn: one lane per tool call, and a content lane if there was content.

``trace(chunks)`` reads a stream once and records when each fragment arrived; ``draw(trace)``
turns it into a marble diagram. Works headless (Agg) and inline in Jupyter.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from ._close import build_turns, check_finish, single_turn
from ._core import Call
from ._errors import ToolCallStreamError
from ._fields import CallFields, FieldPath, OnField
from ._policy import Policy
from ._reader import reader as TurnReader

__all__ = ["Lane", "Trace", "draw", "trace"]


@dataclass
class Lane:
    """One lane of the picture: the content, or one tool call.

    ``complete`` says whether the call's last fragment closed it (its arguments are one JSON
    object and the error, if any, is not about it); ``index`` and ``choice_index`` locate a
    call (``None`` for the content lane). ``fields`` holds ``(time, key)`` for each top-level
    field of a call's arguments, in the order they completed: a repeated key each time, and
    where a final value replaced the pieces, that value's fields alone, at its chunk's time.
    """

    label: str
    ticks: list[float] = field(default_factory=list)
    named_at: float | None = None
    index: int | None = None
    choice_index: int | None = None
    complete: bool = False
    fields: list[tuple[float, str]] = field(default_factory=list)


class _LaneFields(CallFields):
    """A call's field events, kept on its lane: a replacing final value starts them over."""

    __slots__ = ("_lane",)

    def __init__(self, lane: Lane, on_field: OnField, max_depth: int) -> None:
        super().__init__(on_field, None, max_depth)
        self._lane = lane

    def replaced(self, arguments: str) -> None:
        # The committed call holds the final value alone: the pieces' fields are void.
        self._lane.fields.clear()
        super().replaced(arguments)


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

    @property
    def lanes(self) -> list[Lane]:
        """The lanes drawn, top to bottom: the content lane only if content arrived."""
        return [self.content, *self.calls] if self.content.ticks else list(self.calls)

    @property
    def error_lane(self) -> Lane | None:
        """The lane of the call the error is about; ``None`` for an error of the whole turn."""
        error = self.error
        if error is None or error.index is None:
            return None
        for lane in self.calls:
            same_choice = error.choice_index is None or error.choice_index == lane.choice_index
            if lane.index == error.index and same_choice:
                return lane
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _display(text: str) -> str:
    r"""``text`` as matplotlib draws it literally: a lone surrogate as ``\uXXXX``, ``$`` escaped.

    A font cannot render a lone surrogate, and a pair of ``$`` would start mathtext.
    """
    text = _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    return text.replace("$", "\\$")


def _closes(arguments: str) -> bool:
    """Whether ``arguments`` is one whole JSON object (the last fragment closed the call)."""
    try:
        return isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False


def trace(
    chunks: Iterable[Any],
    *,
    times: Iterable[float] | None = None,
    policy: Policy | None = None,
) -> Trace:
    """Read ``chunks`` (dicts or SDK objects) and record when each piece arrived.

    ``times`` gives each chunk's arrival time in seconds (as ``replay`` measures it); without
    it the chunk number is the clock. A stream that fails is traced up to the failure, and the
    error is kept for the picture. A top-level field is stamped with the chunk that completed it.
    """
    from ._policy import DEFAULT

    chosen = policy or DEFAULT
    content = Lane("content")
    lanes: dict[int, Lane] = {}
    now = 0.0

    def on_open(call: Call) -> None:
        lane = lanes[id(call)] = Lane(f"call {call.index}")

        def on_field(path: FieldPath, value: object) -> None:
            # The root is always an object (the scan and the paths start from one), so a
            # top-level step is a key.
            if len(path) == 1 and type(path[0]) is str:
                lane.fields.append((now, path[0]))

        fields = call.fields = _LaneFields(lane, on_field, chosen.limits.max_depth)

        def sink(piece: str) -> None:
            call.write(piece)
            fields.text(piece)
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
        lane.index = call.index
        lane.choice_index = call.choice_index
        about_it = error is not None and error.index == call.index
        lane.complete = error is None or (not about_it and _closes(call.buffer().arguments))
        calls.append(lane)
    unit = "s" if times is not None else "chunk"
    return Trace(content, calls, now, finish, finished_at, error, unit)


_FIELD = "tab:purple"
_FIELD_DROP = 0.2  # how far under its lane a field's triangle sits, in lanes
_KEY_POINTS = 6.5  # the keys' font size
_KEY_CHARS = 24  # a longer label is cut, with "…"
_KEY_GAP = 3.0  # points between two keys written on one lane


def draw(record: Trace, path: str | Path | None = None, *, title: str = "") -> Any:
    """Draw ``record`` as a marble diagram; save it to ``path`` if given (format by suffix).

    Ticks are fragments (arguments, and content when there is any), a diamond marks where
    the name became known, a square where a call's last fragment closed it (never on a call
    that was cut), a triangle under a call's lane where each top-level field completed, the
    finish reason is written at the end, and an error is a red cross on the lane of the call
    it is about (at the top for an error of the whole turn). A legend names the marks.

    A field's key is written under its triangle when there is room after the previous key
    written on that lane, else left out (the triangle stays); keys completed by one chunk
    share a label, cut to 24 characters. Returns the matplotlib figure.
    """
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    lanes = record.lanes
    rows = {id(lane): len(lanes) - 1 - number for number, lane in enumerate(lanes)}
    figure, axes = plt.subplots(figsize=(9, 1.7 + 0.55 * max(len(lanes), 1)), layout="constrained")
    for lane in lanes:
        y = rows[id(lane)]
        is_content = lane is record.content
        axes.hlines(y, 0, record.end, color="0.85", linewidth=1, zorder=1)
        if lane.ticks:
            color = "tab:gray" if is_content else "tab:blue"
            axes.scatter(
                lane.ticks, [y] * len(lane.ticks), marker="|", s=160, color=color, zorder=2
            )
            if not is_content and lane.complete:
                axes.scatter([lane.ticks[-1]], [y], marker="s", s=40, color="tab:green", zorder=3)
        if lane.named_at is not None:
            axes.scatter([lane.named_at], [y], marker="D", s=50, color="tab:orange", zorder=4)
        if lane.fields:
            # Under the lane, so that a tick, diamond or square at the same time stays in view.
            times = [at for at, _ in lane.fields]
            axes.scatter(
                times, [y - _FIELD_DROP] * len(times), marker="^", s=24, color=_FIELD, zorder=3
            )
    axes.set_yticks(range(len(lanes)))
    axes.set_yticklabels([_display(lane.label) for lane in reversed(lanes)])
    axes.set_xlabel("seconds" if record.unit == "s" else "chunk number")
    top = len(lanes) - 0.5
    if record.error is not None:
        broken = record.error_lane
        cross = top - 0.25 if broken is None else float(rows[id(broken)])
        axes.scatter([record.end], [cross], marker="X", s=120, color="tab:red", zorder=5)
        axes.annotate(
            type(record.error).__name__,
            (record.end, cross),
            textcoords="offset points",
            xytext=(-10, 6),
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
    calls = record.calls
    marks = [
        ("tab:blue", "|", 12, "argument fragment", any(lane.ticks for lane in calls)),
        ("tab:orange", "D", 6, "name known", any(lane.named_at is not None for lane in calls)),
        ("tab:green", "s", 6, "last fragment (call complete)", any(c.complete for c in calls)),
        (_FIELD, "^", 6, "top-level field complete", any(lane.fields for lane in calls)),
    ]
    legend = [
        Line2D([], [], color=color, marker=marker, linestyle="", markersize=size)
        for color, marker, size, _, shown in marks
        if shown
    ]
    labels = [label for *_, label, shown in marks if shown]
    if record.content.ticks:
        legend.append(Line2D([], [], color="tab:gray", marker="|", linestyle="", markersize=12))
        labels.append("content fragment")
    if record.error is not None:
        legend.append(Line2D([], [], color="tab:red", marker="X", linestyle="", markersize=8))
        labels.append("error")
    else:
        legend.append(Line2D([], [], color="0.4", linestyle="--", linewidth=1))
        labels.append("finish")
    figure.legend(
        legend,
        labels,
        loc="outside lower center",
        # One row fits five names across the figure; six go in two rows.
        ncol=len(labels) if len(labels) <= 5 else (len(labels) + 1) // 2,
        frameon=False,
        fontsize="small",
    )
    axes.set_ylim(-0.6, max(len(lanes), 1) - 0.1)
    axes.set_title(_display(title) if title else "tool-call stream timeline")
    with warnings.catch_warnings():
        # A name or key in a script the font lacks is drawn as boxes; no warning per glyph.
        warnings.filterwarnings("ignore", "Glyph .* missing from font", UserWarning)
        if any(lane.fields for lane in calls):
            _write_keys(figure, axes, calls, rows)
        if path is not None:
            figure.savefig(path, dpi=110)
    return figure


def _write_keys(figure: Any, axes: Any, calls: list[Lane], rows: dict[int, int]) -> None:
    """Write each lane's field keys under their triangles, where each has room (see ``draw``)."""
    # Measured where they land: the layout is settled first, and the keys stay out of it.
    figure.draw_without_rendering()
    gap = _KEY_GAP * figure.dpi / 72
    for lane in calls:
        y = rows[id(lane)] - _FIELD_DROP
        right = float("-inf")
        for at, same in groupby(lane.fields, key=lambda mark: mark[0]):
            keys = ", ".join(key for _, key in same)
            if len(keys) > _KEY_CHARS:
                keys = keys[: _KEY_CHARS - 1] + "…"
            label = axes.annotate(
                _display(keys),
                (at, y),
                textcoords="offset points",
                xytext=(0, -5),
                ha="center",
                va="top",
                fontsize=_KEY_POINTS,
                color=_FIELD,
            )
            label.set_in_layout(False)
            box = label.get_window_extent()
            if box.x0 < right + gap:
                label.remove()
            else:
                right = box.x1
