#!/bin/sh
# `make e2e`: the end-to-end tests (tests/e2e, pytest -m e2e) against a real cluster.
#   RINGROUTE_E2E_KUBECONFIG set   that cluster, as it is.
#   else, the kit is there         the real-cluster kit (RINGROUTE_CLUSTER_KIT, default ../shared/cluster beside
#                                  this checkout): its `up.sh --volcano --nodes 3` (`--volcano=1.15` with
#                                  RINGROUTE_E2E_VOLCANO=1.15, for a state that has none yet) starts whatever of that cluster
#                                  is not running yet (state, ports and names from the RINGROUTE_CLUSTER_* settings
#                                  its README lists; defaults /tmp/ringroute-cluster, port 26443), then the tests
#                                  use its admin kubeconfig. The cluster stays up for the next run; the kit's
#                                  down.sh stops it.
#   else                           exit 2, saying what to set.
# Arguments go to pytest in place of the default `tests/e2e` (e.g. `sh tools/e2e.sh -s tests/e2e`). The kit's
# Volcano is the release its state recorded, else v1.7.0; tests that need HyperNodes (1.12+) skip on v1.7.0.
# `make test` never needs any of this: it deselects the e2e tests.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$root/.venv/bin/python}
kit=${RINGROUTE_CLUSTER_KIT:-$root/../shared/cluster}

if [ -z "${RINGROUTE_E2E_KUBECONFIG:-}" ]; then
    if [ ! -f "$kit/up.sh" ]; then
        echo "e2e: set RINGROUTE_E2E_KUBECONFIG to a test cluster's kubeconfig, or put the real-cluster kit at" \
            "$kit (RINGROUTE_CLUSTER_KIT names another place)" >&2
        exit 2
    fi
    volcano=--volcano${RINGROUTE_E2E_VOLCANO:+=$RINGROUTE_E2E_VOLCANO}
    echo "e2e: starting the real-cluster kit's cluster ($kit/up.sh $volcano --nodes 3)"
    bash "$kit/up.sh" "$volcano" --nodes 3
    RINGROUTE_E2E_KUBECONFIG=${RINGROUTE_CLUSTER_STATE:-/tmp/ringroute-cluster}/kubeconfig
    export RINGROUTE_E2E_KUBECONFIG
fi
echo "e2e: against the cluster of $RINGROUTE_E2E_KUBECONFIG"
cd "$root"
if [ $# -eq 0 ]; then
    set -- tests/e2e
fi
exec "$PY" -m pytest -m e2e "$@"
