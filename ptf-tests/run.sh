#!/usr/bin/env bash
# Run the jumbogate PTF suite against one target.
#
#   ptf-tests/run.sh [--target soft|bmv2] [SUMMARY_FILE] [-- PTF_TEST_SPEC...]
#
# Targets: soft (jumbogate-switch, built by `make setup`; the default) and
# bmv2 (simple_switch_grpc). The suite is the same for both. SUMMARY_FILE
# (optional) receives the closing line too. A PTF test spec (test or group
# names, e.g. `-- depth` or `-- test_jumbo`) runs only those, on the
# 256-byte profile.
#
# The pipeline is the committed compile of p4src/ (p4src/compiled/depth*),
# so neither target needs p4c here. Creates veth pairs (MTU 9500, offloads
# off), starts the switch, waits for its gRPC port, and runs PTF: the whole
# suite on the 256-byte profile, the depth tests again on the 512-byte one
# (jumbogate-switch takes its profile at start-up, so it is started again).
# The switch and veths are always torn down. Last line:
#   PTF[target]: N passed, N failed[, N skipped]
# Exits non-zero on any failure. Without the target's switch it prints one
# SKIPPED line naming what is missing, counts every test as skipped, and
# exits 0.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
target=soft
if [ "${1:-}" = "--target" ]; then
    target=${2:-}; shift 2 || true
fi
case "$target" in
    soft|bmv2) ;;
    *) echo "ptf-tests/run.sh: --target is soft or bmv2, got '$target'" >&2; exit 2 ;;
esac
summary_file=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    summary_file=$(realpath -m "$1"); shift
fi
[ "${1:-}" = "--" ] && shift
cd "$repo"

PY=${PY:-$repo/.venv/bin/python}
PTF=${PTF:-$repo/.venv/bin/ptf}
NUM_PORTS=6
CPU_PORT=255
SUITE_TIMEOUT_S=${SUITE_TIMEOUT_S:-900}
PTF_PATHS=(--test-dir ptf-tests/tests --pypath ptf-tests/lib)
export PYTHONPATH="$repo/controlplane/src:$repo:$repo/ptf-tests/lib${PYTHONPATH:+:$PYTHONPATH}"
# Where the switch is, as the test lab says (JUMBOGATE_SWITCH overrides it).
SOFT_SWITCH=$("$PY" -c 'from testlab.lab import SOFT_SWITCH; print(SOFT_SWITCH)')

finish() {  # exit-code line
    echo "$2"
    [ -n "$summary_file" ] && echo "$2" >"$summary_file"
    exit "$1"
}

