"""Linux's own GRO selftest as the judge of the merge rules: tools/testing/selftests/net/gro.c, run through jumbogate-nic.

make setup builds gro.c from Debian's linux-source package of the newest
kernel it offers into build/linux-gro/ (never committed). Here its sender
runs in one namespace and its receiver in another, and between them the
real jumbogate-nic: a net_pcap port that reads the sender's veth and
writes to the receiver's, with every address of the selftest inside the
rack (--internal-prefix), so every segment goes through the merge path.
The receiver's veth has GRO off: what it checks is what the engine built.

Like the kernel's gro.sh, each case gets three tries (a segment that
arrives after its flow was flushed is a timing artefact, not a rule).
Where jumbogate differs on purpose, the case must fail exactly there, with
every check before it passing (DEVIATIONS); the receiver stops at its first
failed check, so the checks after it are not judged here (the unit cases
in test_merge_rules.c and test_linux_gro_reference.py cover them).
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from testlab import lab
from testlab.nic_harness import Netns, start_nic, veth

GRO = lab.BUILD / "linux-gro" / "gro"
SOURCE = lab.BUILD / "linux-gro" / "source"
CLIENT_MAC, SERVER_MAC = "aa:00:00:00:00:01", "aa:00:00:00:00:02"
TESTS = ("data", "ack", "flags", "tcp", "ip", "large")
TRIES = 3

# (protocol, test) -> (the check that fails on purpose, why)
DEVIATIONS = {
    ("ipv4", "ip"): (
        "DF=0, Fixed - should not coalesce",
        "a fixed IPv4 ID merges without DF: the engine follows Linux 6.18's inet_gro_flush (include/net/gro.h), which takes "
        "ip_fixedid whenever the second ID equals the first, as this machine's kernel does (test_linux_gro_reference's "
        "fixed_ip_id_without_df); the 6.12 selftest still expects the older rule",
    ),
    ("ipv4", "large"): ("Shouldn't coalesce if exceed IP max pkt size", "the engine merges up to the internal MTU (8,500 bytes), not the kernel's 64 KB"),
    ("ipv6", "large"): ("Shouldn't coalesce if exceed IP max pkt size", "the engine merges up to the internal MTU (8,500 bytes), not the kernel's 64 KB"),
}

pytestmark = pytest.mark.skipif(
    not GRO.exists(), reason=f"the kernel's GRO selftest is not built ({GRO.relative_to(lab.REPO)}): make setup builds it from Debian's linux-source"
)


@pytest.fixture(scope="module")
def wiring(tmp_path_factory):
    """client --veth-- [jumbogate-nic] --veth-- server, each in a namespace of its own."""
    client, middle, server = Netns("jggc"), Netns("jggn"), Netns("jggs")
    nic = None
    try:
        veth(client, "client", middle, "fromclient")
        veth(middle, "toserver", server, "server")
        client.exec("ip", "link", "set", "client", "address", CLIENT_MAC)
        server.exec("ip", "link", "set", "server", "address", SERVER_MAC)
        nic = start_nic(
            ["--vdev=net_pcap0,rx_iface=fromclient,tx_iface=toserver", "-l", "0-1"],
            ["--internal-prefix", "192.168.1.0/24", "--internal-prefix", "fdaa::/64", "--mbuf-size", "12288"],
            middle,
            tmp_path_factory.mktemp("gro-selftest"),
        )
        yield client, server, nic
    finally:
        if nic is not None:
            nic.stop()
        for ns in (client, middle, server):
            ns.delete()


def run_case(client: Netns, server: Netns, proto: str, test: str) -> tuple[int, str]:
    """One run of the selftest's receiver and sender: (receiver's exit status, its output)."""
    args = [str(GRO), f"--{proto}", "--dmac", SERVER_MAC, "--smac", CLIENT_MAC, "--test", test, "--verbose"]
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", server.name, *args, "--rx", "--iface", "server"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        time.sleep(0.5)  # the receiver's socket open (gro.sh waits as long)
        client.exec(*args, "--iface", "client", timeout=60)
        output = receiver.communicate(timeout=60)[0]
    finally:
        receiver.kill()
    return receiver.returncode, output


def checks(output: str) -> list[tuple[str, bool]]:
    """(check, passed) in order, from the receiver's output: 'name: Test succeeded' or 'name: ...error...'."""
    found = []
    for line in output.splitlines():
        match = re.match(r"^(?P<name>[^{}:]+?): (?P<rest>.*)$", line)
        if match and not line.startswith(("Expected", "Received")):
            found.append((match["name"].strip(), match["rest"].startswith("Test succeeded")))
    return found


@pytest.mark.parametrize("proto", ["ipv4", "ipv6"])
@pytest.mark.parametrize("test", TESTS)
def test_the_kernels_gro_selftest_through_jumbogate_nic(wiring, proto, test):
    client, server, nic = wiring
    deviation = DEVIATIONS.get((proto, test))
    outputs = []
    for _ in range(TRIES):
        status, output = run_case(client, server, proto, test)
        outputs.append(output)
        judged = checks(output)
        if deviation is None and status == 0:
            print(f"{SOURCE.read_text().strip()} gro.c {proto} {test}: {len(judged)} checks passed")
            return
        if deviation is not None and status != 0:
            failed = [name for name, passed in judged if not passed]
            if failed == [deviation[0]] and judged[-1][0] == deviation[0]:
                print(f"{proto} {test}: {len(judged) - 1} checks passed; '{deviation[0]}' differs on purpose: {deviation[1]}")
                return
    tail = "\n---\n".join(output[-1500:] for output in outputs)
    if deviation is None:
        pytest.fail(f"gro.c {proto} {test} failed {TRIES} times through jumbogate-nic:\n{tail}")
    pytest.fail(f"gro.c {proto} {test} did not fail exactly at '{deviation[0]}' (the deliberate difference):\n{tail}")
