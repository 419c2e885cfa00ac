"""Throughput, scaling, memory and concurrency of rxtoolcalls against a hand loop and the peers.

Run: ``python tests/benchmarks/bench.py`` (peers with ``pip install -e '.[bench]'``).
Every implementation runs on the same pre-built streams in one process; each result is checked
against the hand loop's; the minimum of several interleaved repetitions is quoted.

The other wires (OpenAI Responses, Anthropic Messages, AWS Bedrock ConverseStream) get the same
calls in their own event shapes, a hand loop each, and their SDK's accumulator over the SDK's
typed events (Bedrock has none: boto3 yields dicts, and no peer assembles its calls). The Chat
fast path is compared, in the same run, with the code before the split into wires, loaded
from git (``--baseline REV``); ``--wires`` runs only those sections (with Gemini's streamed and
whole-call turns, ``--gemini`` alone). ``--bytes`` times ``from_sse`` + ``assemble()`` over raw
SSE bytes against a standard-library hand loop, with and without the ``fast`` extra, on every
wire (Bedrock: ``from_eventstream`` over AWS event-stream frames), the UI signals from one
pass, and thousands of concurrent async byte sources; ``--sdk`` times the paths through the
openai client; ``--e2e`` runs all of those in one run and the curves against stream size
(plotted with ``--plot``). ``--fields`` times ``fields()`` on one call of 8-128 KiB in
16-character fragments against ``assemble()`` alone and against jiter's partial re-parse
after each fragment (plotted with ``--plot``); the full run includes it. ``--early`` times
the agent loop with ``early=`` against without, on a two-call turn paced by ``ReplayServer``
through the openai and anthropic clients, sync and async; the full run includes it too.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import io
import json
import os
import platform
import statistics
import struct
import sys
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import reactivex
from reactivex import operators as ops
from reactivex.scheduler import CurrentThreadScheduler

import rxtoolcalls as rt
from rxtoolcalls._eventstream import encode_frame

Calls = list[tuple[str, str, Any]]  # (id, name, parsed arguments), ordered by index
FRAGMENT = 4  # characters per argument piece, as in the issue's measurements
SIZES = (2_500, 10_000, 100_000, 1_000_000)
LAYOUTS = ("1 call", "8 calls", "8 interleaved")
PEER_MAX = 10_000  # the peers are quadratic or slow: beyond this one size takes minutes
OBJECT_MAX = 100_000  # a million pydantic chunk objects need gigabytes before any timing


# -- streams --------------------------------------------------------------------------------


def _arguments(length: int, seed: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    body = "".join(letters[(seed * 7 + i * 13) % 26] for i in range(max(1, length - 10)))
    return json.dumps({"q": body})


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


Step = tuple[str, int, str]  # ("open" | "piece" | "close", call index, argument piece)


def _steps(fragments: int, layout: str) -> tuple[list[str], list[Step]]:
    """Each call's arguments, and the calls' steps in arrival order (shared by every wire)."""
    calls = 1 if layout == "1 call" else 8
    per_call = fragments // calls
    texts: list[str] = []
    plans: list[list[Step]] = []
    for index in range(calls):
        text = _arguments(per_call * FRAGMENT, index)
        texts.append(text)
        pieces = [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]
        steps: list[Step] = [("open", index, "")]
        steps += [("piece", index, p) for p in pieces]
        plans.append([*steps, ("close", index, "")])
    if layout == "8 interleaved":
        longest = max(len(q) for q in plans)
        return texts, [q[i] for i in range(longest) for q in plans if i < len(q)]
    return texts, [step for q in plans for step in q]


def build_stream(fragments: int, layout: str) -> list[dict[str, Any]]:
    """About ``fragments`` argument pieces of FRAGMENT characters, one per chunk.

    The chunks are created in arrival order, as a parser reading the wire would create them:
    built call by call and then shuffled into place, the interleaved stream ran ~2x slower
    for every implementation, from memory latency alone.
    """
    chunks = [_chunk({"role": "assistant", "content": None})]
    for kind, index, piece in _steps(fragments, layout)[1]:
        if kind == "close":
            continue  # Chat Completions closes no call: the finish_reason ends them all
        entry: dict[str, Any] = (
            {
                "index": index,
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": f"tool_{index}", "arguments": ""},
            }
            if kind == "open"
            else {"index": index, "function": {"arguments": piece}}
        )
        chunks.append(_chunk({"tool_calls": [entry]}))
    chunks.append(_chunk({}, "tool_calls"))
    return chunks


def fragment_count(chunks: list[dict[str, Any]]) -> int:
    return sum(
        1
        for c in chunks
        for ch in c["choices"]
        for _ in (ch["delta"] or {}).get("tool_calls") or ()
    )


# -- implementations ------------------------------------------------------------------------


def hand_loop_dicts(chunks: Iterable[dict[str, Any]]) -> Calls:
    """The same work written by hand: index keying, id/name, concatenation, one parse."""
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            tool_calls = choice["delta"].get("tool_calls")
            if tool_calls:
                for tc in tool_calls:
                    slot = calls.get(tc["index"])
                    fn = tc["function"]
                    if slot is None:
                        slot = calls[tc["index"]] = [tc.get("id"), fn.get("name"), []]
                    piece = fn.get("arguments")
                    if piece:
                        slot[2].append(piece)
    return [(s[0], s[1], json.loads("".join(s[2]))) for _, s in sorted(calls.items())]


def hand_loop_objects(chunks: list[Any]) -> Calls:
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            tool_calls = choice.delta.tool_calls
            if tool_calls:
                for tc in tool_calls:
                    slot = calls.get(tc.index)
                    fn = tc.function
                    if slot is None:
                        slot = calls[tc.index] = [tc.id, fn.name, []]
                    if fn.arguments:
                        slot[2].append(fn.arguments)
    return [(s[0], s[1], json.loads("".join(s[2]))) for _, s in sorted(calls.items())]


def _calls(turn: rt.AssistantTurn) -> Calls:
    return [(c.id, c.name, c.parsed_arguments) for c in turn.tool_calls]


def ours_assembler(chunks: list[Any]) -> Calls:
    assembler = rt.Assembler()
    feed = assembler.feed
    for chunk in chunks:
        feed(chunk)
    return _calls(assembler.close())


def _run_rx(observable: reactivex.Observable[rt.AssistantTurn]) -> Calls:
    out: list[rt.AssistantTurn] = []
    observable.subscribe(out.append)
    return _calls(out[0])


def ours_assemble(chunks: list[Any]) -> Calls:
    source = reactivex.from_iterable(chunks, scheduler=CurrentThreadScheduler())
    return _run_rx(source.pipe(rt.assemble()))


def ours_pipe(chunks: list[Any]) -> Calls:
    source = reactivex.from_iterable(chunks, scheduler=CurrentThreadScheduler())
    return _run_rx(
        source.pipe(
            rt.group_by_index(), rt.concat_arguments(), rt.on_finish_reason(), rt.atomic_batch()
        )
    )


def to_sdk_objects(chunks: list[dict[str, Any]]) -> list[Any] | None:
    try:
        from openai.types.chat import ChatCompletionChunk
    except ImportError:
        return None
    return [ChatCompletionChunk.model_validate(c) for c in chunks]


def openai_stream_state(objects: list[Any]) -> Calls:
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state = ChatCompletionStreamState()
    for chunk in objects:
        state.handle_chunk(chunk)
    message = state.get_final_completion().choices[0].message
    return [
        (c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or ()
    ]


def to_langchain(chunks: list[dict[str, Any]]) -> list[Any] | None:
    try:
        from langchain_core.messages import AIMessageChunk
    except ImportError:
        return None
    from langchain_core.messages.tool import tool_call_chunk

    messages = []
    for chunk in chunks:
        delta = chunk["choices"][0]["delta"]
        parts = [
            tool_call_chunk(
                name=tc["function"].get("name"),
                args=tc["function"].get("arguments"),
                id=tc.get("id"),
                index=tc["index"],
            )
            for tc in delta.get("tool_calls") or ()
        ]
        messages.append(AIMessageChunk(content=delta.get("content") or "", tool_call_chunks=parts))
    return messages


def langchain_sum(messages: list[Any]) -> Calls:
    total = messages[0]
    for message in messages[1:]:
        total = total + message
    return [(c["id"], c["name"], c["args"]) for c in total.tool_calls]


def to_litellm(chunks: list[dict[str, Any]]) -> list[Any] | None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    chunks = copy.deepcopy(chunks)  # ModelResponseStream(**chunk) edits the dicts it is given
    try:
        with redirect_stdout(io.StringIO()):
            import litellm
    except ImportError:
        return None
    litellm.suppress_debug_info = True
    return [litellm.ModelResponseStream(**c) for c in chunks]


def litellm_builder(objects: list[Any]) -> Calls:
    import litellm

    with redirect_stdout(io.StringIO()):
        response: Any = litellm.stream_chunk_builder(objects)
    assert response is not None
    calls: list[Any] = response.choices[0].message.tool_calls or []
    return [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls]


# -- timing ---------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    layout: str
    size: int
    fragments: int
    seconds: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def rate(self) -> float:
        return self.fragments / self.best


T = TypeVar("T")


def _time(fn: Callable[[Any], T], data: Any) -> tuple[float, T]:
    # As timeit does: no collection inside a timed run, and no full collection just before
    # one either (measure() collects once per size): a full pass over a heap holding
    # thousands of SDK objects evicts the CPU caches, which slowed every implementation
    # 1.5-1.8x here, while a live stream's chunk was parsed a moment before it is read.
    gc.disable()
    try:
        start = time.perf_counter()
        result = fn(data)
        return time.perf_counter() - start, result
    finally:
        gc.enable()


def _time_parsing(parser: Any, fn: Callable[[Any], T], data: Any) -> tuple[float, T]:
    """``_time`` with SSE data parsed by ``parser`` (``None``: the standard library)."""
    sse = rt._sse
    kept = sse._fast_decode
    sse._fast_decode = parser
    try:
        return _time(fn, data)
    finally:
        sse._fast_decode = kept


def measure(sizes: tuple[int, ...], repeats: int, peers: bool) -> list[Row]:
    rows: list[Row] = []
    for layout in LAYOUTS:
        for size in sizes:
            chunks = build_stream(size, layout)
            n = fragment_count(chunks)
            runs: list[tuple[str, Callable[[Any], Calls], Any]] = [
                ("hand loop (dicts)", hand_loop_dicts, chunks),
                ("Assembler (dicts)", ours_assembler, chunks),
                ("assemble() (dicts)", ours_assemble, chunks),
                ("four-operator pipe (dicts)", ours_pipe, chunks),
            ]
            if size <= OBJECT_MAX:
                objects = to_sdk_objects(chunks)
                if objects is not None:
                    runs += [
                        ("hand loop (SDK objects)", hand_loop_objects, objects),
                        ("assemble() (SDK objects)", ours_assemble, objects),
                    ]
                    if peers and size <= PEER_MAX:
                        runs.append(
                            ("openai ChatCompletionStreamState", openai_stream_state, objects)
                        )
            if peers and size <= PEER_MAX:
                lc = to_langchain(chunks)
                if lc is not None:
                    runs.append(("langchain AIMessageChunk +", langchain_sum, lc))
                ll = to_litellm(chunks)
                if ll is not None:
                    runs.append(("litellm stream_chunk_builder", litellm_builder, ll))
            expected = hand_loop_dicts(chunks)
            table = {name: Row(name, layout, size, n) for name, _, _ in runs}
            gc.collect()  # the previous size's garbage, once, outside every timed run
            slow = size > PEER_MAX // 2
            # Small streams are timed more often: their runs are short and noisier.
            for _ in range(max(repeats, repeats * 100_000 // (size * 4))):
                for name, fn, data in runs:
                    if name in table and table[name].seconds and slow and _is_peer(name):
                        continue  # one run of a quadratic peer at the larger sizes is enough
                    seconds, result = _time(fn, data)
                    if result != expected:
                        raise SystemExit(f"{name} gave a different result on {layout} {size}")
                    table[name].seconds.append(seconds)
            rows += table.values()
            # Peers' objects must not stay on the heap while the next sizes are timed.
            runs.clear()
            objects = lc = ll = None
            print(f"  measured {layout:>13} {size:>9,}", file=sys.stderr, flush=True)
    return rows


def _is_peer(name: str) -> bool:
    return name.startswith(("openai", "langchain", "litellm"))


def noise(repeats: int) -> float:
    """Spread of the hand loop over repeated identical runs: (max - min) / min."""
    chunks = build_stream(100_000, "1 call")
    times = [_time(hand_loop_dicts, chunks)[0] for _ in range(max(5, repeats))]
    return (max(times) - min(times)) / min(times)


# -- memory ---------------------------------------------------------------------------------


def _generated(text: str) -> Iterator[dict[str, Any]]:
    """Chunks made on the fly, as a live stream delivers them (each one freed after use)."""
    yield _chunk(
        {
            "tool_calls": [
                {"index": 0, "id": "call_0", "type": "function", "function": {"name": "t"}}
            ]
        }
    )
    for i in range(0, len(text), FRAGMENT):
        yield _chunk(
            {"tool_calls": [{"index": 0, "function": {"arguments": text[i : i + FRAGMENT]}}]}
        )
    yield _chunk({}, "tool_calls")


def peak_memory(fragments: int) -> tuple[int, int, int]:
    """(argument bytes, peak of assemble(), peak of a hand loop keeping a list of pieces)."""
    text = _arguments(fragments * FRAGMENT, 0)
    argument_bytes = len(text.encode())
    gc.collect()
    tracemalloc.start()
    source = reactivex.from_iterable(_generated(text), scheduler=CurrentThreadScheduler())
    _run_rx(source.pipe(rt.assemble()))
    ours = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    gc.collect()
    tracemalloc.start()
    hand_loop_dicts(_generated(text))
    hand = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return argument_bytes, ours, hand


# -- concurrency ----------------------------------------------------------------------------


async def _paced(chunks: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for chunk in chunks:
        await asyncio.sleep(0)  # yield to the loop between chunks, like a socket read
        yield chunk


def concurrency(streams: int, rx: bool) -> tuple[float, int, float]:
    """(aggregate fragments/s, fragments, peak bytes per stream) for N streams on one loop.

    ``rx``: each stream through ``from_async_iterable(...).pipe(assemble())``; otherwise a
    plain ``async for`` into the hand loop, the floor set by asyncio itself.
    """
    chunks = build_stream(40, "8 interleaved")
    n = fragment_count(chunks)
    expected = hand_loop_dicts(chunks)

    async def one() -> Calls:
        if not rx:
            return hand_loop_dicts([chunk async for chunk in _paced(chunks)])
        turn: rt.AssistantTurn = await rt.from_async_iterable(lambda: _paced(chunks)).pipe(
            rt.assemble()
        )
        return _calls(turn)

    async def main() -> list[Calls]:
        return await asyncio.gather(*(one() for _ in range(streams)))

    gc.collect()
    start = time.perf_counter()
    results = asyncio.run(main())
    seconds = time.perf_counter() - start
    if any(r != expected for r in results):
        raise SystemExit("a concurrent stream assembled a different result")
    gc.collect()
    tracemalloc.start()
    asyncio.run(main())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return n * streams / seconds, n * streams, peak / streams


# -- adversarial input ----------------------------------------------------------------------

ADVERSARIAL_SIZES = (10_000, 80_000, 1 << 20, 4 << 20)


def _broken_arguments(shape: str, size: int) -> str:
    """Arguments of ``size`` characters that fail to parse after a long digit run."""
    digits = "1" * (size - 12)
    if shape == "fraction":
        return '{"a": 0.' + digits + "x}"
    if shape == "exponent":
        return '{"a": 1e-' + digits[1:] + "x}"  # negative: 1e+digits is refused as infinite
    half = digits[: len(digits) // 2]
    return '{"a": -0.' + half + "e-" + half[1:] + "e}"  # both runs, then a second exponent


def _classify_once(text: str) -> float:
    """Seconds for the Assembler to refuse ``text`` (one piece), the error checked."""
    assembler = rt.Assembler()
    assembler.feed(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c", "function": {"name": "f", "arguments": text}}
                        ]
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        }
    )
    start = time.perf_counter()
    try:
        assembler.close()
    except rt.InvalidArgumentsError:
        return time.perf_counter() - start
    raise SystemExit(f"{text[:20]}... was not refused as invalid")


def classification_scaling(repeats: int) -> list[tuple[str, bool, str]]:
    """Print how long a refused argument text takes to classify, by size; return targets."""
    print("\n### Adversarial arguments: time to refuse one call (parse and classify)\n")
    print("| shape | " + " | ".join(f"{n:,} chars" for n in ADVERSARIAL_SIZES) + " | growth |")
    print("|---|" + "---:|" * (len(ADVERSARIAL_SIZES) + 1))
    results: list[tuple[str, bool, str]] = []
    for shape in ("fraction", "exponent", "both"):
        times = [
            min(_classify_once(_broken_arguments(shape, n)) for _ in range(max(3, repeats)))
            for n in ADVERSARIAL_SIZES
        ]
        small, large = ADVERSARIAL_SIZES[0], ADVERSARIAL_SIZES[-1]
        # Per-character cost, largest size over smallest: 1 for linear, ~size ratio if quadratic.
        growth = (times[-1] / large) / (times[0] / small)
        cells = " | ".join(f"{t * 1e3:.1f} ms" for t in times)
        print(f"| {shape} | {cells} | {growth:.2f} |")
        results.append(
            (
                f"{shape}: {large:,} adversarial characters refused in under 1 s, "
                f"per-character cost within 3x of {small:,} characters",
                times[-1] < 1.0 and growth <= 3.0,
                f"{times[-1] * 1e3:.0f} ms, growth {growth:.2f}",
            )
        )
    return results


# -- the other wires: OpenAI Responses, Anthropic Messages, AWS Bedrock ConverseStream -------

WIRES = ("responses", "anthropic", "bedrock")
_DELTA = "response.function_call_arguments.delta"


def _response(status: str, output: list[dict[str, Any]], usage: Any = None) -> dict[str, Any]:
    """A Responses ``response`` object with the fields a recorded one carries."""
    return {
        "id": "resp_bench",
        "object": "response",
        "created_at": 0,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": "bench",
        "output": output,
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": usage,
    }


def _function_call(index: int, arguments: str, status: str) -> dict[str, Any]:
    return {
        "id": f"fc_{index}",
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": f"call_{index}",
        "name": f"tool_{index}",
    }


def build_responses(fragments: int, layout: str) -> list[dict[str, Any]]:
    """A Responses stream with the calls of ``build_stream``: the event shapes OpenAI sends.

    ``response.created``, ``in_progress``; per call ``output_item.added``, one
    ``function_call_arguments.delta`` per piece, ``.done`` and ``output_item.done``; then
    ``response.completed`` repeating every item.
    """
    texts, steps = _steps(fragments, layout)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response("in_progress", [])},
        {"type": "response.in_progress", "response": _response("in_progress", [])},
    ]
    for kind, index, piece in steps:
        if kind == "open":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": _function_call(index, "", "in_progress"),
                }
            )
        elif kind == "piece":
            events.append(
                {"type": _DELTA, "item_id": f"fc_{index}", "output_index": index, "delta": piece}
            )
        else:
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": f"fc_{index}",
                    "output_index": index,
                    "arguments": texts[index],
                }
            )
            events.append(
                {
                    "type": "response.output_item.done",
                    "output_index": index,
                    "item": _function_call(index, texts[index], "completed"),
                }
            )
    usage = {
        "input_tokens": 50,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": fragments,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 50 + fragments,
    }
    output = [_function_call(i, text, "completed") for i, text in enumerate(texts)]
    events.append({"type": "response.completed", "response": _response("completed", output, usage)})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def build_anthropic(fragments: int, layout: str) -> list[dict[str, Any]]:
    """An Anthropic Messages stream with the calls of ``build_stream``.

    ``message_start``; per call ``content_block_start`` (tool_use), one ``input_json_delta``
    per piece, ``content_block_stop``; ``message_delta`` (stop_reason tool_use),
    ``message_stop``.
    """
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "model": "bench",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 50, "output_tokens": 1},
            },
        }
    ]
    for kind, index, piece in _steps(fragments, layout)[1]:
        if kind == "open":
            block = {
                "type": "tool_use",
                "id": f"toolu_{index}",
                "name": f"tool_{index}",
                "input": {},
            }
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        elif kind == "piece":
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        else:
            events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": fragments},
        }
    )
    events.append({"type": "message_stop"})
    return events


def build_bedrock(fragments: int, layout: str) -> list[dict[str, Any]]:
    """An AWS Bedrock ``ConverseStream`` with the calls of ``build_stream``, as boto3 yields it:
    one-key dicts ``{name: body}``.

    ``messageStart``; per call ``contentBlockStart`` (``toolUse``), one ``toolUse.input`` delta
    per piece, ``contentBlockStop``; ``messageStop`` (``tool_use``), ``metadata``.
    """
    events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
    for kind, index, piece in _steps(fragments, layout)[1]:
        if kind == "open":
            start = {"toolUse": {"toolUseId": f"tooluse_{index}", "name": f"tool_{index}"}}
            events.append({"contentBlockStart": {"contentBlockIndex": index, "start": start}})
        elif kind == "piece":
            delta = {"toolUse": {"input": piece}}
            events.append({"contentBlockDelta": {"contentBlockIndex": index, "delta": delta}})
        else:
            events.append({"contentBlockStop": {"contentBlockIndex": index}})
    events.append({"messageStop": {"stopReason": "tool_use"}})
    usage = {"inputTokens": 50, "outputTokens": fragments, "totalTokens": 50 + fragments}
    events.append({"metadata": {"usage": usage, "metrics": {"latencyMs": 0}}})
    return events


def _is_fragment(event: dict[str, Any]) -> bool:
    """Whether ``event`` carries an argument piece, on any wire of ``WIRES``."""
    kind: str | None = event.get("type")
    if kind is not None:
        return kind == _DELTA or (
            kind == "content_block_delta" and event["delta"]["type"] == "input_json_delta"
        )
    block = event.get("contentBlockDelta")
    return block is not None and "toolUse" in block["delta"]


def wire_fragments(events: list[dict[str, Any]]) -> int:
    return sum(1 for e in events if _is_fragment(e))


def responses_hand_dicts(events: Iterable[dict[str, Any]]) -> Calls:
    """A minimal correct Responses accumulator: key by output_index, append deltas, one parse."""
    calls: dict[int, list[Any]] = {}
    for event in events:
        kind = event["type"]
        if kind == _DELTA:
            calls[event["output_index"]][2].append(event["delta"])
        elif kind == "response.output_item.added":
            item = event["item"]
            if item["type"] == "function_call":
                calls[event["output_index"]] = [item["call_id"], item["name"], []]
    return [(s[0], s[1], json.loads("".join(s[2]))) for _, s in sorted(calls.items())]


def responses_hand_objects(events: list[Any]) -> Calls:
    calls: dict[int, list[Any]] = {}
    for event in events:
        kind = event.type
        if kind == _DELTA:
            calls[event.output_index][2].append(event.delta)
        elif kind == "response.output_item.added":
            item = event.item
            if item.type == "function_call":
                calls[event.output_index] = [item.call_id, item.name, []]
    return [(s[0], s[1], json.loads("".join(s[2]))) for _, s in sorted(calls.items())]


def anthropic_hand_dicts(events: Iterable[dict[str, Any]]) -> Calls:
    """A minimal correct Anthropic accumulator: key by block index, append pieces, one parse."""
    calls: dict[int, list[Any]] = {}
    for event in events:
        kind = event["type"]
        if kind == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "input_json_delta":
                calls[event["index"]][2].append(delta["partial_json"])
        elif kind == "content_block_start":
            block = event["content_block"]
            if block["type"] == "tool_use":
                calls[event["index"]] = [block["id"], block["name"], []]
    return [(s[0], s[1], json.loads("".join(s[2]) or "{}")) for _, s in sorted(calls.items())]


def anthropic_hand_objects(events: list[Any]) -> Calls:
    calls: dict[int, list[Any]] = {}
    for event in events:
        kind = event.type
        if kind == "content_block_delta":
            delta = event.delta
            if delta.type == "input_json_delta":
                calls[event.index][2].append(delta.partial_json)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                calls[event.index] = [block.id, block.name, []]
    return [(s[0], s[1], json.loads("".join(s[2]) or "{}")) for _, s in sorted(calls.items())]


def bedrock_hand_dicts(events: Iterable[dict[str, Any]]) -> Calls:
    """A minimal correct Bedrock accumulator: key by contentBlockIndex, append input pieces,
    one parse."""
    calls: dict[int, list[Any]] = {}
    for event in events:
        body = event.get("contentBlockDelta")
        if body is not None:
            use = body["delta"].get("toolUse")
            if use is not None:
                calls[body["contentBlockIndex"]][2].append(use["input"])
            continue
        body = event.get("contentBlockStart")
        if body is not None:
            use = body["start"].get("toolUse")
            if use is not None:
                calls[body["contentBlockIndex"]] = [use["toolUseId"], use["name"], []]
    return [(s[0], s[1], json.loads("".join(s[2]) or "{}")) for _, s in sorted(calls.items())]


def to_wire_objects(wire: str, events: list[dict[str, Any]]) -> list[Any] | None:
    """The SDK's event objects, built as its stream builds them (``construct_type``); ``None``
    where the SDK is not installed, or yields dicts (boto3)."""
    # Copies: the SDK's events come from their own parse, sharing nothing with the dicts.
    try:
        if wire == "responses":
            from openai._models import construct_type as openai_construct
            from openai.types.responses import ResponseStreamEvent

            return [
                openai_construct(type_=ResponseStreamEvent, value=copy.deepcopy(e)) for e in events
            ]
        if wire != "anthropic":
            return None
        from anthropic._models import construct_type as anthropic_construct
        from anthropic.types import RawMessageStreamEvent

        return [
            anthropic_construct(type_=RawMessageStreamEvent, value=copy.deepcopy(e)) for e in events
        ]
    except ImportError:
        return None


def openai_response_state(objects: list[Any]) -> Calls:
    from openai import omit
    from openai.lib.streaming.responses._responses import ResponseStreamState

    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in objects:
        state.handle_event(event)
    response = state._completed_response  # what ResponseStream.get_final_response() returns
    assert response is not None
    return [
        (o.call_id, o.name, json.loads(o.arguments))
        for o in response.output
        if o.type == "function_call"
    ]


def anthropic_accumulate(objects: list[Any]) -> Calls:
    from anthropic.lib.streaming._messages import accumulate_event

    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for event in objects:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    return [(b.id, b.name, b.input) for b in snapshot.content if b.type == "tool_use"]


def _peer_available(wire: str) -> bool:
    """Whether the installed SDK has the accumulator this benchmark calls."""
    try:
        if wire == "responses":
            from openai import omit  # noqa: F401
            from openai.lib.streaming.responses._responses import ResponseStreamState  # noqa: F401
        else:
            from anthropic.lib.streaming._messages import accumulate_event  # noqa: F401
    except ImportError:
        return False
    return True


def ours_assemble_forced(wire: str) -> Callable[[list[Any]], Calls]:
    def run(events: list[Any]) -> Calls:
        source = reactivex.from_iterable(events, scheduler=CurrentThreadScheduler())
        return _run_rx(source.pipe(rt.assemble(wire=wire)))  # type: ignore[arg-type]

    return run


def rx_reference(hand: Callable[[list[Any]], Calls]) -> Callable[[list[Any]], Calls]:
    """Rx's own cost: one bare operator whose ``on_next`` only appends; then the hand loop."""

    def operator(source: reactivex.Observable[Any]) -> reactivex.Observable[Calls]:
        def subscribe(
            observer: reactivex.abc.ObserverBase[Calls],
            scheduler: reactivex.abc.SchedulerBase | None = None,
        ) -> reactivex.abc.DisposableBase:
            seen: list[Any] = []

            def on_completed() -> None:
                observer.on_next(hand(seen))
                observer.on_completed()

            return source.subscribe(
                seen.append, observer.on_error, on_completed, scheduler=scheduler
            )

        return reactivex.Observable(subscribe)

    def run(events: list[Any]) -> Calls:
        out: list[Calls] = []
        reactivex.from_iterable(events, scheduler=CurrentThreadScheduler()).pipe(
            operator
        ).subscribe(out.append)
        return out[0]

    return run


