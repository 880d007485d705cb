#!/bin/sh
# ringroute launcher: wait for the completed rank table, export this pod's routed node rank, hand HCCL the source-port
# file and say whether HCCL will use it, run the command.
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
# Where the NPUs' own source-port settings can be seen from the pod (docs/steering.md, "When HCCL ignores the file").
hccn_conf=${RINGROUTE_HCCN_CONF:-/etc/hccn.conf}
hccn_tool_limit=${RINGROUTE_HCCN_TOOL_TIMEOUT:-5}
termination_log=${RINGROUTE_TERMINATION_LOG-/dev/termination-log}

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
case $hccn_tool_limit in
    '' | *[!0-9]*) fail "RINGROUTE_HCCN_TOOL_TIMEOUT must be a whole number of seconds (got '$hccn_tool_limit')" ;;
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

# The physical ids (the table's device_id, HCCL's devicePhyId) of the NPUs of the server at node rank $2.
server_devices() {
    compact "$1" | awk -v want="$2" '{
        n = split($0, part, "\"server_id\":")
        if (want + 2 > n) exit
        s = part[want + 2]
        out = ""
        while ((i = index(s, "\"device_id\":\"")) > 0) {
            s = substr(s, i + 13)
            j = index(s, "\"")
            id = substr(s, 1, j - 1)
            if (id ~ /^[0-9]+$/) out = out (out == "" ? "" : " ") id
            s = substr(s, j + 1)
        }
        print out
    }'
}

# The value of key $1 in $hccn_conf as hccn_tool reads it (cfg.c): the first line that starts with the key and has
# its first "=" right after it, "#" comments only in the first column, nothing trimmed but the newline; status 1
# when no line has the key.
hccn_record() {
    awk -v key="$1" '
        substr($0, 1, 1) == "#" { next }
        index($0, "=") == length(key) + 1 && substr($0, 1, length(key)) == key {
            print substr($0, length(key) + 2)
            found = 1
            exit
        }
        END { exit !found }' "$hccn_conf"
}

# "device 3" or "devices 0 1".
devices_named() {
    case $1 in
        *' '*) echo "devices $1" ;;
        *) echo "device $1" ;;
    esac
}

# A value as it may be shown on one log line.
shown() {
    printf '%s' "$1" | tr -c '[:print:]' '?'
}

# hccn_tool, when the pod has it: RINGROUTE_HCCN_TOOL names it ("none" or empty: do not run it).
find_hccn_tool() {
    if [ "${RINGROUTE_HCCN_TOOL+set}" = set ]; then
        case $RINGROUTE_HCCN_TOOL in
            '' | none) return 1 ;;
        esac
        [ -x "$RINGROUTE_HCCN_TOOL" ] && printf '%s\n' "$RINGROUTE_HCCN_TOOL"
        return
    fi
    for candidate in /usr/local/Ascend/driver/tools/hccn_tool /usr/local/sbin/hccn_tool; do
        if [ -x "$candidate" ]; then
            printf '%s\n' "$candidate"
            return 0
        fi
    done
    command -v hccn_tool 2>/dev/null
}

