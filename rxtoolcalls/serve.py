"""A local OpenAI-compatible endpoint that replays recorded streams over real HTTP (stdlib only).

For demos and tests without a provider: ``POST /v1/chat/completions`` answers with the next
recording, as Server-Sent Events paced by ``delay`` seconds per chunk when the request has
``stream: true``, else as one ``chat.completion`` assembled from it. ``GET /v1/models`` lists
the recordings' models. Errors are JSON bodies in the OpenAI shape (``{"error": {...}}``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import reactivex

from ._errors import ProviderError, ToolCallStreamError
from .operators import assemble_choices

__all__ = ["ReplayServer"]

MAX_BODY = 16 * 1024 * 1024
"""The largest request body read (bytes); a longer ``Content-Length`` gets 413."""


def _completion(chunks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` a recording stands for; typed errors raise."""
    turns = reactivex.from_iterable(chunks).pipe(assemble_choices()).run()
    first = chunks[0]
    usage = next((c["usage"] for c in reversed(chunks) if c.get("usage")), None)
    return {
        "id": first.get("id", "chatcmpl-replay"),
        "object": "chat.completion",
        "created": first.get("created", 0),
        "model": first.get("model", "replay"),
        "choices": [
            {
                "index": turn.choice_index,
                "message": turn.to_message(),
                "finish_reason": turn.finish_reason,
                "logprobs": None,
            }
            for turn in turns
        ],
        **({"usage": usage} if usage is not None else {}),
    }


def _error_body(message: str, kind: str, code: object = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code}}


class ReplayServer:
    """Serve recordings on 127.0.0.1 (an ephemeral port unless ``port`` is given).

    ``recordings`` holds one chunk list per request, answered in order; after the last, the
    last one is answered again. An empty recording or a chunk that is not a dict is refused
    (``ValueError``). ``cut`` maps a request number (0-based) to a chunk count after which the
    stream is dropped without ``[DONE]``, as a failing proxy would. ``requests`` keeps every
    request body; ``disconnects`` counts streams the client closed before the end. ``log``,
    if given, receives one line per request. A client that announces more body than it sends
    is dropped after ``timeout`` seconds.

    >>> with ReplayServer([[{"choices": []}]]) as server:
    ...     server.base_url.startswith("http://127.0.0.1:")
    True
    """

    def __init__(
        self,
        recordings: Sequence[Sequence[dict[str, Any]]],
        *,
        delay: float = 0.0,
        cut: dict[int, int] | None = None,
        port: int = 0,
        log: Callable[[str], None] | None = None,
        timeout: float = 30.0,
    ) -> None:
        if not recordings:
            raise ValueError("at least one recording is needed")
        for number, recording in enumerate(recordings):
            if not recording:
                raise ValueError(f"recording {number} is empty")
            if not all(isinstance(chunk, dict) for chunk in recording):
                raise ValueError(f"recording {number} holds a chunk that is not a dict")
        self.recordings = [list(r) for r in recordings]
        self.delay = delay
        self.cut = dict(cut or {})
        self.requests: list[dict[str, Any]] = []
        self.disconnects = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._serving = False
        server = self
        read_timeout = timeout
        models = list(dict.fromkeys(str(r[0].get("model", "replay")) for r in self.recordings))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            timeout = read_timeout  # applied to the socket by StreamRequestHandler
            detail = ""

            def parse_request(self) -> bool:
                self.detail = ""  # one handler serves every request of a kept-alive connection
                return super().parse_request()

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: log_request writes the one line per request."""

            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                if log is not None:
                    request = f"{self.command} {self.path}" if self.command else "?"
                    tail = f" {self.detail}" if self.detail else ""
                    log(f"{self.client_address[0]} {request} {code}{tail}")

            def send_json(self, status: int, payload: object) -> None:
                body = json.dumps(payload).encode()
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
                self.send_json(status, _error_body(message, kind))

            def send_error(
                self, code: int, message: str | None = None, explain: str | None = None
            ) -> None:
                self.fail(code, message or explain or "bad request")

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
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
                self.fail(404, f"not found: {self.path} (GET serves /v1/models)", "not_found")

            def read_body(self) -> bytes | None:
                """The request body, or ``None`` after answering why it cannot be read."""
                if self.headers.get("Transfer-Encoding"):
                    self.fail(411, "send the body with a Content-Length (no chunked bodies)")
                    return None
                declared = self.headers.get("Content-Length")
                if declared is None:
                    self.fail(411, "a Content-Length is required")
                    return None
                if not declared.strip().isdigit():
                    self.fail(400, f"Content-Length is not a byte count: {declared[:40]!r}")
                    return None
                length = int(declared)
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
                body = self.read_body()
                if body is None:
                    return
                if not self.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions"):
                    self.fail(404, "only /v1/chat/completions is served", "not_found")
                    return
                try:
                    request = json.loads(body or b"{}")
                except (ValueError, RecursionError):
                    self.fail(400, "the body is not JSON")
                    return
                if not isinstance(request, dict):
                    self.fail(400, "the body is not a JSON object")
                    return
                with server._lock:
                    number = len(server.requests)
                    server.requests.append(request)
                which = min(number, len(server.recordings) - 1)
                chunks = server.recordings[which]
                self.detail = f"recording {which + 1}/{len(server.recordings)}"
                if request.get("stream") is True:
                    self.stream(chunks, server.cut.get(number))
                else:
                    self.complete(chunks)

            def complete(self, chunks: list[dict[str, Any]]) -> None:
                try:
                    completion = _completion(chunks)
                except ToolCallStreamError as error:
                    self.detail += f", {type(error).__name__}"
                    code = error.code if isinstance(error, ProviderError) else None
                    self.send_json(
                        502, _error_body(str(error), type(error).__name__, _json_safe(code))
                    )
                    return
                self.detail += ", one chat.completion (no stream: true)"
                self.send_json(200, completion)

            def stream(self, chunks: list[dict[str, Any]], stop_after: int | None) -> None:
                shown = len(chunks) if stop_after is None else min(stop_after, len(chunks))
                self.detail += f", {shown} chunks streamed"
                if shown < len(chunks):
                    self.detail += ", then the connection dropped"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for sent, chunk in enumerate(chunks):
                        if stop_after is not None and sent >= stop_after:
                            self.wfile.flush()
                            self.connection.shutdown(2)  # a dropped connection, no [DONE]
                            return
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                        if server.delay:
                            time.sleep(server.delay)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    with server._lock:
                        server.disconnects += 1

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give an OpenAI client (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ReplayServer:
        """Serve on a background thread."""
        self._serving = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port; returns at once if it never served."""
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


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "rxtoolcalls"}


def _json_safe(value: object) -> object:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)
