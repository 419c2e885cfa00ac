"""Session-wide test setup."""

from __future__ import annotations

import gc
import importlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze the heap built by imports and collection out of the cycle collector's walk.

    Every SDK's modules and thousands of collected tests are about half a million objects that live
    for the whole session. The tests that count cycles or free sockets (``garbage_of``, the
    dispose and open-stream tests) call ``gc.collect()``, which walked them all each time: most
    of the suite's time. Frozen (``gc.freeze``), they are left out of every collection; each
    still walks every object made since the session began, so a cycle a test leaves is found and
    counted unless it runs through an object from before (one the test would first have to cut
    loose from the module or test item holding it).
    """
    del session
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every doctest and notebook ``json_parser``: files cannot carry the mark in them.

    Many read captures through the chunk parser; the rest cost little to run again.
    """
    for item in items:
        if isinstance(item, pytest.DoctestItem) or item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.json_parser)


# Where rxtoolcalls parses JSON text, by module: ``_fast_decode`` is msgspec's (the fast extra).
_PARSERS = [
    ("rxtoolcalls._sse", "load_json"),
    ("rxtoolcalls._sse", "_fast_decode"),
    ("rxtoolcalls.sources", "load_json"),
    ("rxtoolcalls.wires.bedrock", "load_json"),
]


@pytest.fixture(autouse=True)
def _json_parser_is_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test not marked ``json_parser`` that parses JSON text in this process fails.

    CI runs only the marked tests with the fast extra, so a test whose outcome may depend on
    the parser must carry the mark. (A parse in a subprocess is not seen here.)
    """
    if request.node.get_closest_marker("json_parser") is not None:
        yield
        return
    parsed: list[str] = []
    kept: list[tuple[Any, str, Any]] = []
    for name, attribute in _PARSERS:
        module = importlib.import_module(name)
        original = getattr(module, attribute)
        if original is not None:
            kept.append((module, attribute, original))
            setattr(module, attribute, _noting(original, f"{name}.{attribute}", parsed))
    try:
        yield
    finally:
        for module, attribute, original in kept:
            setattr(module, attribute, original)
    if parsed:
        pytest.fail(
            f"parses JSON text ({parsed[0]}) but is not marked json_parser: add "
            "@pytest.mark.json_parser (CI runs the marked tests again with the fast extra)",
            pytrace=False,
        )


def _noting(parse: Callable[..., Any], name: str, parsed: list[str]) -> Callable[..., Any]:
    def noted(*args: Any, **kwargs: Any) -> Any:
        parsed.append(name)
        return parse(*args, **kwargs)

    return noted
