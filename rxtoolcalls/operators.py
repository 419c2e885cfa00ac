"""The public operators: thin Rx skins over the assembler's rules.

Element types along ``assemble()``::

    Chunk ─group_by_index()─▶ ToolCallGroup | StreamEnd
          ─concat_arguments()─▶ ToolCallBuffer | StreamEnd
          ─on_finish_reason()─▶ ToolCallBuffer | StreamEnd   (checked)
          ─atomic_batch()─▶ AssistantTurn                     (exactly one, or one error)

A ``Chunk`` is one event of a stream, on any wire (``Wire`` lists them), as a dict (parsed
JSON) or the SDK's own object (openai's ``ChatCompletionChunk`` or ``ResponseStreamEvent``,
anthropic's ``RawMessageStreamEvent``, google-genai's ``GenerateContentResponse``; boto3's are
dicts). Every operator detects the wire from the first event that shows it; ``wire=`` forces
one. The notifications are the same on every wire.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, Literal, TypeAlias, overload

import reactivex
from reactivex import GroupedObservable, Observable, abc
from reactivex.disposable import Disposable

from ._close import build_turns, check_finish, every_turn, resolve_policy, single_turn
from ._core import Call, _discard, keeping
from ._errors import MalformedChunkError, StreamInterruptedError
from ._fields import watch_fields
from ._lift import Fail, Fold, Stage, SubscriberRaised, fold, lift
from ._policy import Policy, PolicyName
from ._reader import reader as TurnReader
from ._reader import resolve_wire
from ._types import (
    AssistantTurn,
    StreamEnd,
    TextDelta,
    ToolCallBuffer,
    ToolCallCommitted,
    ToolCallField,
    ToolCallProgress,
    ToolCallStarted,
    ToolCallText,
    Wire,
    new_text_delta,
)

__all__ = [
    "Chunk",
    "ToolCallGroup",
    "assemble",
    "assemble_choices",
    "assemble_with_progress",
    "atomic_batch",
    "atomic_choices",
    "concat_arguments",
    "fields",
    "group_by_index",
    "lifecycle",
    "on_finish_reason",
    "progress",
]

Chunk: TypeAlias = object
"""One event of a stream on any wire: a dict, or the SDK's object for it."""

Grouped: TypeAlias = "ToolCallGroup | StreamEnd"
Joined: TypeAlias = "ToolCallBuffer | StreamEnd"


# GroupedObservable wants an underlying stream; ToolCallGroup serves its own subscribers.
_NEVER_SUBSCRIBED: Observable[str] = reactivex.empty()


class _Collector:
    """An inner observer for our own operators: fragments go straight into a buffer."""

    __slots__ = ("on_completed", "on_error", "on_next")

    def __init__(self, text: io.StringIO, on_completed: Callable[[], None]) -> None:
        self.on_next = text.write
        self.on_completed = on_completed
        self.on_error = _ignore_error


def _ignore_error(_error: Exception) -> None:
    """Inner errors also arrive on the outer stream, which reports them once."""


