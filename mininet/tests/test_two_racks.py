"""Two racks across a small WAN (emulation/two_racks.py): path MTU discovery between borders, end to end.

Each rack is a whole border on jumbogate-switch (switch, SmartNIC with path
MTU discovery, controller); real TCP between real hosts; Linux routers
fragment, answer or swallow ICMP. Bounded: one bring-up for the module.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import subprocess
import time

import pytest
from emulation.rack import Parts, missing_prerequisites
from emulation.two_racks import PATHS, A, B, TwoRacks, learn, nic_paths

from testlab.lab import telemetry_query

pytestmark = [pytest.mark.timeout(600)]

M1, M2, M3, M4 = PATHS
PROBE_PORT = 48999
SERVER = """
import hashlib, socket, sys
family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
listener = socket.create_server((sys.argv[1], 5201), family=family)
listener.settimeout(float(sys.argv[2]))
print("listening", flush=True)
try:
    connection, _ = listener.accept()
    connection.settimeout(float(sys.argv[2]))
    digest, total = hashlib.sha256(), 0
    while chunk := connection.recv(1 << 20):
        digest.update(chunk)
        total += len(chunk)
except TimeoutError:
    pass
print(total, digest.hexdigest(), flush=True)
"""
CLIENT = """
import socket, sys
data = bytes(range(256)) * (int(sys.argv[2]) << 12)
source = (sys.argv[4], 0) if len(sys.argv) > 4 else None
try:
    with socket.create_connection((sys.argv[1], 5201), timeout=float(sys.argv[3]), source_address=source) as connection:
        connection.sendall(data)
except OSError as err:
    print("client:", err, flush=True)
"""


@pytest.fixture(scope="module")
def racks():
    missing = missing_prerequisites(Parts(), "soft")
    if missing:
        pytest.skip("emulation prerequisites missing: " + "; ".join(missing))
    with TwoRacks() as racks:
        yield racks


def nic_counters(side) -> dict:
    return telemetry_query(f"jg2-nic-{side.name}", "/jumbogate/pathmtu")


def transfer(racks, sender: str, dest: str, megabytes: int, timeout: float, source: str | None = None) -> tuple[bool, int]:
    """Bulk TCP from sender (from source, if given) to b1 at dest: (intact, bytes received)."""
    server = racks.host(B.instance).popen(["python3", "-c", SERVER, dest, str(timeout)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        client = racks.host(sender).popen(
            ["python3", "-c", CLIENT, dest, str(megabytes), str(timeout), *([source] if source else [])],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        said = client.communicate(timeout=3 * timeout)[0]
        total, digest = server.communicate(timeout=3 * timeout)[0].split()
    finally:
        server.kill()
    expected = hashlib.sha256(bytes(range(256)) * (megabytes << 12)).hexdigest()
    if said.strip():
        print(f"{sender} -> {dest}: {said.strip()}")
    return digest == expected, int(total)


def capture(racks, host: str, intf: str, path, direction: str):
    return racks.host(host).popen(["tcpdump", "-i", intf, "-Q", direction, "-n", "-s", "96", "-U", "-w", str(path), "tcp port 5201"], stderr=subprocess.PIPE)


def ip_lengths(path) -> list[int]:
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "ip.len", "-e", "ipv6.plen"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    lengths = []
    for line in out.splitlines():
        v4, _, v6 = line.partition("\t")
        lengths.append(int(v4) if v4 else int(v6) + 40)
    return lengths


def test_both_racks_learn_every_path_in_one_round_trip(racks):
    # m4 cuts as m2 does, but its fragments never arrive: the sized probes decide.
    expected = {M1: (9000, "sizes"), M2: (4196, "fragments"), M3: (4000, "sizes"), M4: (4000, "sizes")}
    report = []
    for path in PATHS:
        for dest in (path.dest4, path.dest6):
            learned, seconds = learn(racks, A, A.instance, dest)
            mtu, method = expected[path] if ":" not in dest else (9000 if path is M1 else 4000, "sizes")
            assert (learned["mtu"], learned["method"]) == (mtu, method), f"{dest} over {path.router}"
            assert learned["rtt_us"] < 100_000, "one round trip of a few milliseconds"
            report.append(
                f"{dest} over {path.router}: {mtu} by {method}; probes' round trip {learned['rtt_us'] / 1000:.1f} ms ({seconds * 1000:.0f} ms from starting the knocking process)"
            )
    # Rack B too, towards rack A, from the address routed over m2.
    learned, seconds = learn(racks, B, B.instance, "10.1.0.10", source=M2.dest4)
    assert (learned["mtu"], learned["method"]) == (4196, "fragments")
    report.append(f"rack B to 10.1.0.10 over m2: 4196 by fragments in {seconds * 1000:.0f} ms")
    # The controller put each on rack A's switch.
    shown = json.loads(racks.ctl(A, "--json", "path", "show").stdout)
    on_switch = {p["address"]: (p["mtu"], p["on_switch"]) for p in shown["paths"]}
    assert on_switch[M2.dest4] == (4196, True) and on_switch[M3.dest6] == (4000, True)
    print("\n".join(report))


@pytest.mark.parametrize(("dest", "learned"), [(M2.dest4, 4196), (M2.dest6, 4000)], ids=["ipv4", "ipv6"])
def test_bulk_tcp_leaves_at_the_path_mtu_and_arrives_merged(racks, tmp_path, dest, learned):
    learn(racks, A, A.instance, dest)
    wan, inside = tmp_path / "wan.pcap", tmp_path / "b1.pcap"
    # At b1's own interface: the switch's af_packet port sends past the
    # taps of its end of the link.
    taps = [capture(racks, M2.router, f"{M2.router}-eth1", wan, "out"), capture(racks, B.instance, f"{B.instance}-eth0", inside, "in")]
    try:
        for tap in taps:
            assert tap.stderr.readline()
        intact, received = transfer(racks, A.instance, dest, 32, timeout=20)
    finally:
        time.sleep(0.3)
        for tap in taps:
            tap.terminate()
            tap.wait(timeout=10)
    assert intact, f"b1 got {received} bytes, not what a1 sent"
    at_wan, at_b1 = ip_lengths(wan), ip_lengths(inside)
    data_wan = [n for n in at_wan if n > 100]
    full = [n for n in data_wan if n == learned]
    assert max(at_wan) == learned, "rack A's border splits to the path MTU it learned"
    # a1's 8500-byte packets leave as two of the path MTU and a tail.
    assert sum(full) > 0.9 * sum(data_wan), "bulk data crosses the WAN in packets of the path MTU, not 1500"
    merged = [n for n in at_b1 if n > learned]
    assert merged and max(at_b1) <= 8500, "rack B merges back up to its instance's 8500"
    print(
        f"a1 -> {dest}: {len(data_wan)} data packets on the WAN, {len(full)} of the path MTU ({learned}) carrying"
        f" {100 * sum(full) / sum(data_wan):.1f}% of the bytes; at b1 {len(merged)} packets above {learned}, largest {max(at_b1)}"
    )


UDP_SERVER = """
import socket, sys
family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(family, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 5301))
s.settimeout(2)
print("listening", flush=True)
sizes = []
try:
    while True:
        sizes.append(len(s.recv(65535)))
