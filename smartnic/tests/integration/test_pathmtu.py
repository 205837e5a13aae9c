"""Path MTU discovery between two borders across real Linux routers.

    instance A -- [jumbogate-nic A] -- router 1 ==(MTU WAN_MTU)== router 2 -- [jumbogate-nic B] -- instance B
    10.1.0.1                           fragments IPv4 without DF                                  10.2.0.1
    fd01::1                            drops larger IPv6 and IPv4 with DF                         fd02::1

Each NIC is a bump in the wire (--return-port both ways) with its rack's
prefix internal and --pmtu-discovery on. The first outbound TCP packet from
A to B starts a probe round; B answers; A learns the path MTU and splits to
it from then on. The middle link's MTU is not one of the probe sizes, so
the fragment method (largest fragment: WAN_MTU - 4 for IPv4) beats the sized
probes (4000), and IPv6, which routers never fragment, gets 4000.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

from testlab.nic_harness import Netns, PacketPort, af_packet_vdev, in_netns, run, start_nic, start_null_nic, unique, wait_for
from testlab.nic_packets import internet_checksum

pytestmark = pytest.mark.timeout(180)

WAN_MTU = 5000
PORT = 48999
MAGIC = 0x4A47504D
A4, B4 = "10.1.0.1", "10.2.0.1"
A6, B6 = "fd01::1", "fd02::1"


def link(ns_a: Netns, name_a: str, ns_b: Netns, name_b: str, mtu: int, ipv6: tuple[bool, bool]) -> None:
    """A veth pair with offloads off; IPv6 only where asked (the NICs' ends stay quiet)."""
    run("ip", "link", "add", name_a, "netns", ns_a.name, "type", "veth", "peer", "name", name_b, "netns", ns_b.name)
    for ns, name, v6 in ((ns_a, name_a, ipv6[0]), (ns_b, name_b, ipv6[1])):
        ns.exec("sysctl", "-q", "-w", f"net.ipv6.conf.{name}.disable_ipv6={0 if v6 else 1}")
        ns.exec("ip", "link", "set", name, "mtu", str(mtu), "up")
        ns.exec("ethtool", "-K", name, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off", check=False)


def address(ns: Netns, iface: str, *cidrs: str) -> None:
    for cidr in cidrs:
        ns.exec("ip", "addr", "add", cidr, "dev", iface, *(["nodad"] if ":" in cidr else []))


def wan_vdev(side: str, iface: str) -> str:
    """B's WAN port captures with libpcap: the af_packet port reassembles
    IPv4 fragments before the program sees them (DPDK asks the kernel for
    PACKET_FANOUT_FLAG_DEFRAG), which would hide how the WAN cut a probe.
    A's stays af_packet, so B's probes of A show what such a port does."""
    if side == "nb":
        return f"--vdev=net_pcap1,rx_iface_in={iface},tx_iface={iface}"
    return af_packet_vdev(1, iface)


class TwoBorders:
    def __init__(self, log_dir, nic_options: list[str]):
        self.ns = {name: Netns(f"jp{name}") for name in ("ia", "na", "r1", "r2", "nb", "ib")}
        ns = self.ns
        self.names = {key: unique(key) for key in ("ia", "nai", "nao", "r1a", "r1b", "r2a", "r2b", "nbo", "nbi", "ib")}
        n = self.names
        self.nics = []
        link(ns["ia"], n["ia"], ns["na"], n["nai"], 9000, (True, False))
        link(ns["na"], n["nao"], ns["r1"], n["r1a"], 9000, (False, True))
        link(ns["r1"], n["r1b"], ns["r2"], n["r2a"], WAN_MTU, (True, True))
        link(ns["r2"], n["r2b"], ns["nb"], n["nbo"], 9000, (True, False))
        link(ns["nb"], n["nbi"], ns["ib"], n["ib"], 9000, (False, True))
        address(ns["ia"], n["ia"], f"{A4}/24", f"{A6}/64")
        address(ns["r1"], n["r1a"], "10.1.0.254/24", "fd01::fe/64")
        address(ns["r1"], n["r1b"], "10.12.0.1/30", "fd12::1/64")
        address(ns["r2"], n["r2a"], "10.12.0.2/30", "fd12::2/64")
        address(ns["r2"], n["r2b"], "10.2.0.254/24", "fd02::fe/64")
        address(ns["ib"], n["ib"], f"{B4}/24", f"{B6}/64")
        for inst, gw4, gw6 in (("ia", "10.1.0.254", "fd01::fe"), ("ib", "10.2.0.254", "fd02::fe")):
            ns[inst].exec("ip", "route", "add", "default", "via", gw4)
            ns[inst].exec("ip", "-6", "route", "add", "default", "via", gw6)
        for router in ("r1", "r2"):
            ns[router].exec("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
            ns[router].exec("sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1")
        ns["r1"].exec("ip", "route", "add", "10.2.0.0/24", "via", "10.12.0.2")
        ns["r1"].exec("ip", "-6", "route", "add", "fd02::/64", "via", "fd12::2")
        ns["r2"].exec("ip", "route", "add", "10.1.0.0/24", "via", "10.12.0.1")
        ns["r2"].exec("ip", "-6", "route", "add", "fd01::/64", "via", "fd12::1")
        for side, inner, outer, prefixes in (("na", "nai", "nao", ("10.1.0.0/24", "fd01::/64")), ("nb", "nbi", "nbo", ("10.2.0.0/24", "fd02::/64"))):
            wan = "net_pcap1" if side == "nb" else "net_af_packet1"
            options = [
                "--mbufs",
                "4096",
                "--return-port",
                f"net_af_packet0={wan}",
                "--return-port",
                f"{wan}=net_af_packet0",
                "--pmtu-discovery",
                "on",
                *nic_options,
            ]
            for prefix in prefixes:
                options += ["--internal-prefix", prefix]
            self.nics.append(
                start_nic(
                    [af_packet_vdev(0, n[inner]), wan_vdev(side, n[outer]), "-l", "0-1"],
                    options,
                    ns[side],
                    log_dir,
                    memory_mb=1024,
                )
            )
        self.nic_a, self.nic_b = self.nics

    def close(self) -> None:
        for nic in self.nics:
            nic.stop()
        for ns in self.ns.values():
            ns.delete()


TEST_OPTIONS = ["--pmtu-replies-per-s", "200", "--pmtu-timeout-ms", "300"]


@pytest.fixture
def borders(log_dir):
    wan = TwoBorders(log_dir, TEST_OPTIONS)
    try:
        yield wan
    finally:
        wan.close()


def knock(ns: Netns, host: str, port: int = 9) -> None:
    """One outbound TCP connection attempt (a SYN; B has no listener there)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with in_netns(ns.name), socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect((host, port))
        except OSError:
            pass


def path(nic, host: str) -> dict:
    paths = nic.telemetry("/jumbogate/paths").values()
    return next((p for p in paths if p["address"] == host), {})


def learned(nic, host: str, mtu: int, timeout: float = 10.0) -> dict:
    return wait_for(lambda: (p := path(nic, host)) and p["mtu"] == mtu and p, f"{host} to be learned at {mtu}", timeout)


def settled(borders) -> None:
    """Both borders' rounds are over (second copies sent and answered)."""
    for nic in borders.nics:
        wait_for(lambda nic=nic: not any(p["probing"] for p in nic.telemetry("/jumbogate/paths").values()), "the probe rounds to end")


def message(kind: int, msg_type: int, nonce: bytes, probe_size: int, sizes: list[int]) -> bytes:
    return struct.pack("!IBBBB8sHH", MAGIC, 1, msg_type, kind, len(sizes), nonce, probe_size, 0) + b"".join(struct.pack("!H", s) for s in sizes)


def send_udp(ns: Netns, src: str, dst: str, payload: bytes, count: int = 1) -> None:
    """IPv4/UDP datagrams with a chosen (spoofed) source, from inside ns."""
    udp = struct.pack("!HHHH", PORT, PORT, 8 + len(payload), 0) + payload
    send_ipv4(ns, src, dst, [udp] * count)


def send_ipv4(ns: Netns, src: str, dst: str, payloads: list[bytes], protocol: int = 17, fragment: int = 0, ids: list[int] | None = None) -> None:
    """Raw IPv4 packets (the kernel fills in the checksum), from inside ns."""
    with in_netns(ns.name), socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as sock:
        for i, payload in enumerate(payloads):
            header = struct.pack(
                "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ids[i] if ids else 0, fragment, 64, protocol, 0, socket.inet_aton(src), socket.inet_aton(dst)
            )
            sock.sendto(header + payload, (dst, 0))


def test_both_versions_learn_the_path_mtu_in_one_round_trip(borders):
    a, b = borders.nic_a, borders.nic_b
    start = time.monotonic()
    knock(borders.ns["ia"], B4)
    v4 = learned(a, B4, WAN_MTU - 4)
    v4_seconds = time.monotonic() - start
    # The router cut the 9000-byte probe in fragments of at most WAN_MTU
    # (data in multiples of 8): the largest is the path MTU, and it beats
    # the largest sized probe that got through (4000).
    assert v4["method"] == "fragments"
    assert 0 < v4["rtt_us"] < 300_000

    # Neighbour discovery first: its first solicitation is lost while the
    # interfaces come up, and a retry takes a second.
    borders.ns["ia"].exec("ping", "-6", "-c", "1", "-W", "3", B6, check=False)
    knock(borders.ns["ia"], B6)
    v6 = learned(a, B6, 4000)
    assert v6["method"] == "sizes", "IPv6 routers never fragment: only sized probes can tell"
    assert 0 < v6["rtt_us"] < 300_000

    stats_a = a.telemetry("/jumbogate/pathmtu")
    stats_b = b.telemetry("/jumbogate/pathmtu")
    assert stats_a["rounds_started"] == 2 and stats_a["replies_forged"] == 0
    assert stats_a["learned_now"] == 2
    assert stats_b["fragments_seen"] >= 2 * 2, "both copies of the IPv4 probe arrive in fragments"
    assert stats_b["probes_answered"] >= 2 + 3, "the fragmented probe and the sized ones that fit"
    assert stats_b["probes_malformed"] == 0
    # The accounting identity holds with probes created and replies absorbed.
    for nic in (a, b):
        totals = nic.telemetry("/jumbogate/stats")
        assert (
            totals["packets_in"] + totals["packets_created"]
            == totals["packets_out"] + totals["packets_held"] + totals["packets_dropped"] + totals["packets_absorbed"]
        )
    print(
        f"IPv4 learned {v4['mtu']} ({v4['method']}) after {v4_seconds * 1000:.0f} ms, reply rtt {v4['rtt_us']} us; IPv6 learned {v6['mtu']} ({v6['method']}), rtt {v6['rtt_us']} us"
    )


def test_with_discovery_off_the_api_says_so(log_dir):
    import grpc

    from jumbogate.v1 import common_pb2, nic_pb2

    nic = start_null_nic(log_dir, [])
    try:
        stub = nic.stub()
        listed = stub.ListLearnedPaths(nic_pb2.ListLearnedPathsRequest(), timeout=5)
        assert not listed.enabled and not listed.paths
        with pytest.raises(grpc.RpcError) as off:
            stub.ProbePath(common_pb2.ProbePathRequest(address=B4), timeout=5)
        assert off.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "--pmtu-discovery" in off.value.details()
        assert not stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).path_mtu_discovery
    finally:
        nic.stop()


def test_the_control_api_lists_probes_and_counts(borders):
    import grpc

    from jumbogate.v1 import common_pb2, nic_pb2

    a = borders.nic_a.stub()
    with pytest.raises(grpc.RpcError) as unknown:
        a.ProbePath(common_pb2.ProbePathRequest(address=B4), timeout=10)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as bad:
        a.ProbePath(common_pb2.ProbePathRequest(address="10.2.0.300"), timeout=10)
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    knock(borders.ns["ia"], B4)
    learned(borders.nic_a, B4, WAN_MTU - 4)
    settled(borders)
    listed = a.ListLearnedPaths(nic_pb2.ListLearnedPathsRequest(), timeout=5)
    assert listed.enabled and [(p.address, p.mtu, p.method) for p in listed.paths] == [(B4, WAN_MTU - 4, "fragments")]
    rounds = a.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).path_mtu_discovery["rounds_started"]

    probed = a.ProbePath(common_pb2.ProbePathRequest(address=B4), timeout=10)
    assert (probed.address, probed.mtu, probed.method, probed.probing) == (B4, WAN_MTU - 4, "fragments", False)
    assert 0 < probed.rtt_ms < 300 and probed.age_s < 1.0, "the answer is the new round's"
    stats = a.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).path_mtu_discovery
    assert stats["rounds_started"] == rounds + 1 and stats["learned_now"] == 1
    print(f"ProbePath {B4}: {probed.mtu} by {probed.method}, rtt {probed.rtt_ms:.2f} ms")


