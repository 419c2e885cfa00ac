"""Every misuse of the command line is one line on stderr and a documented status, never a
traceback: each case runs ``python -m rxtoolcalls`` in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import FIXTURES

PARALLEL = str(FIXTURES / "openai__parallel_tool_calls.jsonl")
CHAT = ["chat", "Hi?", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdout: int | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rxtoolcalls", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str], status: int) -> str:
    """The single stderr line of a run that exited with ``status``."""
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("rxtoolcalls"), lines[0]
    assert done.returncode == status, done.stderr
    return lines[0]


def test_missing_file(tmp_path: Path) -> None:
    line = one_line(run_cli("replay", "missing.jsonl", cwd=tmp_path), 2)
    assert line == "rxtoolcalls: cannot read missing.jsonl: No such file or directory"


def test_a_directory_instead_of_a_file(tmp_path: Path) -> None:
    assert "Is a directory" in one_line(run_cli("replay", str(tmp_path), cwd=tmp_path), 2)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files without read permission")
def test_unreadable_file(tmp_path: Path) -> None:
    locked = tmp_path / "locked.jsonl"
    locked.write_text("{}\n")
    locked.chmod(0)
    assert "Permission denied" in one_line(run_cli("replay", str(locked), cwd=tmp_path), 2)


def test_binary_file(tmp_path: Path) -> None:
    (tmp_path / "blob.jsonl").write_bytes(b"\x00\x01\x02\x03")
    assert "binary" in one_line(run_cli("replay", "blob.jsonl", cwd=tmp_path), 2)


def test_non_utf8_file(tmp_path: Path) -> None:
    (tmp_path / "latin1.sse").write_bytes('data: {"é": 1}\n\n'.encode("latin-1"))
    assert "not UTF-8" in one_line(run_cli("replay", "latin1.sse", cwd=tmp_path), 2)


@pytest.mark.json_parser
def test_deeply_nested_json_line(tmp_path: Path) -> None:
    (tmp_path / "deep.jsonl").write_text("[" * 100_000 + "\n")
    line = one_line(run_cli("replay", "deep.jsonl", cwd=tmp_path), 3)
    assert line.startswith("rxtoolcalls: MalformedChunkError: line 1 ")


@pytest.mark.json_parser
def test_deeply_nested_sse_event(tmp_path: Path) -> None:
    (tmp_path / "deep.sse").write_text("data: " + "[" * 100_000 + "\n\n")
    assert "MalformedChunkError" in one_line(run_cli("replay", "deep.sse", cwd=tmp_path), 3)


@pytest.mark.json_parser
def test_serve_a_garbage_capture(tmp_path: Path) -> None:
    (tmp_path / "garbage.jsonl").write_text("this is not a capture\n")
    line = one_line(run_cli("serve", "garbage.jsonl", "--port", "0", cwd=tmp_path), 3)
    assert line.startswith("rxtoolcalls: garbage.jsonl: MalformedChunkError: ")


def test_serve_an_empty_capture(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n")
    line = one_line(run_cli("serve", "empty.jsonl", "--port", "0", cwd=tmp_path), 2)
    assert "no chunks" in line


@pytest.mark.json_parser
def test_serve_on_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        line = one_line(run_cli("serve", PARALLEL, "--port", port, cwd=tmp_path), 2)
    assert line == f"rxtoolcalls: cannot listen on 127.0.0.1:{port}: Address already in use"


def test_timeline_in_a_missing_directory(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="needs the viz extra: pip install 'rxtoolcalls[viz]'")
    done = run_cli("replay", PARALLEL, "--timeline", "no/such/dir/t.png", cwd=tmp_path)
    assert "no directory no/such/dir" in one_line(done, 2)


def test_timeline_in_an_unknown_format(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="needs the viz extra: pip install 'rxtoolcalls[viz]'")
    done = run_cli("replay", PARALLEL, "--timeline", "t.xyz", cwd=tmp_path)
    assert "unknown picture format 'xyz'" in one_line(done, 2)
    assert not (tmp_path / "t.xyz").exists()


def test_timeline_without_matplotlib(tmp_path: Path) -> None:
    hidden = tmp_path / "hide"
    (hidden / "matplotlib").mkdir(parents=True)
    (hidden / "matplotlib" / "__init__.py").write_text(
        "raise ImportError('No module named matplotlib')\n"
    )
    path = os.pathsep.join([str(hidden), *sys.path])
    env = {**os.environ, "PYTHONPATH": path}
    done = run_cli("replay", PARALLEL, "--timeline", "t.png", cwd=tmp_path, env=env)
    line = one_line(done, 2)
    assert "pip install 'rxtoolcalls[viz]'" in line


def test_chat_with_a_missing_tools_file(tmp_path: Path) -> None:
    line = one_line(run_cli(*CHAT, "--tools", "tools.json", cwd=tmp_path), 2)
    assert line == "rxtoolcalls: cannot read tools.json: No such file or directory"


def test_chat_with_a_tools_file_that_is_not_json(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text("[{")
    assert "is not JSON" in one_line(run_cli(*CHAT, "--tools", "tools.json", cwd=tmp_path), 2)


@pytest.mark.parametrize(
    "tools",
    [
        [{"type": "function"}],
        [{"type": "function", "function": {"name": 5}}],
        ["get_weather"],
        {"tools": "get_weather"},
    ],
)
def test_chat_with_bad_tool_entries(tmp_path: Path, tools: object) -> None:
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    line = one_line(run_cli(*CHAT, "--tools", "tools.json", cwd=tmp_path), 2)
    assert line.startswith("rxtoolcalls: tools.json: ")


def test_chat_with_an_unknown_python_module(tmp_path: Path) -> None:
    line = one_line(run_cli(*CHAT, "--python", "no_such_module:tool", cwd=tmp_path), 2)
    assert "cannot import no_such_module" in line


def test_chat_with_an_unknown_python_attribute(tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text("def weather(city):\n    return 11\n")
    line = one_line(run_cli(*CHAT, "--python", "my_tools:wether", cwd=tmp_path), 2)
    assert line == "rxtoolcalls: --python my_tools:wether: my_tools has no attribute 'wether'"


def test_chat_with_a_python_spec_without_a_colon(tmp_path: Path) -> None:
    line = one_line(run_cli(*CHAT, "--python", "my_tools", cwd=tmp_path), 2)
    assert "expected MODULE:FUNCTION" in line


@pytest.mark.json_parser
def test_a_closed_stdout(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written, as under `| head`
    try:
        done = run_cli("replay", PARALLEL, cwd=tmp_path, stdout=write)
    finally:
        os.close(write)
    assert "broken pipe" in one_line(done, 2)


def test_a_usage_error_is_one_line(tmp_path: Path) -> None:
    line = one_line(run_cli("replay", PARALLEL, "--speed", "fast", cwd=tmp_path), 2)
    assert "argument --speed: not a number: 'fast'" in line


def test_replay_without_a_capture(tmp_path: Path) -> None:
    line = one_line(run_cli("replay", cwd=tmp_path), 2)
    assert line == "rxtoolcalls: replay: a capture FILE (or --demo) is needed"


def _interruptible() -> None:
    # A shell starts a background job with SIGINT ignored, and Python keeps an ignored
    # SIGINT: the child of a test run so would never see the Ctrl-C this test sends.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.json_parser
def test_ctrl_c_is_one_line_and_status_130(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "rxtoolcalls", "--progress", "replay", "--demo", "--speed", "0.05"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
    )
    try:
        assert process.stderr is not None
        assert process.stderr.readline().startswith("→ ")  # replaying, 0.8 s per chunk
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait(timeout=10)
    assert process.returncode == 130
    assert rest == "rxtoolcalls: interrupted\n"