@dataclass(frozen=True)
class WireParts:
    """What the wire sections time on one wire, beside ``assemble()`` and the ``Assembler``."""

    title: str
    build: Callable[[int, str], list[dict[str, Any]]]
    hand_dicts: Callable[[Iterable[dict[str, Any]]], Calls]
    # A hand loop over the SDK's typed events (``to_wire_objects``); None where the SDK
    # yields plain dicts (boto3), which the dict rows already are.
    hand_objects: Callable[[list[Any]], Calls] | None = None
    # The SDK's own accumulator: its name, the function, and the multiple of it that
    # assemble() is to reach; None where no SDK or peer assembles the calls.
    peer: tuple[str, Callable[[list[Any]], Calls], float] | None = None
    # Wires whose worst ratio of assemble() to their hand loop this wire's is to reach.
    as_fast_as: tuple[str, ...] = ()


_WIRE_PARTS: dict[str, WireParts] = {
    "responses": WireParts(
        "OpenAI Responses",
        build_responses,
        responses_hand_dicts,
        responses_hand_objects,
        ("openai ResponseStreamState", openai_response_state, 10),
    ),
    "anthropic": WireParts(
        "Anthropic Messages",
        build_anthropic,
        anthropic_hand_dicts,
        anthropic_hand_objects,
        ("anthropic accumulate_event", anthropic_accumulate, 5),
    ),
    "bedrock": WireParts(
        "AWS Bedrock ConverseStream",
        build_bedrock,
        bedrock_hand_dicts,
        as_fast_as=("responses", "anthropic"),
    ),
}


