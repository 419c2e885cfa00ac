"""The bundled demo from anywhere (``--demo``), ``export`` to raw SSE and back, and how the
notebooks are opened."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest

from rxtoolcalls.__main__ import main
from tests.helpers import FIXTURES, load_fixture, run_assemble

ROOT = Path(__file__).parent.parent
PARALLEL = load_fixture("openai__parallel_tool_calls")
COMMAND_LINE = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


@pytest.mark.json_parser
def test_replay_demo_works_outside_a_checkout(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rxtoolcalls", "replay", "--demo", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == run_assemble(PARALLEL).to_message()


def test_demo_and_a_file_together_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "openai__parallel_tool_calls.jsonl")
    assert main(["replay", path, "--demo"], out=io.StringIO()) == 2
    assert capsys.readouterr().err == "rxtoolcalls: replay: give FILE or --demo, not both\n"


@pytest.mark.json_parser
def test_export_writes_raw_sse_that_replays_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    assert main(["export", str(FIXTURES / "openai__parallel_tool_calls.jsonl")], out=out) == 0
    sse = out.getvalue()
    assert sse.startswith("data: {")
    assert sse.endswith("data: [DONE]\n\n")
    assert sse.count("data: ") == len(PARALLEL) + 1
    monkeypatch.setattr(sys, "stdin", io.StringIO(sse))
    replayed = io.StringIO()
    assert main(["replay", "-", "--json"], out=replayed) == 0
    assert json.loads(replayed.getvalue()) == run_assemble(PARALLEL).to_message()
    back = tmp_path / "back.sse"
    back.write_text(sse)
    lines = io.StringIO()
    assert main(["export", str(back), "--to", "jsonl"], out=lines) == 0
    assert [json.loads(line) for line in lines.getvalue().splitlines()] == PARALLEL


@pytest.mark.json_parser
def test_export_of_the_demo_is_the_recorded_stream() -> None:
    out = io.StringIO()
    assert main(["export", "--demo", "--to", "jsonl"], out=out) == 0
    assert [json.loads(line) for line in out.getvalue().splitlines()] == PARALLEL


@pytest.mark.json_parser
def test_serve_demo(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "rxtoolcalls", "serve", "--demo", "--port", "0", "--delay", "0"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip().rsplit(" ", 1)[-1]
        request = urllib.request.Request(
            f"{base_url}/chat/completions", data=json.dumps({"messages": []}).encode()
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            completion = json.loads(response.read())
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    assert completion["choices"][0]["message"] == run_assemble(PARALLEL).to_message()


def test_the_notebooks_extra_installs_a_way_to_open_them() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extra = project["project"]["optional-dependencies"]["notebooks"]
    assert any(re.match(r"(notebook|jupyterlab)\b", requirement) for requirement in extra)
    assert "jupyter notebook notebooks/" in COMMAND_LINE


def test_the_readme_shows_the_demo_and_export() -> None:
    for shown in ("rxtoolcalls replay --demo --json", "rxtoolcalls export --demo > demo.sse"):
        assert shown in COMMAND_LINE
