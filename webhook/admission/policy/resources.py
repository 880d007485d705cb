"""NPU resource rules: requests equal limits, and a card count HCCL supports on this node type."""

from __future__ import annotations

from webhook.admission.jobview import ContainerView, JobView, parse_cards
from webhook.admission.policy.violation import Violation, render_value
from webhook.admission.quantity import card_count
from webhook.common.settings import Settings

REQUESTS_EQUAL_LIMITS = "npu-requests-equal-limits"
CARD_COUNT = "npu-card-count"


def _resource_field(container_field: str, where: str, resource: str) -> str:
    return f"{container_field}.resources.{where}[{resource}]"


def _differ(request: object, limit: object) -> bool:
    """Both are whole card counts and differ (a quantity that is not one is check_card_count's finding)."""
    requested, limited = parse_cards(request), parse_cards(limit)
    return requested is not None and limited is not None and requested != limited


def check_requests_equal_limits(job: JobView, _settings: Settings) -> list[Violation]:
    """NPU requests must equal limits (the device plugin allocates whole cards by limit)."""
    if job.profile is None:
        return []
    resource = job.profile.resource_name
    found: list[Violation] = []
    for task in job.tasks:
        for container in (*task.containers, *task.init_containers):
            if not container.is_npu:
                continue
            if container.npu_limit is None:
                found.append(
                    Violation(
                        _resource_field(container.field, "limits", resource),
                        "Required",
                        None,
                        f"{resource} is requested ({container.npu_request}) but has no limit; "
                        "set limits equal to requests",
                        REQUESTS_EQUAL_LIMITS,
                    )
                )
            elif container.npu_request is not None and _differ(container.npu_request, container.npu_limit):
                found.append(
                    Violation(
                        _resource_field(container.field, "limits", resource),
                        "Invalid",
                        container.npu_limit,
                        f"must equal requests ({container.npu_request}); "
                        "set requests and limits to the same card count",
                        REQUESTS_EQUAL_LIMITS,
                    )
                )
    return found


def _named(container: ContainerView) -> str:
    name = container.container.get("name")
    return f"container {render_value(name)}" if isinstance(name, str) and name else "this container"


def check_card_count(job: JobView, _settings: Settings) -> list[Violation]:
    """Each NPU quantity is a whole number of cards (as Kubernetes reads quantities: "8" and "8000m" are 8); each
    NPU pod takes an allowed number of cards, never more than a node has."""
    profile = job.profile
    if profile is None:
        return []
    allowed = ", ".join(str(c) for c in profile.allowed_cards)
    found: list[Violation] = []
    for task in job.tasks:
        for container in (*task.containers, *task.init_containers):
            if not container.is_npu:
                continue
            for where, quantity in (("requests", container.npu_request), ("limits", container.npu_limit)):
                count = card_count(quantity) if quantity is not None else None
                if isinstance(count, str):
                    found.append(
                        Violation(
                            _resource_field(container.field, where, profile.resource_name),
                            "Invalid",
                            quantity,
                            f"{_named(container)}: the card count {count}; request one of {allowed} per pod",
                            CARD_COUNT,
                        )
                    )
        npu = task.npu_containers
        if not npu:
            continue
        cards = task.cards_per_pod
        if cards is None or cards in profile.allowed_cards:
            continue
        first = npu[0]
        where = "limits" if first.npu_limit is not None else "requests"
        path = _resource_field(first.field, where, profile.resource_name)
        if len(npu) > 1:
            path = f"{task.field}.template.spec.containers"
        if cards > profile.cards_per_node:
            detail = (
                f"a {profile.label_value} node has {profile.cards_per_node} cards, a pod cannot take "
                f"{render_value(cards)}; request one of {allowed} per pod and raise replicas instead"
            )
        else:
            detail = f"a pod must take one of {allowed} cards (got {cards}); round to an allowed count"
        found.append(Violation(path, "Invalid", cards, detail, CARD_COUNT))
    return found


__all__ = ["CARD_COUNT", "REQUESTS_EQUAL_LIMITS", "check_card_count", "check_requests_equal_limits"]
