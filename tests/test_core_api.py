"""The public surface used as a new user would: policy names, misuse, consistent events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import reactivex

import rxtoolcalls as rt
from tests.helpers import call_open, finish

WEATHER = [call_open(0, "call_1", "get_weather", '{"city": "Paris"}'), finish()]

OPERATORS: list[Callable[..., Any]] = [
    rt.assemble,
    rt.assemble_choices,
    rt.group_by_index,
    rt.on_finish_reason,
    rt.atomic_batch,
    rt.atomic_choices,
    rt.progress,
    rt.lifecycle,
    rt.Assembler,
]


# -- item 25: policy names, and an Assembler used after close ------------------------------


@pytest.mark.parametrize("name", ["default", "lenient", "LENIENT"])
def test_policy_names_are_accepted(name: Any) -> None:
    turn = reactivex.from_iterable(WEATHER).pipe(rt.assemble(name)).run()
    assert turn.tool_calls[0].name == "get_weather"
    # The name stands for the policy itself: LENIENT recovers a missing id.
    missing_id = [call_open(0, None, "f", "{}"), finish()]
    if name != "default":
        assert reactivex.from_iterable(missing_id).pipe(rt.assemble(name)).run()
    else:
        with pytest.raises(rt.MalformedChunkError):
            reactivex.from_iterable(missing_id).pipe(rt.assemble(name)).run()


@pytest.mark.parametrize("operator", OPERATORS)
def test_every_operator_refuses_a_wrong_policy_when_called(operator: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="no policy is named 'strict'"):
        operator("strict")
    for wrong in (42, {"split_reused_index": True}, rt.Limits()):
        with pytest.raises(TypeError, match="policy must be a Policy"):
            operator(wrong)
    operator("lenient")  # accepted


def test_require_finish_reason_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="require_finish_reason"):
        rt.assemble(require_finish_reason="no")  # type: ignore[arg-type]


def test_feed_after_close_and_a_second_close_raise() -> None:
    assembler = rt.Assembler()
    for chunk in WEATHER:
        assembler.feed(chunk)
    assert assembler.close().tool_calls
    with pytest.raises(RuntimeError, match="feed\\(\\) after close\\(\\)"):
        assembler.feed(WEATHER[0])
    with pytest.raises(RuntimeError, match="already called"):
        assembler.close()


def test_close_that_raised_still_closes() -> None:
    assembler = rt.Assembler()
    assembler.feed(call_open(0, "c", "f", "{"))
    with pytest.raises(rt.StreamInterruptedError):
        assembler.close()
    with pytest.raises(RuntimeError):
        assembler.close()
