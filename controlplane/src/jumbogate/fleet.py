"""The desired state as keys of a store, and the controller's view of it.

rack.yaml has two kinds of content. Where this controller connects and what
it serves (`switch.p4runtime`, `device_id`, `election_id`, `pipeline`,
`smartnic.control`, `controller.*`, `tls`) stays in the controller's own file.
The policy (every value a reload applies) lives in the store, one key per
section, so that it outlives any one controller and is shared by every rack:

    schema                        {"version": 1}
    fleet/jumbo                   the fleet flag
    fleet/mtu                     mtu.*
    fleet/elephant                elephant.*
    fleet/path_mtus               path_mtus[]
    fleet/merge_services          merge_services[]
    instances/<id>                {"rack", "addresses", "jumbo"}
    racks/<rack>/ports            switch.ports[]
    racks/<rack>/switch           switch.too_deep, icmp_rate_pps, icmp_rate_per_source_pps
    racks/<rack>/routes           routes[] (each route's next hops are its ECMP group)
    racks/<rack>/smartnic         smartnic.internal_prefixes
    fencing/epoch                 the leaders' fencing epoch (election.py; never seeded nor exported)

(all under store.PREFIX; values are JSON with rack.yaml's field names, so
the rack config's own parser validates them). docs/fleet.md has the rules.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import yaml

from .config import ConfigError, RackConfig, config_changes, load_yaml, parse_config
from .election import EPOCH_KEY, FIRST_EPOCH, MAX_EPOCH, parse_epoch
from .state import PolicyError
from .store import PREFIX, Change, MemoryStore, Snapshot, Store, StoreConflict, StoreError

LOG = logging.getLogger("jumbogate.fleet")

SCHEMA_VERSION = 1
# Keys written per transaction while seeding: etcd refuses a transaction
# of more than --max-txn-ops (128 by default) compares or writes.
SEED_KEYS_PER_TRANSACTION = 100
# Seeding slices that another seeding controller got to first; past this
# something else keeps writing the same keys, and the start fails.
SEED_CONFLICTS_TOLERATED = 20
# The rack a controller programs unless told otherwise (--rack).
DEFAULT_RACK = "rack-1"
SCHEMA = "schema"
FLEET_JUMBO = "fleet/jumbo"
FLEET_SECTIONS = {"mtu": "fleet/mtu", "elephant": "fleet/elephant", "path_mtus": "fleet/path_mtus", "merge_services": "fleet/merge_services"}
RACK_SWITCH_FIELDS = ("too_deep", "icmp_rate_pps", "icmp_rate_per_source_pps")
# What a controller's own file keeps: never stored, never imported.
LOCAL_SWITCH_FIELDS = ("p4runtime", "device_id", "election_id", "pipeline", "target")
# A rack or instance name is one path segment of a key.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


def instance_key(instance_id: str) -> str:
    return f"instances/{instance_id}"


def rack_key(rack: str, part: str) -> str:
    return f"racks/{rack}/{part}"


def check_name(what: str, name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"{what} {name!r} cannot name a store key: use letters, digits and . _ : - (no /)")
    return name


class StoreValueError(ValueError):
    """A value in the store that cannot be used, with its key."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"{PREFIX}{key}: {reason}")
        self.key = key
        self.reason = reason


