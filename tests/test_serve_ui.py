"""``serve --ui`` over HTTP, without a browser: the page, the run's AG-UI events, leaving."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from reactivex import operators as ops

import rxtoolcalls as rt
from rxtoolcalls.__main__ import main
from rxtoolcalls.serve import ReplayServer

from .helpers import open_sockets, settle

DEMO: list[dict[str, Any]] = rt.from_jsonl(rt.sources.demo_path()).pipe(ops.to_list()).run()
ANSWER: list[dict[str, Any]] = [
    json.loads(line)
    for line in (Path(rt.__file__).parent / "data" / "ui" / "demo-answer.jsonl")
    .read_text(encoding="utf-8")
    .splitlines()
]


def events_of(body: str) -> list[dict[str, Any]]:
    """The JSON of each ``data:`` line of an SSE body."""
    return [
        json.loads(line.removeprefix("data:").strip())
        for line in body.splitlines()
        if line.startswith("data:") and line.strip() != "data: [DONE]"
    ]


def get(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return reply.headers["Content-Type"], reply.read().decode()


def run_of(server: ReplayServer) -> list[dict[str, Any]]:
    kind, body = get(f"{server.root_url}/ui/events")
    assert kind.startswith("text/event-stream")
    return events_of(body)


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def custom(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The values of the ``CUSTOM`` events ``rxtoolcalls.NAME``."""
    return [
        event["value"]
        for event in events
        if event["type"] == "CUSTOM" and event["name"] == f"rxtoolcalls.{name}"
    ]


def named(events: list[dict[str, Any]]) -> list[str]:
    """The calls' names, as they arrived (a call is named before its input is complete)."""
    return [value["toolCallName"] for value in custom(events, "tool_call_started")]


def test_the_page_is_served() -> None:
    with ReplayServer([DEMO], ui=True) as server:
        kind, body = get(f"{server.root_url}/ui")
    assert kind == "text/html; charset=utf-8"
    assert '<html lang="en">' in body
    assert 'new EventSource("/ui/events")' in body


def test_without_ui_there_is_no_page() -> None:
    with ReplayServer([DEMO]) as server, pytest.raises(urllib.error.HTTPError) as caught:
        get(f"{server.root_url}/ui")
    assert caught.value.code == 404
    assert "GET serves /v1/models)" in caught.value.read().decode()


def test_tools_need_ui() -> None:
    with pytest.raises(ValueError, match="ui=True"):
        ReplayServer([DEMO], tools={"f": print})


