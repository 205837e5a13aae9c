"""Write and read rates of large P4Runtime batches, on jumbogate-switch and on BMv2 where it is installed.

    sudo .venv/bin/python switch/bench/p4rt_batches.py [--targets soft,bmv2] [--entries 10000] [--runs 5]

Each target is started on one veth pair with the committed pipeline pushed. Each run INSERTs N entries of
`instances_v4` in one WriteRequest, MODIFYs them all in one, reads the table back with one wildcard Read, and
DELETEs them in one; the median of the runs is printed per operation, with entries per second (docs/switch.md,
"Conformance"). The client is finsy's protobuf stubs over gRPC on the same machine, so the figures include the
client's cost of building and parsing N entities.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "switch" / "tests")]

from finsy.proto import p4r  # noqa: E402
from switch_harness import Client, entry, exact, p4info, update  # noqa: E402

from testlab import lab  # noqa: E402

PIPELINE = lab.PIPELINE_512 / "jumbogate.json"
OPERATIONS = ("INSERT", "MODIFY", "Read", "DELETE")


def instance(n: int, enabled: int) -> p4r.Entity:
    return entry("instances_v4", [exact("instances_v4", "instance_addr", n.to_bytes(4, "big"))], "set_instance_jumbo", {"enabled": bytes([enabled])})


def one_run(client: Client, count: int) -> dict[str, float]:
    """Seconds per operation for one batch of `count` entries; every update must succeed."""
    seconds: dict[str, float] = {}
    for name, kind, enabled in (("INSERT", p4r.Update.INSERT, 1), ("MODIFY", p4r.Update.MODIFY, 0)):
        updates = [update(kind, instance(0x0A000000 + n, enabled)) for n in range(count)]
        started = time.perf_counter()
        codes = client.write(updates, timeout=300)
        seconds[name] = time.perf_counter() - started
        if any(codes):
            raise SystemExit(
                f"p4rt_batches: {name} of {count} entries: {sum(1 for c in codes if c)} updates refused (first code {next(c for c in codes if c)})"
            )
    wildcard = p4r.Entity(table_entry=p4r.TableEntry(table_id=instance(0, 0).table_entry.table_id))
    started = time.perf_counter()
    read = client.read([wildcard])
    seconds["Read"] = time.perf_counter() - started
    if len(read) != count:
        raise SystemExit(f"p4rt_batches: the Read returned {len(read)} entries, not {count}")
    updates = [update(p4r.Update.DELETE, instance(0x0A000000 + n, 0)) for n in range(count)]
    started = time.perf_counter()
    codes = client.write(updates, timeout=300)
    seconds["DELETE"] = time.perf_counter() - started
    if any(codes):
        raise SystemExit(f"p4rt_batches: DELETE of {count} entries: {sum(1 for c in codes if c)} updates refused")
    return seconds


def measure(target: str, count: int, runs: int) -> dict[str, float]:
    """The median seconds per operation on one freshly started target."""
    work = Path(tempfile.mkdtemp(prefix="p4rt-batches-"))
    try:
        with lab.veth_pairs("jgpb", 1) as pairs:
            switch = lab.make_switch(target, {0: pairs[0].a}, work / f"{target}.log").start()
            try:
                client = Client(switch.grpc_address, 1)
                try:
                    if client.arbitrate().status.code != 0:
                        raise SystemExit(f"p4rt_batches: the client is not primary on {target}")
                    client.set_pipeline(p4info(512), blob=PIPELINE.read_bytes() if target == "bmv2" else b"{}")
                    samples = []
                    for run in range(runs):
                        samples.append(one_run(client, count))
                        print(f"  {target} run {run + 1}/{runs}: " + ", ".join(f"{op} {samples[-1][op]:.3f} s" for op in OPERATIONS), flush=True)
                finally:
                    client.close()
            finally:
                switch.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {op: statistics.median(sample[op] for sample in samples) for op in OPERATIONS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="soft,bmv2", help="comma-separated: soft (jumbogate-switch), bmv2")
    parser.add_argument("--entries", type=int, default=10_000, help="entries per batch (instances_v4 holds 16,384)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    for target in targets:
        if target not in lab.SWITCH_TARGETS:
            parser.error(f"unknown target {target!r}: use {', '.join(lab.SWITCH_TARGETS)}")
    if not 1 <= args.entries <= 16_384:
        parser.error("--entries is 1 to 16,384, the size of instances_v4")
    if "bmv2" in targets and shutil.which("simple_switch_grpc") is None:
        print("p4rt_batches: BMv2 skipped: simple_switch_grpc is not on PATH (README, 'Getting p4c and BMv2')", file=sys.stderr)
        targets.remove("bmv2")
    results = {}
    for target in targets:
        print(f"{target}: {args.runs} runs of {args.entries:,} entries", flush=True)
        results[target] = measure(target, args.entries, args.runs)
    print(f"\nmedian of {args.runs} runs, {args.entries:,} entries per batch (seconds, entries per second):")
    print(f"{'target':<8}" + "".join(f"{op:>22}" for op in OPERATIONS))
    for target, medians in results.items():
        print(f"{target:<8}" + "".join(f"{medians[op]:>10.3f} s {args.entries / medians[op]:>9,.0f}/s" for op in OPERATIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
