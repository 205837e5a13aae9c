"""The controller's SmartNIC link (jumbogate.nic.NicLink) against the real jumbogate-nic.

No switch is needed: the link talks to the SmartNIC's control API only. After
each step the SmartNIC is read back through its own API, never through the
link: the config it runs, its path MTUs, its flows; then it is killed and
started again, and the link must notice, report it, and push everything anew.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import grpc
import pytest

from jumbogate.config import RackConfig, load_config
from jumbogate.flow import FiveTuple
from jumbogate.nic import NicLink
from jumbogate.state import EventKind, FlowOrigin, PolicyError, PolicyState
from jumbogate.v1 import common_pb2, nic_pb2, nic_pb2_grpc
from testlab import lab

pytestmark = [pytest.mark.timeout(180)]

NIC_BINARY = lab.NIC
ELEPHANT = FiveTuple.parse("203.0.113.7", "10.10.0.10", 6, 40000, 5201)
SECOND = FiveTuple.parse("2001:db8::7", "fd00:10::10", 6, 40001, 443)
STALE_PREFIX = "192.0.2.0/24"


def rack_yaml(tmp: Path, control: str) -> Path:
    path = tmp / "rack.yaml"
    path.write_text(
        f"""
fleet: {{jumbo: true}}
mtu: {{guest_jumbo: 8000, default_external: 1400, default_external_v6: 1300}}
switch:
  p4runtime: 127.0.0.1:1
  pipeline: {lab.PIPELINE_512}
  ports: [{{port: 1, role: external}}, {{port: 3, role: internal}}, {{port: 5, role: nic}}]
routes:
  - {{prefix: 0.0.0.0/0, next_hops: [{{port: 1, src_mac: "02:00:00:00:00:01", dst_mac: "02:00:00:00:00:02"}}]}}
path_mtus: [{{prefix: 198.51.100.0/24, mtu: 1300}}, {{prefix: "2001:db8:5::/48", mtu: 1280}}]
instances: [{{id: web-1, addresses: [10.10.0.10, "fd00:10::10"], jumbo: true}}]
smartnic: {{control: "{control}", internal_prefixes: [10.10.0.0/24, "fd00:10::/64"]}}
"""
    )
    return path


class Nic:
    """The real jumbogate-nic on one veth, and a stub of its own API for reading it back."""

    def __init__(self, tmp: Path, iface: str, control: str):
        self.tmp, self.iface, self.control = tmp, iface, control
        self.starts = 0
        self.process: lab.Process | None = None

    def start(self) -> None:
        self.starts += 1
        self.process = lab.start_dpdk_service(
            [
                NIC_BINARY,
                "--no-huge",
                "-m",
                "512",
                "--no-pci",
                "--file-prefix",
                f"jgl-nic-{self.starts}",
                "-l",
                "0-1",
                f"--vdev=net_af_packet0,iface={self.iface},blocksz=12288,framesz=12288,framecnt=512,qpairs=1",
                "--",
                "--grpc",
                self.control,
                "--internal-prefix",
                "10.10.0.0/24",
                # A path MTU the rack config does not list: the link must remove it.
                "--path-mtu",
                f"{STALE_PREFIX}=1300",
            ],  # fmt: skip
            self.tmp / f"nic-{self.starts}.log",
            self.control,
        )

    def kill(self) -> None:
        self.process.stop(sig=signal.SIGKILL)

    def stub(self) -> nic_pb2_grpc.NicStub:
        return nic_pb2_grpc.NicStub(grpc.insecure_channel(self.control))

    def config(self) -> nic_pb2.NicConfig:
        return self.stub().GetConfig(nic_pb2.GetConfigRequest(), timeout=5)

    def path_mtus(self) -> dict[str, int]:
        return {e.prefix.cidr: e.mtu for e in self.stub().ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5).entries}

    def flows(self) -> set[FiveTuple]:
        reply = self.stub().ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5)
        return {FiveTuple.parse(f.flow.src_ip, f.flow.dst_ip, f.flow.protocol, f.flow.src_port, f.flow.dst_port) for f in reply.flows}

    def boot_id(self) -> int:
        return self.stub().GetInfo(nic_pb2.GetInfoRequest(), timeout=5).boot_id


async def eventually(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await asyncio.to_thread(predicate)
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def link_rack(tmp_path: Path) -> tuple[str, RackConfig, PolicyState]:
    """The SmartNIC's control address, the rack config naming it, and a policy."""
    if not NIC_BINARY.exists():
        pytest.fail(f"{NIC_BINARY} is missing; run 'make setup'")
    control = f"127.0.0.1:{lab.free_tcp_port()}"
    config = load_config(rack_yaml(tmp_path, control))
    return control, config, PolicyState.from_config(config)


