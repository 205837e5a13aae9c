"""Runtime policy rules: the fleet rule, effective MTUs, merge eligibility, events."""

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from jumbogate.config import load_config
from jumbogate.flow import FiveTuple
from jumbogate.state import EventKind, FlowOrigin, PolicyError, PolicyState

EXAMPLE = Path(__file__).resolve().parents[1] / "rack.example.yaml"


@pytest.fixture
def state() -> PolicyState:
    return PolicyState.from_config(load_config(EXAMPLE))


def to_web(dport: int = 5201, proto: int = 6) -> FiveTuple:
    return FiveTuple.parse("203.0.113.7", "10.10.0.10", proto, 40000, dport)


def test_effective_mtu_follows_fleet_and_instance(state):
    assert state.effective_mtu("web-1") == 8500
    assert state.effective_mtu("legacy-1") == 1500
    state.set_fleet(False)
    assert state.effective_mtu("web-1") == 1500
    state.set_fleet(True)
    assert state.effective_mtu("web-1") == 8500, "the instance keeps its own flag while the fleet is off"


def test_instance_jumbo_with_fleet_off_fails_and_changes_nothing(state):
    state.set_fleet(False)
    version = state.version
    with pytest.raises(PolicyError) as info:
        state.set_instance_jumbo("legacy-1", True)
    assert info.value.code == "FAILED_PRECONDITION"
    assert state.instance_jumbo["legacy-1"] is False and state.version == version


def test_unknown_instance_is_not_found(state):
    with pytest.raises(PolicyError) as info:
        state.set_instance_jumbo("nope", True)
    assert info.value.code == "NOT_FOUND" and "web-1" in info.value.message


def test_only_tcp_and_udp_to_jumbo_instances_are_eligible(state):
    assert state.merge_eligible(to_web())
    assert state.merge_eligible(to_web(proto=17))
    assert not state.merge_eligible(FiveTuple.parse("203.0.113.7", "10.10.0.20", 6, 40000, 80))
    assert not state.merge_eligible(FiveTuple.parse("203.0.113.7", "10.10.0.20", 17, 40000, 80))
    assert not state.merge_eligible(FiveTuple.parse("10.10.0.10", "203.0.113.7", 6, 5201, 40000))
    assert state.onload(to_web(proto=17), FlowOrigin.OPERATOR).flow.protocol == 17
    with pytest.raises(PolicyError) as info:
        state.onload(FiveTuple.parse("203.0.113.7", "10.10.0.20", 17, 40000, 80), FlowOrigin.OPERATOR)
    assert info.value.code == "FAILED_PRECONDITION" and "TCP or UDP" in info.value.message


def test_fleet_off_offloads_every_flow(state):
    state.onload(to_web(5201), FlowOrigin.ELEPHANT)
    state.onload(to_web(5202), FlowOrigin.OPERATOR)
    queue = state.events.subscribe()
    state.set_fleet(False)
    assert state.flows == {}
    kinds = [queue.get_nowait().kind for _ in range(queue.qsize())]
    assert kinds == [EventKind.FLEET_CHANGED, EventKind.FLOW_OFFLOADED, EventKind.FLOW_OFFLOADED]


def test_onload_is_idempotent_and_uses_the_default_timeout(state):
    first = state.onload(to_web(), FlowOrigin.ELEPHANT)
    again = state.onload(to_web(), FlowOrigin.OPERATOR)
    assert first is again and first.idle_timeout_s == 10


def test_offload_unknown_flow_is_not_found_but_expiry_is_quiet(state):
    with pytest.raises(PolicyError) as info:
        state.offload(to_web())
    assert info.value.code == "NOT_FOUND"
    state.offload(to_web(), expired=True)


async def test_waiters_wake_on_change_and_time_out_otherwise(state):
    version = state.version
    assert await state.wait_for_change(version, timeout=0.05) == version
    waiter = asyncio.create_task(state.wait_for_change(version, timeout=5))
    await asyncio.sleep(0)
    state.set_fleet(False)
    assert await asyncio.wait_for(waiter, 1) == version + 1


def test_slow_watcher_loses_oldest_events_only(state):
    state.events._queue_size = 2
    queue = state.events.subscribe()
    for port in (5201, 5202, 5203):
        state.onload(to_web(port), FlowOrigin.OPERATOR)
    assert [queue.get_nowait().flow.dst_port for _ in range(2)] == [5202, 5203]


