"""The `base_test` module that P4Testgen's PTF tests import.

P4Testgen (p4c's backends/p4tools) writes PTF tests against the interface of
the p4lang tutorials' base_test.py: `P4RuntimeTest` with `table_add`, match
helpers (`Exact`, `Ternary`, `Lpm`, `Range`, `Optional`),
`insert_pre_clone_session` and `meter_write`. This module gives that
interface over the suite's own P4Runtime client (ptf-tests/lib/p4rt.py,
finsy), so that the generated corpus runs unchanged on every target the
suite drives: jumbogate-switch and BMv2.

Each generated test starts from a switch with nothing written: no table
entry, clone session or action profile member, every default action the
P4's, and every meter cell an earlier test configured back to its default.
Registers are not cleared: P4Testgen reasons from BMv2's start-up state,
where they are zero, but jumbogate's registers (the elephant sketch) decide
only its digests, which no generated test checks.
"""

from __future__ import annotations

import functools
import logging
import types
from dataclasses import dataclass
from typing import Any

import finsy as fy
import ptf
from base import shared_switch
from finsy.proto import p4r
from ptf.base_tests import BaseTest

p4runtime_pb2 = p4r  # the generated tests build MeterConfig through this name
# The generated tests log through `bt.testutils.log`, as the p4lang base_test
# they were written for offers.
testutils = types.SimpleNamespace(log=logging.getLogger("p4testgen"))

__all__ = ["P4RuntimeTest", "autocleanup", "p4runtime_pb2", "testutils"]

# (meter name, index) of every cell a test configured, reset by the next
# test's setUp.
_configured_meter_cells: set[tuple[str, int]] = set()


# -- match fields, as the generated tests spell them -----------------------------


@dataclass(frozen=True)
class Exact:
    name: str
    value: int

    def finsy_value(self) -> Any:
        return self.value


@dataclass(frozen=True)
class Ternary:
    name: str
    value: int
    mask: int

    def finsy_value(self) -> Any:
        return (self.value, self.mask)


@dataclass(frozen=True)
class Lpm:
    name: str
    value: int
    prefix_length: int

    def finsy_value(self) -> Any:
        return (self.value, self.prefix_length)


@dataclass(frozen=True)
class Range:
    name: str
    low: int
    high: int

    def finsy_value(self) -> Any:
        return (self.low, self.high)


@dataclass(frozen=True)
class Optional:
    name: str
    value: int
    use_exact: bool

    def finsy_value(self) -> Any:
        return self.value


def _is_wildcard(match) -> bool:
    """A don't-care match: P4Runtime leaves such a field out of the entry."""
    if isinstance(match, Ternary):
        return match.mask == 0
    if isinstance(match, Lpm):
        return match.prefix_length == 0
    if isinstance(match, Optional):
        return not match.use_exact
    return False


def autocleanup(test_body):
    """The generated tests wrap their body in this; the clean-up itself is
    P4RuntimeTest.setUp's, before every test, so a failed test cannot leave
    state for the next one."""

    @functools.wraps(test_body)
    def run(self, *args, **kwargs):
        return test_body(self, *args, **kwargs)

    return run


class P4RuntimeTest(BaseTest):
    # PTF's dataplane device number (ports are given as `N@interface`).
    device_id = 0

    def setUp(self):
        super().setUp()
        self.dataplane = ptf.dataplane_instance
        self.sw = shared_switch()
        self.sw.delete_all()
        if _configured_meter_cells:
            self.sw.modify([fy.P4MeterEntry(name, index=index) for name, index in sorted(_configured_meter_cells)])
            _configured_meter_cells.clear()
        self.dataplane.flush()

    def tearDown(self):
        self.dataplane.flush()
        super().tearDown()

    def updateConfig(self) -> bool:
        """The pipeline is pushed once per run, by shared_switch()."""
        return True

    # -- what the generated tests call ---------------------------------------------

    Exact = Exact
    Ternary = Ternary
    Lpm = Lpm
    Range = Range
    Optional = Optional

    def table_add(self, key, action, priority=None, options=None):
        table, matches = key
        action_name, params = action
        match = fy.P4TableMatch({m.name: m.finsy_value() for m in matches if not _is_wildcard(m)})
        table_action = fy.P4TableAction(action_name, **dict(params))
        if options and options.get("oneshot"):
            table_action = fy.P4IndirectAction([(1, table_action)])  # one member, weight 1
        self.sw.insert([fy.P4TableEntry(table, match=match, action=table_action, priority=priority or 0)])

    def insert_pre_clone_session(self, session_id: int, ports):
        replicas = [fy.P4Replica(port) for port in ports]
        self.sw.insert([fy.P4CloneSessionEntry(session_id, replicas=replicas)])

    def meter_write(self, meter_name: str, index: int, config: p4r.MeterConfig):
        meter_config = fy.P4MeterConfig(cir=config.cir, cburst=config.cburst, pir=config.pir, pburst=config.pburst)
        _configured_meter_cells.add((meter_name, index))
        self.sw.modify([fy.P4MeterEntry(meter_name, index=index, config=meter_config)])

    def direct_meter_write(self, meter_config, table_id, table_entry):
        raise NotImplementedError("jumbogate's P4 has no direct meter")
