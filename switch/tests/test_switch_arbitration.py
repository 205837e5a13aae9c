"""jumbogate-switch's arbitration options for a fleet, and what it records of who wrote.

The real program over real gRPC: --primary-on-leave (promote, the default, or wait, the specification's
behaviour), --fence-election-ids (a deposed leader never becomes primary again), the record of accepted
writes by election id (/jumbogate_switch/writes), the bound on open streams, and the deadline and bound of
streams that have not arbitrated.
"""

from __future__ import annotations

import itertools
import queue
import time

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from switch_harness import Client, OnePortSwitch, p4info

from testlab.lab import telemetry_query
from testlab.nic_harness import wait_for
from testlab.stratum_roles import role_config

OK, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED = 0, 5, 6, 7
INFO = p4info(512)
PORT_ROLES = next(t for t in INFO.tables if t.preamble.alias == "port_roles")
SET_PORT_ROLE = next(a.preamble.id for a in INFO.actions if a.preamble.alias == "set_port_role")
MAX_STREAMS = 128  # p4rt_bounds.h, docs/switch.md "Bounds"
MAX_UNARBITRATED = 64
ARBITRATION_DEADLINE_S = 5


def port_role(port: int, role: int = 1) -> p4r.Update:
    e = p4r.TableEntry(table_id=PORT_ROLES.preamble.id)
    e.match.add(field_id=PORT_ROLES.match_fields[0].id, exact=p4r.FieldMatch.Exact(value=port.to_bytes(2, "big")))
    e.action.action.action_id = SET_PORT_ROLE
    e.action.action.params.add(param_id=1, value=bytes([role]))
    return p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=e))


@pytest.fixture
def started(log_dir):
    """Starts a switch with the given options; stops every one at the end."""
    wirings = []

    def start(*options: str) -> OnePortSwitch:
        wirings.append(OnePortSwitch(log_dir, options))
        return wirings[-1]

    yield start
    for wiring in wirings:
        wiring.close()


@pytest.fixture
def clients():
    opened: list[Client] = []
    yield opened
    for client in opened:
        client.close()


def connect(clients: list[Client], wiring: OnePortSwitch, low: int, high: int = 0) -> Client:
    clients.append(Client(wiring.switch.grpc_address, election_low=low, election_high=high))
    return clients[-1]


def test_by_default_the_highest_backup_is_promoted_when_the_primary_leaves(started, clients):
    wiring = started()
    primary, backup = connect(clients, wiring, 100), connect(clients, wiring, 50)
    assert primary.arbitrate().status.code == OK
    primary.set_pipeline(INFO)
    assert backup.arbitrate().status.code == ALREADY_EXISTS
    primary.close()
    assert backup.next_arbitration().status.code == OK
    assert backup.write([port_role(1)]) == [OK]


def test_with_primary_on_leave_wait_no_one_is_primary_until_a_client_re_arbitrates(started, clients):
    """The specification's behaviour, as an option: the switch refused the option before."""
    wiring = started("--primary-on-leave", "wait")
    primary, backup = connect(clients, wiring, 100), connect(clients, wiring, 50)
    assert primary.arbitrate().status.code == OK
    primary.set_pipeline(INFO)
    assert backup.arbitrate().status.code == ALREADY_EXISTS
    primary.close()
    told = backup.next_arbitration()
    assert told.status.code == NOT_FOUND
    assert backup.write([port_role(1)]) == [PERMISSION_DENIED]
    assert backup.arbitrate().status.code == OK
    assert backup.write([port_role(1)]) == [OK]


def test_primary_on_leave_takes_promote_or_wait_only(log_dir):
    with pytest.raises(RuntimeError) as caught:
        OnePortSwitch(log_dir, ["--primary-on-leave", "sometimes"])
    assert "promote or wait" in str(caught.value)


