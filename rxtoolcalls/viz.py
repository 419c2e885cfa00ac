"""Timeline pictures of a turn: one lane per tool call, and a content lane if there was content.

``trace(chunks)`` reads a stream once and records when each fragment arrived; ``draw(trace)``
turns it into a marble diagram. ``agent_timeline(...)`` runs an agent loop and records when
each chunk came and each tool ran; ``draw_agent(...)`` draws one or two such runs, stacked.
Works headless (Agg) and inline in Jupyter; matplotlib is imported only to draw.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any, Literal, NamedTuple

from reactivex import Observable
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler

from ._agent_io import open_chunks
from ._close import build_turns, check_finish, single_turn
from ._core import Call, keeping
from ._errors import ToolCallStreamError
from ._fields import CallFields, FieldPath, OnField
from ._policy import Policy
from ._reader import reader as TurnReader
from ._types import ToolCall, call_input, documented_state
from .agent import (
    AgentEvent,
    Conversation,
    ToolCallEarly,
    ToolCallRetracted,
    TurnFinished,
    TurnRetried,
    agent_loop,
    check_tools,
)

__all__ = [
    "AgentMark",
    "AgentTimeline",
    "Lane",
    "ToolRun",
    "Trace",
    "agent_timeline",
    "draw",
    "draw_agent",
    "trace",
]


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

        def mark(piece: str) -> None:
            fields.text(piece)
            lane.ticks.append(now)

        call.sink = keeping(call, mark)

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
        _mark_error(axes, record.error, record.end, cross, size=120)
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


def _mark_error(axes: Any, error: Exception, at: float, y: float, size: int, **text: Any) -> None:
    """A red cross where the run failed, labelled with the error's type."""
    axes.scatter([at], [y], marker="X", s=size, color="tab:red", zorder=5)
    axes.annotate(
        type(error).__name__,
        (at, y),
        textcoords="offset points",
        xytext=(-10, 6),
        ha="right",
        color="tab:red",
        **text,
    )


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


# -- An agent loop over time ----------------------------------------------------------------


@documented_state
@dataclass(frozen=True, slots=True)
class ToolRun:
    """One run of the tool ``name``, from ``start`` to ``end`` seconds (``None``: still running).

    ``turn`` and ``call`` are the call it ran for, ``None`` when no event announced that call
    (a resumed turn's). ``early``: a ``ToolCallEarly`` started it; ``failed``: it raised.
    """

    name: str
    start: float
    end: float | None
    turn: int | None = None
    call: ToolCall | None = None
    early: bool = False
    failed: bool = False


@documented_state
@dataclass(frozen=True, slots=True)
class AgentMark:
    """A moment of the loop, at ``at`` seconds, in turn ``turn``.

    ``kind``: a stream was requested (``"request"``), or the loop emitted ``ToolCallEarly``
    (``"early"``), ``TurnFinished`` (``"finished"``), ``ToolCallRetracted`` (``"retracted"``)
    or ``TurnRetried`` (``"retried"``). ``call`` is the call of an early or retracted mark.
    """

    at: float
    kind: Literal["request", "early", "finished", "retracted", "retried"]
    turn: int
    call: ToolCall | None = None


@documented_state
@dataclass(frozen=True, slots=True)
class AgentTimeline:
    """An agent loop's run: what happened when, in seconds since ``agent_timeline`` began.

    ``chunks`` are the arrival times of every turn's chunks, ``runs`` the tools' runs in the
    order they started, ``marks`` the moments drawn, in order, ``events`` all the loop emitted;
    ``end`` is when the ``Conversation`` or the ``error`` came. ``early`` is the loop's
    ``early=``.
    """

    chunks: tuple[float, ...]
    runs: tuple[ToolRun, ...]
    marks: tuple[AgentMark, ...]
    events: tuple[AgentEvent, ...]
    end: float
    early: frozenset[str] = frozenset()
    error: Exception | None = None

    @property
    def lanes(self) -> tuple[str, ...]:
        """The lanes' labels, top to bottom: ``"stream"``, then one per call, by turn and index."""
        return ("stream", *(label for _, label in _call_lanes(self)))