def test_a_run_streams_its_calls_results_and_answer_as_ag_ui_events() -> None:
    with ReplayServer([DEMO, ANSWER], ui=True) as server:
        events = run_of(server)
        # The page's run did not move the HTTP routes on: their request 0 gets recording 1.
        assert chat_tool_names(server) == ["GetWeatherArgs", "get_stock_price"]
    order = kinds(events)
    assert order[0] == "RUN_STARTED"
    assert order[-1] == "RUN_FINISHED"
    assert named(events) == ["GetWeatherArgs", "get_stock_price"]
    weather = custom(events, "tool_call_started")[0]["toolCallId"]
    [args] = [e["delta"] for e in events if e.get("toolCallId") == weather and "delta" in e]
    assert json.loads(args) == {"city": "Edinburgh", "country": "GB", "units": "c"}
    results = {e["toolCallId"]: e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"}
    assert json.loads(results[weather]) == {
        "tool": "GetWeatherArgs",
        "arguments": {"city": "Edinburgh", "country": "GB", "units": "c"},
    }
    fields = custom(events, "tool_call_field")
    assert fields[0] == {
        "toolCallId": weather,
        "toolCallName": "GetWeatherArgs",
        "path": ["city"],
        "value": "Edinburgh",
    }
    # Named first, then a field, and only then is the input complete.
    assert events.index({"type": "TOOL_CALL_END", "toolCallId": weather}) > order.index("CUSTOM")
    assert events[order.index("CUSTOM")]["name"] == "rxtoolcalls.tool_call_started"
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text.startswith("This replay answers tools with echo stubs")


def test_each_client_gets_its_own_run_from_the_first_recording() -> None:
    with ReplayServer([DEMO, ANSWER], ui=True) as server:
        first, second = run_of(server), run_of(server)
    assert kinds(first) == kinds(second)


def test_the_tools_given_answer_instead_of_echo_stubs() -> None:
    def get_stock_price(ticker: str, exchange: str) -> str:
        return f"{ticker} on {exchange}: 100"

    with ReplayServer([DEMO, ANSWER], ui=True, tools={"get_stock_price": get_stock_price}) as s:
        events = run_of(s)
    contents = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert contents[1] == "AAPL on NASDAQ: 100"
    assert json.loads(contents[0])["tool"] == "GetWeatherArgs"


def test_a_run_whose_streams_are_all_cut_ends_in_run_error_with_no_result() -> None:
    with ReplayServer([DEMO], ui=True, cut={0: 8, 1: 8, 2: 8}) as server:
        events = run_of(server)
    order = kinds(events)
    assert order[-1] == "RUN_ERROR"
    assert events[-1]["code"] == "StreamInterruptedError"
    assert "TOOL_CALL_RESULT" not in order
    assert "TOOL_CALL_END" not in order
    assert "TOOL_CALL_START" not in order  # a call cut off was never shown as one
    assert named(events) == ["GetWeatherArgs"] * 3  # the first try and two retries
    retried = custom(events, "turn_retried")
    assert [value["attempt"] for value in retried] == [1, 2]
    started = custom(events, "tool_call_started")
    assert [value["toolCallIds"] for value in retried] == [
        [started[0]["toolCallId"]],
        [started[1]["toolCallId"]],
    ]


def test_a_retry_gets_the_next_recording() -> None:
    with ReplayServer([DEMO, DEMO, ANSWER], ui=True, cut={0: 8}) as server:
        events = run_of(server)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert named(events) == ["GetWeatherArgs", "GetWeatherArgs", "get_stock_price"]
    assert [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"] == [
        "GetWeatherArgs",
        "get_stock_price",
    ]


def test_a_client_that_leaves_stops_its_run() -> None:
    ran: list[str] = []

    def GetWeatherArgs(**arguments: Any) -> str:
        ran.append("GetWeatherArgs")
        return "{}"

    lines: list[str] = []
    server = ReplayServer(
        [DEMO, ANSWER],
        ui=True,
        delay=0.05,
        log=lines.append,
        tools={"GetWeatherArgs": GetWeatherArgs},
    )
    with server:
        before = set(threading.enumerate())
        with socket.create_connection(("127.0.0.1", int(server.root_url.rsplit(":", 1)[1]))) as s:
            s.sendall(b"GET /ui/events HTTP/1.1\r\nHost: x\r\n\r\n")
            reader = s.makefile("rb")
            while b"rxtoolcalls.tool_call_started" not in reader.readline():
                pass
            reader.close()
        assert settle(lambda: server.disconnects == 1)
        # The run, its pacing thread and the request's thread are gone.
        assert settle(lambda: set(threading.enumerate()) <= before)
    assert ran == []  # the turn never finished: its tool never ran
    assert any("the client closed the connection after" in line for line in lines), lines


def test_stop_ends_a_run_whose_client_is_still_connected() -> None:
    threads, sockets = threading.active_count(), open_sockets()
    lines: list[str] = []
    server = ReplayServer([DEMO], ui=True, delays={0: [0.0, 0.0, 60.0]}, log=lines.append)
    server.start()
    port = int(server.root_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /ui/events HTTP/1.1\r\nHost: x\r\n\r\n")
        reader = s.makefile("rb")
        while b"RUN_STARTED" not in reader.readline():
            pass
        client = open_sockets() - sockets  # the client's end, and the server's two
        server.stop()
        # The request's thread, the run's scheduler and the server's sockets are gone while
        # the client still holds its end, which reads the end of the stream.
        assert settle(lambda: threading.active_count() == threads)
        assert settle(lambda: len(open_sockets() - sockets) == 1), client
        s.settimeout(5)
        while reader.readline():
            pass
        reader.close()
    assert settle(lambda: open_sockets() <= sockets)
    assert any("the server stopped after" in line for line in lines), lines


def chat_tool_names(server: ReplayServer) -> list[str]:
    """The calls of the next HTTP request's non-streamed Chat Completions reply."""
    asked = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps({"model": "gpt-4o", "messages": []}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(asked, timeout=30) as reply:
        message = json.load(reply)["choices"][0]["message"]
    return [c["function"]["name"] for c in message.get("tool_calls") or []]


def test_ui_recordings_are_the_page_runs_only() -> None:
    with ReplayServer([DEMO], ui=True, ui_recordings=[DEMO, ANSWER]) as server:
        events = run_of(server)
        # The HTTP routes serve the demo alone: request 1 gets it again, not the answer.
        assert chat_tool_names(server) == ["GetWeatherArgs", "get_stock_price"]
        assert chat_tool_names(server) == ["GetWeatherArgs", "get_stock_price"]
    assert kinds(events)[-1] == "RUN_FINISHED"
    assert any(e["type"] == "TEXT_MESSAGE_CONTENT" for e in events)  # the answer's turn


def test_ui_recordings_need_ui_and_chunks() -> None:
    with pytest.raises(ValueError, match="ui=True"):
        ReplayServer([DEMO], ui_recordings=[DEMO])
    with pytest.raises(ValueError, match="ui_recordings: recording 1 is empty"):
        ReplayServer([DEMO], ui=True, ui_recordings=[DEMO, []])


def test_serve_demo_ui_serves_one_recording_over_http() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "rxtoolcalls", "serve", "--demo", "--ui", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
    finally:
        process.terminate()
        process.communicate(timeout=10)
    assert banner.startswith("serving 1 recording(s) "), banner


def test_serve_python_without_ui_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["serve", "--demo", "--python", "os:getcwd"], out=io.StringIO())
    assert code == 2
    err = capsys.readouterr().err
    assert err == "rxtoolcalls: serve --python: the tools answer the page's agent run: add --ui\n"


def test_echo_stubs_cover_every_tool_the_recordings_call() -> None:
    from rxtoolcalls._serve_ui import echo_tools

    tools = echo_tools([DEMO, ANSWER])
    assert sorted(tools) == ["GetWeatherArgs", "get_stock_price"]
    assert json.loads(tools["get_stock_price"](ticker="AAPL")) == {
        "tool": "get_stock_price",
        "arguments": {"ticker": "AAPL"},
    }
