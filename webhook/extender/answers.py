"""Answers in the shape the configured Volcano release decodes.

Volcano's extender plugin changed its predicate response twice (volcano-sh/volcano
`pkg/scheduler/plugins/extender/argument.go`): 1.7 reads `{"errorMessage": str}`, 1.8 and 1.9 read
`{"status": [api.Status]}` (fields `Code`, `Reason`), 1.10 and later read `{"status": str, "code": int}`. Go's
decoder ignores unknown keys and leaves a field alone for `null`, so one "fits" answer reads as a pass on every
release; a refusal cannot: 1.8/1.9 need a list under `status` where 1.10+ need a string. Without a configured
release the extender answers refusals in the 1.10+ shape with `errorMessage` added for 1.7; Volcano 1.8/1.9 then
fail to decode it, which `extender.ignorable: true` turns into a pass (set `volcano.version` there).
"""

from __future__ import annotations

from webhook.common.settings import Settings, volcano_release
from webhook.extender.scoring import Verdict
from webhook.extender.wire import CODE_ERROR, CODE_SUCCESS, PredicateAnswer18, PredicateAnswer110

Release = tuple[int, int]

FIRST_STATUS_LIST = (1, 8)
"""First release whose predicate answer is a list of statuses."""
FIRST_STATUS_STRING = (1, 10)
"""First release whose predicate answer is `{"status": str, "code": int}`."""


def configured_release(settings: Settings) -> Release | None:
    """The release `volcano.version` names; None for auto."""
    version = settings.volcano.version
    return None if version == "auto" else volcano_release(version)


def predicate_answer(verdict: Verdict, release: Release | None) -> PredicateAnswer110 | PredicateAnswer18:
    """The predicate answer for `verdict` as `release` decodes it (None: the answer every release reads as a
    pass, and refusals in the 1.10+ shape that 1.7 reads too)."""
    if release is not None and FIRST_STATUS_LIST <= release < FIRST_STATUS_STRING:
        if verdict.passes:
            return {"status": None, "errorMessage": ""}
        return {"status": [{"Code": verdict.code, "Reason": verdict.reason}], "errorMessage": verdict.reason}
    if verdict.passes:
        return {"status": None, "code": CODE_SUCCESS, "errorMessage": ""}
    # A message with code 0 reads as a pass on 1.7's errorMessage-less peers; never send one.
    code = verdict.code if verdict.code != CODE_SUCCESS else CODE_ERROR
    return {"status": verdict.reason, "code": code, "errorMessage": verdict.reason}


__all__ = ["FIRST_STATUS_LIST", "FIRST_STATUS_STRING", "Release", "configured_release", "predicate_answer"]