def test_on_request_a_few_more_round_trips_make_the_value_exact(borders):
    """ProbePath with exact: rounds of sizes between what passed and what did
    not narrow both versions to the middle link's MTU, to the byte."""
    import grpc  # noqa: F401  (the stub needs it loaded)

    from jumbogate.v1 import common_pb2, nic_pb2

    a = borders.nic_a.stub()
    borders.ns["ia"].exec("ping", "-6", "-c", "1", "-W", "3", B6, check=False)
    knock(borders.ns["ia"], B4)
    knock(borders.ns["ia"], B6)
    learned(borders.nic_a, B4, WAN_MTU - 4)
    learned(borders.nic_a, B6, 4000)
    settled(borders)
    before = a.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).path_mtu_discovery

    results = {}
    for host, first in ((B4, WAN_MTU - 4), (B6, 4000)):
        start = time.monotonic()
        probed = a.ProbePath(common_pb2.ProbePathRequest(address=host, exact=True), timeout=20)
        results[host] = (probed, time.monotonic() - start)
        # The first round gives what it gave before; the refinements raise it
        # to the link's MTU exactly: 4996 < 5000 by fragments, 4000 by sizes.
        assert (probed.mtu, probed.exact, probed.probing) == (WAN_MTU, True, False), (host, first, probed)
        assert probed.method == "sizes"
        assert path(borders.nic_a, host)["exact"] == 1
    after = a.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5).path_mtu_discovery
    refinements = after["refine_rounds"] - before["refine_rounds"]
    # IPv4: one round inside [4996, 5004); IPv6: [4000, 8000) takes four.
    assert 2 <= refinements <= 2 * 6
    assert after["replies_forged"] == 0 and after["rounds_started"] == before["rounds_started"] + 2

    # A plain round afterwards learns what a plain round learns, and does
    # not call it exact.
    plain = a.ProbePath(common_pb2.ProbePathRequest(address=B6), timeout=10)
    assert (plain.mtu, plain.exact) == (4000, False)
    for host, (probed, seconds) in results.items():
        print(f"exact {host}: {probed.mtu} in {seconds * 1000:.0f} ms (first round trip {probed.rtt_ms:.2f} ms)")
    print(f"refinement rounds: {refinements}")