def test_a_fenced_leader_never_becomes_primary_again(started, clients):
    """With --fence-election-ids, an election id below the highest the device made primary is never primary
    again, even once the stream of the id that deposed it has gone; its writes are PERMISSION_DENIED naming
    both ids. Without the option the deposed leader is promoted back (the first half of the test)."""
    for options, fenced in (((), False), (("--fence-election-ids",), True)):
        wiring = started(*options)
        old = connect(clients, wiring, low=100, high=1)
        assert old.arbitrate().status.code == OK
        old.set_pipeline(INFO)
        new = connect(clients, wiring, low=5, high=2)
        assert new.arbitrate().status.code == OK
        assert old.next_arbitration().status.code == ALREADY_EXISTS
        assert new.write([port_role(1)]) == [OK]
        new.close()
        answer = old.next_arbitration()
        if not fenced:
            assert answer.status.code == OK
            assert old.write([port_role(2)]) == [OK]
            continue
        assert answer.status.code == PERMISSION_DENIED
        assert "1:100" in answer.status.message and "2:5" in answer.status.message
        request = p4r.WriteRequest(device_id=old.device_id, election_id=old.election(), updates=[port_role(2)])
        with pytest.raises(grpc.RpcError) as caught:
            old.stub.Write(request, timeout=10)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "1:100" in caught.value.details() and "2:5" in caught.value.details()
        # A reconnect with another id of the old epoch is not primary either; one at the fence or above is.
        again = connect(clients, wiring, low=150, high=1)
        answer = again.arbitrate()
        assert answer.status.code == PERMISSION_DENIED
        assert "1:150" in answer.status.message and "2:5" in answer.status.message
        back = connect(clients, wiring, low=5, high=2)
        assert back.arbitrate().status.code == OK
        assert back.write([port_role(2)]) == [OK]
        assert again.next_arbitration().status.code == ALREADY_EXISTS
        assert [e.table_entry.match[0].exact.value for e in back.read([p4r.Entity(table_entry=p4r.TableEntry())])] == [b"\x01", b"\x02"]


def test_accepted_writes_are_recorded_by_election_id(started, clients):
    """/jumbogate_switch/writes: per election id the accepted updates and the first and last time; the 64 most
    recent ids, older ones summed. A refused update is not counted, nor a write from a client that is not primary."""
    wiring = started()
    prefix = wiring.switch.file_prefix
    first = connect(clients, wiring, low=7, high=3)
    assert first.arbitrate().status.code == OK
    first.set_pipeline(INFO)
    assert first.write([port_role(1), port_role(1), port_role(2)]) == [OK, 6, OK]
    record = telemetry_query(prefix, "/jumbogate_switch/writes")
    assert record["3_7"]["updates"] == 2 and (record["3_7"]["high"], record["3_7"]["low"]) == (3, 7)
    assert 0 < record["3_7"]["first_unix_ns"] <= record["3_7"]["last_unix_ns"]
    assert first.write([port_role(3)]) == [OK]
    later = telemetry_query(prefix, "/jumbogate_switch/writes")["3_7"]
    assert later["first_unix_ns"] == record["3_7"]["first_unix_ns"] and later["last_unix_ns"] > record["3_7"]["last_unix_ns"]
    assert record["older"] == {"ids": 0, "updates": 0, "last_unix_ns": 0}
    leader = first
    for n in range(1, 66):
        nxt = connect(clients, wiring, low=n, high=4)
        assert nxt.arbitrate().status.code == OK
        assert leader.write([port_role(100 + n)]) == [PERMISSION_DENIED]
        assert nxt.write([port_role(100 + n)]) == [OK]
        leader.close()
        leader = nxt
    record = telemetry_query(prefix, "/jumbogate_switch/writes")
    ids = {k: v for k, v in record.items() if k != "older"}
    assert len(ids) == 64
    assert set(ids) == {f"4_{n}" for n in range(2, 66)}
    assert all(v["updates"] == 1 for v in ids.values())
    # Each id wrote only after the one before it had stopped: what the fleet's fault run checks.
    in_order = sorted(ids.values(), key=lambda v: (v["high"], v["low"]))
    assert all(a["last_unix_ns"] <= b["first_unix_ns"] for a, b in itertools.pairwise(in_order))
    # 3:7's three updates and 4:1's one.
    assert (record["older"]["ids"], record["older"]["updates"]) == (2, 4)


def open_streams(channels: list[grpc.Channel], count: int, feeds: list, calls: list, arbitration=lambda n: None) -> list:
    """Opens `count` streams over `channels` in turn, each sending `arbitration(n)` first when it is not None."""
    opened = []
    for n in range(count):
        feed: queue.Queue = queue.Queue()
        first = arbitration(n)
        if first is not None:
            feed.put(p4r.StreamMessageRequest(arbitration=first))
        call = p4r_grpc.P4RuntimeStub(channels[n % len(channels)]).StreamChannel(iter(feed.get, None))
        feeds.append(feed)
        calls.append(call)
        opened.append(call)
    return opened


