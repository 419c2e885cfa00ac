"""A local endpoint that replays recorded streams over real HTTP (stdlib only), on every wire.

For demos and tests without a provider. Each recording is served at its wire's path: Chat
Completions at ``POST /v1/chat/completions``, Responses at ``POST /v1/responses``, Anthropic
Messages at ``POST /v1/messages``, Gemini at ``POST
/v1beta/models/{model}:streamGenerateContent?alt=sse``. A request with ``stream: true`` (on
Gemini, one at ``:streamGenerateContent``) gets the next recording as Server-Sent Events paced
by ``delay`` seconds per chunk (Chat: ``data:`` lines, then ``data: [DONE]``; Gemini: ``data:``
lines alone; Responses and Anthropic: each event named by its ``type``, as the providers send
them and as the anthropic SDK requires); without it (on Gemini, ``:generateContent``), the one
object the recording stands for (a ``chat.completion``, a ``response``, a ``message``, a
``GenerateContentResponse``). AWS Bedrock: ``POST /model/{modelId}/converse-stream`` streams
a ConverseStream recording as event-stream frames (an exception event as an exception frame),
``/model/{modelId}/converse`` answers its ``Converse`` reply, and
``/model/{modelId}/invoke-with-response-stream`` streams an Anthropic recording (its events, or
the InvokeModel ``chunk`` envelopes recorded) as ``chunk`` frames; each frame is one HTTP chunk
(``Transfer-Encoding: chunked``), as Bedrock sends them, so that boto3 reads it as it comes.
``GET /v1/models`` lists the recordings' models; ``POST /reset`` starts over at the first
recording. Errors are JSON bodies in the wire's shape (OpenAI ``{"error": {...}}``, Anthropic
``{"type": "error", "error": {...}}``, Google ``{"error": {"code", "message", "status"}}``, AWS
``{"__type", "message"}``). A chunk the route cannot frame, or a reply that cannot be built, is
a 500 naming it, never a traceback.

With ``ui=True`` (``serve --ui``), ``GET /ui`` is a page that shows an agent run live, and
``GET /ui/events`` streams that run as AG-UI events (``text/event-stream``): each client gets
its own ``agent_loop`` over the recordings, paced and cut as the HTTP routes are, its tools
answered by echo stubs (or the ``tools`` given), its events mapped by
:func:`rxtoolcalls.ui.to_ag_ui`. A client that leaves stops its run.
"""

from __future__ import annotations

import json
import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import reactivex
from reactivex.scheduler import EventLoopScheduler

from ._errors import ProviderError, ToolCallStreamError, a_or_an
from ._reader import recording_wire
from ._wire import Route, WireSpec
from .operators import assemble_choices
from .wires import WIRES, lookup

__all__ = ["ReplayServer"]

_POLL = 0.05
"""Seconds between the background server's checks for ``stop()``."""

MAX_BODY = 16 * 1024 * 1024
"""The largest request body read (bytes); a longer ``Content-Length`` gets 413."""


def _content_length(values: Sequence[str]) -> int:
    """The body length the ``Content-Length`` fields give; ``ValueError`` (saying why) if none.

    Only ASCII digits count (``str.isdigit`` takes ``²``; ``int`` takes other scripts' digits
    and Unicode spaces). One value repeated, on several lines or as a list (``2, 2``), counts
    once, as RFC 9110 section 8.6 allows; different values are refused, since the body's end
    would depend on which one a reader believes. A count with more digits than ``MAX_BODY``
    comes back as ``MAX_BODY + 1`` (``int`` refuses a long enough string of digits).
    """
    given = {part.strip(" \t") for value in values for part in value.split(",")}
    if len(given) > 1:
        raise ValueError(f"Content-Length has different values: {', '.join(sorted(given))[:60]!r}")
    [count] = given
    if not (count.isascii() and count.isdigit()):
        raise ValueError(f"Content-Length is not a byte count: {count[:40]!r}")
    digits = count.lstrip("0")
    return int(digits or "0") if len(digits) <= len(str(MAX_BODY)) else MAX_BODY + 1