RACK_A = """
fleet: {{jumbo: true}}
mtu: {{guest_jumbo: 8500, default_external: 1500}}
switch:
  p4runtime: 127.0.0.1:1
  pipeline: {pipeline}
  ports: [{{port: 1, role: external}}, {{port: 3, role: internal}}, {{port: 5, role: nic}}]
routes:
  - {{prefix: 0.0.0.0/0, next_hops: [{{port: 1, src_mac: "02:00:00:00:00:01", dst_mac: "02:00:00:00:00:02"}}]}}
path_mtus: [{{prefix: 192.0.2.0/24, mtu: 1400}}]
instances: [{{id: a-1, addresses: [{a4}, "{a6}"], jumbo: true}}]
smartnic: {{control: "{control}", internal_prefixes: [10.1.0.0/24, "fd01::/64"]}}
"""


def jumbogatectl(ns: Netns | None, controller: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "jumbogate.cli", "--controller", controller, *args]
    if ns is not None:
        command = ["ip", "netns", "exec", ns.name, *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=check)


def test_the_controller_carries_learned_paths_to_the_switch_and_the_operator(borders, tmp_path):
    """Border A's controller side: the SmartNIC link brings what discovery
    learned into the policy, the switch's desired entries get a host entry
    of that MTU, and jumbogatectl shows and probes it."""
    from jumbogate import p4, translate
    from jumbogate.config import load_config
    from jumbogate.nic import NicLink
    from jumbogate.server import PolicyService, serve
    from jumbogate.state import PolicyState
    from testlab import lab

    rack = tmp_path / "rack.yaml"
    rack.write_text(RACK_A.format(pipeline=lab.PIPELINE_512, a4=A4, a6=A6, control=borders.nic_a.grpc_address))
    config = load_config(rack)
    controller = f"unix:{tmp_path / 'controller.sock'}"
    knock(borders.ns["ia"], B4)
    learned(borders.nic_a, B4, WAN_MTU - 4)
    settled(borders)

    async def scenario():
        state = PolicyState.from_config(config)
        link = NicLink(config, state, poll_interval=0.1)
        task = asyncio.create_task(link.run())

        async def stats():
            raise NotImplementedError

        server = await serve(PolicyService(state, stats, nic=link), controller)
        try:
            deadline = time.monotonic() + 10
            while ipaddress.ip_address(B4) not in state.learned_paths and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert link.up, f"the link never reached the SmartNIC at {config.smartnic_control}: {task.done() and task.exception()!r}"
            assert state.learned_paths, "nothing learned reached the policy"
            entities = translate.desired_entities(state, nic_up=True)
            assert p4.entries.path_mtu(f"{B4}/32", WAN_MTU - 4) in entities, "the switch is to hold the learned path MTU"
            assert p4.entries.path_mtu("192.0.2.0/24", 1400) in entities
            shown = await asyncio.to_thread(jumbogatectl, None, controller, "--json", "path", "show")
            probed = await asyncio.to_thread(jumbogatectl, None, controller, "path", "probe", B4)
            one = await asyncio.to_thread(jumbogatectl, None, controller, "--json", "path", "show", "192.0.2.7")
            unknown = await asyncio.to_thread(jumbogatectl, None, controller, "path", "probe", "198.51.100.1", check=False)
            exact = await asyncio.to_thread(jumbogatectl, None, controller, "path", "probe", "--exact", B4)
            human = await asyncio.to_thread(jumbogatectl, None, controller, "path", "show")
            defaults = [
                json.loads((await asyncio.to_thread(jumbogatectl, None, controller, "--json", "path", "show", host)).stdout)["paths"]
                for host in ("198.51.100.1", "2001:db8:ffff::1")
            ]
            return shown, probed, one, unknown, exact, human, defaults
        finally:
            await server.stop(grace=0.1)
            task.cancel()

    shown, probed, one, unknown, exact, human, defaults = asyncio.run(scenario())
    paths = json.loads(shown.stdout)
    assert paths["discovery"] is True
    assert [(p["address"], p["mtu"], p["source"], p["method"], p["on_switch"]) for p in paths["paths"]] == [(B4, WAN_MTU - 4, "learned", "fragments", True)]
    assert f"{B4}: path MTU {WAN_MTU - 4}, found from fragments in one round of" in probed.stdout
    assert [(p["address"], p["mtu"], p["source"]) for p in json.loads(one.stdout)["paths"]] == [("192.0.2.7", 1400, "configured")]
    # Nothing learned or configured: 1500 for IPv4, IPv6's minimum for IPv6.
    assert [[(p["address"], p["mtu"], p["source"]) for p in paths] for paths in defaults] == [
        [("198.51.100.1", 1500, "default")],
        [("2001:db8:ffff::1", 1280, "default")],
    ]
    assert unknown.returncode == 3 and "no outbound traffic to 198.51.100.1 seen yet" in unknown.stderr
    assert f"{B4}: path MTU {WAN_MTU}, exact (from sizes, first round trip" in exact.stdout
    assert f"{WAN_MTU}  learned (sizes, exact)" in human.stdout
    print(human.stdout)
    print(probed.stdout.strip())
    print(exact.stdout.strip())


