"""Extender answers as each Volcano release's plugin and allocate action decode them
(`webhook.volcano_emulation.extender_answers`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webhook import volcano_emulation as volcano
from webhook.extender import volcano_releases as releases

RELEASES = releases.RELEASES


# ------------------------------------------------------------------------------------------------------ decoders


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("ignorable", [True, False])
@pytest.mark.parametrize("body", [volcano.UNIVERSAL_PREDICATE_PASS, b"{}", b"null", b'{"status": null}  trailing junk'])
def test_the_universal_pass_answers_pass_in_every_release(release: str, ignorable: bool, body: bytes) -> None:
    outcome = volcano.decode_predicate_response(release, body, ignorable)
    assert outcome.passes
    assert outcome.error is None


@pytest.mark.parametrize("release", RELEASES)
def test_the_hybrid_fail_answer_fails_everywhere_when_errors_are_not_ignorable(release: str) -> None:
    body = volcano.encode_predicate_fail_everywhere("node full")
    assert not volcano.decode_predicate_response(release, body, False).passes
    assert volcano.decode_predicate_response(release, body, True).passes == releases.release_at_least(release, "1.10")


def test_no_answer_fails_in_every_release_when_errors_are_ignorable() -> None:
    statuses: list[Any] = [None, "", "full", [], [None], [{"Code": 2, "Reason": "full"}], {"Code": 2}, 2]
    messages: list[Any] = [None, "", "full"]
    codes: list[Any] = [None, 0, 2]
    for status in statuses:
        for message in messages:
            for code in codes:
                body: dict[str, Any] = {}
                for key, value in (("status", status), ("errorMessage", message), ("code", code)):
                    if value is not None:
                        body[key] = value
                encoded = json.dumps(body).encode()
                failing = [not volcano.decode_predicate_response(r, encoded, True).passes for r in RELEASES]
                assert not all(failing), body


def test_v1_7_reads_only_error_message() -> None:
    fail = volcano.decode_predicate_response("1.7", b'{"errorMessage": "no NPUs", "status": "x", "code": 3}', False)
    assert (fail.passes, fail.code, fail.reason) == (False, None, "no NPUs")
    assert volcano.decode_predicate_response("1.7", b'{"status": "full", "code": 2}', False).passes


def test_v1_8_and_v1_9_fail_on_any_status_with_code_one_to_five_and_drop_its_reason() -> None:
    for code, passes in ((0, True), (1, False), (2, False), (3, False), (5, False), (6, True), (-1, True)):
        body = json.dumps({"status": [{"Code": code, "Reason": "full"}]}).encode()
        outcome = volcano.decode_predicate_response("1.8", body, False, task="ns/p-0", node="n1")
        assert outcome.passes is passes, code
        if not passes:
            assert outcome.code == code
            assert outcome.reason.endswith("for task <ns/p-0> on node <n1>, status is not success")
    assert volcano.decode_predicate_response("1.9", b'{"status": [null, {"Code": 0}]}', False).passes


def test_v1_10_and_later_turn_code_zero_into_error_and_ignore_codes_outside_one_to_five() -> None:
    zero = volcano.decode_predicate_response("1.10", b'{"status": "full", "code": 0}', False)
    assert (zero.passes, zero.code, zero.reason) == (False, 1, "full")
    three = volcano.decode_predicate_response("1.16", b'{"status": "no NPUs", "code": 3}', False)
    assert (three.passes, three.code) == (False, 3)
    assert volcano.decode_predicate_response("1.12", b'{"status": "full", "code": 7}', False).passes


def test_keys_match_case_insensitively_like_go() -> None:
    assert volcano.decode_predicate_response("1.10", b'{"Status": "full", "CODE": 2}', False).code == 2
    assert not volcano.decode_predicate_response("1.7", b'{"ERRORMESSAGE": "full"}', False).passes
    assert not volcano.decode_predicate_response("1.8", b'{"status": [{"code": 2, "reason": "x"}]}', False).passes


@pytest.mark.parametrize("release", RELEASES)
def test_a_list_where_a_string_is_expected_is_a_decode_error_handled_by_ignorable(release: str) -> None:
    body = b'{"status": [{"Code": 2, "Reason": "full"}]}'
    ignored = volcano.decode_predicate_response(release, body, True)
    strict = volcano.decode_predicate_response(release, body, False)
    if release in ("1.8", "1.9"):
        assert (ignored.passes, ignored.error) == (False, None)
    elif release == "1.7":
        assert (ignored.passes, strict.passes) == (True, True)  # an unknown key
    else:
        assert ignored.passes
        assert "cannot unmarshal array" in (ignored.error or "")
        assert (strict.passes, strict.code) == (False, 1)


@pytest.mark.parametrize(
    "body", [b"", b"   ", b'{"status": "x"', b"\xef\xbb\xbf{}", b"[]", b'"full"', b'{"code": 2.0, "status": ""}']
)
def test_empty_truncated_and_mistyped_bodies_are_errors(body: bytes) -> None:
    outcome = volcano.decode_predicate_response("1.12", body, True)
    assert outcome.passes
    assert outcome.error
    strict = volcano.decode_predicate_response("1.12", body, False)
    assert (strict.passes, strict.code) == (False, 1)


def test_a_string_code_is_a_type_error_while_a_null_status_is_a_no_op() -> None:
    assert volcano.decode_predicate_response("1.10", b'{"status": "x", "code": "2"}', True).error
    assert volcano.decode_predicate_response("1.10", b'{"status": null, "code": null}', False).passes


def test_non_200_answers_are_errors_whatever_the_body() -> None:
    outcome = volcano.decode_predicate_response("1.10", b"{}", False, http_status=500)
    assert not outcome.passes
    assert "code 500" in outcome.reason
    assert volcano.decode_predicate_response("1.10", b"{}", True, http_status=503).passes


def test_bodies_over_ten_mib_are_rejected_from_v1_12_only() -> None:
    body = b'{"pad": "' + b"a" * volcano.MAX_RESPONSE_BYTES + b'", "status": ""}'
    assert volcano.decode_predicate_response("1.11", body, False).passes
    outcome = volcano.decode_predicate_response("1.12", body, False)
    assert (outcome.passes, outcome.error) == (False, "http: request body too large")


@pytest.mark.parametrize("release", RELEASES)
def test_an_encoded_answer_is_read_back_by_its_release(release: str) -> None:
    assert volcano.decode_predicate_response(release, volcano.encode_predicate_answer(release), False).passes
    failed = volcano.decode_predicate_response(
        release, volcano.encode_predicate_answer(release, reason="full", code=3), False
    )
    assert not failed.passes
    if release not in ("1.8", "1.9"):
        assert failed.reason == "full"
    if release != "1.7":
        assert failed.code == 3


def test_a_failing_answer_needs_a_failing_code() -> None:
    with pytest.raises(ValueError, match="failing status code"):
        volcano.encode_predicate_answer("1.12", reason="full", code=0)
    with pytest.raises(ValueError, match="failing status code"):
        volcano.encode_predicate_fail_everywhere("full", code=6)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("ignorable", [True, False])
def test_a_null_or_missing_node_score_fails_the_prioritize_call_even_when_ignorable(
    release: str, ignorable: bool
) -> None:
    for body in (b'{"nodeScore": null, "errorMessage": ""}', b"{}", b'{"errorMessage": "busy", "nodeScore": {}}'):
        outcome = volcano.decode_prioritize_response(release, body, ignorable)
        assert outcome.effect == "call_failed"
        assert ("panics" in outcome.consequence) == (not releases.release_at_least(release, "1.12"))


def test_an_empty_node_score_map_is_no_preference_and_null_scores_count_as_zero() -> None:
    assert volcano.decode_prioritize_response("1.7", b'{"nodeScore": {}}', False).scores == {}
    scored = volcano.decode_prioritize_response("1.16", b'{"nodeScore": {"a": 90, "b": null, "c": 1.5e2}}', False)
    assert scored.effect == "scored"
    assert scored.scores == {"a": 90.0, "b": 0.0, "c": 150.0}


def test_duplicate_node_score_objects_merge_like_go_maps() -> None:
    body = b'{"nodeScore": {"a": 1, "b": 2}, "NodeScore": {"b": 5}}'
    assert volcano.decode_prioritize_response("1.12", body, False).scores == {"a": 1.0, "b": 5.0}


def test_a_string_score_is_a_send_error_that_ignorable_hides() -> None:
    body = b'{"nodeScore": {"a": "90"}}'
    assert volcano.decode_prioritize_response("1.12", body, True).effect == "ignored"
    assert volcano.decode_prioritize_response("1.12", body, False).effect == "call_failed"


def test_encoded_prioritize_answers_are_scored_by_every_release() -> None:
    body = volcano.encode_prioritize_answer({"n1": 100.0, "n2": 0.5})
    for release in RELEASES:
        assert volcano.decode_prioritize_response(release, body, False).scores == {"n1": 100.0, "n2": 0.5}


def test_event_answers_roll_back_on_error_message_or_unignored_errors() -> None:
    assert volcano.decode_event_handler_response("1.13", b'{"errorMessage": ""}', False).error is None
    assert volcano.decode_event_handler_response("1.13", b'{"errorMessage": "no plan"}', True).error == "no plan"
    assert volcano.decode_event_handler_response("1.14", b"[]", True).error is None
    assert volcano.decode_event_handler_response("1.14", b"[]", False).error
    # A message decoded before a later type error still counts.
    assert volcano.decode_event_handler_response("1.16", b'{"errorMessage": "x", "errorMessage": 1}', True).error == "x"
    with pytest.raises(ValueError, match=r"1\.13"):
        volcano.decode_event_handler_response("1.12", b"{}", True)


def test_a_failed_session_open_disables_the_extender_only_when_not_ignorable() -> None:
    assert volcano.on_session_open_outcome("1.7", 200, False) == "ok"
    assert "no predicate" in volcano.on_session_open_outcome("1.10", 500, False)
    assert "continues" in volcano.on_session_open_outcome("1.10", 500, True)


def test_the_answer_shape_table_names_three_predicate_shapes() -> None:
    shapes = {volcano.ANSWER_SHAPES[r]["predicate"] for r in RELEASES}
    assert len(shapes) == 3
    assert volcano.ANSWER_SHAPES["1.12"]["event"] == ""
    assert volcano.ANSWER_SHAPES["1.13"]["event"]
