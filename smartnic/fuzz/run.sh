#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fuzz for SECONDS (default 600) with libFuzzer:
#
#   smartnic/fuzz/run.sh [SECONDS] [TARGET]
#
# TARGET is engine (default): the merge/split engine; pathmtu: path MTU
# discovery's packet handling (app/pathmtu.c); switch: the switch's
# pipeline (switch/fuzz/fuzz_pipeline.c); metrics-http: the metrics
# endpoint's request reading (runtime/metrics_http.c); switch-options:
# jumbogate-switch's command line (switch/options.c); nic-options:
# jumbogate-nic's command line and config file (app/options.c). Builds
# build/fuzz (or $JUMBOGATE_FUZZ_BUILD) with clang if needed, starts from
# the checked-in corpus (corpus/, corpus-pathmtu/, switch/fuzz/corpus/,
# corpus-metrics-http/, switch/fuzz/corpus-options/,
# corpus-nic-options/), and keeps what it learns in
# build/fuzz/corpus-TARGET. A crash leaves its input in build/fuzz/crash-*;
# copy it into the target's corpus directory as crash-<what> once fixed,
# so the replay test keeps testing it.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${JUMBOGATE_FUZZ_BUILD:-$root/build/fuzz}
seconds=${1:-600}
target=${2:-engine}
# The packet targets keep DPDK objects for the whole run, which are not
# leaks; the text targets allocate nothing that outlives an input, so
# there a leak is a finding. They print a refusal per input on stdout and
# stderr, which would slow the run to a crawl: closed (libFuzzer keeps
# its own report).
leaks=0 quiet=0
case "$target" in
	engine) seeds="$root/smartnic/fuzz/corpus" binary=smartnic/fuzz/fuzz_engine ;;
	pathmtu) seeds="$root/smartnic/fuzz/corpus-pathmtu" binary=smartnic/fuzz/fuzz_pathmtu ;;
	switch) seeds="$root/switch/fuzz/corpus" binary=switch/fuzz/fuzz_pipeline ;;
	metrics-http) seeds="$root/smartnic/fuzz/corpus-metrics-http" binary=smartnic/fuzz/fuzz_metrics_http leaks=1 ;;
	switch-options) seeds="$root/switch/fuzz/corpus-options" binary=switch/fuzz/fuzz_switch_options leaks=1 quiet=3 ;;
	nic-options) seeds="$root/smartnic/fuzz/corpus-nic-options" binary=smartnic/fuzz/fuzz_nic_options leaks=1 quiet=3 ;;
	*) echo "fuzz/run.sh: TARGET is engine, pathmtu, switch, metrics-http, switch-options or nic-options, got '$target'" >&2; exit 2 ;;
esac

# The project's one meson build, compiled with clang for libFuzzer; only the
# target and what it needs are built.
if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" "$root" -Dfuzz=true
fi
ninja -C "$build" "$binary"
mkdir -p "$build/corpus-$target"
cd "$build"
ASAN_OPTIONS=detect_leaks=$leaks "./$binary" -max_total_time="$seconds" \
	-max_len=65536 -close_fd_mask=$quiet -print_final_stats=1 \
	"$build/corpus-$target" "$seeds"