# `hccn_tool -i <device> -udp -g` for every device of $devices at once, each answer in $1/<device>.out and its exit
# status in $1/<device>.rc; a query still running after $hccn_tool_limit seconds is killed (and has no .rc).
query_hccn_tool() {
    queries=
    for dev in $devices; do
        (
            # The driver's libraries, as Ascend's container guides put them on the path.
            LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/driver:/usr/local/Ascend/driver/lib64/common${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
            export LD_LIBRARY_PATH
            "$2" -i "$dev" -udp -g >"$1/$dev.out" 2>&1 </dev/null &
            echo $! >"$1/$dev.pid"
            wait $!
            echo $? >"$1/$dev.rc.tmp" && mv "$1/$dev.rc.tmp" "$1/$dev.rc"
        ) >/dev/null 2>&1 &
        queries="$queries $!"
    done
    tenths=0
    while :; do
        pending=
        for dev in $devices; do
            [ -f "$1/$dev.rc" ] || pending="$pending $dev"
        done
        if [ -z "$pending" ]; then
            wait $queries
            return 0
        fi
        if [ "$tenths" -ge $((hccn_tool_limit * 10)) ]; then
            # Not waited for: a query stuck in the driver may outlive the kill.
            for dev in $pending; do
                kill -9 "$(cat "$1/$dev.pid" 2>/dev/null)" 2>/dev/null
            done
            return 0
        fi
        if sleep 0.1 2>/dev/null; then
            tenths=$((tenths + 1))
        else
            sleep 1
            tenths=$((tenths + 10))
        fi
    done
}

# What HCCL will do with the exported MultiQpSrcPort.cfg, as far as this pod can tell: sets $qp_ports
# (in-effect, ignored:hccn-multi-qp, ignored:nslb-dp or unverified:<why>) and $qp_message. Run in a subshell: its
# variables must not change any the command inherits. HCCL (hcomm
# MulQpInfo::Init) takes, per NPU, the device's multi_qp ports, then NSLB-DP, then this file, then
# HCCL_RDMA_QPS_PER_CONNECTION; the device settings are hccn_tool's, asked live when the pod has hccn_tool, else
# as hccn_tool records them in /etc/hccn.conf (udp_port_mode_<device>=multi_qp or code:nslb_dp).
qp_port_verdict() {
    devices=$(server_devices "$table" "$rank")
    if [ -z "$devices" ]; then
        qp_ports=unverified:no-devices
        qp_message="HCCL_RDMA_QP_PORT_CONFIG_PATH=$qp_dir is exported, but whether HCCL uses MultiQpSrcPort.cfg could not be checked: the rank table lists no device_id for this pod (node rank $rank)"
        return
    fi
    answers=
    tool=$(find_hccn_tool)
    if [ -n "$tool" ]; then
        answers=${RINGROUTE_WORK_DIR:-${TMPDIR:-/tmp}}/ringroute-hccn.$$
        if mkdir -p "$answers" 2>/dev/null; then
            query_hccn_tool "$answers" "$tool"
        else
            answers=
        fi
    fi
    overridden=
    first=
    unknown=
    evidence=
    for dev in $devices; do
        mode=
        said=
        if [ -n "$answers" ] && [ "$(cat "$answers/$dev.rc" 2>/dev/null)" = 0 ]; then
            said=$(awk '/^status:/ { print substr($0, 8); exit }' "$answers/$dev.out")
        fi
        case $said in
            multi_qp) mode=multi_qp from="hccn_tool -i $dev -udp -g: status:multi_qp" ;;
            'code(nslb_dp)') mode=nslb_dp from="hccn_tool -i $dev -udp -g: status:code(nslb_dp)" ;;
            auto | custom) mode=none from="hccn_tool -i $dev -udp -g: status:$said" ;;
        esac
        if [ -z "$mode" ]; then
            if [ ! -f "$hccn_conf" ] || [ ! -r "$hccn_conf" ]; then
                mode=unknown from="$hccn_conf is not a readable file"
            elif value=$(hccn_record "udp_port_mode_$dev"); then
                case $value in
                    multi_qp) mode=multi_qp from="$hccn_conf: udp_port_mode_$dev=multi_qp" ;;
                    code:nslb_dp) mode=nslb_dp from="$hccn_conf: udp_port_mode_$dev=code:nslb_dp" ;;
                    *) mode=unknown from="$hccn_conf: udp_port_mode_$dev=$(shown "$value") is no value hccn_tool writes" ;;
                esac
            else
                mode=none from="$hccn_conf has no udp_port_mode_$dev"
            fi
            if [ -n "$tool" ]; then
                from="$from; hccn_tool -i $dev -udp -g did not answer"
            fi
        fi
        evidence="$evidence${evidence:+; }device $dev: $mode ($from)"
        case $mode in
            multi_qp | nslb_dp)
                overridden="$overridden${overridden:+ }$dev"
                [ -n "$first" ] || first=$mode
                ;;
            unknown) unknown="$unknown${unknown:+ }$dev" ;;
        esac
    done
    if [ -n "$answers" ]; then
        rm -rf "$answers"
    fi
    if [ "$first" = multi_qp ]; then
        qp_ports=ignored:hccn-multi-qp
        qp_message="MultiQpSrcPort.cfg will be ignored by HCCL on $(devices_named "$overridden"): hccn_tool's multi_qp mode (hccn_tool -i <device> -udp -s multi_qp) comes first and gives every connection of the device its ports; steering is not in effect ($evidence)"
        return
    fi
    if [ "$first" = nslb_dp ]; then
        qp_ports=ignored:nslb-dp
        qp_message="MultiQpSrcPort.cfg will be ignored by HCCL on $(devices_named "$overridden"): NSLB-DP (hccn_tool -i <device> -udp -s code -t nslb-dp) comes first and gives every connection one queue pair whose port it chooses; steering is not in effect ($evidence)"
        return
    fi
    qps=
    if [ -n "${HCCL_RDMA_QPS_PER_CONNECTION:-}" ]; then
        qps="; HCCL_RDMA_QPS_PER_CONNECTION=$(shown "$HCCL_RDMA_QPS_PER_CONNECTION") goes unused while HCCL reads the file (pairs the file does not list get one queue pair)"
    fi
    if [ -n "$unknown" ]; then
        qp_ports=unverified:device-settings
        qp_message="HCCL_RDMA_QP_PORT_CONFIG_PATH=$qp_dir is exported, but whether HCCL uses MultiQpSrcPort.cfg could not be checked for $(devices_named "$unknown"): hccn_tool's multi_qp or NSLB-DP on a device would make HCCL ignore it ($evidence)$qps"
        return
    fi
    qp_ports=in-effect
    qp_message="HCCL_RDMA_QP_PORT_CONFIG_PATH=$qp_dir: no device of this pod has hccn_tool's multi_qp or NSLB-DP, which HCCL would take first; HCCL reads MultiQpSrcPort.cfg when it first connects to another server (in eager, single-operator mode on Atlas A2/A3, which the launcher does not check) ($evidence)$qps"
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
qp_ports=none
qp_message=
if [ -n "$qp_dir" ]; then
    if [ -n "${HCCL_RDMA_QP_PORT_CONFIG_PATH:-}" ] && [ "$HCCL_RDMA_QP_PORT_CONFIG_PATH" != "$qp_dir" ]; then
        qp_ports=ignored:job-path
        qp_message="HCCL_RDMA_QP_PORT_CONFIG_PATH=$HCCL_RDMA_QP_PORT_CONFIG_PATH is set by the job and kept; ringroute's source ports in $qp_dir/MultiQpSrcPort.cfg are not used"
    else
        # Exported even when HCCL will ignore the file: HCCL only checks that the directory exists, and a device
        # setting that comes first means it never opens the file.
        HCCL_RDMA_QP_PORT_CONFIG_PATH=$qp_dir
        export HCCL_RDMA_QP_PORT_CONFIG_PATH
        qp_verdict=$(
            qp_port_verdict
            printf '%s %s' "$qp_ports" "$qp_message"
        )
        qp_ports=${qp_verdict%% *}
        qp_message=${qp_verdict#* }
    fi
    echo "$prog: qp_ports=$qp_ports: $qp_message" >&2
fi
RINGROUTE_QP_PORTS=$qp_ports
export RINGROUTE_QP_PORTS
case $qp_ports in
    ignored:hccn-multi-qp | ignored:nslb-dp)
        # The container's termination message stays in the pod's status after it ends (kubectl describe pod);
        # one the container already wrote is left alone.
        if [ -n "$termination_log" ] && [ -f "$termination_log" ] && [ -w "$termination_log" ] &&
            [ ! -s "$termination_log" ]; then
            echo "$prog: qp_ports=$qp_ports: $qp_message" >"$termination_log" 2>/dev/null || :
        fi
        ;;
esac

RANK_AFTER_ACC=$rank
NODE_RANK=$rank
MASTER_ADDR=$master_addr
WORLD_SIZE=$server_count
RANK_TABLE_FILE=$table
export RANK_AFTER_ACC NODE_RANK MASTER_ADDR WORLD_SIZE RANK_TABLE_FILE
echo "$prog: pod $POD_NAME node rank $NODE_RANK of $WORLD_SIZE, master $MASTER_ADDR, qp_ports=$qp_ports" >&2
exec "$@"
