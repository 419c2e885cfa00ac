"""The command line where a turn is retried, a finish_reason is missing, or a capture is bad."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from rxtoolcalls.serve import ReplayServer
from tests.helpers import extra
from tests.test_cli_errors import one_line, run_cli

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

pytest.importorskip("openai", reason=extra("openai"))

ROOT = Path(__file__).parent.parent


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=ROOT)


NO_FINISH = [{"choices": [{"index": 0, "delta": {"content": "Hi."}, "finish_reason": None}]}]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nobody listens there once the probe is closed


def test_retries_against_a_refused_port_print_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    done = cli("chat", "hi", "--base-url", url, "--model", "m", "--retries", "2")
    line = one_line(done, 4)  # also fails on any second line, such as a scheduler warning
    assert line.startswith("rxtoolcalls: StreamInterruptedError: ")


def test_chat_accepts_a_stream_without_finish_reason_when_told() -> None:
    with ReplayServer([NO_FINISH]) as server:
        flags = ["--base-url", server.base_url, "--model", "m", "--retries", "0"]
        refused = cli("chat", "hi", *flags)
        accepted = cli("chat", "hi", *flags, "--no-require-finish-reason")
    assert "without a finish_reason" in one_line(refused, 4)
    assert (accepted.returncode, accepted.stdout.strip(), accepted.stderr) == (0, "Hi.", "")


def test_a_missing_finish_reason_in_a_capture_is_not_told_to_retry(tmp_path: Path) -> None:
    capture = tmp_path / "cut.jsonl"
    capture.write_text(json.dumps(NO_FINISH[0]) + "\n", encoding="utf-8")
    line = one_line(cli("replay", str(capture)), 4)
    assert "retry" not in line
    assert "require_finish_reason=False" not in line  # Python advice: the flag says it
    assert "--no-require-finish-reason" in line


def test_export_refuses_nan(tmp_path: Path) -> None:
    capture = tmp_path / "nan.jsonl"
    capture.write_text('{"choices": [], "x": NaN}\n', encoding="utf-8")
    done = cli("export", str(capture))
    assert "NaN" in one_line(done, 3)
    assert "NaN" not in done.stdout


def test_record_of_a_broken_input_records_nothing(tmp_path: Path) -> None:
    source = tmp_path / "deep.sse"
    source.write_text("data: " + "[" * 100_000 + "\n\n", encoding="utf-8")
    target = tmp_path / "out.jsonl"
    done = cli("record", str(target), str(source))
    assert "recorded" not in one_line(done, 3)
    assert not target.exists()


def test_a_legacy_error_field_without_code_says_no_code(tmp_path: Path) -> None:
    capture = tmp_path / "legacy.sse"
    capture.write_text('error: {"message": "model crashed"}\n\ndata: [DONE]\n\n', encoding="utf-8")
    line = one_line(cli("replay", str(capture)), 9)
    assert "model crashed" in line
    assert "code None" not in line
