"""Property tests: split and interleaving invariance, truncation, and the error promise."""

from __future__ import annotations

import json
from typing import Any

import pytest
import reactivex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rxtoolcalls as rt
from tests.helpers import Chunk, choice, outcome, reference, run_assemble, run_assembler, run_pipe

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)
NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)


@st.composite
def turns(
    draw: st.DrawFn, dense: bool = False
) -> tuple[list[Chunk], list[tuple[int, str, str, str]], str | None]:
    """A well-formed stream with random splits, interleaving and packing, and its answer.

    Indices are random opaque keys, or 0..n-1 opened in order when ``dense``.
    """
    n = draw(st.integers(0, 4))
    if dense:
        indices = list(range(n))
    else:
        indices = sorted(draw(st.sets(st.integers(-2, 9), min_size=n, max_size=n)))
    expected: list[tuple[int, str, str, str]] = []
    per_call: list[list[dict[str, Any]]] = []
    for index in indices:
        name = draw(NAMES)
        text = json.dumps(draw(ARGUMENTS), ensure_ascii=draw(st.booleans()))
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=len(text))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        pieces = [p for p in pieces if p]
        call_id = f"call_{index}_{name}"
        first: dict[str, Any] = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        per_call.append([first] + [{"index": index, "function": {"arguments": p}} for p in pieces])
        expected.append((index, call_id, name, text))
    # Interleave: repeatedly take the next fragment of a random unfinished call.
    fragments: list[dict[str, Any]] = []
    queues = [list(q) for q in per_call]
    opened = 0
    while any(queues):
        # Dense streams also open calls in index order, as OpenAI does.
        live = [q for i, q in enumerate(queues) if q and (not dense or i <= opened)]
        picked = live[draw(st.integers(0, len(live) - 1))]
        if dense and picked is queues[opened] and len(picked) == len(per_call[opened]):
            opened = min(opened + 1, len(queues) - 1)
        fragments.append(picked.pop(0))
    prose = draw(st.one_of(st.none(), st.text(max_size=20)))
    chunks: list[Chunk] = [choice({"role": "assistant", "content": None})]
    if prose is not None:
        chunks.append(choice({"content": prose}))
    i = 0
    while i < len(fragments):
        size = draw(st.integers(1, 3))
        chunks.append(choice({"tool_calls": fragments[i : i + size]}))
        i += size
    chunks.append(choice({}, "tool_calls" if expected else "stop"))
    return chunks, expected, prose


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_any_split_interleaving_and_packing_gives_the_same_turn(
    case: tuple[list[Chunk], list[tuple[int, str, str, str]], str | None],
) -> None:
    chunks, expected, prose = case
    turn = run_assembler(chunks)
    assert [(c.index, c.id, c.name, c.arguments) for c in turn.tool_calls] == expected
    assert reference(chunks) == expected
    assert turn.content == prose
    for call in turn.tool_calls:
        assert call.parsed_arguments == json.loads(call.arguments)
    assert run_assemble(chunks) == turn
    assert run_pipe(chunks) == turn


@settings(max_examples=300, deadline=None)
@given(ARGUMENTS.filter(bool), st.data())
def test_every_truncation_is_an_error_and_emits_nothing(
    arguments: dict[str, Any], data: st.DataObject
) -> None:
    text = json.dumps(arguments, ensure_ascii=data.draw(st.booleans()))
    cut = data.draw(st.integers(1, len(text) - 1))
    reason = data.draw(st.sampled_from(["tool_calls", "stop", "length", None]))
    chunks = [
        choice(
            {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": ""}}]}
        ),
        choice({"tool_calls": [{"index": 0, "function": {"arguments": text[:cut]}}]}),
        choice({}, reason),
    ]
    values: list[Any] = []
    errors: list[Exception] = []
    reactivex.from_iterable(chunks).pipe(rt.assemble(require_finish_reason=False)).subscribe(
        values.append, errors.append
    )
    assert values == []
    assert len(errors) == 1
    # A cut JSON text is always reported as cut, never as merely invalid.
    assert isinstance(errors[0], rt.TruncatedToolCallError)


@settings(max_examples=200, deadline=None)
@given(ARGUMENTS, st.text(min_size=1, max_size=5).filter(lambda s: s.strip() != ""))
def test_text_after_a_complete_value_is_invalid_not_truncated(
    arguments: dict[str, Any], junk: str
) -> None:
    text = json.dumps(arguments) + junk
    chunks = [
        choice(
            {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": text}}]}
        ),
        choice({}, "tool_calls"),
    ]
    with pytest.raises(rt.InvalidArgumentsError):
        run_assembler(chunks)


KEYS = st.sampled_from(
    [
        "choices",
        "index",
        "delta",
        "finish_reason",
        "tool_calls",
        "id",
        "type",
        "function",
        "name",
        "arguments",
        "content",
        "refusal",
        "reasoning",
        "reasoning_content",
        "usage",
        "error",
        "object",
        "function_call",
        "role",
    ]
)
WIRE_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "tool_calls", "stop", "{", "}", "x"]),
)
WIRE = st.recursive(
    WIRE_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(st.lists(WIRE, max_size=6))
def test_arbitrary_input_raises_only_our_errors(chunks: list[Any]) -> None:
    # outcome() catches only our errors: any other exception fails the test.
    first = outcome(run_assembler, chunks)
    if not isinstance(first, rt.AssistantTurn):
        assert issubclass(first[0], rt.ToolCallStreamError)
    # The three spellings agree on arbitrary input too.
    assert outcome(run_assemble, chunks) == first
    assert outcome(run_pipe, chunks) == first
    progress_errors: list[Exception] = []
    reactivex.from_iterable(chunks).pipe(rt.progress()).subscribe(on_error=progress_errors.append)
    assert all(isinstance(e, rt.ToolCallStreamError) for e in progress_errors)
