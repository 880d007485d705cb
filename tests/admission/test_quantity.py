"""NPU counts are read as Kubernetes reads quantities: ASCII only, `8` and `8000m` are 8, anything else is a field
error naming the container and the value; no quantity makes admission answer 500 or skip its additions."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.admission import Service, bare_job, mutate, patch_of, review
from webhook.admission.policy import judge
from webhook.admission.quantity import MAX_QUANTITY_CHARS, card_count, parse_quantity, quantity_problem
from webhook.common.settings import Settings

NPU = "huawei.com/ascend-1980"
LIMIT_PATH = "spec.tasks[0].template.spec.containers[0].resources.limits[huawei.com/ascend-1980]"


def with_limit(quantity: Any) -> dict[str, Any]:
    job = bare_job()
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"][NPU] = quantity
    return job


@pytest.mark.parametrize("quantity", ["8", 8, 8.0, "8000m", "8e0", "0.008k", "+8", " 8 ", "8.", "80e-1"])
def test_whole_card_counts_in_any_kubernetes_spelling_are_admitted(quantity: Any) -> None:
    assert card_count(quantity) == 8
    assert judge(with_limit(quantity), None, Settings()).denials == ()


@pytest.mark.parametrize(
    ("quantity", "problem"),
    [
        ("²", "is not a Kubernetes quantity"),
        ("٨", "is not a Kubernetes quantity"),
        ("８", "is not a Kubernetes quantity"),
        ("8 cards", "is not a Kubernetes quantity"),
        ("\x1c8", "is not a Kubernetes quantity"),
        ("", "is not a Kubernetes quantity"),
        ("m", "is not a Kubernetes quantity"),
        ("8.5", "must be a whole number"),
        ("500m", "must be a whole number"),
        (0.5, "must be a whole number"),
        ("-8", "must not be negative"),
        ("8" * 5000, "is 5,000 characters long"),
        ("1e99999", "has an exponent beyond 1000"),
        (True, "must be a quantity"),
        ([8], "must be a quantity"),
        ({"value": 8}, "must be a quantity"),
    ],
)
def test_a_quantity_that_is_not_a_whole_card_count_is_a_field_error_naming_container_and_value(
    quantity: Any, problem: str
) -> None:
    verdict = judge(with_limit(quantity), None, Settings())
    [denial] = verdict.denials
    assert denial.path == LIMIT_PATH
    assert denial.reason == "Invalid"
    message = denial.render()
    assert f'container "train": the card count {problem}' in message
    assert len(message) < 600, "a long value is cut, not echoed"


def test_a_huge_whole_count_is_denied_as_more_than_a_node_has() -> None:
    [denial] = judge(with_limit("1e400"), None, Settings()).denials
    assert denial.render() == (
        f"{LIMIT_PATH}: Invalid value: a number of about 401 digits: a ascend-1980 node has 8 cards, a pod cannot "
        "take a number of about 401 digits; request one of 1, 2, 4, 8 per pod and raise replicas instead"
    )


def test_requests_and_limits_in_different_spellings_of_the_same_count_are_equal() -> None:
    job = with_limit("8")
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"] = {NPU: "8000m"}
    assert judge(job, None, Settings()).denials == ()


def test_a_malformed_request_is_named_even_when_the_limit_is_fine() -> None:
    job = with_limit("8")
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"] = {NPU: "²"}
    [denial] = judge(job, None, Settings()).denials
    assert denial.path == LIMIT_PATH.replace("limits", "requests")


@pytest.mark.parametrize("quantity", ["²", "٨", "8" * 5000, "8.5", "-1", "1e99999", [], None])
def test_mutation_adds_everything_whatever_the_quantity(quantity: Any) -> None:
    reference = mutate(with_limit("8"), Settings())
    assert mutate(with_limit(quantity), Settings()) == reference or quantity is None


@pytest.mark.parametrize("quantity", ["²", "8" * 5000, "1e99999"])
async def test_the_server_denies_a_bad_count_with_422_and_still_patches_on_mutate(
    service: Service, quantity: str
) -> None:
    status, answer = await service.post("/jobs/validate", review(with_limit(quantity)))
    assert status == 200
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["code"] == 422
    status, answer = await service.post("/jobs/mutate", review(with_limit(quantity)))
    assert status == 200
    assert answer["response"]["allowed"] is True
    assert len(patch_of(answer)) > 3, "the additions are not skipped"
    page = service.metrics.registry.get_sample_value
    assert page("ringroute_admission_requests_total", {"endpoint": "validate", "verdict": "error"}) is None
    assert page("ringroute_admission_requests_total", {"endpoint": "mutate", "verdict": "error"}) is None


# -- the grammar, against an independent reading of Kubernetes' rules -------------------------------------------------

_REFERENCE = re.compile(
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)((Ki|Mi|Gi|Ti|Pi|Ei)|[numkMGTPE]|[eE][+-]?[0-9]+)?$", re.ASCII
)
"""The Volcano Job CRD's quantity pattern without its fractional exponents, which ParseQuantity refuses."""

quantity_text = st.text(alphabet="0123456789.+-eEmkKMGTPin ²٨ ", max_size=12) | st.from_regex(
    _REFERENCE, fullmatch=True
)


@settings(max_examples=400)
@given(text=quantity_text)
def test_quantities_are_exactly_what_the_kubernetes_grammar_accepts(text: str) -> None:
    stripped = text.strip(" \xa0")  # Go trims Unicode spaces, the no-break space among them
    accepted = quantity_problem(text) is None
    if len(stripped) <= MAX_QUANTITY_CHARS and not re.search(r"[eE][+-]?0*[0-9]{4,}", stripped):
        assert accepted == bool(_REFERENCE.match(stripped)), text


@settings(max_examples=300)
@given(whole=st.integers(0, 10**30), milli=st.booleans())
def test_every_whole_count_reads_back_exactly(whole: int, milli: bool) -> None:
    text = f"{whole * 1000}m" if milli else str(whole)
    assert card_count(text) == whole
    assert parse_quantity(text) == Fraction(whole)


@settings(max_examples=300)
@given(value=st.text(max_size=40) | st.integers() | st.floats() | st.none() | st.booleans())
def test_no_value_makes_the_parser_raise(value: Any) -> None:
    count = card_count(value)
    assert isinstance(count, int | str)
    if isinstance(count, int):
        assert count >= 0
