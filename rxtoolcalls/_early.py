"""Calls complete before their turn is: the ones a tool may start on (``agent_loop(early=)``).

Sans-IO: the reader's ``on_open`` hands each call to ``EarlyCalls.open``, and ``ready``, asked
after each event, returns the calls that became complete since. Rules:

1. A call is complete once its wire says its arguments are whole (``Call.whole``): Anthropic
   and Bedrock at the block's stop, Responses at ``function_call_arguments.done`` or the item's
   ``output_item.done``, Gemini at a whole ``functionCall`` part or the part that closes a
   streamed one. Chat Completions says it of no call (rule 2).
2. Chat Completions closes no call: there a call is complete once its argument text is one
   whole JSON object (the field scan, linear in the text) and the stream has moved past it,
   to another call (its opening or a fragment) or to the finish. A later fragment of its own (only
   whitespace keeps it whole) does not count as moving past it.
3. A complete call is reported only as the close would build it alone (``built_alone``):
   named, with an id, arguments that parse into an object within the limits and the declared
   schema. Otherwise it waits for the close, which gives the turn's typed error.
4. Only calls whose name is in ``names`` are reported, never a server-run call, each once.
   Nor a call whose id another call of its choice has: the close refuses the turn, or renames
   the repeat (``synthesize_missing_ids``), so the call it builds is not the one reported.

Nothing here commits anything: the turn is still all or nothing, decided by its close.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ._close import built_alone
from ._core import Call, Core, keeping
from ._fields import FieldPath, FieldScanner
from ._policy import Policy
from ._types import ToolCall

__all__ = ["EarlyCalls"]


class EarlyCalls:
    """The calls of one stream that are complete before its turn (rules 1-4)."""

    __slots__ = ("_names", "_passed", "_policy", "_scans", "_waiting", "_whole")

    def __init__(self, names: Collection[str], policy: Policy) -> None:
        self._names = names
        self._policy = policy
        # Opened, and neither reported nor ruled out yet.
        self._waiting: list[Call] = []
        # Chat: each watched call's scan, and the calls whose text is a whole object, before
        # and after the stream moved past them (rule 2).
        self._scans: dict[Call, FieldScanner] = {}
        self._whole: list[Call] = []
        self._passed: set[Call] = set()

    def open(self, call: Call, also: Callable[[str], None] | None = None) -> None:
        """Watch ``call`` (the reader's ``on_open``); ``also`` reads its fragments too."""
        self._waiting.append(call)
        if self._whole:
            # Another call opening moves the stream past every whole one (rule 2), even
            # when its first fragment is empty, as Chat's first one of a call usually is.
            self._passed.update(self._whole)
            self._whole.clear()

        def first(piece: str) -> None:
            if call.closed is not None:
                # The wire closes its calls (it set ``closed`` as the call opened): rule 1
                # needs no scan, and the rest of its fragments take the reader's own path.
                call.sink = None if also is None else keeping(call, also)
            else:
                scan = self._chat(call)
                call.sink = keeping(call, scan if also is None else _both(scan, also))
                scan(piece)
            if also is not None:
                also(piece)

        call.sink = keeping(call, first)

    def _chat(self, call: Call) -> Callable[[str], None]:
        """What reads each fragment of a Chat call (rule 2)."""
        scanner: FieldScanner | None = None
        if call.name is None or call.name in self._names:

            def on_field(path: FieldPath, _: object) -> None:
                if not path:
                    self._whole.append(call)

            scanner = self._scans[call] = FieldScanner(
                on_field, None, self._policy.limits.max_depth
            )
        whole = self._whole
        passed = self._passed

        def read(piece: str) -> None:
            if whole:
                # A fragment of this call moves the stream past every other whole one.
                for other in [c for c in whole if c is not call]:
                    whole.remove(other)
                    passed.add(other)
            if scanner is not None:
                scanner.feed(piece)

        return read

    def ready(self, reader: Core) -> list[tuple[ToolCall, bool]]:
        """The calls complete since the last ask, as built, each with whether its id is made up."""
        if not self._waiting:
            return []
        if self._whole and reader.finish_reason() is not None:
            self._passed.update(self._whole)
            self._whole.clear()
        found: list[tuple[ToolCall, bool]] = []
        waiting: list[Call] = []
        for call in self._waiting:
            name = call.name
            if name is None:
                waiting.append(call)
                continue
            if call.server or name not in self._names:
                self._scans.pop(call, None)
                continue
            if not call.whole:
                if call not in self._passed:
                    waiting.append(call)
                    continue
                if self._scans[call].dead:
                    continue  # text after the object: the close refuses the turn
            self._scans.pop(call, None)
            if call.id is not None and _id_repeated(call, reader):
                continue
            built = built_alone(call.buffer(), self._policy)
            if built is not None:
                found.append((built, call.made_up))
        self._waiting = waiting
        return found


def _both(first: Callable[[str], None], second: Callable[[str], None]) -> Callable[[str], None]:
    """One reader of fragments that passes each to ``first``, then ``second``."""

    def read(piece: str) -> None:
        first(piece)
        second(piece)

    return read


def _id_repeated(call: Call, reader: Core) -> bool:
    """Whether another call of ``call``'s choice has its id (asked once per complete call)."""
    return any(
        other is not call and other.choice_index == call.choice_index and other.id == call.id
        for other in reader.calls()
    )
