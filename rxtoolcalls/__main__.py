"""Command line: replay, record, export, serve and chat; without arguments, replay the demo."""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib
import importlib.util
import itertools
import json
import math
import os
import re
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, TextIO

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
    a_or_an,
)
from ._policy import DEFAULT, LENIENT, Policy
from ._sse import DONE, SSEDecoder, chunk_from_event, error_field_error
from ._types import AssistantTurn, ToolCallStarted
from ._wire import MODES, Client, ClientSetupError, Request
from .agent import ToolExecutionError, TurnLimitError
from .operators import assemble, progress
from .sources import read_jsonl, record
from .wires import WIRES, lookup, names

__all__ = ["EXIT_CODES", "main"]

# One exit status per error class (subclasses before their bases); 2 is a usage or I/O error,
# 130 an interrupt (Ctrl-C).
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
    (TurnLimitError, 12),
    (ToolExecutionError, 13),
    (ToolCallStreamError, 1),
)
USAGE = 2
INTERRUPTED = 130


class _UsageError(Exception):
    """A usage or I/O error: one line on stderr, exit status 2."""


DEMO_PACE = 0.04  # seconds per chunk at --speed 1: a recording keeps no timestamps


def _exit_code(error: ToolCallStreamError) -> int:
    return next(code for kind, code in EXIT_CODES if isinstance(error, kind))


def _flag_hint(error: ToolCallStreamError, command: str) -> str | None:
    """What this command's own options can do about ``error`` (the library's hint is generic)."""
    ended_early = (
        type(error) is StreamInterruptedError
        and error.__cause__ is None
        and error.finish_reason is None
        # A stream the switch can help: no finish, on a wire that may never send one (not a
        # body cut inside a frame, nor a wire whose terminal event never came).
        and "require_finish_reason" in (error.hint or "")
    )
    if command in ("replay", "record", "serve") and ended_early:
        return "--no-require-finish-reason or --policy lenient accept a stream without one"
    if command == "chat":
        if ended_early:
            return "--policy lenient accepts a stream without one"
        if isinstance(error, TurnLimitError):
            return "raise --max-turns"
    if isinstance(error, MultipleChoicesError):
        return "request one choice (n=1)"
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


# Advice worded for Python code (a call, a keyword, a Policy or Limits field) does not fit a
# command line; the command's own options say the same in its terms.
_PYTHON_ADVICE = re.compile(r"\w\(|\w=|\bPolicy\b|\bLimits\b|\blenient policy\b|_\w+_")
_POLICY_COMMANDS = ("replay", "record", "chat")


def _library_hint(error: ToolCallStreamError, command: str, tries: int | None) -> list[str]:
    """The clauses of the error's own ``hint`` that fit a command line, reworded if needed.

    ``tries``: the attempts ``chat`` made at the turn, its retries spent.
    """
    hint = getattr(error, "hint", None)
    if not isinstance(hint, str):
        return []
    kept = []
    for clause in hint.split("; "):
        if "lenient policy" in clause:
            if command in _POLICY_COMMANDS:
                kept.append("--policy lenient accepts it")
        elif command == "chat" and "max_tokens" in clause:
            kept.append("raise --max-tokens")
        elif "max_turns" in clause:
            continue  # the command's own flag says it (_flag_hint)
        elif clause.startswith("retry the request") and command != "chat":
            continue  # a capture read again fails again
        elif clause.startswith("retry the request") and tries is not None:
            kept.append(f"tried {_times(tries)}: raise --retries to try more")
        elif not _PYTHON_ADVICE.search(clause):
            kept.append(clause)
    return kept


def _explain(
    error: ToolCallStreamError,
    err: TextIO,
    command: str,
    where: str = "",
    *,
    tries: int | None = None,
    hint: str | None = None,
) -> int:
    """Print ``error`` as one line (where, type, message, hints); return its exit status.

    ``tries``: the attempts ``chat`` made at the turn, its retries spent; ``hint`` replaces
    every other.
    """
    hints = [hint] if hint else [*_library_hint(error, command, tries), _flag_hint(error, command)]
    tail = "; ".join(dict.fromkeys(hint for hint in hints if hint))
    line = f"rxtoolcalls: {where}{type(error).__name__}: {_one_line(str(error))}"
    print(f"{line} — {tail}" if tail else line, file=err)
    return _exit_code(error)


def _looks_like_sse(lines: list[str]) -> bool:
    first = next((line for line in lines if line.strip()), "")
    return first.startswith(("data:", ":", "event:", "id:", "retry:"))


def _error_chunk(body: object) -> dict[str, Any]:
    """An in-band provider error as the chunk a capture keeps (the assembler raises on it)."""
    if isinstance(body, dict) and (body.get("error") is not None or body.get("object") == "error"):
        return body
    if isinstance(body, dict) and body.get("type") == "error":
        # A flat Responses error event: typed, so that a Responses reader takes it as its own.
        return {"type": "error", "error": body}
    return {"error": body}


