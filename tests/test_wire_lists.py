"""Docstrings that list the wires list them all: a new wire cannot leave one behind."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from typing import get_args

import pytest

import rxtoolcalls as rt

# Each wire as prose names it ("chat" -> "Chat"), from the Wire type itself.
TITLES = {wire: wire.capitalize() for wire in get_args(rt.Wire)}

# Paragraphs naming several wires on purpose, not a list of them all.
PER_WIRE = {
    # What differs per wire when answers are filled in; Chat and Responses need nothing more.
    "repair_transcript",
    # The block wires alone, which share one reader.
    "rxtoolcalls._blocks",
}


def documented() -> Iterator[tuple[str, str]]:
    for name in rt.__all__:
        value = getattr(rt, name)
        if doc := inspect.getdoc(value):
            yield name, doc
        if inspect.isclass(value) and value.__module__.startswith("rxtoolcalls"):
            for member, attribute in vars(value).items():
                if not member.startswith("_") and (doc := inspect.getdoc(attribute)):
                    yield f"{name}.{member}", doc
    for module in pkgutil.iter_modules(rt.__path__, "rxtoolcalls."):
        if module.name != "rxtoolcalls.__main__" and (
            doc := importlib.import_module(module.name).__doc__
        ):
            yield module.name, doc


def partial_lists(doc: str) -> list[str]:
    """Paragraphs (or list items) naming at least three wires but not all of them."""
    found = []
    for paragraph in re.split(r"\n\s*\n|\n\s*[-\d]+\.? ", doc):
        named = {w for w, title in TITLES.items() if re.search(rf"\b{title}\b", paragraph)}
        if 3 <= len(named) < len(TITLES):
            found.append(" ".join(paragraph.split()))
    return found


OWNERS = sorted({owner for owner, _ in documented()})


@pytest.mark.parametrize("owner", [o for o in OWNERS if o not in PER_WIRE])
def test_a_docstring_listing_wires_lists_every_wire(owner: str) -> None:
    partial = [p for o, doc in documented() if o == owner for p in partial_lists(doc)]
    assert partial == []


def test_the_exempt_names_still_exist() -> None:
    assert set(OWNERS) >= PER_WIRE
