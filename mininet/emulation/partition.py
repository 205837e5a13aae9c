"""Network cuts for the fleet's fault run: one nftables table, `inet jg_fleet_chaos`, in the root namespace.

The fleet's controllers share the root namespace with etcd, and each reaches
etcd through a loopback address of its own (FleetRack.etcd_address), so a
rule on that address cuts exactly one controller off from the store while
its switch and SmartNIC links stay up: the partition a lease exists for.
Both directions are dropped on the way out (loopback traffic leaves through
the output hook), so open connections stall as they would behind a cut cable
instead of being reset.

`make stop` and the emulation's teardown delete the table (cleanup.py).
"""

from __future__ import annotations

import shutil
import subprocess

TABLE = "jg_fleet_chaos"


class PartitionError(RuntimeError):
    pass


def _nft(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    nft = shutil.which("nft")
    if nft is None:
        raise PartitionError("nft is not on PATH (Debian's nftables package; make setup installs it)")
    done = subprocess.run([nft, *args], input=stdin, capture_output=True, text=True, timeout=10)
    if check and done.returncode != 0:
        raise PartitionError(f"nft {' '.join(args)}: {done.stderr.strip()}")
    return done


def cut(address: str, ports: tuple[int, ...]) -> None:
    """Drop TCP between loopback address `address` and `ports` (both directions) until heal(address)."""
    ports_set = ", ".join(str(port) for port in ports)
    _nft(
        "-f",
        "-",
        stdin=f"""
table inet {TABLE} {{
    chain output {{
        type filter hook output priority 0; policy accept;
        ip daddr {address} tcp dport {{ {ports_set} }} drop comment "{address}"
        ip saddr {address} tcp sport {{ {ports_set} }} drop comment "{address}"
    }}
}}
""",
    )


def heal(address: str) -> None:
    """Remove the rules cut(address, ...) added."""
    listing = _nft("-a", "list", "chain", "inet", TABLE, "output", check=False)
    if listing.returncode != 0:
        return
    for line in listing.stdout.splitlines():
        if f'comment "{address}"' in line and "# handle " in line:
            _nft("delete", "rule", "inet", TABLE, "output", "handle", line.rsplit("# handle ", 1)[1].strip())


def present() -> bool:
    return shutil.which("nft") is not None and _nft("list", "table", "inet", TABLE, check=False).returncode == 0


def remove_all() -> None:
    if present():
        _nft("delete", "table", "inet", TABLE, check=False)
