"""Which of a rack's controllers leads: an election on etcd, with a lease.

Each controller of a rack puts a key under election/<rack>/ bound to a
lease of its own (TTL 2 s, kept alive three times a TTL). The key created
first leads; each other waits for the key created just before its own to
go. A controller that dies, pauses or loses etcd stops refreshing its
lease, etcd deletes its key when the lease runs out, and the next in line
leads.

The leader's P4Runtime election id is the revision at which it won (low 64
bits: it writes its key again on winning, and that write's revision is the
id) under the fleet's fencing epoch (high 64 bits): a later leader won
later, so its id is higher, and the switch takes it as primary over any
earlier leader that is still connected. (Its key's create revision, its
place in line, would not do: a standby that joined long ago can win after
leaders that joined after it, as a lost quorum showed in the fault run.) The epoch is a key
of the store (EPOCH_KEY, 1 while absent), read when a leader wins: a store
restored from a backup or rebuilt counts its revisions from lower than the
ids the switches and SmartNICs already saw, and raising the epoch
(jumbogatectl fleet raise-epoch) puts every later id above them again. Revisions, not
clocks, order the leaders: the only clock here makes a leader that can no
longer refresh its lease step down before etcd says so, never after. etcd
starts a lease's TTL when it handles the grant or keepalive, which is after
the request left: counted from the moment each request was sent, the
leader's own deadline always falls before etcd's, however slow the answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass

import grpc
from aetcd import rpc
from grpc.aio import UsageError

from .store import PREFIX, REQUEST_TIMEOUT_S, EtcdStore, StoreUnavailable, cancelled_from_outside, range_end, write_to_stream

LOG = logging.getLogger("jumbogate.election")

# etcd's lease TTL is whole seconds; 2 s bounds a dead leader's reign.
LEASE_TTL_S = 2
KEEPALIVE_INTERVAL_S = LEASE_TTL_S / 3
# How long before its lease could run out in etcd a leader stops leading: room
# for the event loop to be late in noticing, and for the clocks' rates to differ.
STEP_DOWN_MARGIN_S = 0.2
# Between a broken keepalive stream and the next.
STREAM_RETRY_S = 0.05
# A keepalive stream whose oldest refresh went unanswered this long is given up for another.
STALLED_STREAM_S = LEASE_TTL_S / 2
# The fleet's fencing epoch, the high 64 bits of every leader's election id:
# this key under the policy's prefix (so that every controller's watch sees
# it raised), and its value while the key is absent.
EPOCH_KEY = "fencing/epoch"
FIRST_EPOCH = 1
# P4Runtime's election id is 128 bits: the epoch has the high 64.
MAX_EPOCH = (1 << 64) - 1
# Candidates' keys, apart from the policy's (store.PREFIX): a watch on the
# policy never sees a candidacy.
ELECTION_PREFIX = "/jumbogate/election/v1/"


def parse_epoch(raw: bytes | None) -> int:
    """The epoch a stored value holds; ValueError when it holds none (not a whole number from 1 to 2^64-1)."""
    if raw is None:
        return FIRST_EPOCH
    text = raw.decode(errors="replace").strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_EPOCH:
        raise ValueError(f"{PREFIX}{EPOCH_KEY} holds {text[:40]!r}, not a fencing epoch (a whole number from 1 to 2^64-1)")
    return int(text)


@dataclass(frozen=True)
class Leadership:
    revision: int
    lease: int
    epoch: int = FIRST_EPOCH

    @property
    def election_id(self) -> int:
        return (self.epoch << 64) | self.revision

    def shown(self) -> str:
        return f"{self.epoch}:{self.revision}"


class Election:
    """One controller's candidacy in its rack's election."""

    def __init__(self, store: EtcdStore, rack: str, name: str):
        self.store = store
        self.rack = rack
        self.name = name
        self.prefix = f"{ELECTION_PREFIX}{rack}/".encode()
        self.leadership: Leadership | None = None
        # Set when the leadership (or the candidacy) is lost.
        self.lost = asyncio.Event()
        self._keepalive: asyncio.Task | None = None
        # While leading: ends the term if its key goes (deleted by hand while the lease lives).
        self._key_guard: asyncio.Task | None = None
        self._lease: int | None = None

    def stubs(self):
        channel = self.store.channel
        return rpc.KVStub(channel), rpc.LeaseStub(channel), rpc.WatchStub(channel)

    async def campaign(self) -> Leadership:
        """Wait until this controller leads; return its leadership (lost is set when it ends).

        Every call takes the store's channel as it is then (self.stubs()): it moves to another member,
        and a retired one is closed under the calls still on it. Such a call fails with CancelledError,
        or UsageError once closed; both are the store failing, as AioRpcError is, and the campaign
        raises StoreUnavailable for them, so that the controller campaigns again instead of stopping."""
        self._stop_keepalive()
        self.lost = asyncio.Event()
        try:
            asked = time.monotonic()
            grant = await self.stubs()[1].LeaseGrant(rpc.LeaseGrantRequest(TTL=LEASE_TTL_S), timeout=REQUEST_TIMEOUT_S)
            self._lease = grant.ID
            key = self.prefix + f"{grant.ID:x}".encode()
            self._keepalive = asyncio.create_task(self._keep_alive(grant.ID, asked + grant.TTL))
            put = await self.stubs()[0].Put(rpc.PutRequest(key=key, value=self.name.encode(), lease=grant.ID), timeout=REQUEST_TIMEOUT_S)
            return await self._wait_to_lead(key, put.header.revision, grant.ID)
        except grpc.aio.AioRpcError as err:
            self._stop_keepalive()
            raise StoreUnavailable(f"etcd at {self.store.url} stopped answering the election ({err.code().name.lower()}: {err.details()})") from None
        except UsageError:
            self._stop_keepalive()
            raise StoreUnavailable(f"the election's channel to {self.store.url} was retired under a call; campaigning again") from None
        except asyncio.CancelledError:
            self._stop_keepalive()
            if cancelled_from_outside():
                raise
            raise StoreUnavailable(f"a call of the election to {self.store.url} was cancelled (its channel retired); campaigning again") from None

    async def _wait_to_lead(self, key: bytes, mine: int, lease: int) -> Leadership:
        waiting_for = b""
        while not self.lost.is_set():
            kv, _, _ = self.stubs()  # the store's channel as it is now (see _refresh_until_lost)
            candidates = await kv.Range(
                rpc.RangeRequest(key=self.prefix, range_end=range_end(self.prefix), sort_target=rpc.RangeRequest.CREATE, sort_order=rpc.RangeRequest.ASCEND),
                timeout=REQUEST_TIMEOUT_S,
            )
            ahead = [kv_ for kv_ in candidates.kvs if kv_.create_revision < mine]
            if not any(kv_.key == key for kv_ in candidates.kvs):
                # Our key is gone (the lease ran out while we waited): start over.
                self.lost.set()
                break
            if not ahead:
                # The id is the revision at which it won, written now, not its place in line (`mine`): a
                # standby that joined the line long ago would otherwise lead under an id below those of
                # leaders that won after it joined (after a lost quorum, say), and the fenced devices would
                # refuse it for good. A write now is above every id any earlier leader took.
                won = await self.stubs()[0].Put(rpc.PutRequest(key=key, value=self.name.encode(), lease=lease), timeout=REQUEST_TIMEOUT_S)
                epoch = await self._epoch()
                if self.lost.is_set():
                    break  # the lease lapsed while it won: leading now would outlive it
                self.leadership = Leadership(won.header.revision, lease, epoch)
                self._key_guard = asyncio.create_task(self._lose_when_deleted(key, won.header.revision))
                LOG.info("leading rack %s (election id %s)", self.rack, self.leadership.shown())
                return self.leadership
            if ahead[-1].key != waiting_for:
                # Said once per candidate ahead: the log tells where a standby stands in line.
                waiting_for = ahead[-1].key
                LOG.info(
                    "standing by for rack %s: in line at revision %d behind %s (%d ahead)",
                    self.rack, mine, ahead[-1].value.decode(errors="replace"), len(ahead),
                )  # fmt: skip
            await self._wait_for_delete(ahead[-1].key, candidates.header.revision)
        self._stop_keepalive()
        raise StoreUnavailable(f"lost the election's lease on {self.store.url} while waiting to lead")

    async def leader(self) -> tuple[str, int] | None:
        """The rack's leader now, (its name, the revision it won at), from the store; None when no one campaigns."""
        kv, _, _ = self.stubs()
        request = rpc.RangeRequest(
            key=self.prefix, range_end=range_end(self.prefix), sort_target=rpc.RangeRequest.CREATE, sort_order=rpc.RangeRequest.ASCEND, limit=1
        )
        try:
            reply = await kv.Range(request, timeout=REQUEST_TIMEOUT_S)
        except grpc.aio.AioRpcError as err:
            raise StoreUnavailable(f"etcd at {self.store.url} did not answer ({err.code().name.lower()}: {err.details()})") from None
        if not reply.kvs:
            return None
        # Its key was written again when it won: that write's revision is its id.
        return reply.kvs[0].value.decode(errors="replace"), reply.kvs[0].mod_revision

    async def _epoch(self) -> int:
        """The fleet's fencing epoch as the store holds it now. One edited by hand
        into nonsense is refused: leading under a guessed epoch could put this
        leader below the ids the devices saw, or raise it past any later fix."""
        reply = await self.stubs()[0].Range(rpc.RangeRequest(key=(PREFIX + EPOCH_KEY).encode()), timeout=REQUEST_TIMEOUT_S)
        try:
            return parse_epoch(reply.kvs[0].value if reply.kvs else None)
        except ValueError as err:
            await self.resign()
            raise StoreUnavailable(f"{err}; not leading until it is fixed (jumbogatectl fleet raise-epoch --to N)") from None

    async def _wait_for_delete(self, key: bytes, revision: int) -> None:
        """Until `key` is deleted (after `revision`), etcd cancels the watch, or this candidacy is lost."""
        _, _, watch_stub = self.stubs()
        create = rpc.WatchCreateRequest(key=key, start_revision=revision + 1, filters=[rpc.WatchCreateRequest.NOPUT])
        # Written on the call, not fed from a generator: a cancelled call then leaves
        # nothing behind (no request reader waiting, no generator to finalize).
        call = watch_stub.Watch()
        lost = asyncio.create_task(self.lost.wait())
        try:

            async def deleted():
                await write_to_stream(call, rpc.WatchRequest(create_request=create))
                async for reply in call:
                    # A watch etcd cancels (its revision compacted, say) sees no more events:
                    # the caller looks at the line again.
                    if reply.canceled or any(event.type == rpc.Event.DELETE for event in reply.events):
                        return

            done = asyncio.create_task(deleted())
            await asyncio.wait({done, lost}, return_when=asyncio.FIRST_COMPLETED)
            done.cancel()
            if done.done() and not done.cancelled() and done.exception() is not None:
                raise done.exception()
        finally:
            lost.cancel()
            call.cancel()

    async def _keep_alive(self, lease: int, expires: float) -> None:
        """Refresh the lease; set `lost` when etcd says it expired, or when it may expire before the next refresh is answered.
        Whatever else ends it sets `lost` too: a leader whose lease nobody refreshes must not go on leading."""
        try:
            await self._refresh_until_lost(lease, expires)
        except asyncio.CancelledError:
            if cancelled_from_outside():
                raise  # stopped on purpose (resign, a new campaign)
            # A gRPC call cancelled under it (its channel closed) raises this too: the refreshes ended.
            self._lose(f"refreshing lease {lease:x} ended: a call to etcd was cancelled")
        except Exception as err:
            LOG.exception("refreshing lease %x failed", lease)
            self._lose(f"refreshing lease {lease:x} failed ({type(err).__name__}: {err})")

    async def _refresh_until_lost(self, lease: int, expires: float) -> None:
        """`expires`: the monotonic time before which etcd cannot have expired the lease (a request's sending time plus
        the TTL etcd answered it with). Refreshes go out every KEEPALIVE_INTERVAL_S without waiting for the answer
        to the last, so slow answers still extend the lease; the leader steps down at `expires` less the margin,
        on a timer, whether or not anything failed."""

        def left() -> float:
            return expires - STEP_DOWN_MARGIN_S - time.monotonic()

        while not self.lost.is_set():
            # On the store's channel as it is now: it moves to another member when its own has no leader.
            _, lease_stub, _ = self.stubs()
            call = lease_stub.LeaseKeepAlive()
            # Sending times of the refreshes not yet answered, oldest first: etcd answers a stream in order.
            unanswered: deque[float] = deque()

            async def send(call=call, unanswered=unanswered):
                while True:
                    unanswered.append(time.monotonic())
                    await write_to_stream(call, rpc.LeaseKeepAliveRequest(ID=lease))
                    await asyncio.sleep(KEEPALIVE_INTERVAL_S)

            async def receive(call=call, unanswered=unanswered) -> str:
                nonlocal expires
                while True:
                    reply = await call.read()
                    if reply is grpc.aio.EOF or reply.TTL <= 0:
                        return f"etcd let lease {lease:x} expire"
                    sent = unanswered.popleft() if unanswered else time.monotonic()
                    expires = max(expires, sent + reply.TTL)

            tasks = {asyncio.create_task(send()), asyncio.create_task(receive())}
            try:
                while True:
                    if left() <= 0:
                        self._lose(f"lease {lease:x} not refreshed in time: etcd may expire it within {STEP_DOWN_MARGIN_S} s")
                        return
                    done, _ = await asyncio.wait(tasks, timeout=min(left(), KEEPALIVE_INTERVAL_S), return_when=asyncio.FIRST_COMPLETED)
                    if done:
                        ended = done.pop()
                        # A call cancelled under it (its channel closed) ends a task as cancelled: a broken stream.
                        if not ended.cancelled() and ended.exception() is None and ended.result():
                            self._lose(ended.result())
                            return
                        break  # the stream broke: another one
                    if unanswered and time.monotonic() - unanswered[0] > STALLED_STREAM_S:
                        break  # nothing answered for long: another stream (a middlebox may have dropped this one)
            finally:
                for task in tasks:
                    task.cancel()
                call.cancel()
            # A pause so short it costs no refresh, so that a channel failing at once is no busy loop.
            await asyncio.sleep(max(0.0, min(STREAM_RETRY_S, left())))

    def _lose(self, why: str) -> None:
        if self.leadership is not None:
            LOG.warning("no longer leading rack %s: %s", self.rack, why)
        self.leadership = None
        self.lost.set()

    async def _lose_when_deleted(self, key: bytes, revision: int) -> None:
        """The next in line leads once this key is gone, whatever removed it: a leader whose
        key was deleted by hand, its lease alive, must not lead beside it."""
        while not self.lost.is_set():
            try:
                await self._wait_for_delete(key, revision)
                # Deleted, or the watch was cancelled (its revision compacted): look.
                kv, _, _ = self.stubs()
                reply = await kv.Range(rpc.RangeRequest(key=key), timeout=REQUEST_TIMEOUT_S)
            except grpc.aio.AioRpcError:
                # etcd unreachable: the lease's own deadline ends the term if it must; look again after.
                await asyncio.sleep(STREAM_RETRY_S * 10)
                continue
            if not reply.kvs:
                self._lose(f"its key {key.decode(errors='replace')} was deleted")
                return
            revision = reply.header.revision

    def _stop_keepalive(self) -> None:
        for task in (self._keepalive, self._key_guard):
            if task is not None:
                task.cancel()
        self._keepalive = self._key_guard = None

    async def resign(self) -> None:
        """Step down at once (a clean stop): revoking the lease deletes the key, and the next in line leads."""
        lease, self._lease = self._lease, None
        self._stop_keepalive()
        self.leadership = None
        self.lost.set()
        if lease is not None:
            _, lease_stub, _ = self.stubs()
            with contextlib.suppress(grpc.aio.AioRpcError):
                await lease_stub.LeaseRevoke(rpc.LeaseRevokeRequest(ID=lease), timeout=REQUEST_TIMEOUT_S)
