#!/usr/bin/env bash
# CI's e2e run (.ci/run, after `make check`): `make e2e` on clusters of the real-cluster kit started for this run
# alone, once with Volcano v1.7.0 and once with v1.15.1 (HyperNodes: the tests that need them skip on v1.7.0), each
# with its own state directory, ports, bridge name and pod network (the first of four slots nothing on this machine
# uses, so a developer's cluster or another run's is never touched), wiped when its pass ends. Bounded by
# RINGROUTE_CI_E2E_TIMEOUT_S per pass (default 1200 s) within CI's 90 minutes; measured: about 35 s to start a
# cluster with three kubelet nodes (plus containerd's install on a fresh machine) and 1-3 minutes of tests.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${RINGROUTE_CLUSTER_KIT:-$PWD/../shared/cluster}

port_free() {  # port_free PORT: nothing listens on 127.0.0.1:PORT
    ! .venv/bin/python -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5)' \
        "$1" 2>/dev/null
}

pass_on() {  # pass_on RELEASE: one e2e pass on a fresh cluster with that Volcano release
    local release=$1 slot= base i
    for i in 0 1 2 3; do
        base=$((28000 + 100 * i))
        if port_free $((base + 443)) && port_free $((base + 379)) && ! ip link show "rrci${i}0" >/dev/null 2>&1; then
            slot=$i
            break
        fi
    done
    if [ -z "$slot" ]; then
        echo "ci-e2e: no free cluster slot (ports 28xxx-31xxx and bridges rrci0-3 are all in use)" >&2
        return 1
    fi
    base=$((28000 + 100 * slot))
    RINGROUTE_CLUSTER_STATE=$(mktemp -d /tmp/ringroute-ci-cluster.XXXXXX)
    export RINGROUTE_CLUSTER_STATE
    export RINGROUTE_CLUSTER_API_PORT=$((base + 443))
    export RINGROUTE_CLUSTER_VOLCANO_WEBHOOK_PORT=$((base + 444))
    export RINGROUTE_CLUSTER_VOLCANO_METRICS_PORT=$((base + 445))
    export RINGROUTE_CLUSTER_KCM_PORT=$((base + 446))
    export RINGROUTE_CLUSTER_KUBELET_PORT=$((base + 450))
    export RINGROUTE_CLUSTER_ETCD_PORT=$((base + 379))
    export RINGROUTE_CLUSTER_ETCD_PEER_PORT=$((base + 380))
    export RINGROUTE_CLUSTER_NAME=rrci$slot
    export RINGROUTE_CLUSTER_POD_NET=10.$((248 + slot))
    export RINGROUTE_E2E_VOLCANO=$release
    unset RINGROUTE_E2E_KUBECONFIG
    echo "ci-e2e: Volcano $release, cluster slot $slot, state $RINGROUTE_CLUSTER_STATE, API port $RINGROUTE_CLUSTER_API_PORT"
    local status=0
    # The cluster first, on its own: a machine the kit cannot run kubelets on (no root, no cgroup v1, no
    # containerd package) is not a failure of ringroute, so that pass is reported and skipped; once the cluster
    # runs, every test failure fails CI. RINGROUTE_CI_E2E_STRICT=1 fails CI on a cluster that will not start, too.
    if ! timeout "${RINGROUTE_CI_E2E_TIMEOUT_S:-1200}" bash "$kit/up.sh" "--volcano=$release" --nodes 3; then
        echo "ci-e2e: Volcano $release: the real-cluster kit could not start a cluster on this machine (see above);" \
            "this pass's e2e tests did not run" >&2
        wipe
        [ "${RINGROUTE_CI_E2E_STRICT:-0}" = 1 ] && return 1
        return 0
    fi
    RINGROUTE_E2E_KUBECONFIG=$RINGROUTE_CLUSTER_STATE/kubeconfig timeout "${RINGROUTE_CI_E2E_TIMEOUT_S:-1200}" \
        make e2e || status=$?
    wipe
    return $status
}

wipe() {
    # Only this pass's own state (down.sh reads the settings recorded in it), also when the run is stopped.
    if [ -n "${RINGROUTE_CLUSTER_STATE:-}" ] && [ -d "$RINGROUTE_CLUSTER_STATE" ]; then
        bash "$kit/down.sh" --wipe || echo "ci-e2e: down.sh --wipe of $RINGROUTE_CLUSTER_STATE failed" >&2
    fi
    unset RINGROUTE_CLUSTER_STATE
}
trap wipe EXIT

status=0
pass_on 1.7 || status=1
pass_on 1.15 || status=1
exit $status
