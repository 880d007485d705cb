#!/bin/sh
# ringroute launcher: wait for the completed rank table, export this pod's routed node rank, run the command.
# Usage (the webhook writes this into route-planned containers):
#   /bin/sh <mount>/ringroute-launcher.sh -- command [args...]
# POSIX sh only: training images need no Python, bash or jq. The table is machine-written JSON with a fixed
# layout, so sed/awk read it after whitespace is removed.
set -u

prog=ringroute-launcher
mount_dir=$(dirname "$0")
table=${RANK_TABLE_FILE:-$mount_dir/jobstart_hccl.json}
table_dir=$(dirname "$table")
ranks_file=${RINGROUTE_RANKS_FILE:-$table_dir/ranks.env}
timeout=${RINGROUTE_LAUNCHER_TIMEOUT:-@RINGROUTE_LAUNCHER_TIMEOUT@}
interval=${RINGROUTE_LAUNCHER_POLL:-1}

fail() {
    echo "$prog: $*" >&2
    exit 1
}

if [ "${1:-}" = "--" ]; then
    shift
fi
if [ $# -eq 0 ]; then
    echo "$prog: no command given; usage: $0 -- command [args...]" >&2
    exit 2
fi
case $timeout in
    '' | *[!0-9]*) fail "RINGROUTE_LAUNCHER_TIMEOUT must be a whole number of seconds (got '$timeout')" ;;
esac
case $interval in
    '' | *[!0-9]* | 0) fail "RINGROUTE_LAUNCHER_POLL must be a positive whole number of seconds (got '$interval')" ;;
esac
if [ -z "${POD_NAME:-}" ]; then
    fail "POD_NAME is not set; add env POD_NAME from fieldRef metadata.name (the ringroute webhook injects it)"
fi

# The table without whitespace, on one line (values never contain spaces).
compact() {
    tr -d ' \t\r\n' <"$1" 2>/dev/null
}

table_status() {
    compact "$table" | sed -n 's/^{"status":"\([a-z]*\)".*/\1/p'
}

node_rank() {
    awk -F= -v pod="$POD_NAME" '$1 == pod { print $2; exit }' "$ranks_file" 2>/dev/null
}

# Print the text of the first server_list entry (the rank-0 server).
first_server() {
    compact "$1" | awk '{
        start = index($0, "\"server_list\":[{")
        if (start == 0) exit
        text = substr($0, start + 15)
        depth = 0
        for (i = 1; i <= length(text); i++) {
            c = substr(text, i, 1)
            if (c == "{" || c == "[") depth++
            else if (c == "}" || c == "]") depth--
            if (depth == 0) { print substr(text, 1, i); exit }
        }
    }'
}

# A top-level string field of the rank-0 server entry (device entries are cut out first).
server_field() {
    printf '%s\n' "$1" | sed 's/"device":\[[^]]*\]//' | sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p"
}

# The completed table as the command gets it: sets $effective (a table too large for a ConfigMap is stored
# gzip-compressed next to the status file), $server_count, $master (the rank-0 entry) and $master_addr.
read_table() {
    effective=$table
    if [ -f "$table.gz" ] && ! compact "$table" | grep -q '"server_list"'; then
        work_dir=${RINGROUTE_WORK_DIR:-${TMPDIR:-/tmp}}
        gzip -dc <"$table.gz" >"$work_dir/jobstart_hccl.json" || fail "cannot decompress $table.gz into $work_dir"
        effective=$work_dir/jobstart_hccl.json
    fi
    server_count=$(compact "$effective" | sed -n 's/.*"server_count":"\([0-9]*\)".*/\1/p')
    master=$(first_server "$effective")
    # Only the rank-0 pod's own IP: its node's IP reaches nothing on the pod network. ringroute writes the
    # node's IP here for hostNetwork pods, whose pod IP it is.
    master_addr=$(server_field "$master" container_ip)
}

waited=0
status=
rank=
server_count=
master_addr=
while :; do
    status=$(table_status)
    rank=
    master_addr=
    if [ "$status" = completed ]; then
        rank=$(node_rank)
        if [ -n "$rank" ]; then
            read_table
            if [ -n "$server_count" ] && [ -n "$master_addr" ]; then
                break
            fi
        fi
    fi
    if [ "$waited" -ge "$timeout" ]; then
        if [ "$status" != completed ]; then
            fail "rank table $table still says status '${status:-unreadable}' after ${timeout}s; check the RankTablePending events of the job (kubectl describe vcjob) or raise RINGROUTE_LAUNCHER_TIMEOUT"
        fi
        if [ -z "$rank" ]; then
            fail "rank table is completed but $ranks_file has no entry for pod $POD_NAME after ${timeout}s; the table was planned for other pods, check the job's RankTable events"
        fi
        if [ -z "$server_count" ]; then
            fail "rank table $effective is completed but has no server_count after ${timeout}s; the ConfigMap was edited by hand?"
        fi
        fail "rank table $effective is completed but its rank-0 server ($(server_field "$master" server_id)) has no container_ip after ${timeout}s; MASTER_ADDR must be the rank-0 pod's IP and the node's IP reaches no pod-network pod, so none is guessed. ringroute writes container_ip once the pod has its IP: check the job's RankTable events; a table written by hand or by an older release needs it"
    fi
    sleep "$interval"
    waited=$((waited + interval))
done

case $rank in
    *[!0-9]*) fail "$ranks_file: node rank of pod $POD_NAME is not a number: '$rank'" ;;
esac
table=$effective

# Per-queue-pair UDP source ports, written with the table when ringroute steers (or spreads) the queue pairs of
# cross-leaf connections: HCCL reads $HCCL_RDMA_QP_PORT_CONFIG_PATH/MultiQpSrcPort.cfg once, at communicator init.
qp_dir=
if [ -f "$table_dir/MultiQpSrcPort.cfg.gz" ]; then
    qp_dir=${RINGROUTE_WORK_DIR:-${TMPDIR:-/tmp}}/ringroute-qp-ports
    mkdir -p "$qp_dir" && gzip -dc <"$table_dir/MultiQpSrcPort.cfg.gz" >"$qp_dir/MultiQpSrcPort.cfg" ||
        fail "cannot decompress $table_dir/MultiQpSrcPort.cfg.gz into $qp_dir"
elif [ -f "$table_dir/MultiQpSrcPort.cfg" ]; then
    qp_dir=$table_dir
fi
if [ -n "$qp_dir" ]; then
    if [ -n "${HCCL_RDMA_QP_PORT_CONFIG_PATH:-}" ] && [ "$HCCL_RDMA_QP_PORT_CONFIG_PATH" != "$qp_dir" ]; then
        echo "$prog: HCCL_RDMA_QP_PORT_CONFIG_PATH=$HCCL_RDMA_QP_PORT_CONFIG_PATH is set by the job and kept; ringroute's source ports in $qp_dir/MultiQpSrcPort.cfg are not used" >&2
    else
        HCCL_RDMA_QP_PORT_CONFIG_PATH=$qp_dir
        export HCCL_RDMA_QP_PORT_CONFIG_PATH
    fi
fi

RANK_AFTER_ACC=$rank
NODE_RANK=$rank
MASTER_ADDR=$master_addr
WORLD_SIZE=$server_count
RANK_TABLE_FILE=$table
export RANK_AFTER_ACC NODE_RANK MASTER_ADDR WORLD_SIZE RANK_TABLE_FILE
echo "$prog: pod $POD_NAME node rank $NODE_RANK of $WORLD_SIZE, master $MASTER_ADDR${qp_dir:+, queue-pair source ports in $qp_dir}" >&2
exec "$@"
