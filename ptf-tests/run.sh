#!/usr/bin/env bash
# Run the jumbogate PTF suite against BMv2 simple_switch_grpc.
#
#   ptf-tests/run.sh [SUMMARY_FILE] [-- PTF_TEST_SPEC...]
#
# SUMMARY_FILE (optional) receives the closing line too. A PTF test spec
# (test or group names, e.g. `-- depth` or `-- test_jumbo`) runs only those,
# on the 256-byte profile.
#
# Compiles both parse-depth profiles (reusing build/p4/depth{256,512} when
# they are newer than p4src/), creates veth pairs (MTU 9500, offloads off),
# starts simple_switch_grpc, waits for its gRPC port, and runs PTF: the whole
# suite on the 256-byte profile, the depth tests again on the 512-byte one.
# The switch and veths are always torn down. Last line:
#   PTF: N passed, N failed[, N skipped]
# Exits non-zero on any failure. Without p4c or simple_switch_grpc it prints
# one SKIPPED line and exits 0.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
summary_file=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    summary_file=$(realpath -m "$1"); shift
fi
[ "${1:-}" = "--" ] && shift
cd "$repo"

finish() {  # exit-code line
    echo "$2"
    [ -n "$summary_file" ] && echo "$2" >"$summary_file"
    exit "$1"
}

missing=()
for tool in p4c simple_switch_grpc; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    finish 0 "SKIPPED: PTF suite needs p4c and simple_switch_grpc on PATH (missing: ${missing[*]}); see README \"Getting p4c and BMv2\""
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "ptf-tests/run.sh: needs root to create veth interfaces" >&2
    exit 1
fi

PY=${PY:-$repo/.venv/bin/python}
PTF=${PTF:-$repo/.venv/bin/ptf}
NUM_PORTS=6
CPU_PORT=255
SUITE_TIMEOUT_S=${SUITE_TIMEOUT_S:-900}
tag="jg$$"
[ ${#tag} -gt 9 ] && tag="jg${tag: -7}"
workdir=$(mktemp -d /tmp/jumbogate-ptf.XXXXXX)
switch_pid=""

cleanup() {
    if [ -n "$switch_pid" ] && kill -0 "$switch_pid" 2>/dev/null; then
        kill "$switch_pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$switch_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$switch_pid" 2>/dev/null
    fi
    for i in $(seq 0 $((NUM_PORTS - 1))); do
        ip link del "${tag}s$i" 2>/dev/null
    done
}
trap cleanup EXIT INT TERM

# -- compile -------------------------------------------------------------------
newest_source=$(find p4src -type f -printf '%T@\n' | sort -n | tail -1)
for depth in 256 512; do
    out=build/p4/depth$depth
    if [ -f "$out/jumbogate.json" ] && [ -f "$out/jumbogate.p4info.txtpb" ] \
        && [ "$(stat -c %Y "$out/jumbogate.json")" -ge "${newest_source%.*}" ]; then
        continue
    fi
    bash p4src/compile.sh "$depth" "$out" || finish 1 "PTF: 0 passed, 1 failed"
done

# -- veths -----------------------------------------------------------------------
ptf_ifaces=()
switch_ifaces=()
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
    switch_ifaces+=(-i "$i@$sw")
    ptf_ifaces+=(--interface "$i@$host")
done

# -- switch ----------------------------------------------------------------------
free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
grpc_port=$(free_port)
thrift_port=$(free_port)
# --log-level off: with no log sink BMv2 still formats every trace line of every packet.
simple_switch_grpc --no-p4 --device-id 1 --thrift-port "$thrift_port" --log-level off "${switch_ifaces[@]}" \
    -- --grpc-server-addr "127.0.0.1:$grpc_port" --cpu-port "$CPU_PORT" \
    >"$workdir/switch.log" 2>&1 &
switch_pid=$!

"$PY" - "$grpc_port" <<'EOF' || { echo "simple_switch_grpc did not open its gRPC port"; tail -20 "$workdir/switch.log"; finish 1 "PTF: 0 passed, 1 failed"; }
import socket, sys, time
port = int(sys.argv[1])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
EOF

# -- PTF -------------------------------------------------------------------------
passed=0; failed=0; skipped=0
run_ptf() {  # depth spec...
    local depth=$1; shift
    local out=build/p4/depth$depth log="$workdir/ptf-$depth.log"
    local params="grpc_addr='127.0.0.1:$grpc_port';p4info='$repo/$out/jumbogate.p4info.txtpb';p4blob='$repo/$out/jumbogate.json';depth=$depth"
    echo "== PTF on the $depth-byte profile: ${*:-all tests}"
    PYTHONPATH="$repo/controlplane/src:$repo/ptf-tests/lib${PYTHONPATH:+:$PYTHONPATH}" \
        timeout "$SUITE_TIMEOUT_S" "$PTF" --test-dir ptf-tests/tests --pypath ptf-tests/lib \
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
    run_ptf 256 "$@"
else
    run_ptf 256
    run_ptf 512 depth
fi
echo "PTF run time: $(( $(date +%s) - start )) s"

summary="PTF: $passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary="$summary, $skipped skipped"
if [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; then
    echo "switch log: $(tail -5 "$workdir/switch.log" | tr '\n' ' ')"
    echo "logs kept in $workdir"
    finish 1 "$summary"
fi
rm -rf "$workdir"
finish 0 "$summary"
