"""A rack's election on a real etcd: one leader, the next in line after it, ids that only grow."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from jumbogate.election import EPOCH_KEY, FIRST_EPOCH, LEASE_TTL_S, Election
from jumbogate.store import PREFIX, REQUEST_TIMEOUT_S, EtcdStore, StoreUnavailable

pytestmark = [pytest.mark.timeout(60)]
# A bound on waits, never a figure asserted: it only stops a broken test.
BOUND_S = 20


async def candidate(url: str, name: str, rack: str = "rack-a") -> Election:
    store = EtcdStore(url)
    await store.open()
    return Election(store, rack, name)


async def test_the_first_candidate_leads_and_the_next_leads_when_it_resigns(etcd):
    first, second = await candidate(etcd.store_url, "first"), await candidate(etcd.store_url, "second")
    leading = await asyncio.wait_for(first.campaign(), BOUND_S)
    waiting = asyncio.create_task(second.campaign())
    await asyncio.sleep(0)
    assert not waiting.done()
    assert leading.election_id >> 64 == FIRST_EPOCH and leading.election_id & (2**64 - 1) == leading.revision
    await first.resign()
    after = await asyncio.wait_for(waiting, BOUND_S)
    assert after.election_id > leading.election_id
    # Another rack has its own election.
    elsewhere = await candidate(etcd.store_url, "other-rack", rack="rack-b")
    await asyncio.wait_for(elsewhere.campaign(), BOUND_S)
    for each in (second, elsewhere):
        await each.resign()
        await each.store.close()
    await first.store.close()


async def test_a_leader_that_stops_refreshing_its_lease_is_followed_within_the_ttl(etcd):
    """A dead or paused leader's lease runs out in etcd: the next in line leads, and the old one learns it lost."""
    first, second = await candidate(etcd.store_url, "first"), await candidate(etcd.store_url, "second")
    leading = await asyncio.wait_for(first.campaign(), BOUND_S)
    waiting = asyncio.create_task(second.campaign())
    # As if the process stopped: nothing refreshes the lease any more.
    first._stop_keepalive()
    started = asyncio.get_running_loop().time()
    after = await asyncio.wait_for(waiting, BOUND_S)
    print(f"\nthe next candidate led {asyncio.get_running_loop().time() - started:.2f} s after the leader stopped refreshing (lease TTL {LEASE_TTL_S} s)")
    assert after.election_id > leading.election_id
    # The old leader's keys are gone: a new campaign of its own comes after the new leader.
    again = asyncio.create_task(first.campaign())
    await asyncio.sleep(0.2)
    assert not again.done()
    await second.resign()
    assert (await asyncio.wait_for(again, BOUND_S)).election_id > after.election_id
    await first.resign()
    for each in (first, second):
        await each.store.close()


async def test_a_leader_cut_off_from_etcd_steps_down_and_campaigns_again_when_it_returns(etcd):
    leader = await candidate(etcd.store_url, "leader")
    leading = await asyncio.wait_for(leader.campaign(), BOUND_S)
    etcd.stop()
    try:
        # It cannot refresh its lease: it steps down by itself, without waiting for etcd to say so.
        await asyncio.wait_for(leader.lost.wait(), BOUND_S)
        assert leader.leadership is None
    finally:
        etcd.start()

    async def campaign_until_it_leads():
        # As the controller does: a call in the channel's reconnect backoff (at most 1 s) fails at
        # once, even with etcd serving again, so the campaign is tried again (under load it was).
        while True:
            try:
                return await leader.campaign()
            except StoreUnavailable:
                await asyncio.sleep(0.2)

    again = await asyncio.wait_for(campaign_until_it_leads(), BOUND_S)
    assert again.election_id > leading.election_id
    await leader.resign()
    await leader.store.close()


