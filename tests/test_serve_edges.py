"""``ReplayServer`` and ``rxtoolcalls serve`` against clients that misbehave: every misuse is one
log line (a 4xx JSON reply where one can still be sent), never a traceback, and the next client
is served."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any

import pytest

from rxtoolcalls.serve import MAX_BODY, ReplayServer
from tests.helpers import FIXTURES, content, finish, load_fixture, run_assemble, serve_command

PARALLEL = load_fixture("openai__parallel_tool_calls")
POST = b"POST /v1/chat/completions HTTP/1.1\r\n"
BOUND = 10.0  # seconds: the longest any wait below may take


class Log:
    """The lines a server logs, with a bounded wait for the ones that follow no reply."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()

    def __call__(self, line: str) -> None:
        with self._changed:
            self.lines.append(line)
            self._changed.notify_all()

    def wait(self, done: Callable[[list[str]], bool]) -> list[str]:
        with self._changed:
            assert self._changed.wait_for(lambda: done(self.lines), BOUND), self.lines
            return list(self.lines)


class Watch:
    """Exceptions that reached the server (each a traceback) and connections it has finished."""

    def __init__(self, server: ReplayServer) -> None:
        self.crashes: list[BaseException | None] = []
        self.finished = 0
        self._changed = threading.Condition()
        listener = server._httpd
        end = listener.shutdown_request

        def handle_error(request: object, address: object) -> None:
            self.crashes.append(sys.exc_info()[1])

        def shutdown_request(request: socket.socket) -> None:
            end(request)
            with self._changed:
                self.finished += 1
                self._changed.notify_all()

        setattr(listener, "handle_error", handle_error)  # noqa: B010 - a method, patched
        setattr(listener, "shutdown_request", shutdown_request)  # noqa: B010 - same

    def wait_finished(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.finished >= count, BOUND), self.finished


@contextmanager
def serving(**options: Any) -> Iterator[tuple[ReplayServer, Log, Watch]]:
    log = Log()
    with ReplayServer([PARALLEL], log=log, **options) as server:
        yield server, log, Watch(server)


def _port(server: ReplayServer) -> int:
    return int(server.root_url.rsplit(":", 1)[1])


def _exchange(server: ReplayServer, request: bytes) -> bytes:
    """Send ``request``, end the sending side, and return every byte of the answer."""
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=BOUND) as client:
        client.sendall(request)
        client.shutdown(socket.SHUT_WR)
        answer = b""
        while piece := client.recv(65536):
            answer += piece
        return answer


def _read_reply(client: socket.socket) -> bytes:
    """Read one complete JSON answer (headers and a body of its Content-Length)."""
    answer = b""
    while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < int(
        answer.lower().partition(b"content-length: ")[2].split(b"\r\n")[0]
    ):
        piece = client.recv(65536)
        assert piece, answer
        answer += piece
    return answer


