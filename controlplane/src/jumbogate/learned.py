"""Path MTUs each rack learned, published for the fleet to see.

A rack's leader puts the paths its SmartNIC learned under one key of its
rack, bound to its election lease: etcd deletes the key when that lease
runs out (a dead or paused leader) or is revoked (a clean stop), and the
next leader publishes its own view. A standby publishes nothing.

The keys are kept apart from the policy's (`/jumbogate/v1/`, store.PREFIX),
as the election's are: they change with the traffic, so inside the policy's
range every publication would wake every controller's watch, and would
make an import (a whole-store transaction) conflict with any rack that
published since the operator's view. They are never part of a policy.
Paths differ by location: each rack applies only its own (state.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

import grpc
from aetcd import rpc

from .state import MAX_LEARNED_PATHS, MAX_METHOD_CHARS, MAX_PATH_MTU, MIN_PATH_MTU, LearnedPath, PolicyState
from .store import REQUEST_TIMEOUT_S, EtcdStore, StoreUnavailable, range_end

LOG = logging.getLogger("jumbogate.learned")

LEARNED_PREFIX = "/jumbogate/learned/v1/"
# The SmartNIC link polls about once a second; publishing more often would
# only add watch events, never news.
PUBLISH_INTERVAL_S = 1.0


def learned_key(rack: str) -> bytes:
    return f"{LEARNED_PREFIX}{rack}/paths".encode()


@dataclass(frozen=True)
class PublishedPath:
    address: str
    mtu: int
    method: str
    # When the rack's SmartNIC learned it (time.time() of the publishing controller).
    learned_at: float


def encode_paths(paths: list[LearnedPath]) -> bytes:
    """Newest first, at most the MAX_LEARNED_PATHS a controller keeps (the key stays far below etcd's request limit)."""
    ranked = sorted(paths, key=lambda p: p.learned_at, reverse=True)[:MAX_LEARNED_PATHS]
    items = [{"address": str(p.address), "mtu": p.mtu, "method": p.method, "learned_at": round(p.learned_at, 3)} for p in ranked]
    return json.dumps(items, separators=(",", ":")).encode()


def decode_paths(raw: bytes) -> list[PublishedPath]:
    """A rack's published paths; entries that do not read as one are left out (another version may add fields)."""
    try:
        items = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, an integer of too many digits, nested too deep
        return []
    out = []
    for item in items if isinstance(items, list) else []:
        try:
            path = PublishedPath(str(item["address"]), int(item["mtu"]), str(item.get("method", ""))[:MAX_METHOD_CHARS], float(item["learned_at"]))
        except (KeyError, TypeError, ValueError, OverflowError):
            continue
        if MIN_PATH_MTU <= path.mtu <= MAX_PATH_MTU:
            out.append(path)
    return out


def _what_changed(state: PolicyState) -> tuple:
    # What other racks would see differ: a path's MTU or method. The SmartNIC's
    # ages jitter with every poll; those alone are no reason to publish.
    return tuple(sorted((str(a), p.mtu, p.method) for a, p in state.learned_paths.items()))


async def publish_while_leading(store: EtcdStore, rack: str, lease: int, state: PolicyState) -> None:
    """Put this rack's learned paths under its key with the leader's lease at
    the start of the term and whenever they change, at most once a second.
    The election keeps the lease alive, so nothing needs republishing for it."""
    published = None
    while True:
        now = _what_changed(state)
        if now != published:
            value = encode_paths(list(state.learned_paths.values()))
            try:
                # On the store's channel as it is now: it moves to another member when its own has no leader.
                await rpc.KVStub(store.channel).Put(rpc.PutRequest(key=learned_key(rack), value=value, lease=lease), timeout=REQUEST_TIMEOUT_S)
                published = now
            except grpc.aio.AioRpcError as err:
                # Tried again at the next interval; the policy does not depend on it.
                LOG.warning("could not publish rack %s's learned paths: %s", rack, err.details())
        await asyncio.sleep(PUBLISH_INTERVAL_S)


async def read_fleet(store: EtcdStore) -> dict[str, list[PublishedPath]]:
    """Every rack's published paths now: rack -> its paths, newest first."""
    prefix = LEARNED_PREFIX.encode()
    try:
        reply = await rpc.KVStub(store.channel).Range(rpc.RangeRequest(key=prefix, range_end=range_end(prefix)), timeout=REQUEST_TIMEOUT_S)
    except grpc.aio.AioRpcError as err:
        raise StoreUnavailable(f"etcd at {store.url} did not answer ({err.code().name.lower()}: {err.details()})") from None
    out = {}
    for kv in reply.kvs:
        rack, _, part = kv.key[len(prefix) :].decode(errors="replace").partition("/")
        if part == "paths":
            out[rack] = decode_paths(kv.value)
    return out
