"""The one place that turns a stage (plain callbacks) into an Observable operator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeAlias, TypeVar, cast

from reactivex import Observable, abc
from reactivex.disposable import SingleAssignmentDisposable

from ._errors import RETRY_HINT, StreamInterruptedError, ToolCallStreamError, clip

__all__ = ["Fail", "Stage", "interrupted", "lift"]

A = TypeVar("A")
B = TypeVar("B")


def interrupted(error: Exception) -> ToolCallStreamError:
    """Type a source error: ours pass through, any other becomes a ``StreamInterruptedError``."""
    if isinstance(error, ToolCallStreamError):
        return error
    wrapped = StreamInterruptedError(
        f"the chunk stream failed before the turn was complete "
        f"({type(error).__name__}: {clip(str(error))}); nothing was emitted",
        hint=RETRY_HINT,
    )
    wrapped.__cause__ = error
    return wrapped


class Stage(Generic[A]):
    """Callbacks of one subscription; ``on_error`` is told of every terminal error first.

    ``direct=True`` subscribes ``on_next`` to the source as it is, saving a call per value:
    it must never raise, must report its errors with the ``fail`` it was made with, and must
    ignore every value after reporting one (a ``TurnReader`` made with ``on_error=fail``).
    """

    __slots__ = ("direct", "on_completed", "on_error", "on_next")

    def __init__(
        self,
        on_next: Callable[[A], object],
        on_completed: Callable[[], None],
        on_error: Callable[[Exception], None] | None = None,
        *,
        direct: bool = False,
    ) -> None:
        self.on_next = on_next
        self.on_completed = on_completed
        self.on_error = on_error
        self.direct = direct


Fail: TypeAlias = Callable[[Exception], None]


def lift(
    make_stage: Callable[[abc.ObserverBase[B], Fail], Stage[A]],
) -> Callable[[Observable[A]], Observable[B]]:
    """Build an operator whose per-subscription state comes from ``make_stage``.

    ``make_stage(observer, fail)`` gets the downstream observer and ``fail``, which sends an
    error downstream once and stops the subscription. Every exception raised by the stage's
    callbacks goes to ``fail``, as raised (one that is not a ``ToolCallStreamError`` is a bug,
    kept visible); the source is disposed and later notifications are dropped. Source errors
    arrive typed (``interrupted``).
    """

    def operator(source: Observable[A]) -> Observable[B]:
        def subscribe(
            observer: abc.ObserverBase[B], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            upstream = SingleAssignmentDisposable()
            stopped = False

            def fail(error: Exception) -> None:
                nonlocal stopped
                if stopped:
                    return
                stopped = True
                if stage.on_error is not None:
                    stage.on_error(error)
                observer.on_error(error)
                upstream.dispose()

            stage = make_stage(observer, fail)
            step = stage.on_next

            def on_source_error(error: Exception) -> None:
                fail(interrupted(error))

            def on_next(value: A) -> None:
                if stopped:
                    return
                try:
                    step(value)
                except Exception as error:  # noqa: BLE001 - routed to on_error, never lost
                    fail(error)

            def on_completed() -> None:
                nonlocal stopped
                if stopped:
                    return
                try:
                    stage.on_completed()
                except Exception as error:  # noqa: BLE001 - routed to on_error, never lost
                    fail(error)
                    return
                stopped = True

            upstream.disposable = source.subscribe(
                # reactivex ignores what on_next returns (the reader returns its events).
                cast("Callable[[A], None]", step) if stage.direct else on_next,
                on_source_error,
                on_completed,
                scheduler=scheduler,
            )
            return upstream

        return Observable(subscribe)

    return operator
