"""Queues that follow the load (jumbogate-nic --queue-scaling): a step in
load through the program and the workers serving its queues over time, as
PacketExpress's Fig. 11b shows its queue count.

    client ns (MTU 1500) --veth-- [port 0  jumbogate-nic  port 1] --veth-- server ns (MTU 9000)

Both ports are net_af_packet with --queues queue pairs (the kernel's fanout
spreads flows over them). The load is iperf3 (Linux TCP, several parallel
flows) from the client to the server, on for --load-s seconds between two
idle spells. Every --every-s the program's /jumbogate/queues telemetry is
read; the samples go to a CSV file and, with matplotlib, to a PNG.

    make bench-queues   (python -m testlab.queue_scaling --out build/bench/queues)
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path

from .nic_harness import Netns, af_packet_vdev, lcores, start_nic, unique, veth

CLIENT = "10.78.0.1"
SERVER = "10.78.0.2"


class ScalingWire:
    """Two namespaces joined through jumbogate-nic on two af_packet ports of
    `queues` queue pairs, served by `workers` worker lcores."""

    def __init__(self, log_dir: Path, options: list[str], queues: int, workers: int):
        self.client, self.nic_ns, self.server = Netns("jgc"), Netns("jgn"), Netns("jgv")
        names = {key: unique(key) for key in ("jgc", "jga", "jgb", "jgv")}
        self.nic = None
        try:
            veth(self.client, names["jgc"], self.nic_ns, names["jga"], mtu_a=1500)
            veth(self.server, names["jgv"], self.nic_ns, names["jgb"], mtu_a=9000)
            self.client.exec("ip", "addr", "add", f"{CLIENT}/24", "dev", names["jgc"])
            self.server.exec("ip", "addr", "add", f"{SERVER}/24", "dev", names["jgv"])
            self.nic = start_nic(
                [
                    af_packet_vdev(0, names["jga"], queues=queues),
                    af_packet_vdev(1, names["jgb"], queues=queues),
                    "--lcores",
                    lcores(workers),
                ],
                [
                    "--queues",
                    str(queues),
                    # Each queue's rings and caches on each port, then
                    # room for each worker's held segments.
                    "--mbufs",
                    str(5000 * queues),
                    "--return-port",
                    "net_af_packet0=net_af_packet1",
                    "--return-port",
                    "net_af_packet1=net_af_packet0",
                    "--internal-prefix",
                    f"{SERVER}/32",
                    *options,
                ],
                self.nic_ns,
                log_dir,
                memory_mb=min(4096, 512 + 384 * queues),
                # Filling the pools without hugepages is slow on a busy
                # machine.
                timeout=90,
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.nic:
            self.nic.stop()
            self.nic = None
        for ns in (self.client, self.nic_ns, self.server):
            ns.delete()

    def __enter__(self) -> ScalingWire:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def step(wire: ScalingWire, idle_s: float, load_s: float, after_s: float, flows: int, every_s: float) -> list[dict]:
    """Samples of /jumbogate/queues over idle, load and idle again."""
    server = wire.server.popen("iperf3", "-s", "-B", SERVER, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples, client = [], None
    start = time.monotonic()
    try:
        time.sleep(0.5)
        while (now := time.monotonic() - start) < idle_s + load_s + after_s:
            if client is None and now >= idle_s:
                client = wire.client.popen("iperf3", "-c", SERVER, "-t", str(load_s), "-P", str(flows), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            row = wire.nic.telemetry("/jumbogate/queues")
            row["t"] = round(now, 2)
            row["load"] = int(idle_s <= now < idle_s + load_s)
            samples.append(row)
            time.sleep(every_s)
    finally:
        for process in (client, server):
            if process is not None:
                process.kill()
                process.wait()
    return samples


FIELDS = ("t", "load", "packets_per_s", "elephants", "target_workers", "serving_workers", "handovers", "handover_flushed")


def write_csv(path: Path, samples: list[dict]) -> None:
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(samples)


def plot(path: Path, samples: list[dict], title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    t = [s["t"] for s in samples]
    figure, rate = plt.subplots(figsize=(7, 3.2))
    rate.fill_between(
        t, [s["load"] for s in samples], step="post", alpha=0.12, color="grey", transform=rate.get_xaxis_transform(), label="load launched (iperf3 -t)"
    )
    rate.plot(t, [s["packets_per_s"] / 1000 for s in samples], color="tab:blue", label="received kpps (1 s sample)")
    rate.set_xlabel("time (s)")
    rate.set_ylabel("kpps", color="tab:blue")
    workers = rate.twinx()
    workers.step(t, [s["serving_workers"] for s in samples], where="post", color="tab:red", label="workers serving the queues")
    workers.set_ylabel("workers serving the queues", color="tab:red")
    workers.set_ylim(0, max(s["workers"] for s in samples) + 0.5)
    workers.yaxis.get_major_locator().set_params(integer=True)
    rate.set_title(title, fontsize=9)
    handles = rate.get_legend_handles_labels()[0] + workers.get_legend_handles_labels()[0]
    rate.legend(handles, [h.get_label() for h in handles], loc="upper right", fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("build/bench/queues"))
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4, help="worker lcores (they may share CPUs)")
    parser.add_argument("--pps", type=int, default=20000, help="--queue-scale-pps")
    parser.add_argument("--down-s", type=int, default=2, help="--queue-scale-down-s")
    parser.add_argument("--flows", type=int, default=4, help="parallel iperf3 flows")
    parser.add_argument("--idle-s", type=float, default=4)
    parser.add_argument("--load-s", type=float, default=10)
    parser.add_argument("--after-s", type=float, default=14)
    parser.add_argument("--every-s", type=float, default=0.25)
    args = parser.parse_args(argv)
    # The program runs in this directory: its gRPC socket path is absolute.
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    options = ["--queue-scaling", "on", "--queue-scale-pps", str(args.pps), "--queue-scale-down-s", str(args.down_s)]
    with ScalingWire(args.out, options, args.queues, args.workers) as wire:
        samples = step(wire, args.idle_s, args.load_s, args.after_s, args.flows, args.every_s)
    write_csv(args.out / "queues.csv", samples)
    title = (
        f"jumbogate-nic --queue-scaling: {args.queues} af_packet queues per port, {args.workers} workers\n"
        f"{args.flows} iperf3 TCP flows for {args.load_s:g} s, --queue-scale-pps {args.pps}, --queue-scale-down-s {args.down_s}"
    )
    plotted = plot(args.out / "queues.png", samples, title)
    for s in samples:
        print(
            f"{s['t']:6.2f}s load={s['load']} {s['packets_per_s']:>8} pkt/s  serving {s['serving_workers']}/{s['workers']} workers  handovers {s['handovers']}"
        )
    print(f"samples: {args.out / 'queues.csv'}" + (f", plot: {args.out / 'queues.png'}" if plotted else " (no matplotlib: no plot)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
