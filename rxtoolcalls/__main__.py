"""Command line: replay, record, serve and chat; without arguments, replay the bundled demo."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import reactivex
from reactivex import operators as ops

from ._errors import (
    ContentFilteredError,
    InvalidArgumentsError,
    LimitExceededError,
    MalformedChunkError,
    MultipleChoicesError,
    ProviderError,
    StreamInterruptedError,
    ToolCallStreamError,
    TruncatedToolCallError,
    UnknownToolError,
)
from ._policy import DEFAULT, LENIENT, Policy
from ._sse import DONE, SSEDecoder, chunk_from_event
from ._types import AssistantTurn, ToolCallStarted
from .operators import assemble, progress
from .sources import from_openai_stream, from_sse, read_jsonl, record

__all__ = ["EXIT_CODES", "main"]

# One exit status per error class (subclasses before their bases); 2 is a usage or I/O error.
EXIT_CODES: tuple[tuple[type[ToolCallStreamError], int], ...] = (
    (MalformedChunkError, 3),
    (ProviderError, 9),
    (StreamInterruptedError, 4),
    (TruncatedToolCallError, 5),
    (ContentFilteredError, 6),
    (InvalidArgumentsError, 7),
    (MultipleChoicesError, 8),
    (LimitExceededError, 10),
    (UnknownToolError, 11),
    (ToolCallStreamError, 1),
)

_HINTS: dict[type[ToolCallStreamError], str] = {
    MalformedChunkError: "the provider broke the chunk format; keep the raw stream and report it",
    ProviderError: "the provider failed mid-stream; retry the request",
    StreamInterruptedError: "retry; for providers that never send a finish_reason use "
    "--no-require-finish-reason or --policy lenient",
    TruncatedToolCallError: "raise max_tokens and retry",
    ContentFilteredError: "rephrase the request",
    InvalidArgumentsError: "the model wrote invalid arguments; retry the turn",
    MultipleChoicesError: "request n=1",
    LimitExceededError: "the output passed a safety limit; raise it in Limits if it is legitimate",
    UnknownToolError: "the model called an undeclared tool; retry the turn",
    ToolCallStreamError: "retry",
}

DEMO_PACE = 0.04  # seconds per chunk at --speed 1: a recording keeps no timestamps


def _exit_code(error: ToolCallStreamError) -> int:
    return next(code for kind, code in EXIT_CODES if isinstance(error, kind))


def _explain(error: ToolCallStreamError, err: TextIO) -> int:
    hint = next(h for kind, h in _HINTS.items() if isinstance(error, kind))
    print(f"rxtoolcalls: {type(error).__name__}: {error} — {hint}", file=err)
    return _exit_code(error)


def _looks_like_sse(lines: list[str]) -> bool:
    first = next((line for line in lines if line.strip()), "")
    return first.startswith(("data:", ":", "event:", "id:", "retry:"))


def _sse_chunks(lines: Sequence[str]) -> Iterator[dict[str, Any]]:
    decoder = SSEDecoder()
    for line in lines:
        for event in decoder.feed(line):
            chunk = chunk_from_event(event)
            if chunk is DONE:
                return
            if isinstance(chunk, dict):
                yield chunk
    decoder.close()


def _load(path: str | None) -> list[dict[str, Any]]:
    """The chunks of a capture: ``.jsonl``, raw SSE (``.sse`` or sniffed), ``-`` for stdin."""
    if path is None:
        demo = resources.files("rxtoolcalls").joinpath("data/demo.jsonl")
        return list(read_jsonl(demo.read_text(encoding="utf-8").splitlines()))
    if path == "-":
        lines = sys.stdin.read().splitlines(keepends=True)
    else:
        lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    if (path or "").endswith(".sse") or _looks_like_sse(lines):
        return list(_sse_chunks(lines))
    return list(read_jsonl(lines))


def _policy(args: argparse.Namespace) -> tuple[Policy, bool | None]:
    policy = LENIENT if getattr(args, "policy", "default") == "lenient" else DEFAULT
    require = False if getattr(args, "no_require_finish_reason", False) else None
    return policy, require


def _show_progress(args: argparse.Namespace, err: TextIO) -> bool:
    if args.progress is not None:
        return bool(args.progress)
    return not getattr(args, "json", False) and err.isatty()


def _replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        chunks = _load(args.file)
    except OSError as exc:
        print(f"rxtoolcalls: cannot read {args.file}: {exc.strerror or exc}", file=err)
        return 2
    except ToolCallStreamError as exc:
        return _explain(exc, err)
    pace = 0.0 if args.speed <= 0 else DEMO_PACE / args.speed
    arrival: list[float] = []

    def paced() -> Iterator[dict[str, Any]]:
        for chunk in chunks:
            if pace:
                time.sleep(pace)
            arrival.append(time.monotonic())
            yield chunk

    policy, require = _policy(args)
    shared = reactivex.from_iterable(paced()).pipe(ops.publish())
    turns: list[AssistantTurn] = []
    errors: list[Exception] = []
    show = _show_progress(args, err)

    def started(event: ToolCallStarted) -> None:
        if show:
            print(f"→ {event.name}…  (call {event.index}, #{event.count})", file=err, flush=True)

    shared.pipe(progress(policy)).subscribe(started, lambda _: None)
    shared.pipe(assemble(policy, require_finish_reason=require)).subscribe(
        turns.append, errors.append
    )
    shared.connect()

    if args.timeline:
        from .viz import draw, trace

        picture = trace(chunks, times=arrival if pace else None, policy=policy)
        draw(picture, args.timeline, title=Path(args.file or "demo").name)
        if show:
            print(f"timeline written to {args.timeline}", file=err)
    return _report(turns, errors, show, out, err)


def _report(
    turns: list[AssistantTurn], errors: list[Exception], show: bool, out: TextIO, err: TextIO
) -> int:
    """Print the assembled message (and a summary if ``show``), or explain the error."""
    if errors:
        error = errors[0]
        if not isinstance(error, ToolCallStreamError):
            raise error
        return _explain(error, err)
    turn = turns[0]
    if show:
        calls = len(turn.tool_calls)
        print(
            f"✓ {calls} tool call{'s' if calls != 1 else ''}, finish_reason={turn.finish_reason!r}",
            file=err,
        )
        if turn.normalizations:
            fixes = ", ".join(f"{k} x{v}" for k, v in sorted(turn.normalizations.items()))
            print(f"  recovered: {fixes}", file=err)
    print(json.dumps(turn.to_message(), indent=2, ensure_ascii=False), file=out)
    return 0


def _record(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    source: Any = sys.stdin if args.source == "-" else Path(args.source).open(encoding="utf-8")  # noqa: SIM115
    policy, require = _policy(args)
    turns: list[AssistantTurn] = []
    errors: list[Exception] = []
    from_sse(source).pipe(
        record(args.out), assemble(policy, require_finish_reason=require)
    ).subscribe(turns.append, errors.append)
    print(f"recorded to {args.out}", file=err)
    return _report(turns, errors, False, out, err)


def _serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .serve import ReplayServer

    try:
        recordings = [_load(path) for path in args.files]
    except OSError as exc:
        print(f"rxtoolcalls: cannot read a capture: {exc}", file=err)
        return 2
    server = ReplayServer(recordings, delay=args.delay, port=args.port)
    print(f"serving {len(recordings)} recording(s) at {server.base_url}", file=out, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _load_tools(
    args: argparse.Namespace,
) -> tuple[list[dict[str, Any]], dict[str, Callable[..., Any]]]:
    declared: list[dict[str, Any]] = []
    if args.tools:
        loaded = json.loads(Path(args.tools).read_text(encoding="utf-8"))
        declared = list(loaded if isinstance(loaded, list) else loaded.get("tools", []))
    functions: dict[str, Callable[..., Any]] = {}
    for spec in args.python or []:
        module_name, _, attribute = spec.partition(":")
        function = getattr(importlib.import_module(module_name), attribute)
        functions[attribute] = function
        if not any(t.get("function", {}).get("name") == attribute for t in declared):
            declared.append(
                {
                    "type": "function",
                    "function": {
                        "name": attribute,
                        "description": (function.__doc__ or attribute).strip().splitlines()[0],
                        "parameters": getattr(function, "parameters", {"type": "object"}),
                    },
                }
            )
    for tool in declared:
        name = tool["function"]["name"]
        if name not in functions:

            def echo(_name: str = name, **arguments: Any) -> str:
                return json.dumps({"tool": _name, "arguments": arguments})

            functions[name] = echo
    return declared, functions


def _chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        import openai
    except ImportError:
        print(
            "rxtoolcalls: chat needs the openai extra: pip install 'rxtoolcalls[openai]'", file=err
        )
        return 2
    from .agent import Conversation, ToolCallFinished, TurnRetried, agent_loop

    declared, functions = _load_tools(args)
    # The SDK's overloads do not type a request built from a user's files; it is checked there.
    client: Any = openai.OpenAI(
        api_key=os.environ.get("OPENAI_API_KEY", "unused"), base_url=args.base_url, max_retries=0
    )
    policy, _ = _policy(args)
    show = _show_progress(args, err)
    turn_number = [0]

    def open_stream(messages: list[dict[str, Any]]) -> Any:
        turn_number[0] += 1
        stream = client.chat.completions.create(
            model=args.model,
            messages=messages,
            stream=True,
            **({"tools": declared} if declared else {}),
        )
        source = from_openai_stream(stream)
        if args.record:
            path = Path(args.record)
            target = (
                path if turn_number[0] == 1 else path.with_suffix(f".turn{turn_number[0]}.jsonl")
            )
            source = source.pipe(record(target))
        return source

    events: list[Any] = []
    errors: list[Exception] = []

    def on_event(event: Any) -> None:
        events.append(event)
        if not show:
            return
        if isinstance(event, ToolCallStarted):
            print(f"→ {event.name}…", file=err, flush=True)
        elif isinstance(event, ToolCallFinished):
            print(f"  ← {event.call.name}: {event.content[:80]}", file=err, flush=True)
        elif isinstance(event, TurnRetried):
            print(f"  ↻ retrying turn {event.turn}: {event.error}", file=err, flush=True)

    finished = threading.Event()

    def on_error(error: Exception) -> None:
        errors.append(error)
        finished.set()

    # A retry waits on a timer thread: subscribe() may return long before the loop ends.
    subscription = agent_loop(
        open_stream,
        functions,
        [{"role": "user", "content": args.prompt}],
        max_turns=args.max_turns,
        retries=args.retries,
        policy=policy,
    ).subscribe(on_event, on_error, finished.set)
    try:
        while not finished.wait(0.2):
            pass
    finally:
        subscription.dispose()
    if errors:
        error = errors[0]
        if isinstance(error, ToolCallStreamError):
            return _explain(error, err)
        print(f"rxtoolcalls: {type(error).__name__}: {error}", file=err)
        return 1
    final = events[-1]
    if not isinstance(final, Conversation):
        raise AssertionError(f"the agent loop completed after {final!r}, not a Conversation")
    if args.json:
        print(json.dumps(list(final.messages), indent=2, ensure_ascii=False), file=out)
    else:
        print(final.final.content or "", file=out)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rxtoolcalls",
        description="Assemble streamed tool calls. Without a command, replays the bundled demo "
        "(a real gpt-4o recording with two parallel tool calls) and prints the assistant message.",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress on stderr (default: when stderr is a terminal)",
    )
    sub = parser.add_subparsers(dest="command")

    def policy_options(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--policy",
            choices=("default", "lenient"),
            default="default",
            help="lenient opts into every recovery of the provider-quirk catalogue",
        )
        command.add_argument(
            "--no-require-finish-reason",
            action="store_true",
            help="accept a stream that ends without a finish_reason",
        )

    replay = sub.add_parser("replay", help="replay a capture (.jsonl or raw SSE, - for stdin)")
    replay.add_argument("file")
    policy_options(replay)
    replay.add_argument(
        "--speed",
        type=float,
        default=0.0,
        help=f"pace multiplier ({DEMO_PACE * 1000:.0f} ms per chunk at 1; 0: no delay)",
    )
    replay.add_argument("--json", action="store_true", help="machine-readable result only")
    replay.add_argument("--timeline", metavar="PNG", help="draw the turn's timeline (matplotlib)")

    rec = sub.add_parser("record", help="tee raw SSE (a file or stdin) to a .jsonl capture")
    rec.add_argument("out", help="capture file to write (one chunk per line)")
    rec.add_argument("source", nargs="?", default="-", help="raw SSE file (default: stdin)")
    policy_options(rec)

    serve = sub.add_parser("serve", help="replay captures over a local OpenAI-compatible endpoint")
    serve.add_argument("files", nargs="+", help="captures, answered one per request in order")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--delay", type=float, default=0.03, help="seconds between chunks")

    chat = sub.add_parser("chat", help="run the agent loop against an OpenAI-compatible endpoint")
    chat.add_argument("prompt")
    chat.add_argument("--base-url", required=True)
    chat.add_argument("--model", required=True)
    chat.add_argument("--tools", help="a JSON file with the tools list (echo stubs answer them)")
    chat.add_argument(
        "--python",
        action="append",
        metavar="MODULE:FUNCTION",
        help="a Python function as a tool (repeatable)",
    )
    chat.add_argument("--max-turns", type=int, default=8)
    chat.add_argument(
        "--retries",
        type=int,
        default=2,
        help="times an interrupted turn is streamed again (default: %(default)s)",
    )
    chat.add_argument("--record", metavar="JSONL", help="also write each turn's raw stream")
    chat.add_argument("--json", action="store_true", help="print the whole conversation as JSON")
    policy_options(chat)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    out = out or sys.stdout
    err = sys.stderr
    if args.command is None:
        demo = argparse.Namespace(
            file=None,
            speed=1.0,
            json=False,
            timeline=None,
            progress=args.progress,
            policy="default",
            no_require_finish_reason=False,
        )
        return _replay(demo, out, err)
    handler = {"replay": _replay, "record": _record, "serve": _serve, "chat": _chat}[args.command]
    return handler(args, out, err)


if __name__ == "__main__":
    sys.exit(main())