class _Timing:
    """A tool's run while it goes on; the arguments find its call once the loop has ended."""

    __slots__ = ("args", "end", "failed", "kwargs", "name", "seq", "start")

    def __init__(
        self, name: str, args: tuple[object, ...], kwargs: dict[str, object], seq: int, at: float
    ) -> None:
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.seq = seq
        self.start = at
        self.end: float | None = None
        self.failed = False

    def ran_for(self, call: ToolCall) -> bool:
        """Whether the agent loop called the tool with ``call``'s arguments."""
        if call.name != self.name:
            return False
        given = call_input(call)
        if isinstance(given, str):
            return self.args == (given,) and not self.kwargs
        return not self.args and self.kwargs == given


class _Announced(NamedTuple):
    """A call a tool may run for: ``ToolCallEarly`` (``early``) or its turn's ``TurnFinished``."""

    seq: int
    turn: int
    call: ToolCall
    early: bool


def _announcement(timing: _Timing, announced: list[_Announced], taken: set[int]) -> int | None:
    """The place of the announcement ``timing`` ran for: its call's first before it, not taken."""
    for number, each in enumerate(announced):
        if each.seq >= timing.seq:
            return None
        if number not in taken and timing.ran_for(each.call):
            return number
    return None


class _Recorder:
    """What one ``agent_timeline`` run saw, stamped as it happened, from any thread.

    Every stamp takes a sequence number under one lock, so that whatever the clock's
    resolution, a tool's run is told to the first call before it that it may have run for:
    one its ``ToolCallEarly`` announced, or its turn's ``TurnFinished`` unless a
    ``ToolCallEarly`` of that turn announced it (the loop then takes that run's answer; an
    early tool may start after its turn finished). A run after a retraction may take the
    retracted announcement of its call: the same turn and call.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.origin = clock()
        self.seq = 0
        self.turns = 0  # the last TurnFinished's number
        self.chunks: list[float] = []
        self.marks: list[AgentMark] = []
        self.events: list[AgentEvent] = []
        self.timings: list[_Timing] = []
        self.announced: list[_Announced] = []
        # This turn's early calls not taken back, by turn and index: answered by their run.
        self.early: dict[tuple[int, int], ToolCall] = {}
        self.end: float | None = None
        self.error: Exception | None = None
        self.done = threading.Event()

    def _stamp(self) -> tuple[int, float]:
        """The next sequence number and the time; with the lock held."""
        self.seq += 1
        return self.seq, self.clock() - self.origin

    def chunk(self, _: object) -> None:
        with self.lock:
            self.chunks.append(self._stamp()[1])

    def stream(self, open_stream: Callable[..., object]) -> Callable[..., Observable[Any]]:
        """``open_stream``, its request marked and its chunks stamped as they arrive."""

        @functools.wraps(open_stream)  # the same signature: agent_loop checks max_tokens on it
        def opened(*args: Any, **kwargs: Any) -> Observable[Any]:
            with self.lock:
                self.marks.append(AgentMark(self._stamp()[1], "request", self.turns + 1))
            return open_chunks(open_stream(*args, **kwargs), None).pipe(ops.do_action(self.chunk))

        return opened

    def tool(self, name: str, tool: Callable[..., Any]) -> Callable[..., Any]:
        """``tool``, timed: sync, ``async`` or returning an Observable (its attributes kept)."""

        @functools.wraps(tool)  # keeps ``parameters``, the schema the loop checks
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                seq, at = self._stamp()
                timing = _Timing(name, args, kwargs, seq, at)
                self.timings.append(timing)
            try:
                result = tool(*args, **kwargs)
            except Exception:
                self.stopped(timing, failed=True)
                raise
            if isinstance(result, Observable):
                # Stamped before the loop hears of the end; a dispose ends the run too.
                return result.pipe(
                    ops.do_action(
                        on_error=lambda _: self.stopped(timing, failed=True),
                        on_completed=lambda: self.stopped(timing),
                    ),
                    ops.finally_action(lambda: self.stopped(timing)),
                )
            if inspect.isawaitable(result):
                return self._awaited(timing, result)
            self.stopped(timing)
            return result

        return timed

    async def _awaited(self, timing: _Timing, result: Awaitable[Any]) -> Any:
        try:
            return await result
        except Exception:
            self.stopped(timing, failed=True)
            raise
        finally:
            self.stopped(timing)  # cancelled too: it ran until then

    def stopped(self, timing: _Timing, failed: bool = False) -> None:
        """Stamp the end of ``timing``'s run, once."""
        with self.lock:
            if timing.end is None:
                timing.end = self._stamp()[1]
                timing.failed = failed

    def on_next(self, event: AgentEvent) -> None:
        with self.lock:
            seq, at = self._stamp()
            self.events.append(event)
            if isinstance(event, ToolCallEarly):
                self.marks.append(AgentMark(at, "early", event.turn, event.call))
                self.early[event.turn, event.call.index] = event.call
                if not event.reused:
                    self.announced.append(_Announced(seq, event.turn, event.call, True))
            elif isinstance(event, TurnFinished):
                self.turns = event.turn
                self.marks.append(AgentMark(at, "finished", event.turn))
                for call in event.assistant.tool_calls:
                    if self.early.pop((event.turn, call.index), None) != call:
                        self.announced.append(_Announced(seq, event.turn, call, False))
            elif isinstance(event, ToolCallRetracted):
                self.marks.append(AgentMark(at, "retracted", event.turn, event.call))
                self.early.pop((event.turn, event.call.index), None)
            elif isinstance(event, TurnRetried):
                self.marks.append(AgentMark(at, "retried", event.turn))
            elif isinstance(event, Conversation):
                self.end = at

    def on_error(self, error: Exception) -> None:
        with self.lock:
            self.end = self._stamp()[1]
            self.error = error
        self.done.set()

    def on_completed(self) -> None:
        with self.lock:
            if self.end is None:
                self.end = self._stamp()[1]
        self.done.set()

    def timeline(self, early: frozenset[str]) -> AgentTimeline:
        """What was seen until now, each run told to its call."""
        with self.lock:
            end = self.end if self.end is not None else self._stamp()[1]
            taken: set[int] = set()
            runs = []
            for timing in self.timings:
                number = _announcement(timing, self.announced, taken)
                if number is None:
                    runs.append(
                        ToolRun(timing.name, timing.start, timing.end, failed=timing.failed)
                    )
                    continue
                taken.add(number)
                _, turn, call, early_run = self.announced[number]
                runs.append(
                    ToolRun(
                        timing.name, timing.start, timing.end, turn, call, early_run, timing.failed
                    )
                )
            return AgentTimeline(
                tuple(self.chunks),
                tuple(runs),
                tuple(self.marks),
                tuple(self.events),
                end,
                early,
                self.error,
            )


