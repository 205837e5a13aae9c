"""The SmartNIC's control API against a busy data path: requests the
workers answer late are abandoned to them, and nothing leaks."""

from __future__ import annotations

import threading
import time
from collections import Counter

import grpc
import pytest

from jumbogate.v1 import common_pb2, nic_pb2
from testlab.nic_harness import SinglePort
from testlab.nic_packets import tcp_segments

pytestmark = pytest.mark.timeout(120)

INTERNET = "203.0.113.9"
INSTANCE = "10.10.0.9"


def flow(n: int) -> nic_pb2.NicFlowRequest:
    return nic_pb2.NicFlowRequest(flow=common_pb2.FiveTuple(src_ip=INTERNET, dst_ip=INSTANCE, protocol=6, src_port=20000 + n, dst_port=443))


def buffers_in_use(wiring) -> dict[str, int]:
    return wiring.nic.telemetry("/jumbogate/buffers")


def settle(wiring, before: dict[str, int], timeout: float = 10.0) -> dict[str, int]:
    """Buffers in use once held packets have left (merge deadlines are
    microseconds; the transmit path frees at once on af_packet)."""
    deadline = time.monotonic() + timeout
    now = buffers_in_use(wiring)
    while now != before and time.monotonic() < deadline:
        time.sleep(0.2)
        now = buffers_in_use(wiring)
    return now


def test_abandoned_requests_under_load_leak_nothing(log_dir):
    """With --command-timeout-ms 0 every request stops waiting at once, so
    the workers run commands whose waiter has gone: onloads, offloads,
    ListFlows pages (which own key and answer arrays), engine swaps (which
    own engines) and snapshots, all while merging traffic. Each must be
    freed by the worker that ran it: the buffer pools return to where they
    started, the program keeps running, and its packet accounting closes."""
    wiring = SinglePort(log_dir, ["--internal-prefix", "10.10.0.0/16", "--command-timeout-ms", "0"])
    stop = threading.Event()

    def traffic() -> None:
        seq = 1000
        while not stop.is_set():
            wiring.port.send(tcp_segments(INTERNET, INSTANCE, 41500, 80, count=16, size=1448, seq=seq))
            seq += 16 * 1448
            time.sleep(0.002)

    try:
        stub = wiring.nic.stub()
        before = buffers_in_use(wiring)
        sender = threading.Thread(target=traffic, daemon=True)
        sender.start()
        codes: Counter[str] = Counter()
        calls = [
            lambda n: stub.OnloadFlow(flow(n), timeout=5),
            lambda n: stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=5),
            lambda n: stub.GetStats(nic_pb2.GetNicStatsRequest(), timeout=5),
            lambda n: stub.Configure(nic_pb2.NicConfig(delay=nic_pb2.DelayModel(max_delay_us=50 + n % 2)), timeout=5),
            lambda n: stub.OffloadFlow(flow(n), timeout=5),
        ]
        for n in range(150):
            for call in calls:
                try:
                    call(n)
                    codes["OK"] += 1
                except grpc.RpcError as error:
                    codes[error.code().name] += 1
        stop.set()
        sender.join(timeout=5)
        # RESOURCE_EXHAUSTED: a Configure found no memory for new engines
        # while abandoned swaps still held the old ones.
        assert set(codes) <= {"OK", "UNAVAILABLE", "RESOURCE_EXHAUSTED"}, codes
        assert codes["UNAVAILABLE"] > 100, codes

        after = settle(wiring, before)
        assert after == before, f"buffers in use before {before}, after {after}"
        # The workers destroyed the engines every abandoned swap handed
        # them: there is memory for new ones again.
        for n in range(6):
            try:
                calls[3](n)
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.UNAVAILABLE, error
            time.sleep(0.1)
        assert wiring.nic.proc.poll() is None, wiring.nic.log()
    finally:
        stop.set()
        wiring.close()
    # Statistics come from the workers, whose answers this program does
    # not wait for: read the totals it prints at exit.
    totals = wiring.nic.exit_totals
    assert totals["commands_abandoned"] > 100, totals
    assert totals["merge_packets_in"] > 0, "traffic reached the engine meanwhile"
    assert totals["packets_held"] == 0, totals
    assert totals["packets_in"] + totals["packets_created"] == totals["packets_out"] + totals["packets_absorbed"] + totals["packets_dropped"], totals


def test_list_flows_pages_through_more_flows_than_one_command_carries(log_dir):
    """ListFlows asks the workers in pages of 512 flows, so that no worker
    spends long on one request; every onloaded flow is listed once."""
    wiring = SinglePort(log_dir, ["--internal-prefix", "10.10.0.0/16"])
    try:
        stub = wiring.nic.stub()
        for n in range(1100):
            stub.OnloadFlow(flow(n), timeout=5)
        listed = stub.ListFlows(nic_pb2.ListNicFlowsRequest(), timeout=10).flows
        assert sorted(f.flow.src_port for f in listed) == [20000 + n for n in range(1100)]
    finally:
        wiring.close()
    # Per worker: 1100 onloads and three ListFlows pages.
    assert wiring.nic.exit_totals["commands"] == 1100 + 3, wiring.nic.exit_totals
