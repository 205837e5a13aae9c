#!/usr/bin/env bash
# make demo: a scripted session on the emulated rack; report and plots under results/.
# make attack (--attack): cheap attacks on the border through the same rack.
# make soak (--soak): the rack under chaos for $SOAK_MINUTES (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
module=emulation.demo
case "${1:-}" in
    --attack) module=emulation.attack; shift ;;
    --soak) module=emulation.soak; shift; set -- --minutes "${SOAK_MINUTES:-10}" "$@" ;;
esac
exec env PYTHONPATH=mininet:. .venv/bin/python -m "$module" "$@"
