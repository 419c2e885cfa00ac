"""Session-wide test setup."""

from __future__ import annotations

import gc

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze the heap built by imports and collection out of the cycle collector's walk.

    Every SDK's modules and thousands of collected tests are about half a million objects that live
    for the whole session. The tests that count cycles or free sockets (``garbage_of``, the
    dispose and open-stream tests) call ``gc.collect()``, which walked them all each time: most
    of the suite's time. Frozen (``gc.freeze``), they are left out of every collection; each
    still walks every object made since the session began, so every cycle a test can leave is
    still found and counted.
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
