#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The replay driver (replay.c) loses nothing without saying so: every file
# of a corpus larger than any fixed listing is replayed, and an input longer
# than a replay takes fails instead of being replayed cut short.
#   replay_test.sh FUZZ_REPLAY_BINARY
set -euo pipefail

replay=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# More files than a learned corpus's first listing held (4,096).
mkdir "$dir/corpus"
for i in $(seq 1 5000); do
	printf '%s' "$i" >"$dir/corpus/input-$i"
done
out=$("$replay" "$dir/corpus")
if [ "$out" != "replayed 5000 inputs" ]; then
	echo "FAIL: a corpus of 5000 files: '$out'" >&2
	exit 1
fi

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
head -c $((1024 * 1024 + 1)) /dev/zero >"$dir/too-long"
if "$replay" "$dir/too-long" 2>"$dir/err"; then
	echo "FAIL: an input past the limit was replayed" >&2
	exit 1
fi
if ! grep -q "longer than the 1048576 bytes a replay takes" "$dir/err"; then
	echo "FAIL: no message for the long input: $(cat "$dir/err")" >&2
	exit 1
fi

# Exactly at the limit is still an input.
head -c $((1024 * 1024)) /dev/zero >"$dir/at-limit"
"$replay" "$dir/at-limit" >/dev/null
echo "replay driver: 5000 files replayed, a long input refused"
