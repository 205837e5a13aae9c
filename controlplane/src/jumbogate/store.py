"""Where the desired state lives: etcd for a fleet, or memory seeded by rack.yaml for a one-box lab.

Both stores hold the same keys (their layout is `fleet.py`'s) and answer the
same four calls: a snapshot of every key, a change committed as one
transaction, a stream of snapshots as others change the store, and close.

A change names the revision its writer based it on and the keys it depends
on. It is committed only if none of those keys was written or deleted after
that revision (etcd compares each key's mod and create revisions inside the
transaction): a writer working from a stale view is refused with the store's
current revision, never allowed to overwrite what it did not see. Each key
must also still be at the very revision the writer saw it at: an etcd
restored from a backup counts revisions from below the writer's view, where
"not written after the base" would pass for keys the restore took back.

Nothing here reads a clock: revisions order every change, and the only
waits are the RPC deadlines of the etcd client.

The channel to etcd is mutual TLS when the controller is given a CA and a
client certificate and key (--store-ca, --store-cert, --store-key): etcd's
certificate must chain to that CA and name the endpoint (or, with several
endpoints, the one name --store-server-name gives, which gRPC checks in
every member's certificate). Who the controller is to etcd is its
certificate's common name: with etcd's auth on, an etcd user whose role
grants what the controller touches, and nothing else (docs/fleet.md).
Plaintext stays possible (the lab, the emulation) and is warned about at
every start when an endpoint is not a loopback address.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace

import grpc
from aetcd import rpc

from .tls import TlsConfig, channel_credentials, check_key_pair, is_loopback

LOG = logging.getLogger("jumbogate.store")

# Every key of the desired state starts with this; the schema version is in
# the prefix so that an incompatible layout can live beside this one.
PREFIX = "/jumbogate/v1/"
# Deadline of one etcd request. A store that does not answer within it is
# reported as unavailable; the request is not retried behind the caller's back.
REQUEST_TIMEOUT_S = 3.0
# The largest read of the whole prefix the controller takes: etcd's own
# database stays well under its 2 to 8 GiB quota long before this.
MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024
# After a watch breaks (etcd restarted, a member lost), the next attempt waits this long.
WATCH_RETRY_S = 0.5
# gRPC metadata asking etcd to cancel a watch once the member that serves it has had no
# leader for about three election timeouts (etcd's own client sends it for
# WithRequireLeader). Without it, a member cut off from the rest of its cluster keeps a
# watch open and sends it nothing while the others go on changing the policy. Reads and
# transactions do not send it: etcd would refuse them at once during an ordinary leader
# election, which they otherwise outlast within their deadline.
REQUIRE_LEADER = (("hasleader", "true"),)
# How etcd says so (rpctypes.ErrGRPCNoLeader).
NO_LEADER = "etcdserver: no leader"
# A channel left for another (the next endpoint, new TLS files) is closed this long after:
# its calls in flight end by their own deadline first, and the streams still on it (a
# leader's refreshes, a watch) are cut then and start again on the new channel.
RETIRE_GRACE_S = REQUEST_TIMEOUT_S + 1.0


class StoreError(Exception):
    """The store could not be used; `code` names the gRPC status the operator API answers with."""

    code = "UNAVAILABLE"


class StoreUnavailable(StoreError):
    pass


def cancelled_from_outside() -> bool:
    """Whether the running task was asked to stop. A gRPC call whose channel is closed under it
    raises CancelledError as well; that one is a failure of the store, not a request to stop."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class StoreNoLeader(StoreUnavailable):
    """The etcd member that answered has no leader (cut off from the rest of its cluster, or the cluster lost its quorum)."""


class StoreConflict(StoreError):
    """A change based on a revision after which one of its keys moved."""

    code = "ABORTED"

    def __init__(self, message: str, current_revision: int):
        super().__init__(message)
        self.current_revision = current_revision


class StoreRefused(StoreError):
    """A change the store itself refuses (too many keys in one transaction, say)."""

    code = "FAILED_PRECONDITION"


@dataclass(frozen=True)
class Entry:
    value: bytes
    # Revision of the transaction that created the key, and of its last write.
    create_revision: int
    mod_revision: int


@dataclass(frozen=True)
class Snapshot:
    """Every key under PREFIX (without it) as of one revision of the store."""

    revision: int
    entries: dict[str, Entry]
    # The store went back in time (restored from a backup, or rebuilt): this
    # snapshot replaces the view even though its revision is lower.
    reset: bool = False

    def values(self) -> dict[str, bytes]:
        return {key: entry.value for key, entry in self.entries.items()}