# How many tests a run would have made: the whole suite plus the depth
# group again on the 512-byte profile (or the given spec once).
planned_tests() {
    # PTF deletes and rewrites its log file: never give it /dev/null.
    local count listing_log
    listing_log=$(mktemp)
    if [ $# -gt 0 ]; then
        count=$("$PTF" "${PTF_PATHS[@]}" --log-file "$listing_log" --list-test-names "$@" 2>/dev/null | grep -c '^test_')
    else
        count=$(( $("$PTF" "${PTF_PATHS[@]}" --log-file "$listing_log" --list-test-names 2>/dev/null | grep -c '^test_') \
                + $("$PTF" "${PTF_PATHS[@]}" --log-file "$listing_log" --list-test-names depth 2>/dev/null | grep -c '^test_') ))
    fi
    rm -f "$listing_log"
    echo "${count:-0}"
}

for depth in 256 512; do
    for file in jumbogate.json jumbogate.p4info.txtpb; do
        [ -f "p4src/compiled/depth$depth/$file" ] \
            || finish 1 "PTF[$target]: 0 passed, 1 failed (p4src/compiled/depth$depth/$file is missing; run 'make p4')"
    done
done
if [ "$target" = bmv2 ]; then
    if ! command -v simple_switch_grpc >/dev/null 2>&1; then
        reason="PTF suite on BMv2 needs simple_switch_grpc on PATH; see README \"Getting p4c and BMv2\""
        echo "SKIPPED: $reason"
        finish 0 "PTF[$target]: 0 passed, 0 failed, $(planned_tests "$@") skipped"
    fi
elif [ ! -x "$SOFT_SWITCH" ]; then
    echo "SKIPPED: $SOFT_SWITCH is not built; run 'make setup'"
    finish 0 "PTF[$target]: 0 passed, 0 failed, $(planned_tests "$@") skipped"
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "ptf-tests/run.sh: needs root to create veth interfaces" >&2
    exit 1
fi

tag="jg$$"
[ ${#tag} -gt 9 ] && tag="jg${tag: -7}"
workdir=$(mktemp -d /tmp/jumbogate-ptf.XXXXXX)
switch_pid=""

stop_switch() {
    if [ -n "$switch_pid" ] && kill -0 "$switch_pid" 2>/dev/null; then
        kill "$switch_pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$switch_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$switch_pid" 2>/dev/null
    fi
    switch_pid=""
    rm -rf "/var/run/dpdk/$tag"
}
cleanup() {
    stop_switch
    for i in $(seq 0 $((NUM_PORTS - 1))); do
        ip link del "${tag}s$i" 2>/dev/null
    done
}
trap cleanup EXIT INT TERM

# -- veths -----------------------------------------------------------------------
ptf_ifaces=()
for i in $(seq 0 $((NUM_PORTS - 1))); do
    sw="${tag}s$i"; host="${tag}p$i"
    ip link add "$sw" type veth peer name "$host" || exit 1
    for dev in "$sw" "$host"; do
        # No IPv6 autoconfiguration chatter (router solicitations, MLD) on
        # test ports: every frame on them must come from a test.
        sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
        ip link set "$dev" mtu 9500
        ethtool -K "$dev" tx off rx off tso off gso off gro off >/dev/null 2>&1
        ip link set "$dev" up
    done
    ptf_ifaces+=(--interface "$i@$host")
done

# -- switch ----------------------------------------------------------------------
free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
grpc_port=""
start_switch() {  # depth
    local depth=$1 ports=()
    stop_switch
    grpc_port=$(free_port)
    if [ "$target" = bmv2 ]; then
        for i in $(seq 0 $((NUM_PORTS - 1))); do ports+=(-i "$i@${tag}s$i"); done
        # --log-level off: with no log sink BMv2 still formats every trace line of every packet.
        simple_switch_grpc --no-p4 --device-id 1 --thrift-port "$(free_port)" --log-level off "${ports[@]}" \
            -- --grpc-server-addr "127.0.0.1:$grpc_port" --cpu-port "$CPU_PORT" \
            >"$workdir/switch-$depth.log" 2>&1 &
    else
        # net_pcap, not net_af_packet: DPDK's af_packet joins a fanout
        # group with PACKET_FANOUT_FLAG_DEFRAG, so the kernel reassembles
        # IPv4 fragments before the switch could see one (a quirk of the
        # test transport; a NIC port delivers fragments as they come).
        local vdevs=()
        for i in $(seq 0 $((NUM_PORTS - 1))); do
            vdevs+=("--vdev=net_pcap$i,iface=${tag}s$i")
            ports+=(--port "$i=net_pcap$i")
        done
        "$SOFT_SWITCH" -l 0-1 --no-huge -m 1024 --no-pci --file-prefix "$tag" --log-level=lib.eal:error "${vdevs[@]}" \
            -- "${ports[@]}" --grpc "127.0.0.1:$grpc_port" --cpu-port "$CPU_PORT" --depth "$depth" \
            >"$workdir/switch-$depth.log" 2>&1 &
    fi
    switch_pid=$!
    "$PY" - "$grpc_port" "$switch_pid" <<'EOF' || { echo "the $target switch did not open its gRPC port"; tail -20 "$workdir/switch-$depth.log"; return 1; }
import os, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(1)  # it died
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
EOF
}

# -- PTF -------------------------------------------------------------------------
passed=0; failed=0; skipped=0
run_ptf() {  # depth spec...
    local depth=$1; shift
    local out=p4src/compiled/depth$depth log="$workdir/ptf-$depth.log"
    local params="grpc_addr='127.0.0.1:$grpc_port';p4info='$repo/$out/jumbogate.p4info.txtpb';p4blob='$repo/$out/jumbogate.json';depth=$depth;target='$target'"
    echo "== PTF on $target, $depth-byte profile: ${*:-all tests}"
    timeout "$SUITE_TIMEOUT_S" "$PTF" "${PTF_PATHS[@]}" \
        --socket-recv-size 10240 "${ptf_ifaces[@]}" --test-params "$params" \
        --log-file "$workdir/ptf-$depth.ptf.log" "$@" 2>&1 | tee "$log" | grep -E '\.\.\. |^(FAIL|ERROR):'
    local counts
    counts=$("$PY" - "$log" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
ran = re.findall(r"^Ran (\d+) tests?", text, re.M)
if not ran:
    print("0 1 0")  # PTF did not finish: count the run as one failure
    sys.exit()
total = int(ran[-1])
def count(key):
    m = re.search(rf"^(?:OK|FAILED) \(.*?{key}=(\d+)", text, re.M)
    return int(m.group(1)) if m else 0
bad = count("failures") + count("errors")
skip = count("skipped")
print(total - bad - skip, bad, skip)
EOF
)
    read -r p f s <<<"$counts"
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    if [ "$f" -gt 0 ]; then
        grep -E -A30 '^(FAIL|ERROR):' "$log" | head -200
    fi
}

start=$(date +%s)
if [ $# -gt 0 ]; then
    start_switch 256 && run_ptf 256 "$@" || failed=$((failed + 1))
else
    start_switch 256 && run_ptf 256 || failed=$((failed + 1))
    # BMv2 takes the 512-byte profile with the next pipeline push; the
    # software switch is started with it.
    if [ "$target" = soft ]; then start_switch 512 || failed=$((failed + 1)); fi
    [ -n "$switch_pid" ] && run_ptf 512 depth
fi
echo "PTF run time on $target: $(( $(date +%s) - start )) s"

summary="PTF[$target]: $passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary="$summary, $skipped skipped"
if [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; then
    for f in "$workdir"/switch-*.log; do echo "$f: $(tail -5 "$f" | tr '\n' ' ')"; done
    echo "logs kept in $workdir"
    finish 1 "$summary"
fi
rm -rf "$workdir"
finish 0 "$summary"