SERVER = """
import hashlib, socket, sys
listener = socket.create_server(("{host}", 5201), family=socket.AF_INET6 if ":" in "{host}" else socket.AF_INET)
listener.settimeout({timeout})
print("listening", flush=True)
connection, _ = listener.accept()
connection.settimeout({timeout})
digest, total = hashlib.sha256(), 0
try:
    while chunk := connection.recv(1 << 20):
        digest.update(chunk)
        total += len(chunk)
except TimeoutError:
    pass
print(total, digest.hexdigest(), flush=True)
"""


def transfer(borders, host: str, data: bytes, timeout: float) -> tuple[bool, int]:
    """Bulk TCP from instance A to B: (B got exactly data, bytes B got).
    A stalled connection gives up after timeout seconds without progress."""
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", borders.ns["ib"].name, "python3", "-c", SERVER.format(host=host, timeout=timeout)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert receiver.stdout.readline().strip() == "listening"
        with in_netns(borders.ns["ia"].name), socket.create_connection((host, 5201), timeout=timeout) as connection:
            try:
                connection.sendall(data)
            except TimeoutError:
                pass
        total, digest = receiver.communicate(timeout=3 * timeout)[0].split()
    finally:
        receiver.kill()
    return digest == hashlib.sha256(data).hexdigest(), int(total)


