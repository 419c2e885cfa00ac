"""The ``chat`` command against a local replay server: retries, options, tools, exit statuses."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rxtoolcalls.__main__ import main
from rxtoolcalls.serve import ReplayServer
from tests.helpers import load_fixture

pytest.importorskip("openai", reason="needs the openai extra: pip install 'rxtoolcalls[openai]'")

ANSWER = [{"choices": [{"index": 0, "delta": {"content": "All good."}, "finish_reason": "stop"}]}]


def _chat(base_url: str, *extra: str, progress: bool = False) -> tuple[int, str]:
    out = io.StringIO()
    lead = ["--progress"] if progress else []
    code = main([*lead, "chat", "Hello?", "--base-url", base_url, "--model", "m", *extra], out=out)
    return code, out.getvalue()


def test_a_cut_turn_is_retried_and_the_answer_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ReplayServer([ANSWER], cut={0: 0}) as server:
        code, printed = _chat(server.base_url, progress=True)
    assert code == 0
    assert printed.strip() == "All good."
    assert len(server.requests) == 2
    assert "↻ retrying turn 1" in capsys.readouterr().err


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_connection_refused_exits_interrupted_after_the_retries(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, printed = _chat(f"http://127.0.0.1:{_closed_port()}/v1", "--retries", "1")
    assert code == 4
    assert printed == ""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("rxtoolcalls: StreamInterruptedError: ")


def _console_script() -> Path:
    script = Path(sys.executable).parent / "rxtoolcalls"
    if not script.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    return script


def test_the_console_script_imports_python_tools_from_the_current_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "local_tools.py").write_text(
        'def lookup(term):\n    """Look a term up."""\n    return term\n'
    )
    with ReplayServer([ANSWER]) as server:
        done = subprocess.run(
            [
                str(_console_script()),
                "chat",
                "Hello?",
                "--base-url",
                server.base_url,
                "--model",
                "m",
                "--python",
                "local_tools:lookup",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "All good."
    [tool] = server.requests[0]["tools"]
    assert tool["function"]["name"] == "lookup"
    assert tool["function"]["description"] == "Look a term up."


def test_request_options_reach_the_server(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    names = ["GetWeatherArgs", "get_stock_price"]
    tools.write_text(json.dumps([{"type": "function", "function": {"name": n}} for n in names]))
    with ReplayServer([load_fixture("openai__parallel_tool_calls"), ANSWER]) as server:
        code, printed = _chat(
            server.base_url,
            "--tools",
            str(tools),
            "--tool-choice",
            "GetWeatherArgs",
            "--temperature",
            "0.25",
            "--max-tokens",
            "64",
            "--system",
            "Be brief.",
        )
    assert (code, printed.strip()) == (0, "All good.")
    first, second = server.requests
    assert first["tool_choice"] == {"type": "function", "function": {"name": "GetWeatherArgs"}}
    assert "tool_choice" not in second  # forced on the first turn only: the model can answer
    for sent in (first, second):
        assert sent["temperature"] == 0.25
        assert sent["max_tokens"] == 64
        assert sent["messages"][:2] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello?"},
        ]


def test_a_tool_choice_mode_is_sent_every_turn() -> None:
    with ReplayServer([ANSWER]) as server:
        code, _ = _chat(server.base_url, "--tool-choice", "none")
    assert code == 0
    assert server.requests[0]["tool_choice"] == "none"
    assert "temperature" not in server.requests[0]
    assert "max_tokens" not in server.requests[0]


def test_an_undeclared_tool_choice_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _chat("http://127.0.0.1:9/v1", "--tool-choice", "lookup")
    assert code == 2
    assert capsys.readouterr().err == (
        "rxtoolcalls: --tool-choice lookup: not a mode or a declared tool (no tools were given)\n"
    )


def test_the_turn_limit_has_its_own_status_and_names_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ReplayServer([load_fixture("openai__single_tool_call")]) as server:
        code, printed = _chat(server.base_url, "--max-turns", "1")
    assert (code, printed) == (12, "")
    line = capsys.readouterr().err
    assert line.startswith("rxtoolcalls: TurnLimitError: ")
    assert line.endswith("— raise --max-turns\n")
