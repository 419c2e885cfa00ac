r"""Lone surrogates (``"\ud800"`` escapes) are kept as the JSON decoder gives them; every text
the command line writes carries them as ``\uXXXX`` escapes instead of failing."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rxtoolcalls.__main__ import main
from tests.helpers import choice, extra, finish, run_assemble

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

CHUNKS: list[dict[str, Any]] = [
    choice({"role": "assistant", "content": "half \ud83d of a pair"}),
    choice(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "look\udc00up", "arguments": '{"q": "\ud800'},
                }
            ]
        }
    ),
    choice({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}),
    finish("tool_calls"),
]


def _capture(tmp_path: Path) -> Path:
    path = tmp_path / "surrogates.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CHUNKS), encoding="ascii")
    return path


def test_replay_writes_them_as_json_escapes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rxtoolcalls", "replay", str(_capture(tmp_path)), "--json"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert b"\\ud800" in done.stdout
    assert json.loads(done.stdout) == run_assemble(CHUNKS).to_message()


def test_replay_progress_shows_the_name_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--progress", "replay", str(_capture(tmp_path))], out=io.StringIO()) == 0
    assert "→ look\\udc00up…" in capsys.readouterr().err


def test_record_keeps_them_in_the_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sse = "".join(f"data: {json.dumps(c)}\n\n" for c in CHUNKS) + "data: [DONE]\n\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(sse))
    target = tmp_path / "out.jsonl"
    out = io.StringIO()
    assert main(["record", str(target)], out=out) == 0
    assert [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()] == CHUNKS
    assert json.loads(out.getvalue()) == run_assemble(CHUNKS).to_message()


def test_a_readable_capture_stays_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [choice({"content": "naïve 東京"}, "stop")]
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"data: {json.dumps(chunks[0])}\n\n"))
    target = tmp_path / "out.jsonl"
    assert main(["record", str(target)], out=io.StringIO()) == 0
    assert "naïve 東京" in target.read_text(encoding="utf-8")


def test_export_writes_them_as_escapes(tmp_path: Path) -> None:
    for to in ("sse", "jsonl"):
        out = io.StringIO()
        assert main(["export", str(_capture(tmp_path)), "--to", to], out=out) == 0
        out.getvalue().encode("utf-8")  # nothing that UTF-8 cannot carry
        assert "\\ud800" in out.getvalue()


def test_the_timeline_draws_them_as_escapes(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason=extra("viz"))
    picture = tmp_path / "t.png"
    argv = ["replay", str(_capture(tmp_path)), "--json", "--timeline", str(picture)]
    assert main(argv, out=io.StringIO()) == 0
    assert picture.read_bytes()[:4] == b"\x89PNG"