# The request line and headers are the client's bytes, read as Latin-1: their control
# characters (C0, DEL and C1: ESC, BEL, CSI ...) would drive the terminal showing the log.
# Each is written as \xHH, and a backslash is doubled so that no escape in a line is forged.
_VISIBLE = str.maketrans(
    {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))} | {0x5C: "\\\\"}
)


def _visible(line: str) -> str:
    r"""``line`` with control characters as ``\xHH`` and backslashes doubled."""
    return line.translate(_VISIBLE)


def _route(path: str) -> tuple[WireSpec, Route] | None:
    """The wire and route a request path is for (a client may put any base URL first)."""
    for spec in WIRES:
        for route in spec.routes:
            if path.endswith(route.tail):
                return spec, route
    return None


def _error_body(status: int, message: str, kind: str, code: object) -> dict[str, Any]:
    """An error body for a request no wire's path matched."""
    return {"error": {"message": message, "type": kind, "code": code}}


# Framings sent as HTTP/1.1 chunks, one frame each. A client reading a body that has neither
# a length nor chunks waits for a whole block: botocore (through urllib3) reads 64 KB, so a
# paced event stream reached boto3 only at its end. SSE clients read what has arrived.
_CHUNKED = frozenset({"eventstream"})


def _http_chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a ``Transfer-Encoding: chunked`` body (never the last)."""
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


def _paths() -> str:
    return ", ".join(spec.path for spec in WIRES)


def _event_wire(event: dict[str, Any]) -> str | None:
    """The wire an event shows (the one it wraps, for an envelope), or ``None``.

    An envelope whose inside cannot be read (an InvokeModel ``chunk`` whose ``bytes`` are not
    base64 JSON) shows none: a replay serves broken streams too, for a client to fail on.
    """
    try:
        return recording_wire(event)
    except ToolCallStreamError:
        return None


def _recording_wire(recording: Sequence[dict[str, Any]]) -> str | None:
    """The wire of the first event that shows one; ``None`` when none does (a lone error)."""
    return next((w for w in map(_event_wire, recording) if w is not None), None)


def _route_path(spec: WireSpec, route: Route) -> str:
    """A route's whole path as logs show it: the wire's main path, its tail replaced."""
    return spec.path.removesuffix(spec.routes[0].tail) + route.tail


def _served_at(wire: str) -> list[str]:
    """Every path that serves a recording of ``wire``, the wire's main path first."""
    return [
        _route_path(spec, route)
        for spec in WIRES
        for route in spec.routes
        if (route.serves or spec.name) == wire
    ]


def _home(recording: Sequence[dict[str, Any]]) -> tuple[WireSpec, Route] | None:
    """The wire and route that send a recording's events as they are: ``None`` if it shows none.

    Events of a wire: that wire's main route. Envelopes of another wire's events (Bedrock's
    InvokeModel ``chunk``): the route of the wrapping wire that sends that wire's events.
    """
    for event in recording:
        wire = _event_wire(event)
        if wire is None:
            continue
        for outer in WIRES:
            route = next((r for r in outer.routes if r.serves == wire), None)
            if route is not None and _wraps(outer, event):
                return outer, route
        spec = lookup(wire)
        return spec, spec.routes[0]
    return None


def _wraps(spec: WireSpec, event: dict[str, Any]) -> bool:
    """Whether ``event`` is an envelope of ``spec``'s (one it can open)."""
    try:
        return spec.unwrap is not None and spec.unwrap(event) is not None
    except ToolCallStreamError:
        return False


def _bare(event: dict[str, Any]) -> Any:
    """The event inside an envelope (Bedrock's InvokeModel ``chunk``), else ``event`` itself."""
    for spec in WIRES:
        unwrap = spec.unwrap
        if unwrap is not None and _wraps(spec, event):
            return unwrap(event)
    return event


