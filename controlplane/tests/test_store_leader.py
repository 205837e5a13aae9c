"""A controller whose etcd member loses its leader (partitioned from the rest of a real 3-member cluster).

etcd keeps a watch open on such a member and sends it nothing: the rest of the
cluster may change the policy and the controller would never hear of it. The
store asks etcd to cancel its watches when the member has no leader (gRPC
metadata "hasleader", what etcd's own client sends for WithRequireLeader), and
the watch then reads again, moving to another endpoint when it has several.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from jumbogate.config import load_config
from jumbogate.fleet import FleetPolicy
from jumbogate.store import PREFIX, EtcdStore, StoreUnavailable
from testlab.etcd_process import ETCD, etcdctl, missing_etcd
from testlab.lab import Process, free_tcp_port

EXAMPLE = Path(__file__).resolve().parents[1] / "rack.example.yaml"
# Short, so that a member notices within a second or two that it lost its leader.
HEARTBEAT_MS = 50
ELECTION_TIMEOUT_MS = 500
# etcd cancels a "hasleader" watch after three election timeouts without a leader
# (its monitorLeader); this bound only stops a broken test, it is not a figure asserted.
NO_LEADER_BOUND_S = 20 * ELECTION_TIMEOUT_MS / 1000

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(bool(missing_etcd()), reason="needs etcd and etcdctl (make setup installs them)")]


class Cluster:
    """Three etcd members on loopback, each with its own ports and data directory."""

    def __init__(self, tmp: Path, size: int = 3):
        self.names = [f"member-{n}" for n in range(size)]
        self.client_ports = {name: free_tcp_port() for name in self.names}
        self.peer_ports = {name: free_tcp_port() for name in self.names}
        self.tmp = tmp
        self.processes: dict[str, Process] = {}

    def client_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.client_ports[name]}"

    def store_url(self, *names: str) -> str:
        return "etcd://" + ",".join(f"127.0.0.1:{self.client_ports[name]}" for name in names)

    def start(self, name: str, state: str = "new") -> None:
        peers = ",".join(f"{n}=http://127.0.0.1:{self.peer_ports[n]}" for n in self.names)
        peer = f"http://127.0.0.1:{self.peer_ports[name]}"
        self.processes[name] = Process(
            [
                ETCD, "--name", name, "--data-dir", str(self.tmp / name),
                "--listen-client-urls", self.client_url(name), "--advertise-client-urls", self.client_url(name),
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", peers, "--initial-cluster-state", state, "--initial-cluster-token", "jumbogate-test",
                "--heartbeat-interval", str(HEARTBEAT_MS), "--election-timeout", str(ELECTION_TIMEOUT_MS),
                "--log-level", "warn", "--logger", "zap",
            ],
            self.tmp / f"{name}.log",
        ).start()  # fmt: skip

    def start_all(self, timeout: float = 30.0) -> Cluster:
        for name in self.names:
            self.start(name)
        self.wait_healthy(self.names, timeout)
        return self

    def wait_healthy(self, names, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for name in names:
            while etcdctl(self.client_url(name), "endpoint", "health").returncode != 0:
                if time.monotonic() > deadline:
                    raise AssertionError(f"etcd {name} not healthy within {timeout:.0f} s:\n{self.processes[name].output()[-2000:]}")
                time.sleep(0.1)

    def stop(self, name: str) -> None:
        self.processes[name].stop()

    def stop_all(self) -> None:
        for process in self.processes.values():
            process.stop()


@pytest.fixture
def cluster(tmp_path):
    cluster = Cluster(tmp_path).start_all()
    yield cluster
    cluster.stop_all()


async def test_a_watch_on_a_member_that_lost_its_leader_is_cancelled(cluster):
    """Before: the watch on a member whose two peers are gone stayed open and silent."""
    alone = cluster.names[0]
    store = EtcdStore(cluster.store_url(alone))
    await store.open()
    try:
        events = store._events(store.revision, {})
        first = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.5)  # the watch is made and waiting
        assert not first.done()
        for name in cluster.names[1:]:
            cluster.stop(name)
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="no leader"):
            await asyncio.wait_for(first, NO_LEADER_BOUND_S)
        print(f"\nwatch cancelled {time.monotonic() - started:.2f} s after the member's two peers stopped (election timeout {ELECTION_TIMEOUT_MS} ms)")
        await events.aclose()
    finally:
        await store.close()


async def test_a_controller_whose_member_lost_its_leader_says_so_and_reads_again_from_another(cluster, caplog):
    """The controller's watch on the first of three endpoints: its peers stop, the watch is
    cancelled and said so in one line, and once they are back the policy is read again."""
    alone, *others = cluster.names
    applied = []
    policy = FleetPolicy(EtcdStore(cluster.store_url(alone, *others)), load_config(EXAMPLE), "rack-1", lambda config, changed: applied.append(config))
    await policy.start()
    watch = asyncio.create_task(policy.run())
    try:
        caplog.set_level(logging.INFO, logger="jumbogate.store")
        await asyncio.sleep(0.5)  # the watch is made and waiting
        for name in others:
            cluster.stop(name)

        async def said() -> list[str]:
            while True:
                lines = [r.getMessage() for r in caplog.records if "has no leader" in r.getMessage()]
                if lines:
                    return lines
                await asyncio.sleep(0.05)

        lines = await asyncio.wait_for(said(), NO_LEADER_BOUND_S)
        assert "reading the store again from the next endpoint" in lines[0]

        # Which member the channel was on is not known: it may come back to the same one, whose reads
        # then run to their deadline. Each failed read moves on again (before: the first move was the
        # only one, and a controller that came back to its cut-off member stayed there).
        async def moved_again():
            while policy.store.moves < 2:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(moved_again(), NO_LEADER_BOUND_S)
        # Rotating over members without a leader is said once, not at every try.
        assert len([r for r in caplog.records if "has no leader" in r.getMessage()]) == 1
        for name in others:
            cluster.start(name, state="existing")
        cluster.wait_healthy(others)
        done = etcdctl(cluster.client_url(others[0]), "put", PREFIX + "fleet/jumbo", "false", "-w", "json")
        assert done.returncode == 0, done.stderr

        async def off():
            while policy.config.fleet_jumbo is not False:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(off(), NO_LEADER_BOUND_S)
        assert any("resumed" in r.getMessage() for r in caplog.records)
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
        await policy.store.close()