@dataclass(frozen=True)
class Health:
    """What the store says of itself when asked."""

    revision: int
    version: str = ""
    db_size_bytes: int = 0


@dataclass
class Change:
    """One transaction: puts and deletes, committed only if the keys in
    `depends_on` are as they were at `base_revision` (present with the same
    creation, or still absent), and, with `whole_store`, no key at all was
    written after it."""

    base_revision: int
    puts: dict[str, bytes] = field(default_factory=dict)
    deletes: set[str] = field(default_factory=set)
    depends_on: dict[str, int] = field(default_factory=dict)  # key -> create revision seen (0: absent)
    whole_store: bool = False
    # key -> the mod revision seen, for the keys of depends_on that were present.
    mod_seen: dict[str, int] = field(default_factory=dict)

    def depend(self, snapshot: Snapshot, *keys: str) -> Change:
        for key in keys:
            entry = snapshot.entries.get(key)
            self.depends_on[key] = entry.create_revision if entry else 0
            if entry:
                self.mod_seen[key] = entry.mod_revision
        return self

    def exact_keys(self) -> list[str]:
        """The keys whose mod revision must be exactly as seen: every one, or for a whole-store
        change only the newest (etcd's compares per transaction are few; a store gone back
        before that write has lost it)."""
        if not self.whole_store:
            return sorted(self.mod_seen)
        return [max(self.mod_seen, key=self.mod_seen.__getitem__)] if self.mod_seen else []


def _conflict(change: Change, current: int, moved: list[str]) -> StoreConflict:
    what = ", ".join(moved) if moved else "a key it depends on"
    return StoreConflict(
        f"the store moved on: this change was based on revision {change.base_revision}, the store is at revision {current} "
        f"({what} changed since); read it again and retry",
        current,
    )


class MemoryStore:
    """The one-box lab's store: the document in this process's memory, seeded
    from rack.yaml at start and by every reload. A controller restart starts
    from the file again; a fleet uses etcd."""

    def __init__(self, source: str):
        self.url = f"file:{source}"
        self.revision = 0
        self._entries: dict[str, Entry] = {}
        self._changed = asyncio.Event()
        self._closed = False

    async def open(self) -> None:
        return None

    async def health(self) -> Health:
        return Health(self.revision, "memory")

    def snapshot_now(self) -> Snapshot:
        return Snapshot(self.revision, dict(self._entries))

    async def snapshot(self) -> Snapshot:
        return self.snapshot_now()

    def commit_now(self, change: Change) -> int:
        moved = [key for key in self._moved(change)]
        if moved or (change.whole_store and self.revision > change.base_revision):
            raise _conflict(change, self.revision, moved)
        if not change.puts and not change.deletes:
            return self.revision  # a check alone, as in etcd: no new revision
        self.revision += 1
        for key in change.deletes:
            self._entries.pop(key, None)
        for key, value in change.puts.items():
            old = self._entries.get(key)
            self._entries[key] = Entry(value, old.create_revision if old else self.revision, self.revision)
        self._changed.set()
        self._changed = asyncio.Event()
        return self.revision

    def _moved(self, change: Change):
        exact = change.exact_keys()
        for key, created in change.depends_on.items():
            entry = self._entries.get(key)
            if (
                (entry.create_revision if entry else 0) != created
                or (entry and entry.mod_revision > change.base_revision)
                or (key in exact and (entry.mod_revision if entry else 0) != change.mod_seen[key])
            ):
                yield key

    async def commit(self, change: Change) -> int:
        return self.commit_now(change)

    async def watch(self, after: int) -> AsyncIterator[Snapshot]:
        while not self._closed:
            if self.revision > after:
                after = self.revision
                yield self.snapshot_now()
            await self._changed.wait()

    async def close(self) -> None:
        self._closed = True
        self._changed.set()