def _sse_chunks(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The chunks of raw SSE text; in-band errors (every shape ``from_sse`` knows) as chunks."""
    decoder = SSEDecoder()
    for line in lines:
        for event in decoder.feed(line):
            try:
                chunk = chunk_from_event(event)
            except ProviderError as error:
                yield _error_chunk(error.body)
                continue
            except RecursionError:
                raise MalformedChunkError(
                    "an event's data nests deeper than the JSON decoder can read"
                ) from None
            if chunk is DONE:
                return
            if isinstance(chunk, dict):
                yield chunk
        if decoder.error_field is not None:
            # Old llama.cpp servers wrote errors in a non-standard "error:" field; kept where
            # it came, so a capture replays it in place.
            yield _error_chunk(error_field_error(decoder.error_field).body)
            decoder.error_field = None
    decoder.close()
    if decoder.error_field is not None:
        yield _error_chunk(error_field_error(decoder.error_field).body)


def _jsonl_chunks(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    number = 0

    def counted() -> Iterator[str]:
        nonlocal number
        for number, line in enumerate(lines, 1):  # noqa: B007 - read after a failure
            yield line

    try:
        yield from read_jsonl(counted())
    except RecursionError:
        raise MalformedChunkError(
            f"line {number} nests deeper than the JSON decoder can read"
        ) from None


def _load(path: str | None) -> list[dict[str, Any]]:
    """The chunks of a capture: ``.jsonl``, raw SSE, a raw binary body, ``-`` for stdin.

    Raw SSE is read from a ``.sse`` file or sniffed; a raw body in a wire's binary framing
    (an AWS event stream) is read whole.
    """
    if path is None:
        demo = resources.files("rxtoolcalls").joinpath("data/demo.jsonl")
        return list(read_jsonl(demo.read_text(encoding="utf-8").splitlines()))
    found = _binary_capture(path)
    if found is not None:
        return found
    with _text_lines(path) as lines:
        return list(_chunk_stream(lines, sse=path.endswith(".sse")))


def _policy(args: argparse.Namespace) -> tuple[Policy, bool | None]:
    policy = LENIENT if getattr(args, "policy", "default") == "lenient" else DEFAULT
    require = False if getattr(args, "no_require_finish_reason", False) else None
    return policy, require


def _show_progress(args: argparse.Namespace, err: TextIO) -> bool:
    if args.progress is not None:
        return bool(args.progress)
    return not getattr(args, "json", False) and err.isatty()


def _capture_name(args: argparse.Namespace) -> str | None:
    """The capture a command reads: its FILE, or ``None`` for ``--demo``."""
    if args.demo and args.file is not None:
        raise _UsageError(f"{args.command}: give FILE or --demo, not both")
    if not args.demo and args.file is None:
        raise _UsageError(f"{args.command}: a capture FILE (or --demo) is needed")
    name: str | None = args.file
    return name


def _timeline_check(path: str) -> None:
    """Refuse a timeline that cannot be written before any work is done."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise _UsageError("--timeline needs matplotlib: pip install 'rxtoolcalls[viz]'") from None
    target = Path(path)
    if not target.parent.is_dir():
        raise _UsageError(f"cannot write {path}: no directory {target.parent}")
    kind = target.suffix.lower().removeprefix(".")
    formats = FigureCanvasBase.get_supported_filetypes()
    if kind and kind not in formats:
        raise _UsageError(
            f"cannot write {path}: unknown picture format {kind!r} "
            f"(one of {', '.join(sorted(formats))})"
        )


def _replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    name = _capture_name(args)
    if args.timeline:
        _timeline_check(args.timeline)
    try:
        chunks = _load(name)
    except ToolCallStreamError as exc:
        return _explain(exc, err, "replay")
    pace = DEMO_PACE / args.speed if args.speed is not None else args.delay or 0.0
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
            label = _escape_surrogates(event.name)
            print(f"→ {label}…  (call {event.index}, #{event.count})", file=err, flush=True)

    shared.pipe(progress(policy)).subscribe(started, lambda _: None)
    shared.pipe(assemble(policy, require_finish_reason=require)).subscribe(
        turns.append, errors.append
    )
    shared.connect()

    if args.timeline:
        from .viz import draw, trace

        picture = trace(chunks, times=arrival if pace else None, policy=policy)
        import matplotlib.pyplot as plt

        try:
            plt.close(draw(picture, args.timeline, title=Path(name or "demo").name))
        except OSError as exc:
            raise _UsageError(f"cannot write {args.timeline}: {exc.strerror or exc}") from None
        if show:
            print(f"timeline written to {args.timeline}", file=err)
    return _report(turns, _lacking(errors, chunks, name), show, out, err, "replay")


def _escape_surrogates(text: str) -> str:
    r"""``text`` with each lone surrogate (not encodable as UTF-8) as its ``\uXXXX`` escape."""
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _json_text(value: Any) -> str:
    r"""``value`` as indented JSON, readable UTF-8; lone surrogates stay ``\uXXXX`` escapes.

    ``bytes`` (a Bedrock redacted reasoning block) are the base64 text the wire carries.
    """
    # Inside a JSON string the escape decodes back to the same code point: nothing is lost.
    return _escape_surrogates(json.dumps(value, indent=2, ensure_ascii=False, default=_base64_text))


def _base64_text(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON")


def _lacking(
    errors: list[Exception], chunks: Sequence[object], name: str | None
) -> list[Exception]:
    """``errors``, where a turn is missing for want of stream events, said as what the file lacks.

    The assembler's own words ("no turn to assemble") fit a stream that was cut; for a file
    that holds no events, or no event of any wire, no option of the command can help.
    """
    from .serve import _recording_wire

    error = errors[0] if errors else None
    if type(error) is not StreamInterruptedError or error.__cause__ is not None:
        return errors
    shown = "stdin" if name == "-" else name or "the capture"
    events = [chunk for chunk in chunks if isinstance(chunk, dict)]
    if not chunks:
        return [StreamInterruptedError(f"{shown} holds no events: nothing to assemble")]
    if len(events) < len(chunks) or _recording_wire(events) is not None:
        return errors
    keys = ", ".join(sorted(map(str, events[0])))
    first = f"the first holds the keys {_clipped(keys)}" if keys else "the first is {}"
    return [StreamInterruptedError(f"no event of {shown} is a stream event of any wire ({first})")]


def _clipped(text: str, size: int = 60) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _report(
    turns: list[AssistantTurn],
    errors: list[Exception],
    show: bool,
    out: TextIO,
    err: TextIO,
    command: str,
) -> int:
    """Print the assembled message (and a summary if ``show``), or explain the error."""
    if errors:
        error = errors[0]
        if not isinstance(error, ToolCallStreamError):
            raise error
        return _explain(error, err, command)
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
    print(_json_text(turn.to_message()), file=out)
    return 0


def _binary_capture(path: str) -> list[dict[str, Any]] | None:
    """The events of a file holding a raw body in a wire's binary framing, else ``None``."""
    if path == "-":
        return None
    try:
        with Path(path).open("rb") as file:
            body = file.read()
    except OSError:
        return None  # reported by _text_lines, as for any capture
    for read in dict.fromkeys(
        route.framing.read for spec in WIRES for route in spec.routes if route.framing.read
    ):
        found = read(body)
        if found is not None:
            return found
    return None


@contextlib.contextmanager
def _text_lines(path: str) -> Iterator[Iterator[str]]:
    """The lines of a file or stdin (``-``) as they arrive; usage errors if not UTF-8 text.

    The file is opened on entering, so a missing one is refused before anything is written,
    and closed on leaving, however far it was read.
    """
    name = "stdin" if path == "-" else path
    stdin = getattr(sys.stdin, "buffer", sys.stdin)
    try:
        binary: Any = stdin if path == "-" else Path(path).open("rb")  # noqa: SIM115
    except OSError as exc:
        raise _UsageError(f"cannot read {path}: {exc.strerror or exc}") from None

    def lines() -> Iterator[str]:
        try:
            for number, line in enumerate(binary, 1):
                if isinstance(line, str):
                    yield line
                    continue
                if b"\0" in line:
                    raise _UsageError(
                        f"{name} is a binary file, not a capture (.jsonl or SSE text)"
                    )
                try:
                    yield line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise _UsageError(
                        f"{name} is not UTF-8 text (line {number}, byte {exc.start}: {exc.reason})"
                    ) from None
        except OSError as exc:
            raise _UsageError(f"cannot read {path}: {exc.strerror or exc}") from None

    try:
        yield lines()
    finally:
        if binary is not stdin:
            binary.close()


def _chunk_stream(lines: Iterable[str], sse: bool = False) -> Iterator[dict[str, Any]]:
    """The chunks of capture lines: raw SSE if ``sse`` or sniffed, else JSONL."""
    rest = iter(lines)
    head: list[str] = []
    for line in rest:
        head.append(line.removeprefix("\ufeff") if not head else line)
        if line.strip():
            break
    body = itertools.chain(head, rest)
    return _sse_chunks(body) if sse or _looks_like_sse(head) else _jsonl_chunks(body)


def _same_file(one: str, other: str) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def _os_error(error: BaseException | None) -> OSError | None:
    """The ``OSError`` behind ``error``, following its causes."""
    while error is not None:
        if isinstance(error, OSError):
            return error
        error = error.__cause__
    return None


def _record(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    target = args.out
    if args.source != "-" and _same_file(args.source, target):
        raise _UsageError(f"{target} is the input: recording it would erase it")
    if os.path.lexists(target) and not args.force:
        raise _UsageError(f"{target} exists: pass --force to overwrite it")
    policy, require = _policy(args)
    written: list[object] = []
    capture_errors: list[Exception] = []
    turns: list[AssistantTurn] = []
    errors: list[Exception] = []
    found = _binary_capture(args.source)
    reading: contextlib.AbstractContextManager[Iterator[str]] = (
        _text_lines(args.source) if found is None else contextlib.nullcontext(iter(()))
    )
    with reading as lines:
        chunks = (
            iter(found)
            if found is not None
            else _chunk_stream(lines, sse=args.source.endswith(".sse"))
        )
        shared = reactivex.from_iterable(chunks).pipe(ops.publish())
        # Two subscribers: a failed turn stops its own reading, never the capture of the rest.
        shared.pipe(record(target)).subscribe(written.append, capture_errors.append)
        shared.pipe(assemble(policy, require_finish_reason=require)).subscribe(
            turns.append, errors.append
        )
        shared.connect()
    failure = capture_errors[0] if capture_errors else None
    if isinstance(failure, _UsageError):
        raise failure
    problem = _os_error(failure)
    if problem is not None:
        raise _UsageError(f"cannot write {target}: {problem.strerror or problem}")
    if failure is not None:
        # The input broke off (not JSON, not SSE): what arrived is kept, nothing is "recorded".
        if not written:
            with contextlib.suppress(OSError):
                os.remove(target)
        return _report(turns, errors or [failure], False, out, err, "record")
    plural = "" if len(written) == 1 else "s"
    print(f"recorded {len(written)} chunk{plural} to {target}", file=err)
    return _report(turns, _lacking(errors, written, args.source), False, out, err, "record")


def _export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    name = _capture_name(args)
    try:
        chunks = _load(name)
    except ToolCallStreamError as exc:
        return _explain(exc, err, "export")
    from .serve import _home

    # As the wire sends its events (the framing of the route that serves them as they are:
    # Bedrock InvokeModel envelopes as its chunk frames); a capture that shows no wire has
    # nothing to frame it by but plain SSE data lines.
    home = _home(chunks)
    framing = None if home is None else home[1].framing
    to = args.to or ("sse" if framing is None else framing.name)
    if to != "jsonl" and (framing.name if framing is not None else "sse") != to:
        shown = (
            "a capture that shows no wire" if home is None else a_or_an(f"{home[0].name} capture")
        )
        framed = "sse" if framing is None else framing.name
        raise _UsageError(f"export: {shown} is framed as {framed}, not {to}")
    pieces: list[bytes] = []
    for number, chunk in enumerate(chunks, 1):
        # SSE as providers send it (ASCII escapes); JSONL as record writes it. NaN and
        # Infinity are not JSON: no provider sends them, and no reader should get them.
        try:
            text = json.dumps(chunk, ensure_ascii=to != "jsonl", allow_nan=False)
        except ValueError:
            return _explain(
                MalformedChunkError(f"chunk {number} holds NaN or Infinity, which JSON cannot"),
                err,
                "export",
            )
        if to == "jsonl":
            pieces.append((_escape_surrogates(text) + "\n").encode())
        elif framing is None:
            pieces.append(f"data: {text}\n\n".encode())
        else:
            try:
                pieces.append(framing.frame(chunk))
            except Exception as error:  # noqa: BLE001 - a chunk the wire cannot send: one line
                if isinstance(error, ToolCallStreamError):
                    found = error
                else:
                    found = MalformedChunkError(
                        f"it cannot be framed as {to} ({type(error).__name__}: {error})"
                    )
                return _explain(found, err, "export", f"chunk {number}: ")
    if framing is not None and to != "jsonl":
        pieces.append(framing.end)
    body = b"".join(pieces)
    if to == "eventstream":
        binary = getattr(out, "buffer", None)
        if binary is None:
            raise _UsageError("export --to eventstream writes bytes: give it a binary stdout")
        out.flush()
        binary.write(body)
        binary.flush()
    else:
        out.write(body.decode())
    return 0


def _log(line: str, err: TextIO) -> None:
    print(line, file=err, flush=True)


def _serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .serve import ReplayServer, _home, _route_path

    if args.demo == bool(args.files):
        raise _UsageError("serve: give capture FILES or --demo")
    if args.python and not args.ui:
        raise _UsageError("serve --python: the tools answer the page's agent run: add --ui")
    tools = dict(_python_tool(spec) for spec in args.python or ())
    recordings = []
    for path in args.files or [None]:
        try:
            chunks = _load(path)
        except ToolCallStreamError as exc:
            return _explain(exc, err, "serve", f"{path}: ")
        if not chunks:
            raise _UsageError(f"{path} holds no chunks: nothing to serve")
        recordings.append(chunks)
    run_recordings = None
    if args.demo and args.ui:
        # The page's run needs a turn that answers after the tools: a made-up one, bundled,
        # for the page only (the HTTP routes serve the demo alone).
        answer = resources.files("rxtoolcalls").joinpath("data/ui/demo-answer.jsonl")
        run_recordings = [
            *recordings,
            list(read_jsonl(answer.read_text(encoding="utf-8").splitlines())),
        ]
    try:
        server = ReplayServer(
            recordings,
            delay=args.delay,
            loop=args.loop,
            port=args.port,
            log=lambda line: _log(line, err),
            ui=args.ui,
            tools=tools if args.ui else None,
            ui_recordings=run_recordings,
        )
    except OSError as exc:
        raise _UsageError(
            f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}"
        ) from None
    homes = [found for found in map(_home, recordings) if found is not None]
    paths = ", ".join(dict.fromkeys(_route_path(spec, route) for spec, route in homes))
    shown = f" ({paths})" if paths else ""
    # The address ends the line: scripts read it from there.
    print(
        f"serving {len(recordings)} recording(s){shown} at {server.base_url}", file=out, flush=True
    )
    if args.ui:
        print(f"the page: {server.root_url}/ui", file=out, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _tool_file(path: str) -> list[dict[str, Any]]:
    """The tools a ``--tools`` file declares: a JSON list, or an object with a ``tools`` list."""
    with _text_lines(path) as lines:
        text = "".join(lines)
    try:
        loaded = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _UsageError(f"{path} is not JSON: {exc}") from None
    entries = loaded.get("tools") if isinstance(loaded, dict) else loaded
    if not isinstance(entries, list):
        raise _UsageError(f'{path}: expected a list of tools, or {{"tools": [...]}}')
    for number, tool in enumerate(entries):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise _UsageError(
                f'{path}: tool {number} has no function name (expected {{"type": "function", '
                f'"function": {{"name": ...}}}})'
            )
    return entries


def _python_tool(spec: str) -> tuple[str, Callable[..., Any]]:
    """The function ``MODULE:FUNCTION`` or ``FILE.py:FUNCTION`` names.

    A module is imported as ``python -m`` would (the current directory first); a name with a
    path separator or ending in ``.py`` is a file, loaded as a module of its own.
    """
    source, colon, attribute = spec.rpartition(":")
    if not colon or not source or not attribute:
        raise _UsageError(f"--python {spec}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    is_file = source.endswith(".py") or os.sep in source or "/" in source
    module = _tool_file_module(source, spec) if is_file else _tool_module(source, spec)
    function = getattr(module, attribute, None)
    if function is None:
        raise _UsageError(f"--python {spec}: {source} has no attribute {attribute!r}")
    if not callable(function):
        named = f"{source}:{attribute}" if is_file else f"{source}.{attribute}"
        raise _UsageError(f"--python {spec}: {named} is not callable")
    return attribute, function


def _tool_module(module_name: str, spec: str) -> ModuleType:
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        # `python -m` puts the current directory first; the console script puts its own.
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise _UsageError(f"--python {spec}: cannot import {module_name}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed: say so in one line
        raise _UsageError(
            f"--python {spec}: importing {module_name} raised {type(exc).__name__}: "
            f"{_one_line(str(exc))}"
        ) from None


def _tool_file_module(path: str, spec: str) -> ModuleType:
    """The module a file of tools defines, under a private name (no module is shadowed)."""
    if not Path(path).is_file():
        raise _UsageError(f"--python {spec}: no such file {path}")
    stem = re.sub(r"\W", "_", Path(path).stem)
    # Registered while it runs, as an import would be: dataclasses and pickle look it up.
    name = next(
        f"_rxtoolcalls_tools_{stem}{suffix}"
        for suffix in itertools.chain([""], (f"_{n}" for n in itertools.count(2)))
        if f"_rxtoolcalls_tools_{stem}{suffix}" not in sys.modules
    )
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise _UsageError(f"--python {spec}: cannot load {path} as Python (name it .py)")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's file failed: one line
        del sys.modules[name]
        raise _UsageError(
            f"--python {spec}: importing {path} raised {type(exc).__name__}: {_one_line(str(exc))}"
        ) from None
    return module


def _load_tools(
    args: argparse.Namespace,
) -> tuple[list[dict[str, Any]], dict[str, Callable[..., Any]]]:
    declared = _tool_file(args.tools) if args.tools else []
    functions: dict[str, Callable[..., Any]] = {}
    for spec in args.python or []:
        name, function = _python_tool(spec)
        functions[name] = function
        if not any(t["function"]["name"] == name for t in declared):
            summary = (function.__doc__ or "").strip().splitlines()
            parameters = getattr(function, "parameters", {"type": "object"})
            if not isinstance(parameters, dict):
                raise _UsageError(f"--python {spec}: its parameters attribute is not a dict")
            declared.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": summary[0] if summary else name,
                        "parameters": parameters,
                    },
                }
            )
    from ._serve_ui import echo_tool

    for tool in declared:
        name = tool["function"]["name"]
        if name not in functions:
            functions[name] = echo_tool(name)
    return declared, functions


def _client(wire: str) -> tuple[Client, Any]:
    """The wire's client and its SDK module; a usage error naming the extra if missing."""
    client = lookup(wire).client
    try:
        sdk = importlib.import_module(client.sdk)
    except ImportError:
        raise _UsageError(
            f"chat --wire {wire} needs the {client.package} SDK: "
            f"pip install 'rxtoolcalls[{client.extra}]'"
        ) from None
    return client, sdk


def _tool_choice(text: str | None, declared: list[dict[str, Any]], wire: str) -> str | None:
    """``--tool-choice`` checked: a mode the wire has, or a declared tool's name."""
    if text is None:
        return None
    modes = lookup(wire).client.modes
    if text in MODES:
        if text not in modes:
            raise _UsageError(
                f"--tool-choice {text}: {wire} has no such mode "
                f"({', '.join(modes)} or a declared tool's name)"
            )
        return text
    names = [tool["function"]["name"] for tool in declared]
    if text not in names:
        known = ", ".join(names) or "no tools were given"
        raise _UsageError(f"--tool-choice {text}: not a mode or a declared tool ({known})")
    return text


def _unreachable(error: BaseException, url: str) -> tuple[OSError, str] | None:
    """The socket error under a request that reached no server, and what to check."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        found = pending.pop()
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        if isinstance(found, ConnectionRefusedError):
            return found, f"is a server listening at {url}?"
        if isinstance(found, socket.gaierror):
            return found, f"can this machine resolve the host of {url}?"
        pending += [found.__cause__, found.__context__]
    return None


def _base_url(text: str | None) -> str | None:
    """``--base-url`` checked: an http or https address (an SDK says less, later)."""
    if text is None:
        return None
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - raises for a port out of range or not a number
    except ValueError as exc:
        raise _UsageError(f"--base-url {text}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _UsageError(f"--base-url {text}: expected an http:// or https:// address")
    return text


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    declared, functions = _load_tools(args)
    choice = _tool_choice(args.tool_choice, declared, args.wire)
    entry, sdk = _client(args.wire)
    from ._agent_io import open_chunks, typed_failure
    from .agent import (
        Conversation,
        ToolCallEarly,
        ToolCallFinished,
        ToolCallRetracted,
        TurnRetried,
        agent_loop,
    )

    base_url = _base_url(args.base_url)
    try:
        client, url = entry.connect(sdk, base_url)
    except ClientSetupError as exc:
        raise _UsageError(f"chat --wire {args.wire}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the SDK refused its settings: one line
        raise _UsageError(
            f"chat --wire {args.wire}: the {entry.package} SDK refused its settings: "
            f"{type(exc).__name__}: {_one_line(str(exc))}"
        ) from None
    policy, require = _policy(args)
    show = _show_progress(args, err)
    ask = Request(args.model, declared, choice, args.temperature, args.max_tokens, args.system)
    ceiling = args.max_tokens if args.max_tokens is not None else entry.max_tokens
    if args.max_tokens_limit is not None:
        if ceiling is None:
            raise _UsageError(
                f"chat --max-tokens-limit: give --max-tokens, the ceiling it raises "
                f"(the {args.wire} wire has no default)"
            )
        if args.max_tokens_limit < ceiling:
            raise _UsageError(
                f"chat --max-tokens-limit {args.max_tokens_limit}: below the ceiling it "
                f"raises ({ceiling})"
            )
    unknown = sorted(set(args.early or ()) - set(functions))
    if unknown:
        raise _UsageError(
            f"chat --early {_one_line(unknown[0])[:64]}: no tool of that name is loaded "
            "(from --tools or --python)"
        )
    turns: dict[int, int] = {}

    def open_stream(messages: list[dict[str, Any]], max_tokens: int | None = None) -> Any:
        # A turn's transcript is longer than the last one's; a retry sends the same again,
        # keeps its number and so its capture.
        turn = turns.setdefault(len(messages), len(turns) + 1)
        # A forced choice holds for the first turn only: forced every turn, the model could
        # never answer, and the loop would end in TurnLimitError.
        forced = turn == 1 or choice in ("auto", "none")
        asked = ask if forced else replace(ask, choice=None)
        if max_tokens is not None:
            asked = replace(asked, max_tokens=max_tokens)
        stream = entry.open(client, asked, messages)
        if not args.record:
            return stream
        path = Path(args.record)
        target = path if turn == 1 else path.with_suffix(f".turn{turn}.jsonl")
        return open_chunks(stream, None).pipe(record(target))

    events: list[Any] = []
    errors: list[Exception] = []

    def on_event(event: Any) -> None:
        events.append(event)
        if not show:
            return
        if isinstance(event, ToolCallStarted):
            print(f"→ {_escape_surrogates(event.name)}…", file=err, flush=True)
        elif isinstance(event, ToolCallFinished):
            answer = _escape_surrogates(_one_line(event.content)[:80])
            print(f"  ← {_escape_surrogates(event.call.name)}: {answer}", file=err, flush=True)
        elif isinstance(event, ToolCallEarly):
            print(f"  ⇢ {_escape_surrogates(event.call.name)} started early", file=err, flush=True)
        elif isinstance(event, ToolCallRetracted):
            name = _escape_surrogates(event.call.name)
            print(f"  ✗ {name} taken back: {event.reason}", file=err, flush=True)
        elif isinstance(event, TurnRetried):
            raised = "" if event.max_tokens is None else f" with max tokens {event.max_tokens}"
            print(f"  ↻ retrying turn {event.turn}{raised}: {event.error}", file=err, flush=True)

    finished = threading.Event()

    def on_error(error: Exception) -> None:
        errors.append(error)
        finished.set()

    # A retry waits on a timer thread: subscribe() may return long before the loop ends.
    subscription = agent_loop(
        open_stream,
        functions,
        entry.messages(args.prompt, args.system),
        early=args.early,
        max_tokens=ceiling if args.max_tokens_limit is not None else None,
        max_tokens_limit=args.max_tokens_limit,
        max_turns=args.max_turns,
        retries=args.retries,
        policy=policy,
        require_finish_reason=require,
    ).subscribe(on_event, on_error, finished.set)
    try:
        while not finished.wait(0.2):
            pass
    finally:
        subscription.dispose()
    if errors:
        error = errors[0]
        if isinstance(error, ToolCallStreamError):
            # A failure the loop retries came after its last retry: no advice to retry.
            tries = 1 + args.retries if typed_failure(error)[1] else None
            unreachable = _unreachable(error, url)
            if unreachable is None or tries is None:
                return _explain(error, err, "chat", tries=tries)
            cause, check = unreachable
            said = StreamInterruptedError(
                f"cannot connect to {url} ({type(cause).__name__}: {cause.strerror or cause}; "
                f"tried {_times(tries)})"
            )
            return _explain(said, err, "chat", hint=check)
        print(f"rxtoolcalls: {type(error).__name__}: {_one_line(str(error))}", file=err)
        return 1
    final = events[-1]
    if not isinstance(final, Conversation):
        raise AssertionError(f"the agent loop completed after {final!r}, not a Conversation")
    if args.json:
        print(_json_text(list(final.messages)), file=out)
    else:
        print(_escape_surrogates(final.final.content or ""), file=out)
    return 0


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line: what is wrong and where the help is."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


_SECONDS_MAX = threading.TIMEOUT_MAX
"""The longest pause a thread can wait (a longer one overflows the clock)."""


def _number(
    kind: Callable[[str], Any], low: float, high: float | None = None
) -> Callable[[str], Any]:
    """An argparse type: a finite ``kind`` of at least ``low`` (and at most ``high``)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number: {text!r}")
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low:g}: {text!r}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:g}: {text!r}")
        return value

    return parse