except TimeoutError:
    pass
print(len(sizes), max(sizes, default=0), flush=True)
"""
# Datagrams that may not be fragmented (DF; IPv6 never fragments): 20 whose
# IP length is the learned path MTU, then larger ones, which the switch drops
# and signals; prints the path MTU the kernel then knows and how many larger
# sends it refused itself.
UDP_CLIENT = """
import socket, sys, time
dest, mtu = sys.argv[1], int(sys.argv[2])
v6 = ":" in dest
s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
if v6:
    s.setsockopt(socket.IPPROTO_IPV6, 23, 2)  # IPV6_MTU_DISCOVER: IPV6_PMTUDISC_DO
else:
    s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER: IP_PMTUDISC_DO
s.connect((dest, 5301))
payload = mtu - (48 if v6 else 28)
for _ in range(20):
    s.send(b"x" * payload)
    time.sleep(0.005)
refused = 0
for _ in range(5):
    try:
        s.send(b"y" * (payload + 1000))
    except OSError:
        refused += 1
    time.sleep(0.2)
known = s.getsockopt(socket.IPPROTO_IPV6, 24) if v6 else s.getsockopt(socket.IPPROTO_IP, 14)  # IPV6_MTU, IP_MTU
print(known, refused, flush=True)
"""


@pytest.mark.parametrize(("dest", "learned"), [(M2.dest4, 4196), (M2.dest6, 4000)], ids=["ipv4", "ipv6"])
def test_udp_gets_the_learned_path_mtu_from_the_switch(racks, dest, learned):
    """UDP is never split: the switch passes datagrams up to the learned path
    MTU (it would drop anything above 1500 without discovery) and signals
    larger ones with that MTU, which the sending kernel takes."""
    learn(racks, A, A.instance, dest)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        shown = json.loads(racks.ctl(A, "--json", "path", "show", dest).stdout)["paths"][0]
        if shown.get("on_switch"):
            break
        time.sleep(0.2)
    assert (shown["mtu"], shown.get("on_switch")) == (learned, True), shown
    server = racks.host(B.instance).popen(["python3", "-c", UDP_SERVER, dest], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        said = racks.host(A.instance).popen(["python3", "-c", UDP_CLIENT, dest, str(learned)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        client_out = said.communicate(timeout=30)[0]
        server_out = server.communicate(timeout=30)[0]
        assert len(client_out.split()) == 2, client_out
        known, refused = map(int, client_out.split())
        count, largest = map(int, server_out.split())
    finally:
        server.kill()
    header = 48 if ":" in dest else 28
    assert count >= 18 and largest == learned - header, "datagrams of the learned path MTU cross; larger ones do not"
    assert known == learned, "the switch's ICMP error names the learned path MTU"
    assert refused >= 3, "after the signal the sender's own kernel refuses larger datagrams"
    print(f"UDP a1 -> {dest}: {count} of 20 datagrams of {learned} bytes arrived; the larger ones were signalled, the sender now knows {known}")


def test_on_request_a_few_more_round_trips_give_the_exact_path_mtu(racks):
    # After the bulk transfer, which expects the plain rounds' 4196: m2's
    # link is 4200, which neither plain method reads exactly.
    report = []
    for dest in (M2.dest4, M2.dest6):
        started = time.monotonic()
        exact = json.loads(racks.ctl(A, "--json", "path", "probe", "--exact", dest).stdout)
        assert (exact["mtu"], exact.get("exact")) == (4200, True), exact
        report.append(f"{dest} over m2, --exact: {exact['mtu']} in {(time.monotonic() - started) * 1000:.0f} ms (with the CLI's start)")
    print("\n".join(report))


@pytest.mark.parametrize("dest", [M3.dest4, M3.dest6], ids=["ipv4", "ipv6"])
def test_the_black_hole_path_stalls_plain_linux_but_not_the_border(racks, dest):
    learn(racks, A, A.instance, dest)
    start = time.monotonic()
    intact, received = transfer(racks, A.instance, dest, 8, timeout=10)
    border_s = time.monotonic() - start
    assert intact, f"through the border: {received} bytes"
    # Rack A's router is a plain Linux sender with a 9000-byte link and
    # classic PMTUD: its segments die at m3 and nothing says so. (m3 keeps
    # its ICMPv6 from rack prefixes only, so that neighbour discovery on its
    # links works: over IPv6 the router sends from a rack A address of its
    # own.)
    source = None
    if ":" in dest:
        source = "fd01::99"
        racks.host(A.router).cmd(f"ip -6 addr replace {source}/128 dev lo")
    start = time.monotonic()
    intact_plain, received_plain = transfer(racks, A.router, dest, 8, timeout=5, source=source)
    plain_s = time.monotonic() - start
    assert not intact_plain and received_plain < (8 << 20) // 2, "classic PMTUD without ICMP is a black hole"
    print(
        f"{dest} over m3 (no ICMP): the border delivered 8 MiB in {border_s:.1f} s; plain Linux got {received_plain} bytes through in {plain_s:.1f} s and stalled"
    )


def test_a_forged_reply_changes_nothing(racks):
    learn(racks, A, A.instance, M1.dest4)
    before = nic_counters(A)
    # A well-formed reply to a sized probe of 9000 bytes, without the nonce.
    message = struct.pack("!IBBBB8sHH", 0x4A47504D, 1, 2, 2, 1, bytes(8), 9000, 0) + struct.pack("!H", 9000)
    udp = struct.pack("!HHHH", PROBE_PORT, PROBE_PORT, 8 + len(message), 0) + message
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, socket.inet_aton(M1.dest4), socket.inet_aton("10.1.0.10"))
    send = "import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)\nfor _ in range(5):\n    s.sendto(bytes.fromhex(sys.argv[1]), ('10.1.0.10', 0))\n"
    racks.host(A.router).popen(["python3", "-c", send, (header + udp).hex()]).wait(timeout=10)
    deadline = time.monotonic() + 5
    while nic_counters(A)["replies_forged"] < before["replies_forged"] + 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert nic_counters(A)["replies_forged"] == before["replies_forged"] + 5, "the switch steered the forged replies to the SmartNIC, which refused them"
    assert nic_paths(A)[M1.dest4]["mtu"] == 9000


def test_make_run_two_racks_is_offered():
    text = subprocess.run(
        ["make", "-s", "help"], capture_output=True, text=True, check=True, cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2])
    ).stdout
    assert re.search(r"TOPO=two-racks", text)
