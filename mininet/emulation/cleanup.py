"""Teardown that works after a crash: `make stop`, and the check that nothing is left behind.

What belongs to the emulation is found three ways, so that any one is enough:
- the pids in build/emulation/state.json, each checked against a marker from
  its command line (a recycled pid is someone else's now);
- the network namespaces recorded there: any process still inside one of them
  (an iperf3 started in a host, say) keeps the namespace alive, so it goes too;
- names: Mininet shells of our nodes ("mininet:up1"), BMv2 bound to our
  interfaces, the SmartNIC with our DPDK file prefix, the controller with our
  rack config, and interfaces named after our nodes.
Nothing is matched by program name alone: other BMv2s, controllers or
Mininets on the same machine are not ours to end. (That is also why this does
not call `mn -c`, which kills every Mininet and deletes /tmp/*.log.)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import partition, plan, procs

# Command-line fragments that mark a process as the emulation's.
SWEEP_MARKERS = (
    *(f"mininet:{node}" for node in plan.NAMES.nodes),
    f"@{plan.SWITCH}-eth",
    f"--file-prefix={plan.NIC_FILE_PREFIX}",
    f"--file-prefix={plan.SWITCH_FILE_PREFIX}",
    "mininet/rack.yaml",
    plan.P4RUNTIME_ADDRESS,
    # The emulation's etcd, and a controller using it as its store.
    plan.ETCD_CLIENT_ADDRESS,
)
DPDK_RUNTIME_DIRS = [Path("/var/run/dpdk") / prefix for prefix in (plan.NIC_FILE_PREFIX, plan.SWITCH_FILE_PREFIX)]


@dataclass
class Leftovers:
    processes: list[str] = field(default_factory=list)  # "pid command"
    interfaces: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)  # nftables tables of the fault runs

    def __bool__(self) -> bool:
        return bool(self.processes or self.interfaces or self.files or self.rules)

    def describe(self) -> str:
        parts = []
        if self.processes:
            parts.append("processes: " + "; ".join(self.processes))
        if self.interfaces:
            parts.append("interfaces: " + ", ".join(self.interfaces))
        if self.files:
            parts.append("files: " + ", ".join(self.files))
        if self.rules:
            parts.append("nftables: " + ", ".join(self.rules))
        return " | ".join(parts) or "nothing"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _netns(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""


def netns_of(pid: int) -> str:
    """The network namespace id of a process, as recorded in the state file."""
    return _netns(pid)


def _our_processes(state: dict) -> dict[int, str]:
    """pid -> command line of every process that belongs to the emulation."""
    me = {os.getpid(), os.getppid()}
    root_ns = _netns(1)
    namespaces = {ns for ns in state.get("namespaces", {}).values() if ns and ns != root_ns}
    found: dict[int, str] = {}
    for role, entry in state.get("processes", {}).items():
        pid = entry.get("pid", 0)
        cmd = _cmdline(pid)
        if pid and cmd and entry.get("marker", "") in cmd:
            found[pid] = cmd or role
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid in me or pid in found:
            continue
        cmd = _cmdline(pid)
        if not cmd:
            continue  # kernel threads and processes that just exited
        if any(marker in cmd for marker in SWEEP_MARKERS) or (namespaces and _netns(pid) in namespaces):
            found[pid] = cmd
    return found


def _our_interfaces() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    names = []
    for line in out.splitlines():
        # "12: border-eth1@if11: <...>"
        name = line.split(":", 2)[1].strip().split("@")[0]
        if plan.NAMES.owns_interface(name):
            names.append(name)
    return names


def running_rack(state: dict | None = None) -> str:
    """'pid N: command' of another live process whose rack the state file describes, else ''.

    Rack.up() records its own process as the owner; a state file whose owner
    is gone is a crash's leftovers (swept), one whose owner runs is a rack
    in use (left alone).
    """
    state = procs.load_state() if state is None else state
    owner = state.get("owner") or {}
    pid, cmdline = owner.get("pid", 0), owner.get("cmdline", "")
    if not pid or pid == os.getpid() or not cmdline or _cmdline(pid) != cmdline:
        return ""
    return f"pid {pid}: {cmdline[:120]}"


def own_cmdline() -> str:
    return _cmdline(os.getpid())


def find_leftovers(state: dict | None = None) -> Leftovers:
    state = procs.load_state() if state is None else state
    left = Leftovers()
    left.processes = [f"{pid} {cmd[:120]}" for pid, cmd in sorted(_our_processes(state).items())]
    left.interfaces = _our_interfaces()
    left.files += [str(directory) for directory in DPDK_RUNTIME_DIRS if directory.exists()]
    if partition.present():
        left.rules.append(f"table inet {partition.TABLE}")
    return left


def _signal_all(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def sweep(grace_s: float = 3.0) -> Leftovers:
    """End every process of the emulation, delete its interfaces and files; return what was found."""
    state = procs.load_state()
    found = find_leftovers(state)
    pids = set(_our_processes(state))
    # TERM first so the controller and the SmartNIC can close cleanly, then KILL.
    _signal_all(pids, signal.SIGTERM)
    # A process a fault run paused takes its TERM only once continued.
    _signal_all(pids, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_cmdline(pid) for pid in pids):
        time.sleep(0.1)
    _signal_all([pid for pid in pids if _cmdline(pid)], signal.SIGKILL)
    # Interfaces: deleting one end of a veth deletes its peer; those in our
    # namespaces went with the namespaces.
    for name in _our_interfaces():
        subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
    for directory in DPDK_RUNTIME_DIRS:
        shutil.rmtree(directory, ignore_errors=True)
    partition.remove_all()
    procs.STATE_FILE.unlink(missing_ok=True)
    return found
