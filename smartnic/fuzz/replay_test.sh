#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The replay driver (replay.c) loses nothing without saying so: every file
# of a corpus larger than any fixed listing is replayed, an input longer
# than a replay takes fails (and is not counted) instead of being replayed
# cut short, and an empty corpus fails.
#   replay_test.sh FUZZ_REPLAY_BINARY
set -euo pipefail

replay=$1
limit=$((1024 * 1024)) # FUZZ_INPUT_LIMIT (replay.h)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# replays WHAT and fails the test unless it passes having replayed COUNT
expect_replayed() {
	local count=$1 what=$2 out
	if ! out=$("$replay" "$what"); then
		echo "FAIL: $what did not replay" >&2
		exit 1
	fi
	if [ "$out" != "replayed $count inputs" ]; then
		echo "FAIL: $what: '$out', expected $count inputs" >&2
		exit 1
	fi
}

# More files than a learned corpus's first listing held (4,096).
mkdir "$dir/corpus"
for i in $(seq 1 5000); do
	printf '%s' "$i" >"$dir/corpus/input-$i"
done
expect_replayed 5000 "$dir/corpus"

# An empty corpus proves nothing: it fails, with a message and no
# undefined behaviour on the way (sorting an empty list).
mkdir "$dir/empty"
if "$replay" "$dir/empty" 2>"$dir/err" >/dev/null; then
	echo "FAIL: an empty corpus passed" >&2
	exit 1
fi
if ! grep -q "no input found" "$dir/err" || grep -q "runtime error" "$dir/err"; then
	echo "FAIL: an empty corpus: $(cat "$dir/err")" >&2
	exit 1
fi

# One byte past the 1 MiB a replay takes.
head -c $((limit + 1)) /dev/zero >"$dir/too-long"
if out=$("$replay" "$dir/too-long" 2>"$dir/err"); then
	echo "FAIL: an input past the limit was replayed" >&2
	exit 1
fi
if ! grep -q "longer than the $limit bytes a replay takes" "$dir/err"; then
	echo "FAIL: no message for the long input: $(cat "$dir/err")" >&2
	exit 1
fi
if [ "$out" != "replayed 0 inputs" ]; then
	echo "FAIL: the refused input was counted: '$out'" >&2
	exit 1
fi

# Exactly at the limit is still an input.
head -c "$limit" /dev/zero >"$dir/at-limit"
expect_replayed 1 "$dir/at-limit"
echo "replay driver: 5000 files replayed, a long input refused"
