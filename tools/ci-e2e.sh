#!/usr/bin/env bash
# CI's e2e run (.ci/run, after `make check`): `make e2e` on a cluster of the real-cluster kit started for this run
# alone, with its own state directory, ports, bridge name and pod network (the first of four slots nothing on
# this machine uses, so a developer's cluster or another run's is never touched), wiped when the run ends.
# Bounded by RINGROUTE_CI_E2E_TIMEOUT_S (default 1500 s) within CI's 90 minutes; measured: about 1 min to
# start the cluster (plus containerd's install on a fresh machine) and about 1 min of tests.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${RINGROUTE_CLUSTER_KIT:-$PWD/../shared/cluster}

port_free() {  # port_free PORT: nothing listens on 127.0.0.1:PORT
    ! .venv/bin/python -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5)' \
        "$1" 2>/dev/null
}

slot=
for i in 0 1 2 3; do
    base=$((28000 + 100 * i))
    if port_free $((base + 443)) && port_free $((base + 379)) && ! ip link show "rrci${i}0" >/dev/null 2>&1; then
        slot=$i
        break
    fi
done
if [ -z "$slot" ]; then
    echo "ci-e2e: no free cluster slot (ports 28xxx-31xxx and bridges rrci0-3 are all in use)" >&2
    exit 1
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
unset RINGROUTE_E2E_KUBECONFIG

wipe() {
    # Only this run's own state: down.sh reads the settings recorded in it.
    bash "$kit/down.sh" --wipe || echo "ci-e2e: down.sh --wipe of $RINGROUTE_CLUSTER_STATE failed" >&2
}
trap wipe EXIT
echo "ci-e2e: cluster slot $slot, state $RINGROUTE_CLUSTER_STATE, API port $RINGROUTE_CLUSTER_API_PORT"
timeout "${RINGROUTE_CI_E2E_TIMEOUT_S:-1500}" make e2e
