"""``ReplayServer`` and ``rxtoolcalls serve`` on loopback: JSON completions, models, logging,
bad requests, and a stop that never hangs."""

from __future__ import annotations

import http.client
import json
import random
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import rxtoolcalls as rt
from rxtoolcalls.__main__ import main
from rxtoolcalls.serve import ReplayServer
from tests.helpers import FIXTURES, load_fixture, run_assemble, serve_command

PARALLEL = load_fixture("openai__parallel_tool_calls")


def _post(server: ReplayServer, body: dict[str, Any]) -> tuple[int, str, bytes]:
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            "POST",
            "/v1/chat/completions",
            json.dumps(body),
            {"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


def _raw(server: ReplayServer, request: bytes) -> bytes:
    """Send raw bytes, return the status line of the answer."""
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(request)
        return client.makefile("rb").readline()


def test_a_request_without_stream_gets_one_json_completion() -> None:
    with ReplayServer([PARALLEL]) as server:
        status, kind, body = _post(server, {"model": "m", "messages": []})
    assert (status, kind) == (200, "application/json")
    completion = json.loads(body)
    assert completion["object"] == "chat.completion"
    assert completion["model"] == PARALLEL[0]["model"]
    [choice] = completion["choices"]
    assert choice["message"] == run_assemble(PARALLEL).to_message()
    assert choice["finish_reason"] == "tool_calls"
    assert completion["usage"] == PARALLEL[-1]["usage"]


def test_a_capture_that_does_not_assemble_is_a_json_error_without_stream() -> None:
    with ReplayServer([load_fixture("snowflake__cortex_no_finish_reason")]) as server:
        status, kind, body = _post(server, {"model": "m", "messages": []})
    assert (status, kind) == (502, "application/json")
    assert json.loads(body)["error"]["type"] == "StreamInterruptedError"


@pytest.mark.json_parser
def test_a_streamed_request_still_gets_sse() -> None:
    with ReplayServer([PARALLEL]) as server:
        status, kind, body = _post(server, {"model": "m", "messages": [], "stream": True})
    assert (status, kind) == (200, "text/event-stream")
    assert rt.from_sse([body]).pipe(rt.assemble()).run() == run_assemble(PARALLEL)


def test_models_are_listed() -> None:
    with ReplayServer([PARALLEL, PARALLEL]) as server:
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/v1/models")
        response = connection.getresponse()
        listed = json.loads(response.read())
        connection.close()
    assert response.status == 200
    assert [m["id"] for m in listed["data"]] == [PARALLEL[0]["model"]]


def test_empty_recordings_are_refused() -> None:
    with pytest.raises(ValueError, match="recording 1 is empty"):
        ReplayServer([PARALLEL, []])
    with pytest.raises(ValueError, match="not a dict"):
        ReplayServer([["data: {}"]])  # type: ignore[list-item]


def test_help_says_what_follows_the_last_capture_and_the_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_status:
        main(["serve", "--help"])
    assert exit_status.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "after the last capture, the last one is answered again" in text
    assert "(default: 8765)" in text
    assert "(default: 0.03)" in text
    assert "stream: true" in text


def test_one_log_line_per_request() -> None:
    lines: list[str] = []
    with ReplayServer([PARALLEL], log=lines.append) as server:
        _post(server, {"stream": True})
        _post(server, {})
        _raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: x\r\n\r\n")
    assert len(lines) == 3
    assert lines[0].startswith("127.0.0.1 POST /v1/chat/completions 200 recording 1/1, 25 chunks")
    assert "one chat.completion" in lines[1]
    assert " 400 " in lines[2]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (b"Content-Length: abc\r\n", b"400"),
        (b"Content-Length: -5\r\n", b"400"),
        (b"Content-Length: 99999999999999\r\n", b"413"),
        (b"", b"411"),
        (b"Transfer-Encoding: chunked\r\n", b"411"),
    ],
)
def test_a_bad_content_length_gets_a_4xx(headers: bytes, status: bytes) -> None:
    with ReplayServer([PARALLEL]) as server:
        line = _raw(server, b"POST /v1/chat/completions HTTP/1.1\r\n" + headers + b"\r\n")
        assert server.requests == []
    assert line.split()[1] == status


def test_a_body_shorter_than_announced_times_out_with_408() -> None:
    with ReplayServer([PARALLEL], timeout=0.3) as server:
        line = _raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
    assert line.split()[1] == b"408"


def test_stop_without_start_returns() -> None:
    server = ReplayServer([PARALLEL])
    stopper = threading.Thread(target=server.stop, daemon=True)
    stopper.start()
    stopper.join(timeout=10)
    assert not stopper.is_alive()


@pytest.mark.json_parser
def test_the_command_logs_one_line_per_request(tmp_path: Path) -> None:
    process, port = serve_command(str(FIXTURES / "openai__parallel_tool_calls.jsonl"))
    try:
        assert process.stderr is not None
        for body in ({"stream": True}, {}):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("POST", "/v1/chat/completions", json.dumps(body))
            assert connection.getresponse().read()
            connection.close()
        logged = [process.stderr.readline(), process.stderr.readline()]
    finally:
        process.terminate()
        process.wait(timeout=10)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    assert all(line.startswith("127.0.0.1 POST /v1/chat/completions 200 ") for line in logged)


@pytest.mark.json_parser
def test_lone_surrogates_are_served_as_json_escapes() -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "a\ud800b"}, "finish_reason": "stop"}]}
    ]
    with ReplayServer([chunks]) as server:
        _, _, streamed = _post(server, {"stream": True})
        _, _, whole = _post(server, {})
    assert b"\\ud800" in streamed
    assert rt.from_sse([streamed]).pipe(rt.assemble()).run().content == "a\ud800b"
    assert json.loads(whole)["choices"][0]["message"]["content"] == "a\ud800b"


_REQUEST_PARTS = [
    b"POST /v1/chat/completions HTTP/1.1\r\n",
    b"GET /v1/models HTTP/1.1\r\n",
    b"GET /v1/models/nope HTTP/1.0\r\n",
    b"PUT / HTTP/1.1\r\n",
    b"Content-Length: 12\r\n",
    b"Content-Length: -1\r\n",
    b"Content-Length: 1e3\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"\r\n",
    b'{"stream": true}',
    b'{"stream": "yes"}',
    b"[1, 2]",
    b"\xff\xfe\x00",
]


def test_any_request_bytes_get_an_answer_or_a_close_never_a_handler_crash() -> None:
    chooser = random.Random(22)
    crashes: list[object] = []

    def handle_error(request: object, address: object) -> None:
        crashes.append(sys.exc_info()[1])

    with ReplayServer([PARALLEL], timeout=2) as server:
        setattr(server._httpd, "handle_error", handle_error)  # noqa: B010 - a method, patched
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        for _ in range(60):
            parts = [
                chooser.choice(_REQUEST_PARTS)
                if chooser.random() < 0.8
                else chooser.randbytes(chooser.randrange(24))
                for _ in range(chooser.randrange(9))
            ]
            with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
                client.sendall(b"".join(parts))
                client.shutdown(socket.SHUT_WR)
                while client.recv(65536):
                    pass
    assert crashes == []
