"""The field-events benchmark's pure parts: the call it builds, its chunks, what each timed run
returns, and the section's verdict without jiter. Nothing here is timed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.benchmarks import bench

KIB = 1024


@pytest.mark.parametrize("objects_first", [False, True])
@pytest.mark.parametrize("size", bench.FIELDS_SIZES)
def test_arguments_are_one_json_object_of_the_stated_size(size: int, objects_first: bool) -> None:
    text = bench.fields_arguments(size, objects_first=objects_first)
    assert len(text) == size
    assert text.isascii()
    value = json.loads(text)
    assert list(value) == (
        ["path", "items", "content"] if objects_first else ["path", "content", "items"]
    )
    assert len(value["items"]) == round(500 * size / (128 * KIB))
    assert value["content"].startswith(bench.SOURCE_LINE)
    for escape in ("\\n", "\\t", '\\"', "\\\\", "\\u00e9"):
        assert escape in text


def test_the_128_kib_call_holds_500_objects_and_a_long_string() -> None:
    value = json.loads(bench.fields_arguments(128 * KIB))
    assert len(value["items"]) == 500
    assert len(json.dumps(value["content"])) > 64 * KIB  # more than half the text


def test_the_stream_is_one_call_in_16_character_fragments() -> None:
    text = bench.fields_arguments(128 * KIB)
    chunks = bench.build_fields_stream(text)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    calls = [d["tool_calls"][0] for d in deltas[:-1]]
    pieces = [c["function"]["arguments"] for c in calls]
    assert len(pieces) == 128 * KIB // 16
    assert all(len(p) == 16 for p in pieces)
    assert "".join(pieces) == text
    assert (calls[0]["id"], calls[0]["function"]["name"]) == ("call_0", "write_file")
    assert all("id" not in c and "name" not in c["function"] for c in calls[1:])
    assert {c["index"] for c in calls} == {0}
    assert deltas[-1] == {}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_count_values_counts_every_value_and_the_root() -> None:
    assert bench.count_values({"a": [1, {"b": None}], "c": "x"}) == 6
    assert bench.count_values({}) == 1


@pytest.mark.parametrize("objects_first", [False, True])
def test_every_run_gives_the_call_s_value(objects_first: bool) -> None:
    text = bench.fields_arguments(2 * KIB, objects_first=objects_first)
    chunks = bench.build_fields_stream(text)
    expected = json.loads(text)
    runs = dict(bench.FIELDS_RUNS)
    if bench.jiter_version() is None:
        del runs["jiter re-parse"]
    for run in runs.values():
        assert run(chunks) == expected
    found, texts = bench.check_field_events(chunks, expected)
    assert found == bench.count_values(expected)
    assert texts > 0


def test_without_jiter_the_comparison_is_not_measured(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "jiter", None)  # import jiter raises ImportError
    assert bench.jiter_version() is None
    results = bench.fields_section((1 * KIB, 4 * KIB), 1, None)
    out = capsys.readouterr().out
    assert "jiter not installed" in out
    assert "jiter re-parse |" not in out
    jiter = [r for r in results if "jiter" in r[0]]
    assert len(jiter) == 1
    assert jiter[0][1] is None
    assert "not installed" in jiter[0][2]
    assert all(ok is not None for text, ok, _ in results if "jiter" not in text)


def test_the_section_plots_time_per_fragment(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "fields.png"
    results = bench.fields_section((1 * KIB, 4 * KIB), 1, path)
    assert path.read_bytes().startswith(b"\x89PNG")
    assert len(results) == 3
