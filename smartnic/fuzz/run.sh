#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fuzz the engine for SECONDS (default 600) with libFuzzer: builds
# build/fuzz with clang if needed, starts from the checked-in corpus, and
# keeps what it learns in build/fuzz/corpus. A crash leaves its input in
# build/fuzz/crash-*; copy it into smartnic/fuzz/corpus/ as crash-<what>
# once fixed, so fuzz_replay keeps testing it.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build/fuzz"
seconds=${1:-600}

if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" "$root/smartnic" -Dfuzz=true
fi
ninja -C "$build" fuzz/fuzz_engine
mkdir -p "$build/corpus"
cd "$build"
# The engine keeps DPDK objects for the whole run; they are not leaks.
ASAN_OPTIONS=detect_leaks=0 ./fuzz/fuzz_engine -max_total_time="$seconds" \
	-max_len=65536 -print_final_stats=1 "$build/corpus" \
	"$root/smartnic/fuzz/corpus"
