"""The command line: the bundled demo, a capture file, and one exit status per error."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import rxtoolcalls as rt
from rxtoolcalls.__main__ import EXIT_CODES, main
from tests.helpers import FIXTURES, load_fixture, run_assemble


def test_demo_prints_progress_then_the_message(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    assert main([], out=out) == 0
    message = json.loads(out.getvalue())
    expected = run_assemble(load_fixture("openai__parallel_tool_calls")).to_message()
    assert message == expected
    err = capsys.readouterr().err
    assert "→ GetWeatherArgs (call 0, #1)" in err
    assert "→ get_stock_price (call 1, #2)" in err
    assert "2 tool calls" in err


def test_module_entry_point_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rxtoolcalls", "--json"],
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
    assert main([str(FIXTURES / f"{fixture}.jsonl")], out=out) == code
    assert out.getvalue() == ""
    assert capsys.readouterr().err.count("\n") >= 1


def test_opt_out_of_the_finish_reason(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    path = str(FIXTURES / "tgi__llama31_tool_call_id_repeated_no_finish.jsonl")
    assert main([path, "--json", "--no-require-finish-reason"], out=out) == 0
    assert json.loads(out.getvalue())["tool_calls"][0]["function"]["name"] == "get_current_weather"


def test_lenient_policy_reports_its_recoveries(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    path = str(FIXTURES / "openrouter__novita_kimi_k2_name_repeated_no_finish.jsonl")
    assert main([path], out=out) == 4
    assert main([path, "--policy", "lenient"], out=out) == 0
    assert "accepted_missing_finish x1" in capsys.readouterr().err


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    assert main([str(tmp_path / "missing.jsonl")], out=io.StringIO()) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert main([str(bad)], out=io.StringIO()) == 3
    bad.write_text('{"choices": [{"index": 0, "delta": {"content": 5}}]}\n')
    assert main([str(bad)], out=io.StringIO()) == 3


def test_every_error_class_has_a_distinct_status() -> None:
    codes = [code for _, code in EXIT_CODES]
    assert len(set(codes)) == len(codes)
    assert all(issubclass(kind, rt.ToolCallStreamError) for kind, _ in EXIT_CODES)