def agent_timeline(
    open_stream: Callable[..., object],
    tools: Mapping[str, Callable[..., Any]],
    messages: Sequence[Mapping[str, Any]],
    *,
    early: Collection[str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    **options: Any,
) -> AgentTimeline:
    """Run ``agent_loop(open_stream, tools, messages, early=early, **options)`` and time it.

    Blocks until the conversation ends, the loop running on threads as ``.run()`` runs it (a
    turn's tools at once). Records, by ``clock`` (seconds): each request and each chunk as
    the loop gets it, each tool's run (each tool wrapped, sync, ``async`` or an Observable),
    and the loop's events. A loop that fails is recorded up to its error (``error``). Streams
    are read without asyncio: an SDK ``Stream``, an iterable or an Observable of events.

    Arguments ``agent_loop`` refuses raise as it raises them (``TypeError``, ``ValueError``),
    as do tools that are not callables and a ``scheduler`` option; nothing has run then.
    """
    check_tools(tools)
    if "scheduler" in options:
        raise TypeError("agent_timeline runs the loop on threads of its own: no scheduler")
    recorder = _Recorder(clock)
    timed = {name: recorder.tool(name, tool) for name, tool in tools.items()}
    loop = agent_loop(recorder.stream(open_stream), timed, messages, early=early, **options)
    loop.subscribe(
        recorder.on_next,
        recorder.on_error,
        recorder.on_completed,
        scheduler=NewThreadScheduler(),
    )
    recorder.done.wait()
    return recorder.timeline(frozenset(early or ()))


_LaneKey = tuple[int | None, int | None, str]  # a call's turn, index and name


def _lane_key(turn: int | None, call: ToolCall | None, name: str) -> _LaneKey:
    return (turn, None, name) if turn is None or call is None else (turn, call.index, call.name)


def _call_lanes(record: AgentTimeline) -> list[tuple[_LaneKey, str]]:
    """Each call's lane key and label, by turn and index; runs told to no call last, by name."""
    keys = {_lane_key(run.turn, run.call, run.name) for run in record.runs}
    keys |= {_lane_key(m.turn, m.call, m.call.name) for m in record.marks if m.call is not None}
    ordered = sorted(keys, key=lambda k: (k[0] is None, k[0] or 0, k[1] or 0, k[2]))
    turns = {turn for turn, index, _ in ordered if index is not None}
    lanes = []
    for turn, index, name in ordered:
        if index is None:
            label = name
        elif len(turns) == 1:
            label = f"{index}: {name}"
        else:
            label = f"turn {turn}, {index}: {name}"
        lanes.append(((turn, index, name), _display(label)))
    return lanes


_STREAM = "0.35"
_LATE = "tab:blue"
_EARLY = "tab:orange"
_LANE_INCHES = 0.42


def draw_agent(
    records: AgentTimeline | Sequence[AgentTimeline],
    path: str | Path | None = None,
    *,
    titles: Sequence[str] | None = None,
) -> Any:
    """Draw one or two agent runs stacked, top to bottom as given, on one time axis.

    Each has a stream lane (a tick per chunk, ▸ where a stream was requested, ○ where a turn
    was retried) and a lane per call: a bar from its tool's start to its end (orange when
    started early, blue after its turn; faded when still running at the end, outlined red
    when it raised), ◆ at its ``ToolCallEarly``, a red ``x`` where it was retracted. A dashed line
    marks each ``TurnFinished``, a solid one the answer, a red ✕ the loop's error. A legend
    names the marks drawn. The title
    says ``early=`` and when the answer came, unless ``titles`` gives one per run. Saved to
    ``path`` if given (format by suffix); returns the matplotlib figure.

    ``ValueError`` for no run, more than two, or a title count that does not match;
    ``TypeError`` for a run that is not an ``AgentTimeline``.
    """
    shown = [records] if isinstance(records, AgentTimeline) else records
    if not isinstance(shown, Sequence):
        raise TypeError(f"draw_agent draws AgentTimeline runs, not {type(shown).__name__}")
    if not 1 <= len(shown) <= 2:
        raise ValueError(f"draw_agent draws one or two runs, not {len(shown)}")
    for record in shown:
        if not isinstance(record, AgentTimeline):
            raise TypeError(f"draw_agent draws AgentTimeline runs, not {type(record).__name__}")
    if titles is not None and len(titles) != len(shown):
        raise ValueError(f"{len(titles)} titles for {len(shown)} runs: give one per run")
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    heights = [1 + len(_call_lanes(record)) for record in shown]
    figure, axes_list = plt.subplots(
        len(shown),
        1,
        sharex=True,
        squeeze=False,
        figsize=(8, 0.75 + sum(0.55 + _LANE_INCHES * rows for rows in heights)),
        height_ratios=[rows + 1.2 for rows in heights],
        layout="constrained",
    )
    for number, (record, axes) in enumerate(zip(shown, axes_list[:, 0], strict=True)):
        title = titles[number] if titles is not None else _agent_title(record)
        _draw_run(axes, record, _display(title))
    axes_list[-1, 0].set_xlabel("seconds")
    axes_list[-1, 0].set_xlim(left=0)
    runs = [run for record in shown for run in record.runs]
    kinds = {mark.kind for record in shown for mark in record.marks}
    marks = [
        (_mark(_STREAM, "|", markersize=10), "chunk", True),
        (_mark(_STREAM, ">"), "request", "request" in kinds),
        (_mark("tab:red", "o", fillstyle="none"), "TurnRetried", "retried" in kinds),
        (Patch(color=_EARLY), "tool started early", any(run.early for run in runs)),
        (Patch(color=_LATE), "tool after its turn", any(not run.early for run in runs)),
        (_mark(_EARLY, "D", markeredgecolor="black"), "ToolCallEarly", "early" in kinds),
        (_mark("tab:red", "x", markeredgewidth=2), "ToolCallRetracted", "retracted" in kinds),
        (_mark("0.4", linestyle="--", linewidth=1), "TurnFinished", "finished" in kinds),
        (
            _mark("black", linestyle="-", linewidth=1.2),
            "answer",
            any(r.error is None for r in shown),
        ),
        (_mark("tab:red", "X"), "error", any(r.error is not None for r in shown)),
    ]
    kept = [(handle, label) for handle, label, wanted in marks if wanted]
    figure.legend(
        [handle for handle, _ in kept],
        [label for _, label in kept],
        loc="outside lower center",
        ncol=min(len(kept), 4),
        frameon=False,
        fontsize="small",
    )
    if path is not None:
        with warnings.catch_warnings():
            # A tool name in a script the font lacks is drawn as boxes; no warning per glyph.
            warnings.filterwarnings("ignore", "Glyph .* missing from font", UserWarning)
            figure.savefig(path, dpi=110)
    return figure


def _mark(color: str, marker: str = "", **style: Any) -> Any:
    """A legend's handle: ``marker`` alone in ``color``, or a line given a ``linestyle``."""
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, marker=marker, **{"linestyle": "", **style})


