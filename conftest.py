"""Shared pytest hooks: tests marked `bmv2` need BMv2's simple_switch_grpc.

They run the committed compile (p4src/compiled/), so p4c is not needed.
Where simple_switch_grpc is missing those tests are skipped, and the run
says so once, loudly, instead of hiding it in a skip list.
"""

import shutil

import pytest

P4_TOOLS = ("simple_switch_grpc",)


def missing_p4_tools() -> list[str]:
    return [tool for tool in P4_TOOLS if shutil.which(tool) is None]


def pytest_configure(config):
    config.addinivalue_line("markers", "bmv2: needs simple_switch_grpc on PATH")


def pytest_collection_modifyitems(config, items):
    missing = missing_p4_tools()
    if not missing:
        return
    needing = [item for item in items if item.get_closest_marker("bmv2")]
    if not needing:
        return
    reason = f"need {' and '.join(P4_TOOLS)} on PATH; see README, 'Getting p4c and BMv2'"
    for item in needing:
        item.add_marker(pytest.mark.skip(reason=reason))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter:
        reporter.write_line(f"SKIPPED: {len(needing)} BMv2 tests; they {reason}", yellow=True, bold=True)
