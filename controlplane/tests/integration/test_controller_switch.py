"""The real controller against a real switch: jumbogate-switch, and BMv2 where present.

One switch and one controller per target; tests that restart either put
things back. The switch is read back by an independent P4Runtime client
(a backup with a lower election id), never through the controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import finsy as fy
import grpc
import pytest
import yaml

from jumbogate import translate
from jumbogate.config import load_config
from jumbogate.controller import RESYNC_INTERVAL_S, read_managed
from jumbogate.p4 import names
from jumbogate.reconcile import plan
from jumbogate.state import PolicyState
from jumbogate.v1 import nic_pb2, nic_pb2_grpc
from testlab import lab

pytestmark = [pytest.mark.timeout(300)]
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


@pytest.fixture(scope="module", params=TARGETS)
def rig(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"controller-{request.param}")
    with running(lambda veths: Rig(tmp, veths, request.param), "jgc") as rig:
        yield rig


def test_initial_programming_is_read_back_from_the_switch(rig):
    result, actual = rig.desired_vs_switch()
    assert result.empty, f"switch differs from the config: {result.summary()}"
    kinds = {}
    for entity in actual:
        kinds[entity.WhichOneof("entity")] = kinds.get(entity.WhichOneof("entity"), 0) + 1
    routes = rig.config.routes
    assert kinds["action_profile_member"] == sum(len(r.next_hops) for r in routes) and kinds["action_profile_group"] == len(routes)
    # Per port a role; per route an LPM entry and a next_hops entry; per instance address a policy entry.
    addresses = sum(len(i.addresses) for i in rig.config.instances)
    assert kinds["table_entry"] >= len(PORTS) + 2 * len(routes) + addresses


def ip(text: str) -> int:
    return int(ipaddress.ip_address(text))


def mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def test_switch_holds_what_the_rack_config_says(rig):
    """Each value of rack_config() above, as the entry it must become, written out by hand (not by translate)."""
    roles = {port: role for port, role in ((1, 1), (2, 1), (3, 2), (4, 2), (5, 3))}
    assert {m: a for m, _, a, _, d in rig.table("port_roles") if not d} == {(("ingress_port", port),): (("role", role),) for port, role in roles.items()}
    # too_deep: forward
    assert rig.table("depth_policy") == {((), "forward_too_deep", (), 0, True)}
    # fleet jumbo true; the SmartNIC is not up yet: nothing is steered.
    assert rig.table("fleet_policy") == FLEET_ON
    assert rig.table("nic_port") == {((), "no_nic_port", (), 0, True)}
    assert rig.table("elephant_config") == {((), "set_elephant_threshold", (("bytes", 20000),), 0, True)}
    assert rig.table("signal_source") == {((), "signal_from_original_destination", (), 0, True)}
    # web-1 jumbo (both addresses), legacy-1 not.
    assert {(m, a) for m, _, a, _, d in rig.table("instances_v4") if not d} == {
        ((("instance_addr", ip("10.10.0.10")),), (("enabled", 1),)),
        ((("instance_addr", ip("10.10.0.20")),), (("enabled", 0),)),
    }
    assert {(m, a) for m, _, a, _, d in rig.table("instances_v6") if not d} == {((("instance_addr", ip("fd00:10::10")),), (("enabled", 1),))}
    # path_mtus: 198.51.100.0/24 at 1400, and the default external MTUs for
    # everything else: 1500 for IPv4; IPv6's minimum, 1280, as the rack sets none.
    assert {(m, a) for m, _, a, _, d in rig.table("path_mtu_v4") if not d} == {
        ((("dst_addr", (ip("198.51.100.0"), 24)),), (("mtu", 1400),)),
        ((), (("mtu", 1500),)),
    }
    assert {(m, a) for m, _, a, _, d in rig.table("path_mtu_v6") if not d} == {((), (("mtu", 1280),))}
    # icmp_rate_pps 50: every port with a role gets 50 packets/s and a quarter second of burst.
    meters = {m.index: m.config for m in rig.read_raw(fy.P4MeterEntry(names.ICMP_SIGNAL_METER)) if m.config is not None}
    assert set(meters) == set(PORTS)
    assert {(c.cir, c.cburst, c.pir, c.pburst) for c in meters.values()} == {(50, 12, 50, 12)}
    # icmp_rate_per_source_pps 8: all 256 source cells, burst 2.
    sources = {m.index: m.config for m in rig.read_raw(fy.P4MeterEntry(names.ICMP_SOURCE_METER)) if m.config is not None}
    assert set(sources) == set(range(256))
    assert {(c.cir, c.cburst, c.pir, c.pburst) for c in sources.values()} == {(8, 2, 8, 2)}
    # Routes: each prefix leads to a group whose members are its next hops.
    members = {m.member_id: (m.action.args["port"], m.action.args["dst_mac"]) for m in rig.read_raw(fy.P4ActionProfileMember(names.ECMP_SELECTOR))}
    groups = {g.group_id: {members[x.member_id] for x in g.members} for g in rig.read_raw(fy.P4ActionProfileGroup(names.ECMP_SELECTOR))}
    # A /0 route is written without its (wildcard) match field.
    routes = {(m[0][1] if m else "default"): a[0][1] for m, _, a, _, d in rig.table("routes_v4") if not d}
    routes.update({m[0][1]: a[0][1] for m, _, a, _, d in rig.table("routes_v6") if not d and m})
    upstream = {(1, mac("02:00:00:00:a0:01")), (2, mac("02:00:00:00:b0:01"))}
    assert groups[routes["default"]] == upstream
    assert groups[routes[(ip("10.10.0.10"), 32)]] == {(3, mac("02:00:00:00:0a:0a"))}
    assert groups[routes[(ip("10.10.0.20"), 32)]] == {(4, mac("02:00:00:00:0a:14"))}
    assert groups[routes[(ip("fd00:10::10"), 128)]] == {(3, mac("02:00:00:00:0a:0a"))}
    # Merge services go on only with the SmartNIC (see test_merge_services_follow_the_config).
    assert {m for m, _, _, _, d in rig.table("merge_services") if not d} == set()


def reconciled(rig, what: str) -> dict:
    """Wait until a reconcile run built from the policy as it is now has finished; the stats then."""
    version = int(rig.stats().get("policy_version", 0))
    assert version > 0, "the policy's version never moved"
    return wait_until(lambda: (stats := rig.stats()) and int(stats["reconcile"].get("policy_version", 0)) >= version and stats, 30, what, interval=0.05)


def test_fleet_flag_reaches_the_switch(rig):
    """The flag flip is programmed by the run the flip triggers (waited for as an event, not a clock); the latency is printed."""
    flipped = time.monotonic()
    assert rig.ctl("fleet", "jumbo", "off").returncode == 0
    try:
        # The flip moved the policy's version: the first run that read it
        # wrote the flag, with nothing left over for a later run.
        reconciled(rig, "a reconcile run after the flip")
        print(f"fleet flag on the switch within {time.monotonic() - flipped:.2f} s")
        result, _ = rig.desired_vs_switch(fleet=False)
        assert result.empty, f"switch not updated: {result.summary()}"
        assert rig.table("fleet_policy") == FLEET_OFF
        refused = rig.ctl("instance", "jumbo", "legacy-1", "on")
        assert refused.returncode == 1 and "fleet jumbo flag is off" in refused.stderr
    finally:
        assert rig.ctl("fleet", "jumbo", "on").returncode == 0
    reconciled(rig, "a reconcile run after turning the flag back on")
    assert rig.desired_vs_switch()[0].empty


def test_controller_restart_writes_nothing(rig):
    before, _ = rig.read_switch()
    rig.controller.stop()
    rig.start_controller()
    stats = rig.wait_for_reconcile()
    totals = stats["reconcile"]
    assert (int(totals["inserted"]), int(totals["modified"]), int(totals["deleted"])) == (0, 0, 0), totals
    after, _ = rig.read_switch()
    assert sorted(e.SerializeToString(deterministic=True) for e in before) == sorted(e.SerializeToString(deterministic=True) for e in after)
    assert "ALREADY_EXISTS" not in rig.controller.output()


@contextlib.contextmanager
def intruder(rig, election_id: int | None = None):
    """Another client takes the switch (a higher election id: `election_id`, or the
    file's plus 1000) and may write until the block ends, when it leaves: changes
    made behind the controller's back. Raw P4Runtime, so nothing of the
    controller's own code is involved."""
    import grpc
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


def test_an_entry_changed_behind_the_controllers_back_is_put_back(rig):
    """Another client takes the switch and turns the fleet flag off. While
    it is primary the controller (a backup) writes nothing, even across its
    5-second resync; once the other client leaves, the controller is primary
    again and puts the entry back."""
    assert rig.table("fleet_policy") == FLEET_ON
    off = fy.P4TableEntry(
        names.FLEET_POLICY, is_default_action=True, action=fy.P4TableAction(names.SET_FLEET_JUMBO, enabled=0, guest_jumbo_mtu=8000, default_mtu=1500)
    )
    with intruder(rig) as modify:
        modify(off)
        modified = int(rig.stats()["reconcile"]["modified"])
        time.sleep(RESYNC_INTERVAL_S + 1)
        # Seen off first: a test that only waited for "on" would pass if the write had failed.
        assert rig.table("fleet_policy") == FLEET_OFF, "a backup controller wrote"
        assert int(rig.stats()["reconcile"]["modified"]) == modified
    wait_until(lambda: int(rig.stats()["reconcile"]["modified"]) > modified, 20, "the controller to repair the entry", interval=0.2)
    assert rig.table("fleet_policy") == FLEET_ON
    assert rig.desired_vs_switch()[0].empty


def second_controller(rig: Rig, election_offset: int, name: str) -> tuple[lab.Process, str]:
    """Another controller of the same switch, with the fleet flag off in its
    config (so whichever writes shows on the switch), another API address
    and its own election id."""
    config = yaml.safe_load(rig.config_path.read_text())
    config["switch"]["election_id"] = rig.config.switch.election_id + election_offset
    config["fleet"]["jumbo"] = False
    for instance in config["instances"]:
        instance["jumbo"] = False
    api = f"127.0.0.1:{lab.free_tcp_port()}"
    config["controller"] = {"listen": api}
    config["smartnic"] = {"control": f"127.0.0.1:{lab.free_tcp_port()}"}
    path = rig.tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    process = lab.Process([VENV_BIN / "jumbogate-controller", "--config", path, "--log-level", "INFO"], rig.tmp / f"{name}.log").start()
    lab.wait_for_tcp(api, 20, process=process.popen)
    return process, api


def test_a_controller_with_a_lower_election_id_cannot_write(rig):
    """P4Runtime arbitration: the second controller connects as a backup and
    writes nothing, however long it runs; the first goes on unaffected."""

    def writes() -> tuple:
        totals = rig.stats()["reconcile"]
        return tuple(int(totals.get(kind, 0)) for kind in ("inserted", "modified", "deleted", "failed_batches"))

    before = writes()
    second, _ = second_controller(rig, -5, "backup")
    try:
        wait_until(lambda: "as backup" in second.output(), 20, "the second controller to connect as a backup")
        time.sleep(RESYNC_INTERVAL_S + 1)
        assert rig.table("fleet_policy") == FLEET_ON, "the backup's fleet flag reached the switch"
    finally:
        assert second.stop() == 0, second.output()[-2000:]
    assert "Traceback" not in second.output()
    assert writes() == before, "the primary rewrote entries: the backup must have changed something"


def test_a_controller_with_a_higher_election_id_takes_over_and_the_first_steps_back(rig):
    """The second controller becomes primary and writes its own policy; the
    first, now a backup, stops writing (no refused batches) until the second
    leaves, then is primary again and puts its policy back."""
    failed = int(rig.stats()["reconcile"]["failed_batches"])
    # Above any id used before on this switch: a controller re-promoted after
    # another client left carries on with that client's (higher) id, as
    # P4Runtime arbitration lets it (the intruder above used +1000).
    second, _ = second_controller(rig, +100_000, "takeover")
    try:
        wait_until(lambda: rig.table("fleet_policy") == FLEET_OFF, 20, "the higher election id to take the switch over")
        wait_until(lambda: not rig.stats()["switch_connected"], 10, "the first controller to step back")
        time.sleep(RESYNC_INTERVAL_S + 1)
        assert rig.table("fleet_policy") == FLEET_OFF, "the first controller wrote while a backup"
        assert int(rig.stats()["reconcile"]["failed_batches"]) == failed, "the first controller kept trying to write"
    finally:
        assert second.stop() == 0, second.output()[-2000:]
    wait_until(lambda: rig.table("fleet_policy") == FLEET_ON, 20, "the first controller to take the switch back")
    wait_until(lambda: rig.stats()["switch_connected"], 10, "the first controller to report the switch connected")
    assert rig.desired_vs_switch()[0].empty
    log = rig.controller.output()
    assert "as backup" in log and "Traceback" not in log, log[-3000:]


def test_switch_restart_converges(rig):
    rig.switch.stop()
    rig.switch.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            if rig.desired_vs_switch()[0].empty:
                break
        except Exception as err:  # the pipeline may not be back yet
            last = err
        else:
            last = None
        assert time.monotonic() < deadline, f"no convergence after switch restart ({last}); controller log:\n{rig.controller.output()[-3000:]}"
        time.sleep(0.3)
    log = rig.controller.output()
    assert "ALREADY_EXISTS" not in log and "Traceback" not in log


# ----- with the real SmartNIC on the switch's nic port -----

NIC_PORT = 5
MERGE_SERVICE_PORT = 5201
ELEPHANT_PORT = 7000


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


def tcp_burst(dport: int, count: int, sport: int = 40000, payload: int = 1460):
    """`count` in-order full-size segments of one external TCP flow toward web-1."""
    from scapy.all import IP, TCP, Ether, Raw

    return [
        Ether(src="02:00:00:00:a0:01", dst="02:00:00:00:01:01")
        / IP(src="203.0.113.7", dst="10.10.0.10", flags="DF", ttl=64)
        / TCP(sport=sport, dport=dport, flags="A", seq=1000 + i * payload, ack=1, window=65535)
        / Raw(bytes([i % 251]) * payload)
        for i in range(count)
    ]


def send_and_capture(rig: Rig, veths: list[lab.VethPair], packets, *, dport: int) -> list[int]:
    """Inject on external port 1 and return the IP lengths that reach web-1's port (3)."""
    from scapy.all import IP, TCP, AsyncSniffer, conf, sendp

    # Scapy caches interface indexes; each target's rig makes its veths
    # anew under the same names.
    conf.ifaces.reload()
    sniffer = AsyncSniffer(iface=veths[2].b, lfilter=lambda p: TCP in p and p[TCP].dport == dport, store=True)
    sniffer.start()
    time.sleep(0.3)
    sendp(packets, iface=veths[0].b, verbose=False)
    time.sleep(1.5)
    captured = sniffer.stop()
    return [p[IP].len for p in captured]


def nic_packets_in(rig: Rig) -> int:
    """The SmartNIC's own counter, read from it directly (not through the controller's cached view)."""
    import grpc

    from jumbogate.v1 import nic_pb2, nic_pb2_grpc

    with grpc.insecure_channel(rig.config.smartnic_control) as channel:
        return nic_pb2_grpc.NicStub(channel).GetStats(nic_pb2.GetNicStatsRequest(), timeout=10).packets_in


def assert_merged_through_nic(rig: Rig, veths: list[lab.VethPair], sport: int) -> None:
    """Segments of a merge-service flow pass through the SmartNIC, whole, and some leave merged.

    Whether neighbours meet inside the SmartNIC's delay bound depends on how
    fast the injector and BMv2 run on a loaded machine, so a burst that
    happened to trickle is tried again with a fresh flow (at most three times).
    """
    attempts = []
    for attempt in range(3):
        before = nic_packets_in(rig)
        sizes = send_and_capture(rig, veths, tcp_burst(MERGE_SERVICE_PORT, 24, sport=sport + attempt), dport=MERGE_SERVICE_PORT)
        assert sum(s - 40 for s in sizes) == 24 * 1460, f"byte count changed: {sizes}"
        assert nic_packets_in(rig) - before >= 24, "the segments did not take the merge path"
        attempts.append(sizes)
        if max(sizes) > 1500:
            return
    raise AssertionError(f"nothing was merged in three bursts: {attempts}")


@pytest.fixture(scope="module")
def nic_rig(rig):
    veths = [lab.VethPair(f"jgcs{i}", f"jgch{i}") for i in range(len(PORTS))]
    rig.nic = start_nic(rig, veths)
    try:
        wait_until(lambda: rig.stats()["nic"]["reachable"], 15, "the controller to see the SmartNIC")
        wait_until(lambda: rig.desired_vs_switch(nic_up=True)[0].empty, 10, "steering entries on the switch")
        yield rig, veths
    finally:
        rig.nic.stop()


def test_merge_services_follow_the_config_in_order(nic_rig):
    rig, _ = nic_rig
    services = {(m, p) for m, _, _, p, d in rig.table("merge_services") if not d}
    assert services == {
        ((("dst_addr", (ip("10.10.0.10"), 0xFFFFFFFF)), ("dst_port", (5201, 5210)), ("ip_version", 4)), 1),
        ((("dst_addr", (ip("fd00:10::10"), 2**128 - 1)), ("dst_port", (443, 443)), ("ip_version", 6)), 2),
    }
    assert rig.table("nic_port") == {((), "set_nic_port", (("port", NIC_PORT),), 0, True)}


def test_merge_service_traffic_is_merged_by_the_smartnic(nic_rig):
    rig, veths = nic_rig
    assert_merged_through_nic(rig, veths, sport=40000)


class Watch:
    """`jumbogatectl watch` running beside a test, its lines collected as they come."""

    def __init__(self, rig: Rig):
        import os
        import threading

        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [VENV_BIN / "jumbogatectl", "--controller", rig.api, "watch", "--duration", "120"],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=lambda: self.lines.extend(iter(self.process.stdout.readline, "")), daemon=True)
        self._reader.start()

    def subscribed(self, rig: Rig) -> None:
        """Make events (an instance flag flipped on and off) until the watch shows one."""

        def shown() -> bool:
            rig.ctl("instance", "jumbo", "legacy-1", "on")
            rig.ctl("instance", "jumbo", "legacy-1", "off")
            return any("instance_changed" in line for line in self.lines)

        wait_until(shown, 15, "the watch to show events", interval=0.3)

    def stop(self) -> str:
        self.process.terminate()
        self.process.wait(timeout=10)
        self._reader.join(timeout=10)
        return "".join(self.lines)


