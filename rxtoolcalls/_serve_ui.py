"""``serve --ui``: the page, and one agent run over the server's recordings as AG-UI events.

Each client of ``GET /ui/events`` gets a run of its own: ``agent_loop`` whose ``open_stream``
hands out the server's recordings in order (request 0 the first, a retry the next one, after
the last the last again, or with ``loop`` the first), paced by the server's ``delay`` (or its
``delays`` entry) and dropped where its ``cut`` says, as over HTTP. The tools are the ones
given, else echo stubs for every name the recordings call. The loop's events go through
:func:`rxtoolcalls.ui.to_ag_ui`, each written by :func:`rxtoolcalls.ui.ag_ui_sse`. The request
numbers of one run are its own: two pages replay the same run, neither moves the HTTP routes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any

import reactivex
from reactivex import Observable, abc
from reactivex import operators as ops
from reactivex.disposable import CompositeDisposable, SerialDisposable

from ._errors import StreamInterruptedError
from ._types import ToolCallStarted
from .operators import lifecycle
from .wires import lookup

__all__ = ["BACKOFF", "RETRIES", "Replay", "echo_tool", "echo_tools", "page", "run_events"]

RETRIES = 2
"""Times a turn whose stream failed is streamed again (from the next recording)."""

BACKOFF = 0.25
"""Seconds before the first retry (doubled for each next one): short, for a demo."""


def page() -> bytes:
    """The page, as the package ships it (``rxtoolcalls/data/ui/index.html``)."""
    return resources.files("rxtoolcalls").joinpath("data/ui/index.html").read_bytes()


def _called(recording: Sequence[dict[str, Any]]) -> list[str]:
    """The names of the tool calls a recording starts (up to its failure, if it fails)."""
    names: list[str] = []

    def seen(event: object) -> None:
        if isinstance(event, ToolCallStarted):
            names.append(event.name)

    reactivex.from_iterable(recording).pipe(lifecycle()).subscribe(seen, lambda _: None)
    return names


def echo_tools(
    recordings: Sequence[Sequence[dict[str, Any]]],
    given: Mapping[str, Callable[..., Any]] | None = None,
) -> dict[str, Callable[..., Any]]:
    """``given``, and an echo stub for every other tool the recordings call.

    A stub answers ``{"tool": name, "arguments": {...}}``, as ``chat --tools`` does.
    """
    tools = dict(given or {})
    for name in dict.fromkeys(n for recording in recordings for n in _called(recording)):
        if name not in tools:
            tools[name] = echo_tool(name)
    return tools


def echo_tool(name: str) -> Callable[..., str]:
    """A stub for tool ``name``: it answers ``{"tool": name, "arguments": {...}}``."""

    def echo(**arguments: Any) -> str:
        return json.dumps({"tool": name, "arguments": arguments})

    return echo


Plan = Callable[[int], tuple[int, Sequence[dict[str, Any]], Sequence[float], int]]
"""A request number's recording index, chunks, pause after each chunk and chunks sent."""


class Replay:
    """The recordings one run streams, as ``plan`` (the server's) says for each request.

    ``open_stream(messages)`` is the loop's: each call is the next request, numbered from 0.
    """

    def __init__(self, plan: Plan, recordings: int, scheduler: abc.SchedulerBase) -> None:
        self.plan = plan
        self.recordings = recordings
        """How many recordings there are: a run has at most one turn per recording."""
        self.scheduler = scheduler
        self.requests = 0

    def open_stream(self, messages: object, max_tokens: int | None = None) -> Observable[Any]:
        """The next recording, paced; ``messages`` and ``max_tokens`` do not change it."""
        number = self.requests
        self.requests += 1
        _, chunks, pauses, shown = self.plan(number)
        return _paced(chunks, pauses, shown, self.scheduler)


def _paced(
    chunks: Sequence[dict[str, Any]],
    pauses: Sequence[float],
    shown: int,
    scheduler: abc.SchedulerBase,
) -> Observable[dict[str, Any]]:
    """``chunks`` one at a time, ``pauses[i]`` after the i-th; dropped after ``shown``."""

    def subscribe(
        observer: abc.ObserverBase[dict[str, Any]], _: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        pending = SerialDisposable()

        def send(index: int) -> None:
            if index == shown:
                if shown < len(chunks):
                    observer.on_error(
                        StreamInterruptedError(
                            f"the replayed stream was dropped after {shown} of {len(chunks)} chunks"
                        )
                    )
                else:
                    observer.on_completed()
                return
            observer.on_next(chunks[index])
            pending.disposable = scheduler.schedule_relative(
                pauses[index], lambda _s, _v: send(index + 1)
            )

        pending.disposable = scheduler.schedule(lambda _s, _v: send(0))
        return CompositeDisposable(pending)

    return reactivex.create(subscribe)


def run_events(
    replay: Replay,
    tools: Mapping[str, Callable[..., Any]],
    wire: str | None,
) -> Observable[bytes]:
    """One agent run over ``replay`` as AG-UI Server-Sent Events, one ``bytes`` per event."""
    from .agent import agent_loop
    from .ui import ag_ui_sse, to_ag_ui

    prompt = "(a replayed agent run)"
    messages = (
        lookup(wire).client.messages(prompt, None)
        if wire is not None
        else [{"role": "user", "content": prompt}]
    )
    return agent_loop(
        replay.open_stream,
        tools,
        messages,
        fields=True,
        text=True,
        max_turns=max(1, replay.recordings),
        retries=RETRIES,
        backoff=BACKOFF,
        scheduler=replay.scheduler,
    ).pipe(to_ag_ui(), ops.map(ag_ui_sse))
