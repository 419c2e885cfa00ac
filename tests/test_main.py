"""The command line: demo, replay (jsonl, SSE, stdin), record, serve, chat; exit statuses."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

import rxtoolcalls as rt
from rxtoolcalls.__main__ import EXIT_CODES, main
from rxtoolcalls.serve import ReplayServer
from tests.helpers import FIXTURES, extra, load_fixture, run_assemble
from tests.test_sse import sse_bytes

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

PARALLEL = str(FIXTURES / "openai__parallel_tool_calls.jsonl")


def test_demo_prints_progress_then_the_message(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    started = time.monotonic()
    assert main(["--progress"], out=out) == 0
    assert time.monotonic() - started >= 0.9  # replayed in real time: 25 chunks at 40 ms
    message = json.loads(out.getvalue())
    assert message == run_assemble(load_fixture("openai__parallel_tool_calls")).to_message()
    err = capsys.readouterr().err
    assert "→ GetWeatherArgs…  (call 0, #1)" in err
    assert "→ get_stock_price…  (call 1, #2)" in err
    assert "2 tool calls" in err


def test_module_entry_point_runs_quietly_when_not_a_terminal() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rxtoolcalls"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    )
    assert json.loads(done.stdout)["tool_calls"][1]["function"]["name"] == "get_stock_price"
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("fixture", "code"),
    [
        ("tgi__llama31_tool_call_id_repeated_no_finish", 4),
        ("openai__multiple_choices_n3", 8),
    ],
)
def test_errors_exit_with_their_status(
    fixture: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    out = io.StringIO()
    assert main(["replay", str(FIXTURES / f"{fixture}.jsonl")], out=out) == code
    assert out.getvalue() == ""
    line = capsys.readouterr().err.strip()
    assert line.count("\n") == 0
    assert line.startswith("rxtoolcalls: ")


def test_replay_options(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    path = str(FIXTURES / "tgi__llama31_tool_call_id_repeated_no_finish.jsonl")
    assert main(["replay", path, "--json", "--no-require-finish-reason"], out=out) == 0
    assert json.loads(out.getvalue())["tool_calls"][0]["function"]["name"] == "get_current_weather"
    assert main(["replay", path, "--policy", "lenient", "--json"], out=io.StringIO()) == 0
    assert main(["--progress", "replay", path, "--policy", "lenient"], out=io.StringIO()) == 0
    assert "accepted_missing_finish x1" in capsys.readouterr().err


def test_replay_raw_sse_from_a_file_and_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sse = tmp_path / "capture.sse"
    sse.write_bytes(sse_bytes(load_fixture("openai__parallel_tool_calls"), "\r\n"))
    out = io.StringIO()
    assert main(["replay", str(sse), "--json"], out=out) == 0
    expected = json.loads(out.getvalue())
    monkeypatch.setattr(sys, "stdin", io.StringIO(sse.read_text()))
    out = io.StringIO()
    assert main(["replay", "-", "--json"], out=out) == 0
    assert json.loads(out.getvalue()) == expected


def test_timeline_picture(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason=extra("viz"))
    picture = tmp_path / "timeline.png"
    assert main(["replay", PARALLEL, "--json", "--timeline", str(picture)], out=io.StringIO()) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_record_tees_sse_to_a_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = load_fixture("openai__single_tool_call")
    monkeypatch.setattr(sys, "stdin", io.StringIO(sse_bytes(chunks).decode()))
    capture = tmp_path / "capture.jsonl"
    out = io.StringIO()
    assert main(["record", str(capture)], out=out) == 0
    assert [json.loads(line) for line in capture.read_text().splitlines()] == chunks
    assert json.loads(out.getvalue())["tool_calls"][0]["function"]["name"] == "GetWeatherArgs"


def test_serve_replays_over_http() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "rxtoolcalls", "serve", PARALLEL, "--port", "0", "--delay", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        base_url = line.strip().rsplit(" ", 1)[-1]
        assert base_url.startswith("http://127.0.0.1:")
        request = urllib.request.Request(
            f"{base_url}/chat/completions",
            data=json.dumps({"model": "m", "messages": [], "stream": True}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        turn = rt.from_sse([body]).pipe(rt.assemble()).run()
        assert [c.name for c in turn.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def test_chat_runs_the_agent_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("openai", reason=extra("openai"))
    module = tmp_path / "weather_tools.py"
    module.write_text(
        textwrap.dedent(
            '''
            def GetWeatherArgs(city, country, units):
                """Weather in a city."""
                return {"temperature": 11}
            '''
        )
    )
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "get_stock_price"}}]))
    answer = [
        {"choices": [{"index": 0, "delta": {"content": "All good."}, "finish_reason": "stop"}]}
    ]
    sys.path.insert(0, str(tmp_path))
    try:
        with ReplayServer([load_fixture("openai__parallel_tool_calls"), answer]) as server:
            out = io.StringIO()
            code = main(
                [
                    "--progress",
                    "chat",
                    "Weather and stock?",
                    "--base-url",
                    server.base_url,
                    "--model",
                    "m",
                    "--tools",
                    str(tools),
                    "--python",
                    "weather_tools:GetWeatherArgs",
                    "--record",
                    str(tmp_path / "turn.jsonl"),
                ],
                out=out,
            )
    finally:
        sys.path.remove(str(tmp_path))
    assert code == 0
    assert out.getvalue().strip() == "All good."
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert json.loads(sent[2]["content"]) == {"temperature": 11}
    assert json.loads(sent[3]["content"])["tool"] == "get_stock_price"  # an echo stub
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} == {
        "GetWeatherArgs",
        "get_stock_price",
    }
    assert (tmp_path / "turn.jsonl").read_text().count("\n") == len(
        load_fixture("openai__parallel_tool_calls")
    )
    err = capsys.readouterr().err
    assert "→ GetWeatherArgs…" in err
    assert "← get_stock_price" in err


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    assert main(["replay", str(tmp_path / "missing.jsonl")], out=io.StringIO()) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert main(["replay", str(bad)], out=io.StringIO()) == 3
    bad.write_text('{"choices": [{"index": 0, "delta": {"content": 5}}]}\n')
    assert main(["replay", str(bad)], out=io.StringIO()) == 3


def test_every_error_class_has_a_distinct_status() -> None:
    codes = [code for _, code in EXIT_CODES]
    assert len(set(codes)) == len(codes)
    assert all(issubclass(kind, rt.ToolCallStreamError) for kind, _ in EXIT_CODES)