def measure_wire(wire: str, sizes: tuple[int, ...], repeats: int, peers: bool) -> list[Row]:
    """The throughput rows of one wire, timed as ``measure`` times the Chat streams."""
    parts = _WIRE_PARTS[wire]
    hand_dicts, hand_objects = parts.hand_dicts, parts.hand_objects
    rows: list[Row] = []
    for layout in LAYOUTS:
        for size in sizes:
            events = parts.build(size, layout)
            n = wire_fragments(events)
            runs: list[tuple[str, Callable[[Any], Calls], Any]] = [
                ("hand loop (dicts)", hand_dicts, events),
                ("bare Rx operator + hand loop (dicts)", rx_reference(hand_dicts), events),
                ("Assembler (dicts)", ours_assembler, events),
                ("assemble() (dicts)", ours_assemble, events),
                (f"assemble(wire={wire!r}) (dicts)", ours_assemble_forced(wire), events),
            ]
            objects = None
            if hand_objects is not None and size <= OBJECT_MAX:
                objects = to_wire_objects(wire, events)
            if hand_objects is not None and objects is not None:
                runs += [
                    ("hand loop (SDK objects)", hand_objects, objects),
                    ("assemble() (SDK objects)", ours_assemble, objects),
                ]
                if parts.peer and peers and size <= PEER_MAX and _peer_available(wire):
                    runs.append((parts.peer[0], parts.peer[1], objects))
            expected = hand_dicts(events)
            table = {name: Row(name, layout, size, n) for name, _, _ in runs}
            gc.collect()
            for _ in range(max(repeats, repeats * 100_000 // (size * 4))):
                for name, fn, data in runs:
                    seconds, result = _time(fn, data)
                    if result != expected:
                        raise SystemExit(
                            f"{wire}: {name} gave a different result on {layout} {size}"
                        )
                    table[name].seconds.append(seconds)
            rows += table.values()
            runs.clear()
            objects = None
            print(f"  measured {wire:>9} {layout:>13} {size:>9,}", file=sys.stderr, flush=True)
    return rows


def _wire_base(name: str) -> str:
    return (
        "hand loop (SDK objects)"
        if "SDK objects" in name or name.startswith(("openai", "anthropic"))
        else "hand loop (dicts)"
    )


def report_wire(wire: str, rows: list[Row]) -> None:
    title = _WIRE_PARTS[wire].title
    for layout in LAYOUTS:
        print(
            f"\n### {title}, {layout}: fragments/s (ratio to the hand loop over the same input)\n"
        )
        here = [r for r in rows if r.layout == layout]
        sizes = sorted({r.size for r in here})
        by = {(r.name, r.size): r for r in here}
        print("| implementation | " + " | ".join(f"{s:,}" for s in sizes) + " |")
        print("|---|" + "---:|" * len(sizes))
        for name in dict.fromkeys(r.name for r in here):
            cells = []
            for size in sizes:
                row, base = by.get((name, size)), by.get((_wire_base(name), size))
                cells.append(
                    "—"
                    if row is None or base is None
                    else f"{row.rate:,.0f} ({row.rate / base.rate:.2f})"
                )
            print(f"| {name} | " + " | ".join(cells) + " |")


def _worst_to_hand(rows: list[Row]) -> tuple[float, str]:
    """The lowest ratio of ``assemble() (dicts)`` to the hand loop over one wire's streams,
    and the stream it was on."""
    by = {(r.name, r.layout, r.size): r.rate for r in rows}
    return min(
        (
            by[("assemble() (dicts)", lay, s)] / by[("hand loop (dicts)", lay, s)],
            f"{lay}, {s:,}",
        )
        for lay, s in sorted({(r.layout, r.size) for r in rows})
    )


def wire_targets(wire: str, rows: list[Row]) -> list[tuple[str, bool, str]]:
    """The issue's targets for one wire: against its hand loop, and against its SDK."""
    by = {(r.name, r.layout, r.size): r.rate for r in rows}
    keys = sorted({(r.layout, r.size) for r in rows})
    found: list[tuple[str, bool, str]] = []
    worst, _ = _worst_to_hand(rows)
    found.append(
        (
            f"{wire}: assemble() >= 1/4 of its hand loop (dicts), every stream",
            worst >= 1 / 4,
            f"worst {worst:.2f}",
        )
    )
    parts = _WIRE_PARTS[wire]
    if parts.peer is None:
        return found
    peer, _, times = parts.peer
    for ours in ("assemble() (SDK objects)", "assemble() (dicts)"):
        ratios = [
            by[(ours, lay, s)] / by[(peer, lay, s)] for lay, s in keys if (peer, lay, s) in by
        ]
        if ratios:
            found.append(
                (
                    f"{wire}: {ours} >= {times:g}x {peer}, every stream",
                    min(ratios) >= times,
                    f"worst {min(ratios):.1f}x",
                )
            )
    return found


def relative_targets(measured: dict[str, list[Row]]) -> list[Target]:
    """Each wire's worst ratio of assemble() to its hand loop (dicts) against the worst ratio
    of the wires it is to be as fast as (``WireParts.as_fast_as``)."""
    found: list[Target] = []
    for wire, rows in measured.items():
        others = [w for w in _WIRE_PARTS[wire].as_fast_as if w in measured]
        if not others:
            continue
        ours, where = _worst_to_hand(rows)
        theirs = {w: _worst_to_hand(measured[w])[0] for w in others}
        found.append(
            (
                f"{wire}: assemble() (dicts) at or above the ratio to their hand loops of "
                + " and ".join(others)
                + " (worst stream of each)",
                ours >= max(theirs.values()),
                f"worst {ours:.2f} ({where}); "
                + ", ".join(f"{w} {r:.2f}" for w, r in theirs.items()),
            )
        )
    return found


# -- the Chat fast path against the code before the split into wires ----------------------

BASELINE = "73441ab"  # the last commit of the single-module assembler


def load_baseline(rev: str) -> tuple[Any, str]:
    """The ``rxtoolcalls`` package at ``rev``, imported as ``rxtoolcalls_baseline``.

    Returns (module, resolved short commit), or raises ``RuntimeError`` saying why not.
    """
    import importlib
    import subprocess
    import tarfile
    import tempfile

    repo = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", commit, "rxtoolcalls"],
            capture_output=True,
            check=True,
        ).stdout
    except FileNotFoundError as exc:
        raise RuntimeError("git is not installed") from exc
    except subprocess.CalledProcessError as exc:
        message = (exc.stderr if isinstance(exc.stderr, str) else exc.stderr.decode()).strip()
        raise RuntimeError(f"git could not read {rev!r} in {repo}: {message}") from exc
    # Kept for the life of the process (the module's files are read lazily), removed at exit.
    global _BASELINE_DIR
    _BASELINE_DIR = tempfile.TemporaryDirectory(prefix="rxtoolcalls-baseline-")
    root = Path(_BASELINE_DIR.name)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    (root / "rxtoolcalls").rename(root / "rxtoolcalls_baseline")
    sys.path.insert(0, str(root))
    return importlib.import_module("rxtoolcalls_baseline"), commit


_BASELINE_DIR: Any = None
# A target's text, whether it was met (None: not measured, counted neither way), its figure.
Target = tuple[str, bool | None, str]

Result = tuple[str | None, Calls]  # the turn's content and calls


def build_prose(fragments: int) -> list[dict[str, Any]]:
    """A text-only Chat stream: ``fragments`` content pieces of FRAGMENT characters."""
    text = _arguments(fragments * FRAGMENT, 3)
    chunks = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"content": text[i : i + FRAGMENT]}) for i in range(0, len(text), FRAGMENT)]
    chunks.append(_chunk({}, "stop"))
    return chunks


def _result(turn: Any) -> Result:
    return turn.content, [(c.id, c.name, c.parsed_arguments) for c in turn.tool_calls]


def _package_runs(
    package: Any,
) -> tuple[Callable[[list[Any]], Result], Callable[[list[Any]], Result]]:
    def assembler(chunks: list[Any]) -> Result:
        a = package.Assembler()
        feed = a.feed
        for chunk in chunks:
            feed(chunk)
        return _result(a.close())

    def assemble(chunks: list[Any]) -> Result:
        out: list[Any] = []
        reactivex.from_iterable(chunks, scheduler=CurrentThreadScheduler()).pipe(
            package.assemble()
        ).subscribe(out.append)
        return _result(out[0])

    return assembler, assemble


