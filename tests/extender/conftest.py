"""The extender's onSessionOpen endpoint freezes what is alive after it (the session's state) out of the cyclic
collector; in the test process that would keep every later test's cyclic garbage alive, so thaw after each test."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def thawed_collector() -> Iterator[None]:
    yield
    gc.unfreeze()
