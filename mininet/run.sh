#!/usr/bin/env bash
# make run: the emulated rack (Mininet + BMv2 + jumbogate-nic + jumbogate-controller) with a Mininet CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
exec env PYTHONPATH=mininet:. .venv/bin/python -m emulation.run "$@"
