#!/usr/bin/env bash
# make demo: a scripted session on the emulated rack; report and plots under results/.
# make attack (--attack): cheap attacks on the border through the same rack.
# make soak (--soak): the rack under chaos for $SOAK_MINUTES (default 10).
# make fleet-chaos (--fleet-chaos): three racks on etcd under faults for $FLEET_CHAOS_MINUTES (default 5).
# make value (--value): what the border buys its users, measured (docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
module=emulation.demo
case "${1:-}" in
    --attack) module=emulation.attack; shift ;;
    --soak) module=emulation.soak; shift; set -- --minutes "${SOAK_MINUTES:-10}" "$@" ;;
    --value) module=emulation.value; shift ;;
    --fleet-chaos) module=emulation.fleet_chaos; shift; set -- --minutes "${FLEET_CHAOS_MINUTES:-5}" "$@" ;;
esac
exec env PYTHONPATH=mininet:. .venv/bin/python -m "$module" "$@"