def config_to_data(config: RackConfig) -> dict[str, Any]:
    """The rack.yaml that describes `config`, canonical: loading it gives `config` back."""
    sw = config.switch
    data: dict[str, Any] = {
        "fleet": {"jumbo": config.fleet_jumbo},
        "mtu": {
            "internal": config.mtu.internal,
            "guest_jumbo": config.mtu.guest_jumbo,
            "default_external": config.mtu.default_external,
            "default_external_v6": config.mtu.default_external_v6,
        },
        "switch": {
            "p4runtime": sw.p4runtime,
            "device_id": sw.device_id,
            "election_id": sw.election_id,
            "pipeline": sw.pipeline,
            "target": sw.target,
            "too_deep": sw.too_deep,
            "icmp_rate_pps": sw.icmp_rate_pps,
            "icmp_rate_per_source_pps": sw.icmp_rate_per_source_pps,
            "ports": [{"port": p.port, "role": p.role, **({"name": p.name} if p.name else {})} for p in config.ports],
        },
        "routes": [
            {
                "prefix": str(route.prefix),
                "next_hops": [{"port": h.port, "src_mac": h.src_mac, "dst_mac": h.dst_mac, "weight": h.weight} for h in route.next_hops],
            }
            for route in config.routes
        ],
        "path_mtus": [{"prefix": str(entry.prefix), "mtu": entry.mtu} for entry in config.path_mtus],
        "instances": [{"id": i.id, "addresses": [str(a) for a in i.addresses], "jumbo": i.jumbo} for i in config.instances],
        "merge_services": [
            {"prefix": str(s.prefix), "ports": s.port_lo if s.port_lo == s.port_hi else f"{s.port_lo}-{s.port_hi}"} for s in config.merge_services
        ],
        "elephant": {
            "threshold_bytes": config.elephant.threshold_bytes,
            "idle_timeout_s": config.elephant.idle_timeout_s,
            "max_flows": config.elephant.max_flows,
            "max_onloads_per_epoch": config.elephant.max_onloads_per_epoch,
        },
        "smartnic": {"control": config.smartnic_control, "internal_prefixes": [str(p) for p in config.smartnic_internal_prefixes]},
        "controller": {"listen": config.controller_listen, "insecure": config.controller_insecure},
    }
    if config.controller_metrics is not None:
        data["controller"]["metrics"] = config.controller_metrics
    if config.tls is not None:
        tls = config.tls
        roles = {"admin": sorted(tls.admins), **({"read_only": sorted(tls.read_only)} if tls.read_only else {})}
        data["tls"] = {"ca": str(tls.ca), "cert": str(tls.cert), "key": str(tls.key), "roles": roles}
    return data


def export_yaml(config: RackConfig) -> str:
    return yaml.safe_dump(config_to_data(config), sort_keys=False, default_flow_style=False)


def with_local(data: Any, local: dict[str, Any]) -> Any:
    """Parsed rack.yaml with this controller's own settings in place of the file's."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    switch = out.get("switch")
    out["switch"] = {**(switch if isinstance(switch, dict) else {}), **local["switch"]}
    smartnic = out.get("smartnic")
    out["smartnic"] = {**(smartnic if isinstance(smartnic, dict) else {}), **local["smartnic"]}
    out.pop("tls", None)
    for name in ("controller", "tls"):
        if name in local:
            out[name] = copy.deepcopy(local[name])
    return out


def local_settings(config: RackConfig) -> dict[str, Any]:
    data = config_to_data(config)
    local = {
        "switch": {name: data["switch"][name] for name in LOCAL_SWITCH_FIELDS},
        "smartnic": {"control": data["smartnic"]["control"]},
        "controller": data["controller"],
    }
    if "tls" in data:
        local["tls"] = data["tls"]
    return local


def document(config: RackConfig, rack: str) -> dict[str, Any]:
    """The store's keys for the policy of `config`, as this rack's."""
    data = config_to_data(config)
    doc: dict[str, Any] = {SCHEMA: {"version": SCHEMA_VERSION}, FLEET_JUMBO: data["fleet"]["jumbo"]}
    for section, key in FLEET_SECTIONS.items():
        doc[key] = data[section]
    for item in data["instances"]:
        doc[instance_key(check_name("instance id", item["id"]))] = {"rack": rack, "addresses": item["addresses"], "jumbo": item["jumbo"]}
    doc[rack_key(rack, "ports")] = data["switch"]["ports"]
    doc[rack_key(rack, "switch")] = {name: data["switch"][name] for name in RACK_SWITCH_FIELDS}
    doc[rack_key(rack, "routes")] = data["routes"]
    doc[rack_key(rack, "smartnic")] = {"internal_prefixes": data["smartnic"]["internal_prefixes"]}
    return doc


def encode(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _mapping(key: str, value: Any, allowed: tuple[str, ...]) -> dict:
    if not isinstance(value, dict):
        raise StoreValueError(key, f"expected a JSON object, got {type(value).__name__}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise StoreValueError(key, f"unknown field {unknown[0]!r} (known: {', '.join(allowed)})")
    return value


class Decoder:
    """JSON values of a snapshot, each decoded once per write: a fleet's
    snapshot holds every rack's instances, and a watch event changes few."""

    def __init__(self):
        self._cache: dict[str, tuple[int, Any]] = {}

    def decode(self, snapshot: Snapshot) -> dict[str, Any]:
        """key -> value, or StoreValueError naming the first key (in key order) that is not JSON."""
        out, cache = {}, {}
        for key, entry in snapshot.entries.items():
            hit = self._cache.get(key)
            if hit is not None and hit[0] == entry.mod_revision:
                cache[key] = hit
            else:
                try:
                    cache[key] = (entry.mod_revision, json.loads(entry.value))
                except (UnicodeDecodeError, json.JSONDecodeError) as err:
                    cache[key] = (entry.mod_revision, StoreValueError(key, f"not JSON: {err}"))
            out[key] = cache[key][1]
        self._cache = cache
        bad = sorted(key for key, value in out.items() if isinstance(value, StoreValueError))
        if bad:
            raise out[bad[0]]
        return out


