"""`make value`: what the border buys its users, measured (#38).

On one rack (rack_value.py): a real NF behind the border (section 1 of the
issue) and receivers, TCP with GRO off and on and UDP with caravans
(section 3), each with the border merging against the border passing.

Path MTU discovery next to Scamper (section 5): on the two-rack emulation
(two_racks.py), over each WAN path, it asks two tools for the path MTU
from rack A towards rack B's instance:

  - the border: one SYN from rack A's instance starts its discovery (the
    SmartNIC's plain round: fragments or sized probes), then `jumbogatectl
    path probe --exact` refines it to the byte;
  - Scamper (Debian's scamper): `trace -M`, traceroute followed by its
    path MTU discovery, which searches for the MTU of hops that send no
    ICMP (Luckie et al.), run from rack A's router, a plain Linux host
    with a 9000-byte link on the same paths.

It prints both answers and both times per path beside the path's real MTU,
and says where and why they differ. The border must not be wrong where
Scamper is right.

Not measured here (issue #38): an NF on the engine's API (examples/nat/bench.sh),
senders over a WAN.

    python3 -m emulation.value [--sections rack,pmtud] [--seconds S] [--paths m1,m2,m3,m4] [--families 4,6] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import procs, rack_value
from .rack import Rack, cannot_start
from .two_racks import PATHS, A, TwoRacks, learn

# The MTU each WAN path really has for unfragmented packets (two_racks.py).
REAL_MTU = {"m1": 9000, "m2": 4200, "m3": 4000, "m4": 4200}
SCAMPER_TIMEOUT_S = 300.0
# Inbound UDP of onloaded flows is packed into caravans (the receivers' section).
RACK_NIC_OPTIONS = ("--caravan-pack", "on")
# One attempt per hop, a second's wait: the traceroute Scamper runs before
# its path MTU discovery is most of its time, and the emulation loses nothing.
SCAMPER_TRACE = "trace -M -q 1 -w 1"
HOP_MTU = re.compile(r"^\s*\d+\s+(\S+)\s.*\[\*?mtu: (\d+)")


@dataclass
class PathAnswer:
    path: str
    destination: str
    real_mtu: int
    border_mtu: int = 0
    border_method: str = ""
    border_s: float = 0.0  # from the SYN to the first learned value
    border_rtt_ms: float = 0.0  # the probe round's round trip
    exact_mtu: int = 0
    exact_s: float = 0.0
    scamper_mtu: int | None = None  # None: it gave no MTU for the destination
    scamper_s: float = 0.0
    scamper_output: str = ""


def scamper(racks: TwoRacks, destination: str) -> tuple[int | None, float, str]:
    """Scamper's path MTU to `destination` from rack A's router: (MTU of the destination's hop, seconds, its output)."""
    started = time.monotonic()
    proc = racks.host(A.router).popen(
        ["scamper", "-O", "text", "-c", SCAMPER_TRACE, "-i", destination], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        output = proc.communicate(timeout=SCAMPER_TIMEOUT_S)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        output = proc.communicate()[0] + f"\n(stopped after {SCAMPER_TIMEOUT_S:.0f} s)"
    seconds = time.monotonic() - started
    mtu = next((int(m.group(2)) for line in output.splitlines() if (m := HOP_MTU.match(line)) and m.group(1) == destination), None)
    return mtu, seconds, output.strip()


def border(racks: TwoRacks, answer: PathAnswer) -> None:
    learned, answer.border_s = learn(racks, A, A.instance, answer.destination)
    answer.border_mtu, answer.border_method, answer.border_rtt_ms = learned["mtu"], learned["method"], learned["rtt_us"] / 1000
    started = time.monotonic()
    exact = json.loads(racks.ctl(A, "--json", "path", "probe", "--exact", answer.destination).stdout)
    answer.exact_s = time.monotonic() - started
    answer.exact_mtu = exact["mtu"]


def compare(racks: TwoRacks, paths: list[str], families: list[int], log=print) -> list[PathAnswer]:
    answers = []
    for path in PATHS:
        if path.router not in paths:
            continue
        for family in families:
            destination = path.dest4 if family == 4 else path.dest6
            answer = PathAnswer(path.router, destination, REAL_MTU[path.router])
            border(racks, answer)
            log(f"value: {path.router} {destination}: the border says {answer.border_mtu} ({answer.exact_mtu} exact); Scamper ...")
            answer.scamper_mtu, answer.scamper_s, answer.scamper_output = scamper(racks, destination)
            answers.append(answer)
    return answers


def explain(answer: PathAnswer) -> str:
    """Why the two answers differ, or '' when they agree."""
    if answer.scamper_mtu == answer.exact_mtu:
        return ""
    if answer.scamper_mtu is None:
        return "Scamper gave no MTU for the destination"
    if answer.scamper_mtu > answer.real_mtu:
        silent = " (m3 sends no ICMP, over IPv4 not even time-exceeded: larger packets vanish there unsignalled)" if answer.path == "m3" else ""
        return f"Scamper's {answer.scamper_mtu} is above the path's {answer.real_mtu}{silent}; a sender trusting it stalls"
    return f"the border's {answer.exact_mtu} is {'above' if answer.exact_mtu > answer.real_mtu else 'below'} the path's {answer.real_mtu}"


def render(answers: list[PathAnswer]) -> str:
    lines = [
        "5. Path MTU discovery: the border next to Scamper (trace -M), rack A towards rack B's instance",
        "  (the border's first round: wall time from starting the process that sends the SYN, and the probes' own round trip)",
        f"  {'path':<5} {'destination':<12} {'real':>5}  {'border (first round)':<38} {'border --exact':<16} {'Scamper':<16} agree",
    ]
    for a in answers:
        first = f"{a.border_mtu} {a.border_method}, {a.border_s * 1000:.0f} ms (rtt {a.border_rtt_ms:.1f} ms)"
        exact = f"{a.exact_mtu}, {a.exact_s * 1000:.0f} ms"
        theirs = f"{a.scamper_mtu if a.scamper_mtu is not None else '-'}, {a.scamper_s:.1f} s"
        why = explain(a)
        lines.append(f"  {a.path:<5} {a.destination:<12} {a.real_mtu:>5}  {first:<38} {exact:<16} {theirs:<16} {'yes' if not why else 'no: ' + why}")
    faster = [a.scamper_s / a.border_s for a in answers if a.border_s > 0]
    if faster:
        lines.append(f"  the border's first answer came {min(faster):.0f} to {max(faster):.0f} times sooner than Scamper's")
    return "\n".join(lines)


def failures(answers: list[PathAnswer]) -> list[str]:
    """The border wrong where Scamper is right, or above the path's MTU anywhere (a black hole)."""
    out = []
    for a in answers:
        if a.exact_mtu > a.real_mtu or a.border_mtu > a.real_mtu:
            out.append(f"{a.path} {a.destination}: the border says {a.border_mtu}/{a.exact_mtu}, above the path's {a.real_mtu}")
        elif a.scamper_mtu == a.real_mtu and a.exact_mtu != a.real_mtu:
            out.append(f"{a.path} {a.destination}: Scamper found {a.real_mtu}, the border's exact answer is {a.exact_mtu}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make value", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="rack,pmtud", help="rack (the NF and receivers), pmtud (next to Scamper); default %(default)s")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each run on the rack (default %(default)s)")
    parser.add_argument("--paths", default="m1,m2,m3,m4", help="WAN paths (default %(default)s)")
    parser.add_argument("--families", default="4,6", help="IP versions (default %(default)s)")
    parser.add_argument("--json", type=Path, default=procs.REPO / "results" / "value.json", help="the result (default %(default)s)")
    args = parser.parse_args(argv)
    sections = args.sections.split(",")
    if set(sections) - {"rack", "pmtud"} or args.seconds <= 0:
        parser.error("--sections takes rack and pmtud; --seconds must be positive")
    paths = args.paths.split(",")
    families = [int(f) for f in args.families.split(",")]
    if unknown := set(paths) - set(REAL_MTU) or set(families) - {4, 6}:
        parser.error(f"unknown: {sorted(map(str, unknown))}")
    refusal = cannot_start("make value", "soft")
    if refusal or ("pmtud" in sections and shutil.which("scamper") is None):
        print(refusal or "make value: scamper is not on PATH (Debian's scamper; make setup installs it)", file=sys.stderr)
        return 1
    log = lambda line: print(line, flush=True)  # noqa: E731
    result, wrong = {}, []
    args.json.parent.mkdir(parents=True, exist_ok=True)
    try:
        if "rack" in sections:
            print("value: bringing up the rack (the SmartNIC packing caravans) ...", flush=True)
            with Rack(switch_target="soft", nic_options=RACK_NIC_OPTIONS) as rack:
                measured = rack_value.measure_all(rack, args.seconds, log=log)
            print(rack_value.render(measured))
            image = args.json.with_name("value-rack.png")
            rack_value.plot(measured, image)
            print(f"plot: {image}")
            result["rack"] = rack_value.as_json(measured)
        if "pmtud" in sections:
            print("value: bringing up two racks across the WAN ...", flush=True)
            with TwoRacks() as racks:
                answers = compare(racks, paths, families, log=log)
            print(render(answers))
            wrong = failures(answers)
            print("verdict: " + ("the border is never wrong where Scamper is right" if not wrong else "FAILED\n  " + "\n  ".join(wrong)))
            result["pmtud"] = [asdict(a) for a in answers]
    except (procs.StartError, RuntimeError, subprocess.SubprocessError) as err:
        print(f"make value: {err}", file=sys.stderr)
        return 1
    finally:
        if result:
            args.json.write_text(json.dumps(result, indent=1))
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