def test_bulk_tcp_leaves_in_packets_of_the_learned_path_mtu(borders, tmp_path):
    ia, r1 = borders.ns["ia"], borders.ns["r1"]
    knock(ia, B4)
    learned(borders.nic_a, B4, WAN_MTU - 4)
    capture_file = tmp_path / "wan.pcap"
    capture = subprocess.Popen(
        ["ip", "netns", "exec", r1.name, "tcpdump", "-i", borders.names["r1b"], "-Q", "out", "-s", "96", "-U", "-w", str(capture_file), "tcp", "port", "5201"],
        stderr=subprocess.PIPE,
        text=True,
    )
    data = bytes(range(256)) * (16 << 12)  # 16 MiB
    try:
        assert capture.stderr.readline()
        intact, _ = transfer(borders, B4, data, timeout=20)
    finally:
        time.sleep(0.3)
        capture.send_signal(signal.SIGINT)
        capture.wait(timeout=10)
    assert intact, "B got different bytes than A sent"
    lengths = [int(n) for n in run("tshark", "-r", str(capture_file), "-T", "fields", "-e", "ip.len", timeout=60).stdout.split()]
    full = [n for n in lengths if n > 1500]
    assert max(lengths) == WAN_MTU - 4, "A's border splits to the learned path MTU, no more"
    assert len(full) > 0.9 * len([n for n in lengths if n > 100]), "bulk data crosses the WAN in packets above 1500 bytes"
    merged = borders.nic_b.telemetry("/jumbogate/stats")["merged_packets"]
    assert merged > 0, "B merges what arrives back up towards its internal MTU"
    print(f"{len(lengths)} packets across the WAN, {len(full)} of them above 1500 bytes (largest {max(lengths)}); B built {merged} merged packets")


@pytest.mark.parametrize("discovery", ["off", "on"])
def test_a_path_that_swallows_icmp_is_no_black_hole_with_discovery(log_dir, discovery):
    """Router 1 sends no ICMP at all, and A's border believes the WAN
    carries 9000 bytes (--default-path-mtu-v4 9000). Without discovery the
    9000-byte segments die at router 1 and nothing says so: the transfer
    stalls, as with any classic-PMTUD sender behind such a router. With
    it, the border learned the real path MTU before the first segment."""
    wan = TwoBorders(log_dir, [*TEST_OPTIONS, "--default-path-mtu-v4", "9000", "--pmtu-discovery", discovery])
    try:
        wan.ns["r1"].exec("ip", "rule", "add", "iif", "lo", "ipproto", "icmp", "blackhole")
        knock(wan.ns["ia"], B4)
        if discovery == "on":
            learned(wan.nic_a, B4, WAN_MTU - 4)
        data = bytes(range(256)) * (4 << 12)  # 4 MiB
        start = time.monotonic()
        intact, received = transfer(wan, B4, data, timeout=5)
        seconds = time.monotonic() - start
        # The classic check from instance A sees the same path the same way
        # either way: a DF sweep finds 5000, and nothing says so beyond it.
        sweep = jumbogatectl(wan.ns["ia"], "127.0.0.1:1", "--json", "--timeout", "1", "path", "audit", B4, "--wait", "0.5")
        audit = json.loads(sweep.stdout)
        assert audit["largest_passed"] == WAN_MTU and audit["signalled_mtu"] == 0
        assert "black hole" in audit["verdict"] and "error" in audit["border"]
        if discovery == "on":
            assert intact, f"B got {received} of {len(data)} bytes"
        else:
            assert received < len(data) // 2, "without discovery and without ICMP the path is a black hole"
        print(f"discovery {discovery}: {received} of {len(data)} bytes in {seconds:.1f} s")
    finally:
        wan.close()