def assemble(local: dict[str, Any], decoded: dict[str, Any], rack: str, source: str) -> RackConfig:
    """This rack's config from the store's decoded values and the controller's own settings, or StoreValueError naming the key at fault."""
    schema = decoded.get(SCHEMA)
    if schema is None:
        raise StoreValueError(SCHEMA, "missing: the store holds no jumbogate policy (seed it from a rack.yaml: jumbogatectl config import)")
    version = _mapping(SCHEMA, schema, ("version",)).get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
        raise StoreValueError(SCHEMA, f"schema version {version!r}; this controller reads version {SCHEMA_VERSION} (a newer jumbogate wrote it?)")
    data: dict[str, Any] = copy.deepcopy(local)
    if FLEET_JUMBO in decoded:
        data["fleet"] = {"jumbo": decoded[FLEET_JUMBO]}
    for section, key in FLEET_SECTIONS.items():
        if key in decoded:
            data[section] = decoded[key]
    switch_part = rack_key(rack, "switch")
    if switch_part in decoded:
        data["switch"].update(_mapping(switch_part, decoded[switch_part], RACK_SWITCH_FIELDS))
    if rack_key(rack, "ports") in decoded:
        data["switch"]["ports"] = decoded[rack_key(rack, "ports")]
    if rack_key(rack, "routes") in decoded:
        data["routes"] = decoded[rack_key(rack, "routes")]
    smartnic_part = rack_key(rack, "smartnic")
    if smartnic_part in decoded:
        data["smartnic"].update(_mapping(smartnic_part, decoded[smartnic_part], ("internal_prefixes",)))
    # Every rack's instances are in the snapshot: pick this rack's in one
    # cheap pass (a fleet has many), and check only those in full.
    instance_ids = []
    for key, value in decoded.items():
        if key.startswith("instances/"):
            if not isinstance(value, dict) or not isinstance(value.get("rack"), str):
                raise StoreValueError(key, 'needs the name of its rack ("rack": a string)')
            if value["rack"] == rack:
                instance_ids.append(key)
    instance_ids.sort()
    for key in instance_ids:
        value = _mapping(key, decoded[key], ("rack", "addresses", "jumbo"))
        data.setdefault("instances", []).append({"id": key.removeprefix("instances/"), **{k: v for k, v in value.items() if k != "rack"}})
    try:
        return parse_config(data, source, fleet_rule=False)
    except ConfigError as err:
        raise StoreValueError(_key_of_field(err.field, rack, instance_ids), f"{err.field}: {err.reason}") from None


def policy_changes(old: RackConfig, new: RackConfig) -> list[str]:
    """The reloadable values that differ; the order of instances is no change (the store keeps them by id)."""

    def by_id(config: RackConfig) -> RackConfig:
        return replace(config, instances=tuple(sorted(config.instances, key=lambda i: i.id)))

    return config_changes(by_id(old), by_id(new))[0]