def baseline_section(rev: str, sizes: tuple[int, ...], repeats: int) -> list[Target]:
    """Print this tree's Chat throughput over the code at ``rev``, in one run; return targets."""
    print(f"\n### Chat Completions: this tree against {rev} (the code before the split)\n")
    try:
        baseline, commit = load_baseline(rev)
    except RuntimeError as exc:
        print(f"not measured: {exc}")
        return [
            (f"Chat: Assembler and assemble() within 5% of {rev}", None, f"not measured: {exc}")
        ]
    new_assembler, new_assemble = _package_runs(rt)
    old_assembler, old_assemble = _package_runs(baseline)
    print(
        f"baseline {commit} loaded from git as `rxtoolcalls_baseline`; minimum of at least "
        f"{max(repeats, 9)} interleaved runs of each; ratio = this tree's rate / the baseline's\n"
    )
    print("| stream | fragments | Assembler | baseline | ratio | assemble() | baseline | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    worst = (float("inf"), "")
    for layout in (*LAYOUTS, "prose only"):
        for size in sizes:
            chunks = build_prose(size) if layout == "prose only" else build_stream(size, layout)
            n = size if layout == "prose only" else fragment_count(chunks)
            runs = {
                "new Assembler": new_assembler,
                "old Assembler": old_assembler,
                "new assemble()": new_assemble,
                "old assemble()": old_assemble,
            }
            expected = new_assembler(chunks)
            if layout != "prose only" and expected[1] != hand_loop_dicts(chunks):
                raise SystemExit(f"the Assembler gave a different result on {layout} {size}")
            best = dict.fromkeys(runs, float("inf"))
            gc.collect()
            for _ in range(max(repeats, 9, 9 * 100_000 // (size * 4))):
                for name, fn in runs.items():
                    seconds, result = _time(fn, chunks)
                    if result != expected:
                        raise SystemExit(f"{name} gave a different result on {layout} {size}")
                    best[name] = min(best[name], seconds)
            cells = []
            for what in ("Assembler", "assemble()"):
                new, old = n / best[f"new {what}"], n / best[f"old {what}"]
                cells += [f"{new:,.0f}", f"{old:,.0f}", f"{new / old:.3f}"]
                worst = min(worst, (new / old, f"{what}, {layout}, {size:,}"))
            print(f"| {layout} | {n:,} | " + " | ".join(cells) + " |")
            print(f"  measured baseline {layout:>13} {size:>9,}", file=sys.stderr, flush=True)
    return [
        (
            f"Chat: Assembler and assemble() within 5% of {commit}, every stream",
            worst[0] >= 0.95,
            f"worst {worst[0]:.3f} ({worst[1]})",
        )
    ]


# -- Gemini: streamed arguments (fragments) and whole calls (turns) -------------------------

GEMINI_LAYOUTS = ("1 call", "8 calls")
GEMINI_TURNS = (8, 64)  # whole calls per turn


def _gemini(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "bench"}


def build_gemini_streamed(fragments: int, layout: str) -> list[dict[str, Any]]:
    """A Gemini stream whose calls stream one string argument, one ``partialArgs`` piece per
    response (``streamFunctionCallArguments``), with no ids (as Gemini 2.5 sends)."""
    _, steps = _steps(fragments, layout)
    events: list[dict[str, Any]] = []
    for kind, index, piece in steps:
        if kind == "open":
            call = {"name": f"tool_{index}", "willContinue": True}
            events.append(_gemini([{"functionCall": call}]))
        elif kind == "piece":
            entry = {"jsonPath": "$.q", "stringValue": piece, "willContinue": True}
            events.append(
                _gemini([{"functionCall": {"partialArgs": [entry], "willContinue": True}}])
            )
        else:
            # The string's last entry (it no longer continues), then the call's close.
            entry = {"jsonPath": "$.q", "stringValue": ""}
            events.append(
                _gemini([{"functionCall": {"partialArgs": [entry], "willContinue": True}}])
            )
            events.append(_gemini([{"functionCall": {}}]))
    events.append(_gemini([{"text": ""}], "STOP"))
    return events


def build_gemini_whole(calls: int) -> list[dict[str, Any]]:
    """A Gemini turn of ``calls`` whole ``functionCall`` parts, one per response, no ids."""
    events = [
        _gemini([{"functionCall": {"name": f"tool_{i}", "args": {"q": _arguments(60, i), "n": i}}}])
        for i in range(calls)
    ]
    events.append(_gemini([{"text": ""}], "STOP"))
    return events


def gemini_hand_streamed(events: Iterable[dict[str, Any]]) -> Calls:
    """A minimal Gemini accumulator for string paths: calls in order, pieces joined by path."""
    calls: list[tuple[str, dict[str, list[str]]]] = []
    for event in events:
        for part in event["candidates"][0]["content"]["parts"]:
            call = part.get("functionCall")
            if call is None:
                continue
            name = call.get("name")
            if name is not None:
                calls.append((name, {}))
            for entry in call.get("partialArgs", ()):
                calls[-1][1].setdefault(entry["jsonPath"][2:], []).append(entry["stringValue"])
    # Written once as JSON and parsed, as the turn gives both the text and the object.
    return [
        ("", name, json.loads(json.dumps({k: "".join(v) for k, v in paths.items()})))
        for name, paths in calls
    ]


def gemini_hand_whole(events: Iterable[dict[str, Any]]) -> Calls:
    """What a turn of whole calls gives, by hand: an id each, the text, the parsed object."""
    calls: Calls = []
    for event in events:
        for part in event["candidates"][0]["content"]["parts"]:
            call = part.get("functionCall")
            if call is not None:
                if not call.get("id"):
                    # An id per call as a hand loop makes one unique across turns (96
                    # random bits, uuid4's way); random, so unused in the comparison.
                    os.urandom(12).hex()
                calls.append(("", call["name"], json.loads(json.dumps(call["args"]))))
    return calls


def _no_ids(calls: Calls) -> Calls:
    """``calls`` without their ids (synthesized ids are random)."""
    return [("", name, args) for _, name, args in calls]


def _without_ids(run: Callable[[list[Any]], Calls]) -> Callable[[list[Any]], Calls]:
    """Synthesized ids are random: results are compared without them."""

    def compare(events: list[Any]) -> Calls:
        return _no_ids(run(events))

    return compare


def rx_alone(events: list[Any]) -> int:
    """What reactivex costs a turn before any reading: the same source, one identity operator."""
    out: list[Any] = []
    source = reactivex.from_iterable(events, scheduler=CurrentThreadScheduler())
    source.pipe(ops.map(lambda event: event)).subscribe(out.append)
    return len(out)


def gemini_section(sizes: tuple[int, ...], repeats: int) -> list[Target]:
    """Gemini streamed-argument and whole-call turns against their hand loops (printed)."""
    cases: list[tuple[str, int, int, list[dict[str, Any]], Callable[[Any], Calls]]] = []
    for layout in GEMINI_LAYOUTS:
        for size in sizes:
            events = build_gemini_streamed(size, layout)
            cases.append((f"streamed, {layout}", size, size, events, gemini_hand_streamed))
    cases += [
        ("whole calls", calls, calls, build_gemini_whole(calls), gemini_hand_whole)
        for calls in GEMINI_TURNS
    ]
    print("\n### Gemini: per second (fragments streamed; calls whole), ratio to the hand loop\n")
    floors: list[tuple[int, float, float, float]] = []
    print("| turn | size | hand loop | Assembler | assemble() | assemble(wire='gemini') |")
    print("|---|---:|---:|---:|---:|---:|")
    worst = 1e9
    for label, size, units, events, hand in cases:
        runs: list[tuple[str, Callable[[Any], Calls]]] = [
            ("hand", hand),
            ("Assembler", ours_assembler),
            ("assemble", ours_assemble),
            ("forced", ours_assemble_forced("gemini")),
        ]
        # Synthesized ids are random: results are compared without them, outside the timing.
        expected = _no_ids(hand(events))
        best = {name: float("inf") for name, _ in runs}
        # Whole-call turns are tiny: many repeats, each the minimum of a batch.
        batch = max(1, 2_000 // max(1, len(events)))
        for _ in range(max(repeats, min(20, repeats * 100_000 // (size * 4 + 1000)))):
            for name, fn in runs:
                gc.collect()
                gc.disable()
                try:
                    start = time.perf_counter()
                    for _ in range(batch):
                        result = fn(events)
                    seconds = (time.perf_counter() - start) / batch
                finally:
                    gc.enable()
                if _no_ids(result) != expected:
                    raise SystemExit(f"gemini: {name} gave a different result on {label} {size}")
                best[name] = min(best[name], seconds)
        rates = {name: units / seconds for name, seconds in best.items()}
        ratio = rates["assemble"] / rates["hand"]
        worst = min(worst, ratio)
        if label == "whole calls":
            floor = float("inf")
            for _ in range(20 * repeats):
                gc.collect()
                gc.disable()
                try:
                    start = time.perf_counter()
                    for _ in range(batch):
                        rx_alone(events)
                    floor = min(floor, (time.perf_counter() - start) / batch)
                finally:
                    gc.enable()
            floors.append((size, best["hand"], floor, best["assemble"]))
        print(
            f"| {label} | {size:,} | {rates['hand']:,.0f} | "
            + " | ".join(
                f"{rates[n]:,.0f} ({rates[n] / rates['hand']:.2f})"
                for n in ("Assembler", "assemble", "forced")
            )
            + " |"
        )
        print(f"  measured gemini {label:>20} {size:>9,}", file=sys.stderr, flush=True)
    print(
        "\nWhole-call turns, µs a turn: the hand loop, reactivex alone (`from_iterable` and an "
        "identity `map`, nothing read), `assemble()`\n"
    )
    for size, hand_s, floor, ours in floors:
        print(
            f"- {size} calls: hand loop {hand_s * 1e6:.1f}, reactivex alone {floor * 1e6:.1f} "
            f"({floor / hand_s:.2f}x the hand loop), assemble() {ours * 1e6:.1f}; 1/3 of the "
            f"hand loop leaves {(3 * hand_s - floor) * 1e6:.1f} µs for reading the turn"
        )
    return [
        (
            "gemini: assemble() >= 1/3 of its hand loop, streamed and whole-call turns",
            worst >= 1 / 3,
            f"worst {worst:.2f}",
        )
    ]


# -- from bytes: SSE pieces as a socket gives them ---------------------------------------

PIECE = 16 * 1024  # bytes per read, as httpx's iter_bytes() gives them


def hand_loop_bytes(pieces: Iterable[bytes]) -> Calls:
    """A stdlib hand loop over raw SSE bytes: split lines, ``json.loads`` each data line, the
    dict loop of ``hand_loop_dicts``."""
    calls: dict[int, list[Any]] = {}
    rest = b""
    for piece in pieces:
        *lines, rest = (rest + piece).split(b"\n")
        for line in lines:
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for entry in chunk["choices"][0]["delta"].get("tool_calls") or ():
                slot = calls.get(entry["index"])
                if slot is None:
                    slot = calls[entry["index"]] = [entry.get("id"), None, []]
                function = entry.get("function") or {}
                if function.get("name"):
                    slot[1] = function["name"]
                if function.get("arguments"):
                    slot[2].append(function["arguments"])
    return [(s[0], s[1], json.loads("".join(s[2]))) for _, s in sorted(calls.items())]


def ours_from_bytes(pieces: list[bytes]) -> Calls:
    out: list[rt.AssistantTurn] = []
    rt.from_sse(pieces).pipe(rt.assemble()).subscribe(out.append)
    return _calls(out[0])


def _bytes_rates(
    pieces: list[bytes],
    hand: Callable[[Any], Calls],
    fragments: int,
    repeats: int,
    what: str,
    ours: Callable[[list[bytes]], Calls] = ours_from_bytes,
) -> dict[str, float]:
    """Fragments/s of ``hand`` and of ``ours`` (``from_sse`` + ``assemble()``) over ``pieces``,
    with the standard library's parser ("std") and, if installed, the ``fast`` extra's
    ("fast"), each checked against ``hand``'s result and the minimum of interleaved runs."""
    from rxtoolcalls import _sse

    fast = _sse._fast_decode
    runs: dict[str, Callable[[Any], Calls]] = {"hand": hand, "std": ours}
    if fast is not None:
        runs["fast"] = ours
    if what.startswith("Gemini"):  # synthesized ids are random
        runs = {k: _without_ids(v) for k, v in runs.items()}
    expected = runs["hand"](pieces)
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(max(repeats, repeats * 100_000 // (fragments * 4))):
        for name, fn in runs.items():
            seconds, result = _time_parsing(fast if name == "fast" else None, fn, pieces)
            if result != expected:
                raise SystemExit(f"from bytes: {name} differs on {what}")
            best[name] = min(best[name], seconds)
    return {k: fragments / v for k, v in best.items()}


def bytes_section(sizes: tuple[int, ...], repeats: int) -> list[Target]:
    """``from_sse`` + ``assemble()`` over raw SSE bytes against the stdlib hand loop, with the
    standard library's parser and (if installed) the ``fast`` extra's (printed)."""
    from rxtoolcalls import _sse

    fast = _sse._fast_decode
    print(f"\n### From bytes: SSE in {PIECE // 1024} KiB pieces, fragments/s (ratio)\n")
    print(
        "| layout | fragments | stdlib hand loop | from_sse + assemble() | with `fast` (msgspec) |"
    )
    print("|---|---:|---:|---:|---:|")
    worst_std, worst_fast = 1e9, 1e9
    for layout in LAYOUTS:
        for size in sizes:
            chunks = build_stream(size, layout)
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            raw = body.encode()
            pieces = [raw[i : i + PIECE] for i in range(0, len(raw), PIECE)]
            n = fragment_count(chunks)
            rates = _bytes_rates(pieces, hand_loop_bytes, n, repeats, f"Chat {layout} {size}")
            std = rates["std"] / rates["hand"]
            worst_std = min(worst_std, std)
            cells = f"{rates['std']:,.0f} ({std:.2f})"
            fast_cell = "not installed"
            if "fast" in rates:
                ratio = rates["fast"] / rates["hand"]
                worst_fast = min(worst_fast, ratio)
                fast_cell = f"{rates['fast']:,.0f} ({ratio:.2f})"
            print(f"| {layout} | {n:,} | {rates['hand']:,.0f} | {cells} | {fast_cell} |")
            print(f"  measured bytes {layout:>13} {size:>9,}", file=sys.stderr, flush=True)
    targets: list[Target] = [
        (
            "from bytes: from_sse + assemble() >= 1.0x the stdlib hand loop",
            worst_std >= 1.0,
            f"worst {worst_std:.2f}",
        )
    ]
    if fast is not None:
        targets.append(
            (
                "from bytes, fast extra: >= 2x the stdlib hand loop",
                worst_fast >= 2.0,
                f"worst {worst_fast:.2f}",
            )
        )
    return targets


def sse_wire_body(events: list[dict[str, Any]], named: bool) -> bytes:
    """A wire's events as the server sends them: ``event:`` lines where the wire names them."""
    if named:
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()


def sse_dicts(pieces: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The stdlib reading of raw SSE bytes that every wire's bytes hand loop shares: split
    lines, ``json.loads`` each data line (the event lines say nothing a dict does not)."""
    rest = b""
    for piece in pieces:
        *lines, rest = (rest + piece).split(b"\n")
        for line in lines:
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                yield json.loads(line[6:])


_FRAME_PRELUDE = struct.Struct(">III")  # total length, headers length, prelude CRC32
_HEADER_LENGTH = struct.Struct(">H")
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def eventstream_body(events: list[dict[str, Any]]) -> bytes:
    """Bedrock ``ConverseStream`` events as AWS sends them: one event-stream frame each
    (``encode_frame``), with the three headers of a recorded frame and a compact JSON payload
    padded with a ``p`` of varying length, as Bedrock pads every payload."""
    frames = []
    for number, event in enumerate(events):
        ((name, body),) = event.items()
        padded = {**body, "p": _PADDING[: 1 + number * 7 % len(_PADDING)]}
        headers = {
            ":event-type": name,
            ":content-type": "application/json",
            ":message-type": "event",
        }
        frames.append(encode_frame(headers, json.dumps(padded, separators=(",", ":")).encode()))
    return b"".join(frames)


def eventstream_dicts(pieces: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The stdlib reading of AWS event-stream bytes: cut each frame out (``struct``), check
    its prelude's and its message's CRC32 (``zlib``), read its string headers, ``json.loads``
    its payload without the padding; the ``{name: body}`` event boto3 yields."""
    rest = b""
    for piece in pieces:
        data = rest + piece if rest else piece
        view = memoryview(data)
        at, size = 0, len(data)
        while size - at >= 12:
            total, length, crc = _FRAME_PRELUDE.unpack_from(data, at)
            if zlib.crc32(view[at : at + 8]) != crc:
                raise ValueError(f"a frame's prelude fails its CRC32 at byte {at}")
            end = at + total
            if end > size:
                break
            if zlib.crc32(view[at : end - 4]) != int.from_bytes(data[end - 4 : end], "big"):
                raise ValueError(f"a frame fails its message CRC32 at byte {at}")
            headers: dict[str, str] = {}
            cursor, headers_end = at + 12, at + 12 + length
            while cursor < headers_end:
                name_end = cursor + 1 + data[cursor]
                if data[name_end] != 7:
                    raise ValueError("a header that is not a string")
                (value_length,) = _HEADER_LENGTH.unpack_from(data, name_end + 1)
                value_end = name_end + 3 + value_length
                name = data[cursor + 1 : name_end].decode()
                headers[name] = data[name_end + 3 : value_end].decode()
                cursor = value_end
            if headers[":message-type"] != "event":
                raise ValueError(f"a {headers[':message-type']} frame")
            body = json.loads(data[headers_end : end - 4])
            body.pop("p", None)
            yield {headers[":event-type"]: body}
            at = end
        view.release()
        rest = data[at:]
    if rest:
        raise ValueError("the bytes end inside a frame")


def _hand_from_bytes(
    hand: Callable[[Iterable[dict[str, Any]]], Calls],
    read: Callable[[Iterable[bytes]], Iterator[dict[str, Any]]] = sse_dicts,
) -> Callable[[Any], Calls]:
    def run(pieces: list[bytes]) -> Calls:
        return hand(read(pieces))

    return run


def ours_from_eventstream(pieces: list[bytes]) -> Calls:
    out: list[rt.AssistantTurn] = []
    rt.from_eventstream(pieces).pipe(rt.assemble()).subscribe(out.append)
    return _calls(out[0])


@dataclass(frozen=True)
class BytesCase:
    """One wire from raw bytes: its events, their bytes, a stdlib hand loop and our source."""

    label: str
    build: Callable[[int, str], list[dict[str, Any]]]
    layouts: tuple[str, ...]
    body: Callable[[list[dict[str, Any]]], bytes]
    hand: Callable[[Any], Calls]
    source: str  # the name of our source, for the target line
    ours: Callable[[list[bytes]], Calls]


def _sse_case(
    label: str,
    build: Callable[[int, str], list[dict[str, Any]]],
    hand: Callable[[Iterable[dict[str, Any]]], Calls],
    named: bool,
    layouts: tuple[str, ...] = ("1 call", "8 interleaved"),
) -> BytesCase:
    def body(events: list[dict[str, Any]]) -> bytes:
        return sse_wire_body(events, named)

    return BytesCase(
        label, build, layouts, body, _hand_from_bytes(hand), "from_sse", ours_from_bytes
    )


def wire_bytes_section(sizes: tuple[int, ...], repeats: int) -> list[Target]:
    """Every wire from raw bytes: ``from_sse`` (Bedrock: ``from_eventstream``) + ``assemble()``
    against a stdlib hand loop (``sse_dicts`` or ``eventstream_dicts`` into the wire's own
    dict loop) over the same bytes, with and without the ``fast`` extra (printed)."""
    cases = [
        _sse_case("Responses", build_responses, responses_hand_dicts, True),
        _sse_case("Anthropic", build_anthropic, anthropic_hand_dicts, True),
        _sse_case(
            "Gemini, streamed partialArgs",
            build_gemini_streamed,
            gemini_hand_streamed,
            False,
            GEMINI_LAYOUTS,
        ),
        BytesCase(
            "Bedrock, event-stream frames",
            build_bedrock,
            ("1 call", "8 interleaved"),
            eventstream_body,
            _hand_from_bytes(bedrock_hand_dicts, eventstream_dicts),
            "from_eventstream",
            ours_from_eventstream,
        ),
    ]
    print(f"\n### Every wire from bytes, in {PIECE // 1024} KiB pieces: fragments/s (ratio)\n")
    print(
        "| wire | layout | fragments | stdlib hand loop | from_sse (Bedrock: from_eventstream) "
        "+ assemble() | with `fast` |"
    )
    print("|---|---|---:|---:|---:|---:|")
    worst: dict[str, float] = {}
    for case in cases:
        for layout in case.layouts:
            for size in sizes:
                raw = case.body(case.build(size, layout))
                pieces = [raw[i : i + PIECE] for i in range(0, len(raw), PIECE)]
                what = f"{case.label} {layout} {size}"
                rates = _bytes_rates(pieces, case.hand, size, repeats, what, case.ours)
                std = rates["std"] / rates["hand"]
                worst[case.label] = min(worst.get(case.label, 1e9), std)
                fast_cell = "not installed"
                if "fast" in rates:
                    fast_cell = f"{rates['fast']:,.0f} ({rates['fast'] / rates['hand']:.2f})"
                print(
                    f"| {case.label} | {layout} | {size:,} | {rates['hand']:,.0f} | "
                    f"{rates['std']:,.0f} ({std:.2f}) | {fast_cell} |"
                )
                print(f"  measured bytes {what}", file=sys.stderr, flush=True)
    return [
        (
            f"from bytes, {case.label}: {case.source} + assemble() >= 1.0x its stdlib hand loop",
            worst[case.label] >= 1.0,
            f"worst {worst[case.label]:.2f}",
        )
        for case in cases
    ]


async def _paced_bytes(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        await asyncio.sleep(0)  # a socket read: the loop runs the other streams between pieces
        yield piece


CONCURRENT_FRAGMENTS = 400  # per stream: about 90 KB of SSE, six 16 KiB pieces
PROSE_CHARACTERS = 4_800  # the open-stream memory of an answer without calls: 6 pieces


def _open_stream_memory(pieces: list[bytes], streams: int) -> float:
    """Bytes per open stream: traced memory while every stream waits for its last piece."""
    held: list[int] = []

    async def main() -> None:
        waiting = 0
        last = asyncio.Event()

        async def source() -> AsyncIterator[bytes]:
            nonlocal waiting
            for piece in pieces[:-1]:
                await asyncio.sleep(0)
                yield piece
            waiting += 1
            if waiting == streams:
                gc.collect()
                held.append(tracemalloc.get_traced_memory()[0])
                last.set()
            await last.wait()
            yield pieces[-1]

        async def one() -> None:
            await rt.from_sse(source()).pipe(rt.assemble())

        await asyncio.gather(*(one() for _ in range(streams)))

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    asyncio.run(main())
    tracemalloc.stop()
    return (held[0] - before) / streams


def concurrency_bytes(streams: int, repeats: int) -> list[Target]:
    """``streams`` async byte sources on one asyncio loop, each through ``from_sse`` +
    ``assemble()``, against the single-stream sync rate from bytes (printed)."""
    chunks = build_stream(CONCURRENT_FRAGMENTS, "8 interleaved")
    raw = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
    pieces = [raw[i : i + PIECE] for i in range(0, len(raw), PIECE)]
    n = fragment_count(chunks)
    expected = hand_loop_dicts(chunks)
    arguments = sum(len(json.dumps(args)) for _, _, args in expected)

    large = build_stream(100_000, "8 interleaved")
    large_raw = "".join(f"data: {json.dumps(c)}\n\n" for c in large).encode() + b"data: [DONE]\n\n"
    large_pieces = [large_raw[i : i + PIECE] for i in range(0, len(large_raw), PIECE)]
    sync_large = fragment_count(large) / min(
        _time(ours_from_bytes, large_pieces)[0] for _ in range(max(2, repeats))
    )
    sync_small = n / min(_time(ours_from_bytes, pieces)[0] for _ in range(max(20, repeats)))

    async def one() -> Calls:
        turn: rt.AssistantTurn = await rt.from_sse(_paced_bytes(pieces)).pipe(rt.assemble())
        return _calls(turn)

    async def main() -> list[Calls]:
        return await asyncio.gather(*(one() for _ in range(streams)))

    best = float("inf")
    for _ in range(max(1, repeats - 1)):
        gc.collect()
        start = time.perf_counter()
        results = asyncio.run(main())
        best = min(best, time.perf_counter() - start)
        if any(r != expected for r in results):
            raise SystemExit("a concurrent stream from bytes assembled a different result")
        del results
    rate = n * streams / best
    memory = []
    for layout in ("1 call", "8 interleaved"):
        layout_chunks = build_stream(CONCURRENT_FRAGMENTS, layout)
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in layout_chunks) + "data: [DONE]\n\n"
        layout_raw = body.encode()
        held = _open_stream_memory(
            [layout_raw[i : i + PIECE] for i in range(0, len(layout_raw), PIECE)], streams
        )
        memory.append((layout, held))
    # A prose answer streamed 4 characters a chunk: no argument bytes, its text kept instead.
    prose = "".join(chr(97 + i % 26) for i in range(PROSE_CHARACTERS))
    prose_chunks = [
        {"id": "c", "choices": [{"index": 0, "delta": {"content": prose[i : i + 4]}}]}
        for i in range(0, len(prose), 4)
    ]
    stop = {"index": 0, "delta": {}, "finish_reason": "stop"}
    prose_chunks.append({"id": "c", "choices": [stop]})
    prose_raw = (
        "".join(f"data: {json.dumps(c)}\n\n" for c in prose_chunks) + "data: [DONE]\n\n"
    ).encode()
    prose_pieces = [prose_raw[i : i + PIECE] for i in range(0, len(prose_raw), PIECE)]
    prose_held = _open_stream_memory(prose_pieces, streams)
    # What an open stream has received: the whole events before its withheld last piece.
    received = sum(
        len(json.loads(line[6:])["choices"][0]["delta"].get("content", ""))
        for line in b"".join(prose_pieces[:-1]).split(b"\n\n")[:-1]
        if line.startswith(b"data: {")
    )
    print(f"\n### {streams:,} concurrent async byte sources on one asyncio loop\n")
    print(
        f"each stream {n:,} fragments in {len(pieces)} pieces of {PIECE // 1024} KiB "
        f"({len(raw):,} bytes, {arguments:,} argument bytes); all {streams:,} turns correct; "
        f"JSON by {'msgspec' if rt._sse.FAST_JSON else 'the standard library'}.\n"
    )
    print("| path | fragments/s | ratio to one stream, sync |")
    print("|---|---:|---:|")
    print(f"| one stream, sync, 100,008 fragments | {sync_large:,.0f} | 1.00 |")
    print(
        f"| one stream, sync, {n:,} fragments | {sync_small:,.0f} | {sync_small / sync_large:.2f} |"
    )
    print(f"| {streams:,} streams, async, aggregate | {rate:,.0f} | {rate / sync_large:.2f} |")
    bound = 16384 + arguments
    print(
        f"\nmemory per open stream, all {streams:,} waiting for their last piece (the bound: "
        f"16 KiB + {arguments:,} argument bytes = {bound / 1024:.1f} KiB): "
        + ", ".join(f"{layout} {held / 1024:.1f} KiB" for layout, held in memory)
        + f"; a prose answer in 4-character chunks, no calls, {received:,} of its "
        f"{PROSE_CHARACTERS:,} characters received: {prose_held / 1024:.1f} KiB"
    )
    return [
        (
            f"{streams:,} concurrent byte sources: aggregate >= 1/2 the single-stream sync rate "
            "from bytes",
            rate >= sync_large / 2,
            f"{rate / sync_large:.2f}",
        ),
        *(
            (
                f"memory per open stream <= 16 KiB + its argument bytes, {layout}",
                held <= bound,
                f"{held / 1024:.1f} KiB against {bound / 1024:.1f} KiB",
            )
            for layout, held in memory
        ),
    ]


def _ui_run(operator: Callable[[], Any]) -> Callable[[Any], int]:
    """Subscribe ``operator()`` to chunks (a list) or to ``from_sse`` over bytes pieces."""

    def run(source: Any) -> int:
        out: list[Any] = []
        chunks = (
            rt.from_sse(source) if type(source[0]) is bytes else reactivex.from_iterable(source)
        )
        chunks.pipe(operator()).subscribe(out.append)
        return len(out)

    return run


def ui_signals_section(sizes: tuple[int, ...], repeats: int) -> list[Target]:
    """``assemble_with_progress()`` and ``lifecycle()`` (the UI signals and the calls from one
    pass) against ``assemble()`` alone, over raw SSE bytes and over dicts (printed)."""
    runs = {
        "assemble()": _ui_run(rt.assemble),
        "assemble_with_progress()": _ui_run(rt.assemble_with_progress),
        "lifecycle()": _ui_run(rt.lifecycle),
    }
    print("\n### UI signals from one pass: time against assemble() alone\n")
    print("| input | layout | fragments | assemble_with_progress() | lifecycle() |")
    print("|---|---|---:|---:|---:|")
    worst: dict[tuple[str, str], float] = {}
    for source in ("bytes", "dicts"):
        for layout in LAYOUTS:
            for size in sizes:
                chunks = build_stream(size, layout)
                data: Any = chunks
                if source == "bytes":
                    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode()
                    data = [body[i : i + PIECE] for i in range(0, len(body), PIECE)]
                best = {name: float("inf") for name in runs}
                for _ in range(max(repeats, repeats * 100_000 // (size * 4))):
                    for name, fn in runs.items():
                        best[name] = min(best[name], _time(fn, data)[0])
                base = best["assemble()"]
                cells = []
                for name in ("assemble_with_progress()", "lifecycle()"):
                    ratio = best[name] / base
                    worst[(source, name)] = max(worst.get((source, name), 0.0), ratio)
                    cells.append(f"{ratio:.2f}x")
                print(f"| {source} | {layout} | {size:,} | " + " | ".join(cells) + " |")
                print(f"  measured ui {source} {layout} {size:,}", file=sys.stderr, flush=True)
    # The target is end to end, from bytes; over dicts the table shows the cost bare.
    return [
        (
            f"UI signals from bytes: {name} within 1.10x of assemble() alone",
            ratio <= 1.10,
            f"worst {ratio:.2f}x (over dicts {worst[('dicts', name)]:.2f}x)",
        )
        for (source, name), ratio in worst.items()
        if source == "bytes"
    ]


def wire_sections(
    sizes: tuple[int, ...], repeats: int, peers: bool, baseline: str | None
) -> list[Target]:
    """The baseline comparison, the Responses, Anthropic and Bedrock tables and Gemini's
    (printed); targets."""
    results: list[Target] = []
    if baseline is not None:
        results += baseline_section(baseline, tuple(s for s in sizes if s <= 100_000), repeats)
    measured: dict[str, list[Row]] = {}
    for wire in WIRES:
        rows = measured[wire] = measure_wire(wire, sizes, repeats, peers)
        report_wire(wire, rows)
        results += wire_targets(wire, rows)
    results += relative_targets(measured)
    results += gemini_section(tuple(s for s in sizes if s <= 100_000), repeats)
    return results


# -- report ---------------------------------------------------------------------------------


def report(rows: list[Row], out: io.TextIOBase | Any = sys.stdout) -> dict[str, float]:
    """Print the throughput table; return the figures the targets are checked on."""
    checks: dict[str, float] = {}
    for layout in LAYOUTS:
        print(
            f"\n### {layout}: fragments/s (ratio to the hand loop over the same input)\n", file=out
        )
        sizes = sorted({r.size for r in rows if r.layout == layout})
        names = list(dict.fromkeys(r.name for r in rows if r.layout == layout))
        print("| implementation | " + " | ".join(f"{s:,}" for s in sizes) + " |", file=out)
        print("|---|" + "---:|" * len(sizes), file=out)
        for name in names:
            cells = []
            for size in sizes:
                row = next(
                    (r for r in rows if (r.layout, r.size, r.name) == (layout, size, name)), None
                )
                if row is None:
                    cells.append("—")
                    continue
                base_name = (
                    "hand loop (SDK objects)"
                    if "SDK objects" in name or name.startswith("openai")
                    else "hand loop (dicts)"
                )
                base = next(
                    r for r in rows if (r.layout, r.size, r.name) == (layout, size, base_name)
                )
                cells.append(f"{row.rate:,.0f} ({row.rate / base.rate:.2f})")
            print(f"| {name} | " + " | ".join(cells) + " |", file=out)
    for row in rows:
        key = f"{row.layout}/{row.size}"
        checks[f"rate/{row.name}/{key}"] = row.rate
    return checks


def targets(rows: list[Row]) -> list[tuple[str, bool, str]]:
    """Each target of the performance issue, with the figure it was judged on."""
    found: list[tuple[str, bool, str]] = []

    def rate(name: str, layout: str, size: int) -> float | None:
        row = next((r for r in rows if (r.name, r.layout, r.size) == (name, layout, size)), None)
        return None if row is None else row.rate

    keys = sorted({(r.layout, r.size) for r in rows})
    worst = min(
        (rate("assemble() (dicts)", lay, s) or 0) / (rate("hand loop (dicts)", lay, s) or 1)
        for lay, s in keys
    )
    found.append(
        (
            "assemble() >= 1/3 of the hand loop (dicts), every stream",
            worst >= 1 / 3,
            f"worst {worst:.2f}",
        )
    )
    pipe = max(
        (rate("assemble() (dicts)", lay, s) or 0)
        / (rate("four-operator pipe (dicts)", lay, s) or 1)
        for lay, s in keys
    )
    found.append(
        ("four-operator pipe within 1.5x of assemble()", pipe <= 1.5, f"worst {pipe:.2f}x")
    )
    obj = [
        (rate("assemble() (SDK objects)", lay, s), rate("hand loop (SDK objects)", lay, s))
        for lay, s in keys
    ]
    obj_ratios = [a / b for a, b in obj if a and b]
    if obj_ratios:
        found.append(
            (
                "assemble() >= 1/3 of the hand loop (SDK objects)",
                min(obj_ratios) >= 1 / 3,
                f"worst {min(obj_ratios):.2f}",
            )
        )
    sdk = [
        (rate("assemble() (dicts)", lay, s), rate("openai ChatCompletionStreamState", lay, s))
        for lay, s in keys
    ]
    sdk_ratios = [a / b for a, b in sdk if a and b]
    if sdk_ratios:
        found.append(
            (
                "assemble() >= 100x ChatCompletionStreamState",
                min(sdk_ratios) >= 100,
                f"worst {min(sdk_ratios):,.0f}x",
            )
        )
    for peer in ("langchain AIMessageChunk +", "litellm stream_chunk_builder"):
        ratios = [
            (rate("assemble() (dicts)", lay, s) or 0) / p
            for lay, s in keys
            if (p := rate(peer, lay, s))
        ]
        if ratios:
            found.append(
                (
                    f"assemble() ahead of {peer} at every size",
                    min(ratios) > 1,
                    f"worst {min(ratios):,.0f}x",
                )
            )
    return found


def plot_curves(
    curves: dict[str, list[tuple[int, float]]],
    style: Callable[[str], str],
    title: str,
    path: Path,
    fontsize: int = 8,
    xlabel: str = f"stream size (argument fragments of {FRAGMENT} characters)",
    ylabel: str = "fragments per second",
    xticks: tuple[int, ...] = (),
) -> None:
    """Fragments/s against stream size, log-log, one line a curve (styled by name), as PNG;
    ``xlabel`` and ``ylabel`` name other axes (the field events plot time per fragment),
    ``xticks`` label the sizes measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, points in curves.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], style(name), label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    if xticks:
        ax.set_xticks(xticks, [f"{tick:,}" for tick in xticks])
        ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    python = f"{platform.python_implementation()} {platform.python_version()}"
    ax.set_title(f"{title} ({python})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=fontsize)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot(rows: list[Row], path: Path) -> None:
    layout = "8 interleaved"
    curves = {
        name: sorted((r.size, r.rate) for r in rows if r.layout == layout and r.name == name)
        for name in dict.fromkeys(r.name for r in rows if r.layout == layout)
    }

    def style(name: str) -> str:
        return "-o" if name.startswith(("assemble", "Assembler", "four")) else "--s"

    plot_curves(curves, style, "Throughput, 8 interleaved tool calls", path)


def peer_versions() -> str:
    """The installed version of each peer package (and of reactivex), or "absent"."""
    found = []
    for package in ("reactivex", "openai", "langchain-core", "litellm"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} absent")
    return ", ".join(found)


def _sse_body(size: int) -> bytes:
    """About ``size`` bytes of a real-looking event stream (small chunks, LF line ends)."""
    chunks = build_stream(size // 120, "1 call")
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode()
    return body[: body.rfind(b"\n\n", 0, size) + 2]


def _decode(pieces: list[bytes]) -> tuple[float, int]:
    from rxtoolcalls._sse import SSEDecoder

    decoder = SSEDecoder()
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        events = sum(len(decoder.feed(piece)) for piece in pieces)
        return time.perf_counter() - start, events
    finally:
        gc.enable()


def _chunks_of_event(pieces: list[bytes]) -> float:
    from rxtoolcalls._sse import SSEDecoder

    decoder = SSEDecoder()
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        found = sum(len(decoder.chunks(piece)) for piece in pieces)
        seconds = time.perf_counter() - start
    finally:
        gc.enable()
    if found != 1 or decoder.ended is not None:
        raise SystemExit("the SSE decoder did not read the large event whole")
    return seconds


def large_event_scaling(repeats: int) -> list[tuple[str, bool, str]]:
    """One 5 MB event through ``chunks()``: in one piece against 1 KiB pieces (printed)."""
    body = f"data: {json.dumps({'a': 'x' * 5_000_000})}\n\n".encode()
    small = [body[i : i + 1024] for i in range(0, len(body), 1024)]
    runs = [(_chunks_of_event([body]), _chunks_of_event(small)) for _ in range(max(5, repeats))]
    one, many = min(r[0] for r in runs), min(r[1] for r in runs)
    print(
        f"\nOne {len(body):,}-byte event through chunks(): {one * 1e3:.1f} ms in one piece, "
        f"{many * 1e3:.1f} ms in 1 KiB pieces"
    )
    return [
        (
            "SSE: a 5 MB event in 1 KiB pieces within 3x of the same in one piece (linear)",
            many <= 3 * one,
            f"{many / one:.2f}",
        )
    ]


def sse_scaling(repeats: int) -> list[tuple[str, bool, str]]:
    """Print the SSE decoder's time on one large piece and on 8 KiB pieces; return targets."""
    print("\n### SSE decoding: one piece vs 8 KiB pieces\n")
    print("| body | one piece | 8 KiB pieces | ratio |")
    print("|---|---:|---:|---:|")
    results: list[tuple[str, bool, str]] = []
    for size in (1_000_000, 5_000_000):
        body = _sse_body(size)
        small = [body[i : i + 8192] for i in range(0, len(body), 8192)]
        # Interleaved, at least five each: one slow run (a page fault storm) is not the cost.
        runs = [(_decode([body]), _decode(small)) for _ in range(max(5, repeats))]
        one = min(r[0] for r in runs)
        many = min(r[1] for r in runs)
        if one[1] != many[1]:
            raise SystemExit("the SSE decoder found different events in one piece and in many")
        ratio = one[0] / many[0]
        print(
            f"| {len(body):,} bytes | {one[0] * 1e3:.1f} ms | {many[0] * 1e3:.1f} ms "
            f"| {ratio:.2f} |"
        )
        results.append(
            (
                f"SSE: {len(body):,} bytes in one piece within 1.5x of the same in 8 KiB pieces",
                ratio <= 1.5,
                f"{ratio:.2f}",
            )
        )
    return results


def _join_names(pieces: int) -> float:
    """Seconds to feed ``pieces`` one-character name fragments of one call (LENIENT joins)."""
    unbounded = rt.Limits(max_identifier=1 << 30)  # no ceiling: the join's own cost shows
    assembler = rt.Assembler(rt.Policy(join_split_names=True, limits=unbounded))

    def named(name: str) -> dict[str, Any]:
        return _chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": name}}]})

    chunks = [named("xy"[i % 2]) for i in range(pieces)]
    assembler.feed(named("a"))
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        for chunk in chunks:
            assembler.feed(chunk)
        return time.perf_counter() - start
    finally:
        gc.enable()


def join_scaling(repeats: int) -> list[tuple[str, bool, str]]:
    """Print the per-fragment cost of joining split names, by count; return the target."""
    sizes = (10_000, 100_000, 400_000)
    print("\n### Split names joined (join_split_names, no identifier ceiling)\n")
    print("| name fragments | " + " | ".join(f"{n:,}" for n in sizes) + " | growth |")
    print("|---|" + "---:|" * (len(sizes) + 1))
    per = [min(_join_names(n) for _ in range(max(3, repeats))) / n for n in sizes]
    growth = per[-1] / per[0]
    print("| per fragment | " + " | ".join(f"{p * 1e9:.0f} ns" for p in per) + f" | {growth:.2f} |")
    return [
        (
            f"joined names: per-fragment cost at {sizes[-1]:,} within 2x of {sizes[0]:,}",
            growth <= 2.0,
            f"{growth:.2f}",
        )
    ]


def adversarial_sections(repeats: int) -> list[tuple[str, bool, str]]:
    """The adversarial-input sections (printed); their targets."""
    return classification_scaling(repeats) + sse_scaling(repeats) + join_scaling(repeats)


# -- through the openai SDK: create(stream=True) against with_streaming_response ------------

SDK_SIZES = (2_500, 10_000)
SDK_STREAMS = 200  # concurrent AsyncOpenAI streams against ReplayServer
SDK_STREAM_SIZE = 500  # fragments per concurrent stream
ASK: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _sdk_client(pieces: list[bytes]) -> Any:
    """An ``OpenAI`` client whose every request gets ``pieces``, over ``httpx2.MockTransport``."""
    import httpx2
    import openai

    class Body(httpx2.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            return iter(pieces)

    def answer(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    http = httpx2.Client(transport=httpx2.MockTransport(answer))
    return openai.OpenAI(api_key="x", base_url="http://bench.invalid/v1", http_client=http)


def sdk_stream_state(client: Any) -> Calls:
    """The SDK's own path: typed chunks from ``create(stream=True)`` into its accumulator."""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state = ChatCompletionStreamState()
    with client.chat.completions.create(**ASK, stream=True) as stream:
        for chunk in stream:
            state.handle_chunk(chunk)
    message = state.get_final_completion().choices[0].message
    return [
        (c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or ()
    ]


def sdk_from_stream(client: Any) -> Calls:
    out: list[rt.AssistantTurn] = []
    stream = client.chat.completions.create(**ASK, stream=True)
    rt.from_openai_stream(stream).pipe(rt.assemble()).subscribe(out.append)
    return _calls(out[0])


def sdk_from_response(client: Any) -> Calls:
    out: list[rt.AssistantTurn] = []
    manager = client.chat.completions.with_streaming_response.create(**ASK, stream=True)
    rt.from_openai_response(manager).pipe(rt.assemble()).subscribe(out.append)
    return _calls(out[0])


def sdk_concurrent(streams: int, raw: bool) -> tuple[float, int]:
    """(aggregate fragments/s, fragments): ``streams`` AsyncOpenAI streams at once over loopback.

    ``raw``: ``with_streaming_response`` + ``from_async_openai_response``; otherwise
    ``create(stream=True)`` + ``from_async_openai_stream``. Every turn is checked.
    """
    import openai

    from rxtoolcalls.serve import ReplayServer

    chunks = build_stream(SDK_STREAM_SIZE, "8 interleaved")
    expected = hand_loop_dicts(chunks)

    async def main(server: ReplayServer) -> list[Calls]:
        client = openai.AsyncOpenAI(api_key="x", base_url=server.base_url, max_retries=0)

        async def one() -> Calls:
            source: reactivex.Observable[Any]
            if raw:
                source = rt.from_async_openai_response(
                    client.chat.completions.with_streaming_response.create(**ASK, stream=True)
                )
            else:
                stream = await client.chat.completions.create(**ASK, stream=True)
                source = rt.from_async_openai_stream(stream)
            turn: rt.AssistantTurn = await source.pipe(rt.assemble())
            return _calls(turn)

        try:
            return await asyncio.gather(*(one() for _ in range(streams)))
        finally:
            await client.close()

    with ReplayServer([chunks]) as server:
        gc.collect()
        start = time.perf_counter()
        results = asyncio.run(main(server))
        seconds = time.perf_counter() - start
        if len(server.requests) != streams:
            raise SystemExit(f"sdk: {len(server.requests)} requests for {streams} streams")
    if any(r != expected for r in results):
        raise SystemExit("sdk: a concurrent stream assembled a different result")
    n = fragment_count(chunks) * streams
    return n / seconds, n


def sdk_section(sizes: tuple[int, ...], repeats: int, streams: int) -> list[Target]:
    """End to end through the openai client over the same MockTransport bytes (printed), and
    ``streams`` concurrent AsyncOpenAI streams over loopback HTTP; the target."""
    target = "through the SDK: from_openai_response >= 10x create(stream=True) + "
    target += "ChatCompletionStreamState"
    try:
        import httpx2  # noqa: F401
        import openai  # noqa: F401
    except ImportError:
        print("\n### Through the openai SDK: openai not installed")
        return [(target, None, "openai not installed")]
    print(
        f"\n### Through the openai SDK: the same SSE bytes over httpx2.MockTransport in "
        f"{PIECE // 1024} KiB pieces, request included, fragments/s (ratio to the first)\n"
    )
    print(
        "| layout | fragments | create(stream=True) + ChatCompletionStreamState | "
        "create(stream=True) + from_openai_stream + assemble() | "
        "with_streaming_response + from_openai_response + assemble() |"
    )
    print("|---|---:|---:|---:|---:|")
    runs: dict[str, Callable[[Any], Calls]] = {
        "state": sdk_stream_state,
        "stream": sdk_from_stream,
        "response": sdk_from_response,
    }
    worst = float("inf")
    for layout in LAYOUTS:
        for size in sizes:
            chunks = build_stream(size, layout)
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            raw = body.encode()
            client = _sdk_client([raw[i : i + PIECE] for i in range(0, len(raw), PIECE)])
            n = fragment_count(chunks)
            expected = hand_loop_dicts(chunks)
            best = dict.fromkeys(runs, float("inf"))
            gc.collect()
            for _ in range(repeats):
                for name, run in runs.items():
                    seconds, result = _time(run, client)
                    if result != expected:
                        raise SystemExit(f"sdk: {name} differs on {layout} {size}")
                    best[name] = min(best[name], seconds)
            rates = {k: n / v for k, v in best.items()}
            ratio = rates["response"] / rates["state"]
            worst = min(worst, ratio)
            cells = " | ".join(
                f"{rates[k]:,.0f} ({rates[k] / rates['state']:.1f}x)"
                for k in ("stream", "response")
            )
            print(f"| {layout} | {n:,} | {rates['state']:,.0f} | {cells} |")
            print(f"  measured sdk {layout:>13} {size:>9,}", file=sys.stderr, flush=True)
    raw_rate, total = sdk_concurrent(streams, raw=True)
    typed_rate, _ = sdk_concurrent(streams, raw=False)
    print(
        f"\n{streams} concurrent `AsyncOpenAI` streams against `ReplayServer` over loopback "
        f"HTTP (the server in the same process, on the same 2 cores), "
        f"{total // streams:,} fragments each, all {streams} turns correct: "
        f"with_streaming_response + from_async_openai_response {raw_rate:,.0f} fragments/s; "
        f"create(stream=True) + from_async_openai_stream {typed_rate:,.0f} fragments/s"
    )
    return [(target, worst >= 10.0, f"worst {worst:.1f}x")]


E2E_SIZES = (1_000, 2_500, 10_000, 100_000)


def _openai_sdk() -> bool:
    try:
        import httpx2  # noqa: F401
        import openai  # noqa: F401
    except ImportError:
        return False
    return True


def e2e_curves(repeats: int) -> dict[str, list[tuple[int, float]]]:
    """Fragments/s against stream size (8 interleaved calls) for every end-to-end path: from
    bytes, through the openai SDK over MockTransport, and the peers' accumulators (given
    pre-built objects, their best case: no parsing counted). Each result is checked."""
    from rxtoolcalls import _sse

    fast = _sse._fast_decode
    curves: dict[str, list[tuple[int, float]]] = {}

    def add(name: str, size: int, rate: float) -> None:
        curves.setdefault(name, []).append((size, rate))

    for size in E2E_SIZES:
        chunks = build_stream(size, "8 interleaved")
        n = fragment_count(chunks)
        expected = hand_loop_dicts(chunks)
        raw = ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
        pieces = [raw[i : i + PIECE] for i in range(0, len(raw), PIECE)]
        runs: list[tuple[str, Callable[[Any], Calls], Any, Any]] = [
            ("stdlib hand loop, from bytes", hand_loop_bytes, pieces, None),
            ("from_sse + assemble(), from bytes", ours_from_bytes, pieces, None),
        ]
        if fast is not None:
            runs.append(("the same with the fast extra", ours_from_bytes, pieces, fast))
        if _openai_sdk():
            client = _sdk_client(pieces)
            runs += [
                ("SDK + from_openai_response + assemble()", sdk_from_response, client, None),
                (
                    "SDK create(stream=True) + from_openai_stream + assemble()",
                    sdk_from_stream,
                    client,
                    None,
                ),
            ]
            if size <= PEER_MAX:
                runs.append(
                    (
                        "SDK create(stream=True) + ChatCompletionStreamState",
                        sdk_stream_state,
                        client,
                        None,
                    )
                )
        if size <= PEER_MAX:
            for label, convert, peer in (
                ("litellm stream_chunk_builder (pre-built objects)", to_litellm, litellm_builder),
                ("langchain AIMessageChunk + (pre-built objects)", to_langchain, langchain_sum),
            ):
                objects = convert(chunks)
                if objects is not None:
                    runs.append((label, peer, objects, None))
        for name, fn, data, parser in runs:
            best = float("inf")
            for _ in range(max(1, repeats if size < 100_000 else 2)):
                chosen = parser if name == "the same with the fast extra" else None
                seconds, result = _time_parsing(chosen, fn, data)
                if result != expected:
                    raise SystemExit(f"end to end: {name} differs at {size}")
                best = min(best, seconds)
            add(name, n, n / best)
        print(f"  measured e2e {size:>9,}", file=sys.stderr, flush=True)
    return curves


def e2e_section(repeats: int, path: Path | None) -> None:
    """Print the end-to-end curves as a table; plot them (PNG) if ``path``."""
    curves = e2e_curves(repeats)
    sizes = sorted({size for points in curves.values() for size, _ in points})
    print("\n### End to end, 8 interleaved calls: fragments/s against stream size\n")
    print("| path | " + " | ".join(f"{s:,}" for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name, points in curves.items():
        rates = dict(points)
        cells = [f"{rates[s]:,.0f}" if s in rates else "—" for s in sizes]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if path is None:
        return

    def style(name: str) -> str:
        if "assemble()" in name or "fast extra" in name:
            return "-o"
        return ":^" if "hand loop" in name else "--s"

    plot_curves(curves, style, "End to end from SSE bytes, 8 interleaved tool calls", path, 7)
    print(f"\nplot written to {path}")


# -- field events: fields() against assemble() alone and a partial re-parse per fragment ----

KIB = 1024
FIELDS_FRAGMENT = 16  # characters per argument piece in this section, as in the issue
FIELDS_SIZES = (8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB)
FIELDS_QUICK = (8 * KIB, 32 * KIB)
FIELDS_OBJECTS = 500  # small objects in a 128 KiB call; in proportion at the other sizes
FIELDS_ORDERS = ("string first", "objects first")
# A line of code as a model writes it into a file: a newline, a tab, quotes, a backslash and a
# letter beyond ASCII, so the string's JSON text holds every common kind of escape.
SOURCE_LINE = 'def f(x):\n\treturn "a\\\\b" + x  # caf\u00e9\n'


def fields_arguments(size: int, objects_first: bool = False) -> str:
    """One call's argument text of exactly ``size`` ASCII characters: a path, a long string
    full of escapes (a file's contents) and FIELDS_OBJECTS small objects per 128 KiB, the
    string before the objects (``objects_first``: the objects before it)."""
    count = max(1, round(FIELDS_OBJECTS * size / (128 * KIB)))
    items = [
        {
            "id": i,
            "name": f"item-{i}",
            "price": i * 1.25,
            "in_stock": i % 3 != 0,
            "tags": ["a", "b", "c"][: i % 4],
            "note": None,
        }
        for i in range(count)
    ]

    def dump(content: str) -> str:
        if objects_first:
            return json.dumps({"path": "src/app.py", "items": items, "content": content})
        return json.dumps({"path": "src/app.py", "content": content, "items": items})

    room = size - len(dump(""))
    if room < 0:
        raise ValueError(f"{size:,} characters cannot hold {count} objects")
    # Escaped, a string's text is the concatenation of its pieces' texts: whole lines, then
    # plain letters to the exact size.
    lines, pad = divmod(room, len(json.dumps(SOURCE_LINE)) - 2)
    return dump(SOURCE_LINE * lines + "x" * pad)


def build_fields_stream(text: str) -> list[dict[str, Any]]:
    """One call's ``text`` in FIELDS_FRAGMENT-character pieces on the Chat Completions wire,
    one piece a chunk, the first with the call's id and name, then ``finish_reason``.

    Each chunk has the shape the API sends (``finish_reason: null`` in every choice):
    without that key ``assemble()`` leaves its fast path, about 2.5x slower here.
    """
    pieces = [text[i : i + FIELDS_FRAGMENT] for i in range(0, len(text), FIELDS_FRAGMENT)]
    first = {
        "index": 0,
        "id": "call_0",
        "type": "function",
        "function": {"name": "write_file", "arguments": pieces[0]},
    }
    chunks = [_chunk({"tool_calls": [first]})]
    chunks += [
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        for piece in pieces[1:]
    ]
    chunks.append(_chunk({}, "tool_calls"))
    return chunks


def count_values(value: Any) -> int:
    """The values in a parsed JSON value, itself included: how many fields ``fields()`` gives."""
    if type(value) is dict:
        return 1 + sum(count_values(v) for v in value.values())
    if type(value) is list:
        return 1 + sum(count_values(v) for v in value)
    return 1


def _events(chunks: list[Any], operator: Any) -> list[Any]:
    out: list[Any] = []
    source = reactivex.from_iterable(chunks, scheduler=CurrentThreadScheduler())
    source.pipe(operator).subscribe(out.append)
    return out


def arguments_of_assemble(chunks: list[Any]) -> Any:
    """``assemble()`` alone: the call's parsed arguments."""
    turn: rt.AssistantTurn = _events(chunks, rt.assemble())[0]
    return turn.tool_calls[0].parsed_arguments


def arguments_of_fields(chunks: list[Any]) -> Any:
    """``fields()``: every field as it completes; the root's value (the last one)."""
    return _events(chunks, rt.fields())[-1].value


def arguments_of_fields_strings(chunks: list[Any]) -> Any:
    """``fields(strings=True)``: the strings' characters as they come too; the root's value."""
    return _events(chunks, rt.fields(strings=True))[-1].value


def jiter_reparse(chunks: list[Any]) -> Any:
    """What openai-python, anthropic and pydantic-ai do for a partial value: keep the arguments
    so far and parse all of them again after each fragment with jiter's partial mode; the
    last value."""
    from jiter import from_json

    arguments = ""
    value = None
    for chunk in chunks:
        for choice in chunk["choices"]:
            for tc in choice["delta"].get("tool_calls") or ():
                piece = tc["function"].get("arguments")
                if piece:
                    arguments += piece
                    value = from_json(arguments.encode(), partial_mode="trailing-strings")
    return value


def check_field_events(chunks: list[Any], expected: Any) -> tuple[int, int]:
    """Untimed: what ``fields()`` and ``fields(strings=True)`` report is right; their counts."""
    plain = _events(chunks, rt.fields())
    events = _events(chunks, rt.fields(strings=True))
    found = [e for e in events if type(e) is rt.ToolCallField]
    texts = [e for e in events if type(e) is rt.ToolCallText]
    if (
        len(found) != count_values(expected)
        or found[-1].path != ()
        or found[-1].value != expected
        or [(e.path, e.value) for e in found] != [(e.path, e.value) for e in plain]
        or any((e.id, e.name) != ("call_0", "write_file") for e in events)
        or "".join(e.text for e in texts if e.path == ("content",)) != expected["content"]
    ):
        raise SystemExit("fields() reported something else than the call's values")
    return len(found), len(texts)


FIELDS_RUNS: dict[str, Callable[[list[Any]], Any]] = {
    "assemble()": arguments_of_assemble,
    "fields()": arguments_of_fields,
    "fields(strings=True)": arguments_of_fields_strings,
    "jiter re-parse": jiter_reparse,
}


def jiter_version() -> str | None:
    """``jiter X.Y.Z``, or None when jiter cannot be imported."""
    try:
        import jiter  # noqa: F401
    except ImportError:
        return None
    return f"jiter {metadata.version('jiter')}"


def fields_section(sizes: tuple[int, ...], repeats: int, path: Path | None) -> list[Target]:
    """``fields()`` on one call against ``assemble()`` alone and against jiter's partial
    re-parse after each fragment, by call size (printed; plotted as PNG if ``path``); the
    targets, judged at the largest size on the worse of the two orders."""
    jiter = jiter_version()
    runs = {k: v for k, v in FIELDS_RUNS.items() if jiter or k != "jiter re-parse"}
    print(
        f"\n### Field events: one call in {FIELDS_FRAGMENT}-character fragments, "
        "time per fragment (ratios at the same size)\n"
    )
    print(
        f"The arguments: a path, a string of source lines full of escapes and {FIELDS_OBJECTS} "
        "small objects per 128 KiB, the string first or the objects first. The re-parse "
        f"({jiter or 'jiter not installed: not measured'}) keeps the arguments from the same "
        "chunks and runs `jiter.from_json(buf.encode(), partial_mode='trailing-strings')` "
        f"after each fragment. Minimum of {5 * repeats} interleaved runs of ours (more for "
        f"small calls) and {repeats} of the re-parse; every result is checked against "
        "`json.loads`.\n"
    )
    print(
        f"| order | KiB | fragments | fields | texts | {' | '.join(runs)} "
        "| fields() / assemble() | fields(strings=True) / assemble() | re-parse / fields() |"
    )
    print("|---|---:|---:|---:|---:|" + "---:|" * (len(runs) + 3))
    largest = max(sizes)
    best: dict[tuple[str, int, str], float] = {}  # per fragment
    for order in FIELDS_ORDERS:
        for size in sizes:
            text = fields_arguments(size, objects_first=order == "objects first")
            chunks = build_fields_stream(text)
            n = len(chunks) - 1  # the argument fragments
            expected = json.loads(text)
            found, texts = check_field_events(chunks, expected)
            gc.collect()
            # Ours are short: more runs each (a burst of load on the machine skews fewer); the
            # quadratic re-parse takes seconds a run: ``repeats`` runs, in the first rounds.
            for round_ in range(max(5 * repeats, 3 * repeats * largest // size)):
                for name, fn in runs.items():
                    if name == "jiter re-parse" and round_ >= repeats:
                        continue
                    seconds, result = _time(fn, chunks)
                    if result != expected:
                        raise SystemExit(f"{name} gave another value: {order}, {size:,}")
                    key = (order, size, name)
                    best[key] = min(best.get(key, float("inf")), seconds / n)
            cells = [f"{best[(order, size, name)] * 1e6:.2f} µs" for name in runs]
            base, ours = best[(order, size, "assemble()")], best[(order, size, "fields()")]
            cells += [
                f"{ours / base:.2f}x",
                f"{best[(order, size, 'fields(strings=True)')] / base:.2f}x",
                f"{best[(order, size, 'jiter re-parse')] / ours:.1f}x" if jiter else "—",
            ]
            row = f"| {order} | {size // KIB} | {n:,} | {found:,} | {texts:,} | "
            print(row + " | ".join(cells) + " |")
            print(f"  measured fields {order} {size // KIB} KiB", file=sys.stderr, flush=True)

    def worst(ratio: Callable[[str], float], high: bool = True) -> tuple[float, str]:
        """The worse order's ratio, and both as a figure (three decimals: a ratio a hair
        over its target does not print as the target)."""
        figures = {order: ratio(order) for order in FIELDS_ORDERS}
        value = (max if high else min)(figures.values())
        each = ", ".join(f"{order} {figure:.3f}x" for order, figure in figures.items())
        return value, f"worst {value:.3f}x ({each})"

    def at(order: str, size: int, name: str) -> float:
        return best[(order, size, name)]

    what = f"one call of {largest // KIB} KiB in {FIELDS_FRAGMENT}-character fragments"
    over, over_text = worst(lambda o: at(o, largest, "fields()") / at(o, largest, "assemble()"))
    results: list[Target] = [
        (f"fields() within 4x the time of assemble() alone, {what}", over <= 4, over_text)
    ]
    target = f"fields() >= 40x faster than jiter's partial re-parse per fragment, {what}"
    if jiter:
        ahead, ahead_text = worst(
            lambda o: at(o, largest, "jiter re-parse") / at(o, largest, "fields()"), high=False
        )
        results.append((target, ahead >= 40, ahead_text))
    else:
        results.append((target, None, "not measured: jiter not installed"))
    quarter = largest // 4
    target = f"fields(): 4x the size ({quarter // KIB} to {largest // KIB} KiB) within 5x the time"
    if quarter in sizes:
        # ``best`` is per fragment: 4x its ratio is the ratio of the calls' whole times.
        growth, growth_text = worst(
            lambda o: 4 * at(o, largest, "fields()") / at(o, quarter, "fields()")
        )
        results.append((target, growth <= 5, growth_text))
    else:
        results.append((target, None, f"not measured: no {quarter // KIB} KiB call"))
    if path is not None:
        plot_fields(best, sizes, list(runs), path)
        print(f"\nplot written to {path}")
    return results


def plot_fields(
    best: dict[tuple[str, int, str], float], sizes: tuple[int, ...], names: list[str], path: Path
) -> None:
    """Time per fragment against call size: ours with the string first, the re-parse in both
    orders; log scales."""
    lines = [(name, FIELDS_ORDERS[0]) for name in names if name != "jiter re-parse"]
    lines += [("jiter re-parse", order) for order in FIELDS_ORDERS if "jiter re-parse" in names]
    curves = {
        f"{name}, {order}": [(size // KIB, best[(order, size, name)] * 1e6) for size in sizes]
        for name, order in lines
    }

    def style(name: str) -> str:
        if name.startswith("jiter"):
            return "--s"
        return ":^" if name.startswith("assemble") else "-o"

    plot_curves(
        curves,
        style,
        f"Field events: one call in {FIELDS_FRAGMENT}-character fragments",
        path,
        xlabel="call size (KiB of arguments)",
        ylabel="time per fragment (µs)",
        xticks=tuple(size // KIB for size in sizes),
    )


# -- early execution --------------------------------------------------------------------------

EARLY_STREAM = 1.0  # seconds the two-call turn takes to stream, as in the issue
EARLY_FIRST = 0.3  # of which call 0's, up to its last fragment
EARLY_TOOL = 0.7  # call 0's tool: about as long as the rest of the stream
EARLY_QUICK = 0.05  # --quick: the stream's seconds, the pauses and the tool in proportion
EARLY_TARGET = 0.8  # the wall time with ``early`` against without, at most
EARLY_CALLS = (
    ("call_0", "search", '{"query": "rxtoolcalls early calls"}', 3),
    ("call_1", "clock", '{"zone": "Europe/Oslo", "format": "iso-8601"}', 7),
)  # (id, tool, arguments, fragments): call 0 written fast, call 1 slowly
EARLY_ANSWER = "Found it."
EARLY_USER: list[dict[str, Any]] = [{"role": "user", "content": "Search, and tell me the time."}]
EARLY_CLIENTS = ("openai", "anthropic")  # the SDK each wire is read through
EARLY_MODES = ("sync", "async")


def _pieces(text: str, count: int) -> list[str]:
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _early_pauses(fast: int, slow: int) -> list[float]:
    """The pause after each event, as a share of the stream's time: ``fast`` events over the
    first EARLY_FIRST of it, then ``slow`` over the rest (the events after: no pause)."""
    first = EARLY_FIRST / EARLY_STREAM
    return [first / fast] * fast + [(1 - first) / slow] * slow


def build_early_chat() -> tuple[list[dict[str, Any]], list[float], list[dict[str, Any]]]:
    """The two-call Chat turn, the pause after each chunk (shares of the stream's time), and
    the prose answer that follows.

    Call 0 opens in the first chunk and its last fragment is sent at EARLY_FIRST; call 1 opens
    then (``arguments: ""``, as OpenAI opens a call) and its fragments take the rest, up to the
    ``tool_calls`` finish.
    """
    (id0, name0, text0, n0), (id1, name1, text1, n1) = EARLY_CALLS

    def opened(index: int, id_: str, name: str) -> dict[str, Any]:
        function = {"name": name, "arguments": ""}
        return {"index": index, "id": id_, "type": "function", "function": function}

    def piece(index: int, text: str) -> dict[str, Any]:
        return _chunk({"tool_calls": [{"index": index, "function": {"arguments": text}}]})

    chunks = [_chunk({"role": "assistant", "content": None, "tool_calls": [opened(0, id0, name0)]})]
    chunks += [piece(0, p) for p in _pieces(text0, n0)]
    chunks.append(_chunk({"tool_calls": [opened(1, id1, name1)]}))
    chunks += [piece(1, p) for p in _pieces(text1, n1)]
    chunks.append(_chunk({}, "tool_calls"))
    prose = [_chunk({"role": "assistant", "content": EARLY_ANSWER}), _chunk({}, "stop")]
    return chunks, _early_pauses(1 + n0, 1 + n1), prose


def _anthropic_message(stop: str, blocks: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    start: dict[str, Any] = {
        "id": "msg_early",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for block in blocks:
        events += block
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 20},
        }
    )
    events.append({"type": "message_stop"})
    return events


def build_early_anthropic() -> tuple[list[dict[str, Any]], list[float], list[dict[str, Any]]]:
    """``build_early_chat``'s turn as an Anthropic message: call 0's block stops at
    EARLY_FIRST, call 1's block opens then and its fragments take the rest."""
    blocks: list[list[dict[str, Any]]] = []
    for index, (id_, name, text, count) in enumerate(EARLY_CALLS):
        block = {"type": "tool_use", "id": id_, "name": name, "input": {}}
        events: list[dict[str, Any]] = [
            {"type": "content_block_start", "index": index, "content_block": block}
        ]
        events += [
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in _pieces(text, count)
        ]
        blocks.append([*events, {"type": "content_block_stop", "index": index}])
    n0, n1 = (count for *_, count in EARLY_CALLS)
    # message_start and call 0's start and fragments fast, its stop and call 1's start at once.
    pauses = _early_pauses(2 + n0, 1 + n1)
    pauses.insert(2 + n0, 0.0)
    answer: list[dict[str, Any]] = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": EARLY_ANSWER},
        },
        {"type": "content_block_stop", "index": 0},
    ]
    return _anthropic_message("tool_use", blocks), pauses, _anthropic_message("end_turn", [answer])


EARLY_BUILDERS = {"openai": build_early_chat, "anthropic": build_early_anthropic}


def early_tools(tool: float, asynchronous: bool) -> dict[str, Callable[..., Any]]:
    """Call 0's tool, taking ``tool`` seconds (``time.sleep``, or ``asyncio.sleep`` when
    ``asynchronous``), and call 1's, quick."""
    if asynchronous:

        async def search_async(query: str) -> str:
            await asyncio.sleep(tool)
            return f"3 results for {query!r}"

        async def clock_async(zone: str, format: str) -> str:
            return f"12:00 in {zone} ({format})"

        return {"search": search_async, "clock": clock_async}

    def search(query: str) -> str:
        time.sleep(tool)
        return f"3 results for {query!r}"

    def clock(zone: str, format: str) -> str:
        return f"12:00 in {zone} ({format})"

    return {"search": search, "clock": clock}


@dataclass
class EarlyRun:
    """One agent loop: its wall time, its transcript, and when its events came (seconds from
    the start, by event type; ToolCallEarly's only when a tool started early)."""

    seconds: float
    messages: tuple[dict[str, Any], ...]
    marks: list[tuple[float, Any]]

    @property
    def early_at(self) -> float | None:
        return next((t for t, e in self.marks if isinstance(e, rt.ToolCallEarly)), None)


def _early_open(client: str, sdk: Any) -> Callable[[list[dict[str, Any]]], Any]:
    if client == "openai":
        return lambda messages: sdk.chat.completions.create(
            model="m", messages=messages, stream=True
        )
    return lambda messages: sdk.messages.create(
        model="m", max_tokens=1024, messages=messages, stream=True
    )


def _early_client(client: str, server: Any, asynchronous: bool) -> Any:
    if client == "openai":
        import openai

        kind: Any = openai.AsyncOpenAI if asynchronous else openai.OpenAI
        return kind(base_url=server.base_url, api_key="unused", max_retries=0)
    import anthropic

    kind = anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic
    return kind(base_url=server.root_url, api_key="unused", max_retries=0)


def early_loop(client: str, mode: str, early: bool, stream: float) -> EarlyRun:
    """The agent loop over the two-call turn streamed in ``stream`` seconds through ``client``
    (sync ``.run()``, or awaited in ``asyncio.run``), with or without ``early={"search"}``.

    Timed from subscribing to the ``Conversation``; the server and the client are made before.
    Fails loudly when the loop did not send two requests or did not start call 0 early.
    """
    from rxtoolcalls.serve import ReplayServer

    turn, shares, prose = EARLY_BUILDERS[client]()
    pauses = [share * stream for share in shares]
    tools = early_tools(EARLY_TOOL * stream / EARLY_STREAM, mode == "async")
    names = {"search"} if early else None
    marks: list[tuple[float, Any]] = []
    start = 0.0

    def note(event: Any) -> None:
        marks.append((time.perf_counter() - start, event))

    def loop(sdk: Any) -> reactivex.Observable[rt.Conversation]:
        opened = _early_open(client, sdk)
        events = rt.agent_loop(opened, tools, EARLY_USER, early=names)
        return events.pipe(ops.do_action(note), rt.final_conversation())

    with ReplayServer([turn, prose], delays={0: pauses}) as server:
        if mode == "sync":
            sdk = _early_client(client, server, asynchronous=False)
            try:
                start = time.perf_counter()
                conversation = loop(sdk).run()
                seconds = time.perf_counter() - start
            finally:
                sdk.close()
        else:

            async def main() -> tuple[float, rt.Conversation]:
                nonlocal start
                sdk = _early_client(client, server, asynchronous=True)
                try:
                    start = time.perf_counter()
                    conversation: rt.Conversation = await loop(sdk)
                    return time.perf_counter() - start, conversation
                finally:
                    await sdk.close()

            seconds, conversation = asyncio.run(main())
        requests = len(server.requests)
    what = f"early: {client} {mode} {'with' if early else 'without'} early"
    if requests != 2:
        raise SystemExit(f"{what}: {requests} requests, not 2")
    if conversation.final.content != EARLY_ANSWER:
        raise SystemExit(f"{what}: the final answer is {conversation.final.content!r}")
    run = EarlyRun(seconds, conversation.messages, marks)
    started = [e.call.name for _, e in marks if isinstance(e, rt.ToolCallEarly)]
    held = [e.call.name for _, e in marks if isinstance(e, rt.ToolCallFinished) and e.early]
    expected = ["search"] if early else []
    if started != expected or held != expected:
        raise SystemExit(f"{what}: started early {started}, answered as early {held}")
    return run


@dataclass
class EarlySummary:
    """Each run's wall time without and with ``early``, their ratios, and where ``early``
    started call 0's tool."""

    without: list[float]
    with_early: list[float]
    early_at: list[float]

    @property
    def ratios(self) -> list[float]:
        return [w / o for w, o in zip(self.with_early, self.without, strict=True)]

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.ratios), max(self.ratios)


def early_section(runs: int, stream: float, clients: tuple[str, ...] | None = None) -> list[Target]:
    """The agent loop's wall time with ``early`` against without, on a two-call turn streamed
    over ``stream`` seconds through each client, sync and async, ``runs`` interleaved runs
    (printed); a target per client and mode, judged at the issue's scale only. Every run's
    transcript is checked against the first one's, with and without ``early``."""
    tool = EARLY_TOOL * stream / EARLY_STREAM
    first = EARLY_FIRST * stream / EARLY_STREAM
    print(
        f"\n### Early execution: a two-call turn streamed over {stream:.2f} s, the agent loop's "
        "wall time with `early` against without\n"
    )
    print(
        f"Call 0 is complete (its last fragment sent) at {first:.2f} s and its tool takes "
        f"{tool:.2f} s; call 1 streams until {stream:.2f} s and its tool is quick; a prose turn "
        "follows. `ReplayServer` paces the turn chunk by chunk over loopback HTTP; "
        f"`early={{'search'}}` or none; {runs} interleaved run(s) after an untimed one, each "
        "transcript checked against the first.\n"
    )
    print(
        "| client | mode | without (s) | with `early` (s) | ratio each run | median | "
        "spread | call 0 started early at (s) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    clients = EARLY_CLIENTS if clients is None else clients
    present = [c for c in clients if _importable(c)]
    missing = [c for c in clients if c not in present]
    cases = [(c, m) for c in present for m in EARLY_MODES]
    summaries = {case: EarlySummary([], [], []) for case in cases}
    transcripts: dict[str, tuple[dict[str, Any], ...]] = {}
    for client, mode in cases:
        # Untimed: the first request through a client imports and builds what later ones reuse.
        for early in (False, True):
            early_loop(client, mode, early, EARLY_QUICK)
    for _ in range(runs):
        for client, mode in cases:
            summary = summaries[(client, mode)]
            for early in (False, True):
                run = early_loop(client, mode, early, stream)
                kept = transcripts.setdefault(client, run.messages)
                if run.messages != kept:
                    raise SystemExit(
                        f"early: {client} {mode} {'with' if early else 'without'} early: "
                        "the transcript differs"
                    )
                if early:
                    summary.with_early.append(run.seconds)
                    summary.early_at.append(run.early_at or 0.0)
                else:
                    summary.without.append(run.seconds)
            print(f"  measured early {client} {mode}", file=sys.stderr, flush=True)
    results: list[Target] = []
    judged = stream >= EARLY_STREAM

    def each(values: list[float], digits: int = 3) -> str:
        return ", ".join(f"{v:.{digits}f}" for v in values)

    for (client, mode), summary in summaries.items():
        low, high = summary.spread
        print(
            f"| {client} | {mode} | {each(summary.without)} | {each(summary.with_early)} | "
            f"{each(summary.ratios, 2)} | {summary.median:.2f}x | {low:.2f}-{high:.2f}x | "
            f"{each(summary.early_at)} |"
        )
        figure = f"median {summary.median:.3f}x, spread {low:.3f}-{high:.3f}x over {runs} run(s)"
        text = (
            f"early: the loop's wall time within {EARLY_TARGET}x of without, {client} {mode}, "
            "every run"
        )
        if judged:
            results.append((text, high <= EARLY_TARGET, figure))
        else:
            results.append((text, None, f"not judged at {stream:.2f} s (--quick): {figure}"))
    results += [
        (f"early: {client}", None, f"not measured: {client} not installed") for client in missing
    ]
    return results


def client_versions() -> str:
    """The early section's clients and their versions (``name absent`` when not installed)."""
    found = []
    for name in EARLY_CLIENTS:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return ", ".join(found)


def _importable(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def verdict(results: list[Target]) -> int:
    """Print each target ([x] met, [ ] missed, [-] not measured); 1 when one was missed."""
    print("\n### Targets\n")
    for text, ok, figure in results:
        print(f"- [{'-' if ok is None else 'x' if ok else ' '}] {text}: {figure}")
    return 1 if any(ok is False for _, ok, _ in results) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--plot", type=Path, help="write the throughput plot (PNG) here")
    parser.add_argument("--streams", type=int, default=10_000, help="concurrent async streams")
    parser.add_argument(
        "--adversarial", action="store_true", help="only the adversarial-input sections"
    )
    parser.add_argument(
        "--baseline",
        default=BASELINE,
        metavar="REV",
        help=f"the git revision the Chat fast path is compared with (default {BASELINE}, the "
        "last one before the split into wires; 'none' skips the comparison)",
    )
    parser.add_argument(
        "--wires",
        action="store_true",
        help="only the wire sections: the baseline comparison, Responses, Anthropic, Bedrock, "
        "Gemini",
    )
    parser.add_argument("--gemini", action="store_true", help="only the Gemini section")
    parser.add_argument("--bytes", action="store_true", help="only the from-bytes section")
    parser.add_argument(
        "--sdk",
        action="store_true",
        help="only the through-the-openai-SDK section (and its concurrent streams over loopback)",
    )
    parser.add_argument(
        "--e2e",
        action="store_true",
        help="every end-to-end section in one run: from bytes (every wire), UI signals, "
        "concurrent byte sources, through the SDK, and the curves against stream size "
        "(plotted with --plot)",
    )
    parser.add_argument(
        "--fields",
        action="store_true",
        help="only the field-events section: fields() on one call against assemble() alone and "
        "jiter's partial re-parse after each fragment, by call size (plotted with --plot)",
    )
    parser.add_argument(
        "--early",
        action="store_true",
        help="only the early-execution section: the agent loop's wall time with early= against "
        "without, a two-call turn streamed over 1 s through the openai and anthropic clients, "
        "sync and async (--quick: over 0.05 s, one run, not judged)",
    )
    args = parser.parse_args(argv)
    baseline = None if args.baseline.lower() == "none" else args.baseline
    sizes: tuple[int, ...]
    if args.e2e:
        sizes = (2_500, 10_000) if args.quick else (10_000, 100_000)
        repeats = 1 if args.quick else args.repeats
        streams = 1_000 if args.quick else args.streams
        print(
            f"# rxtoolcalls end to end — {platform.python_implementation()} "
            f"{platform.python_version()}, {os.cpu_count()} CPUs; peers: {peer_versions()}"
        )
        results = (
            bytes_section(sizes, repeats)
            + wire_bytes_section(sizes, repeats)
            + ui_signals_section(sizes, repeats)
            + large_event_scaling(repeats)
            + sdk_section(SDK_SIZES, repeats, 50 if args.quick else SDK_STREAMS)
            + concurrency_bytes(streams, repeats)
        )
        e2e_section(repeats, args.plot)
        return verdict(results)
    if args.fields:
        print(
            f"# rxtoolcalls field events — {platform.python_implementation()} "
            f"{platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}, "
            f"rxtoolcalls {rt.__version__}"
        )
        sizes = FIELDS_QUICK if args.quick else FIELDS_SIZES
        return verdict(fields_section(sizes, 1 if args.quick else args.repeats, args.plot))
    if args.early:
        print(
            f"# rxtoolcalls early execution — {platform.python_implementation()} "
            f"{platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}, "
            f"rxtoolcalls {rt.__version__}; clients: {client_versions()}"
        )
        if args.quick:
            return verdict(early_section(1, EARLY_QUICK))
        return verdict(early_section(args.repeats, EARLY_STREAM))
    if args.sdk:
        streams = 50 if args.quick else SDK_STREAMS
        return verdict(sdk_section(SDK_SIZES, 1 if args.quick else args.repeats, streams))
    if args.bytes:
        sizes = (2_500, 10_000) if args.quick else (10_000, 100_000)
        repeats = 1 if args.quick else args.repeats
        streams = 1_000 if args.quick else args.streams
        return verdict(
            bytes_section(sizes, repeats)
            + wire_bytes_section(sizes, repeats)
            + ui_signals_section(sizes, repeats)
            + concurrency_bytes(streams, repeats)
        )
    if args.gemini:
        sizes = (2_500, 10_000) if args.quick else tuple(s for s in SIZES if s <= 100_000)
        return verdict(gemini_section(sizes, 1 if args.quick else args.repeats))
    if args.wires:
        sizes = (2_500, 10_000) if args.quick else SIZES
        wires = wire_sections(sizes, 1 if args.quick else args.repeats, not args.no_peers, baseline)
        return verdict(wires)
    if args.adversarial:
        adversarial = adversarial_sections(args.repeats)
        for text, ok, figure in adversarial:
            print(f"- [{'x' if ok else ' '}] {text}: {figure}")
        return 0 if all(ok for _, ok, _ in adversarial) else 1
    sizes = (2_500, 10_000) if args.quick else SIZES
    repeats = 1 if args.quick else args.repeats
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(
        f"# rxtoolcalls benchmark — {python}, {os.cpu_count()} CPUs, {platform.machine()}, "
        f"rxtoolcalls {rt.__version__}"
    )
    print(f"\npeers: {peer_versions()}")
    print(
        f"\nminimum of at least {repeats} interleaved runs (more for small streams), garbage "
        f"collector paused inside timed runs; {FRAGMENT}-character fragments, one per chunk"
    )
    spread = noise(repeats)
    print(
        f"machine noise: the hand loop's spread over identical runs is {spread:.0%} ((max-min)/min)"
    )
    rows = measure(sizes, repeats, peers=not args.no_peers)
    report(rows)

    by = {(r.name, r.layout, r.size): r for r in rows}
    small, large = min(sizes), max(sizes)
    print("\n### Scaling: seconds per fragment, largest vs smallest stream\n")
    print("| implementation | layout | " + f"{small:,} | {large:,} | ratio |")
    print("|---|---|---:|---:|---:|")
    scaling = []
    for name in ("assemble() (dicts)", "hand loop (dicts)"):
        for layout in LAYOUTS:
            a, b = by[(name, layout, small)], by[(name, layout, large)]
            per_a, per_b = a.best / a.fragments, b.best / b.fragments
            scaling.append(per_b / per_a)
            cells = f"{per_a * 1e9:.0f} ns | {per_b * 1e9:.0f} ns | {per_b / per_a:.2f}"
            print(f"| {name} | {layout} | {cells} |")

    fragments = 100_000 if args.quick else 1_000_000
    argument_bytes, ours, hand = peak_memory(fragments)
    print(f"\n### Peak memory, {fragments:,} fragments made on the fly (tracemalloc)\n")
    print(
        f"argument bytes {argument_bytes:,}; assemble() peak {ours:,} "
        f"({ours / argument_bytes:.2f}x); a hand loop keeping a list of pieces {hand:,} "
        f"({hand / argument_bytes:.2f}x)"
    )

    streams = 1_000 if args.quick else args.streams
    rate, total, per_stream = concurrency(streams, rx=True)
    floor, _, floor_per_stream = concurrency(streams, rx=False)
    print(f"\n### Concurrency: {streams:,} async streams on one asyncio loop\n")
    print(
        f"all {streams:,} turns correct; {total:,} fragments (each chunk awaited) at "
        f"{rate:,.0f} fragments/s aggregate, peak {per_stream / 1024:.1f} KiB per stream; "
        f"a plain `async for` into the hand loop: {floor:,.0f} fragments/s, "
        f"{floor_per_stream / 1024:.1f} KiB per stream"
    )

    adversarial = adversarial_sections(repeats)
    wires = wire_sections(sizes, repeats, not args.no_peers, baseline)
    fields = fields_section(FIELDS_QUICK if args.quick else FIELDS_SIZES, repeats, None)
    early = early_section(repeats, EARLY_QUICK if args.quick else EARLY_STREAM)

    results = targets(rows) + adversarial + wires + fields + early
    results.append(
        (
            "linear: per-fragment cost at the largest size within 1.5x of the smallest",
            max(scaling[:3]) <= 1.5,
            f"worst {max(scaling[:3]):.2f}",
        )
    )
    results.append(
        (
            "peak memory within 3x of the argument bytes (+ small constant)",
            ours <= 3 * argument_bytes + 1_000_000,
            f"{ours / argument_bytes:.2f}x",
        )
    )
    if args.plot:
        plot(rows, args.plot)
        print(f"\nplot written to {args.plot}")
    return verdict(results)


if __name__ == "__main__":
    sys.exit(main())