def test_link_configures_mirrors_reports_and_repushes(tmp_path):
    control, config, state = link_rack(tmp_path)
    with lab.veth_pairs("jgl", 1) as veths:
        nic = Nic(tmp_path, veths[0].b, control)
        nic.start()

        async def scenario():
            link = NicLink(config, state, poll_interval=0.1)
            task = asyncio.create_task(link.run())
            try:
                await eventually(lambda: link.up, "the link to see the SmartNIC")
                first_boot = await asyncio.to_thread(nic.boot_id)
                assert link.status.boot_id == first_boot
                # The rack's MTUs and exactly its path MTUs (the stale one removed).
                running = await asyncio.to_thread(nic.config)
                assert (running.internal_mtu, running.default_path_mtu_v4, running.default_path_mtu_v6) == (8000, 1400, 1300)
                # The rack's internal prefixes replace the start-up option (10.10.0.0/24 alone).
                assert [p.cidr for p in running.internal_prefixes] == ["10.10.0.0/24", "fd00:10::/64"]
                assert await asyncio.to_thread(nic.path_mtus) == {"198.51.100.0/24": 1300, "2001:db8:5::/48": 1280}

                # Onloaded flows are mirrored, offloaded ones removed.
                state.onload(ELEPHANT, FlowOrigin.ELEPHANT, idle_timeout_s=30)
                state.onload(SECOND, FlowOrigin.OPERATOR)
                await eventually(lambda: nic.flows() == {ELEPHANT, SECOND}, "both flows on the SmartNIC")
                state.offload(SECOND)
                await eventually(lambda: nic.flows() == {ELEPHANT}, "the offloaded flow to leave the SmartNIC")

                # Slow (stopped for a moment, its connection held): one
                # unanswered poll does not take it down.
                os.kill(nic.process.popen.pid, signal.SIGSTOP)
                try:
                    await asyncio.sleep(1.5)  # one poll times out after its 1 s
                    assert link.up, "a SmartNIC slow for one poll was reported down"
                finally:
                    os.kill(nic.process.popen.pid, signal.SIGCONT)
                await eventually(lambda: link._slow_polls == 0, "the next poll to be answered")

                # Killed: reported down within 2 s, with an event.
                await asyncio.to_thread(nic.kill)
                killed = time.monotonic()
                await eventually(lambda: not link.up, "the link to report the SmartNIC down", timeout=2.0)
                print(f"SmartNIC reported down {time.monotonic() - killed:.2f} s after SIGKILL")
                assert any(e.kind == EventKind.NIC_DOWN for e in state.events.history)
                assert not link.has_flow(ELEPHANT)

                # Restarted (a new boot id, empty): everything pushed again.
                await asyncio.to_thread(nic.start)
                await eventually(lambda: link.up, "the link to see the restarted SmartNIC")
                assert link.status.boot_id == await asyncio.to_thread(nic.boot_id) != first_boot
                running = await asyncio.to_thread(nic.config)
                assert (running.internal_mtu, running.default_path_mtu_v4, running.default_path_mtu_v6) == (8000, 1400, 1300)
                assert await asyncio.to_thread(nic.path_mtus) == {"198.51.100.0/24": 1300, "2001:db8:5::/48": 1280}
                await eventually(lambda: nic.flows() == {ELEPHANT}, "the onloaded flow re-pushed")
                assert [e.kind for e in state.events.history].count(EventKind.NIC_UP) == 2
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

        try:
            asyncio.run(scenario())
        finally:
            nic.kill()


