"""A real Linux TCP connection through jumbogate-nic.

    client ns (MTU 1500) --veth-- [port 0  jumbogate-nic  port 1] --veth-- server ns (MTU 9000)

What arrives on one port leaves on the other (--return-port both ways).
The server is the rack (--internal-prefix), so the client's 1500-byte
segments are merged on the way in and the server's packets take the split
path on the way out: the program raises the MSS of the client's SYN, so the
server sends large segments, which are cut to the client's 1500 bytes.
Both must get the other's data intact, the server in merged packets.

Port 0, the Internet side, is af_packet or an AF_XDP socket (net_af_xdp,
which carries no jumbo frame here: that port has its own MTU of 1500,
--port-mtu net_af_xdp0=1500, and port 1 stays on af_packet).
"""

from __future__ import annotations

import pytest

from jumbogate.v1 import nic_pb2
from testlab.nic_harness import Netns, af_packet_vdev, run, start_nic, unique, veth
from testlab.portbench import xdp_unavailable
from testlab.tcp_exchange import capture, exchange

pytestmark = pytest.mark.timeout(120)

CLIENT = "10.77.0.1"
SERVER = "10.77.0.2"
PORT = 5201
MEGABYTES = 24
REPLY_MEGABYTES = 8


@pytest.fixture(params=["af_packet", "af_xdp"])
def wire(request, log_dir):
    internet_port = request.param
    if internet_port == "af_xdp" and (why := xdp_unavailable()):
        pytest.skip(f"af_xdp: {why}")
    client, nic_ns, server = Netns("jgc"), Netns("jgn"), Netns("jgv")
    names = {key: unique(key) for key in ("jgc", "jga", "jgb", "jgv")}
    nic = None
    try:
        # An XDP program on a veth needs both ends at most about a page.
        veth(client, names["jgc"], nic_ns, names["jga"], mtu_a=1500, mtu_b=1500 if internet_port == "af_xdp" else 9500)
        veth(server, names["jgv"], nic_ns, names["jgb"], mtu_a=9000)
        client.exec("ip", "addr", "add", f"{CLIENT}/24", "dev", names["jgc"])
        server.exec("ip", "addr", "add", f"{SERVER}/24", "dev", names["jgv"])
        if internet_port == "af_xdp":
            port0, port0_options = f"--vdev=net_af_xdp0,iface={names['jga']}", ["--port-mtu", "net_af_xdp0=1500"]
        else:
            port0, port0_options = af_packet_vdev(0, names["jga"]), []
        port0_name = port0.removeprefix("--vdev=").split(",")[0]
        # No --mbuf-size: the program grows its buffers to what af_packet wants.
        # --mbufs: the least it takes with an AF_XDP port, whose receive
        # queue keeps 2048 of the pool and whose transmit and completion
        # rings up to 2048 more; a pool of 4608 let the rings starve
        # reception and the transfer stalled.
        nic = start_nic(
            [port0, af_packet_vdev(1, names["jgb"]), "-l", "0-1"],
            [
                "--mbufs",
                "4800",
                *port0_options,
                "--return-port",
                f"{port0_name}=net_af_packet1",
                "--return-port",
                f"net_af_packet1={port0_name}",
                "--internal-prefix",
                f"{SERVER}/32",
            ],
            nic_ns,
            log_dir,
            memory_mb=1024,
        )
        yield client, server, names["jgv"], nic, names["jgc"]
    finally:
        if nic:
            nic.stop()
        for ns in (client, nic_ns, server):
            ns.delete()


def transfer(client, server, capture_ns, capture_if, capture_file) -> None:
    """The client's data to the server and the server's reply, both checked
    intact, with what arrives at capture_if captured."""
    with capture(capture_ns, capture_if, capture_file, "tcp", "port", str(PORT)):
        exchange(client, server, SERVER, PORT, MEGABYTES, REPLY_MEGABYTES).assert_intact()


def test_tcp_transfer_arrives_merged_and_intact(wire, tmp_path):
    client, server, server_if, nic, _ = wire
    capture_file = tmp_path / "server.pcap"
    transfer(client, server, server, server_if, capture_file)

    lengths = run("tshark", "-r", str(capture_file), "-Y", f"ip.src == {CLIENT}", "-T", "fields", "-e", "ip.len", timeout=60).stdout.split()
    large = [int(n) for n in lengths if int(n) > 1500]
    assert large, "the server saw no packet larger than the client's MTU"
    assert max(large) <= 8500
    stats = nic.stub().GetStats(nic_pb2.GetNicStatsRequest(), timeout=5)
    assert stats.merged_packets >= len(large) > 0
    assert stats.conversion_yield > 0
    assert stats.split_packets > 0, "the server's large segments were not split"
    assert "wants larger buffers" in nic.log()
    print(
        f"{len(lengths)} packets from the client at the server, {len(large)} above 1500 bytes; yield {stats.conversion_yield:.2f};"
        f" {stats.split_packets} server packets split into {stats.split_segments_out}"
    )


def test_the_server_keeps_to_the_mss_the_client_announced(wire, tmp_path):
    """A client whose stack announces MSS 1200 (as behind an MSS clamp or a
    tunnel) on a 1500-byte link: the raise hides that from the server, which
    sends large segments; the SmartNIC cuts them to 1200, not to the path's
    1460, although the SYN arrived on one port and the server's data on the
    other."""
    client, server, server_if, nic, client_if = wire
    client.exec("ip", "route", "replace", f"{SERVER}/32", "dev", client_if, "advmss", "1200")
    server_file, client_file = tmp_path / "server.pcap", tmp_path / "client.pcap"
    with capture(server, server_if, server_file, "tcp[tcpflags] & tcp-syn != 0"):
        transfer(client, server, client, client_if, client_file)

    announced = run("tshark", "-r", str(server_file), "-T", "fields", "-e", "tcp.options.mss_val", timeout=60).stdout.split()
    assert announced and int(announced[0]) == 8500 - 40, "the server saw the MSS raised to the internal MTU (8500)"
    payloads = [int(n) for n in run("tshark", "-r", str(client_file), "-Y", f"ip.src == {SERVER}", "-T", "fields", "-e", "tcp.len", timeout=60).stdout.split()]
    data = [n for n in payloads if n > 0]
    # The capture may miss a few under load; the transfer itself was checked.
    assert sum(data) > (REPLY_MEGABYTES << 20) // 2
    assert max(data) <= 1200, f"a segment of {max(data)} bytes went to a client that announced 1200"
    stats = nic.telemetry("/jumbogate/stats")
    assert stats["split_peer_mss_limited"] > 0
    print(f"{len(data)} data segments at the client, largest {max(data)}; {stats['split_peer_mss_limited']} server packets cut to the client's MSS")