def test_flows_of_both_families_sort_ipv4_first():
    v6 = FiveTuple.parse("2001:db8::7", "fd00:10::10", 6, 40001, 443)
    v4 = FiveTuple.parse("203.0.113.7", "10.10.0.10", 6, 40000, 5201)
    v4_later = FiveTuple.parse("203.0.113.7", "10.10.0.10", 6, 40002, 5201)
    assert sorted([v6, v4_later, v4]) == [v4, v4_later, v6]
    assert sorted({v6, v4}) == [v4, v6]


def flow_from(n: int) -> FiveTuple:
    """The n-th flow toward the jumbo instance, from many sources."""
    return FiveTuple.parse(f"198.18.{n // 250}.{n % 250 + 1}", "10.10.0.10", 6, 1024 + n % 60000, 443)


def limited(max_flows: int, per_epoch: int) -> PolicyState:
    config = load_config(EXAMPLE)
    elephant = replace(config.elephant, max_flows=max_flows, max_onloads_per_epoch=per_epoch)
    return PolicyState.from_config(replace(config, elephant=elephant))


def test_elephants_beyond_the_epoch_budget_are_refused_and_counted():
    state = limited(max_flows=1000, per_epoch=5)
    onloaded = refused = 0
    for n in range(20):
        try:
            state.onload(flow_from(n), FlowOrigin.ELEPHANT, now=100.0)
            onloaded += 1
        except PolicyError as err:
            assert err.code == "RESOURCE_EXHAUSTED"
            refused += 1
    assert (onloaded, refused) == (5, 15)
    assert state.elephants_rate_limited == 15
    # The next sketch epoch (2^20 us) has a budget again.
    with pytest.raises(PolicyError):
        state.onload(flow_from(20), FlowOrigin.ELEPHANT, now=101.0)
    state.onload(flow_from(20), FlowOrigin.ELEPHANT, now=101.1)
    assert len(state.flows) == 6


def test_a_full_merge_path_evicts_the_oldest_elephant_for_an_elephant_or_the_operator():
    state = limited(max_flows=3, per_epoch=100)
    operator_flow = flow_from(0)
    state.onload(operator_flow, FlowOrigin.OPERATOR)
    state.onload(flow_from(1), FlowOrigin.ELEPHANT, now=1.0)
    state.onload(flow_from(2), FlowOrigin.ELEPHANT, now=1.0)
    queue = state.events.subscribe()

    state.onload(flow_from(3), FlowOrigin.ELEPHANT, now=1.0)
    assert list(state.flows) == [operator_flow, flow_from(2), flow_from(3)]
    assert state.flows_evicted == 1
    event = queue.get_nowait()
    assert event.kind == EventKind.FLOW_OFFLOADED and event.flow == flow_from(1) and "evicted" in event.detail

    # The operator is never locked out by elephants: its onload takes the
    # oldest elephant's place. Refused only when the operator's own flows
    # fill the merge path.
    state.onload(flow_from(4), FlowOrigin.OPERATOR)
    assert list(state.flows) == [operator_flow, flow_from(3), flow_from(4)] and state.flows_evicted == 2
    state.onload(flow_from(5), FlowOrigin.OPERATOR)
    with pytest.raises(PolicyError) as info:
        state.onload(flow_from(6), FlowOrigin.OPERATOR)
    assert info.value.code == "RESOURCE_EXHAUSTED" and "elephant.max_flows" in info.value.message
    assert state.operator_onloads_refused == 1 and len(state.flows) == 3


def test_operator_flows_are_never_evicted_by_elephants():
    state = limited(max_flows=2, per_epoch=100)
    for n in range(2):
        state.onload(flow_from(n), FlowOrigin.OPERATOR)
    with pytest.raises(PolicyError) as info:
        state.onload(flow_from(9), FlowOrigin.ELEPHANT, now=1.0)
    assert "all of them onloaded by the operator" in info.value.message
    assert set(state.flows) == {flow_from(0), flow_from(1)}


@pytest.mark.parametrize("timeout", [-1, 86_401])
def test_an_idle_timeout_out_of_bounds_is_refused(state, timeout):
    with pytest.raises(PolicyError) as info:
        state.onload(to_web(), FlowOrigin.OPERATOR, timeout)
    assert info.value.code == "INVALID_ARGUMENT" and state.flows == {}
