"""A local OpenAI-compatible endpoint that replays recorded streams over real HTTP (stdlib only).

For demos and tests without a provider: ``POST /v1/chat/completions`` with ``stream: true``
answers with the next recording as Server-Sent Events, paced by ``delay`` seconds per chunk.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ReplayServer"]


class ReplayServer:
    """Serve recordings on 127.0.0.1 (an ephemeral port unless ``port`` is given).

    ``recordings`` holds one chunk list per request, answered in order (the last one repeats).
    ``cut`` maps a request number (0-based) to a chunk count after which the connection is
    dropped without ``[DONE]``, as a failing proxy would. ``requests`` keeps every request body;
    ``disconnects`` counts streams the client closed before the end.

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
    ) -> None:
        if not recordings:
            raise ValueError("at least one recording is needed")
        self.recordings = [list(r) for r in recordings]
        self.delay = delay
        self.cut = dict(cut or {})
        self.requests: list[dict[str, Any]] = []
        self.disconnects = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                """Stay quiet: tests and demos read the client side."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self.send_error(400, "the body is not JSON")
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self.send_error(404, "only /v1/chat/completions is served")
                    return
                with server._lock:
                    number = len(server.requests)
                    server.requests.append(body)
                chunks = server.recordings[min(number, len(server.recordings) - 1)]
                stop_after = server.cut.get(number)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
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
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted."""
        self._httpd.serve_forever()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
