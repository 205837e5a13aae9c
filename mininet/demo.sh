#!/usr/bin/env bash
# make demo: a scripted session on the emulated rack; report and plots under results/.
set -euo pipefail
cd "$(dirname "$0")/.."
exec env PYTHONPATH=mininet .venv/bin/python -m emulation.demo "$@"
