"""The fleet's store at scale: many racks and instances against one etcd on this machine.

`make fleet-scale` (RACKS=, INSTANCES=, WATCHERS=, FLIPS=) starts an etcd of
its own (Debian's etcd-server, on free loopback ports, defaults as an
operator would run it), fills it with the keys of `fleet.py`'s layout for
that many racks and instances, and measures what issue-sized fleets ask of
it:

- keys, value bytes and etcd's database size, and bytes per instance, which
  set how many instances fit under etcd's 2 GiB default quota (8 GiB is its
  documented maximum);
- how fast the store takes keys (transactions of etcd's 128-operation limit);
- what one controller's full read of the store costs (the store's own
  `EtcdStore.snapshot`, as a controller does at start), and whether it fits
  gRPC's default 4 MiB message;
- the watch fan-out of one fleet-flag flip: every watcher (one per rack, each
  with its own watch on the whole prefix, as a controller has) must see it;
  the time from the flip's acknowledgement to each watcher's event;
- flips per second sustained, each conditioned on the revision before it,
  without watchers and with every watcher attached, and that every watcher
  saw every flip;
- where it breaks: the whole fleet in one transaction (etcd's
  --max-txn-ops 128 and its 1.5 MiB request limit).

Watchers and the flipper share this one process and its event loop (two
cores): the fan-out times include Python's own scheduling of a thousand
streams, an upper bound on what separate controllers would see. Prints the
figures and, with --json, writes them. Bounded: loopback only, and every
step has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
from aetcd import rpc

from jumbogate.config import load_config
from jumbogate.fleet import FLEET_JUMBO, document, encode, instance_key
from jumbogate.store import PREFIX, EtcdStore, StoreError

# The test lab (testlab/) lives at the top of the repository.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from testlab.etcd_process import EtcdServer, missing_etcd  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "mininet" / "rack.yaml"
TXN_OPS = 128  # etcd's default --max-txn-ops
REQUEST_LIMIT = int(1.5 * 1024 * 1024)  # etcd's default --max-request-bytes
GRPC_DEFAULT_MESSAGE = 4 * 1024 * 1024
QUOTA_DEFAULT, QUOTA_MAX = 2 << 30, 8 << 30
CHANNELS = 20  # watchers share this many connections (each watcher has its own stream)
DEADLINE_S = 60.0


def range_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


def fleet_keys(racks: int, instances: int) -> dict[str, bytes]:
    """Every key of a fleet: the fleet's sections, each rack's parts (the emulated rack's), and instances spread over the racks."""
    template = load_config(TEMPLATE)
    keys: dict[str, bytes] = {}
    for r in range(racks):
        rack = f"rack-{r:04d}"
        for key, value in document(template, rack).items():
            if key.startswith("instances/"):
                continue
            keys[key] = encode(value)
    for n in range(instances):
        address = [f"10.{64 + n // 65536 % 64}.{n // 256 % 256}.{n % 256}", f"fd00:{n // 65536:x}:{n % 65536:x}::10"]
        keys[instance_key(f"vm-{n:06d}")] = encode({"rack": f"rack-{n % racks:04d}", "addresses": address, "jumbo": n % 3 == 0})
    keys[FLEET_JUMBO] = encode(True)
    return keys


async def load(kv: rpc.KVStub, keys: dict[str, bytes], in_flight: int = 8) -> float:
    """Write every key in transactions of TXN_OPS puts, `in_flight` at once; seconds taken."""
    items = sorted(keys.items())
    batches = [items[i : i + TXN_OPS] for i in range(0, len(items), TXN_OPS)]
    started = time.monotonic()
    queue: asyncio.Queue = asyncio.Queue()
    for batch in batches:
        queue.put_nowait(batch)

    async def writer():
        while not queue.empty():
            batch = queue.get_nowait()
            ops = [rpc.RequestOp(request_put=rpc.PutRequest(key=(PREFIX + k).encode(), value=v)) for k, v in batch]
            await kv.Txn(rpc.TxnRequest(success=ops), timeout=DEADLINE_S)

    await asyncio.gather(*(writer() for _ in range(in_flight)))
    return time.monotonic() - started


class Watchers:
    """`count` watches on the whole prefix, each its own stream, spread over CHANNELS connections; event times by revision."""

    def __init__(self, target: str, count: int):
        self.channels = [grpc.aio.insecure_channel(target) for _ in range(min(CHANNELS, count))]
        self.count = count
        self.seen: list[dict[int, float]] = [{} for _ in range(count)]
        self.tasks: list[asyncio.Task] = []
        self.created = 0
        self.all_created = asyncio.Event()

    async def start(self, after: int) -> None:
        for i in range(self.count):
            self.tasks.append(asyncio.create_task(self._watch(i, after)))
        await asyncio.wait_for(self.all_created.wait(), DEADLINE_S)

    async def _watch(self, index: int, after: int) -> None:
        stub = rpc.WatchStub(self.channels[index % len(self.channels)])
        prefix = PREFIX.encode()
        create = rpc.WatchCreateRequest(key=prefix, range_end=range_end(prefix), start_revision=after + 1)
        stop = asyncio.Event()

        async def requests():
            yield rpc.WatchRequest(create_request=create)
            await stop.wait()

        call = stub.Watch(requests())
        try:
            async for reply in call:
                if reply.created:
                    self.created += 1
                    if self.created == self.count:
                        self.all_created.set()
                now = time.monotonic()
                for event in reply.events:
                    self.seen[index].setdefault(event.kv.mod_revision, now)
        except asyncio.CancelledError:
            stop.set()
            call.cancel()
            raise

    async def wait_for(self, revision: int, timeout: float = DEADLINE_S) -> list[float]:
        """Each watcher's receipt time of `revision` (waits until all have it)."""
        deadline = time.monotonic() + timeout
        while any(revision not in seen for seen in self.seen):
            if time.monotonic() > deadline:
                missing = sum(revision not in seen for seen in self.seen)
                raise TimeoutError(f"{missing} of {self.count} watchers never saw revision {revision}")
            await asyncio.sleep(0.001)
        return [seen[revision] for seen in self.seen]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for channel in self.channels:
            await channel.close()


async def flip(kv: rpc.KVStub, on: bool, base_revision: int) -> int:
    """The fleet flag, as the API writes it: one transaction conditioned on the key not having moved since `base_revision`."""
    key = (PREFIX + FLEET_JUMBO).encode()
    compare = [rpc.Compare(key=key, target=rpc.Compare.MOD, result=rpc.Compare.LESS, mod_revision=base_revision + 1)]
    reply = await kv.Txn(rpc.TxnRequest(compare=compare, success=[rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=encode(on)))]), timeout=10)
    if not reply.succeeded:
        raise RuntimeError(f"flip based on revision {base_revision} was refused")
    return reply.header.revision


