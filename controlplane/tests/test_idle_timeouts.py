"""Idle-timeout notifications checked against the real jumbogate-switch before a merge flow is forgotten.

The switch here runs on a null DPDK port (no traffic: every entry is idle from
its insertion on). The test's own P4Runtime client is the switch's primary and
writes the merge_flows entries; the controller's notification handler reads
them back through it. A forged notification is the entry as the switch holds
it, exactly what the switch sends when the entry times out.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

import finsy as fy
import pytest

from jumbogate.config import load_config
from jumbogate.controller import Controller
from jumbogate.flow import FiveTuple
from jumbogate.p4 import entries
from jumbogate.state import FlowOrigin
from testlab import lab

EXAMPLE = Path(__file__).resolve().parents[1] / "rack.example.yaml"
# A bound on the wait for the switch's own notification, never a figure asserted.
NOTIFICATION_BOUND_S = 15

pytestmark = [pytest.mark.timeout(90), pytest.mark.skipif(not lab.SOFT_SWITCH.exists(), reason=f"{lab.SOFT_SWITCH} is not built (make setup)")]


@pytest.fixture(scope="module")
def soft_switch(tmp_path_factory):
    switch = lab.SoftSwitch({}, tmp_path_factory.mktemp("switch") / "switch.log", devices={1: "net_null0"}, vdevs=("net_null0,no-rx=1",))
    switch.start()
    yield switch
    switch.stop()


def flow(src_port: int) -> FiveTuple:
    # Toward web-1 (jumbo in the example rack): merge-eligible.
    return FiveTuple.parse("198.51.100.7", "10.10.0.10", 6, src_port, 5201)


class Notifying:
    """The switch, with `notifications` coming in as if it had sent them (then none)."""

    def __init__(self, switch: fy.Switch, notifications: list[list[fy.P4TableEntry]]):
        self._switch = switch
        self._notifications = notifications

    async def read_idle_timeouts(self):
        for notification in self._notifications:
            yield notification
        await asyncio.Event().wait()

    def __getattr__(self, name):
        return getattr(self._switch, name)


async def test_a_notification_for_an_operators_flow_the_switch_holds_fresh_is_refused_and_a_real_one_is_taken(soft_switch, caplog):
    """Before: the handler forgot every merge flow a notification named, the operator's too, without looking."""
    config = load_config(EXAMPLE)
    controller = Controller(replace(config, switch=replace(config.switch, p4runtime=soft_switch.grpc_address)), lab.PIPELINE_512)
    state = controller.state
    operators, elephants, unknown = flow(40001), flow(40002), flow(40003)
    state.onload(operators, FlowOrigin.OPERATOR, idle_timeout_s=600)
    state.onload(elephants, FlowOrigin.ELEPHANT)
    state.onload(flow(40004), FlowOrigin.ELEPHANT, idle_timeout_s=1)
    options = fy.SwitchOptions(
        p4info=lab.PIPELINE_512 / "jumbogate.p4info.txtpb", p4blob=lab.PIPELINE_512 / "jumbogate.json", initial_election_id=10, device_id=1
    )
    caplog.set_level(logging.WARNING, logger="jumbogate.controller")
    async with fy.Switch("primary", soft_switch.grpc_address, options) as switch:
        written = {f: entries.merge_flow(f, state.flows[f].idle_timeout_s * 1_000_000_000) for f in (operators, elephants, flow(40004))}
        written[unknown] = entries.merge_flow(unknown, 1_000_000_000)  # on the switch, not the controller's
        await switch.insert(list(written.values()))
        without_timeout = replace(written[elephants], idle_timeout_ns=0)

        # Fed where the switch's notifications come in; the reads go to the switch itself.
        forged = Notifying(switch, [[written[operators], written[unknown], without_timeout, written[elephants]]])
        handler = asyncio.create_task(controller._read_idle_timeouts(forged))
        try:

            async def handled():
                while getattr(controller, "idle_timeouts_refused", 0) < 4 and {operators, elephants} <= set(state.flows):
                    await asyncio.sleep(0.02)

            await asyncio.wait_for(handled(), NOTIFICATION_BOUND_S)
        finally:
            handler.cancel()
            await asyncio.gather(handler, return_exceptions=True)
        assert {operators, elephants} <= set(state.flows), "a fresh entry's notification took a flow off the merge path"
        assert controller.idle_timeouts_refused == 4 and state.flows_expired == 0
        assert (await controller.stats()).idle_timeouts_refused == 4  # jumbogatectl stats, and the metrics from it
        refusal = [r.getMessage() for r in caplog.records if "idle-timeout notification" in r.getMessage()]
        assert len(refusal) == 1 and "4 of 4 entries not acted on" in refusal[0], refusal

        # The switch's own notification for the entry idle past its 1 s is acted on.
        reading = asyncio.create_task(controller._read_idle_timeouts(switch))
        try:

            async def expired():
                while flow(40004) in state.flows:
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(expired(), NOTIFICATION_BOUND_S)
        finally:
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
        assert state.flows_expired == 1 and {operators, elephants} <= set(state.flows)