def _reply(answer: bytes) -> tuple[int, dict[str, Any]]:
    """The status and the JSON body of one HTTP/1.1 answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), answer[:200]
    return int(head.split()[1]), json.loads(body)


def _post(body: bytes, *headers: bytes) -> bytes:
    return POST + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def _served_normally(server: ReplayServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", _port(server), timeout=BOUND)
    try:
        connection.request("POST", "/v1/chat/completions", json.dumps({"stream": False}))
        response = connection.getresponse()
        completion = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 200
    assert completion["choices"][0]["message"] == run_assemble(PARALLEL).to_message()


def _reset(client: socket.socket) -> None:
    """Close ``client`` with a reset (RST), as a killed process or a proxy timing out does."""
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()


# -- Content-Length ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        b"\xb2",  # "²": str.isdigit() is true, int() refuses it
        b"1\xb9",  # "1¹"
        b"\xa02",  # a no-break space first: str.strip() and int() both take it
        b"2\x85",  # NEL, the same
        b"0x2",
        b"2 2",
        b"",
    ],
)
def test_a_content_length_that_is_not_ascii_digits_gets_400(value: bytes) -> None:
    with serving() as (server, log, watch):
        status, body = _reply(_exchange(server, _post(b"{}", b"Content-Length: " + value)))
        assert server.requests == []
        _served_normally(server)
    assert status == 400
    assert body["error"]["message"].startswith("Content-Length is not a byte count")
    assert watch.crashes == []
    assert " 400 Content-Length is not a byte count" in log.lines[0]


def test_a_content_length_of_more_digits_than_int_reads_gets_413() -> None:
    with serving() as (server, _, watch):
        status, body = _reply(_exchange(server, _post(b"{}", b"Content-Length: " + b"9" * 5000)))
        zeros = _exchange(server, _post(b"{}", b"Content-Length: " + b"0" * 5000 + b"2"))
    assert (status, body["error"]["message"]) == (413, f"the body is larger than {MAX_BODY} bytes")
    assert zeros.startswith(b"HTTP/1.1 200 ")
    assert watch.crashes == []


@pytest.mark.parametrize(
    "headers",
    [
        (b"Content-Length: 2", b"Content-Length: 5"),
        (b"Content-Length: 5", b"Content-Length: 2"),
        (b"Content-Length: 2, 5",),
        (b"Content-Length: 2", b"Content-Length: 2, 3"),
        (b"Content-Length: 2", b"Content-Length: 02"),
    ],
)
def test_different_content_lengths_get_400(headers: tuple[bytes, ...]) -> None:
    with serving() as (server, _, watch):
        status, body = _reply(_exchange(server, _post(b"{}xyz", *headers)))
        assert server.requests == []
    assert status == 400
    assert body["error"]["message"].startswith("Content-Length has different values")
    assert watch.crashes == []


@pytest.mark.parametrize(
    "headers",
    [(b"Content-Length: 2", b"Content-Length: 2"), (b"Content-Length: 2 ,2",)],
)
def test_a_content_length_repeated_with_one_value_counts_once(headers: tuple[bytes, ...]) -> None:
    with serving() as (server, _, _):
        answer = _exchange(server, _post(b"{}", *headers))
        assert server.requests == [{}]
    assert answer.startswith(b"HTTP/1.1 200 ")


# -- clients that leave ------------------------------------------------------------------------


def test_a_client_that_leaves_right_after_its_request_logs_no_traceback() -> None:
    requests = [json.dumps({"stream": stream}).encode() for stream in (False, True) * 20]
    with serving() as (server, log, watch):
        for body in requests:
            with socket.create_connection(("127.0.0.1", _port(server)), timeout=BOUND) as client:
                client.sendall(_post(body, b"Content-Length: %d" % len(body)))
        watch.wait_finished(len(requests))
        _served_normally(server)
        watch.wait_finished(len(requests) + 1)
    assert watch.crashes == []
    assert len(server.requests) == len(requests) + 1
    replies = [line for line in log.lines if " 200 recording 1/1" in line]
    left = [line for line in log.lines if " the client closed the connection" in line]
    assert len(replies) == len(requests) + 1
    assert len(replies) + len(left) == len(log.lines)
    # Each request whose client left is one more line; a stream's says how far it got.
    assert len(left) >= server.disconnects > 0
    assert all(line.startswith("127.0.0.1 POST /v1/chat/completions ") for line in log.lines)
    assert any(" of 25 chunks" in line for line in left)


def test_a_client_that_resets_mid_body_is_one_line() -> None:
    with serving() as (server, log, watch):
        with socket.create_connection(("127.0.0.1", _port(server)), timeout=BOUND) as client:
            client.sendall(_post(b"", b"Content-Length: 100", b"Expect: 100-continue"))
            # The interim answer comes once the headers are read, right before the body is.
            assert client.recv(100).startswith(b"HTTP/1.1 100 ")
            client.sendall(b'{"stre')
            _reset(client)
        watch.wait_finished(1)
        _served_normally(server)
    assert watch.crashes == []
    assert log.lines[0] == "127.0.0.1 POST /v1/chat/completions the client closed the connection"
    assert server.requests == [{"stream": False}]


def test_a_client_that_leaves_mid_body_gets_400_and_no_traceback() -> None:
    with serving() as (server, log, watch):
        with socket.create_connection(("127.0.0.1", _port(server)), timeout=BOUND) as client:
            client.sendall(_post(b'{"stre', b"Content-Length: 100"))
        watch.wait_finished(1)
        _served_normally(server)
    assert watch.crashes == []
    assert log.lines[0].startswith(
        "127.0.0.1 POST /v1/chat/completions 400 the body ended after 6 of 100 bytes"
    )
    # The 400 goes out to a closed socket: that write may fail, one more line if it does.
    assert all(" the client closed the connection" in line for line in log.lines[1:-1])
    assert " 200 recording 1/1" in log.lines[-1]
    assert server.requests == [{"stream": False}]


def test_a_client_that_resets_mid_stream_is_one_line_that_says_how_far_it_got() -> None:
    with serving(delay=0.01) as (server, log, watch):
        with socket.create_connection(("127.0.0.1", _port(server)), timeout=BOUND) as client:
            body = b'{"stream": true}'
            client.sendall(_post(body, b"Content-Length: %d" % len(body)))
            answer = b""
            while b"data: " not in answer:
                piece = client.recv(65536)
                assert piece, answer
                answer += piece
            _reset(client)
        watch.wait_finished(1)
    assert watch.crashes == []
    assert server.disconnects == 1
    assert len(log.lines) == 2
    assert log.lines[1].startswith(
        "127.0.0.1 POST /v1/chat/completions the client closed the connection after "
    )
    assert log.lines[1].endswith(" of 25 chunks")


def test_a_client_that_stops_reading_a_stream_is_one_line_after_the_timeout() -> None:
    # Far more than the socket buffers hold: the server's writes block once they are full.
    big = [content("x" * 65536)] * 400 + [finish("stop")]
    log = Log()
    with ReplayServer([big], log=log, timeout=0.3) as server:
        watch = Watch(server)
        with socket.create_connection(("127.0.0.1", _port(server)), timeout=BOUND) as client:
            body = b'{"stream": true}'
            client.sendall(_post(body, b"Content-Length: %d" % len(body)))
            lines = log.wait(lambda lines: len(lines) == 2)
        watch.wait_finished(1)
    assert watch.crashes == []
    assert server.disconnects == 0
    assert lines[0] == "127.0.0.1 POST /v1/chat/completions 200 recording 1/1, 401 chunks streamed"
    assert lines[1].startswith("127.0.0.1 POST /v1/chat/completions Request timed out: ")
    assert lines[1].endswith(" of 401 chunks")


def test_headers_that_stop_coming_get_408_and_one_line() -> None:
    with serving(timeout=0.2) as (server, log, watch):
        with socket.create_connection(("127.0.0.1", _port(server)), timeout=BOUND) as client:
            client.sendall(POST + b"Content-Length: 2\r\nAccept: ")
            answer = b""
            while piece := client.recv(65536):
                answer += piece
        watch.wait_finished(1)
    status, body = _reply(answer)
    assert status == 408
    assert body["error"]["message"] == "the headers did not arrive within 0.2 s"
    assert log.lines == [
        "127.0.0.1 POST /v1/chat/completions 408 the headers did not arrive within 0.2 s"
    ]
    assert watch.crashes == []


def test_an_idle_kept_alive_connection_that_ends_logs_nothing_more() -> None:
    with serving(timeout=0.2) as (server, log, watch):
        with socket.create_connection(("127.0.0.1", _port(server)), timeout=BOUND) as client:
            client.sendall(_post(b"{}", b"Content-Length: 2"))
            assert _read_reply(client).startswith(b"HTTP/1.1 200 ")
            # No next request: the server's read timeout ends the connection.
            assert client.recv(65536) == b""
        with socket.create_connection(("127.0.0.1", _port(server)), timeout=BOUND) as client:
            client.sendall(_post(b"{}", b"Content-Length: 2"))
            assert _read_reply(client).startswith(b"HTTP/1.1 200 ")
            _reset(client)
        watch.wait_finished(2)
    assert watch.crashes == []
    assert len(log.lines) == 2
    assert all(" 200 recording 1/1, one chat.completion" in line for line in log.lines)


# -- what the log shows ------------------------------------------------------------------------


def test_control_characters_from_the_client_are_escaped_in_the_log() -> None:
    with serving() as (server, log, watch):
        _exchange(server, b"GET /v1/\x1b]0;owned\x07\x9b2J\\x1b\x7f HTTP/1.1\r\n\r\n")
        _exchange(server, b"\x1b[2JGET / HTTP/1.1\r\n\r\n")
    assert watch.crashes == []
    first, second = log.lines
    assert first.startswith(r"127.0.0.1 GET /v1/\x1b]0;owned\x07\x9b2J\\x1b\x7f 404 not found: ")
    assert second.startswith(r"127.0.0.1 \x1b[2JGET / 501 ")
    for line in log.lines:
        assert not [c for c in line if unicodedata.category(c) == "Cc"], line


# -- other misuse ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "status", "message"),
    [
        (b"\x00 \xff garbage HTTP/1.1\r\n\r\n", 400, "Bad request syntax"),
        (b"POST /v1/chat/completions HTTP/9\r\n\r\n", 400, "Bad request version"),
        (b"POST /v1/chat/completions HTTP/2.0\r\n\r\n", 505, "Invalid HTTP version"),
        (b"BREW /pot HTTP/1.1\r\n\r\n", 501, "Unsupported method"),
        # Each of the next three ends where the server stops reading: bytes left unread would
        # make its close a reset, which may discard the answer before the client reads it.
        (b"GET /" + b"a" * 65532, 414, HTTPStatus(414).phrase),
        (POST + b"X: " + b"a" * 65534, 431, "Line too long"),
        (POST + b"X: 1\r\n" * 101, 431, "Too many headers"),
        (_post(b"\xff\xfe\x00{", b"Content-Length: 4"), 400, "the body is not JSON"),
        (_post(b"[1]", b"Content-Length: 3"), 400, "the body is not a JSON object"),
        (_post(b"[" * 100000, b"Content-Length: 100000"), 400, "the body is not JSON"),
        (_post(b"{}", b"Content-Length: 2", b"Transfer-Encoding: gzip"), 411, "send the body"),
    ],
)
def test_a_bad_request_gets_a_json_4xx_and_one_line(
    request_bytes: bytes, status: int, message: str
) -> None:
    with serving() as (server, log, watch):
        got, body = _reply(_exchange(server, request_bytes))
        watch.wait_finished(1)
        assert server.requests == []
    assert watch.crashes == []
    assert got == status
    assert body["error"]["message"].startswith(message)
    [line] = log.lines
    assert f" {status} {message}" in line


@pytest.mark.json_parser
def test_the_command_writes_no_traceback_when_clients_leave() -> None:
    process, port = serve_command(str(FIXTURES / "openai__parallel_tool_calls.jsonl"))
    try:
        for stream in (False, True) * 10:
            body = json.dumps({"stream": stream}).encode()
            with socket.create_connection(("127.0.0.1", port), timeout=BOUND) as client:
                client.sendall(_post(body, b"Content-Length: %d" % len(body)))
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=BOUND)
        connection.request("POST", "/v1/chat/completions", b"{}")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=BOUND)
    lines = errors.splitlines()
    assert "Traceback" not in errors
    assert len(lines) >= 21
    assert all(line.startswith("127.0.0.1 POST /v1/chat/completions ") for line in lines), errors
