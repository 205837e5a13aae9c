"""The desired state in a real etcd: seeding, export and import, revisions, watches, bad values.

Each test gets the session's etcd with no jumbogate keys in it; the
controllers here are FleetPolicy objects (what a controller process runs),
so that two of them can race on one store within a test.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from jumbogate import fleet
from jumbogate.config import config_changes, load_config, parse_config
from jumbogate.fleet import FleetPolicy, StoreValueError, policy_changes
from jumbogate.state import PolicyError
from jumbogate.store import PREFIX, Change, EtcdStore, MemoryStore, StoreConflict, StoreRefused, StoreUnavailable
from testlab.etcd_process import EtcdServer, etcdctl, missing_etcd
from testlab.lab import free_tcp_port

EXAMPLE = Path(__file__).resolve().parents[1] / "rack.example.yaml"

pytestmark = [pytest.mark.timeout(60)]
# A bound on waits for the watch, never a figure asserted: it only stops a broken test.
WATCH_BOUND_S = 20


class Rack:
    """A controller's view of the store, recording every policy it was handed."""

    def __init__(self, url: str, config=None, rack: str = "rack-1"):
        self.applied: list = []
        self.changed = asyncio.Event()
        self.policy = FleetPolicy(EtcdStore(url), config or load_config(EXAMPLE), rack, self._on_change)
        self._watch: asyncio.Task | None = None

    def _on_change(self, config, changed):
        self.applied.append((config, changed))
        self.changed.set()

    async def start(self, watch: bool = False) -> Rack:
        await self.policy.start()
        if watch:
            self._watch = asyncio.create_task(self.policy.run())
        return self

    async def wait_for(self, predicate) -> None:
        async def loop():
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), WATCH_BOUND_S)

    async def wait_for_revision(self, revision: int) -> None:
        async def loop():
            while self.policy.revision < revision:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(loop(), WATCH_BOUND_S)

    async def close(self) -> None:
        if self._watch:
            self._watch.cancel()
        await self.policy.store.close()


def put_by_hand(etcd, key: str, value: str) -> int:
    """etcdctl put, as an operator would; the revision it was written at."""
    done = etcd.ctl("put", PREFIX + key, value, "-w", "json")
    return json.loads(done.stdout)["header"]["revision"]


async def test_a_new_store_is_seeded_from_the_file_and_exports_it_back_exactly(etcd):
    rack = await Rack(etcd.store_url).start()
    example = load_config(EXAMPLE)
    keys = set(etcd.ctl("get", "--prefix", "--keys-only", PREFIX).stdout.split())
    assert {PREFIX + "schema", PREFIX + "fleet/jumbo", PREFIX + "instances/web-1", PREFIX + "racks/rack-1/routes"} <= keys
    exported = rack.policy.export_yaml()
    again = parse_config(yaml.safe_load(exported), "export", fleet_rule=False)
    assert policy_changes(example, again) == [] and config_changes(example, again)[1] == []
    revision = await rack.policy.import_yaml(exported, "export")
    assert rack.policy.export_yaml() == exported and rack.policy.revision == revision
    await rack.close()


async def test_a_second_rack_joins_the_fleet_without_changing_it(etcd):
    first = await Rack(etcd.store_url).start()
    await first.policy.set_fleet(False)
    other_file = replace(load_config(EXAMPLE), fleet_jumbo=True, instances=())
    second = await Rack(etcd.store_url, other_file, rack="rack-2").start()
    # The fleet flag is the store's, not the joining rack's file's; its own keys were added.
    assert second.policy.config.fleet_jumbo is False and second.policy.config.instances == ()
    assert etcd.ctl("get", PREFIX + "racks/rack-2/ports", "--print-value-only").stdout.strip()
    assert {i.id for i in first.policy.config.instances} == {"web-1", "legacy-1"}
    await first.close()
    await second.close()


async def test_what_the_api_set_survives_a_restart_that_reads_the_file_again(etcd):
    rack = await Rack(etcd.store_url).start()
    await rack.policy.set_instance_jumbo("web-1", False)
    await rack.policy.set_fleet(False)
    await rack.close()
    restarted = await Rack(etcd.store_url).start()  # the same file: fleet and web-1 on
    assert restarted.policy.config.fleet_jumbo is False
    assert restarted.policy.config.instance("web-1").jumbo is False
    await restarted.close()