def test_the_classic_check_sees_icmp_where_the_router_sends_it(borders):
    borders.ns["ia"].exec("ping", "-6", "-c", "1", "-W", "3", B6, check=False)  # neighbour discovery first
    sweep = jumbogatectl(borders.ns["ia"], "127.0.0.1:1", "--json", "--timeout", "1", "path", "audit", B6, "--wait", "0.5")
    audit = json.loads(sweep.stdout)
    assert audit["largest_passed"] == WAN_MTU and audit["signalled_mtu"] == WAN_MTU
    assert "classic PMTUD works" in audit["verdict"]
    print(f"audit {B6}: {len(audit['attempts'])} pings, largest {audit['largest_passed']}, ICMP names {audit['signalled_mtu']}")


def test_an_icmp_too_big_about_a_path_sends_a_new_round(log_dir):
    """The WAN link shrinks after the path was learned: the first ICMP
    "fragmentation needed" about a segment the border sent to the
    destination starts a round at once, which finds the new MTU. An error
    quoting anything else (anyone can forge one) is counted and ignored."""
    wan = TwoBorders(log_dir, [*TEST_OPTIONS, "--pmtu-icmp-gap-s", "2"])
    try:
        a = wan.nic_a
        knock(wan.ns["ia"], B4)
        learned(a, B4, WAN_MTU - 4)
        settled(wan)
        for ns, iface in ((wan.ns["r1"], wan.names["r1b"]), (wan.ns["r2"], wan.names["r2a"])):
            ns.exec("ip", "link", "set", iface, "mtu", "3000")
        time.sleep(2.2)
        # Forged errors first: from router 1 in its own name, quoting a
        # segment from A to B on ports and a sequence number A never used.
        for seq in range(0, 1 << 32, 1 << 28):
            send_ipv4(wan.ns["r1"], "10.12.0.1", A4, [icmp_too_big(A4, B4, 40000, 5201, seq)], protocol=1)
        stats = wait_for(lambda: (s := a.telemetry("/jumbogate/pathmtu"))["icmp_unmatched"] >= 16 and s, "the forged errors to be counted")
        assert stats["icmp_reprobes"] == 0 and path(a, B4)["mtu"] == WAN_MTU - 4
        # TCP from A to B: the border cuts A's segments to the learned
        # 4996, router 1 answers "fragmentation needed (mtu 3000)" about
        # them, through A's border.
        start = time.monotonic()
        intact, _ = transfer(wan, B4, bytes(1 << 20), timeout=10)
        seconds = time.monotonic() - start
        assert intact
        relearned = learned(a, B4, 2996)
        assert relearned["method"] == "fragments"
        stats = a.telemetry("/jumbogate/pathmtu")
        # One round answers every error within --pmtu-icmp-gap-s (2 s): a
        # transfer slowed past the gap by a loaded machine may take one
        # more round for each gap it spans, never more.
        assert 1 <= stats["icmp_reprobes"] <= 1 + int(seconds // 2), (stats["icmp_reprobes"], seconds)
        print(
            f"forged errors: {stats['icmp_unmatched']} unmatched; the router's during {seconds:.1f} s of TCP: {stats['icmp_reprobes']} round(s), {stats['icmp_ignored']} ignored, 2996 learned"
        )
    finally:
        wan.close()


def icmp_too_big(src: str, dst: str, sport: int, dport: int, seq: int, mtu: int = 1280) -> bytes:
    """An ICMP "fragmentation needed" quoting a TCP segment from src to dst."""
    quoted = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 1500, 0, 0x4000, 64, 6, 0, socket.inet_aton(src), socket.inet_aton(dst))
    quoted += struct.pack("!HHI", sport, dport, seq)
    icmp = struct.pack("!BBHHH", 3, 4, 0, 0, mtu) + quoted
    return icmp[:2] + struct.pack("!H", internet_checksum(icmp)) + icmp[4:]


LISTENER = """
import socket, time
listener = socket.create_server(("{host}", {port}), backlog=4096)
print("listening", flush=True)
time.sleep({seconds})
"""


def tcp_syn(src: str, dst: str, sport: int, dport: int, seq: int) -> bytes:
    """A bare SYN (no options: the least an outsider can send), checksum
    filled in, as the TCP bytes of an IPv4 packet."""
    header = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x02, 65535, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(header))
    return header[:16] + struct.pack("!H", internet_checksum(pseudo + header)) + header[18:]


