"""The switch ports a P4Testgen corpus file sends to or expects packets on.

    corpus_ports.py FILE    prints them, comma-separated, in order

ptf-tests/run.sh wires exactly these (one veth pair each) for the corpus of
a profile, since P4Testgen names ports anywhere in 0-509 (generate.sh says
why). Exits non-zero, naming the reason, when the harness could not wire
them: more ports than jumbogate-switch takes, or a port the harness keeps
for packet-in and packet-out.
"""

import re
import sys
from pathlib import Path

# jumbogate-switch takes at most 32 DPDK ports (switch/switch.h).
MAX_PORTS = 32
# The CPU port the harness gives the switches for this corpus, and BMv2's
# drop port: no generated test may send to or expect a packet on them.
RESERVED = {510: "the CPU port ptf-tests/run.sh gives the switch", 511: "BMv2's drop port"}

PORT_PATTERNS = (
    re.compile(r"^\s*ig_port = (\d+)$", re.M),
    re.compile(r"^\s*eg_port = (\d+)$", re.M),
    re.compile(r"verify_packet\(self, exp_pkt, (\d+)\)"),
    re.compile(r"insert_pre_clone_session\(\d+, \[(\d+)\]\)"),
)


def corpus_ports(text: str) -> list[int]:
    return sorted({int(m) for pattern in PORT_PATTERNS for m in pattern.findall(text)})


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    path = Path(sys.argv[1])
    ports = corpus_ports(path.read_text())
    for port in ports:
        if port in RESERVED:
            print(f"{path}: a test uses port {port}, {RESERVED[port]}", file=sys.stderr)
            return 1
    if len(ports) > MAX_PORTS:
        print(f"{path}: its tests name {len(ports)} ports; jumbogate-switch takes at most {MAX_PORTS}", file=sys.stderr)
        return 1
    print(",".join(str(p) for p in ports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