async def test_a_change_based_on_a_stale_revision_is_aborted_with_the_current_revision(etcd):
    first = await Rack(etcd.store_url).start()
    second = await Rack(etcd.store_url).start()  # no watch: its view stays where it was
    seen = second.policy.revision
    await first.policy.set_fleet(False)
    current = first.policy.revision
    with pytest.raises(StoreConflict) as info:
        await second.policy.set_fleet(True)
    assert info.value.current_revision == current and f"revision {current}" in str(info.value) and "fleet/jumbo" in str(info.value)
    # The operator's own stale revision is refused the same way, through a view that is current.
    second.policy.apply(await second.policy.store.snapshot())
    with pytest.raises(StoreConflict):
        await second.policy.set_fleet(True, revision=seen)
    assert json.loads(etcd.ctl("get", PREFIX + "fleet/jumbo", "--print-value-only").stdout) is False
    # A write to a key the change does not depend on is no conflict: second's
    # view misses first's instance change, and its fleet change goes through.
    await first.policy.set_instance_jumbo("web-1", False)
    assert second.policy.revision < first.policy.revision
    await second.policy.set_fleet(True)
    assert json.loads(etcd.ctl("get", PREFIX + "fleet/jumbo", "--print-value-only").stdout) is True
    await first.close()
    await second.close()


async def test_the_fencing_epoch_only_goes_up_and_reaches_every_controller(etcd):
    """Raised through one controller (by one, or to a number), seen by another's watch; never lowered,
    and raised from a stale view it is refused: two operators raising at once both learn which took."""
    first = await Rack(etcd.store_url).start()
    epochs: list[int] = []
    watching = await Rack(etcd.store_url).start(watch=True)
    watching.policy.on_epoch = epochs.append
    assert first.policy.epoch == watching.policy.epoch == 1
    assert (await first.policy.raise_epoch())[0] == 2
    await watching.wait_for_revision(first.policy.revision)
    assert watching.policy.epoch == 2 and epochs == [2]
    with pytest.raises(PolicyError, match="only goes up"):
        await first.policy.raise_epoch(2)
    stale = await Rack(etcd.store_url).start()
    assert (await first.policy.raise_epoch(9))[0] == 9
    with pytest.raises(StoreConflict, match="fencing/epoch"):
        await stale.policy.raise_epoch()
    assert etcd.ctl("get", PREFIX + "fencing/epoch", "--print-value-only").stdout.strip() == "9"
    # Not policy: the rack's config is untouched, and an export leaves it out.
    await watching.wait_for_revision(first.policy.revision)
    assert watching.policy.epoch == 9 and "fencing" not in watching.policy.export_yaml()
    assert not policy_changes(first.policy.seed, watching.policy.config)
    for rack in (first, watching, stale):
        await rack.close()


async def test_a_stale_write_cannot_bring_back_an_instance_an_import_removed(etcd):
    first = await Rack(etcd.store_url).start()
    second = await Rack(etcd.store_url).start()
    without_legacy = fleet.config_to_data(load_config(EXAMPLE))
    without_legacy["instances"] = [i for i in without_legacy["instances"] if i["id"] != "legacy-1"]
    await first.policy.import_yaml(yaml.safe_dump(without_legacy), "without-legacy.yaml")
    assert etcd.ctl("get", PREFIX + "instances/legacy-1").stdout == ""
    with pytest.raises(StoreConflict, match="instances/legacy-1"):
        await second.policy.set_instance_jumbo("legacy-1", True)
    assert etcd.ctl("get", PREFIX + "instances/legacy-1").stdout == ""
    await first.close()
    await second.close()


