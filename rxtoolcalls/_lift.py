"""Where a stage (plain callbacks) becomes an Observable operator: ``lift`` and ``fold``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from threading import get_ident
from typing import Any, Generic, TypeAlias, TypeVar, cast

from reactivex import Observable, abc
from reactivex.observer import AutoDetachObserver
from reactivex.scheduler import CurrentThreadScheduler

from ._errors import RETRY_HINT, StreamInterruptedError, ToolCallStreamError, clip

__all__ = ["Fail", "Fold", "Stage", "SubscriberRaised", "fold", "interrupted", "lift"]

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
    ``emits=True`` (with ``direct``) sends downstream what ``on_next`` returns (a sequence,
    usually empty), then what it left in ``pending`` (emptied): one call per value, not two.
    """

    __slots__ = ("direct", "emits", "on_completed", "on_error", "on_next", "pending")

    def __init__(
        self,
        on_next: Callable[[A], object],
        on_completed: Callable[[], None],
        on_error: Callable[[Exception], None] | None = None,
        *,
        direct: bool = False,
        emits: bool = False,
        pending: list[Any] | None = None,
    ) -> None:
        self.on_next = on_next
        self.on_completed = on_completed
        self.on_error = on_error
        self.direct = direct
        self.emits = emits
        self.pending = pending


Fail: TypeAlias = Callable[[Exception], None]


class SubscriberRaised(BaseException):
    """Carries an exception raised by the subscriber's own callback up through our stages.

    A ``BaseException`` so that no ``except Exception`` of a stage (which routes the stage's
    own errors to ``on_error``) takes it for one; ``lift`` raises the original again.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class _Guarded(abc.ObserverBase[B]):
    """The downstream observer as a stage sees it: its exceptions become ``SubscriberRaised``."""

    __slots__ = ("_observer", "_raised")

    def __init__(
        self, observer: abc.ObserverBase[B], raised: Callable[[BaseException], None]
    ) -> None:
        self._observer = observer
        self._raised = raised

    def on_next(self, value: B) -> None:
        try:
            self._observer.on_next(value)
        except BaseException as error:  # noqa: BLE001 - the subscriber's own: carried up as raised
            self._raised(error)
            raise SubscriberRaised(error) from None

    def on_error(self, error: Exception) -> None:
        try:
            self._observer.on_error(error)
        except BaseException as own:  # noqa: BLE001 - the subscriber's own: carried up as raised
            self._raised(own)
            raise SubscriberRaised(own) from None

    def on_completed(self) -> None:
        try:
            self._observer.on_completed()
        except BaseException as error:  # noqa: BLE001 - the subscriber's own: carried up as raised
            self._raised(error)
            raise SubscriberRaised(error) from None


class _Upstream(abc.DisposableBase):
    """The source's subscription, which a stage may dispose of before it is known.

    No lock: when ``dispose`` and ``set`` race, one of them sees the other's write, so the
    subscription is always disposed of (at worst twice, which a disposable allows).
    """

    __slots__ = ("_disposed", "_subscription")

    def __init__(self) -> None:
        self._subscription: abc.DisposableBase | None = None
        self._disposed = False

    def set(self, subscription: abc.DisposableBase) -> None:
        """Hold ``subscription``; dispose of it at once if this was disposed of already."""
        self._subscription = subscription
        if self._disposed:
            self.dispose()

    def dispose(self) -> None:
        """Dispose of the subscription, now or as soon as it is set."""
        self._disposed = True
        subscription = self._subscription
        if subscription is not None:
            self._subscription = None
            subscription.dispose()

    def release(self) -> None:
        """Let go of the subscription of a source that has ended (one set later is disposed).

        It holds the stage's callbacks, which hold what fails the stage, which holds this: a
        cycle, which the downstream's own disposal at completion breaks too; this breaks it
        whatever the downstream does.
        """
        self._disposed = True
        self._subscription = None


def _subscribe(
    source: Observable[A],
    upstream: _Upstream,
    on_next: Callable[[A], object],
    on_error: Callable[[Exception], None],
    on_completed: Callable[[], None],
    scheduler: abc.SchedulerBase | None,
) -> _Upstream:
    """Subscribe a stage's callbacks to ``source``; ``upstream`` holds the subscription."""
    # reactivex ignores what on_next returns (the reader returns its events).
    upstream.set(source.subscribe(on_next, on_error, on_completed, scheduler=scheduler))  # type: ignore[arg-type]
    return upstream


