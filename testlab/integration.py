"""What the integration test directories of the built programs share.

Their tests need root (namespaces, veths, raw sockets), the built program
and a few tools; without one of them the whole directory is skipped with
one line saying why, rather than each test failing on its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import pytest


def missing(binary: Path | None, tools: Iterable[str]) -> str | None:
    """Why the tests cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veths, raw sockets)"
    if binary is not None and not binary.exists():
        return f"{binary} is missing; run 'make setup'"
    for tool in tools:
        if shutil.which(tool) is None:
            return f"needs {tool} on PATH"
    return None


def skip_directory(config, items, directory: Path, program: str, reason: str | None) -> None:
    """Marks every collected test of `directory` skipped for `reason`, and says so once."""
    if reason is None:
        return
    skipped = [item for item in items if Path(str(item.fspath)).parent == directory]
    for item in skipped:
        item.add_marker(pytest.mark.skip(reason=f"{program} integration: {reason}"))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter and skipped:
        reporter.write_line(f"SKIPPED: {len(skipped)} {program} tests: {reason}", yellow=True, bold=True)


def log_dir_fixture(name: str):
    """A module's log directory, named for the program under test."""

    @pytest.fixture(scope="module")
    def log_dir(tmp_path_factory) -> Path:
        return tmp_path_factory.mktemp(name)

    return log_dir
