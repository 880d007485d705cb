"""Imported into a planning process by a test: every planning level there takes 50 ms (the budget's levels look up
`ring_order` and `plan_ranks` in `webhook.controller.graded_plan` when they run), so a short time limit stops each
one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from webhook.controller import graded_plan as budget

SLOW_S = 0.05


def _slowed(real: Callable[..., Any]) -> Callable[..., Any]:
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(SLOW_S)
        return real(*args, **kwargs)

    return slow


for name in ("ring_order", "plan_ranks"):
    setattr(budget, name, _slowed(getattr(budget, name)))
