"""The replay server starting over (``POST /reset``, ``loop``), a delay for one request, and
the article before a wire's name in its refusals."""

from __future__ import annotations

import http.client
import io
import json
import socket
import time
from typing import Any

import pytest

import rxtoolcalls.serve
from rxtoolcalls.__main__ import main
from rxtoolcalls.serve import ReplayServer
from tests.test_cli_help import _commands
from tests.wire_builders import case


def _said(text: str) -> list[dict[str, Any]]:
    return case("chat").turn([text])


def _post(server: ReplayServer, path: str, body: bytes | None = b"{}") -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", int(server.root_url.rsplit(":", 1)[1]))
    try:
        headers = {} if body is None else {"Content-Type": "application/json"}
        connection.request("POST", path, body=body, headers=headers)
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        connection.close()


def _answer(server: ReplayServer) -> str:
    status, reply = _post(server, "/v1/chat/completions")
    assert status == 200, reply
    text: str = reply["choices"][0]["message"]["content"]
    return text


def test_post_reset_starts_over_at_the_first_recording() -> None:
    lines: list[str] = []
    with ReplayServer([_said("one"), _said("two")], log=lines.append) as server:
        assert [_answer(server), _answer(server), _answer(server)] == ["one", "two", "two"]
        # As curl -X POST sends it: no body, no Content-Length.
        assert _post(server, "/reset", None) == (200, {"reset": True, "next": 1, "recordings": 2})
        assert [_answer(server), _answer(server)] == ["one", "two"]
        server.reset()
        assert _answer(server) == "one"
    assert len(server.requests) == 6  # every request is kept; only the place starts over
    assert "127.0.0.1 POST /reset 200 the next request gets recording 1" in lines


def test_loop_starts_over_after_the_last_recording() -> None:
    with ReplayServer([_said("one"), _said("two")], loop=True) as server:
        assert [_answer(server) for _ in range(5)] == ["one", "two", "one", "two", "one"]


def test_cut_counts_requests_from_the_reset() -> None:
    with ReplayServer([_said("one")], cut={0: 0}) as server:
        connection = socket.create_connection(("127.0.0.1", _port(server)))
        with connection:
            connection.sendall(_streaming_request())
            assert b"data:" not in _read_all(connection)
        assert _answer(server) == "one"
        server.reset()
        with socket.create_connection(("127.0.0.1", _port(server))) as again:
            again.sendall(_streaming_request())
            assert b"data:" not in _read_all(again)


def _port(server: ReplayServer) -> int:
    return int(server.root_url.rsplit(":", 1)[1])


def _streaming_request() -> bytes:
    body = b'{"stream": true}'
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def _read_all(connection: socket.socket) -> bytes:
    got = b""
    while chunk := connection.recv(65536):
        got += chunk
    return got


def test_a_delay_for_one_request_stalls_that_request_alone() -> None:
    long_turn = case("chat").turn(["a", "b", "c", "d"])
    with ReplayServer([long_turn], delays={0: 60.0}) as server:
        stalled = socket.create_connection(("127.0.0.1", _port(server)))
        with stalled:
            stalled.sendall(_streaming_request())
            stalled.settimeout(5)
            got = b""
            while b"data:" not in got:  # the headers and the first chunk, then the stall
                got += stalled.recv(65536)
            stalled.settimeout(0.2)
            with pytest.raises(TimeoutError):
                stalled.recv(65536)
            # While request 0 stalls, request 1 is streamed whole at once.
            with socket.create_connection(("127.0.0.1", _port(server)), timeout=5) as other:
                other.sendall(_streaming_request())
                assert _read_all(other).endswith(b"data: [DONE]\n\n")
        # The stalled stream sees its client leave at once, not after its 60 s pause.
        deadline = time.monotonic() + 5
        while server.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.disconnects == 1


def test_serve_help_documents_starting_over() -> None:
    text = " ".join(_commands()["serve"].format_help().split())
    assert "POST /reset" in text
    assert "--loop" in text
    doc = " ".join((ReplayServer.__doc__ or "").split())
    for said in ("POST /reset", "reset()", "loop", "delays", "delay"):
        assert said in doc, said
    assert "serve --delay" in doc  # the command line's default differs from the class's


@pytest.mark.json_parser
def test_serve_loop_reaches_the_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[ReplayServer] = []

    def stop_at_once(self: ReplayServer) -> None:
        seen.append(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(rxtoolcalls.serve.ReplayServer, "serve_forever", stop_at_once)
    for options, looped in (([], False), (["--loop"], True)):
        assert main(["serve", "--demo", "--port", "0", *options], out=io.StringIO()) == 0
        assert seen.pop().loop is looped


def test_a_recording_at_another_wire_s_path_is_named_with_the_right_article() -> None:
    with ReplayServer([case("anthropic").turn(["hi"])]) as server:
        status, reply = _post(server, "/v1/chat/completions")
    assert status == 400
    assert reply["error"]["message"].startswith("recording 1 is an anthropic stream, served at ")


def test_only_the_reset_path_resets() -> None:
    with ReplayServer([_said("one"), _said("two")]) as server:
        assert _answer(server) == "one"
        status, _ = _post(server, "/v1/chat/completions/reset")
        assert status != 200
        assert _answer(server) == "two"
        assert _post(server, "/v1/reset", None)[0] == 200  # the address with /v1, as the SDKs use
        assert _answer(server) == "one"
