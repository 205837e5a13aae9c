#!/usr/bin/env bash
# make stop: tear the emulated rack down, also after a crash (see mininet/emulation/cleanup.py).
set -euo pipefail
cd "$(dirname "$0")/.."
exec env PYTHONPATH=mininet:. .venv/bin/python -m emulation.stop "$@"
