"""Each rack's learned path MTUs in a real etcd: published by the rack's leader under its
election lease, replaced by the next leader's view, gone once no leader holds the rack."""

from __future__ import annotations

import asyncio
import ipaddress
import json

import pytest
from aetcd import rpc

from jumbogate.config import load_config
from jumbogate.election import LEASE_TTL_S, Election
from jumbogate.learned import encode_paths, learned_key, publish_while_leading, read_fleet
from jumbogate.state import MAX_LEARNED_PATHS, LearnedPath, PolicyState
from jumbogate.store import EtcdStore
from testlab import lab

pytestmark = [pytest.mark.timeout(60)]
# A bound on waits, never a figure asserted: it only stops a broken test.
BOUND_S = 20
NOW = 1_800_000_000.0


def path(address: str, mtu: int, age_s: float) -> LearnedPath:
    return LearnedPath(address=ipaddress.ip_address(address), mtu=mtu, method="fragments", learned_at=NOW - age_s)


class RackController:
    """A rack's controller reduced to what publishing needs: its candidacy and the paths its SmartNIC taught it."""

    def __init__(self, store: EtcdStore, rack: str, name: str, paths: list[LearnedPath]):
        self.election = Election(store, rack, name)
        self.rack = rack
        self.state = PolicyState.from_config(load_config(lab.REPO / "controlplane" / "rack.example.yaml"))
        self.state.update_learned_paths(paths)
        self.publishing: asyncio.Task | None = None

    async def lead(self) -> int:
        leadership = await self.election.campaign()
        self.publishing = asyncio.create_task(publish_while_leading(self.election.store, self.rack, leadership.lease, self.state))
        return leadership.lease

    def die(self) -> None:
        """As if the process were killed: nothing refreshes the lease, nothing publishes."""
        self.election._stop_keepalive()
        self.publishing.cancel()


async def controller(url: str, rack: str, name: str, paths: list[LearnedPath]) -> RackController:
    store = EtcdStore(url)
    await store.open()
    return RackController(store, rack, name, paths)


async def published(store: EtcdStore, rack: str) -> tuple[list, int] | None:
    """(the rack's published paths as stored, the lease they are bound to), or None when absent."""
    reply = await rpc.KVStub(store.channel).Range(rpc.RangeRequest(key=learned_key(rack)))
    return (json.loads(reply.kvs[0].value), reply.kvs[0].lease) if reply.kvs else None


async def until(predicate, what: str):
    for _ in range(BOUND_S * 10):
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def shown(items: list) -> list[tuple[str, int]]:
    return [(item["address"], item["mtu"]) for item in items]


async def test_the_leader_publishes_its_racks_paths_under_its_lease_and_the_next_leader_its_own(etcd):
    a1 = await controller(etcd.store_url, "rack-a", "a1", [path("203.0.113.7", 1280, 30), path("198.51.100.9", 1400, 5)])
    a2 = await controller(etcd.store_url, "rack-a", "a2", [path("192.0.2.5", 1450, 2)])
    b1 = await controller(etcd.store_url, "rack-b", "b1", [path("198.51.100.9", 1500, 9)])
    store = a1.election.store
    lease = await asyncio.wait_for(a1.lead(), BOUND_S)
    standby = asyncio.create_task(a2.lead())
    await asyncio.wait_for(b1.lead(), BOUND_S)

    # Newest first, under the leader's lease, which etcd expires within the election's TTL.
    now = await until(lambda: published(store, "rack-a"), "rack A's leader to publish")
    assert now[1] == lease
    assert shown(now[0]) == [("198.51.100.9", 1400), ("203.0.113.7", 1280)]
    assert now[0][0] == {"address": "198.51.100.9", "mtu": 1400, "method": "fragments", "learned_at": NOW - 5}
    ttl = await rpc.LeaseStub(store.channel).LeaseTimeToLive(rpc.LeaseTimeToLiveRequest(ID=lease))
    assert 0 < ttl.TTL <= LEASE_TTL_S and ttl.grantedTTL == LEASE_TTL_S
    # The standby publishes nothing, and the policy's keys never hold a learned path.
    assert not standby.done()
    assert not [key for key in (await store.snapshot()).entries if "learned" in key or "192.0.2.5" in key]

    # A change is published: the path's MTU fell.
    a1.state.update_learned_paths([path("203.0.113.7", 1200, 1), path("198.51.100.9", 1400, 5)])
    await until(lambda: published_as(store, "rack-a", [("203.0.113.7", 1200), ("198.51.100.9", 1400)]), "the fallen MTU published")

    # Side by side: each rack its own.
    fleet = await read_fleet(store)
    assert {rack: [(p.address, p.mtu) for p in paths] for rack, paths in fleet.items()} == {
        "rack-a": [("203.0.113.7", 1200), ("198.51.100.9", 1400)],
        "rack-b": [("198.51.100.9", 1500)],
    }

    # The leader dies: its lease runs out, the standby leads and publishes its own view under its own lease.
    a1.die()
    second_lease = await asyncio.wait_for(standby, BOUND_S)
    after = await until(lambda: published_as(store, "rack-a", [("192.0.2.5", 1450)]), "the new leader's view")
    assert after[1] == second_lease != lease
    ttl = await rpc.LeaseStub(store.channel).LeaseTimeToLive(rpc.LeaseTimeToLiveRequest(ID=lease))
    assert ttl.TTL == -1  # the dead leader's lease is gone, and with it what it had put

    # No controller left in rack A: its paths leave the store; rack B's stay.
    a2.die()
    await until(lambda: absent(store, "rack-a"), "rack A's paths to leave with its last leader's lease")
    assert list(await read_fleet(store)) == ["rack-b"]
    b1.publishing.cancel()
    await b1.election.resign()
    assert await absent(store, "rack-b")  # a clean stop revokes the lease at once
    for each in (a1, a2, b1):
        await each.election.store.close()


async def published_as(store: EtcdStore, rack: str, expected: list[tuple[str, int]]):
    now = await published(store, rack)
    return now if now is not None and shown(now[0]) == expected else None


async def absent(store: EtcdStore, rack: str) -> bool:
    return await published(store, rack) is None


def test_a_racks_value_is_bounded_to_the_paths_a_controller_keeps_newest_first():
    paths = [path(f"10.{i // 256}.{i % 256}.1", 1280 + i % 200, age_s=i) for i in range(MAX_LEARNED_PATHS + 100)]
    items = json.loads(encode_paths(paths))
    assert len(items) == MAX_LEARNED_PATHS
    assert [item["address"] for item in items] == [str(p.address) for p in paths[:MAX_LEARNED_PATHS]]
    # Far below etcd's 1.5 MiB request limit.
    assert len(encode_paths(paths)) < 64 * 1024
