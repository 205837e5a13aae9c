#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fuzz for SECONDS (default 600) with libFuzzer:
#
#   smartnic/fuzz/run.sh [SECONDS] [engine|pathmtu|switch]
#
# engine (default): the merge/split engine; pathmtu: path MTU discovery's
# packet handling (app/pathmtu.c); switch: the switch's pipeline
# (switch/fuzz/fuzz_pipeline.c). Builds build/fuzz with clang if needed,
# starts from the checked-in corpus (corpus/, corpus-pathmtu/,
# switch/fuzz/corpus/), and keeps what it learns in
# build/fuzz/corpus-TARGET. A crash leaves its input in build/fuzz/crash-*;
# copy it into the target's corpus directory as crash-<what> once fixed,
# so the replay test keeps testing it.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build/fuzz"
seconds=${1:-600}
target=${2:-engine}
case "$target" in
	engine) seeds="$root/smartnic/fuzz/corpus" binary=smartnic/fuzz/fuzz_engine ;;
	pathmtu) seeds="$root/smartnic/fuzz/corpus-pathmtu" binary=smartnic/fuzz/fuzz_pathmtu ;;
	switch) seeds="$root/switch/fuzz/corpus" binary=switch/fuzz/fuzz_pipeline ;;
	*) echo "fuzz/run.sh: TARGET is engine, pathmtu or switch, got '$target'" >&2; exit 2 ;;
esac

# The project's one meson build, compiled with clang for libFuzzer; only the
# target and what it needs are built.
if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" "$root" -Dfuzz=true
fi
ninja -C "$build" "$binary"
mkdir -p "$build/corpus-$target"
cd "$build"
# The targets keep DPDK objects for the whole run; they are not leaks.
ASAN_OPTIONS=detect_leaks=0 "./$binary" -max_total_time="$seconds" \
	-max_len=65536 -print_final_stats=1 "$build/corpus-$target" "$seeds"