async def test_a_change_made_through_another_controller_reaches_this_one(etcd):
    watching = await Rack(etcd.store_url).start(watch=True)
    other = await Rack(etcd.store_url).start()
    await other.policy.set_fleet(False)
    await watching.wait_for(lambda: not watching.policy.config.fleet_jumbo)
    config, changed = watching.applied[-1]
    assert changed == ["fleet.jumbo"] and watching.policy.revision_applied == other.policy.revision
    # A route edited by hand (a per-rack key) arrives the same way.
    routes = json.loads(etcd.ctl("get", PREFIX + "racks/rack-1/routes", "--print-value-only").stdout)
    routes[0]["next_hops"] = routes[0]["next_hops"][:1]
    put_by_hand(etcd, "racks/rack-1/routes", json.dumps(routes))
    await watching.wait_for(lambda: len(watching.policy.config.routes[0].next_hops) == 1)
    assert watching.applied[-1][1] == ["routes"]
    await watching.close()
    await other.close()


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("fleet/jumbo", '"maybe"', "fleet.jumbo: expected true or false"),
        ("fleet/mtu", "{not json", "not JSON"),
        ("instances/web-1", '{"rack": "rack-1", "addresses": ["10.10.0.300"], "jumbo": true}', "instances[1].addresses[0]"),
        ("racks/rack-1/routes", '[{"prefix": "10.0.0.0/8", "next_hops": []}]', "routes[0].next_hops: needs at least one next hop"),
        ("fleet/elephant", '{"max_flows": 0}', "elephant.max_flows: 0 is outside"),
        ("schema", '{"version": 2}', "schema version 2"),
    ],
    ids=["fleet-flag", "not-json", "instance-address", "route", "elephant", "newer-schema"],
)
async def test_an_invalid_value_edited_by_hand_is_refused_counted_and_the_last_valid_policy_stays(etcd, key, value, says):
    rack = await Rack(etcd.store_url).start(watch=True)
    before = rack.policy.config
    bad = put_by_hand(etcd, key, value)
    await rack.wait_for_revision(bad)
    assert rack.policy.refused_revisions == 1 and rack.policy.config is before and rack.policy.revision_applied < bad
    assert PREFIX + key in rack.policy.last_refusal and says in rack.policy.last_refusal, rack.policy.last_refusal
    if key != "fleet/jumbo":
        # The operator's changes are still committed; the store stays invalid
        # until the key is fixed, so the last valid policy stays in force.
        await rack.policy.set_fleet(False)
        assert rack.policy.refused_revisions == 2 and rack.policy.config.fleet_jumbo is True
    fixed = put_by_hand(etcd, key, fleet.encode(fleet.document(before, "rack-1")[key]).decode())
    await rack.wait_for_revision(fixed)
    assert rack.policy.revision_applied == fixed and rack.policy.config.fleet_jumbo is (key == "fleet/jumbo")
    await rack.close()


async def test_a_change_is_judged_by_what_the_store_holds_while_its_newest_revision_is_refused(etcd):
    """The last valid policy (fleet on) and the store (fleet off by hand, behind an invalid key) differ.
    Judged by the former, turning the fleet on wrote nothing yet answered as done, and an instance could
    be turned on under a fleet flag that the store held off."""
    rack = await Rack(etcd.store_url).start(watch=True)
    assert rack.policy.config.fleet_jumbo is True
    put_by_hand(etcd, "fleet/path_mtus", '[{"prefix": "198.51.100.0/24", "mtu": 99}]')
    off = put_by_hand(etcd, "fleet/jumbo", "false")
    await rack.wait_for_revision(off)
    assert rack.policy.revision_applied < off and rack.policy.config.fleet_jumbo is True
    with pytest.raises(PolicyError, match="fleet jumbo flag is off"):
        await rack.policy.set_instance_jumbo("legacy-1", True)
    await rack.policy.set_fleet(True)
    assert etcd.ctl("get", PREFIX + "fleet/jumbo", "--print-value-only").stdout.strip() == "true"
    await rack.policy.set_instance_jumbo("legacy-1", True)
    assert json.loads(etcd.ctl("get", PREFIX + "instances/legacy-1", "--print-value-only").stdout)["jumbo"] is True
    fixed = put_by_hand(etcd, "fleet/path_mtus", "[]")
    await rack.wait_for_revision(fixed)
    assert rack.policy.revision_applied == fixed and rack.policy.config.fleet_jumbo is True
    assert rack.policy.config.instance("legacy-1").jumbo is True
    await rack.close()