def test_a_smartnic_back_after_a_long_outage_is_seen_at_once(tmp_path):
    """gRPC backs off reconnecting to an address that refused it, up to two
    minutes by default: a SmartNIC started after a long outage stayed
    unseen, and bypassed, for tens of seconds. The link caps the backoff."""
    control, config, state = link_rack(tmp_path)
    with lab.veth_pairs("jgo", 1) as veths:
        nic = Nic(tmp_path, veths[0].b, control)

        async def scenario() -> float:
            link = NicLink(config, state, poll_interval=0.1)
            task = asyncio.create_task(link.run())
            try:
                # Long enough for gRPC's default backoff to grow past 10 s.
                await asyncio.sleep(OUTAGE_S)
                assert not link.up
                await asyncio.to_thread(nic.start)
                answering = time.monotonic()
                await eventually(lambda: link.up, "the link to see the SmartNIC", timeout=30)
                return time.monotonic() - answering
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

        try:
            seen_after = asyncio.run(scenario())
        finally:
            nic.kill()
    print(f"SmartNIC seen {seen_after:.2f} s after it answered, following a {OUTAGE_S} s outage")
    # The backoff this guards against kept the link down for tens of
    # seconds; a loaded machine takes a few to start DPDK and configure it.
    assert seen_after <= 5.0


OUTAGE_S = 25


def test_a_deposed_leaders_changes_are_refused_once_its_successor_changed_the_smartnic(tmp_path):
    """Two controllers' links to one SmartNIC, each with the election id it led with: once the
    successor (1:12) changed it, the deposed one's (1:10) changes are refused and counted by both
    sides, while the successor's go through; a standby's link changes nothing at all."""
    control, config, _ = link_rack(tmp_path)
    with lab.veth_pairs("jgd", 1) as veths:
        nic = Nic(tmp_path, veths[0].b, control)
        nic.start()

        def link(election_id: int | None) -> tuple[NicLink, PolicyState]:
            state = PolicyState.from_config(config)
            made = NicLink(config, state, poll_interval=0.1)
            made.fenced, made.election_id = True, election_id
            return made, state

        def fence() -> tuple[int, int, int]:
            f = nic.stub().GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).fence
            return f.election_id_high, f.election_id_low, f.changes_refused

        async def scenario():
            (deposed, deposed_state), (leader, leader_state) = link((1 << 64) | 10), link((1 << 64) | 12)
            standby, _ = link(None)
            tasks = [asyncio.create_task(deposed.run())]
            try:
                await eventually(lambda: deposed.up, "the first leader to configure the SmartNIC")
                assert await asyncio.to_thread(fence) == (1, 10, 0)
                tasks.append(asyncio.create_task(leader.run()))
                await eventually(lambda: leader.up, "the successor to configure the SmartNIC")
                assert await asyncio.to_thread(fence) == (1, 12, 0)

                deposed_state.onload(ELEPHANT, FlowOrigin.OPERATOR)
                await eventually(lambda: deposed.fenced_calls >= 1, "the deposed leader's onload to be refused")
                assert "1:10 is below 1:12" in deposed.last_fenced
                leader_state.onload(SECOND, FlowOrigin.OPERATOR)
                await eventually(lambda: nic.flows() == {SECOND}, "the successor's onload on the SmartNIC")
                assert leader.fenced_calls == 0
                assert (await asyncio.to_thread(fence))[:2] == (1, 12)
                assert (await asyncio.to_thread(fence))[2] == deposed.fenced_calls

                # A standby's link refuses a change itself, before any call.
                with pytest.raises(PolicyError) as refused:
                    await standby.ask("ProbePath", common_pb2.ProbePathRequest(address="198.51.100.7"))
                assert refused.value.code == "FAILED_PRECONDITION" and "standby" in refused.value.message
                assert (await asyncio.to_thread(fence))[2] == deposed.fenced_calls
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run(scenario())
        finally:
            nic.kill()
