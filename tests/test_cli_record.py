"""``record``: never overwrites by accident, I/O errors are status 2, JSONL or SSE input, and
in-band errors stay in the capture."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
import reactivex

from rxtoolcalls.__main__ import main
from rxtoolcalls.sources import record
from tests.helpers import load_fixture
from tests.test_sse import sse_bytes

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

CHUNKS = load_fixture("openai__single_tool_call")


def _lines(path: Path) -> list[object]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_recording_a_file_onto_itself_keeps_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.sse"
    source.write_bytes(sse_bytes(CHUNKS))
    for extra in ([], ["--force"]):
        assert main(["record", str(source), str(source), *extra], out=io.StringIO()) == 2
    assert source.read_bytes() == sse_bytes(CHUNKS)
    err = capsys.readouterr().err
    assert err.count("is the input") == 2
    assert "recorded" not in err


def test_an_existing_capture_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.sse"
    source.write_bytes(sse_bytes(CHUNKS))
    target = tmp_path / "out.jsonl"
    target.write_text("keep me\n")
    assert main(["record", str(target), str(source)], out=io.StringIO()) == 2
    assert target.read_text() == "keep me\n"
    assert "exists: pass --force" in capsys.readouterr().err
    assert main(["record", str(target), str(source), "--force"], out=io.StringIO()) == 0
    assert _lines(target) == CHUNKS


def test_a_capture_in_a_missing_directory_is_an_io_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.sse"
    source.write_bytes(sse_bytes(CHUNKS))
    target = tmp_path / "no" / "out.jsonl"
    assert main(["record", str(target), str(source)], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err == f"rxtoolcalls: cannot write {target}: No such file or directory\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_is_an_io_error_and_no_success_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.sse"
    source.write_bytes(sse_bytes(CHUNKS))
    assert main(["record", "/dev/full", str(source), "--force"], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err == "rxtoolcalls: cannot write /dev/full: No space left on device\n"


def test_a_jsonl_source_is_sniffed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.txt"
    source.write_text("".join(json.dumps(c) + "\n" for c in CHUNKS))
    target = tmp_path / "out.jsonl"
    out = io.StringIO()
    assert main(["record", str(target), str(source)], out=out) == 0
    assert _lines(target) == CHUNKS
    assert json.loads(out.getvalue())["tool_calls"][0]["function"]["name"] == "GetWeatherArgs"
    assert capsys.readouterr().err == f"recorded {len(CHUNKS)} chunks to {target}\n"


@pytest.mark.parametrize(
    ("tail", "kept"),
    [
        (
            'data: {"error": {"message": "overloaded", "code": 503}}\n\n',
            {"error": {"message": "overloaded", "code": 503}},
        ),
        (
            'event: error\ndata: {"message": "overloaded"}\n\n',
            {"error": {"message": "overloaded"}},
        ),
        ("error: overloaded\n\n", {"error": {"message": "overloaded"}}),
    ],
)
def test_in_band_errors_stay_in_the_capture(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tail: str,
    kept: object,
) -> None:
    stream = sse_bytes(CHUNKS[:2], done=False).decode() + tail + "data: [DONE]\n\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(stream))
    target = tmp_path / "bug.jsonl"
    assert main(["record", str(target)], out=io.StringIO()) == 9
    assert _lines(target) == [*CHUNKS[:2], kept]
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"recorded 3 chunks to {target}"
    assert err[1].startswith("rxtoolcalls: ProviderError: ")
    assert main(["replay", str(target)], out=io.StringIO()) == 9  # the capture fails the same way


def test_the_record_operator_reports_a_capture_it_cannot_open(tmp_path: Path) -> None:
    errors: list[Exception] = []
    values: list[object] = []
    chunks: reactivex.Observable[object] = reactivex.of({"choices": []})
    chunks.pipe(record(tmp_path / "no" / "x.jsonl")).subscribe(values.append, errors.append)
    assert values == []
    assert isinstance(errors[0], FileNotFoundError)