@pytest.mark.skipif(bool(missing_etcd()), reason="needs etcd and etcdctl (make setup installs them)")
async def test_a_store_restored_from_a_backup_is_read_again_and_a_change_from_before_is_refused(tmp_path):
    """A restored etcd counts revisions from below the controller's view. Watching on from that view
    missed the restored policy and every change until the store caught up, and a change based on
    the old view passed every "not written since" compare."""
    server = EtcdServer(tmp_path / "data", tmp_path / "etcd.log").start()
    restored = None
    try:
        rack = await Rack(server.store_url).start(watch=True)
        backup = tmp_path / "backup.db"
        server.ctl("snapshot", "save", str(backup))
        at_backup = rack.policy.revision
        for _ in range(5):
            await rack.policy.set_instance_jumbo("web-1", False)
            await rack.policy.set_instance_jumbo("web-1", True)
        await rack.policy.set_fleet(False)
        view = rack.policy.snapshot
        server.stop()
        peer = f"http://127.0.0.1:{server.peer_port}"
        done = etcdctl(
            server.client_url, "snapshot", "restore", str(backup), "--data-dir", str(tmp_path / "restored"),
            "--name", server.name, "--initial-cluster", f"{server.name}={peer}", "--initial-advertise-peer-urls", peer,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        restored = EtcdServer(tmp_path / "restored", tmp_path / "etcd.log", client_port=server.client_port, peer_port=server.peer_port).start()
        # The controller reads the restored policy (the fleet flag as at the backup), below its old view.
        await rack.wait_for(lambda: rack.policy.revision < view.revision)
        assert rack.policy.revision == at_backup and rack.policy.config.fleet_jumbo is True
        # Changes made on the restored store reach it, though their revisions are below the old view's.
        edited = put_by_hand(restored, "fleet/path_mtus", '[{"prefix": "198.51.100.0/24", "mtu": 1400}]')
        assert edited < view.revision
        await rack.wait_for(lambda: [str(entry.prefix) for entry in rack.policy.config.path_mtus] == ["198.51.100.0/24"])
        # A change judged on the old view: web-1 as written after the backup, which the restore took back.
        stale = Change(view.revision, puts={"instances/web-1": view.entries["instances/web-1"].value}).depend(view, "instances/web-1")
        with pytest.raises(StoreConflict, match="instances/web-1"):
            await rack.policy.store.commit(stale)
        await rack.close()
    finally:
        server.stop()
        if restored is not None:
            restored.stop()


async def test_a_controller_does_not_start_on_a_store_it_cannot_read(etcd):
    put_by_hand(etcd, "schema", '{"version": 2}')
    with pytest.raises(StoreValueError, match="schema version 2"):
        await Rack(etcd.store_url).start()


async def test_an_unreachable_store_is_reported_naming_its_endpoint():
    url = f"etcd://127.0.0.1:{free_tcp_port()}"
    store = EtcdStore(url)
    with pytest.raises(StoreUnavailable) as info:
        await store.open()
    assert url in str(info.value) and "--listen-client-urls" in str(info.value)
    await store.close()


async def test_the_labs_memory_store_refuses_stale_writes_too():
    policy = FleetPolicy(MemoryStore(str(EXAMPLE)), load_config(EXAMPLE), "rack-1", lambda config, changed: None)
    seen = policy.revision
    await policy.set_fleet(False)
    with pytest.raises(StoreConflict, match=f"revision {policy.revision}"):
        await policy.set_fleet(True, revision=seen)
    with pytest.raises(PolicyError, match="ahead of"):
        await policy.set_fleet(True, revision=policy.revision + 5)
    assert policy.config.fleet_jumbo is False


async def test_the_store_size_and_the_latency_of_a_change_are_printed(etcd):
    """Figures for docs/fleet.md, printed (-s shows them); what is asserted is only that every change landed in order."""
    rack = await Rack(etcd.store_url).start()
    snapshot = await rack.policy.store.snapshot()
    size = sum(len(PREFIX) + len(key) + len(entry.value) for key, entry in snapshot.entries.items())
    latencies, revisions = [], []
    for flip in range(200):
        started = time.perf_counter()
        await rack.policy.set_fleet(flip % 2 == 1)
        latencies.append((time.perf_counter() - started) * 1000)
        revisions.append(rack.policy.revision)
    assert revisions == sorted(set(revisions)) and len(revisions) == 200
    latencies.sort()
    print(
        f"\nexample rack in the store: {len(snapshot.entries)} keys, {size} bytes; "
        f"a fleet flip committed and read back: p50 {latencies[100]:.2f} ms, p99 {latencies[198]:.2f} ms over 200"
    )
    await rack.close()


async def test_changes_are_refused_while_etcd_is_down_and_the_watch_resumes_after(etcd):
    watching = await Rack(etcd.store_url).start(watch=True)
    etcd.stop()
    try:
        with pytest.raises(StoreUnavailable, match=etcd.store_url):
            await watching.policy.set_fleet(False)
        assert watching.policy.config.fleet_jumbo is True
    finally:
        etcd.start()  # the same ports and data directory
    fixed = put_by_hand(etcd, "fleet/jumbo", "false")
    await watching.wait_for_revision(fixed)
    assert watching.policy.config.fleet_jumbo is False and watching.policy.refused_revisions == 0
    await watching.close()


async def test_a_rack_of_more_keys_than_one_transaction_takes_is_seeded_whole(etcd):
    """etcd refuses a transaction of more than 128 writes (--max-txn-ops): seeding goes in slices, the rack's ports last."""
    example = load_config(EXAMPLE)
    many = tuple(replace(example.instances[0], id=f"vm-{n:03}", addresses=(ipaddress.ip_address(f"10.20.{n // 250}.{n % 250 + 1}"),)) for n in range(300))
    rack = await Rack(etcd.store_url, replace(example, instances=many)).start()
    assert len(rack.policy.config.instances) == 300
    assert len(etcd.ctl("get", "--prefix", "--keys-only", PREFIX + "instances/").stdout.split()) == 300
    # An import of as many keys is one transaction: etcd's limit refuses it whole, and says so.
    with pytest.raises(StoreRefused, match="too many operations"):
        await rack.policy.import_yaml(rack.policy.export_yaml(), "big.yaml")
    await rack.close()
