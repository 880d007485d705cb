"""The Volcano release a request comes from, told from its keys (`webhook.extender.release_detection`)."""

from __future__ import annotations

import json

import pytest

from emulation import volcano_payloads as payloads
from tests.support.volcano_payloads import busy_node, pending_task, small_cluster
from webhook.extender import volcano_releases as releases
from webhook.extender.release_detection import detect_release_range

RELEASES = releases.RELEASES


# ----------------------------------------------------------------------------------------------- release detection


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        ("1.7", ("1.7", "1.7")),
        ("1.8", ("1.8", "1.8")),
        ("1.9", ("1.9", "1.9")),
        ("1.10", ("1.10", "1.11")),
        ("1.11", ("1.11", "1.11")),
        ("1.12", ("1.12", "1.13")),
        ("1.13", ("1.13", "1.13")),
        ("1.14", ("1.14", "1.14")),
        ("1.15", ("1.15", "1.15")),
        ("1.16", ("1.16", "1.16")),
    ],
)
def test_a_predicate_request_tells_its_release_range(release: str, expected: tuple[str, str]) -> None:
    request = payloads.predicate_request(pending_task(release), busy_node(release))
    assert detect_release_range(request) == expected
    as_json = json.loads(payloads.go_json(request, release))
    assert detect_release_range(as_json) == expected


@pytest.mark.parametrize("release", RELEASES)
def test_a_prioritize_request_tells_the_same_range_as_a_predicate_request(release: str) -> None:
    task, node = pending_task(release), busy_node(release)
    assert detect_release_range(payloads.prioritize_request(task, [node, node])) == detect_release_range(
        payloads.predicate_request(task, node)
    )


def test_the_coarse_ranges_are_unambiguous_from_a_prioritize_request() -> None:
    def coarse(release: str) -> str:
        found = detect_release_range(payloads.prioritize_request(pending_task(release), [busy_node(release)]))
        assert found
        low, high = found
        if high == "1.7":
            return "<1.8"
        if releases.release_at_least(low, "1.8") and not releases.release_at_least(high, "1.10"):
            return "1.8-1.9"
        assert releases.release_at_least(low, "1.10")
        return ">=1.10"

    assert [coarse(r) for r in RELEASES] == ["<1.8", "1.8-1.9", "1.8-1.9"] + [">=1.10"] * 7


def test_onsessionopen_separates_v1_12_from_v1_13_by_the_queue_spec() -> None:
    assert detect_release_range(small_cluster("1.12").on_session_open_request()) == ("1.12", "1.12")
    assert detect_release_range(small_cluster("1.13").on_session_open_request()) == ("1.13", "1.13")


def test_an_event_request_is_at_least_v1_13() -> None:
    request = payloads.event_handler_request(pending_task("1.13"), release="1.13")
    assert detect_release_range(request) == ("1.13", "1.14")  # TaskInfo is the same in 1.12 - 1.14
    assert detect_release_range({"task": pending_task("1.9")}) is None


def test_requests_that_no_release_sends_are_not_recognised() -> None:
    assert detect_release_range({"pod": {}, "nodes": []}) is None
    assert detect_release_range({"task": {"name": "x"}, "node": {"name": "n"}}) is None
    mixed = payloads.predicate_request(pending_task("1.7"), busy_node("1.16"))
    assert detect_release_range(mixed) is None