class Relay:
    """A TCP relay to etcd that can cut every connection through it at once, as a middlebox or a
    restarted proxy would, while etcd and the lease stay up; hold etcd's answers back for a while;
    delay every answer; or drop every request from some moment on."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        # Cleared while etcd's answers are held back (a slow path, not a broken one).
        self.flowing = asyncio.Event()
        self.flowing.set()
        # Added to every answer's way back (each answer keeps its own delay: they do not add up).
        self.answer_delay_s = 0.0
        # From when it is set, requests go nowhere (answers already on their way still arrive).
        self.requests_dropped = False
        # (bytes, n, seconds): answers are held back for `seconds` from the n-th request that carries the bytes.
        self.hold_on_request: tuple[bytes, int, float] | None = None
        self.tasks: set[asyncio.Task] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, client_reader, client_writer):
        etcd_reader, etcd_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers += [client_writer, etcd_writer]

        async def requests():
            with contextlib.suppress(OSError):
                while data := await client_reader.read(65536):
                    self._hold_if_marked(data)
                    if not self.requests_dropped:
                        etcd_writer.write(data)
                        await etcd_writer.drain()
            etcd_writer.close()

        async def answers():
            due: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

            async def read():
                with contextlib.suppress(OSError):
                    while data := await etcd_reader.read(65536):
                        due.put_nowait((time.monotonic() + self.answer_delay_s, data))
                due.put_nowait((0.0, b""))

            reading = asyncio.create_task(read())
            with contextlib.suppress(OSError):
                while (item := await due.get())[1]:
                    await asyncio.sleep(max(0.0, item[0] - time.monotonic()))
                    await self.flowing.wait()
                    client_writer.write(item[1])
                    await client_writer.drain()
            reading.cancel()
            client_writer.close()

        await asyncio.gather(requests(), answers())

    def _hold_if_marked(self, request: bytes) -> None:
        if self.hold_on_request is None or self.hold_on_request[0] not in request:
            return
        marker, left, seconds = self.hold_on_request
        self.hold_on_request = (marker, left - 1, seconds) if left > 1 else None
        if left == 1:
            # Held before the request goes on, so that not even its answer gets through.
            self.flowing.clear()
            task = asyncio.create_task(self.hold_answers(seconds))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def hold_answers(self, seconds: float) -> None:
        self.flowing.clear()
        await asyncio.sleep(seconds)
        self.flowing.set()

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.cut()
        self.server.close()


async def test_a_leader_whose_key_is_deleted_by_hand_steps_down_for_the_next_in_line(etcd):
    """Its lease alive, a leader whose key went on leading beside the next in line, who leads once it is gone."""
    leader, successor = await candidate(etcd.store_url, "leader"), await candidate(etcd.store_url, "next")
    leading = await asyncio.wait_for(leader.campaign(), BOUND_S)
    waiting = asyncio.create_task(successor.campaign())
    while len(etcd.ctl("get", "--prefix", "--keys-only", leader.prefix.decode()).stdout.split()) < 2:
        await asyncio.sleep(0.05)  # the successor in line
    etcd.ctl("del", leader.prefix.decode() + f"{leading.lease:x}")
    after = await asyncio.wait_for(waiting, BOUND_S)
    await asyncio.wait_for(leader.lost.wait(), BOUND_S)
    assert leader.leadership is None and after.election_id > leading.election_id
    await successor.resign()
    await leader.resign()
    for each in (leader, successor):
        await each.store.close()


async def test_a_leader_whose_answers_come_late_steps_down_before_etcd_lets_its_lease_go(etcd):
    """etcd starts a lease's TTL when it handles a refresh, which is before its answer arrives. With every
    answer late by 0.6 s and then the leader's requests lost, the leader must have stepped down by the
    time the next in line leads: counted from the answers, it went on leading for about 0.3 to 0.55 s
    beside its successor."""
    relay = Relay(etcd.client_port)
    relay.answer_delay_s = 0.6
    leader = await candidate(f"etcd://127.0.0.1:{await relay.start()}", "slow")
    await asyncio.wait_for(leader.campaign(), BOUND_S)
    successor = await candidate(etcd.store_url, "next")
    waiting = asyncio.create_task(successor.campaign())
    # Late answers are still answers: refreshes keep the lease.
    await asyncio.sleep(2 * LEASE_TTL_S)
    assert not leader.lost.is_set(), "stepped down although every refresh was answered, late"
    relay.requests_dropped = True
    await asyncio.wait_for(waiting, BOUND_S)
    assert leader.lost.is_set() and leader.leadership is None, "still leading after its successor won"
    await successor.resign()
    for each in (leader, successor):
        await each.store.close()
    await relay.close()


async def test_a_candidate_whose_lease_may_lapse_while_it_wins_does_not_lead(etcd):
    """Its winning write sent, every answer held back past the lease's TTL: by the time the write is
    answered, the candidate stepped down on its own deadline (etcd may have let the lease go), so it
    must not lead on that answer, although etcd accepted the write."""
    name = "candidate-held-at-its-win"
    relay = Relay(etcd.client_port)
    first = await candidate(etcd.store_url, "first")
    held = await candidate(f"etcd://127.0.0.1:{await relay.start()}", name)
    await asyncio.wait_for(first.campaign(), BOUND_S)
    # The candidate writes its name twice: joining the line, then winning. The second is held.
    relay.hold_on_request = (name.encode(), 2, LEASE_TTL_S + 0.4)
    waiting = asyncio.create_task(held.campaign())
    while len(etcd.ctl("get", "--prefix", "--keys-only", first.prefix.decode()).stdout.split()) < 2:
        await asyncio.sleep(0.05)  # in line
    await first.resign()
    with pytest.raises(StoreUnavailable, match="lost the election's lease"):
        await asyncio.wait_for(waiting, BOUND_S)
    assert relay.hold_on_request is None, "the winning write was never sent"
    assert held.leadership is None
    for each in (first, held):
        await each.store.close()
    await relay.close()


async def test_a_campaign_whose_call_is_cancelled_under_it_fails_as_the_store_failing(etcd):
    """gRPC cancels the calls of a channel closed under them (a store retiring it), which raises
    CancelledError in the caller. Before: it left campaign() as if the campaign had been stopped, and
    the controller's loop, which campaigns again only after StoreUnavailable, never campaigned again."""
    name = "candidate-whose-channel-closes"
    relay = Relay(etcd.client_port)
    first = await candidate(etcd.store_url, "first")
    held = await candidate(f"etcd://127.0.0.1:{await relay.start()}", name)
    await asyncio.wait_for(first.campaign(), BOUND_S)
    relay.hold_on_request = (name.encode(), 2, BOUND_S)  # its winning write stays unanswered
    waiting = asyncio.create_task(held.campaign())
    while len(etcd.ctl("get", "--prefix", "--keys-only", first.prefix.decode()).stdout.split()) < 2:
        await asyncio.sleep(0.05)  # in line
    await first.resign()
    while relay.hold_on_request is not None:
        await asyncio.sleep(0.05)  # the winning write sent
    await held.store.channel.close()
    with pytest.raises(StoreUnavailable, match="cancelled"):
        await asyncio.wait_for(waiting, BOUND_S)
    assert held.leadership is None and held._keepalive is None
    await first.store.close()
    await relay.close()


