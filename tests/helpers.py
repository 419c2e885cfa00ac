"""Builders for chunk streams, the fixture loader, and the plain-loop reference assembler."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import reactivex
from reactivex import operators as ops

import rxtoolcalls as rt

FIXTURES = Path(__file__).parent / "fixtures" / "streams"

Chunk = dict[str, Any]


def extra(name: str) -> str:
    """Why a test skips without the ``name`` extra: its name and how to install it."""
    return f"needs the {name} extra: pip install 'rxtoolcalls[{name}]'"


def fixture_names() -> list[str]:
    return sorted(p.name.removesuffix(".jsonl") for p in FIXTURES.glob("*.jsonl"))


def load_fixture(name: str) -> list[Chunk]:
    with (FIXTURES / f"{name}.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def load_expected(name: str) -> dict[str, Any] | None:
    path = FIXTURES / f"{name}.expected.json"
    if not path.exists():
        return None
    value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return value


def choice(delta: dict[str, Any] | None, finish: str | None = None, index: int = 0) -> Chunk:
    """One chunk with one choice."""
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


def content(text: str, index: int = 0) -> Chunk:
    return choice({"content": text}, index=index)


def call_open(
    index: int, id: str | None, name: str | None, arguments: str = "", choice_index: int = 0
) -> Chunk:
    entry: dict[str, Any] = {
        "index": index,
        "type": "function",
        "function": {"arguments": arguments},
    }
    if id is not None:
        entry["id"] = id
    if name is not None:
        entry["function"]["name"] = name
    return choice({"tool_calls": [entry]}, index=choice_index)


def args(index: int, piece: str, choice_index: int = 0) -> Chunk:
    return choice(
        {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, index=choice_index
    )


def finish(reason: str | None = "tool_calls", index: int = 0) -> Chunk:
    return choice({}, reason, index=index)


USAGE_CHUNK: Chunk = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7}}


def run_assemble(chunks: Iterable[object], **kwargs: Any) -> rt.AssistantTurn:
    return reactivex.from_iterable(list(chunks)).pipe(rt.assemble(**kwargs)).run()


def run_pipe(chunks: Iterable[object], **kwargs: Any) -> rt.AssistantTurn:
    return (
        reactivex.from_iterable(list(chunks))
        .pipe(
            rt.group_by_index(),
            rt.concat_arguments(),
            rt.on_finish_reason(**kwargs),
            rt.atomic_batch(),
        )
        .run()
    )


def run_assembler(chunks: Iterable[object], **kwargs: Any) -> rt.AssistantTurn:
    assembler = rt.Assembler(**kwargs)
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler.close()


def outcome(fn: Any, chunks: Sequence[object], **kwargs: Any) -> Any:
    """The turn, or ``(error type, message)``: comparable across spellings."""
    try:
        return fn(chunks, **kwargs)
    except rt.ToolCallStreamError as exc:
        return (type(exc), str(exc))


def collect(observable: reactivex.Observable[Any]) -> tuple[list[Any], list[Exception], bool]:
    """Subscribe synchronously; return (values, errors, completed)."""
    values: list[Any] = []
    errors: list[Exception] = []
    done: list[bool] = []
    observable.subscribe(values.append, errors.append, lambda: done.append(True))
    return values, errors, bool(done)


def reference(chunks: Iterable[Chunk]) -> list[tuple[int, str, str, str]]:
    """A plain loop over well-formed OpenAI streams: (index, id, name, arguments) by index."""
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for ch in chunk.get("choices") or []:
            for tc in (ch.get("delta") or {}).get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], [None, None, []])
                if tc.get("id"):
                    slot[0] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    slot[1] = fn["name"]
                if fn.get("arguments"):
                    slot[2].append(fn["arguments"])
    return [(i, s[0], s[1], "".join(s[2])) for i, s in sorted(calls.items())]


def summary(turn: rt.AssistantTurn) -> list[tuple[int, str, str, str]]:
    return [(c.index, c.id, c.name, c.arguments) for c in turn.tool_calls]


def count(observable: reactivex.Observable[Any]) -> int:
    result: int = observable.pipe(ops.count()).run()
    return result


def tool_turn(*calls: tuple[str, str, str]) -> list[dict[str, Any]]:
    return [
        call_open(i, cid, name, arguments) for i, (cid, name, arguments) in enumerate(calls)
    ] + [finish("tool_calls")]


def answer(text: str = "Done.") -> list[dict[str, Any]]:
    return [content(text), finish("stop")]


class Script:
    """open_stream for the agent loop: one scripted turn per call (the last repeats), each
    request kept in ``seen``."""

    def __init__(self, *turns: Any) -> None:
        self.turns = list(turns)
        self.seen: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> Any:
        self.seen.append(messages)
        turn = self.turns[min(len(self.seen) - 1, len(self.turns) - 1)]
        return turn if isinstance(turn, reactivex.Observable) else reactivex.from_iterable(turn)


def open_sockets() -> frozenset[str]:
    """This process's open sockets, named as /proc names them (``socket:[inode]``)."""
    names = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            name = os.readlink(os.path.join("/proc/self/fd", fd))
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if name.startswith("socket:"):
            names.add(name)
    return frozenset(names)


def settle(done: Callable[[], bool], bound: float = 5.0) -> bool:
    """Wait until ``done()`` (polled every 10 ms) for at most ``bound`` seconds; whether it did."""
    deadline = time.monotonic() + bound
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def garbage_of(run: Callable[[], object]) -> int:
    """Objects ``run()`` left unreachable in cycles (found by a collection, none running)."""
    gc.collect()
    gc.disable()
    try:
        run()
        return gc.collect()
    finally:
        gc.enable()


class NotADict(Mapping[str, Any]):
    """A ``Mapping`` that is no dict: read as one at an event's top, refused deeper by a wire."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def serve_command(capture: str) -> tuple[subprocess.Popen[str], int]:
    """``rxtoolcalls serve capture`` started on a free port: the process and that port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "rxtoolcalls", "serve", capture, "--port", "0", "--delay", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    base_url = process.stdout.readline().strip().rsplit(" ", 1)[-1]
    return process, int(base_url.rsplit(":", 1)[1].split("/")[0])
