#!/usr/bin/env bash
# make run: the emulated rack is not built yet (tracked by its own issue).
echo "make run: the emulated rack does not exist yet; see the emulation issue" >&2
exit 1