class ToolCallGroup(GroupedObservable[int, str]):
    """The argument fragments of one tool call, as a hot inner stream keyed by its ``index``.

    ``index``, ``choice_index``, ``id`` and ``name`` are readable from the moment the group is
    emitted (``id``/``name`` fill in if a provider sends them on a later fragment). The group
    completes (or errors) with the chunk stream. Subscribe when it is emitted: like the inner
    streams of ``group_by``, it does not replay fragments sent before a subscription.
    """

    def __init__(self, call: Call) -> None:
        super().__init__(call.index, _NEVER_SUBSCRIBED)
        self._call = call
        self._observers: list[abc.ObserverBase[str] | _Collector] = []
        self._ended: Exception | bool = False
        call.sink = _discard

    @property
    def index(self) -> int:
        """The tool call's ``index`` (also the group's ``key``)."""
        return self._call.index

    @property
    def choice_index(self) -> int:
        """The index of the choice the call belongs to."""
        return self._call.choice_index

    @property
    def id(self) -> str | None:
        """The call's id, once sent."""
        return self._call.id

    @property
    def name(self) -> str | None:
        """The function name, once sent."""
        return self._call.name

    @property
    def type(self) -> str | None:
        """The call's ``type`` as sent (``None`` when the provider omits it)."""
        return self._call.type

    def __repr__(self) -> str:
        return f"ToolCallGroup(index={self.index}, id={self.id!r}, name={self.name!r})"

    def _route(self) -> None:
        # One observer (the usual case): pieces go straight to its on_next, no fan-out loop.
        observers = self._observers
        if not observers:
            self._call.sink = _discard
        elif len(observers) == 1:
            self._call.sink = _carried(observers[0])
        else:
            sinks = tuple(_carried(observer) for observer in observers)

            def fan_out(piece: str) -> None:
                for sink in sinks:
                    sink(piece)

            self._call.sink = fan_out

    def _subscribe_core(
        self, observer: abc.ObserverBase[str], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        if self._ended is True:
            observer.on_completed()
            return Disposable()
        if isinstance(self._ended, Exception):
            observer.on_error(self._ended)
            return Disposable()
        self._observers.append(observer)
        self._route()

        def remove() -> None:
            if observer in self._observers:
                self._observers.remove(observer)
                self._route()

        return Disposable(remove)

    def _collect(self, text: io.StringIO, on_completed: Callable[[], None]) -> None:
        # concat_arguments() attaches here without Rx's per-piece observer wrapper.
        self._observers.append(_Collector(text, on_completed))
        self._route()

    def _end(self, error: Exception | None = None) -> None:
        observers, self._observers = self._observers, []
        self._call.sink = _discard
        self._ended = error if error is not None else True
        for observer in observers:
            try:
                if error is None:
                    observer.on_completed()
                else:
                    observer.on_error(error)
            except BaseException as own:  # a subscriber's own: carried up as raised
                if isinstance(observer, _Collector):
                    raise
                raise SubscriberRaised(own) from None


def _carried(observer: abc.ObserverBase[str] | _Collector) -> Callable[[str], object]:
    """The sink for one inner observer; a subscriber's exception is carried up as raised."""
    if isinstance(observer, _Collector):
        return observer.on_next  # a buffer's write: it does not raise
    on_next = observer.on_next

    def sink(piece: str) -> None:
        try:
            on_next(piece)
        except BaseException as own:  # noqa: BLE001 - a subscriber's own: carried up as raised
            raise SubscriberRaised(own) from None

    return sink


def group_by_index(
    policy: Policy | PolicyName | None = None, *, wire: Wire | None = None
) -> Callable[[Observable[Chunk]], Observable[Grouped]]:
    """Split the chunk stream into one ``ToolCallGroup`` per tool call, then one ``StreamEnd``.

    ``Observable[Chunk] -> Observable[ToolCallGroup | StreamEnd]``. A group is emitted on the
    chunk that opens the call, keyed by its ``index`` (per choice); its elements are the
    argument fragments (``str``). Content, refusal, reasoning, finish reasons and usage are read in
    the same pass and emitted as the ``StreamEnd`` after every group has completed::

        chunks:  -c0--c1--c2--c3-|          (c0 opens call 0, c3 opens call 1)
        output:  -g0----------g1-(e,|)      g0: -"{"--"}"--|   e: StreamEnd

    Wire errors become ``MalformedChunkError``/``ProviderError``; a source error becomes
    ``StreamInterruptedError`` (cause kept); groups error with it. ``policy`` sets the wire
    recoveries and limits (default ``DEFAULT``). Cost: O(1) per fragment, one inner stream per
    call. For the whole turn use ``assemble()``.
    """
    chosen = resolve_policy(policy, None)
    forced = resolve_wire(wire)

    def make(observer: abc.ObserverBase[Grouped], fail: Fail) -> Stage[Chunk]:
        groups: list[ToolCallGroup] = []

        def on_open(call: Call) -> None:
            group = ToolCallGroup(call)
            groups.append(group)
            observer.on_next(group)

        # The pieces go to the groups, so the reader keeps none itself.
        reader = TurnReader(
            chosen, wire=forced, on_open=on_open, keep_arguments=False, on_error=fail
        )

        def on_completed() -> None:
            end = reader.end()
            for group in groups:
                group._end()
            observer.on_next(end)
            observer.on_completed()

        def on_error(error: Exception) -> None:
            for group in groups:
                group._end(error)

        # Not direct: on_open emits groups, and the groups' subscribers run inside feed.
        return Stage(reader.feed, on_completed, on_error)

    return lift(make)


def concat_arguments() -> Callable[[Observable[Grouped]], Observable[Joined]]:
    """Join each group's argument fragments into one ``ToolCallBuffer`` when the group completes.

    ``Observable[ToolCallGroup | StreamEnd] -> Observable[ToolCallBuffer | StreamEnd]``; never
    parses a fragment; ``StreamEnd`` passes through::

        input:   -g0----g1---(e,|)       g0: -"{"--"}"--|
        output:  ------------(b0,b1,e,|) b0: ToolCallBuffer(arguments="{}")

    Cost: one list append per fragment and one join per call.
    """

    def make(observer: abc.ObserverBase[Joined], _: Fail) -> Stage[Grouped]:
        def on_next(item: Grouped) -> None:
            if isinstance(item, StreamEnd):
                observer.on_next(item)
                return
            if not isinstance(item, ToolCallGroup):
                raise TypeError(
                    f"concat_arguments() takes the output of group_by_index(), got "
                    f"{type(item).__name__}"
                )
            call = item._call
            text = io.StringIO()

            def done() -> None:
                observer.on_next(call.buffer(text))

            item._collect(text, done)

        def on_completed() -> None:
            observer.on_completed()

        return Stage(on_next, on_completed)

    return lift(make)


def on_finish_reason(
    policy: Policy | PolicyName | None = None,
    *,
    require_finish_reason: bool | None = None,
    wire: Wire | None = None,
) -> Callable[[Observable[Joined]], Observable[Joined]]:
    """Apply the finish policy to each choice when its ``StreamEnd`` arrives; pass items on.

    ``Observable[ToolCallBuffer | StreamEnd] -> Observable[ToolCallBuffer | StreamEnd]``::

        input:   -(b0,e,|)   e.finish_reason == "tool_calls" or "stop"
        output:  -(b0,e,|)
        input:   -(b0,e,|)   e.finish_reason == "length"
        output:  -(b0,#)     TruncatedToolCallError

    Raises ``TruncatedToolCallError`` (``length`` with a call), ``ContentFilteredError``,
    ``ProviderError`` (``error``), and ``StreamInterruptedError`` when a choice has no
    finish_reason, unless ``require_finish_reason=False`` (for providers that never send one)
    or ``policy.accept_clean_end``; ``MalformedChunkError`` for ``tool_calls`` without a call.
    """
    chosen = resolve_policy(policy, require_finish_reason)
    forced = resolve_wire(wire)

    def make(observer: abc.ObserverBase[Joined], _: Fail) -> Stage[Joined]:
        buffers: list[ToolCallBuffer] = []

        def on_next(item: Joined) -> None:
            if isinstance(item, StreamEnd):
                _same_wire(item, forced)
                item = check_finish(item, buffers, chosen)
            else:
                buffers.append(item)
            observer.on_next(item)

        return Stage(on_next, observer.on_completed)

    return lift(make)


def _same_wire(end: StreamEnd, wire: Wire | None) -> None:
    if wire is not None and end.wire != wire:
        raise MalformedChunkError(
            f"the stream was read as {end.wire!r}, and this operator was told wire={wire!r}"
        )


def _atomic(
    observer: abc.ObserverBase[Any],
    emit: Callable[[tuple[AssistantTurn, ...]], Any],
    policy: Policy,
    wire: Wire | None = None,
) -> Stage[Joined]:
    buffers: list[ToolCallBuffer] = []
    end: list[StreamEnd] = []

    def on_next(item: Joined) -> None:
        if isinstance(item, StreamEnd):
            end.append(item)
        else:
            buffers.append(item)

    def on_completed() -> None:
        if not end:
            raise StreamInterruptedError(
                "the stream completed before its end was read; atomic_batch() takes the "
                "output of on_finish_reason()"
            )
        _same_wire(end[-1], wire)
        result = emit(build_turns(buffers, end[-1], policy))
        observer.on_next(result)
        observer.on_completed()

    return Stage(on_next, on_completed)


def atomic_batch(
    policy: Policy | PolicyName | None = None, *, wire: Wire | None = None
) -> Callable[[Observable[Joined]], Observable[AssistantTurn]]:
    """Emit the whole ``AssistantTurn`` once when the source completes, or one error.

    ``Observable[ToolCallBuffer | StreamEnd] -> Observable[AssistantTurn]``. Every buffer is
    parsed (once) before anything is emitted::

        input:   -b0--b1--(e,|)
        output:  ---------(t,|)      t.tool_calls == (call 0, call 1)
        input:   -b0--#
        output:  -----#              nothing emitted: ops.retry(n) is safe

    Raises ``InvalidArgumentsError`` or ``TruncatedToolCallError`` for arguments that are not
    one complete JSON object, ``MalformedChunkError`` for a call without name or id, and
    ``MultipleChoicesError`` for ``n>1`` (use ``atomic_choices()``); with ``policy``, also
    ``UnknownToolError`` and ``LimitExceededError`` (nesting depth).
    """
    chosen = resolve_policy(policy, None)
    forced = resolve_wire(wire)

    def make(observer: abc.ObserverBase[AssistantTurn], _: Fail) -> Stage[Joined]:
        return _atomic(observer, single_turn, chosen, forced)

    return lift(make)


def atomic_choices(
    policy: Policy | PolicyName | None = None, *, wire: Wire | None = None
) -> Callable[[Observable[Joined]], Observable[tuple[AssistantTurn, ...]]]:
    """Like ``atomic_batch()``, for ``n>1``: one tuple of turns, one per choice, by index."""
    chosen = resolve_policy(policy, None)
    forced = resolve_wire(wire)

    def make(observer: abc.ObserverBase[tuple[AssistantTurn, ...]], _: Fail) -> Stage[Joined]:
        return _atomic(observer, every_turn, chosen, forced)

    return lift(make)


def _fused(
    policy: Policy, emit: Callable[[tuple[AssistantTurn, ...]], Any], wire: Wire | None
) -> Callable[[Observable[Chunk]], Observable[Any]]:
    """The four operators as one stage: the same rules, one subscription, no inner streams."""

    def make(fail: Fail) -> Fold[Chunk, Any]:
        reader = TurnReader(policy, wire=wire, on_error=fail, announce=False)

        def last() -> Any:
            # Looked up at the close: a detecting reader changes its class on the first event.
            return emit(reader.close_choices())

        return reader.feed, last

    return fold(make)


def assemble(
    policy: Policy | PolicyName | None = None,
    *,
    require_finish_reason: bool | None = None,
    wire: Wire | None = None,
) -> Callable[[Observable[Chunk]], Observable[AssistantTurn]]:
    """Fold a chunk stream into exactly one ``AssistantTurn``, or one typed error.

    ``Observable[Chunk] -> Observable[AssistantTurn]``; the same notifications as
    ``pipe(group_by_index(), concat_arguments(), on_finish_reason(), atomic_batch())``, fused
    into one stage::

        chunks:  -c-c-c-c-c-|
        output:  -----------(t,|)

    >>> import reactivex
    >>> chunks = [{"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}]
    >>> reactivex.from_iterable(chunks).pipe(assemble()).run().content
    'Hi'

    ``policy`` (default ``DEFAULT``; ``LENIENT`` opts into every recovery) sets the rules;
    ``require_finish_reason`` overrides its switch of that name. Cost: O(1) per fragment;
    one copy and one ``json.loads`` per call at the end. Without Rx, use ``Assembler``; for
    ``n>1`` use ``assemble_choices()``.
    """
    return _fused(resolve_policy(policy, require_finish_reason), single_turn, resolve_wire(wire))


def assemble_choices(
    policy: Policy | PolicyName | None = None,
    *,
    require_finish_reason: bool | None = None,
    wire: Wire | None = None,
) -> Callable[[Observable[Chunk]], Observable[tuple[AssistantTurn, ...]]]:
    """Like ``assemble()`` for ``n>1`` streams: one tuple with a turn per choice, atomically."""
    return _fused(resolve_policy(policy, require_finish_reason), every_turn, resolve_wire(wire))


def progress(
    policy: Policy | PolicyName | None = None, *, wire: Wire | None = None
) -> Callable[[Observable[Chunk]], Observable[ToolCallStarted]]:
    """Emit a ``ToolCallStarted`` on the very chunk that carries a call's name.

    ``Observable[Chunk] -> Observable[ToolCallStarted]``; never partial arguments (fragments are
    dropped, so memory stays constant)::

        chunks:  -c0--c1--c2--c3-|       (c0 names call 0, c3 names call 1)
        output:  -s0----------s1-|       s1.count == 2

    Wire errors become ``MalformedChunkError``. For progress and the turn from one pass, use
    ``assemble_with_progress()``. To run it beside ``assemble()`` instead, publish the source
    and connect once both are subscribed (``ops.publish()`` then ``.connect()``): with
    ``ops.share()`` a synchronous source (a file, a sync SDK stream) is read to its end by the
    first subscriber, and the second sees nothing.
    """
    chosen = resolve_policy(policy, None)
    forced = resolve_wire(wire)

    def make(observer: abc.ObserverBase[ToolCallStarted], fail: Fail) -> Stage[Chunk]:
        reader = TurnReader(chosen, wire=forced, keep_arguments=False, on_error=fail)
        return Stage(reader.feed, observer.on_completed, direct=True, emits=True)

    return lift(make)


def assemble_with_progress(
    policy: Policy | PolicyName | None = None,
    *,
    require_finish_reason: bool | None = None,
    wire: Wire | None = None,
) -> Callable[[Observable[Chunk]], Observable[ToolCallStarted | AssistantTurn]]:
    """Progress and the turn from one subscription: each call's start as it is named, then the turn.

    ``Observable[Chunk] -> Observable[ToolCallStarted | AssistantTurn]``; the turn is always
    the last element, and comes with the completion (or one error instead, exactly as
    ``assemble()`` would raise; the starts already emitted are never calls to dispatch)::

        chunks:  -c0--c1--c2--c3-|       (c0 names call 0, c3 names call 1)
        output:  -s0----------s1-(t,|)   t: AssistantTurn

    >>> import reactivex
    >>> from reactivex import operators as ops
    >>> call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}
    >>> chunks = [{"choices": [{"delta": {"tool_calls": [call]}, "finish_reason": "stop"}]}]
    >>> items = reactivex.from_iterable(chunks).pipe(assemble_with_progress(), ops.to_list())
    >>> [type(item).__name__ for item in items.run()]
    ['ToolCallStarted', 'AssistantTurn']

    Works over any source, synchronous ones included (no sharing needed). Cost: that of
    ``assemble()`` plus one event per call.
    """
    chosen = resolve_policy(policy, require_finish_reason)
    forced = resolve_wire(wire)

    def make(
        observer: abc.ObserverBase[ToolCallStarted | AssistantTurn], fail: Fail
    ) -> Stage[Chunk]:
        reader = TurnReader(chosen, wire=forced, on_error=fail)

        def on_completed() -> None:
            observer.on_next(single_turn(reader.close_choices()))
            observer.on_completed()

        return Stage(reader.feed, on_completed, direct=True, emits=True)

    return lift(make)


CallEvent: TypeAlias = "ToolCallStarted | ToolCallProgress | ToolCallCommitted"
FieldEvent: TypeAlias = "ToolCallField | ToolCallText"


def _call_events(
    policy: Policy,
    wire: Wire | None,
    *,
    every: int | None,
    with_fields: bool,
    strings: bool,
    text: bool,
    commit: bool,
) -> Callable[[Observable[Chunk]], Observable[Any]]:
    """The stage of ``lifecycle()`` (``commit``) and of ``fields()`` (no starts, no commits).

    What a chunk completes follows its start events; the close validates the turn.
    """
    max_depth = policy.limits.max_depth

    def make(observer: abc.ObserverBase[Any], fail: Fail) -> Stage[Chunk]:
        # What a chunk completes, emitted after its start events.
        pending: list[object] = []

        def on_open(call: Call) -> None:
            if every is None:
                # fields(): each fragment kept and scanned, nothing counted.
                call.sink = keeping(call, watch_fields(call, pending, strings, max_depth))
                return
            count = 0
            left = every  # a countdown: one test a fragment, no division
            scan = watch_fields(call, pending, strings, max_depth) if with_fields else None

            def counting(piece: str) -> None:
                nonlocal count, left
                if scan is not None:
                    scan(piece)
                left -= 1
                if not left:
                    left = every
                    count += every
                    pending.append(
                        ToolCallProgress(
                            call.index,
                            call.id,
                            call.name,
                            call.size,
                            count,
                            call.choice_index,
                            call.text,
                        )
                    )

            call.sink = keeping(call, counting)

        def on_text(choice_index: int, kind: str, piece: str) -> None:
            pending.append(new_text_delta(piece, kind, choice_index))

        reader = TurnReader(
            policy,
            wire=wire,
            on_open=on_open,
            on_error=fail,
            announce=commit,
            on_text=on_text if text else None,
        )

        def on_completed() -> None:
            turns = reader.close_choices()
            if commit:
                for turn in turns:
                    for call in turn.tool_calls:
                        observer.on_next(ToolCallCommitted(call, turn.choice_index))
            observer.on_completed()

        def on_error(_: Exception) -> None:
            # Each sink holds its call, which holds the sink: a failed turn lets go of them
            # (a read one does so as it closes).
            for call in reader.calls():
                call.sink = None
                if call.fields is not None:
                    call.fields.stop()
                    call.fields = None

        return Stage(reader.feed, on_completed, on_error, direct=True, emits=True, pending=pending)

    return lift(make)


@overload
def lifecycle(
    policy: Policy | PolicyName | None = None,
    *,
    every: int = 64,
    wire: Wire | None = None,
    fields: Literal[False] = False,
    strings: Literal[False] = False,
    text: Literal[False] = False,
) -> Callable[[Observable[Chunk]], Observable[CallEvent]]: ...


@overload
def lifecycle(
    policy: Policy | PolicyName | None = None,
    *,
    every: int = 64,
    wire: Wire | None = None,
    fields: bool,
    strings: Literal[False] = False,
    text: Literal[False] = False,
) -> Callable[[Observable[Chunk]], Observable[CallEvent | ToolCallField]]: ...


@overload
def lifecycle(
    policy: Policy | PolicyName | None = None,
    *,
    every: int = 64,
    wire: Wire | None = None,
    fields: Literal[True],
    strings: bool,
    text: Literal[False] = False,
) -> Callable[[Observable[Chunk]], Observable[CallEvent | FieldEvent]]: ...


@overload
def lifecycle(
    policy: Policy | PolicyName | None = None,
    *,
    every: int = 64,
    wire: Wire | None = None,
    fields: bool = False,
    strings: bool = False,
    text: bool = False,
) -> Callable[[Observable[Chunk]], Observable[CallEvent | FieldEvent | TextDelta]]: ...


def lifecycle(
    policy: Policy | PolicyName | None = None,
    *,
    every: int = 64,
    wire: Wire | None = None,
    fields: bool = False,
    strings: bool = False,
    text: bool = False,
) -> Callable[[Observable[Chunk]], Observable[Any]]:
    """Per-call events for UIs: started, arguments progress, committed at the finish.

    ``Observable[Chunk] -> Observable[ToolCallStarted | ToolCallProgress | ToolCallCommitted]``.
    A ``ToolCallProgress`` comes every ``every`` argument fragments of a call (counts only); the
    ``ToolCallCommitted`` events come when the source completes and the whole turn validated,
    in call order — or one error instead, exactly as ``assemble()`` would raise::

        chunks:  -c0--c1-...-c64--|     (c0 names call 0)
        output:  -s0---------p0---(k0,|)

    ``fields=True`` adds the events of ``fields()`` (``strings=True`` its text events too),
    ``text=True`` a ``TextDelta`` for each fragment of the turn's prose (its answer, reasoning or
    refusal), interleaved in the order they happen, from the same subscription. Cost: one
    counter per fragment; the partial text is read only by ``partial_arguments()``; ``fields``
    adds the cost of ``fields()``.
    """
    if every < 1:
        raise ValueError("every must be at least 1")
    if strings and not fields:
        raise ValueError("strings=True adds to the field events: pass fields=True too")
    return _call_events(
        resolve_policy(policy, None),
        resolve_wire(wire),
        every=every,
        with_fields=fields,
        strings=strings,
        text=text,
        commit=True,
    )


@overload
def fields(
    policy: Policy | PolicyName | None = None,
    *,
    strings: Literal[False] = False,
    wire: Wire | None = None,
) -> Callable[[Observable[Chunk]], Observable[ToolCallField]]: ...


@overload
def fields(
    policy: Policy | PolicyName | None = None,
    *,
    strings: bool,
    wire: Wire | None = None,
) -> Callable[[Observable[Chunk]], Observable[ToolCallField | ToolCallText]]: ...


def fields(
    policy: Policy | PolicyName | None = None,
    *,
    strings: bool = False,
    wire: Wire | None = None,
) -> Callable[[Observable[Chunk]], Observable[Any]]:
    """Each value of each call's arguments the moment it is complete, never a half value.

    ``Observable[Chunk] -> Observable[ToolCallField]`` (``| ToolCallText`` with ``strings``).
    A string comes at its closing quote, a number once a delimiter follows it, ``true``,
    ``false`` and ``null`` when whole, an object or array when it closes: members before their
    container, in document order, the root ``()`` last. Each value is what the final parse
    gives at its path. The stream completes once the turn validated, or ends with the error
    ``assemble()`` would raise::

        chunks:  -c0------c1------c2-|      ('{"path": "a', 'pp.py", "n": 1', '2}')
        output:  ---------f1---------(f2,f0,|)   path, then n=12, then the root

    >>> import reactivex
    >>> from reactivex import operators as ops
    >>> fragments = ['{"path": "a', 'pp.py", "n": 1', "2}"]
    >>> chunks = [{"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c",
    ...     "function": {"name": "edit", "arguments": f}}]}}]} for f in fragments]
    >>> chunks.append({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
    >>> for event in reactivex.from_iterable(chunks).pipe(fields(), ops.to_list()).run():
    ...     print(event.path, event.value)
    ('path',) app.py
    ('n',) 12
    () {'path': 'app.py', 'n': 12}

    ``strings=True`` adds ``ToolCallText`` events: a string's decoded characters as each
    fragment brings them, before its field. A repeated key is reported each time; the object
    keeps the last, as ``json.loads`` does. The root field is not a commitment: dispatch on
    ``assemble()`` or ``lifecycle()``'s ``ToolCallCommitted``. Cost: linear in the argument
    text (string contents skipped in bulk), on top of ``assemble()``'s.
    """
    return _call_events(
        resolve_policy(policy, None),
        resolve_wire(wire),
        every=None,
        with_fields=True,
        strings=strings,
        text=False,
        commit=False,
    )