def range_end(prefix: bytes) -> bytes:
    """The end of etcd's key range holding every key that starts with `prefix`."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


def parse_etcd_url(url: str) -> list[tuple[str, int]]:
    """'etcd://10.0.0.1:2379,10.0.0.2:2379' -> [(host, port), ...]; ValueError with the reason."""
    if not url.startswith("etcd://"):
        raise ValueError(f"{url!r} is not etcd://HOST:PORT[,HOST:PORT...]")
    endpoints = []
    for part in url.removeprefix("etcd://").rstrip("/").split(","):
        host, sep, port = part.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{part!r} in {url!r} is not HOST:PORT")
        endpoints.append((host, int(port)))
    if len(endpoints) > 1:
        # gRPC balances over a list of addresses only for IP literals.
        for host, _ in endpoints:
            try:
                ipaddress.ip_address(host)
            except ValueError:
                raise ValueError(f"{host!r} in {url!r}: several endpoints must be IP addresses (or give one name)") from None
    return endpoints


def _grpc_target(endpoints: list[tuple[str, int]]) -> str:
    if len(endpoints) == 1:
        host, port = endpoints[0]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    family = "ipv6" if ":" in endpoints[0][0] else "ipv4"
    return f"{family}:" + ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in endpoints)


def controller_prefixes() -> list[str]:
    """Every key prefix the controller reads and writes in etcd: what its etcd role must grant (readwrite), and no more."""
    from .election import ELECTION_PREFIX
    from .learned import LEARNED_PREFIX

    return [PREFIX, ELECTION_PREFIX, LEARNED_PREFIX]


class EtcdStore:
    """The desired state in etcd (v3 API over gRPC, through aetcd's generated stubs).

    With `tls` (the CA etcd's certificates chain to, the controller's client certificate
    and key) the channel is mutual TLS; `server_name` is the name checked in etcd's
    certificate instead of the endpoint's host (required with several endpoints)."""

    def __init__(self, url: str, tls: TlsConfig | None = None, server_name: str | None = None):
        self.endpoints = parse_etcd_url(url)
        self.url = "etcd://" + ",".join(f"{h}:{p}" for h, p in self.endpoints)
        if server_name and tls is None:
            raise ValueError("--store-server-name names etcd's certificate: it needs --store-ca, --store-cert and --store-key")
        if tls is not None and len(self.endpoints) > 1 and not server_name:
            raise ValueError(
                f"{self.url}: over TLS with several endpoints gRPC checks one name in every member's certificate, not each "
                "member's own address: give --store-server-name NAME, a DNS or IP subject alternative name every member's certificate carries"
            )
        self.tls = tls
        self.server_name = server_name
        self.revision = 0
        # The highest revision any answer carried (reads, commits, the watch): a store that
        # answers below it went back in time.
        self.highest_revision = 0
        # etcd's cluster id as last answered: a cluster rebuilt under another token has a new one.
        self.cluster_id = 0
        self._prefix = PREFIX.encode()
        self._channel: grpc.aio.Channel | None = None
        self._kv = None
        self._watch = None
        # The endpoint the channel tries first; moved on when its member has no leader.
        self._first = 0
        # Times the channel moved on to the next endpoint.
        self.moves = 0
        # Channels left for another (the next endpoint, new TLS files), each closing after RETIRE_GRACE_S.
        self._retiring: dict[asyncio.Task, grpc.aio.Channel] = {}
        # The TLS files as last read (at open, and by every reload that took).
        self._credentials: grpc.ChannelCredentials | None = None

    @property
    def channel(self) -> grpc.aio.Channel:
        assert self._channel is not None, "open() first"
        return self._channel

    def _unavailable(self, err: grpc.aio.AioRpcError) -> StoreUnavailable:
        if err.code() == grpc.StatusCode.UNAVAILABLE and NO_LEADER in (err.details() or ""):
            return StoreNoLeader("the etcd member answering has no leader: cut off from the rest of its cluster, or the cluster lost its quorum")
        if err.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            return StoreUnavailable(f"etcd at {self.url} refused the controller ({err.code().name.lower()}: {err.details()}); {self._who()}")
        if self.tls is not None:
            name = self.server_name or self.endpoints[0][0]
            hint = (
                f"; over TLS also that etcd's certificate chains to --store-ca ({self.tls.ca}) and names {name} (an IP subject "
                f"alternative name for an address), and that etcd trusts the CA that signed --store-cert ({self.tls.cert}; etcd's --trusted-ca-file)"
            )
        else:
            hint = "; an etcd that serves TLS (--cert-file, --client-cert-auth) needs --store-ca, --store-cert and --store-key"
        return StoreUnavailable(
            f"etcd at {self.url} did not answer ({err.code().name.lower()}: {err.details()}); "
            "check that etcd runs, listens on that client URL (--listen-client-urls) and has a quorum, and the controller's --store" + hint
        )

    def _who(self) -> str:
        """What etcd's auth wants of the controller, for a refusal."""
        prefixes = ", ".join(controller_prefixes())
        if self.tls is None:
            return "with etcd's auth on, the controller is the etcd user its client certificate names: give --store-ca, --store-cert and --store-key (docs/fleet.md)"
        return (
            f"with etcd's auth on, the common name of the certificate in {self.tls.cert} must be an etcd user whose role "
            f"grants readwrite on the prefixes {prefixes} (docs/fleet.md)"
        )

    async def open(self) -> None:
        """Connect and read once, so that a store that is not there is reported at start."""
        self._connect()
        await self.snapshot()

    def _connect(self) -> None:
        # Pick the first endpoint that answers (from self._first on), and move on when it stops.
        options = [
            ("grpc.lb_policy_name", "pick_first"),
            ("grpc.max_reconnect_backoff_ms", 1000),
            # A fleet's snapshot outgrows gRPC's default 4 MiB message.
            ("grpc.max_receive_message_length", MAX_SNAPSHOT_BYTES),
        ]
        order = self.endpoints[self._first :] + self.endpoints[: self._first]
        if self.tls is None:
            if not all(is_loopback(f"[{host}]:{port}") for host, port in self.endpoints):
                LOG.warning(
                    "WARNING: plaintext to etcd at %s, which is not a loopback address: anyone who reaches it can read and rewrite "
                    "the fleet's policy, past the operator API's roles. Give --store-ca, --store-cert and --store-key (mutual TLS; docs/fleet.md)",
                    self.url,
                )
            self._channel = grpc.aio.insecure_channel(_grpc_target(order), options=options)
        else:
            if self.server_name:
                options.append(("grpc.ssl_target_name_override", self.server_name))
            if self._credentials is None:
                # At start the files were checked by whoever made this store (the daemon says why they cannot serve).
                self._credentials = channel_credentials(self.tls)
            self._channel = grpc.aio.secure_channel(_grpc_target(order), self._credentials, options=options)
        self._kv = rpc.KVStub(self._channel)
        self._watch = rpc.WatchStub(self._channel)

    def read_tls(self) -> grpc.ChannelCredentials:
        """The credentials --store-ca, --store-cert and --store-key make as the files are now; OSError or
        ValueError naming them when they cannot be used (unreadable, not PEM, a key not the certificate's,
        a certificate not valid now or not signed by the CA)."""
        assert self.tls is not None
        ca, cert, key = self.tls.files()
        check_key_pair(self.tls, ca, cert, key)
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)

    def use_tls(self, credentials: grpc.ChannelCredentials) -> None:
        """Connect with `credentials` (read_tls's) from now on: every call made after this one goes over a
        new connection that uses them; the old channel is retired (see _retire)."""
        self._credentials = credentials
        if self._channel is None:
            return
        old = self._channel
        self._connect()
        self._retire(old)

    def move_on(self) -> bool:
        """Connect again, trying the next endpoint first (pick_first stays on a member that answers,
        even one without a leader). False, and nothing done, with a single endpoint. Which member the
        old channel was on is not known (pick_first may have moved past the first), so the next may be
        the same member: the watch moves on again after every failed read while it has met no leader."""
        if len(self.endpoints) == 1 or self._channel is None:
            return False
        old = self._channel
        self._first = (self._first + 1) % len(self.endpoints)
        self.moves += 1
        self._connect()
        self._retire(old)
        return True

    def _retire(self, channel: grpc.aio.Channel) -> None:
        """Close `channel` after RETIRE_GRACE_S: calls in flight end by their deadline first; streams
        still on it then (a leader's refreshes, its key's guard, a watch) end as a broken stream, and
        their owners open the next one on the store's channel as it is now."""
        task = asyncio.get_running_loop().create_task(channel.close(grace=RETIRE_GRACE_S))
        self._retiring[task] = channel
        task.add_done_callback(lambda done: self._retiring.pop(done, None))

    async def snapshot(self) -> Snapshot:
        request = rpc.RangeRequest(key=self._prefix, range_end=range_end(self._prefix))
        try:
            reply = await self._kv.Range(request, timeout=REQUEST_TIMEOUT_S)
        except grpc.aio.AioRpcError as err:
            raise self._unavailable(err) from None
        self.revision = reply.header.revision
        self.highest_revision = max(self.highest_revision, self.revision)
        self.cluster_id = reply.header.cluster_id
        return Snapshot(reply.header.revision, {self._key(kv.key): Entry(kv.value, kv.create_revision, kv.mod_revision) for kv in reply.kvs})

    async def health(self) -> Health:
        """The answering member's status (StoreUnavailable when none answers)."""
        try:
            reply = await rpc.MaintenanceStub(self.channel).Status(rpc.StatusRequest(), timeout=REQUEST_TIMEOUT_S)
        except grpc.aio.AioRpcError as err:
            raise self._unavailable(err) from None
        return Health(reply.header.revision, reply.version, reply.dbSize)

    def _key(self, raw: bytes) -> str:
        return raw[len(self._prefix) :].decode()

    def _full(self, key: str) -> bytes:
        return self._prefix + key.encode()

    async def commit(self, change: Change) -> int:
        compare = []
        after = change.base_revision + 1
        exact = change.exact_keys()
        for key in exact:
            compare.append(rpc.Compare(key=self._full(key), target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=change.mod_seen[key]))
        for key, created in sorted(change.depends_on.items()):
            full = self._full(key)
            # Deleted or recreated since the base: its create revision differs.
            compare.append(rpc.Compare(key=full, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=created))
            # (A whole-store change compares every key's mod revision at once, below.)
            if created and not change.whole_store:
                compare.append(rpc.Compare(key=full, target=rpc.Compare.MOD, result=rpc.Compare.LESS, mod_revision=after))
        if change.whole_store:
            compare.append(
                rpc.Compare(key=self._prefix, range_end=range_end(self._prefix), target=rpc.Compare.MOD, result=rpc.Compare.LESS, mod_revision=after)
            )
        success = [rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=self._full(key))) for key in sorted(change.deletes)]
        success += [rpc.RequestOp(request_put=rpc.PutRequest(key=self._full(key), value=value)) for key, value in sorted(change.puts.items())]
        # On a conflict, read the keys back to say which moved.
        failure = [rpc.RequestOp(request_range=rpc.RangeRequest(key=self._full(key))) for key in sorted(change.depends_on)]
        try:
            reply = await self._kv.Txn(rpc.TxnRequest(compare=compare, success=success, failure=failure), timeout=REQUEST_TIMEOUT_S)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise StoreRefused(f"etcd at {self.url} refused the transaction: {err.details()}") from None
            raise self._unavailable(err) from None
        if not reply.succeeded:
            moved = []
            for key, response in zip(sorted(change.depends_on), reply.responses, strict=True):
                kvs = response.response_range.kvs
                created = kvs[0].create_revision if kvs else 0
                mod = kvs[0].mod_revision if kvs else 0
                if created != change.depends_on[key] or (kvs and mod >= after) or (key in exact and mod != change.mod_seen[key]):
                    moved.append(key)
            raise _conflict(change, reply.header.revision, moved)
        self.revision = max(self.revision, reply.header.revision)
        self.highest_revision = max(self.highest_revision, reply.header.revision)
        return reply.header.revision

    async def watch(self, after: int) -> AsyncIterator[Snapshot]:
        """Snapshots as the store changes after revision `after`; survives etcd restarts
        (a broken watch is resumed from the last revision seen, or from a fresh read if
        that revision was compacted away). A store that answers below a revision it gave
        before, or under another cluster id, was restored or rebuilt: its snapshot comes
        marked `reset`, and the watch goes on from there."""
        broken = False
        # Said once until the watch resumes, however many members without a leader it meets meanwhile.
        leaderless = False
        cluster = self.cluster_id
        while True:
            try:
                # What this client saw before, the watch's own view or not (a commit's answer may be newer).
                seen = max(after, self.highest_revision)
                snapshot = await self.snapshot()
                if broken:
                    LOG.info("watch on %s resumed at revision %d", self.url, snapshot.revision)
                    broken = leaderless = False
                entries = dict(snapshot.entries)
                cluster = cluster or self.cluster_id
                if snapshot.revision < seen or (cluster and self.cluster_id != cluster):
                    # Watching on from `after` would wait for revisions this store may take long to
                    # reach, and miss everything until then.
                    LOG.warning(
                        "the store at %s went back from revision %d to %d (cluster %x, was %x): restored from a backup? "
                        "Its policy is read again whole; raise the fencing epoch (jumbogatectl fleet raise-epoch) if its "
                        "revisions are below the election ids the devices saw",
                        self.url, seen, snapshot.revision, self.cluster_id, cluster,
                    )  # fmt: skip
                    cluster, after = self.cluster_id, snapshot.revision
                    self.highest_revision = snapshot.revision
                    yield replace(snapshot, reset=True)
                elif snapshot.revision > after:
                    after = snapshot.revision
                    yield snapshot
                async for revision in self._events(after, entries):
                    after = revision
                    yield Snapshot(revision, dict(entries))
            except StoreNoLeader as err:
                # Another member may still lead: the next read asks the next endpoint.
                moved = self.move_on()
                if not leaderless:
                    LOG.warning(
                        "watch on %s cancelled: %s; reading the store again %s",
                        self.url, err, "from the next endpoint" if moved else f"every {WATCH_RETRY_S:.1f} s until it has one",
                    )  # fmt: skip
                broken = leaderless = True
            except (StoreError, grpc.aio.AioRpcError) as err:
                if leaderless:
                    # Met no leader, and this read failed too (a member without one lets it run to
                    # its deadline): the channel may have come back to that member; the next one.
                    self.move_on()
                if not broken:
                    LOG.warning("watch on %s broken, retrying every %.1f s: %s", self.url, WATCH_RETRY_S, err)
                broken = True
            # Whatever happened, start again from a full read.
            await asyncio.sleep(WATCH_RETRY_S)

    async def _events(self, after: int, entries: dict[str, Entry]) -> AsyncIterator[int]:
        create = rpc.WatchCreateRequest(key=self._prefix, range_end=range_end(self._prefix), start_revision=after + 1)
        # Written on the call, not fed from a generator: a cancelled call then leaves
        # nothing behind (no request reader waiting, no generator to finalize).
        call = self._watch.Watch(metadata=REQUIRE_LEADER)
        try:
            await write_to_stream(call, rpc.WatchRequest(create_request=create))
            async for reply in call:
                if reply.canceled and NO_LEADER in reply.cancel_reason:
                    raise StoreNoLeader(f"the etcd member serving the watch has no leader ({reply.cancel_reason})")
                if reply.canceled or reply.compact_revision:
                    raise StoreUnavailable(f"watch on {self.url} canceled ({reply.cancel_reason or f'compacted at {reply.compact_revision}'})")
                if not reply.events:
                    continue
                for event in reply.events:
                    key = self._key(event.kv.key)
                    if event.type == rpc.Event.DELETE:
                        entries.pop(key, None)
                    else:
                        entries[key] = Entry(event.kv.value, event.kv.create_revision, event.kv.mod_revision)
                revision = max(event.kv.mod_revision for event in reply.events)
                self.revision = max(self.revision, revision)
                self.highest_revision = max(self.highest_revision, revision)
                yield revision
        except grpc.aio.AioRpcError as err:
            raise self._unavailable(err) from None
        except asyncio.CancelledError:
            if cancelled_from_outside():
                raise
            raise StoreUnavailable(f"watch on {self.url} ended: the channel it ran on was retired (another member, new TLS files)") from None
        finally:
            with contextlib.suppress(Exception):
                call.cancel()

    async def close(self) -> None:
        retiring = list(self._retiring.items())
        for task, _ in retiring:
            task.cancel()
        await asyncio.gather(*(task for task, _ in retiring), return_exceptions=True)
        for _, channel in retiring:
            await channel.close()
        if self._channel is not None:
            await self._channel.close()
            self._channel = None


Store = MemoryStore | EtcdStore


async def write_to_stream(call, request) -> None:
    """Write `request` on a streaming call. One that already ended (etcd went away before
    the write) takes nothing, and raises nothing here: reading it raises why it ended, an
    AioRpcError like every other failure of the store."""
    with contextlib.suppress(asyncio.InvalidStateError):
        await call.write(request)


def open_store(url: str | None, source: str, tls: TlsConfig | None = None, server_name: str | None = None) -> Store:
    """The store named by --store (etcd://...), over mutual TLS with `tls`, or the lab's memory store seeded by `source`."""
    if url is None or url.startswith("file:"):
        if tls is not None or server_name:
            raise ValueError("--store-ca, --store-cert, --store-key and --store-server-name are for an etcd store (--store etcd://...)")
        return MemoryStore(source)
    return EtcdStore(url, tls, server_name)