async def test_a_leader_and_a_candidate_follow_the_store_to_its_next_endpoint(etcd):
    """A watch whose member has no leader moves the store's channel to the next endpoint and closes the
    old one soon after. The election's refreshes, its guard on its key and a candidate in line must
    carry on over the new channel: on the old one, closed, every call fails and the term would end."""
    twice = f"etcd://127.0.0.1:{etcd.client_port},127.0.0.1:{etcd.client_port}"
    leader, successor = await candidate(twice, "leader"), await candidate(twice, "next")
    leading = await asyncio.wait_for(leader.campaign(), BOUND_S)
    waiting = asyncio.create_task(successor.campaign())
    while len(etcd.ctl("get", "--prefix", "--keys-only", leader.prefix.decode()).stdout.split()) < 2:
        await asyncio.sleep(0.05)  # in line
    assert leader.store.move_on() and successor.store.move_on()
    # The old channels close after a request's deadline; then two lease lifetimes.
    await asyncio.sleep(REQUEST_TIMEOUT_S + 2 * LEASE_TTL_S)
    assert not leader.lost.is_set() and leader.leadership == leading, "the term ended with the channel it began on"
    assert not waiting.done(), "the candidate in line gave up with the channel it joined on"
    await leader.resign()
    after = await asyncio.wait_for(waiting, BOUND_S)
    assert after.election_id > leading.election_id
    await successor.resign()
    for each in (leader, successor):
        await each.store.close()


async def test_a_leader_keeps_its_lease_across_broken_keepalive_streams(etcd):
    """A keepalive stream that breaks is replaced at once, and the next refresh goes out on the new one:
    cut a few times, well within the lease's TTL each time, the leader never steps down."""
    relay = Relay(etcd.client_port)
    leader = await candidate(f"etcd://127.0.0.1:{await relay.start()}", "leader")
    leading = await asyncio.wait_for(leader.campaign(), BOUND_S)
    for _ in range(3):
        relay.cut()
        await asyncio.sleep(2 * LEASE_TTL_S)
        assert not leader.lost.is_set(), "lost the lead after its keepalive stream was cut"
    for _ in range(3):
        # Answers late past the wait for one (the stream is given up and another opened), but
        # well within the TTL: the refreshes that follow must go out and be answered.
        await relay.hold_answers(LEASE_TTL_S / 2)
        await asyncio.sleep(2 * LEASE_TTL_S)
        assert not leader.lost.is_set(), "lost the lead after etcd's answers were held back for half the TTL"
    assert leader.leadership == leading
    await leader.resign()
    await leader.store.close()
    await relay.close()


async def test_the_leaders_id_carries_the_stores_fencing_epoch(etcd):
    """The epoch is read when a leader wins: raised, it puts a leader of a store whose revisions went down
    (rebuilt, restored) above every earlier one; a value that is no epoch is never guessed at."""
    first = await candidate(etcd.store_url, "first")
    leading = await asyncio.wait_for(first.campaign(), BOUND_S)
    await first.resign()
    etcd.ctl("put", PREFIX + EPOCH_KEY, "7")
    again = await asyncio.wait_for(first.campaign(), BOUND_S)
    assert again.epoch == 7 and again.election_id >> 64 == 7 and again.election_id > leading.election_id
    await first.resign()
    etcd.ctl("put", PREFIX + EPOCH_KEY, "seven")
    with pytest.raises(StoreUnavailable, match="not a fencing epoch"):
        await asyncio.wait_for(first.campaign(), BOUND_S)
    assert first.leadership is None
    await first.store.close()
