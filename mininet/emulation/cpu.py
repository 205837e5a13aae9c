"""Holding kernel network work to one CPU, and reading what it spent there (make value, rack_value.py).

On veth, a packet's receive processing runs in the softirq of the CPU that
transmitted it, unless receive packet steering (RPS) on the receiving
interface names other CPUs: then the packet waits in that CPU's backlog and
is processed in its softirq. So RPS on every interface of the emulation
decides where the kernel's forwarding and receiving work is done: the
interfaces of the part under test steer to the measured CPU, every other
interface to the other one. The measured CPU's softirq time in /proc/stat
is then that part's kernel work, plus a small background measured with no
traffic and subtracted. This kernel accounts softirq time by sampling at
each tick (no IRQ_TIME_ACCOUNTING), so a few seconds of traffic give
hundreds of samples.

GRO on a veth runs in the NAPI poll of the CPU that transmitted the packet,
before RPS: with GRO on, merging 1500-byte packets is done on the sending
CPU (here the switch's worker lcore) and is counted on the measured CPU
only when that is the same CPU.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from mininet.node import Node

from . import plan

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq")


def cpu_count() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class CpuTimes:
    """One CPU's times from /proc/stat, in seconds."""

    user: float
    system: float
    idle: float
    softirq: float

    def __sub__(self, other: CpuTimes) -> CpuTimes:
        return CpuTimes(self.user - other.user, self.system - other.system, self.idle - other.idle, self.softirq - other.softirq)


def cpu_times(cpu: int) -> CpuTimes:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                values = dict(zip(STAT_FIELDS, (int(v) / TICKS_PER_S for v in line.split()[1:8]), strict=True))
                return CpuTimes(values["user"] + values["nice"], values["system"], values["idle"] + values["iowait"], values["softirq"])
    raise RuntimeError(f"no cpu{cpu} in /proc/stat")


def process_seconds(pid: int) -> float:
    """User and system time of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def background_softirq(cpu: int, seconds: float = 2.0) -> float:
    """Softirq seconds per second on a CPU while no test traffic runs."""
    before = cpu_times(cpu)
    time.sleep(seconds)
    return (cpu_times(cpu) - before).softirq / seconds


def mask(cpu: int) -> str:
    return f"{1 << cpu:x}"


def steer(node: Node, intf: str, cpu: int) -> None:
    """Receive processing of packets arriving on intf goes to cpu (RPS on each of its receive queues)."""
    out = node.cmd(f"for q in /sys/class/net/{intf}/queues/rx-*; do echo {mask(cpu)} > $q/rps_cpus || echo failed; done")
    if "failed" in out or "No such" in out:
        raise RuntimeError(f"{node.name}: cannot set RPS on {intf}: {out.strip()}")


def steer_everything(net, cpu: int, exclude: set[str] = frozenset()) -> None:
    """Every interface of the emulation, in every namespace, to cpu (but those named in exclude)."""
    for node in net.hosts:
        for intf in node.intfList():
            if intf.name != "lo" and intf.name not in exclude and (node.inNamespace or plan.NAMES.owns_interface(intf.name)):
                steer(node, intf.name, cpu)
    root = net.get(plan.MGMT_NODE)
    for switch in net.switches:
        for intf in switch.intfList():
            if intf.name != "lo" and plan.NAMES.owns_interface(intf.name) and intf.name not in exclude:
                steer(root, intf.name, cpu)


def set_gro(node: Node, intf: str, on: bool) -> None:
    node.cmd(f"ethtool -K {intf} gro {'on' if on else 'off'} >/dev/null 2>&1")


def thread_cpus(pid: int) -> dict[str, set[int]]:
    """The CPUs a process's threads last ran on, by thread name: where a DPDK program's lcores sit."""
    out: dict[str, set[int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                name, rest = f.read().split("(", 1)[1].rsplit(")", 1)
        except OSError:
            continue
        out.setdefault(name, set()).add(int(rest.split()[36]))
    return out
