"""The real controller against a real switch, and the real SmartNIC: what the integration tests share.

A Rig is one switch (jumbogate-switch, or BMv2 where present) and one
controller on veths; the switch is read back by an independent P4Runtime
client (a backup with a lower election id), never through the controller.
start_nic puts jumbogate-nic on the switch's nic port. The rig and nic_rig
fixtures (conftest.py) start one of each per test module and target.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import subprocess
import threading
import time
from pathlib import Path

import finsy as fy
import grpc
import pytest
import yaml

from jumbogate import translate
from jumbogate.config import load_config
from jumbogate.controller import read_managed
from jumbogate.reconcile import plan
from jumbogate.state import PolicyState
from testlab import lab

# Every test runs on each target; BMv2 needs the P4 toolchain (the bmv2 marker).
TARGETS = [pytest.param("soft", id="soft"), pytest.param("bmv2", id="bmv2", marks=pytest.mark.bmv2)]


VENV_BIN = lab.REPO / ".venv" / "bin"


PORTS = {1: "external", 2: "external", 3: "internal", 4: "internal", 5: "nic"}


# The fleet_policy entry as written out by hand: the flag and the MTUs of
# rack_config() (mtu.guest_jumbo 8000, not the program's 8500: the value
# must come from the config; default_external 1500).
FLEET_ON = {((), "set_fleet_jumbo", (("default_mtu", 1500), ("enabled", 1), ("guest_jumbo_mtu", 8000)), 0, True)}


FLEET_OFF = {((), "set_fleet_jumbo", (("default_mtu", 1500), ("enabled", 0), ("guest_jumbo_mtu", 8000)), 0, True)}


def rack_config(tmp: Path, veths: list[lab.VethPair], p4runtime: str, smartnic: str, listen: str, metrics: str) -> Path:
    """A rack matching the veths: switch port i is veth pair i-1."""

    def hop(port: int, dst_mac: str) -> dict:
        return {"port": port, "src_mac": veths[port - 1].mac(veths[port - 1].a), "dst_mac": dst_mac}

    config = {
        "fleet": {"jumbo": True},
        "mtu": {"internal": 9000, "guest_jumbo": 8000, "default_external": 1500},
        "switch": {
            "p4runtime": p4runtime,
            "pipeline": str(lab.PIPELINE_512),
            "icmp_rate_pps": 50,
            "icmp_rate_per_source_pps": 8,
            "too_deep": "forward",
            "ports": [{"port": n, "role": role} for n, role in PORTS.items()] + [{"port": 255, "role": "cpu"}],
        },
        "routes": [
            {"prefix": "0.0.0.0/0", "next_hops": [hop(1, "02:00:00:00:a0:01"), hop(2, "02:00:00:00:b0:01")]},
            {"prefix": "::/0", "next_hops": [hop(1, "02:00:00:00:a0:01"), hop(2, "02:00:00:00:b0:01")]},
            {"prefix": "10.10.0.10/32", "next_hops": [hop(3, "02:00:00:00:0a:0a")]},
            {"prefix": "10.10.0.20/32", "next_hops": [hop(4, "02:00:00:00:0a:14")]},
            {"prefix": "fd00:10::10/128", "next_hops": [hop(3, "02:00:00:00:0a:0a")]},
        ],
        "path_mtus": [{"prefix": "198.51.100.0/24", "mtu": 1400}],
        "instances": [
            {"id": "web-1", "addresses": ["10.10.0.10", "fd00:10::10"], "jumbo": True},
            {"id": "legacy-1", "addresses": ["10.10.0.20"], "jumbo": False},
        ],
        "merge_services": [{"prefix": "10.10.0.10/32", "ports": "5201-5210"}, {"prefix": "fd00:10::10/128", "ports": "443"}],
        "elephant": {"threshold_bytes": 20000, "idle_timeout_s": 4},
        "smartnic": {"control": smartnic},
        "controller": {"listen": listen, "metrics": metrics},
    }
    path = tmp / "rack.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Rig:
    def __init__(self, tmp: Path, veths: list[lab.VethPair], target: str):
        self.tmp = tmp
        self.target = target
        self.switch = lab.make_switch(target, {n: veths[n - 1].a for n in PORTS}, tmp / f"{target}.log")
        self.switch.grpc_address = f"127.0.0.1:{lab.free_tcp_port()}"
        self.api = f"127.0.0.1:{lab.free_tcp_port()}"
        self.metrics = f"127.0.0.1:{lab.free_tcp_port()}"
        self.config_path = rack_config(tmp, veths, self.switch.grpc_address, f"127.0.0.1:{lab.free_tcp_port()}", self.api, self.metrics)
        self.config = load_config(self.config_path)
        self.controller: lab.Process | None = None
        self.generation = 0

    def start_controller(self) -> None:
        self.generation += 1
        self.controller = lab.Process(
            [VENV_BIN / "jumbogate-controller", "--config", self.config_path, "--log-level", "INFO"], self.tmp / f"controller-{self.generation}.log"
        ).start()
        lab.wait_for_tcp(self.api, 20, process=self.controller.popen)

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([VENV_BIN / "jumbogatectl", "--controller", self.api, *args], capture_output=True, text=True, timeout=30)

    def stats(self) -> dict:
        done = self.ctl("--json", "stats")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def wait_for_reconcile(self, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stats = self.stats()
            if stats["switch_connected"] and int(stats["reconcile"]["runs"]) >= 1:
                return stats
            time.sleep(0.2)
        raise AssertionError(f"controller never reconciled; its log:\n{self.controller.output()[-3000:]}")

    def read_switch(self) -> tuple[list, fy.P4Schema]:
        """Read what reconciliation manages, with an independent backup client."""

        async def go():
            options = fy.SwitchOptions(p4info=lab.PIPELINE_512 / "jumbogate.p4info.txtpb", initial_election_id=1)
            async with fy.Switch("reader", self.switch.grpc_address, options) as reader:
                return await read_managed(reader, PolicyState.from_config(self.config)), reader.p4info

        return asyncio.run(go())

    def read_raw(self, *queries) -> list:
        """Decoded entities read by an independent backup client (finsy's own decoding, not the controller's)."""

        async def go():
            options = fy.SwitchOptions(p4info=lab.PIPELINE_512 / "jumbogate.p4info.txtpb", initial_election_id=1)
            async with fy.Switch("raw-reader", self.switch.grpc_address, options) as reader:
                return [entity async for entity in reader.read(list(queries))]

        return asyncio.run(go())

    def table(self, alias: str) -> set[tuple]:
        """(match items, action name, action args) of every entry of one table, defaults included."""
        out = set()
        for entry in self.read_raw(fy.P4TableEntry(alias), fy.P4TableEntry(alias, is_default_action=True)):
            if entry.table_id != alias:
                continue
            action = entry.action
            name = getattr(action, "name", None) or f"group {getattr(action, 'group_id', None)}"
            args = tuple(sorted(getattr(action, "args", {}).items()))
            out.add((tuple(sorted((entry.match or {}).items())), name, args, entry.priority, entry.is_default_action))
        return out

    def desired_vs_switch(self, *, fleet: bool = True, nic_up: bool = False):
        state = PolicyState.from_config(self.config)
        state.fleet_jumbo = fleet
        actual, schema = self.read_switch()
        desired = [e.encode(schema) for e in translate.desired_entities(state, nic_up=nic_up)]
        return plan(desired, actual), actual


@contextlib.contextmanager
def running(make_rig, veth_prefix: str):
    """A rig (make_rig(veths)) with its switch and controller started and reconciled; both stopped after."""
    with lab.veth_pairs(veth_prefix, len(PORTS)) as veths:
        rig = make_rig(veths)
        rig.switch.start()
        try:
            rig.start_controller()
            rig.wait_for_reconcile()
            yield rig
        finally:
            if rig.controller:
                rig.controller.stop()
            rig.switch.stop()


def ip(text: str) -> int:
    return int(ipaddress.ip_address(text))


def mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def reconciled(rig, what: str) -> dict:
    """Wait until a reconcile run built from the policy as it is now has finished; the stats then."""
    version = int(rig.stats().get("policy_version", 0))
    assert version > 0, "the policy's version never moved"
    return wait_until(lambda: (stats := rig.stats()) and int(stats["reconcile"].get("policy_version", 0)) >= version and stats, 30, what, interval=0.05)


@contextlib.contextmanager
def intruder(rig, election_id: int | None = None):
    """Another client takes the switch (a higher election id: `election_id`, or the
    file's plus 1000) and may write until the block ends, when it leaves: changes
    made behind the controller's back. Raw P4Runtime, so nothing of the
    controller's own code is involved."""
    from finsy.proto import p4r, p4r_grpc

    election_id = election_id or rig.config.switch.election_id + 1000
    election = p4r.Uint128(high=election_id >> 64, low=election_id & ((1 << 64) - 1))
    schema = fy.P4Schema(lab.PIPELINE_512 / "jumbogate.p4info.txtpb")
    with grpc.insecure_channel(rig.switch.grpc_address) as channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        leaving = threading.Event()

        def requests():
            yield p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(device_id=rig.config.switch.device_id, election_id=election))
            # Closing the request side would end the stream and with it the
            # intruder's primacy: hold it open until the block ends.
            leaving.wait()

        stream = stub.StreamChannel(requests())
        arbitration = next(stream).arbitration
        assert arbitration.status.code == 0, f"the intruder did not become primary: {arbitration}"

        def modify(entity) -> None:
            update = p4r.Update(type=p4r.Update.MODIFY, entity=entity.encode(schema))
            stub.Write(p4r.WriteRequest(device_id=rig.config.switch.device_id, election_id=election, updates=[update]), timeout=10)

        try:
            yield modify
        finally:
            leaving.set()
            stream.cancel()