def test_smartnic_outage_bypasses_and_restores(nic_rig):
    """The outage is seen by `watch` as nic_down, the merge path is taken off
    the switch and traffic bypasses; a restarted SmartNIC is nic_up and merges."""
    rig, veths = nic_rig
    watch = Watch(rig)
    try:
        watch.subscribed(rig)
        outage_and_restart(rig, veths)
    finally:
        events = watch.stop()
    down, up = events.find("nic_down"), events.rfind("nic_up")
    assert 0 <= down < up, f"watch did not show nic_down then nic_up:\n{events}"


def outage_and_restart(rig: Rig, veths: list[lab.VethPair]) -> None:
    rig.nic.stop(sig=9)
    wait_until(lambda: not rig.stats()["nic"]["reachable"], 10, "the controller to notice the SmartNIC outage")
    wait_until(lambda: rig.desired_vs_switch(nic_up=False)[0].empty, 5, "merge-path entries removed from the switch")
    sizes = send_and_capture(rig, veths, tcp_burst(MERGE_SERVICE_PORT, 8, sport=40005), dport=MERGE_SERVICE_PORT)
    assert sizes == [1500] * 8, f"during the outage traffic must bypass, whole and unmerged: {sizes}"

    rig.nic = start_nic(rig, veths)
    wait_until(lambda: rig.stats()["nic"]["reachable"], 15, "the controller to see the restarted SmartNIC")
    wait_until(lambda: rig.desired_vs_switch(nic_up=True)[0].empty, 5, "merge-path entries restored")
    assert_merged_through_nic(rig, veths, sport=40010)


