"""Command line: replay a chunk capture through ``assemble()`` and print the assistant message."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import resources
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
from ._policy import DEFAULT, LENIENT
from ._types import AssistantTurn, ToolCallStarted
from .operators import assemble, progress
from .sources import read_jsonl

__all__ = ["EXIT_CODES", "main"]

# One exit status per error class (subclasses before their bases).
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
    "--no-require-finish-reason",
    TruncatedToolCallError: "raise max_tokens and retry",
    ContentFilteredError: "rephrase the request",
    InvalidArgumentsError: "the model wrote invalid arguments; retry the turn",
    MultipleChoicesError: "request n=1",
    LimitExceededError: "the output passed a safety limit; raise it in Limits if it is legitimate",
    UnknownToolError: "the model called an undeclared tool; retry the turn",
    ToolCallStreamError: "retry",
}


def _exit_code(error: ToolCallStreamError) -> int:
    return next(code for kind, code in EXIT_CODES if isinstance(error, kind))


def _load(path: str | None) -> list[dict[str, Any]]:
    if path is None:
        demo = resources.files("rxtoolcalls").joinpath("data/demo.jsonl")
        return list(read_jsonl(demo.read_text(encoding="utf-8").splitlines()))
    if path == "-":
        return list(read_jsonl(sys.stdin))
    return list(read_jsonl(path))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rxtoolcalls",
        description="Replay a chat-completion chunk capture (.jsonl, one chunk per line) "
        "through assemble() and print the assistant message. Without FILE, replays the "
        "bundled demo stream (a real gpt-4o recording with two parallel tool calls).",
    )
    parser.add_argument("file", nargs="?", help="capture file, or - for stdin")
    parser.add_argument(
        "--json", action="store_true", help="print only the assistant message as JSON"
    )
    parser.add_argument(
        "--no-require-finish-reason",
        action="store_true",
        help="accept a stream that ends without a finish_reason",
    )
    parser.add_argument(
        "--policy",
        choices=("default", "lenient"),
        default="default",
        help="lenient opts into every recovery of the provider-quirk catalogue",
    )
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    out = out or sys.stdout
    err = sys.stderr
    try:
        chunks = _load(args.file)
    except OSError as exc:
        print(f"rxtoolcalls: cannot read {args.file}: {exc.strerror or exc}", file=err)
        return 2
    except MalformedChunkError as exc:
        print(f"rxtoolcalls: {args.file or 'demo'}: {exc}", file=err)
        return _exit_code(exc)

    source = reactivex.from_iterable(chunks).pipe(ops.publish())
    turns: list[AssistantTurn] = []
    errors: list[Exception] = []

    def show(event: ToolCallStarted) -> None:
        if not args.json:
            print(f"→ {event.name} (call {event.index}, #{event.count})", file=err, flush=True)

    policy = LENIENT if args.policy == "lenient" else DEFAULT
    require = False if args.no_require_finish_reason else None
    source.pipe(progress(policy)).subscribe(show, lambda _: None)
    source.pipe(assemble(policy, require_finish_reason=require)).subscribe(
        turns.append, errors.append
    )
    source.connect()

    if errors:
        error = errors[0]
        if not isinstance(error, ToolCallStreamError):
            raise error
        hint = next(h for kind, h in _HINTS.items() if isinstance(error, kind))
        print(f"rxtoolcalls: {type(error).__name__}: {error} — {hint}", file=err)
        return _exit_code(error)
    turn = turns[0]
    if not args.json:
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


if __name__ == "__main__":
    sys.exit(main())