def test_an_outsider_never_gets_more_probe_bytes_than_it_sends(borders):
    """Spoofed SYNs at an open port of instance A, from the addresses of
    B's rack (where a border answers probes), and forged "fragmentation
    needed" errors about a path A's border learned: the bytes of every
    probe A's border sends meanwhile are at most the bytes the attacker
    sent (before: 12 probes, 65,728 bytes, per SYN)."""
    a = borders.nic_a
    knock(borders.ns["ia"], B4)
    learned(a, B4, WAN_MTU - 4)
    settled(borders)
    listener = subprocess.Popen(
        ["ip", "netns", "exec", borders.ns["ia"].name, "python3", "-c", LISTENER.format(host=A4, port=8080, seconds=60)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert listener.stdout.readline().strip() == "listening"
        before = a.telemetry("/jumbogate/pathmtu")
        sent = 0
        # From the WAN, in the names of 100 hosts of B's rack: each SYN
        # makes instance A answer with a SYN-ACK through A's border.
        syns = [(f"10.2.0.{i}", tcp_syn(f"10.2.0.{i}", A4, 20000 + i, 8080, i)) for i in range(2, 102)]
        for src, syn in syns:
            send_ipv4(borders.ns["r1"], src, A4, [syn], protocol=6)
            sent += 20 + len(syn)
        # Forged errors about the learned path, from a router's address.
        forged = [icmp_too_big(A4, B4, 40000 + i, 5201, i << 24) for i in range(50)]
        send_ipv4(borders.ns["r1"], "10.12.0.1", A4, forged, protocol=1)
        sent += sum(20 + len(icmp) for icmp in forged)
        # Long enough for every round that could start to send both copies
        # (and for the listener's SYN-ACK retransmissions at 1 s).
        time.sleep(2.0)
        after = quiet_counters(a, "/jumbogate/pathmtu")
    finally:
        listener.kill()
    probe_bytes = after["probe_bytes"] - before["probe_bytes"]
    assert after["outbound_ignored"] - before["outbound_ignored"] >= len(syns), "instance A answered the SYNs through its border"
    assert after["icmp_unmatched"] - before["icmp_unmatched"] == len(forged)
    assert probe_bytes <= sent, f"{probe_bytes} bytes of probes for {sent} bytes sent"
    assert after["icmp_reprobes"] == before["icmp_reprobes"] and path(a, B4)["mtu"] == WAN_MTU - 4
    print(
        f"attacker sent {sent} bytes ({len(syns)} SYNs, {len(forged)} forged errors); A's border sent {probe_bytes} bytes of probes (ratio {probe_bytes / sent:.3f})"
    )


def test_forged_and_malformed_messages_change_nothing(borders):
    a, b = borders.nic_a, borders.nic_b
    knock(borders.ns["ia"], B4)
    learned(a, B4, WAN_MTU - 4)
    settled(borders)
    # From the WAN, in B's name: a reply without the round's nonce.
    send_udp(borders.ns["r1"], B4, A4, message(1, 2, b"\x00" * 8, 9000, [9000]), count=5)
    # A reply that is too short, and one claiming more than was sent.
    send_udp(borders.ns["r1"], B4, A4, struct.pack("!I", MAGIC) + b"\x01")
    send_udp(borders.ns["r1"], B4, A4, message(2, 2, b"\x01" * 8, 9000, [9216]))
    stats = wait_for(lambda: (s := a.telemetry("/jumbogate/pathmtu"))["replies_forged"] >= 5 and s, "forged replies to be counted")
    assert stats["probes_malformed"] + stats["replies_malformed"] >= 2
    assert path(a, B4)["mtu"] == WAN_MTU - 4, "no forged or malformed reply moves a learned path MTU"

    # At B: a sized probe shorter than the size it names, and a probe cut
    # inside its header. Both are dropped and counted, none answered.
    before = b.telemetry("/jumbogate/pathmtu")
    send_udp(borders.ns["r2"], A4, B4, message(2, 1, b"\x02" * 8, 4000, []))
    send_udp(borders.ns["r2"], A4, B4, struct.pack("!I", MAGIC) + b"\x01\x01")
    after = wait_for(
        lambda: (s := b.telemetry("/jumbogate/pathmtu"))["probes_malformed"] >= before["probes_malformed"] + 2 and s, "malformed probes to be counted"
    )
    assert after["probes_answered"] == before["probes_answered"]


def test_a_probe_flood_is_answered_at_the_budget_and_never_amplified(borders):
    b = borders.nic_b
    probe = message(2, 1, b"\x03" * 8, 1200, [])
    probe += bytes(1200 - 20 - 8 - len(probe))
    borders.ns["r2"].exec("ping", "-c", "1", "-W", "2", B4)  # resolve B's address first
    before = b.telemetry("/jumbogate/stats")
    start = time.monotonic()
    send_udp(borders.ns["r2"], A4, B4, probe, count=3000)

    def taken():
        s = b.telemetry("/jumbogate/pathmtu")
        return s["probes_answered"] + s["replies_rate_limited"]

    # Until the count stops moving: the kernel may drop some of the flood.
    last = -1
    while (now := taken()) != last:
        last = now
        time.sleep(0.5)
    elapsed = time.monotonic() - start
    stats = b.telemetry("/jumbogate/pathmtu")
    assert stats["probes_answered"] + stats["replies_rate_limited"] >= 1000, "most of the flood reached the responder"
    assert stats["replies_rate_limited"] > 0
    # The budget: a second's worth at once, then 200 per second.
    assert stats["probes_answered"] <= 200 + 200 * elapsed + 1
    after = b.telemetry("/jumbogate/stats")
    assert after["bytes_out"] - before["bytes_out"] < (after["bytes_in"] - before["bytes_in"]) / 10, "replies are far smaller than the probes they answer"
    assert b.proc.poll() is None
    print(f"flood of 3000 probes: {stats['probes_answered']} answered, {stats['replies_rate_limited']} over the budget, in {elapsed:.1f} s")


def test_what_outsiders_can_grow_stays_bounded_and_counted(log_dir):
    """A scan of many destinations, and a flood of probe fragments that
    never complete: tables keep their size, evict and count."""
    wan = TwoBorders(log_dir, [*TEST_OPTIONS, "--pmtu-destinations", "64", "--pmtu-rounds-per-s", "1000", "--pmtu-prefix-rounds-per-min", "10"])
    try:
        a, b = wan.nic_a, wan.nic_b
        # 300 destinations behind router 1 (it has no route to them), in
        # two /24s: each outbound SYN asks for a round (a hello), and each
        # prefix has 10 a minute.
        mac_r1 = wan.ns["r1"].exec("cat", f"/sys/class/net/{wan.names['r1a']}/address").stdout.strip()
        mac_a = wan.ns["ia"].exec("cat", f"/sys/class/net/{wan.names['ia']}/address").stdout.strip()
        ether = bytes.fromhex(mac_r1.replace(":", "")) + bytes.fromhex(mac_a.replace(":", "")) + b"\x08\x00"
        frames = []
        for i in range(300):
            dst = socket.inet_aton(f"10.3.{i // 250}.{i % 250 + 1}")
            tcp = struct.pack("!HHIIBBHHH", 40000 + i, 80, 1, 0, 5 << 4, 0x02, 65535, 0, 0)
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, i, 0x4000, 64, 6, 0, socket.inet_aton(A4), dst)
            frames.append(ether + ip + tcp)
        port = PacketPort(wan.ns["ia"], wan.names["ia"])
        try:
            port.send(frames)
        finally:
            port.close()
        stats = wait_for(
            lambda: (s := a.telemetry("/jumbogate/pathmtu"))["rounds_started"] + s["rounds_suppressed"] + s["rounds_prefix_limited"] >= 300 and s,
            "every destination to ask for a round",
        )
        assert stats["destinations_now"] <= 64 and stats["destinations_evicted"] > 0
        # A minute's worth per prefix at once, then one every 6 s.
        assert stats["rounds_prefix_limited"] > 0 and stats["rounds_started"] <= 2 * (10 + 2)
        assert stats["hello_rounds"] == stats["rounds_started"], "nobody answered: only hellos went out"
        assert stats["probe_bytes"] == 68 * stats["rounds_started"]
        assert stats["learned_now"] == 0, "nobody answered: nothing is learned"

        # 300 first fragments of probes whose rest never comes, at B.
        message_ = message(1, 1, b"\x04" * 8, 9000, [])
        first = struct.pack("!HHHH", PORT, PORT, 9000 - 20, 0) + message_
        first += bytes(1480 - len(first))
        wan.ns["r2"].exec("ping", "-c", "1", "-W", "2", B4)
        send_ipv4(wan.ns["r2"], A4, B4, [first] * 300, fragment=0x2000, ids=list(range(1, 301)))
        wait_for(lambda: b.telemetry("/jumbogate/pathmtu")["fragments_seen"] >= 250, "the fragments to arrive")
        # A fragment is counted as seen before it takes (or evicts) a group:
        # read the counters once they stop moving. Groups leave by eviction,
        # or by expiry (2 s) where the flood took longer than that.
        stats = quiet_counters(b, "/jumbogate/pathmtu")
        left = stats["fragment_groups_evicted"] + stats["fragment_groups_expired"]
        assert left >= stats["fragments_seen"] - 256 > 0
        assert stats["probes_answered"] == 0, "incomplete probes are never answered"
        assert a.proc.poll() is None and b.proc.poll() is None
        print(f"scan: {stats_line(a)}; fragment flood: {stats['fragments_seen']} seen, {stats['fragment_groups_evicted']} groups evicted")
    finally:
        wan.close()


def quiet_counters(nic, command: str, quiet_s: float = 0.3, timeout: float = 10.0) -> dict:
    """The telemetry counters once two reads quiet_s apart agree."""
    deadline = time.monotonic() + timeout
    before = nic.telemetry(command)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = nic.telemetry(command)
        if now == before:
            return now
        before = now
    raise AssertionError(f"{command} kept changing for {timeout:.0f}s")


def stats_line(nic) -> str:
    s = nic.telemetry("/jumbogate/pathmtu")
    return f"{s['rounds_started']} rounds, {s['rounds_prefix_limited']} over their prefix's budget, {s['destinations_now']} tracked, {s['destinations_evicted']} evicted"
