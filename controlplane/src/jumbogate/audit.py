"""The classic path MTU check, for `jumbogatectl path audit`: a DF sweep as
`ping -M do -s SIZE` does it, from the host the command runs on.

It finds the largest packet that crosses the path whole by binary search,
and tells how the larger ones failed: with an ICMP error that names an MTU
(classic PMTUD works on this path) or in silence (a black hole for classic
PMTUD, which only path MTU discovery without ICMP gets around).
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

# ICMP header + IPv4 / IPv6 header: what ping adds to its -s payload.
_OVERHEAD = {4: 28, 6: 48}
_SIGNAL = re.compile(r"(?:Frag needed and DF set \(mtu = (\d+)\)|Packet too big: mtu=(\d+)|message too long, mtu=(\d+))", re.I)


@dataclass
class Attempt:
    size: int
    # "passed", "signalled" (an ICMP error or the kernel's cached one named an MTU) or "silent".
    outcome: str
    mtu: int = 0


@dataclass
class AuditResult:
    address: str
    low: int
    high: int
    largest_passed: int = 0
    signalled_mtu: int = 0
    verdict: str = ""
    attempts: list[Attempt] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _ping(address: str, version: int, size: int, timeout_s: float) -> Attempt:
    command = ["ping", "-n", "-c", "1", "-W", str(timeout_s), "-M", "do", "-s", str(size - _OVERHEAD[version])]
    if version == 6:
        command.insert(1, "-6")
    result = subprocess.run([*command, address], capture_output=True, text=True, timeout=timeout_s + 5)
    text = result.stdout + result.stderr
    if result.returncode == 0 and "bytes from" in text:
        return Attempt(size, "passed")
    match = _SIGNAL.search(text)
    if match:
        return Attempt(size, "signalled", int(next(g for g in match.groups() if g)))
    return Attempt(size, "silent")


def df_sweep(address: str, low: int = 1280, high: int = 9000, timeout_s: float = 1.0) -> AuditResult:
    """Binary search for the largest DF packet (IP length) in [low, high] that gets an echo reply."""
    parsed = ipaddress.ip_address(address)
    if shutil.which("ping") is None:
        raise FileNotFoundError("ping is not installed (Debian: iputils-ping)")
    if not _OVERHEAD[parsed.version] + 1 <= low <= high:
        raise ValueError(f"sizes must satisfy {_OVERHEAD[parsed.version] + 1} <= low <= high, got {low}..{high}")
    result = AuditResult(address=str(parsed), low=low, high=high)

    def attempt(size: int) -> Attempt:
        outcome = _ping(str(parsed), parsed.version, size, timeout_s)
        result.attempts.append(outcome)
        if outcome.outcome == "signalled":
            result.signalled_mtu = outcome.mtu
        return outcome

    if attempt(low).outcome != "passed":
        result.verdict = f"not even {low} bytes get through: the destination does not answer pings, or the path is broken"
        return result
    good, bad = low, high + 1
    if attempt(high).outcome == "passed":
        good = high
    else:
        while bad - good > 1:
            middle = (good + bad) // 2
            if attempt(middle).outcome == "passed":
                good = middle
            else:
                bad = middle
    result.largest_passed = good
    failed = [a for a in result.attempts if a.outcome != "passed"]
    if not failed:
        result.verdict = f"every size up to {high} got through"
    elif any(a.outcome == "signalled" for a in failed):
        result.verdict = f"larger packets are refused with an ICMP error naming MTU {result.signalled_mtu}: classic PMTUD works here"
    else:
        result.verdict = "larger packets vanish without an ICMP error: a black hole for classic PMTUD"
    return result
