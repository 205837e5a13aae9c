#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make bench: build the release benchmark if needed, run every scenario
# (or replay the pcap given as the only argument), print a summary with
# the ratios, and write build/bench/results.json and build/bench/perf.png.
# BENCH_PACKETS scales the elephant packets of every scenario, BENCH_REPEAT
# the passes per path (the fastest counts).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build/native-bench"
out="$root/build/bench"
packets=${BENCH_PACKETS:-600000}
repeat=${BENCH_REPEAT:-5}
# Two workers where there are two cores (the engine's scaling, #15).
workers=1
if [ "$(nproc)" -ge 2 ]; then
	workers=2
fi

# Link-time optimisation lets the engine's hot calls across its files
# (parse, flow key, chain surgery) be inlined, as one file would allow:
# about 6% on the engine and 10% on the switch's pipeline (docs/performance.md).
# A build configured before it is switched over.
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" "$root" --buildtype=release -Db_lto=true
else
	meson configure "$build" -Db_lto=true
fi
ninja -C "$build" smartnic/bench/jumbogate-bench smartnic/bench/jumbogate-split-bench switch/bench/jumbogate-switch-bench
bench="$build/smartnic/bench/jumbogate-bench"

mkdir -p "$out"
results="$out/results.json"
rm -f "$results"

run() {
	local label=$1
	shift
	echo "== $label"
	"$bench" --label "$label" --repeat "$repeat" --json "$results" "$@"
}

if [ $# -gt 1 ]; then
	echo "usage: $0 [capture.pcap]" >&2
	exit 2
elif [ $# -eq 1 ]; then
	run "pcap:$(basename "$1")" --pcap "$1" --workers "$workers"
else
	run flows-1 --flows 1 --packets "$packets"
	run flows-100 --flows 100 --packets "$packets"
	run flows-800 --flows 800 --packets "$packets" --workers "$workers"
	run flows-25600 --flows 25600 --packets "$packets"
	run reorder-1pct --flows 800 --reorder 0.01 --packets "$packets"
	# 1M mice: one to three small segments each, a flow never seen
	# before every time, mixed into the 800 elephants.
	run mice-1M --flows 800 --mice 1000000 --packets "$packets"
	# rte_gro in DPDK 22.11 has no TCP/IPv6 reassembly.
	run ipv6-800 --flows 800 --ipv6 1 --packets "$packets" \
		--paths engine,pass,ceiling
fi

python=python3
if [ -x "$root/.venv/bin/python" ]; then
	python="$root/.venv/bin/python"
fi
"$python" "$root/smartnic/bench/report.py" "$results" "$out/perf.png"

# The outbound path: jumbo packets cut to the path MTU, with and without
# the flows' state (docs/performance.md, "Split").
echo
for family in "" --ipv6; do
	for checksums in "" --offload-checksums; do
		"$build/smartnic/bench/jumbogate-split-bench" --repeat "$repeat" $family $checksums
	done
done | tee "$out/split.txt"

# The software switch's pipeline on one core, next to a pass-through
# (docs/switch.md, "Speed").
echo
"$build/switch/bench/jumbogate-switch-bench" --seconds "${BENCH_SWITCH_SECONDS:-2}" | tee "$out/switch.txt"

# The switch through real (veth) ports, next to dpdk-testpmd forwarding the
# same frames and BMv2 where it is installed (docs/switch.md, "Speed").
echo
"$python" "$root/switch/bench/switch_ports.py" --seconds "${BENCH_SWITCH_SECONDS:-2}" --json "$out/switch_ports.json" | tee "$out/switch_ports.txt"

# The SmartNIC program through real ports (veth, then memif), merging the
# trace (or the first frames of the capture given) into jumbo frames, next to
# dpdk-testpmd forwarding the same frames (docs/performance.md, "The program
# on real ports"). It fails when jumbogate-nic did not merge.
echo
nic_trace=()
if [ $# -eq 1 ]; then
	nic_trace=(--pcap "$1")
fi
"$python" "$root/smartnic/bench/nic_ports.py" --seconds "${BENCH_NIC_SECONDS:-2}" "${nic_trace[@]}" --json "$out/nic_ports.json" | tee "$out/nic_ports.txt"