async def settled_status(maintenance: rpc.MaintenanceStub) -> rpc.StatusResponse:
    """etcd's status once its database file stopped growing: the backend commits writes in batches (every 100 ms)."""
    last = await maintenance.Status(rpc.StatusRequest(), timeout=10)
    for _ in range(40):
        await asyncio.sleep(0.15)
        status = await maintenance.Status(rpc.StatusRequest(), timeout=10)
        if status.dbSize == last.dbSize:
            return status
        last = status
    return last


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(server: EtcdServer, racks: int, instances: int, watchers: int, flips: int, log) -> dict:
    figures: dict = {"racks": racks, "instances": instances, "watchers": watchers}
    target = f"127.0.0.1:{server.client_port}"
    channel = grpc.aio.insecure_channel(target, options=[("grpc.max_receive_message_length", 512 << 20)])
    kv, maintenance = rpc.KVStub(channel), rpc.MaintenanceStub(channel)
    try:
        keys = fleet_keys(racks, instances)
        value_bytes = sum(len(k) + len(PREFIX) + len(v) for k, v in keys.items())
        log(f"loading {len(keys):,} keys ({value_bytes / 1e6:.1f} MB of keys and values) in transactions of {TXN_OPS} ...")
        seconds = await load(kv, keys)
        status = await settled_status(maintenance)
        count = (await kv.Range(rpc.RangeRequest(key=PREFIX.encode(), range_end=range_end(PREFIX.encode()), count_only=True), timeout=30)).count
        figures.update(
            keys=count,
            key_and_value_bytes=value_bytes,
            load_seconds=round(seconds, 2),
            keys_per_second=round(len(keys) / seconds),
            db_size_bytes=status.dbSize,
            db_bytes_per_key=round(status.dbSize / max(1, len(keys))),
        )
        per_key = status.dbSize / max(1, len(keys))
        figures["instances_under_2GiB_quota"] = int(QUOTA_DEFAULT / per_key)
        figures["instances_under_8GiB"] = int(QUOTA_MAX / per_key)

        # One controller's full read, through the store's own code.
        store = EtcdStore(f"etcd://{target}")
        started = time.monotonic()
        try:
            await store.open()
            figures["controller_snapshot"] = f"ok in {time.monotonic() - started:.2f} s"
        except (StoreError, grpc.aio.AioRpcError) as err:
            figures["controller_snapshot"] = f"FAILED: {str(err)[:200]}"
        finally:
            await store.close()
        whole = await kv.Range(rpc.RangeRequest(key=PREFIX.encode(), range_end=range_end(PREFIX.encode())), timeout=60)
        figures["snapshot_bytes"] = whole.ByteSize()
        figures["snapshot_fits_4MiB_message"] = whole.ByteSize() <= GRPC_DEFAULT_MESSAGE

        # Where one transaction breaks: the whole fleet at once.
        ops = [rpc.RequestOp(request_put=rpc.PutRequest(key=(PREFIX + k).encode(), value=v)) for k, v in sorted(keys.items())]
        request = rpc.TxnRequest(success=ops)
        try:
            await kv.Txn(request, timeout=60)
            figures["whole_fleet_in_one_txn"] = f"accepted ({len(ops)} ops, {request.ByteSize():,} bytes)"
        except grpc.aio.AioRpcError as err:
            figures["whole_fleet_in_one_txn"] = f"refused: {err.code().name}: {err.details()} ({len(ops)} ops, {request.ByteSize():,} bytes)"

        head = (await kv.Range(rpc.RangeRequest(key=(PREFIX + FLEET_JUMBO).encode()), timeout=10)).header.revision
        started, revision = time.monotonic(), head
        for i in range(flips):
            revision = await flip(kv, i % 2 == 1, revision)
        figures["flips_per_second_without_watchers"] = round(flips / (time.monotonic() - started), 1)
        head = revision

        log(f"{watchers} watchers on the whole prefix ...")
        watch = Watchers(target, watchers)
        await watch.start(head)
        try:
            before = (await maintenance.Status(rpc.StatusRequest(), timeout=10)).header.revision
            acked = time.monotonic()
            revision = await flip(kv, False, before)
            acked = (acked + time.monotonic()) / 2
            seen = [t - acked for t in await watch.wait_for(revision)]
            figures["one_flip_watch_events"] = sum(revision in s for s in watch.seen)
            figures["one_flip_to_watchers_ms"] = {
                "p50": round(percentile(seen, 0.5) * 1e3, 2),
                "p99": round(percentile(seen, 0.99) * 1e3, 2),
                "all": round(max(seen) * 1e3, 2),
            }
            log(f"{flips} flips back to back, each conditioned on the one before ...")
            started, revisions = time.monotonic(), []
            for i in range(flips):
                revision = await flip(kv, i % 2 == 0, revision)
                revisions.append(revision)
            writes = time.monotonic() - started
            await watch.wait_for(revisions[-1])
            everyone = time.monotonic() - started
            figures["flips_per_second_acknowledged"] = round(flips / writes, 1)
            figures["flips_per_second_seen_by_every_watcher"] = round(flips / everyone, 1)
            figures["every_watcher_saw_every_flip"] = all(all(r in s for r in revisions) for s in watch.seen)
            latencies = []
            for r in revisions:
                times = [s[r] for s in watch.seen]
                latencies.append(max(times) - min(times))
            figures["flip_spread_across_watchers_ms_p50"] = round(statistics.median(latencies) * 1e3, 2)
        finally:
            await watch.stop()
        figures["db_size_after_flips_bytes"] = (await settled_status(maintenance)).dbSize
    finally:
        await channel.close()
    return figures


