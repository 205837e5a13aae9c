#!/usr/bin/env bash
# make test: every suite of every part, then one summary. Exits non-zero if any
# suite failed. Suites that need p4c/simple_switch_grpc skip themselves with one
# loud line when those are missing; everything else always runs.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
RESULTS=build/test-results
rm -rf "$RESULTS" && mkdir -p "$RESULTS"

[ -x "$PY" ] || { echo "test: .venv is missing; run 'make setup' first" >&2; exit 2; }

declare -a SUITES=() STATUS=()
run_suite() {  # name, command...
  local name=$1; shift
  printf '\n===== %s =====\n' "$name"
  local start=$SECONDS
  "$@"
  local rc=$?
  SUITES+=("$name"); STATUS+=("$rc")
  printf '===== %s: %s in %ds =====\n' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")" $((SECONDS - start))
}

# The programs under test as the sources are now: the Python suites start
# them from build/native, which make setup built once (a no-op when nothing
# changed since).
# The generated Python of the protos and of the P4 program (make proto), as the sources are now.
make --no-print-directory proto >/dev/null || { echo "test: make proto failed" >&2; exit 2; }
ninja -C build/native >/dev/null || { echo "test: build/native does not build; run 'make native' to see why" >&2; exit 2; }

# Python: unit tests, SmartNIC program integration, controller integration and
# the emulation; markers and conftest skip what needs a missing tool.
PY_TEST_DIRS=()
for dir in controlplane/tests testlab/tests smartnic/tests/integration switch/tests examples/nat/tests packaging/tests mininet/tests; do [ -d "$dir" ] && PY_TEST_DIRS+=("$dir"); done
run_suite python "$PY" -m pytest -q -rs --junitxml="$RESULTS/python.xml" "${PY_TEST_DIRS[@]}"
run_suite c meson test -C build/native --print-errorlogs
# The same PTF suite on each target: jumbogate-switch always, BMv2 where
# simple_switch_grpc is on PATH (else it counts its tests as skipped).
run_suite ptf-soft bash ptf-tests/run.sh --target soft "$RESULTS/ptf-soft.txt"
run_suite ptf-bmv2 bash ptf-tests/run.sh --target bmv2 "$RESULTS/ptf-bmv2.txt"
# Tests no one here wrote: P4Testgen's corpus, derived from the P4's paths,
# on the same two targets.
run_suite p4testgen-soft bash ptf-tests/run.sh --target soft --suite p4testgen "$RESULTS/p4testgen-soft.txt"
run_suite p4testgen-bmv2 bash ptf-tests/run.sh --target bmv2 --suite p4testgen "$RESULTS/p4testgen-bmv2.txt"
# P4Runtime conformance from outside the project's client: p4lang's p4runtime
# bindings in .venv-p4rt (without it, its tests count as skipped).
run_suite p4rt-conformance bash p4rt-conformance/run.sh "$RESULTS/p4rt-conformance.txt"
# The engine's C suites and jumbogate-nic's integration tests once more on an
# AddressSanitizer + UBSan build (build/asan): memory errors and leaks fail.
run_suite c-asan bash scripts/sanitized.sh c
run_suite nic-asan bash scripts/sanitized.sh nic "$RESULTS/nic-asan.xml"

"$PY" scripts/test_summary.py "$RESULTS" "${SUITES[@]}" -- "${STATUS[@]}"
