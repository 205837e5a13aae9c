#!/usr/bin/env bash
# make demo: a scripted session on the emulated rack; report and plots under results/.
# make attack (--attack): cheap attacks on the border through the same rack.
set -euo pipefail
cd "$(dirname "$0")/.."
module=emulation.demo
if [ "${1:-}" = "--attack" ]; then
    module=emulation.attack; shift
fi
exec env PYTHONPATH=mininet .venv/bin/python -m "$module" "$@"