def _release(stage: Stage[Any]) -> None:
    """Let go of a finished stage's callbacks.

    A reader holds ``fail`` (its ``on_error``), which holds the stage, which holds the reader's
    ``feed``: a cycle that would keep the whole turn alive until the next collection.
    """
    stage.on_next = stage.on_completed = _finished
    stage.on_error = None
    stage.pending = None


def _finished(*_: object) -> None:
    """A finished stage's callback: nothing is left to do."""


def lift(
    make_stage: Callable[[abc.ObserverBase[B], Fail], Stage[A]],
) -> Callable[[Observable[A]], Observable[B]]:
    """Build an operator whose per-subscription state comes from ``make_stage``.

    ``make_stage(observer, fail)`` gets the downstream observer and ``fail``, which sends an
    error downstream once and stops the subscription. Every exception raised by the stage's
    callbacks goes to ``fail``, as raised (one that is not a ``ToolCallStreamError`` is a bug,
    kept visible); the source is disposed and later notifications are dropped. Source errors
    arrive typed (``interrupted``).

    An exception raised by the subscriber's own callback (``on_next``, ``on_error``,
    ``on_completed`` of the downstream observer) is not the stream's: it is never retried,
    re-typed or sent to ``on_error``; the subscription stops, the source is disposed, nothing
    runs after it, and it propagates to whoever delivered the notification (the caller of
    ``subscribe()``, or the scheduler) exactly as raised. So does a stream error with no
    ``on_error`` to take it. From a source that sends inside its own ``subscribe`` and
    catches there what escaped (hands it back to ``on_error``, as ``reactivex.create``
    does, or drops it), it is raised once that ``subscribe`` returns, if it left on that
    thread. Past reactivex's own operators (after this one, or between the source and this
    one), reactivex decides: it passes such an exception to ``on_error``, or loses it. Any
    exception counts, ``KeyboardInterrupt`` too. A ``direct`` stage must not call the
    observer from ``on_next``.
    """

    def operator(source: Observable[A]) -> Observable[B]:
        def subscribe(
            observer: abc.ObserverBase[B], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            upstream = _Upstream()
            stopped = False
            # While the source is being subscribed: what left to the subscriber on this
            # thread. A source that sends inside its own subscribe (reactivex.create) may catch
            # it there, hand it back to on_error or drop it, and return: it is raised once the
            # source returns. (What left on another thread went up that thread's stack.)
            subscribing: int | None = get_ident()
            escaped: BaseException | None = None

            def raised(error: BaseException) -> None:
                nonlocal stopped, escaped
                stopped = True
                if subscribing == get_ident():
                    escaped = error
                if isinstance(observer, AutoDetachObserver):
                    # reactivex's observer in front of the subscriber stops too: it would
                    # send the exception to on_error if handed it, and pass on what a source
                    # deaf to the disposal still sends.
                    observer.is_stopped = True
                upstream.dispose()
                _release(stage)

            guarded = _Guarded(observer, raised)

            def fail(error: Exception) -> None:
                nonlocal stopped
                if stopped:
                    return
                stopped = True
                try:
                    if stage.on_error is not None:
                        stage.on_error(error)
                    # Not guarded: an exception of the subscriber's on_error leaves as it is.
                    observer.on_error(error)
                except BaseException as own:
                    raised(own)
                    raise
                finally:
                    upstream.dispose()
                    _release(stage)

            stage = make_stage(guarded, fail)
            step = stage.on_next

            def on_source_error(error: Exception) -> None:
                if error is escaped:
                    return  # handed back by the source's subscribe: see ``escaped``
                own: BaseException | None = None
                try:
                    fail(interrupted(error))
                except SubscriberRaised as carried:
                    own = carried.error
                if own is not None:
                    raised(own)
                    try:
                        raise own
                    finally:
                        del own  # the traceback holds this frame: no cycle through it

            def subscribers_own(error: Exception) -> BaseException | None:
                """After the stage's own ``error`` is routed, the subscriber's exception if any."""
                if stopped:
                    # The stage reported its error already: this one is the subscriber's
                    # on_error raising, and leaves as it is.
                    try:
                        raise error
                    finally:
                        del error  # the traceback holds this frame: no cycle through it
                try:
                    fail(error)  # the stage's own: routed to on_error, never lost
                except SubscriberRaised as carried:
                    return carried.error
                return None

            def on_completed() -> None:
                nonlocal stopped
                if stopped:
                    return
                own: BaseException | None = None
                try:
                    stage.on_completed()
                except SubscriberRaised as carried:
                    own = carried.error
                except Exception as error:  # noqa: BLE001 - sorted out by subscribers_own
                    own = subscribers_own(error)
                stopped = True
                _release(stage)
                if own is not None:
                    raised(own)
                    try:
                        raise own
                    finally:
                        del own  # the traceback holds this frame: no cycle through it

            # Only the callbacks this stage uses are made (one subscription per turn).
            subscribed: Callable[[A], object]
            if not stage.direct:

                def on_next(value: A) -> None:
                    if stopped:
                        return
                    try:
                        step(value)
                    except SubscriberRaised as carried:
                        own: BaseException | None = carried.error
                    except Exception as error:  # noqa: BLE001 - sorted out by subscribers_own
                        own = subscribers_own(error)
                    else:
                        return
                    if own is not None:
                        raised(own)
                        # Outside the handler: the subscriber's exception leaves as it was raised.
                        try:
                            raise own
                        finally:
                            del own  # the traceback holds this frame: no cycle through it

                subscribed = on_next
            elif stage.emits:

                def send(values: Sequence[Any]) -> None:
                    try:
                        for value in values:
                            guarded.on_next(value)
                    except SubscriberRaised as carried:
                        own = carried.error
                    else:
                        return
                    raised(own)
                    try:
                        raise own
                    finally:
                        del own  # the traceback holds this frame: no cycle through it

                pending = stage.pending
                emitting: Callable[[A], Sequence[Any]] = step  # type: ignore[assignment]

                def on_next_emitting(value: A) -> None:
                    values = emitting(value)
                    if values:
                        send(values)
                    if pending:
                        ready = pending[:]
                        pending.clear()
                        if not stopped:  # found before an error the same value reported
                            send(ready)

                subscribed = on_next_emitting
            else:
                subscribed = step
            try:
                subscription = _subscribe(
                    source, upstream, subscribed, on_source_error, on_completed, scheduler
                )
            except BaseException:
                escaped = None
                raise
            finally:
                subscribing = None
            if escaped is not None:
                left, escaped = escaped, None
                try:
                    raise left
                finally:
                    del left  # the traceback holds this frame: no cycle through it
            return subscription

        return Observable(subscribe)

    return operator


Fold: TypeAlias = tuple[Callable[[A], object], Callable[[], B]]


def fold(make: Callable[[Fail], Fold[A, B]]) -> Callable[[Observable[A]], Observable[B]]:
    """Build an operator that sends one value, at the source's completion, or one error.

    ``make(fail)`` gives ``(on_next, last)`` for each subscription. ``on_next`` is subscribed
    to the source as it is: it must never raise, must report its errors with ``fail`` and
    ignore every value after (a ``TurnReader`` made with ``on_error=fail``). At completion,
    ``last()`` returns the value to send, then the completion; an exception it raises goes to
    ``fail``. Errors, disposal and the subscriber's own exceptions are as for ``lift``, with
    less to set up per subscription: the stage never calls the observer.
    """

    def operator(source: Observable[A]) -> Observable[B]:
        return _Folded(source, make)

    return operator


class _Folded(Observable[B]):
    """What ``fold`` returns: its ``subscribe`` hands the subscriber's callbacks to the fold.

    ``Observable.subscribe`` puts an ``AutoDetachObserver`` in front of every subscriber: it
    ignores what comes after an error, the completion or a disposal, and disposes of the
    subscription at the end. ``_Folding`` does the same for the one value a fold sends (a
    disposal from another thread is seen up to the moment the value is sent, as there), so
    this ``subscribe`` keeps the rest of ``Observable.subscribe`` (an observer or callbacks,
    the current thread's trampoline, an error of the subscription itself sent to
    ``on_error``) without that layer: a third of what subscribing through a fold costs over
    subscribing to its source.
    """

    def __init__(self, source: Observable[A], make: Callable[[Fail], Fold[A, B]]) -> None:
        super().__init__()
        self._source = source
        self._make = make

    def _subscribe_core(
        self, observer: abc.ObserverBase[B], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        # Reached only through Observable.subscribe called on this class explicitly.
        run = _Folding(observer.on_next, observer.on_error, observer.on_completed)
        run._start(self._source, self._make, scheduler)
        return run

    def subscribe(
        self,
        on_next: abc.ObserverBase[B] | abc.OnNext[B] | None = None,
        on_error: abc.OnError | None = None,
        on_completed: abc.OnCompleted | None = None,
        *,
        scheduler: abc.SchedulerBase | None = None,
    ) -> abc.DisposableBase:
        """Subscribe an observer, or callbacks, as ``Observable.subscribe`` does.

        One difference, as ``lift`` documents it: an exception of the subscriber's own
        ``on_next`` always leaves as raised, even from a source that sends everything inside
        its ``subscribe`` (reactivex would pass it to ``on_error``).
        """
        # Which of the two was given, decided as Observable.subscribe decides it.
        if isinstance(on_next, abc.ObserverBase) or (
            hasattr(on_next, "on_next") and callable(on_next.on_next)  # type: ignore[union-attr]
        ):
            observer = cast("abc.ObserverBase[B]", on_next)
            on_next, on_error, on_completed = (
                observer.on_next,
                observer.on_error,
                observer.on_completed,
            )
        run = _Folding(
            on_next or _finished,
            on_error or _raise,
            on_completed or _finished,
        )
        # As Observable.subscribe does: the source is subscribed on a running trampoline, so
        # its subscription is known before a source on the current thread sends anything (a
        # failed turn can then stop it at once).
        trampoline = CurrentThreadScheduler.singleton()
        parts = (self._source, self._make, scheduler)
        if trampoline.schedule_required():
            trampoline.schedule(run._begin, parts)
        else:
            run._begin(trampoline, parts)
        return run


# What a subscription starts from: the source, the fold's ``make``, the scheduler given.
_Start: TypeAlias = tuple[
    Observable[Any], Callable[[Fail], Fold[Any, Any]], abc.SchedulerBase | None
]


def _raise(error: Exception) -> None:
    """A subscriber without ``on_error``: the error is raised, as reactivex raises it."""
    raise error


class _Folding(abc.DisposableBase):
    """One subscription of a fold, and what its subscriber holds to dispose of it."""

    __slots__ = (
        "_disposed",
        "_escaped",
        "_last",
        "_on_completed",
        "_on_error",
        "_on_next",
        "_starting",
        "_stopped",
        "_upstream",
    )

    def __init__(
        self,
        on_next: Callable[[Any], None],
        on_error: Callable[[Exception], None],
        on_completed: Callable[[], None],
    ) -> None:
        self._on_next = on_next
        self._on_error = on_error
        self._on_completed = on_completed
        self._upstream = _Upstream()
        self._stopped = False
        self._disposed = False
        self._last: Callable[[], Any] | None = None
        # While the source is being subscribed, its thread; what left to the subscriber on
        # that thread (see ``lift``).
        self._starting: int | None = None
        self._escaped: BaseException | None = None

    @property
    def is_disposed(self) -> bool:
        """Whether ``dispose`` was called (as reactivex's ``Disposable`` tells)."""
        return self._disposed

    def _begin(self, _: abc.SchedulerBase, parts: _Start | None) -> None:
        """Start on the trampoline; an error of the start itself goes to ``on_error``."""
        try:
            self._start(*cast("_Start", parts))
        except Exception as error:
            # As reactivex's observer does: sent to on_error unless the subscription has
            # stopped already (then it is the subscriber's own, or came after a disposal).
            if self._stopped:
                raise
            self._fail(error)

    def _start(
        self,
        source: Observable[Any],
        make: Callable[[Fail], Fold[Any, Any]],
        scheduler: abc.SchedulerBase | None,
    ) -> None:
        """Make the stage and subscribe it to ``source``."""
        on_next, self._last = make(self._fail)
        self._starting = get_ident()
        try:
            _subscribe(source, self._upstream, on_next, self._failed, self._completed, scheduler)
        except BaseException:
            self._escaped = None
            raise
        finally:
            self._starting = None
        left = self._escaped
        if left is not None:
            # Caught by the source inside its subscribe, and handed back or dropped.
            self._escaped = None
            try:
                raise left
            finally:
                del left  # the traceback holds this frame: no cycle through it

    def _escaping(self, error: BaseException) -> None:
        """``error`` leaves to the subscriber: kept if it leaves from the source's subscribe."""
        if self._starting == get_ident():
            self._escaped = error

    def _fail(self, error: Exception) -> None:
        """Send ``error`` downstream once, and stop (the source is disposed of)."""
        if self._stopped:
            return
        self._stopped = True
        # The stage holds this method: letting go of the stage breaks the cycle.
        self._last = None
        try:
            # An exception of the subscriber's on_error leaves as it is.
            self._on_error(error)
        except BaseException as own:
            self._escaping(own)
            raise
        finally:
            self._upstream.dispose()

    def _failed(self, error: Exception) -> None:
        if error is self._escaped:
            # A source that sends inside its own subscribe (reactivex.create) caught what left
            # to the subscriber and hands it back: raised once the source returns (``_start``).
            return
        self._fail(interrupted(error))

    def _completed(self) -> None:
        if self._stopped:
            return
        last = self._last
        self._last = None
        if last is None:
            return  # disposed of from another thread since the test above
        try:
            value = last()
        except Exception as error:  # noqa: BLE001 - the stage's own: routed to on_error
            failed: Exception | None = error
        else:
            failed = None
        if failed is not None:
            # Outside the handler: an exception of the subscriber's on_error leaves with
            # nothing chained to it. Then dropped: the error's traceback holds this frame,
            # which would hold the error (a cycle, with the whole turn).
            try:
                self._fail(failed)
            finally:
                failed = None
            return
        if self._disposed:
            return  # disposed of from another thread while the turn was built
        self._stopped = True
        self._upstream.release()
        try:
            self._on_next(value)
            # A subscriber may dispose of it from on_next (``take(1)``, ``first()``).
            if not self._disposed:
                self._on_completed()
        except BaseException as own:
            # The subscriber's own: nothing runs after it, and it leaves as raised.
            self._escaping(own)
            self._upstream.dispose()
            raise

    def dispose(self) -> None:
        """Stop: nothing more is sent, and the source is disposed of."""
        self._disposed = self._stopped = True
        self._last = None
        self._upstream.dispose()
