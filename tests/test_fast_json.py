"""Chunk JSON parses to json.loads's value or error, always, by either fast path.

Two fast paths are compared with ``json.loads`` (``load_json_stdlib``): the standard library's C
scanner called directly (the default), and msgspec (the ``fast`` extra; those cases skip without
it, and CI's second pytest run installs it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rxtoolcalls as rt
from rxtoolcalls import _sse
from rxtoolcalls._errors import MalformedChunkError
from rxtoolcalls._sse import load_json, load_json_stdlib
from tests.helpers import extra

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser


@pytest.fixture(params=["scanner", "msgspec"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which fast path ``load_json`` takes in the test."""
    if request.param == "msgspec":
        pytest.importorskip("msgspec", reason=extra("fast"))
        assert _sse._fast_decode is not None
    else:
        monkeypatch.setattr(_sse, "_fast_decode", None)
        assert _sse._scan is not None
    return str(request.param)


FIXTURES = Path(__file__).parent / "fixtures"

EDGES: list[str | bytes] = [
    '{"a": 1, "b": 2, "a": 3}',  # duplicate keys: the last value, at the first key's place
    "[NaN, Infinity, -Infinity]",
    "[1e999, -1e999, 1E400, 1e-400, -1e-400]",
    "[123456789012345678901234567890, -9223372036854775809, 18446744073709551615]",
    "[" + "7" * 5000 + "]",  # past the standard library's 4300 digits
    '["\\ud800", "\\udc00\\ud800", "\\ud83d\\ude00"]',  # lone and paired surrogate escapes
    '["\ud800"]',  # a lone surrogate in the text itself
    b'["\xff"]',  # invalid UTF-8
    b'\xef\xbb\xbf{"a": 1}',  # a UTF-8 byte order mark, which bytes input allows
    '\ufeff{"a": 1}',
    '{"a": 1}\x00',
    "[1,]",
    "[01]",
    '["\t"]',
    "[" * 5000 + "]" * 5000,
    " [1.0, -0.0, 5e-324, 2.2250738585072011e-308, 1.7976931348623157e308] ",
    '"just a string"',
    "",
    "   ",
]


def outcome(parse: Any, text: str | bytes) -> tuple[str, str]:
    """What a parser gave: the value's repr (NaN compares by repr), or the error's message."""
    try:
        value = parse(text, "the text")
    except MalformedChunkError as error:
        return ("error", str(error))
    return ("value", repr(value) + repr(_types(value)))


def _types(value: Any) -> Any:
    """The value's shape with every type named: 1 and 1.0 and True must not pass for each other."""
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value).__name__


def test_the_fast_extra_is_in_use_when_installed() -> None:
    pytest.importorskip("msgspec", reason=extra("fast"))
    assert _sse.FAST_JSON == "msgspec"


@pytest.mark.parametrize("text", EDGES, ids=range(len(EDGES)))
def test_edge_cases_give_the_standard_librarys_result(parser: str, text: str | bytes) -> None:
    assert outcome(load_json, text) == outcome(load_json_stdlib, text)


def test_every_recorded_line_parses_the_same(parser: str) -> None:
    lines = 0
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            # The chunk itself, as the SSE data carries it.
            data = json.dumps(record.get("data", record), ensure_ascii=False)
            assert outcome(load_json, data) == outcome(load_json_stdlib, data), path.name
            lines += 1
    assert lines > 1000


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(JSON, st.booleans(), st.sampled_from([None, 0, 2]))
def test_any_json_value_parses_the_same(
    parser: str, value: Any, ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert outcome(load_json, text) == outcome(load_json_stdlib, text)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=60) | st.text(max_size=60))
def test_any_garbage_ends_the_same(parser: str, data: bytes | str) -> None:
    assert outcome(load_json, data) == outcome(load_json_stdlib, data)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(JSON, st.integers(min_value=0, max_value=200), st.binary(min_size=1, max_size=3))
def test_damaged_json_ends_the_same(parser: str, value: Any, at: int, junk: bytes) -> None:
    text = json.dumps(value).encode()
    damaged = text[:at] + junk + text[at:]
    assert outcome(load_json, damaged) == outcome(load_json_stdlib, damaged)
    as_text = damaged.decode("utf-8", "surrogateescape")  # the scanner takes text only
    assert outcome(load_json, as_text) == outcome(load_json_stdlib, as_text)


@pytest.mark.parametrize("path", sorted((FIXTURES / "streams").glob("*.jsonl"))[:20], ids=str)
def test_a_recorded_stream_assembles_the_same_from_bytes(
    parser: str, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    body = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks).encode()
    pieces = [body[i : i + 16384] for i in range(0, len(body), 16384)]

    def turn() -> str:
        values: list[Any] = []
        errors: list[Exception] = []
        rt.from_sse(pieces).pipe(rt.assemble()).subscribe(values.append, errors.append)
        return repr(values) + repr([(type(e).__name__, str(e)) for e in errors])

    fast = turn()
    monkeypatch.setattr(_sse, "_fast_decode", None)
    monkeypatch.setattr(_sse, "_scan", None)  # json.loads alone
    assert turn() == fast