def render(figures: dict) -> str:
    return "\n".join(
        f"  {name:40} {value:,}" if isinstance(value, int) and not isinstance(value, bool) else f"  {name:40} {value}" for name, value in figures.items()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make fleet-scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--racks", type=int, default=1000)
    parser.add_argument("--instances", type=int, default=100_000)
    parser.add_argument("--watchers", type=int, default=None, help="watchers (default: one per rack)")
    parser.add_argument("--flips", type=int, default=100)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if min(args.racks, args.instances, args.flips) < 1 or (args.watchers is not None and args.watchers < 1):
        parser.error("--racks, --instances, --watchers and --flips must be at least 1")
    missing = missing_etcd()
    if missing:
        print(f"fleet-scale: {', '.join(missing)} not on PATH (Debian's etcd-server and etcd-client; make setup installs them)", file=sys.stderr)
        return 2
    watchers = args.watchers or args.racks

    def log(line: str) -> None:
        print(f"fleet-scale: {line}", flush=True)

    with tempfile.TemporaryDirectory(prefix="jumbogate-fleet-scale-") as tmp:
        server = EtcdServer(Path(tmp) / "data", Path(tmp) / "etcd.log").start()
        try:
            figures = asyncio.run(measure(server, args.racks, args.instances, watchers, args.flips, log))
        finally:
            server.stop()
    print(f"fleet-scale: {args.racks:,} racks, {args.instances:,} instances, {watchers:,} watchers, one etcd 3.4 member on loopback")
    print(render(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
