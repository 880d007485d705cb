"""Volcano's scheduler, emulated: what `ringroute simulate-scheduling` runs the extender against.

Reproduced from volcano-sh/volcano at each release tag (`pkg/scheduler/actions/allocate`,
`pkg/scheduler/plugins/{extender,nodeorder,binpack,network-topology-aware}`, `pkg/scheduler/util`);
docs/volcano-extender-protocol.md gives the facts with their sources. None of it runs in the extender that serves
(`webhook.extender`, which never imports this package: an import-linter contract).

- `allocate_action`: the allocate action replayed call for call (sessions, resource fit before plugin predicates,
  the rotating node scan, prioritize, gang commit, allocate events; HyperNodes on v1.12-v1.15), driving the
  extender's `ExtenderService` with JSON bytes;
- `allocate_rules`: the action's rules on their own (`num_feasible_nodes_to_find`, the node scan, candidate lists,
  the predicate error cache, the best node), each with its source in `ALLOCATE_FACTS`;
- `extender_answers`: extender answers as each release's plugin and allocate action decode them, and answers
  encoded for them;
- `default_scores`: the default `nodeorder` and `binpack` scores;
- `network_topology`: the `network-topology-aware` plugin and the session's HyperNode view (v1.12-v1.15);
- `experiment`: the `simulate-scheduling` experiment (a fragmented cluster, a stream of jobs, leaves per job).

The requests Volcano sends, byte for byte (its Go structs and the Pod and Node objects inside them), are built by
the development-only `emulation.volcano_payloads`; each release's struct keys are the extender's own
`webhook.extender.volcano_releases`, read by both. Pure except `allocate_action` and `experiment`, which call the
extender in process: no I/O. Releases are named "1.7" ... "1.15" and "1.16" (master).
"""

from webhook.volcano_emulation.allocate_rules import (
    ALLOCATE_FACTS,
    Fact,
    candidate_lists,
    feasible_scan,
    num_feasible_nodes_to_find,
    predicate_error_cache_key,
    prioritize_called,
    select_best_node,
)
from webhook.volcano_emulation.default_scores import (
    BINPACK_DEFAULTS,
    IMAGE_LOCALITY_EFFECTIVE,
    NODEORDER_WEIGHTS,
    ScoreSpread,
    ScoringInput,
    balanced_allocation_score,
    binpack_score,
    default_node_scores,
    image_locality_score,
    least_allocated_score,
    max_score_spread,
)
from webhook.volcano_emulation.extender_answers import (
    ANSWER_SHAPES,
    MAX_RESPONSE_BYTES,
    UNIVERSAL_PREDICATE_PASS,
    EventOutcome,
    PredicateOutcome,
    PrioritizeOutcome,
    decode_event_handler_response,
    decode_predicate_response,
    decode_prioritize_response,
    encode_predicate_answer,
    encode_predicate_fail_everywhere,
    encode_prioritize_answer,
    on_session_open_outcome,
)

__all__ = [
    "ALLOCATE_FACTS",
    "ANSWER_SHAPES",
    "BINPACK_DEFAULTS",
    "EventOutcome",
    "Fact",
    "IMAGE_LOCALITY_EFFECTIVE",
    "MAX_RESPONSE_BYTES",
    "NODEORDER_WEIGHTS",
    "PredicateOutcome",
    "PrioritizeOutcome",
    "ScoreSpread",
    "ScoringInput",
    "UNIVERSAL_PREDICATE_PASS",
    "balanced_allocation_score",
    "binpack_score",
    "candidate_lists",
    "decode_event_handler_response",
    "decode_predicate_response",
    "decode_prioritize_response",
    "default_node_scores",
    "encode_predicate_answer",
    "encode_predicate_fail_everywhere",
    "encode_prioritize_answer",
    "feasible_scan",
    "image_locality_score",
    "least_allocated_score",
    "max_score_spread",
    "num_feasible_nodes_to_find",
    "on_session_open_outcome",
    "predicate_error_cache_key",
    "prioritize_called",
    "select_best_node",
]
