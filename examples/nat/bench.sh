#!/usr/bin/env bash
# The example NAT's benchmark (bench.c): one core, an in-memory trace, with
# merging and without, for the NAT as it is and for NFs whose own work per
# packet costs 250 and 1000 ns more. Builds build/native first (make native).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build/native
make --no-print-directory native >/dev/null
EAL=(--no-huge --no-pci -m 1024 -l 0 --file-prefix "jgnatbench$$" --log-level=error)
for work in 0 250 1000; do
	"$BUILD/examples/nat/jumbogate-nat-bench" "${EAL[@]}" -- --packets "${PACKETS:-262144}" --repeat "${REPEAT:-5}" --work-ns "$work"
	echo
done
