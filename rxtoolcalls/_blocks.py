"""Blocks keyed by index: the bookkeeping every wire with content blocks or items shares.

Anthropic content blocks, Bedrock content blocks and Responses output items are all the same
thing to the core: a block begins at an index (once), is filled by deltas (its text, and
pieces kept verbatim), and ends; a block that is a tool call opens a call at its index; the
message ends once, after which no event but the wire's trailing ones may come. The rules
live here once; a wire reader says how its events spell them.

1. A second begin at one index, and a delta or end for a block that had ended, are a
   ``MalformedChunkError``.
2. A block other than a call is charged to ``Limits.max_kept`` when it begins (a call's is
   bounded already: by ``Limits.max_calls``, its input by the argument limits).
3. A block's text is written to the choice's text too (``content``, ``reasoning``), within
   ``Limits.max_text``; pieces kept verbatim (signatures, citations) are joined once, at the
   end, never per piece.
4. A call block that ends with no input piece at all has ``{}`` (``Core.close_input``).
5. After the end of the message, an event is ``Core.after_end``'s error.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ._core import _NO_EVENTS, Call, Core, TextBuffer, _Choice
from ._errors import MalformedChunkError
from ._policy import DEFAULT, Policy
from ._types import CallItem, ToolCall, ToolCallStarted, new_call_item

__all__ = ["Block", "Blocks"]


class Block:
    """One block (or item) while the stream is open."""

    __slots__ = ("detail", "kept", "kind", "open", "texts")

    def __init__(self, kind: str, detail: dict[str, Any] | None = None) -> None:
        self.kind = kind
        # As the block began (or its final form, where the wire sends one).
        self.detail: dict[str, Any] = {} if detail is None else detail
        self.open = True
        # The block's text by part (one part on most wires; Responses has several).
        self.texts: dict[Hashable, TextBuffer] = {}
        # Pieces kept verbatim, by field, in order: joined or listed once at the end.
        self.kept: dict[str, list[Any]] = {}

    def text(self, part: Hashable = None) -> str:
        """The text written to ``part`` so far."""
        buffer = self.texts.get(part)
        return "" if buffer is None else buffer.getvalue()

    def has_text(self, part: Hashable = None) -> bool:
        """Whether any text came for ``part`` (an empty piece counts)."""
        return part in self.texts

    def keep(self, field: str, piece: Any) -> None:
        """Keep ``piece`` of ``field`` (a signature piece, a citation) for the end."""
        self.kept.setdefault(field, []).append(piece)

    def pieces(self, field: str) -> list[Any]:
        """The pieces of ``field`` kept so far, in order."""
        return self.kept.get(field, [])


class Blocks(Core):
    """A reader of one choice whose content comes in blocks keyed by index (rules 1-5)."""

    __slots__ = ("_blocks", "_ended")

    # What the wire calls the key of its blocks, for messages.
    block_noun = "block"

    def __init__(
        self,
        policy: Policy = DEFAULT,
        *,
        on_open: Callable[[Call], None] | None = None,
        keep_arguments: bool = True,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        super().__init__(policy, on_open=on_open, keep_arguments=keep_arguments, on_error=on_error)
        self._state(0)
        self._blocks: dict[int, Block] = {}
        # The event that ended the message, once it came.
        self._ended: str | None = None

    # -- blocks ----------------------------------------------------------------------------

    def begin(
        self, index: int, kind: str, detail: dict[str, Any] | None, what: str, *, call: bool
    ) -> Block:
        """Begin the block at ``index`` (rule 1), charged unless it is a call (rule 2)."""
        if index in self._blocks:
            raise MalformedChunkError(
                f"{what} for {self.block_noun} {index}, which was already started: an index "
                f"holds one block or item",
                index=index,
            )
        if not call and detail is not None:
            self.charge_kept(detail, f"{what} {index}", index)
        block = self._blocks[index] = Block(kind, detail)
        return block

    def block(self, index: int, what: str) -> Block | None:
        """The block at ``index``, ``None`` if none began; one that had ended is refused."""
        block = self._blocks.get(index)
        if block is not None and not block.open:
            raise MalformedChunkError(
                f"{what} for {self.block_noun} {index}, which had stopped", index=index
            )
        return block

    def implicit(self, index: int, kind: str, what: str) -> Block:
        """A block that a delta begins without a start (text on several wires).

        Charged to ``Limits.max_kept`` as a begun block is (rule 2): even an empty one takes
        room, so a stream of blocks without starts is bounded too.
        """
        self.charge_kept((index, kind), f"{what} for {self.block_noun} {index}", index)
        block = self._blocks[index] = Block(kind)
        return block

    def open_call(
        self,
        index: int,
        call_id: object,
        name: object,
        *,
        id_field: str,
        type_: str = "function",
        server: bool = False,
    ) -> tuple[Call, Sequence[ToolCallStarted]]:
        """Open the call a block at ``index`` holds; the start event, once its name is known."""
        state = self._choices[0]
        call = self._open(
            state,
            index,
            self._identity(state, index, id_field, call_id),
            type_,
            self._identity(state, index, "name", name),
            provisional=True,
        )
        call.closed = False
        call.server = server
        started = self._name_known(call, whole=True) if call.name is not None else None
        return call, (_NO_EVENTS if started is None else (started,))

    def write_text(
        self, block: Block, part: Hashable, slot: str | None, field: str, value: object
    ) -> None:
        """Append text to a block's ``part`` and to the choice's ``slot`` (rule 3).

        ``slot`` ``None``: the block's alone (the wire joins the choice's text at the end).
        """
        state: _Choice = self._choices[0]
        if slot is None:
            text = self._charge_text(state, field, value)
        else:
            self._write(state, slot, field, value)
            assert isinstance(value, str)  # _write refused anything else
            text = value
        buffer = block.texts.get(part)
        if buffer is None:
            buffer = block.texts[part] = TextBuffer()
        buffer.write(text)

    def end_block(self, index: int, block: Block, given_input: object, what: str) -> None:
        """End the block at ``index``; a call's input is closed (rule 4)."""
        block.open = False
        call = self._calls0.get(index)
        if call is not None:
            self.close_input(call, given_input, what)

    def end_message(self, end: str, outcome: str | None) -> None:
        """The message ended with the event ``end``; ``outcome`` is its finish in Chat terms."""
        self._ended = end
        self._fast = False  # every later event takes the full path, which refuses it
        if outcome is not None:
            self._choices[0].outcome = outcome

    def check_open(self, kind: object) -> None:
        """Refuse an event after the end of the message (rule 5)."""
        if self._ended is not None:
            raise self.after_end(kind, self._ended)

    # -- the end ---------------------------------------------------------------------------

    def render(self, index: int, block: Block) -> dict[str, Any] | None:
        """A block other than a call, as the turn's ``items`` keep it (``None``: left out)."""
        return block.detail

    def render_call(self, index: int, block: Block) -> Callable[[ToolCall], dict[str, Any]]:
        """How a call block is rendered once its call is built."""
        raise NotImplementedError

    def _settle(self) -> None:
        items: list[dict[str, Any] | CallItem] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if index in self._calls0:
                items.append(new_call_item(index, self.render_call(index, block)))
                continue
            item = self.render(index, block)
            if item is not None:
                items.append(item)
        self._choices[0].items = tuple(items)

    def _release(self) -> None:
        super()._release()
        self._blocks.clear()