def elephant_entries(rig: Rig) -> list:
    return [m for m, _, _, _, d in rig.table("merge_flows") if not d and dict(m).get("dst_port") == ELEPHANT_PORT]


def test_metrics_move_with_the_traffic(nic_rig):
    """Prometheus scrapes before and after a merge-service burst: the switch's
    port and path counters and the SmartNIC's counters grow by what was sent."""
    from prometheus_client.parser import text_string_to_metric_families

    def scrape() -> dict:
        with urllib.request.urlopen(f"http://{rig.metrics}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}

    rig, veths = nic_rig
    before = scrape()
    assert before[("jumbogate_up", (("part", "switch"),))] == 1 and before[("jumbogate_up", (("part", "smartnic"),))] == 1
    assert_merged_through_nic(rig, veths, sport=40300)
    after = scrape()

    def grew(name: str, **labels) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after[key] - before.get(key, 0)

    assert grew("jumbogate_port_packets_total", port="1", role="external", direction="ingress") >= 24
    assert grew("jumbogate_port_bytes_total", port="1", role="external", direction="ingress") >= 24 * 1514
    assert grew("jumbogate_path_packets_total", path="merge") >= 24
    assert grew("jumbogate_path_packets_total", path="bypass") == 0, "a merge-service burst took the bypass"
    assert grew("jumbogate_smartnic_packets_in_total") >= 24
    assert grew("jumbogate_smartnic_merged_packets_total") >= 1
    waits = grew("jumbogate_smartnic_merge_delay_seconds_count")
    assert waits >= 1 and waits == grew("jumbogate_smartnic_merge_delay_seconds_bucket", le="+Inf")
    # Each wait is under the SmartNIC's delay bound (10 ms at most).
    assert 0 < grew("jumbogate_smartnic_merge_delay_seconds_sum") <= waits * 0.01
    assert grew("jumbogate_path_bytes_total", path="merge") >= 24 * 1500
    # Table fill, read from the switch: the merge services the rack config
    # names, against the table's size in the P4Info.
    assert after[("jumbogate_switch_table_entries", (("table", "merge_services"),))] == 2
    size = fy.P4Schema(lab.PIPELINE_512 / "jumbogate.p4info.txtpb").tables["merge_services"].size
    assert after[("jumbogate_switch_table_size", (("table", "merge_services"),))] == size
    assert after[("jumbogate_smartnic_fence_changes_refused_total", ())] == 0


def test_elephant_is_onloaded_then_expires(nic_rig):
    rig, veths = nic_rig
    watch = subprocess.Popen([VENV_BIN / "jumbogatectl", "--controller", rig.api, "--json", "watch", "--duration", "40"], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(watch.stdout), daemon=True)
    reader.start()
    try:
        # The watch must be subscribed before the burst: jumbogatectl takes a while to start under
        # load, and events published before it subscribed never reach it. A reload is an event of its own.
        def subscribed():
            rig.ctl("config", "reload")
            return any("EVENT_KIND_CONFIG_RELOADED" in line for line in list(lines))

        wait_until(subscribed, 30, "the watch to see an event")
        # 30 segments of 1500 bytes cross the 20000-byte threshold in one epoch.
        send_and_capture(rig, veths, tcp_burst(ELEPHANT_PORT, 30, sport=41000), dport=ELEPHANT_PORT)
        flows = wait_until(lambda: json.loads(rig.ctl("--json", "flows", "list").stdout).get("flows"), 10, "the elephant to be onloaded")
        assert flows[0]["flow"]["dst_port"] == ELEPHANT_PORT and flows[0]["origin"] == "FLOW_ORIGIN_ELEPHANT"
        # First the entry on the switch, then its expiry: a test that only
        # waited for "no entry" would pass if it had never been written.
        wait_until(lambda: elephant_entries(rig), 5, "the merge_flows entry on the switch")
        # No more traffic: the switch reports the entry idle after 4 s (idle_timeout_s: long enough for a
        # reader to see the entry first on a loaded machine; with 2 s it was sometimes gone before).
        wait_until(lambda: not json.loads(rig.ctl("--json", "flows", "list").stdout).get("flows"), 20, "the flow to expire")
        wait_until(lambda: not elephant_entries(rig), 5, "the merge_flows entry removed")
    finally:
        watch.terminate()
        watch.wait(timeout=10)
        reader.join(10)
    events = "".join(lines)
    assert "EVENT_KIND_ELEPHANT_DETECTED" in events and "EVENT_KIND_FLOW_ONLOADED" in events and "EVENT_KIND_FLOW_EXPIRED" in events


def merge_flow_ports(rig) -> set[tuple[int, int]]:
    """(src_port, dst_port) of every merge_flows entry on the switch."""
    return {(dict(m)["src_port"], dict(m)["dst_port"]) for m, _, _, _, default in rig.table("merge_flows") if not default}


def wait_for_switch(rig, predicate, what: str) -> None:
    """Wait for reconcile runs until the switch satisfies `predicate`."""
    wait_until(lambda: predicate(merge_flow_ports(rig)), 30, what, interval=0.2)


def test_restart_adopts_the_merge_flows_on_the_switch(nic_rig):
    rig, _ = nic_rig
    """A restarted controller keeps the merge flows it finds on the switch
    (origin "adopted"), writing nothing; the flow never leaves the switch."""
    assert rig.ctl("flows", "onload", "203.0.113.7:41000", "10.10.0.10:5201", "--idle", "600").returncode == 0
    try:
        wait_for_switch(rig, lambda ports: (41000, 5201) in ports, "the onloaded flow on the switch")
        rig.controller.stop()
        rig.start_controller()
        totals = rig.wait_for_reconcile()["reconcile"]
        assert (int(totals["inserted"]), int(totals["deleted"])) == (0, 0), totals
        flows = json.loads(rig.ctl("--json", "flows", "list").stdout)["flows"]
        assert [(f["flow"]["src_port"], f["origin"]) for f in flows] == [(41000, "FLOW_ORIGIN_ADOPTED")]
        assert (41000, 5201) in merge_flow_ports(rig)
    finally:
        rig.ctl("flows", "offload", "203.0.113.7:41000", "10.10.0.10:5201")
    wait_for_switch(rig, lambda ports: (41000, 5201) not in ports, "the offloaded flow gone")


def test_instance_flag_off_offloads_its_flows(nic_rig):
    rig, _ = nic_rig
    """Turning an instance's jumbo flag off takes its flows off the merge
    path, on the switch too; turning it on again does not bring them back."""
    assert rig.ctl("flows", "onload", "203.0.113.7:41001", "10.10.0.10:5201").returncode == 0
    wait_for_switch(rig, lambda ports: (41001, 5201) in ports, "the onloaded flow on the switch")
    assert rig.ctl("instance", "jumbo", "web-1", "off").returncode == 0
    try:
        wait_for_switch(rig, lambda ports: (41001, 5201) not in ports, "the flow off the switch")
        assert json.loads(rig.ctl("--json", "flows", "list").stdout).get("flows", []) == []
    finally:
        assert rig.ctl("instance", "jumbo", "web-1", "on").returncode == 0
    assert (41001, 5201) not in merge_flow_ports(rig)


# ----- rack.yaml reloaded (SIGHUP): each value reaches the data plane -----


def reload_with(rig: Rig, change) -> tuple[str, dict]:
    """Edit rack.yaml with change(config), send SIGHUP and wait until the controller applied or refused it
    and, when applied, a reconcile run built from the reloaded policy is done; returns ('applied' or 'refused', the stats then)."""
    config = yaml.safe_load(rig.config_path.read_text())
    change(config)
    rig.config_path.write_text(yaml.safe_dump(config))
    before = rig.stats()
    counted = before.get("config_reloads", {})
    applied, refused = int(counted.get("applied", 0)), int(counted.get("refused", 0))
    os.kill(rig.controller.popen.pid, signal.SIGHUP)

    def settled():
        counts = rig.stats().get("config_reloads", {})
        if int(counts.get("refused", 0)) > refused:
            return "refused"
        return int(counts.get("applied", 0)) > applied and "applied"

    outcome = wait_until(settled, 30, "the reload to be applied or refused")
    # A run under way at the reload may have read the old config: wait for
    # one built from the reloaded policy.
    return outcome, (reconciled(rig, "a reconcile run after the reload") if outcome == "applied" else rig.stats())


@contextlib.contextmanager
def reloaded(rig: Rig, change):
    """rack.yaml changed and reloaded for the test; the original reloaded after it."""
    original = rig.config_path.read_text()
    outcome, stats = reload_with(rig, change)
    try:
        assert outcome == "applied", stats["config_reloads"]
        yield stats
    finally:
        assert reload_with(rig, lambda config: config.clear() or config.update(yaml.safe_load(original)))[0] == "applied"
        assert rig.desired_vs_switch(nic_up=rig.stats()["nic"]["reachable"])[0].empty


def set_in(path: str, value):
    """A change that sets config[a][b]... = value for path 'a.b'."""

    def change(config):
        *parents, last = path.split(".")
        node = config
        for key in parents:
            node = node[key]
        node[last] = value

    return change


RELOADED_VALUES = [
    pytest.param(lambda config: [set_in("fleet.jumbo", False)(config)] + [i.update(jumbo=False) for i in config["instances"]], "fleet_policy", {((), "set_fleet_jumbo", (("default_mtu", 1500), ("enabled", 0), ("guest_jumbo_mtu", 8000)), 0, True)}, id="fleet.jumbo"),
    pytest.param(set_in("mtu.guest_jumbo", 7000), "fleet_policy", {((), "set_fleet_jumbo", (("default_mtu", 1500), ("enabled", 1), ("guest_jumbo_mtu", 7000)), 0, True)}, id="mtu.guest_jumbo"),
    pytest.param(set_in("mtu.default_external", 1400), "fleet_policy", {((), "set_fleet_jumbo", (("default_mtu", 1400), ("enabled", 1), ("guest_jumbo_mtu", 8000)), 0, True)}, id="mtu.default_external"),
    pytest.param(set_in("mtu.default_external_v6", 1492), "path_mtu_v6", {((), "set_path_mtu", (("mtu", 1492),), 0, False), ((), "set_path_mtu", (("mtu", 1280),), 0, True)}, id="mtu.default_external_v6"),
    pytest.param(set_in("switch.too_deep", "drop"), "depth_policy", {((), "drop_too_deep", (), 0, True)}, id="switch.too_deep"),
    pytest.param(set_in("elephant.threshold_bytes", 50000), "elephant_config", {((), "set_elephant_threshold", (("bytes", 50000),), 0, True)}, id="elephant.threshold_bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "table", "expected"), RELOADED_VALUES)
def test_a_reloaded_value_reaches_the_switch(rig, change, table, expected):
    with reloaded(rig, change):
        assert rig.table(table) == expected


def test_reloaded_instances_and_path_mtus_reach_the_switch(rig):
    def change(config):
        config["instances"][1]["jumbo"] = True  # legacy-1
        config["instances"].append({"id": "web-2", "addresses": ["10.10.0.30"], "jumbo": True})
        config["path_mtus"] = [{"prefix": "198.51.100.0/24", "mtu": 1300}, {"prefix": "203.0.113.0/24", "mtu": 1280}]

    with reloaded(rig, change):
        assert {(m, a) for m, _, a, _, d in rig.table("instances_v4") if not d} == {
            ((("instance_addr", ip("10.10.0.10")),), (("enabled", 1),)),
            ((("instance_addr", ip("10.10.0.20")),), (("enabled", 1),)),
            ((("instance_addr", ip("10.10.0.30")),), (("enabled", 1),)),
        }
        assert {(m, a) for m, _, a, _, d in rig.table("path_mtu_v4") if not d} == {
            ((("dst_addr", (ip("198.51.100.0"), 24)),), (("mtu", 1300),)),
            ((("dst_addr", (ip("203.0.113.0"), 24)),), (("mtu", 1280),)),
            ((), (("mtu", 1500),)),
        }


def test_reloaded_routes_ports_and_meters_reach_the_switch(rig):
    def change(config):
        config["switch"]["icmp_rate_pps"] = 80
        config["switch"]["icmp_rate_per_source_pps"] = 12
        config["switch"]["ports"] = [p for p in config["switch"]["ports"] if p["port"] != 4]
        config["routes"] = [r for r in config["routes"] if r["prefix"] != "10.10.0.20/32"]
        config["instances"] = [i for i in config["instances"] if i["id"] != "legacy-1"]

    with reloaded(rig, change):
        assert {m[0][1] for m, _, _, _, d in rig.table("port_roles") if not d} == {1, 2, 3, 5}
        routes = {m[0][1] for m, _, _, _, d in rig.table("routes_v4") if not d and m}
        assert (ip("10.10.0.20"), 32) not in routes and (ip("10.10.0.10"), 32) in routes
        meters = {m.index: m.config for m in rig.read_raw(fy.P4MeterEntry(names.ICMP_SIGNAL_METER)) if m.config is not None}
        assert set(meters) == {1, 2, 3, 5}
        assert {(c.cir, c.cburst) for c in meters.values()} == {(80, 20)}
        sources = {m.index: m.config for m in rig.read_raw(fy.P4MeterEntry(names.ICMP_SOURCE_METER)) if m.config is not None}
        assert {(c.cir, c.cburst) for c in sources.values()} == {(12, 3)}


def test_reloaded_admission_limits_are_reported(rig):
    with reloaded(rig, lambda config: set_in("elephant.max_flows", 77)(config) or set_in("elephant.max_onloads_per_epoch", 9)(config)) as stats:
        assert int(stats["admission"]["max_flows"]) == 77
        assert int(stats["admission"]["max_onloads_per_epoch"]) == 9


def test_a_reload_that_needs_a_restart_or_does_not_load_changes_nothing(rig):
    before = rig.table("fleet_policy")
    original = rig.config_path.read_text()
    try:
        outcome, stats = reload_with(rig, lambda config: set_in("controller.listen", "127.0.0.1:1")(config) or set_in("mtu.guest_jumbo", 7000)(config))
        assert outcome == "refused"
        assert "controller.listen changed, which needs a restart (nothing was applied)" in stats["config_reloads"]["last_refusal"]
        assert rig.table("fleet_policy") == before
        outcome, stats = reload_with(rig, lambda config: set_in("controller.listen", rig.api)(config) or set_in("mtu.guest_jumbo", 99999)(config))
        assert outcome == "refused" and "mtu.guest_jumbo" in stats["config_reloads"]["last_refusal"]
        assert rig.table("fleet_policy") == before
    finally:
        # The file as it was, reloaded: nothing to change.
        assert reload_with(rig, lambda config: config.clear() or config.update(yaml.safe_load(original)))[0] == "applied"
    assert rig.table("fleet_policy") == before


def test_reloaded_smartnic_values_reach_the_smartnic(nic_rig):
    rig, _ = nic_rig
    channel = grpc.insecure_channel(rig.config.smartnic_control)
    stub = nic_pb2_grpc.NicStub(channel)

    def change(config):
        config["smartnic"]["internal_prefixes"] = ["10.10.0.0/24", "fd00:10::/64", "10.20.0.0/16"]
        config["mtu"]["guest_jumbo"] = 7000
        config["mtu"]["default_external_v6"] = 1400
        config["path_mtus"] = [{"prefix": "198.51.100.0/24", "mtu": 1300}]

    try:
        with reloaded(rig, change):

            def pushed():
                nic = stub.GetConfig(nic_pb2.GetConfigRequest(), timeout=5)
                mtus = {e.prefix.cidr: e.mtu for e in stub.ListPathMtus(nic_pb2.ListPathMtusRequest(), timeout=5).entries}
                return (
                    nic.internal_mtu == 7000
                    and nic.default_path_mtu_v6 == 1400
                    and "10.20.0.0/16" in {p.cidr for p in nic.internal_prefixes}
                    and mtus == {"198.51.100.0/24": 1300}
                )

            wait_until(pushed, 10, "the SmartNIC to hold the reloaded values")
    finally:
        channel.close()


def test_reloaded_merge_services_and_idle_timeout_reach_the_switch(nic_rig):
    rig, _ = nic_rig

    def change(config):
        config["merge_services"].append({"prefix": "10.10.0.10/32", "ports": "8443"})
        config["elephant"]["idle_timeout_s"] = 7

    with reloaded(rig, change):
        ports = {dict(m)["dst_port"] for m, _, _, _, d in rig.table("merge_services") if not d}
        assert ports == {(5201, 5210), (443, 443), (8443, 8443)}
        # An operator's onload without --idle takes the reloaded default.
        assert rig.ctl("flows", "onload", "198.51.100.7:40123", "10.10.0.10:80").returncode == 0
        try:
            entries = wait_until(
                lambda: [e for e in rig.read_raw(fy.P4TableEntry(names.MERGE_FLOWS)) if e.match and e.match["src_port"] == 40123], 15, "the onloaded flow"
            )
            assert entries[0].idle_timeout_ns == 7_000_000_000
        finally:
            assert rig.ctl("flows", "offload", "198.51.100.7:40123", "10.10.0.10:80").returncode == 0