def _seconds(value: object) -> bool:
    """Whether ``value`` is a pause a thread can wait: a finite number, 0 or more."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value <= threading.TIMEOUT_MAX
    )


class ReplayServer:
    r"""Serve recordings on 127.0.0.1 (an ephemeral port unless ``port`` is given).

    ``recordings`` holds one chunk list per request, answered in order; after the last, the
    last one is answered again, or with ``loop`` the first, and so on. ``reset()``, or a
    ``POST /reset`` request (no body needed), starts over: the next request gets the first
    recording. Each is served at its wire's path (a request at another wire's path gets a 400
    that names the right one); one that shows no wire, at any. An empty recording or a chunk
    that is not a dict is refused (``ValueError``).

    ``delay`` is the seconds between two streamed chunks (default 0.0: as fast as the socket
    takes them; ``serve --delay`` defaults to 0.03, to look like a model writing). ``delays``
    maps a request number to its own delay, so that one request can stall while the others
    run at ``delay``; a sequence there is the pause after each chunk in turn (``delay`` past
    its end), for a stream that writes one call fast and the next one slowly. ``cut`` maps a
    request number to a chunk count after which the stream is dropped without its end, as a
    failing proxy would. Request numbers are 0-based, counted from the start or the last
    reset; a reply that is not streamed is never delayed nor cut.

    ``requests`` keeps the body of every request for a recording, across resets;
    ``disconnects`` counts streams the client closed before the end (seen at once, even while
    pacing). ``log``, if given, is called (by one thread at a time) with one line per
    request, before its reply is sent, and one more for a request whose client leaves, or
    stops reading, before the reply is complete; control characters in a line are written as
    ``\xHH``. A client's misuse is never a traceback: a bad request gets a 4xx JSON error,
    and headers or a body that stop coming get 408 after ``timeout`` seconds. ``base_url`` is
    for an OpenAI client, ``root_url`` for an Anthropic or a google-genai one
    (``HttpOptions(base_url=...)``), and for boto3 (``client("bedrock-runtime",
    endpoint_url=...)``).

    ``ui=True`` adds ``GET /ui``, a page that plays one agent run over the recordings, and
    ``GET /ui/events``, that run as AG-UI Server-Sent Events: each client's own run, from the
    first recording (a retry gets the next one), with ``delay``, ``delays`` and ``cut`` counted
    from its own request 0, and without moving the HTTP routes' count on. Its tools are
    ``tools`` (names to callables, as ``agent_loop`` takes them), and an echo stub for every
    other name the recordings call; a turn is retried twice; a run has at most one turn per
    recording. ``ui_recordings``, if given, are the run's recordings instead of
    ``recordings`` (the HTTP routes keep theirs). A client that leaves, or ``stop()``,
    disposes its run: its stream, scheduler and connection end, but a tool already running
    finishes on its thread, its answer dropped.

    >>> with ReplayServer([[{"choices": []}]]) as server:
    ...     server.base_url.startswith("http://127.0.0.1:")
    True
    """

    def __init__(
        self,
        recordings: Sequence[Sequence[dict[str, Any]]],
        *,
        delay: float = 0.0,
        delays: Mapping[int, float | Sequence[float]] | None = None,
        cut: Mapping[int, int] | None = None,
        loop: bool = False,
        port: int = 0,
        log: Callable[[str], None] | None = None,
        timeout: float = 30.0,
        ui: bool = False,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        ui_recordings: Sequence[Sequence[dict[str, Any]]] | None = None,
    ) -> None:
        if tools is not None and not ui:
            raise ValueError("tools answer the page's agent run: give them with ui=True")
        if ui_recordings is not None and not ui:
            raise ValueError("ui_recordings are the page's agent run's: give them with ui=True")
        _check(recordings, "recording")
        if ui_recordings is not None:
            _check(ui_recordings, "ui_recordings: recording")
        paces = [(f"delays[{k}]", v) for k, v in (delays or {}).items()]
        for name, seconds in [
            ("delay", delay),
            *((name, v) for name, v in paces if not isinstance(v, Sequence)),
            *(
                (f"{name}[{i}]", each)
                for name, v in paces
                if isinstance(v, Sequence)
                for i, each in enumerate(v)
            ),
        ]:
            if not _seconds(seconds):
                raise ValueError(
                    f"{name} must be a number of seconds from 0 to a thread's longest wait"
                )
        for number, kept in (cut or {}).items():
            if type(kept) is not int or kept < 0:
                raise ValueError(f"cut[{number}] must be a count of chunks, 0 or more")
        self.recordings = [list(r) for r in recordings]
        self.wires = [_recording_wire(r) for r in self.recordings]
        """The wire of each recording (``None`` if it shows none)."""
        self.delay = delay
        self.delays = {
            k: tuple(v) if isinstance(v, Sequence) else v for k, v in (delays or {}).items()
        }
        self.cut = dict(cut or {})
        self.loop = loop
        self.ui = ui
        # The page's run: its recordings, and its wire (the first one a recording shows).
        self._run_recordings = (
            self.recordings if ui_recordings is None else [list(r) for r in ui_recordings]
        )
        self._run_wire = next(
            (w for w in map(_recording_wire, self._run_recordings) if w is not None), None
        )
        self.tools: dict[str, Callable[..., Any]] = {}
        """The page's tools (``ui=True``): those given, and echo stubs for the others."""
        if ui:
            from ._serve_ui import echo_tools

            self.tools = echo_tools(self._run_recordings, tools)
        self.requests: list[dict[str, Any]] = []
        """The body of every request for a recording, in arrival order, across resets."""
        self._answered = 0  # requests since the start or the last reset
        self.disconnects = 0
        self._lock = threading.Lock()
        # Requests are served on threads of their own; one line at a time keeps a log that
        # writes in pieces (print: the text, then the newline) from interleaving.
        self._log_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._serving = False
        self._stopping = threading.Event()  # set by stop(): a page's run ends its stream
        server = self
        read_timeout = timeout
        models = list(dict.fromkeys(str(r[0].get("model", "replay")) for r in self.recordings))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            timeout = read_timeout  # applied to the socket by StreamRequestHandler
            detail = ""
            # The wire whose error bodies this request gets, once its path says.
            spec: WireSpec | None = None
            progress = ""

            def handle_one_request(self) -> None:
                # Left empty when the connection ends before a request starts.
                self.raw_requestline = b""
                self.progress = ""
                try:
                    super().handle_one_request()
                except ConnectionError:
                    self.close_connection = True
                    # Between two requests, that is how a kept-alive connection often ends.
                    if self.raw_requestline:
                        self.note(f"the client closed the connection{self.progress}")
                except OSError as error:
                    self.close_connection = True
                    if self.raw_requestline:
                        self.note(f"the connection failed{self.progress}: {error}")

            def parse_request(self) -> bool:
                self.detail = ""  # one handler serves every request of a kept-alive connection
                self.spec = None
                try:
                    return super().parse_request()
                except TimeoutError:
                    self.fail(408, f"the headers did not arrive within {read_timeout} s")
                    return False

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: log_request writes the one line per request."""

            def log_error(self, format: str, *args: object) -> None:
                """One line for what http.server reports itself (a reply that timed out)."""
                if self.raw_requestline:  # not an idle kept-alive connection's timeout
                    self.note((format % args) + self.progress)

            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                tail = f" {self.detail}" if self.detail else ""
                self.note(f"{code}{tail}")

            def note(self, text: str) -> None:
                """Log one line about the current request."""
                if log is not None:
                    request = f"{self.command} {self.path}" if self.command else "?"
                    with server._log_lock:
                        log(_visible(f"{self.client_address[0]} {request} {text}"))

            def send_json(self, status: int, payload: object) -> None:
                self.send_body(status, json.dumps(payload).encode())

            def send_body(self, status: int, body: bytes) -> None:
                """Send ``body``, JSON already, with its length."""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if status >= 400:
                    # The body may be unread: the connection cannot be reused.
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(body)

            def fail(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
                self.detail = message
                shape = _error_body if self.spec is None else self.spec.error_body
                self.send_json(status, shape(status, message, kind, None))

            def send_error(
                self, code: int, message: str | None = None, explain: str | None = None
            ) -> None:
                if self.request_version == "HTTP/0.9" and len(self.requestline.split()) > 2:
                    # The version could not be read: answer in HTTP/1.1, with a status line,
                    # not with the bare body HTTP/0.9 allows.
                    self.request_version = self.protocol_version
                self.fail(code, message or explain or HTTPStatus(code).phrase)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
                if server.ui and path == "/ui":
                    self.send_page()
                    return
                if server.ui and path == "/ui/events":
                    self.ui_events()
                    return
                if path.endswith("/models"):
                    entries = [_model(m) for m in models]
                    self.send_json(200, {"object": "list", "data": entries})
                    return
                name = path.rsplit("/models/", 1)[-1] if "/models/" in path else None
                if name in models:
                    self.send_json(
                        200,
                        {"id": name, "object": "model", "created": 0, "owned_by": "rxtoolcalls"},
                    )
                    return
                served = "/v1/models, /ui and /ui/events" if server.ui else "/v1/models"
                self.fail(404, f"not found: {self.path} (GET serves {served})", "not_found")

            def send_page(self) -> None:
                from ._serve_ui import page

                body = page()
                self.detail = "the page"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                self.wfile.write(body)

            def ui_events(self) -> None:
                """Stream one agent run as AG-UI events; dispose it if the client leaves."""
                from ._serve_ui import Replay, run_events
                from .ui import AG_UI_HEADERS

                scheduler = EventLoopScheduler()
                run_recordings = server._run_recordings
                replay = Replay(
                    lambda number: server._plan(number, run_recordings),
                    len(run_recordings),
                    scheduler,
                )
                try:
                    run = run_events(replay, server.tools, server._run_wire)
                except Exception as error:  # noqa: BLE001 - no run to show: one log line
                    scheduler.dispose()
                    self.fail(500, f"the agent run cannot start: {type(error).__name__}: {error}")
                    return
                events: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
                failures: list[Exception] = []

                def failed(error: Exception) -> None:
                    failures.append(error)
                    events.put(None)

                self.detail = (
                    f"an agent run over {len(server._run_recordings)} recording(s), as AG-UI events"
                )
                self.close_connection = True
                sent = 0
                subscription = None
                try:
                    self.send_response(200)
                    for name, value in AG_UI_HEADERS.items():
                        self.send_header(name, value)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.flush()
                    subscription = run.subscribe(events.put, failed, lambda: events.put(None))
                    while True:
                        try:
                            event = events.get(timeout=_POLL)
                        except queue.Empty:
                            if server._stopping.is_set():
                                self.note(f"the server stopped after {sent} events (its run too)")
                                break
                            if not self.pause(0):
                                raise ConnectionResetError from None  # the client left
                            continue
                        if event is None:
                            break
                        self.wfile.write(event)
                        self.wfile.flush()
                        sent += 1
                except OSError as error:
                    self.progress = f" after {sent} events (its run was stopped)"
                    if isinstance(error, ConnectionError):
                        with server._lock:
                            server.disconnects += 1
                    raise
                finally:
                    if subscription is not None:
                        subscription.dispose()
                    scheduler.dispose()
                if failures:
                    self.note(
                        f"the run failed after {sent} events: "
                        f"{type(failures[0]).__name__}: {failures[0]}"
                    )

            def read_body(self) -> bytes | None:
                """The request body, or ``None`` after answering why it cannot be read."""
                if self.headers.get("Transfer-Encoding"):
                    self.fail(411, "send the body with a Content-Length (no chunked bodies)")
                    return None
                declared = self.headers.get_all("Content-Length")
                if not declared:
                    self.fail(411, "a Content-Length is required")
                    return None
                try:
                    length = _content_length(declared)
                except ValueError as error:
                    self.fail(400, str(error))
                    return None
                if length > MAX_BODY:
                    self.fail(413, f"the body is larger than {MAX_BODY} bytes")
                    return None
                try:
                    body = self.rfile.read(length)
                except TimeoutError:
                    self.fail(408, f"the body did not arrive within {read_timeout} s")
                    return None
                if len(body) < length:
                    self.fail(400, f"the body ended after {len(body)} of {length} bytes")
                    return None
                return body

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
                if path in ("/reset", "/v1/reset"):  # the root address, or the one with /v1
                    self.reset()
                    return
                found = _route(path)
                if found is not None:
                    self.spec = found[0]
                body = self.read_body()
                if body is None:
                    return
                if found is None:
                    self.fail(404, f"not found: {self.path} (POST serves {_paths()})", "not_found")
                    return
                spec, route = found
                try:
                    request = json.loads(body or b"{}")
                except (ValueError, RecursionError):
                    self.fail(400, "the body is not JSON")
                    return
                if not isinstance(request, dict):
                    self.fail(400, "the body is not a JSON object")
                    return
                with server._lock:
                    number = server._answered
                    server._answered += 1
                    server.requests.append(request)
                which, chunks, pauses, shown = server._plan(number)
                wire = server.wires[which]
                serves = route.serves or spec.name
                if wire is not None and wire != serves:
                    self.fail(
                        400,
                        f"recording {which + 1} is {a_or_an(f'{wire} stream')}, served at "
                        f"{' or '.join(_served_at(wire))}, not at {_route_path(spec, route)}",
                    )
                    return
                self.detail = f"recording {which + 1}/{len(server.recordings)}"
                streamed = request.get("stream") is True if route.streams is None else route.streams
                if streamed:
                    self.stream(chunks, shown, route, pauses)
                else:
                    self.complete(chunks, lookup(serves))

            def reset(self) -> None:
                """Answer ``POST /reset``: the next request gets the first recording."""
                # curl -X POST sends no body and no Content-Length: nothing to read then.
                sent = self.headers.get("Content-Length") or self.headers.get("Transfer-Encoding")
                if sent and self.read_body() is None:
                    return
                server.reset()
                self.detail = "the next request gets recording 1"
                self.send_json(
                    200, {"reset": True, "next": 1, "recordings": len(server.recordings)}
                )

            def pause(self, seconds: float) -> bool:
                """Wait ``seconds``; ``False`` as soon as the client closes the connection."""
                deadline = time.monotonic() + seconds
                ready, _, _ = select.select([self.connection], [], [], seconds)
                if not ready:
                    return True
                try:
                    peeked = self.connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    return False
                if not peeked:
                    return False
                time.sleep(max(0.0, deadline - time.monotonic()))  # bytes, not a close
                return True

            def complete(self, chunks: list[dict[str, Any]], serves: WireSpec) -> None:
                assert self.spec is not None  # do_POST found the route
                try:
                    turns = tuple(
                        reactivex.from_iterable(chunks)
                        .pipe(assemble_choices(wire=serves.name))
                        .run()
                    )
                    answer = self.spec.reply(turns, chunks)
                    kind = answer.get("object") or answer.get("type") or "reply"
                    body = json.dumps(answer).encode()
                except ToolCallStreamError as error:
                    self.detail += f", {type(error).__name__}"
                    code = error.code if isinstance(error, ProviderError) else None
                    payload = self.spec.error_body(
                        502, str(error), type(error).__name__, _json_safe(code)
                    )
                    self.send_json(502, payload)
                    return
                except Exception as error:  # noqa: BLE001 - the recording's fault: one log line
                    self.fail(500, f"{self.detail}: no reply: {type(error).__name__}: {error}")
                    return
                self.detail += f", one {kind} (no stream: true)"
                self.send_body(200, body)

            def frames(self, chunks: list[dict[str, Any]], route: Route) -> list[bytes] | None:
                """Every chunk framed before the reply starts, or ``None`` after a 500."""
                # A route of the wire's own events sends an envelope's inside (an InvokeModel
                # chunk recording served at the Anthropic path); an envelope route wraps.
                bare = route.serves is None
                frames: list[bytes] = []
                for chunk in chunks:
                    try:
                        frames.append(route.framing.frame(_bare(chunk) if bare else chunk))
                    except Exception as error:  # noqa: BLE001 - the recording's: one log line
                        self.fail(
                            500,
                            f"{self.detail}: chunk {len(frames) + 1} cannot be sent as "
                            f"{route.framing.name}: {type(error).__name__}: {error}",
                        )
                        return None
                return frames

            def stream(
                self,
                chunks: list[dict[str, Any]],
                shown: int,
                route: Route,
                pauses: Sequence[float],
            ) -> None:
                frames = self.frames(chunks[:shown], route)
                if frames is None:
                    return
                framing = route.framing
                self.detail += f", {shown} chunks streamed"
                if shown < len(chunks):
                    self.detail += ", then the connection dropped"
                self.close_connection = True
                sent = 0
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", framing.media_type)
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    chunked = framing.name in _CHUNKED
                    if chunked:
                        self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for data in frames:
                        self.wfile.write(_http_chunk(data) if chunked else data)
                        self.wfile.flush()
                        pause = pauses[sent]
                        sent += 1
                        if pause and not self.pause(pause):
                            raise ConnectionResetError  # the client left during the pause
                    if shown < len(chunks):
                        # A dropped connection: chunked, the body also lacks its last chunk.
                        self.connection.shutdown(socket.SHUT_RDWR)
                    elif chunked:
                        self.wfile.write(_http_chunk(framing.end) + b"0\r\n\r\n")
                        self.wfile.flush()
                    elif framing.end:
                        self.wfile.write(framing.end)  # Chat's [DONE]; the others have none
                        self.wfile.flush()
                except OSError as error:
                    self.progress = f" after {sent} of {shown} chunks"
                    if isinstance(error, ConnectionError):
                        with server._lock:
                            server.disconnects += 1
                    raise

        self._httpd = _Listener(("127.0.0.1", port), Handler)

    def _plan(
        self, number: int, recordings: Sequence[list[dict[str, Any]]] | None = None
    ) -> tuple[int, list[dict[str, Any]], list[float], int]:
        """What request ``number`` streams from ``recordings`` (the HTTP routes' by default).

        The index of its recording, that recording's chunks, the pause after each chunk, and
        how many chunks are sent before the stream ends (fewer than all: it is dropped there).
        The same over HTTP as in the page's run.
        """
        recordings = self.recordings if recordings is None else recordings
        count = len(recordings)
        which = number % count if self.loop else min(number, count - 1)
        chunks = recordings[which]
        pace = self.delays.get(number, self.delay)
        pauses = [
            (pace[i] if i < len(pace) else self.delay) if isinstance(pace, Sequence) else pace
            for i in range(len(chunks))
        ]
        stop_after = self.cut.get(number)
        shown = len(chunks) if stop_after is None else min(stop_after, len(chunks))
        return which, chunks, pauses, shown

    def reset(self) -> None:
        """Start over: the next request gets the first recording, as request number 0."""
        with self._lock:
            self._answered = 0

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give an OpenAI client (ends in ``/v1``)."""
        return f"{self.root_url}/v1"

    @property
    def root_url(self) -> str:
        """The ``base_url`` to give an Anthropic client (no ``/v1``: it adds its own), or boto3."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> ReplayServer:
        """Serve on a background thread."""
        self._serving = True
        # stop() waits for the loop to see its request: at socketserver's default poll of
        # 0.5 s, every server a test suite starts and stops cost half a second.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": _POLL}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port; returns at once if it never served.

        A page's run still streaming (``GET /ui/events``) is disposed and its connection
        closed within a poll interval (a tool already running finishes on its thread).
        """
        self._stopping.set()
        if self._serving:
            self._httpd.shutdown()  # waits for serve_forever, which only a started server runs
            self._serving = False
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted."""
        self._serving = True
        try:
            self._httpd.serve_forever()
        finally:
            self._serving = False

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _check(recordings: Sequence[Sequence[dict[str, Any]]], what: str) -> None:
    """``ValueError`` unless there is a recording and each holds chunks, all dicts."""
    if not recordings:
        raise ValueError(f"at least one {what.rsplit(' ', 1)[-1]} is needed")
    for number, recording in enumerate(recordings):
        if not recording:
            raise ValueError(f"{what} {number} is empty")
        if not all(isinstance(chunk, dict) for chunk in recording):
            raise ValueError(f"{what} {number} holds a chunk that is not a dict")


class _Listener(ThreadingHTTPServer):
    """The HTTP server, with a backlog for many clients connecting at once."""

    # socketserver listens with a backlog of 5: a burst of concurrent connects (an async
    # client opening 200 streams) overflows it, and the kernel resets the connections past it.
    request_queue_size = 1024
    daemon_threads = True


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "rxtoolcalls"}


def _json_safe(value: object) -> object:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)