def _agent_title(record: AgentTimeline) -> str:
    """``early=`` of the run and when its answer (or its error) came."""
    named = ", ".join(repr(name) for name in sorted(record.early))
    said = f"early={{{named}}}" if record.early else "without early"
    if record.error is not None:
        return f"{said}: {type(record.error).__name__} after {record.end:.2f} s"
    return f"{said}: the answer after {record.end:.2f} s"


def _draw_run(axes: Any, record: AgentTimeline, title: str) -> None:
    """One run on ``axes``: the stream lane on top, a lane per call under it."""
    lanes = _call_lanes(record)
    top = len(lanes)
    rows = {key: top - 1 - number for number, (key, _) in enumerate(lanes)}
    for y in range(top + 1):
        axes.hlines(y, 0, record.end, color="0.88", linewidth=1, zorder=1)
    axes.scatter(record.chunks, [top] * len(record.chunks), marker="|", s=110, color=_STREAM)
    for run in record.runs:
        y = rows[_lane_key(run.turn, run.call, run.name)]
        end = record.end if run.end is None else run.end
        axes.barh(
            y,
            max(end - run.start, 0.0),
            left=run.start,
            height=0.5,
            color=_EARLY if run.early else _LATE,
            alpha=0.4 if run.end is None else 1.0,
            edgecolor="tab:red" if run.failed else "none",
            linewidth=1.5,
            zorder=2,
        )
    for mark in record.marks:
        if mark.kind == "request":
            axes.scatter([mark.at], [top], marker=">", s=30, color=_STREAM, zorder=3)
        elif mark.kind == "retried":
            axes.scatter([mark.at], [top], marker="o", s=40, facecolor="none", color="tab:red")
        elif mark.kind == "finished":
            axes.axvline(mark.at, color="0.4", linestyle="--", linewidth=1, zorder=1)
            axes.annotate(
                f"turn {mark.turn}",
                (mark.at, top + 0.45),
                textcoords="offset points",
                xytext=(-3, 0),
                ha="right",
                va="center",
                fontsize="x-small",
                color="0.3",
            )
        elif mark.call is not None:
            y = rows[_lane_key(mark.turn, mark.call, mark.call.name)]
            if mark.kind == "early":
                axes.scatter(
                    [mark.at], [y], marker="D", s=30, color=_EARLY, edgecolor="black", zorder=4
                )
            else:
                axes.scatter(
                    [mark.at], [y], marker="x", s=60, linewidth=2, color="tab:red", zorder=5
                )
    if record.error is None:
        axes.axvline(record.end, color="black", linewidth=1.2, zorder=1)
    else:
        _mark_error(axes, record.error, record.end, top, size=90, fontsize="small")
    axes.set_yticks(range(top + 1))
    axes.set_yticklabels([label for _, label in reversed(lanes)] + ["stream"])
    axes.set_ylim(-0.6, top + 0.8)
    axes.set_title(title, fontsize="medium", loc="left")
