"""Fuzz the command line with cut and corrupted real captures: every run ends with a
documented exit status and never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rxtoolcalls.__main__ import EXIT_CODES, INTERRUPTED, USAGE, main
from tests.helpers import FIXTURES, call_open, extra, fixture_names, load_fixture
from tests.test_sse import sse_bytes

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

DOCUMENTED = {0, USAGE, INTERRUPTED, *(code for _, code in EXIT_CODES)}
NAMES = fixture_names()


def _capture(name: str, sse: bool) -> bytes:
    if sse:
        return sse_bytes(load_fixture(name))
    return (FIXTURES / f"{name}.jsonl").read_bytes()


@st.composite
def damaged_captures(draw: st.DrawFn) -> tuple[bytes, str]:
    """A real capture (JSONL or SSE), cut anywhere, perhaps with garbage spliced in."""
    sse = draw(st.booleans())
    data = _capture(draw(st.sampled_from(NAMES)), sse)
    data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
    return data, ".sse" if sse and draw(st.booleans()) else ".jsonl"


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv, out=io.StringIO())
    return code, err.getvalue()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_captures())
def test_replay_record_and_export_end_documented(capture: tuple[bytes, str]) -> None:
    data, suffix = capture
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"capture{suffix}"
        path.write_bytes(data)
        runs = [
            ["replay", str(path)],
            ["replay", str(path), "--policy", "lenient", "--no-require-finish-reason"],
            ["record", str(Path(folder) / "out.jsonl"), str(path)],
            ["export", str(path)],
        ]
        for argv in runs:
            code, err = _run(argv)
            assert code in DOCUMENTED, (argv, code, err)
            assert "Traceback" not in err


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_bytes_end_documented(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "garbage.sse"
        path.write_bytes(data)
        for argv in (["replay", str(path)], ["export", str(path), "--to", "jsonl"]):
            code, err = _run(argv)
            assert code in DOCUMENTED
            assert "Traceback" not in err


def test_the_real_process_on_cut_captures(tmp_path: Path) -> None:
    chooser = random.Random(13)
    for number in range(6):
        data = _capture(chooser.choice(NAMES), sse=number % 2 == 0)
        path = tmp_path / f"cut{number}.txt"
        path.write_bytes(data[: chooser.randrange(len(data) + 1)])
        done = subprocess.run(
            [sys.executable, "-m", "rxtoolcalls", "replay", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode in DOCUMENTED, done.stderr
        assert "Traceback" not in done.stderr
        assert len(done.stderr.splitlines()) <= 1


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_captures(), st.text(max_size=12))
def test_the_timeline_of_any_capture_ends_documented(capture: tuple[bytes, str], name: str) -> None:
    pytest.importorskip("matplotlib", reason=extra("viz"))
    data, suffix = capture
    named = json.dumps(call_open(0, "call_1", name or "f", "{}")).encode() + b"\n"
    with tempfile.TemporaryDirectory() as folder:
        for number, body in enumerate((data, named)):
            path = Path(folder) / f"capture{number}{suffix if number == 0 else '.jsonl'}"
            path.write_bytes(body)
            picture = str(Path(folder) / f"t{number}.png")
            code, err = _run(["replay", str(path), "--json", "--timeline", picture])
            assert code in DOCUMENTED, (code, err)
            assert "Traceback" not in err