def test_open_streams_are_bounded(started):
    """Streams each held a server thread, without bound. Past 128 open streams, every one arbitrated (64 of the
    default role, 64 of a named one), the newest is closed with RESOURCE_EXHAUSTED and counted (streams_open and
    streams_refused in /jumbogate_switch/stats); once one has gone, a new stream is taken."""
    wiring = started()
    channels = [grpc.insecure_channel(wiring.switch.grpc_address) for _ in range(4)]
    calls, feeds = [], []
    try:

        def backup(role: str):
            def arbitration(n: int) -> p4r.MasterArbitrationUpdate:
                update = p4r.MasterArbitrationUpdate(device_id=1)
                update.role.name = role
                if role:
                    update.role.config.CopyFrom(role_config())
                return update

            return arbitration

        for role in ("", "readers"):
            for call in open_streams(channels, MAX_STREAMS // 2, feeds, calls, backup(role)):
                assert next(call).arbitration.status.code == NOT_FOUND  # a backup, no primary
        prefix = wiring.switch.file_prefix
        stats = telemetry_query(prefix, "/jumbogate_switch/stats")
        assert (stats["streams_open"], stats["streams_unarbitrated"]) == (MAX_STREAMS, 0)
        (extra,) = open_streams(channels, 1, feeds, calls)
        with pytest.raises(grpc.RpcError) as caught:
            next(extra)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert telemetry_query(prefix, "/jumbogate_switch/stats")["streams_refused"] >= 1
        calls[0].cancel()
        # Once the server has seen one go, a new stream stays open (an arbitration gets its answer).

        def a_new_stream_is_taken() -> bool:
            client = Client(wiring.switch.grpc_address, election_low=1)
            try:
                return client.arbitrate().status.code == OK
            except grpc.RpcError:
                return False
            finally:
                client.close()

        wait_for(a_new_stream_is_taken, "a stream taken once another closed")
    finally:
        for feed in feeds:
            feed.put(None)
        for call in calls:
            call.cancel()
        for channel in channels:
            channel.close()


def test_streams_that_never_arbitrate_are_closed_and_keep_no_one_out(started):
    """Streams that never arbitrated kept their slots for as long as their client liked: 128 of them kept the
    controller out (RESOURCE_EXHAUSTED, still 60 s later). At most MAX_UNARBITRATED streams wait for their
    arbitration, a new one closing the oldest that waits, and none longer than ARBITRATION_DEADLINE_S: each is
    closed (CANCELLED) and counted (streams_unarbitrated_closed), and the controller gets in at once."""
    wiring = started()
    prefix = wiring.switch.file_prefix
    channels = [grpc.insecure_channel(wiring.switch.grpc_address) for _ in range(4)]
    calls, feeds = [], []
    controller = None
    try:
        idle = open_streams(channels, MAX_STREAMS, feeds, calls)
        opened = time.monotonic()

        def every_one_seen() -> bool:
            stats = telemetry_query(prefix, "/jumbogate_switch/stats")
            return stats["streams_open"] + stats.get("streams_unarbitrated_closed", 0) >= MAX_STREAMS

        wait_for(every_one_seen, "every idle stream seen by the switch")
        controller = Client(wiring.switch.grpc_address, election_low=10)
        assert controller.arbitrate().status.code == OK
        # The oldest idle streams were closed to make room for the newest, and one more for the controller's.
        stats = telemetry_query(prefix, "/jumbogate_switch/stats")
        assert stats["streams_unarbitrated_closed"] == MAX_STREAMS - MAX_UNARBITRATED + 1
        assert (stats["streams_open"], stats["streams_unarbitrated"]) == (MAX_UNARBITRATED, MAX_UNARBITRATED - 1)
        # The rest are closed at their deadline; the controller's stream, arbitrated, stays.
        wait_for(lambda: all(call.done() for call in idle), "every idle stream closed", timeout=ARBITRATION_DEADLINE_S + 5)
        assert time.monotonic() - opened >= ARBITRATION_DEADLINE_S - 0.5
        assert {call.code() for call in idle} == {grpc.StatusCode.CANCELLED}
        stats = telemetry_query(prefix, "/jumbogate_switch/stats")
        assert (stats["streams_open"], stats["streams_unarbitrated"]) == (1, 0)
        assert stats["streams_unarbitrated_closed"] == MAX_STREAMS
        assert controller.arbitrate().status.code == OK
    finally:
        if controller is not None:
            controller.close()
        for feed in feeds:
            feed.put(None)
        for call in calls:
            call.cancel()
        for channel in channels:
            channel.close()