def _speed(text: str) -> float:
    """``--speed``: a multiplier above 0 (0 would be a pace that never moves)."""
    try:
        speed = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if speed == 0:
        raise argparse.ArgumentTypeError(
            "0 would never play a chunk: for no pacing leave --speed out (or give --delay 0)"
        )
    if not speed > 0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be above 0: {text!r}")
    if DEMO_PACE / speed > _SECONDS_MAX:
        raise argparse.ArgumentTypeError(f"so slow a chunk would never come: {text!r}")
    return speed


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def policy_options(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--policy",
            choices=("default", "lenient"),
            default="default",
            help="lenient opts into every recovery of the provider-quirk catalogue "
            "(default: %(default)s)",
        )
        command.add_argument(
            "--no-require-finish-reason",
            action="store_true",
            help="accept a stream that ends without a finish_reason (default: off)",
        )

    def capture_options(command: argparse.ArgumentParser, files: str) -> None:
        command.add_argument(
            "--demo",
            action="store_true",
            help=f"use the bundled demo capture (a real gpt-4o turn with two parallel calls) "
            f"instead of {files} (default: off)",
        )

    replay = sub.add_parser(
        "replay",
        help="assemble a capture (.jsonl, raw SSE or a raw event-stream body, - for stdin) and "
        "print the message",
        description="Assemble a capture and print the assistant message as JSON on stdout; "
        "a typed error is one line on stderr and its own exit status.",
    )
    replay.add_argument(
        "file", nargs="?", help="the capture: .jsonl, raw SSE (.sse or sniffed), a raw body, -"
    )
    capture_options(replay, "FILE")
    policy_options(replay)
    pacing = replay.add_mutually_exclusive_group()
    pacing.add_argument(
        "--speed",
        type=_speed,
        metavar="TIMES",
        help=f"play the chunks at TIMES the demo's pace, {DEMO_PACE * 1000:.0f} ms per chunk "
        f"at 1: 2 is twice as fast ({DEMO_PACE * 500:.0f} ms), 0.5 half as fast "
        f"({DEMO_PACE * 2000:.0f} ms), inf without a pause; above 0 (default: no pacing)",
    )
    pacing.add_argument(
        "--delay",
        type=_number(float, 0, _SECONDS_MAX),
        metavar="SECONDS",
        help="seconds between two chunks, 0 for none (default: 0, as fast as they are read)",
    )
    replay.add_argument(
        "--json",
        action="store_true",
        help="no progress or summary on stderr, even on a terminal: the same as --no-progress "
        "(stdout is the message as JSON either way; default: off, so both show when stderr "
        "is a terminal)",
    )
    replay.add_argument(
        "--timeline",
        metavar="PICTURE",
        help="also draw the turn's timeline to this file: .png, .svg, .pdf… (extra viz; "
        "default: none)",
    )

    rec = sub.add_parser(
        "record",
        help="tee a raw body (SSE or event-stream; a file or stdin) to a .jsonl capture while "
        "assembling it",
        description="Write each chunk of a stream to a .jsonl capture as it arrives (in-band "
        "errors included), then print the assembled message like replay.",
    )
    rec.add_argument("out", help="capture file to write (one chunk per line)")
    rec.add_argument(
        "source",
        nargs="?",
        default="-",
        help="a raw body (SSE or event-stream) or a .jsonl capture, read as it arrives; - for "
        "stdin (default: -)",
    )
    rec.add_argument(
        "--force", action="store_true", help="overwrite OUT if it exists (default: off)"
    )
    policy_options(rec)

    export = sub.add_parser(
        "export",
        help="write a capture to stdout as the provider sends it (or as .jsonl)",
        description="Convert a capture: .jsonl to the raw stream its provider sends, framed as "
        "its wire frames it (Server-Sent Events, or binary AWS event-stream frames), or raw "
        "SSE to .jsonl. Nothing is assembled.",
    )
    export.add_argument(
        "file", nargs="?", help="the capture: .jsonl, raw SSE (.sse or sniffed), a raw body, -"
    )
    capture_options(export, "FILE")
    export.add_argument(
        "--to",
        choices=("sse", "eventstream", "jsonl"),
        default=None,
        help="the output format (default: the framing of the capture's wire)",
    )

    serve = sub.add_parser(
        "serve",
        help="replay captures over a local endpoint that speaks every wire",
        description="Answer on 127.0.0.1 with the captures in order, one per request, each at "
        "its wire's path: POST "
        + ", ".join(f"{spec.path} ({spec.title})" for spec in WIRES)
        + " (give clients other than OpenAI's the address without /v1); also any path ending "
        "in "
        + ", ".join(route.tail for spec in WIRES for route in spec.routes[1:])
        + "; after the last "
        "capture, the last one is answered again (with --loop, the first). POST /reset (no body "
        "needed: curl -X POST URL/reset) starts over, so that the next request gets the first "
        "capture: a second client run gets what the first one got. A request with stream: "
        "true, or at a streaming path, gets the capture framed as its wire sends it "
        "(Server-Sent Events, or AWS event-stream frames); any other gets the capture "
        "assembled into the wire's one reply (502 with the typed error if it does not "
        "assemble). GET /v1/models lists the captures' models. With --ui, GET /ui is a page "
        "that plays an agent run over the captures live, and GET /ui/events that run as AG-UI "
        "Server-Sent Events. One log line per request on stderr; Ctrl-C stops.",
    )
    serve.add_argument(
        "files", nargs="*", help="captures (.jsonl, raw SSE or a raw body), in answer order"
    )
    capture_options(serve, "FILES")
    serve.add_argument(
        "--port",
        type=_number(int, 0, 65535),
        default=8765,
        help="port to listen on, 0 for any free one (default: %(default)s)",
    )
    serve.add_argument(
        "--delay",
        type=_number(float, 0, _SECONDS_MAX),
        default=0.03,
        metavar="SECONDS",
        help="seconds between two streamed chunks, 0 for none (default: %(default)s)",
    )
    serve.add_argument(
        "--loop",
        action="store_true",
        help="after the last capture, answer the first again, and so on (default: off: the "
        "last one again)",
    )
    serve.add_argument(
        "--ui",
        action="store_true",
        help="also serve GET /ui, a page that shows an agent run over the captures as it "
        "streams (each capture one turn's reply, a retry the next one; tools answered by echo "
        "stubs), and GET /ui/events, that run as AG-UI Server-Sent Events; with --demo, a "
        "bundled answer turn follows the demo in the page's run only (default: off)",
    )
    serve.add_argument(
        "--python",
        action="append",
        metavar="MODULE:FUNCTION",
        help="with --ui, a Python function as a tool of the page's run, instead of its echo "
        "stub, as chat --python takes it; repeatable (default: none)",
    )

    chat = sub.add_parser(
        "chat",
        help="run the agent loop against an endpoint of any wire, through its SDK",
        description="Send PROMPT, run the tools the model calls, send their results back, "
        "until the model answers without tools; print that answer. Each wire goes through its "
        "own SDK, installed by an extra: "
        + "; ".join(
            f"{name}: {client.package}, pip install 'rxtoolcalls[{client.extra}]' "
            f"({client.credentials})"
            for name, client in ((spec.name, spec.client) for spec in WIRES)
        )
        + ". Without a key, 'unused' is sent, as a local server expects.",
    )
    chat.add_argument("prompt", help="the user message")
    chat.add_argument(
        "--wire",
        choices=names(),
        default="chat",
        help="the API to speak: "
        + ", ".join(f"{spec.name} ({spec.title})" for spec in WIRES)
        + "; chat is also every OpenAI-compatible server's (default: %(default)s)",
    )
    chat.add_argument(
        "--base-url",
        help="the endpoint as the wire's SDK takes it: "
        + ", ".join(f"{spec.name}: {spec.client.address}" for spec in WIRES)
        + " (default: the SDK's own, its provider's API)",
    )
    chat.add_argument("--model", required=True, help="the model name the endpoint expects")
    chat.add_argument(
        "--system",
        help="the system prompt: a first message on chat, the request's own field on the "
        "other wires (default: none)",
    )
    chat.add_argument(
        "--tools",
        help="a JSON file with the tools list in the Chat Completions shape (sent in the "
        "wire's own shape on the others), answered by echo stubs (default: none)",
    )
    chat.add_argument(
        "--python",
        action="append",
        metavar="MODULE:FUNCTION",
        help="a Python function as a tool: MODULE:FUNCTION imports a module from the current "
        "directory or sys.path, PATH.py:FUNCTION loads that file (a name with a / or ending "
        "in .py is a file); repeatable (default: none)",
    )
    chat.add_argument(
        "--tool-choice",
        metavar="CHOICE",
        help="auto, none, required, or a tool's name to force that tool; a forced choice "
        "(required or a name) applies to the first turn only, so the model can then answer "
        "(default: the server's, auto when tools are sent)",
    )
    chat.add_argument(
        "--temperature",
        type=_number(float, 0),
        help="sampling temperature (default: the server's)",
    )
    chat.add_argument(
        "--max-tokens",
        type=_number(int, 1),
        help="the most tokens the model may write per turn (default: the server's; "
        + "; ".join(
            f"{spec.client.max_tokens} on {spec.name}, whose API requires one"
            for spec in WIRES
            if spec.client.max_tokens is not None
        )
        + ")",
    )
    chat.add_argument(
        "--max-tokens-limit",
        type=_number(int, 1),
        metavar="N",
        help="stream a turn the token ceiling cut off inside a call again, with the ceiling "
        "doubled, up to N (default: never; starts from --max-tokens or the wire's default)",
    )
    chat.add_argument(
        "--early",
        action="append",
        metavar="TOOL",
        help="start this tool as soon as its own call is complete, before the turn ends; its "
        "answer waits for the turn, and a failed turn takes it back (read-only, idempotent "
        "tools only); repeatable (default: none)",
    )
    chat.add_argument(
        "--max-turns",
        type=_number(int, 1),
        default=8,
        help="model turns before giving up with TurnLimitError (default: %(default)s)",
    )
    chat.add_argument(
        "--retries",
        type=_number(int, 0),
        default=2,
        help="times an interrupted turn is streamed again (default: %(default)s)",
    )
    chat.add_argument(
        "--record",
        metavar="JSONL",
        help="also write turn 1's raw stream there, turn N's to NAME.turnN.jsonl (default: none)",
    )
    chat.add_argument(
        "--json",
        action="store_true",
        help="print the whole conversation as JSON instead of the answer (default: off)",
    )
    policy_options(chat)
    return parser


def _discard_stdout() -> None:
    """Point stdout at the null device, so the flush at exit cannot fail on a closed pipe."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    out = out or sys.stdout
    err = sys.stderr
    if args.command is None:
        args = argparse.Namespace(
            command="replay",
            file=None,
            demo=True,
            speed=1.0,
            delay=None,
            json=False,
            timeline=None,
            progress=args.progress,
            policy="default",
            no_require_finish_reason=False,
        )
    handler = {
        "replay": _replay,
        "record": _record,
        "export": _export,
        "serve": _serve,
        "chat": _chat,
    }[args.command]
    try:
        code = handler(args, out, err)
        out.flush()
    except _UsageError as exc:
        print(f"rxtoolcalls: {exc}", file=err)
        return USAGE
    except BrokenPipeError:
        # The reader left early (`| head`): the rest is not wanted.
        _discard_stdout()
        print("rxtoolcalls: the output was closed before the end (broken pipe)", file=err)
        return USAGE
    except KeyboardInterrupt:
        print("rxtoolcalls: interrupted", file=err)
        return INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