def _json_object(raw: bytes) -> dict | None:
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _rack_of(raw: bytes) -> str | None:
    value = _json_object(raw)
    return value.get("rack") if value else None


def _key_of_field(field_path: str, rack: str, instance_keys: list[str]) -> str:
    """The store key a rack.yaml field (as a ConfigError names it) came from."""
    head = re.split(r"[.\[]", field_path, maxsplit=1)[0]
    if head == "fleet":
        return FLEET_JUMBO
    if head in FLEET_SECTIONS:
        return FLEET_SECTIONS[head]
    if head == "instances":
        index = re.match(r"instances\[(\d+)\]", field_path)
        return instance_keys[int(index.group(1))] if index else "instances/"
    if head == "routes":
        return rack_key(rack, "routes")
    if field_path.startswith("switch.ports"):
        return rack_key(rack, "ports")
    if head == "smartnic":
        return rack_key(rack, "smartnic")
    return rack_key(rack, "switch")


class FleetPolicy:
    """This controller's view of the store: the last valid config built from it,
    the changes the operator API commits, and the watch that keeps it current.

    `on_change(config, changed)` is called with every new valid config."""

    def __init__(
        self,
        store: Store,
        seed: RackConfig,
        rack: str,
        on_change: Callable[[RackConfig, list[str]], None],
        on_epoch: Callable[[int], None] | None = None,
    ):
        self.store = store
        self.rack = check_name("rack", rack)
        self.seed = seed
        self.local = local_settings(seed)
        self.on_change = on_change
        # Called with the fencing epoch whenever a snapshot holds a new one.
        self.on_epoch = on_epoch
        self.epoch = FIRST_EPOCH
        self.config = seed
        # The newest revision read (valid or not), and what it held.
        self.snapshot = Snapshot(0, {})
        self.revision_applied = 0
        self.refused_revisions = 0
        self.last_refusal = ""
        self._decoder = Decoder()
        if isinstance(store, MemoryStore):
            # The lab's store is this process's memory, seeded from the file.
            store.commit_now(self._whole_file(Snapshot(0, {})))
            self.apply(store.snapshot_now())

    @property
    def revision(self) -> int:
        return self.snapshot.revision

    # ----- start and watch -----

    async def start(self) -> None:
        """Connect, seed what the store lacks from the file (a new store, or a rack new to it), and read the policy.

        Raises StoreUnavailable (no store) or StoreValueError (a store this controller cannot use)."""
        if isinstance(self.store, MemoryStore):
            return  # seeded when made
        await self.store.open()
        conflicts = 0
        while True:
            snapshot = await self.store.snapshot()
            doc, missing = self._to_seed(snapshot)
            if not missing:
                break
            # In slices that fit one transaction; each key is created only
            # if still absent, so two controllers seeding at once seed once.
            chunk = missing[:SEED_KEYS_PER_TRANSACTION]
            try:
                await self.store.commit(Change(snapshot.revision, puts={key: encode(doc[key]) for key in chunk}).depend(snapshot, *chunk))
                LOG.info("seeded %s from %s: %d keys (%s)", self.store.url, self.seed.source, len(chunk), ", ".join(chunk[:6]))
            except StoreConflict:
                conflicts += 1
                if conflicts > SEED_CONFLICTS_TOLERATED:
                    raise
        snapshot = await self.store.snapshot()
        self.config = assemble(self.local, self._decoder.decode(snapshot), self.rack, self.store.url)
        self.snapshot, self.revision_applied = snapshot, snapshot.revision
        self._take_epoch(snapshot)
        differs = policy_changes(self.seed, self.config)
        if differs:
            LOG.info(
                "the store's policy differs from %s in %s: the store's applies (jumbogatectl config import replaces it)", self.seed.source, ", ".join(differs)
            )
        self.on_change(self.config, differs)

    def _to_seed(self, snapshot: Snapshot) -> tuple[dict[str, Any], list[str]]:
        """The file's keys that a new store (no schema) or a rack new to the store (no ports)
        lacks, in the order to write them: each marker last, so that a seeding cut short
        is taken up again by the next start instead of leaving a rack half seeded."""
        doc = document(self.seed, self.rack)
        missing = []
        if SCHEMA not in snapshot.entries:
            missing += [key for key in doc if key.startswith("fleet/") and key not in snapshot.entries] + [SCHEMA]
        ports = rack_key(self.rack, "ports")
        if ports not in snapshot.entries:
            rack_keys = [key for key in doc if key.startswith(("instances/", f"racks/{self.rack}/")) and key != ports]
            missing += [key for key in rack_keys if key not in snapshot.entries] + [ports]
        return doc, missing

    def _whole_file(self, snapshot: Snapshot) -> Change:
        """The lab's memory store: the file's policy, every key of it."""
        doc = document(self.seed, self.rack)
        return Change(snapshot.revision, puts={key: encode(value) for key, value in doc.items()})

    async def run(self) -> None:
        async for snapshot in self.store.watch(self.revision):
            self.apply(snapshot)

    def apply(self, snapshot: Snapshot) -> None:
        """Take a newer snapshot: a valid one becomes the policy; an invalid one is refused,
        counted and reported, and the last valid policy stays in force."""
        if snapshot.reset:
            # The store went back in time: what it holds now is the policy, whatever its revision.
            self._decoder = Decoder()  # its cache is keyed by mod revisions, which the store counts again
        elif snapshot.revision <= self.snapshot.revision:
            return
        self.snapshot = snapshot
        self._take_epoch(snapshot)
        try:
            new = assemble(self.local, self._decoder.decode(snapshot), self.rack, self.store.url)
        except StoreValueError as err:
            self.refused_revisions += 1
            self.last_refusal = f"revision {snapshot.revision}: {err}"
            LOG.error("store revision %d refused, revision %d stays in force: %s", snapshot.revision, self.revision_applied, err)
            return
        changed = policy_changes(self.config, new)
        self.revision_applied = snapshot.revision
        if changed:
            self.config = new
            self.on_change(new, changed)

    def _take_epoch(self, snapshot: Snapshot) -> None:
        """The fencing epoch of a snapshot; one that is not a number is logged and the last stays."""
        entry = snapshot.entries.get(EPOCH_KEY)
        try:
            epoch = parse_epoch(entry.value if entry else None)
        except ValueError as err:
            LOG.error("store revision %d: %s; epoch %d stays", snapshot.revision, err, self.epoch)
            return
        if epoch != self.epoch:
            self.epoch = epoch
            if self.on_epoch is not None:
                self.on_epoch(epoch)

    def replace_now(self, config: RackConfig) -> None:
        """The lab's reload: the memory store takes the file's policy whole (no callback: the caller applies it)."""
        assert isinstance(self.store, MemoryStore)
        self.seed = config
        snapshot = self.store.snapshot_now()
        change = self._whole_file(snapshot)
        change.deletes = {key for key in snapshot.entries if key not in change.puts}
        self.store.commit_now(change)
        self.snapshot, self.config = self.store.snapshot_now(), config
        self.revision_applied = self.snapshot.revision

    # ----- the operator's changes -----

    async def _commit(self, change: Change) -> int:
        revision = await self.store.commit(change)
        if self.snapshot.revision < revision:
            # Answer from the store as committed, not from a watch that may lag.
            try:
                self.apply(await self.store.snapshot())
            except StoreError as err:
                # Committed all the same: the watch brings it when the store answers.
                LOG.warning("committed at revision %d, not read back yet: %s", revision, err)
        return revision

    def _base(self, revision: int) -> int:
        if revision > self.snapshot.revision:
            raise PolicyError("INVALID_ARGUMENT", f"revision {revision} is ahead of this controller's view of the store (revision {self.snapshot.revision})")
        return revision or self.snapshot.revision

    def _stored(self, key: str) -> Any:
        """A key's value in the newest revision read: what a change's transaction is checked against.
        That revision may have been refused (a key edited by hand into nonsense elsewhere), so
        self.config, the last valid policy, may not be what the store holds. None: absent or not JSON."""
        entry = self.snapshot.entries.get(key)
        if entry is None:
            return None
        try:
            return json.loads(entry.value)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None

    async def set_fleet(self, on: bool, revision: int = 0) -> int:
        """Write the fleet flag; the revision it was committed at, where the store holds it as `on`.

        That is what the change's answer shows: the policy in force may not have it yet (its
        read-back failed, or a revision of the store is refused and an older one stays in force)."""
        # A flag the store already holds as asked is written all the same, with no puts: the
        # transaction still checks that the view it was judged on is current.
        puts = {FLEET_JUMBO: encode(on)} if self._stored(FLEET_JUMBO) is not on else {}
        return await self._commit(Change(self._base(revision), puts=puts).depend(self.snapshot, FLEET_JUMBO))

    async def set_instance_jumbo(self, instance_id: str, on: bool, revision: int = 0) -> tuple[int, bool]:
        """Write an instance's flag; the revision it was committed at, and the fleet flag the store
        holds with it (the change depends on it: it is as this view saw it)."""
        instance = self.config.instance(instance_id)
        if instance is None:
            known = ", ".join(i.id for i in self.config.instances) or "none"
            raise PolicyError("NOT_FOUND", f"no instance {instance_id!r} in rack {self.rack} (known: {known})")
        if on and self._stored(FLEET_JUMBO) is not True:
            raise PolicyError("FAILED_PRECONDITION", f"cannot enable jumbo on instance {instance_id!r} while the fleet jumbo flag is off")
        key = instance_key(instance_id)
        value = self._stored(key)
        if not isinstance(value, dict):
            raise PolicyError("FAILED_PRECONDITION", f"{PREFIX}{key} is missing or invalid in the store at revision {self.snapshot.revision}")
        puts = {key: encode({**value, "jumbo": on})} if value.get("jumbo") is not on else {}
        fleet_on = self._stored(FLEET_JUMBO) is True
        return await self._commit(Change(self._base(revision), puts=puts).depend(self.snapshot, FLEET_JUMBO, key)), fleet_on

    async def import_yaml(self, text: str, source: str, revision: int = 0) -> int:
        """Replace the fleet's policy and this rack's with a rack.yaml's, in one transaction.

        The file's own connection settings are ignored (this controller keeps
        its own); instances of this rack that the file does not list leave
        the store, and those it lists become this rack's."""
        try:
            config = parse_config(with_local(load_yaml(text, source), self.local), source, fleet_rule=False)
            doc = document(config, self.rack)
        except (ConfigError, ValueError) as err:
            raise PolicyError("INVALID_ARGUMENT", str(err)) from None
        change = Change(self._base(revision), puts={key: encode(value) for key, value in doc.items()}, whole_store=True)
        for key, entry in self.snapshot.entries.items():
            if key.startswith("instances/") and key not in doc and _rack_of(entry.value) in (self.rack, None):
                change.deletes.add(key)
        change.depend(self.snapshot, *change.puts, *change.deletes)
        return await self._commit(change)

    def export_yaml(self) -> str:
        return export_yaml(self.config)

    async def raise_epoch(self, to: int = 0) -> tuple[int, int]:
        """Raise the fleet's fencing epoch (to `to`, or by one): (the epoch, the revision it was committed at).

        Conditioned on the epoch this controller's view holds, like any change: two operators
        raising it at once do not both think theirs took. Lowering it would fence every leader out."""
        current = self.epoch
        if to and not current < to <= MAX_EPOCH:
            raise PolicyError("FAILED_PRECONDITION", f"the fencing epoch is {current}: it only goes up, to at most 2^64-1 (asked for {to})")
        new = to or current + 1
        if new > MAX_EPOCH:
            raise PolicyError("FAILED_PRECONDITION", f"the fencing epoch is {current}, the highest there is")
        change = Change(self.snapshot.revision, puts={EPOCH_KEY: str(new).encode()}).depend(self.snapshot, EPOCH_KEY)
        revision = await self._commit(change)
        LOG.warning("fencing epoch raised from %d to %d at revision %d: every rack's leader leads again under it", current, new, revision)
        return new, revision