NIC_PORT = 5


def start_nic(rig: Rig, veths: list[lab.VethPair]) -> lab.Process:
    binary = lab.NIC
    assert binary.exists(), "jumbogate-nic is not built: run 'make setup'"
    rig.nic_generation = getattr(rig, "nic_generation", 0) + 1
    nic = lab.start_dpdk_service(
        [
            binary,
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--file-prefix",
            f"jgc-nic-{rig.target}-{rig.nic_generation}",
            "-l",
            "0-1",
            f"--vdev=net_af_packet0,iface={veths[NIC_PORT - 1].b},blocksz=12288,framesz=12288,framecnt=512,qpairs=1",
            "--",
            "--grpc",
            rig.config.smartnic_control,
            "--internal-prefix",
            "10.10.0.0/24",
            "--internal-prefix",
            "fd00:10::/64",
            # Injected test traffic is slow: let every flow wait for its
            # neighbours (up to 1 ms) so that merging is visible.
            "--delay-rate-threshold-gbps",
            "0",
            "--delay-max-us",
            "1000",
        ],  # fmt: skip
        rig.tmp / f"nic-{rig.nic_generation}.log",
        rig.config.smartnic_control,
    )
    return nic


def wait_until(predicate, timeout: float, what: str, interval: float = 0.2):
    return lab.wait_until(predicate, what, timeout, interval)
